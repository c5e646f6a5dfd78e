// Benchmark (b) of the CPU target: merged groups against oneDNN layerwise, in one process.
//
// Groups: the seven ResNet-50 subgraphs of the paper's Fig 8 (experiments/
// fig8_resnet50_subgraphs.yaml, batch 8 as there, and batch 1), the inverted-residual blocks of
// MobileNetV2 and the MBConv blocks of EfficientNet-B0 (batch 1; an MBConv block's squeeze-
// excitation pool splits it into the brickable part before it and the part after it), and the
// 3-D conv chains of the paper's Figs 10 / 11 (3 channels, at a stated CPU-sized extent).
// Engines per group:
//   onednn     oneDNN layerwise with its post-op fusions (bias, activation, residual add)
//   onednn_dw  the same with its 1x1 + depthwise fusion (groups that have such a pair)
//   padded/..., memoized/...   merged candidates on the brick kernels (brick h x w, or d x h x w)
// Every candidate's output is checked against onednn's before it is timed.
//
//   build/benchmarks/cpu_groups_bench --benchmark_repetitions=5 \
//       --benchmark_enable_random_interleaving=true --benchmark_format=json > groups.json
//   scripts/cpu-groups-report.py groups.json
//
// BRICKDL_BENCH_THREADS sets the threads (default: every usable CPU); BRICKDL_BENCH_SETS a
// comma-separated subset of fig8, mobilenet_v2, efficientnet_b0, chains.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "benchmarks/cpu_bench_threads.h"
#include "core/group.h"
#include "core/zoo.h"
#include "kernels/cpu/blocked.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu_measurer.h"
#include "kernels/merged_executor.h"
#include "kernels/weights.h"

namespace {

using namespace brickdl;
using namespace brickdl::kernels;

int threads() {
  return bench::cpu_bench_threads();
}

bool wanted(const std::string& set) {
  const char* e = std::getenv("BRICKDL_BENCH_SETS");
  if (!e)
    return true;
  std::stringstream ss(e);
  for (std::string s; std::getline(ss, s, ',');)
    if (s == set)
      return true;
  return false;
}

// One group of one graph, prepared once: inputs, packed weights, oneDNN's two preparations and
// the reference output (oneDNN's) every candidate is checked against.
struct GroupCase {
  std::string label;
  std::shared_ptr<const Graph> graph;
  Group group;
  ModelWeights weights;
  std::unique_ptr<cpu::PackedModel> packed;
  std::unique_ptr<cpu::OnednnGroup> onednn, onednn_dw;
  std::vector<cpu::BlockedTensor> inputs;
  std::vector<const cpu::BlockedTensor*> ptrs;
  cpu::BlockedTensor expected;
  int64_t flops = 0;
};

std::vector<std::unique_ptr<GroupCase>>& cases() {
  static std::vector<std::unique_ptr<GroupCase>> c;
  return c;
}

double normwise_error(const cpu::BlockedTensor& a, const cpu::BlockedTensor& b) {
  const Tensor x = cpu::from_blocked(a), y = cpu::from_blocked(b);
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(x.data()[i] - y.data()[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(y.data()[i])));
  }
  return std::isfinite(diff) ? diff / std::max(scale, 1e-30) : INFINITY;
}

// engine: "onednn", "onednn_dw", or a merged candidate.
void BM_Group(benchmark::State& state, const GroupCase* c, std::string engine, Candidate cand) {
  const int t = threads();
  const cpu::ScopedPinning pin(t);
  ExecOptions o{t};
  const auto run = [&]() -> cpu::BlockedTensor {
    if (engine == "onednn")
      return c->onednn->run(c->ptrs, t).output;
    if (engine == "onednn_dw")
      return c->onednn_dw->run(c->ptrs, t).output;
    return execute_group(*c->graph, cand, c->ptrs, *c->packed, o).output;
  };
  const double err = normwise_error(run(), c->expected);
  if (!(err <= 1e-4)) {
    state.SkipWithError(("wrong output: normwise error " + std::to_string(err)).c_str());
    return;
  }
  for (auto _ : state) {
    cpu::BlockedTensor out = run();
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(c->flops) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = t;
}

bool has_pointwise_depthwise(const Graph& g, const Group& grp) {
  for (int id = grp.first; id < grp.last; ++id) {
    const Layer& a = g.layer(id);
    const Layer& b = g.layer(id + 1);
    if (a.op == OpKind::kConv && a.window.kernel[2] == 1 && b.op == OpKind::kConv && b.groups > 1 &&
        b.groups == b.out_channels)
      return true;
  }
  return false;
}

// Merged candidates for the CPU: bricks of whole rows and squares, sized for one core's L2.
std::vector<Candidate> candidates(const Graph& g, const Group& grp) {
  const TensorShape& out = g.layer(grp.last).out;
  std::vector<BrickShape> bricks;
  if (out.spatial_rank == 3) {
    for (int e : {4, 8, 16, 32})
      bricks.push_back({e, e, e, 0, 1, 1});
  } else {
    const int w = static_cast<int>(out.w);
    for (int h : {2, 4, 8, 14, 16})
      bricks.push_back({1, h, w, 0, 1, 1});
    for (int e : {7, 8, 14, 16, 28})
      bricks.push_back({1, e, e, 0, 1, 1});
  }
  std::vector<Candidate> out_c;
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized})
    for (const BrickShape& b : bricks) {
      if (b.h > out.h || (out.spatial_rank == 2 && b.w > out.w && b.w != out.w))
        continue;
      Candidate c;
      c.group = grp;
      c.strategy = s;
      c.brick = b;
      if (unsupported_reason(g, c).empty())
        out_c.push_back(c);
    }
  return out_c;
}

void add_group(const std::string& label, std::shared_ptr<const Graph> g, const Group& grp,
               const ModelWeights& weights) {
  auto c = std::make_unique<GroupCase>();
  c->label = label;
  c->graph = g;
  c->group = grp;
  c->weights = weights;
  c->packed = std::make_unique<cpu::PackedModel>(*g, c->weights, cpu::lanes());
  c->packed->pack(grp.first, grp.last);
  c->onednn =
      std::make_unique<cpu::OnednnGroup>(*g, grp, *c->packed, cpu::OnednnOptions{true, false});
  const bool dw = has_pointwise_depthwise(*g, grp);
  if (dw)
    c->onednn_dw =
        std::make_unique<cpu::OnednnGroup>(*g, grp, *c->packed, cpu::OnednnOptions{true, true});
  for (int id : group_external_inputs(*g, grp))
    c->inputs.push_back(cpu::to_blocked(random_tensor(g->layer(id).out, 1, id), cpu::lanes()));
  for (const cpu::BlockedTensor& t : c->inputs)
    c->ptrs.push_back(&t);
  c->expected = c->onednn->run(c->ptrs, threads()).output;
  for (int id = grp.first; id <= grp.last; ++id)
    c->flops += 2 * g->layer(id).macs;
  const auto reg = [&](const std::string& engine, const Candidate& cand) {
    benchmark::RegisterBenchmark((label + "/" + engine).c_str(), BM_Group, c.get(), engine, cand)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.2);
  };
  reg("onednn", {});
  if (dw)
    reg("onednn_dw", {});
  for (const Candidate& cand : candidates(*g, grp))
    reg(std::string(strategy_name(cand.strategy)) + "/" + cand.brick.str(), cand);
  cases().push_back(std::move(c));
}

std::shared_ptr<const Graph> zoo_graph(const std::string& name, int batch,
                                       std::vector<int64_t> size = {}) {
  ZooOptions zo;
  zo.batch = batch;
  zo.input_size = std::move(size);
  return std::make_shared<const Graph>(fuse_for_inference(build_zoo_model(name, zo)));
}

void fig8(int batch) {
  const auto g = zoo_graph("resnet50", batch);
  const ModelWeights w = make_weights(*g, 1);
  const std::vector<std::pair<std::string, std::string>> sub = {
      {"layer1.0.conv1", "layer1.0.conv3"}, {"layer1.1.conv1", "layer1.1.conv3"},
      {"layer2.0.conv1", "layer2.0.conv3"}, {"layer2.1.conv1", "layer2.1.conv3"},
      {"layer3.0.conv1", "layer3.0.conv3"}, {"layer3.1.conv1", "layer3.1.conv3"},
      {"layer4.0.conv1", "layer4.0.conv3"}};
  for (size_t k = 0; k < sub.size(); ++k)
    add_group("fig8/b" + std::to_string(batch) + "/subgraph " + std::to_string(k + 1), g,
              Group{g->find(sub[k].first), g->find(sub[k].second)}, w);
}

// The brickable runs of layers of each block ("<prefix>.<n>." names), split where a layer
// cannot be bricked or works on 1x1 tensors (a squeeze-excitation branch).
void blocks(const std::string& model, const std::string& prefix, int depth) {
  const auto g = zoo_graph(model, 1);
  const ModelWeights w = make_weights(*g, 1);
  const auto block_of = [&](const Layer& l) {
    if (l.name.rfind(prefix, 0) != 0)
      return std::string();
    std::string s = l.name.substr(prefix.size());
    size_t pos = 0;
    for (int d = 0; d < depth && pos != std::string::npos; ++d)
      pos = s.find('.', pos + (d > 0));
    return pos == std::string::npos ? std::string() : s.substr(0, pos);
  };
  for (int id = 1; id < g->size();) {
    const std::string b = block_of(g->layer(id));
    int last = id;
    while (last + 1 < g->size() && !b.empty() && block_of(g->layer(last + 1)) == b)
      ++last;
    for (int s = id; s <= last;) {
      int e = s;
      const auto ok = [&](int i) {
        return is_brickable(g->layer(i)) && g->layer(i).out.h * g->layer(i).out.w > 1;
      };
      if (!ok(s)) {
        ++s;
        continue;
      }
      while (e + 1 <= last && ok(e + 1) && is_valid_group(*g, Group{s, e + 1}) &&
             brick_blocker(*g, Group{s, e + 1}).empty())
        ++e;
      if (e > s && !b.empty())
        add_group(model + "/b1/" + prefix + b + " [" + g->layer(s).name + " .. " +
                      g->layer(e).name + "]",
                  g, Group{s, e}, w);
      s = e + 1;
    }
    id = last + 1;
  }
}

void chains() {
  // Fig 10: six 3x3x3 convs of 3 channels (the paper's 112^3, here 64^3), merged as 2+2+2,
  // 3+3, 4+2 and 6; Fig 11: three of them (the paper's 224^3, here 96^3).
  ConvChainOptions o;
  o.depth = 6;
  o.image = 64;
  auto g6 = std::make_shared<const Graph>(fuse_for_inference(build_conv_chain(o)));
  const ModelWeights w6 = make_weights(*g6, 1);
  for (auto [a, b] : std::vector<std::pair<int, int>>{{1, 2}, {1, 3}, {1, 4}, {1, 6}})
    add_group("fig10/64^3/convs " + std::to_string(a) + ".." + std::to_string(b), g6, Group{a, b},
              w6);
  o.depth = 3;
  o.image = 96;
  auto g3 = std::make_shared<const Graph>(fuse_for_inference(build_conv_chain(o)));
  add_group("fig11/96^3/convs 1..3", g3, Group{1, 3}, make_weights(*g3, 1));
}

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (wanted("fig8")) {
    fig8(1);
    fig8(8);
  }
  if (wanted("mobilenet_v2"))
    blocks("mobilenet_v2", "features.", 1);
  if (wanted("efficientnet_b0"))
    blocks("efficientnet_b0", "features.", 2);
  if (wanted("chains"))
    chains();
  benchmark::AddCustomContext("isa", cpu::isa().name);
  benchmark::AddCustomContext("lanes", std::to_string(cpu::lanes()));
  benchmark::AddCustomContext("onednn", cpu::onednn_version());
  benchmark::AddCustomContext("cpu_model", cpu_model_name());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
