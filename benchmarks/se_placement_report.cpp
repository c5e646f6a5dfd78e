// Where squeeze-excitation's vector is computed, decided with the model (docs/kernels.md, "Where
// the SE vector is computed"). For every MBConv block of EfficientNet-B0 (all 16 have an SE), on
// each GPU spec and precision, the model's fastest candidate of each group (layerwise, padded or
// memoized, over the bricks, channel blocks, batch blocks and threads of
// experiments/efficientnet_b0.yaml) in two plans:
//
//   A (built): group 1 = the block's first layer .. the depthwise conv's SiLU, which writes D;
//      the SE (pool, fc1, SiLU, fc2, sigmoid) layer by layer; group 2 = the multiply .. the
//      block's last layer, which reads D and the gate s from global memory.
//   B (not built): a recomputing kernel = group 1 that keeps only D's pooled sums: group 1's
//      prediction with its output's DRAM and L2 writes taken out of the roofline terms (the
//      partial sums' atomics are not counted); the same SE layers; group 2' = the whole block
//      but the SE on a graph of its own whose second input is s, so that D is recomputed on
//      chip and never stored.
//
// Model only, no GPU: every figure is a prediction, not a measurement.
//
//   se_placement_report [--gpu A100-40GB,H200] [--precision tf32,bf16] [--batch 8] [--blocks]
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/candidate.h"
#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "core/zoo.h"
#include "model/cost_model.h"

namespace {

using namespace brickdl;

// experiments/efficientnet_b0.yaml's search lists.
constexpr int kBricks[] = {4, 8, 16, 32};
constexpr int kChannelBlocks[] = {0, 16, 32, 64, 128};
constexpr int kBatchBlocks[] = {1, 2, 4, 8};
constexpr int kThreads[] = {256, 512};

struct Best {
  double ms = 0;
  std::string config;
};

// The predicted time of a candidate; `drop_output` takes the group's output writes out of its
// DRAM and L2 terms (plan B's recomputing kernel stores no D).
double time_of(const model::Prediction& p, bool drop_output) {
  if (!drop_output)
    return p.time_ms;
  const double dram = p.dram_bytes > 0 ? (p.dram_bytes - p.dram_write_bytes) / p.dram_bytes : 1;
  const double l2 = p.l2_bytes > 0 ? (p.l2_bytes - p.bytes_output) / p.l2_bytes : 1;
  const double bound = std::max({p.t_dram_ms * dram, p.t_l2_ms * l2, p.t_compute_ms});
  return bound + p.t_atomic_compulsory_ms + p.t_atomic_conflict_ms + p.t_launch_ms + p.t_sync_ms;
}

Best fastest(const model::CostModel& m, const Graph& g, const Group& grp, bool drop_output) {
  Best best;
  best.ms = -1;
  const auto consider = [&](const Candidate& c) {
    const model::Prediction p = m.predict(g, c);
    if (!p.feasible)
      return;
    const double t = time_of(p, drop_output);
    if (best.ms < 0 || t < best.ms)
      best = {t, c.config_str()};
  };
  consider(Candidate{grp, BrickShape{}, Strategy::kLayerwise, 256});
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized})
    for (int e : kBricks)
      for (int cb : kChannelBlocks)
        for (int nb : kBatchBlocks)
          for (int t : kThreads)
            consider(Candidate{grp, BrickShape{1, e, e, cb, nb, 1}, s, t});
  return best;
}

// One MBConv block of the zoo graph: its layers and the SE's.
struct Block {
  std::string name; // features.S.B
  Group group1, se, group2;
};

std::vector<Block> mbconv_blocks(const Graph& g) {
  std::vector<Block> out;
  for (const Layer& l : g.layers()) {
    const std::string suffix = ".block.";
    const size_t at = l.name.find(suffix);
    if (l.op != OpKind::kGlobalAvgPool || at == std::string::npos)
      continue;
    Block b;
    b.name = l.name.substr(0, at);
    int first = l.id;
    while (first > 1 && g.layer(first - 1).name.rfind(b.name + ".", 0) == 0)
      --first;
    const int mul = g.find(l.name.substr(0, l.name.rfind('.')) + ".mul");
    int last = mul;
    while (last + 1 < g.size() && g.layer(last + 1).name.rfind(b.name + ".", 0) == 0)
      ++last;
    b.group1 = {first, l.id - 1};
    b.se = {l.id, mul - 1};
    b.group2 = {mul, last};
    out.push_back(b);
  }
  return out;
}

// Plan B's merged group: the block but its SE, with the gate s as a second graph input. The
// layers are the zoo block's fused layers, copied (the expand and depthwise convs with their
// folded batch-norms and SiLU epilogues, the multiply, the projection, the residual add), so
// the model sees the same work.
Graph block_with_gate_input(const Graph& g, const Block& b, DType dtype) {
  const int block_input = g.layer(b.group1.first).inputs[0];
  const int gate = g.layer(b.group2.first).inputs[1];
  GraphBuilder gb("mbconv_b", g.layer(block_input).out, dtype);
  std::map<int, int> id{{block_input, gb.input()}};
  id[gate] = gb.add_input(g.layer(gate).out, "s");
  for (const Group& part : {b.group1, b.group2})
    for (int k = part.first; k <= part.last; ++k) {
      Layer l = g.layer(k);
      for (int& in : l.inputs)
        in = id.at(in);
      id[k] = gb.add_layer(l);
    }
  return gb.build();
}

// The placement the model predicts faster for one block: B only when strictly faster, as A
// is the one built (docs/kernels.md). tests/model/se_placement_test.cpp checks it against its
// own predictions.
const char* faster(double a_ms, double b_ms) {
  return b_ms < a_ms ? "B" : "A";
}

struct Totals {
  double a = 0, b = 0, layerwise = 0;
};

Totals report(const std::string& gpu, DType dtype, int batch, bool per_block) {
  ZooOptions zo;
  zo.batch = batch;
  zo.dtype = dtype;
  const Graph g = fuse_for_inference(build_zoo_model("efficientnet_b0", zo));
  const model::CostModel m(*find_gpu_spec(gpu));
  Totals t;
  for (const Block& b : mbconv_blocks(g)) {
    const Best g1 = fastest(m, g, b.group1, false);
    const Best se = fastest(m, g, b.se, false);
    const Best g2 = fastest(m, g, b.group2, false);
    const Best b1 = fastest(m, g, b.group1, true);
    const Graph gb = block_with_gate_input(g, b, dtype);
    const Best b2 = fastest(m, gb, Group{gb.num_inputs(), gb.size() - 1}, false);
    const Candidate lwc{Group{b.group1.first, b.group2.last}, BrickShape{}, Strategy::kLayerwise};
    const double lw = m.predict(g, lwc).time_ms;
    const double a = g1.ms + se.ms + g2.ms, bb = b1.ms + se.ms + b2.ms;
    t.a += a, t.b += bb, t.layerwise += lw;
    if (per_block)
      fmt::print("| {} | {} | {:.2f} | {:.2f} ({}) | {:.2f} | {:.2f} ({}) | {:.2f} | {:.2f} ({}) | "
                 "{:.2f} | {:.3f} | {} |\n",
                 gpu, dtype_name(dtype), lw * 1e3, g1.ms * 1e3, g1.config, se.ms * 1e3, g2.ms * 1e3,
                 g2.config, b1.ms * 1e3, b2.ms * 1e3, b2.config, a * 1e3, bb / a, faster(a, bb));
    else
      fmt::print("| {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.3f} | {} |\n", gpu,
                 dtype_name(dtype), b.name, lw * 1e3, a * 1e3, bb * 1e3, bb / a, faster(a, bb));
  }
  return t;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"The model's two placements of EfficientNet-B0's squeeze-excitation vector"};
  std::vector<std::string> gpus = {"A100-40GB", "H200"};
  std::vector<std::string> precisions = {"tf32", "bf16"};
  int batch = 8;
  bool blocks = false;
  app.add_option("--gpu", gpus, "GPU specs")->delimiter(',');
  app.add_option("--precision", precisions, "precisions")
      ->delimiter(',')
      ->check(CLI::IsMember(dtype_names()));
  app.add_option("--batch", batch, "batch")->check(CLI::Range(1, 4096));
  app.add_flag("--blocks", blocks, "per block: each group's time and fastest candidate");
  CLI11_PARSE(app, argc, argv);
  for (const std::string& gpu : gpus)
    if (find_gpu_spec(gpu) == nullptr) {
      fmt::print(stderr, "se_placement_report: unknown GPU '{}'\n", gpu);
      return 2;
    }
  // The provenance line of results/model/se_placement.md, so that `se_placement_report >
  // results/model/se_placement.md` rewrites the committed file exactly (se_placement_test).
  std::string args;
  for (int i = 1; i < argc; ++i)
    args += fmt::format(" {}", argv[i]);
  fmt::print("<!-- written by: build/benchmarks/se_placement_report{} (model only; "
             "docs/kernels.md) -->\n",
             args);
  fmt::print("EfficientNet-B0, batch {}, model {} (predictions, not measured); microseconds\n\n",
             batch, model::CostModel::version());
  if (blocks)
    fmt::print("| gpu | precision | block layerwise | A: group 1 | SE layerwise | A: group 2 | "
               "B: kernel without D | B: merged block | A | B / A | faster |\n"
               "| --- | --- | ---: | --- | ---: | --- | ---: | --- | ---: | ---: | --- |\n");
  else
    fmt::print("| gpu | precision | block | layerwise | A (pool ends a group) | B (recompute) | "
               "B / A | faster |\n| --- | --- | --- | ---: | ---: | ---: | ---: | --- |\n");
  std::vector<std::string> sums;
  for (const std::string& gpu : gpus)
    for (const std::string& p : precisions) {
      DType d = DType::kF32;
      parse_dtype(p, &d);
      const Totals t = report(gpu, d, batch, blocks);
      sums.push_back(fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.3f} | {:.3f} |", gpu, p,
                                 t.layerwise * 1e3, t.a * 1e3, t.b * 1e3, t.layerwise / t.a,
                                 t.b / t.a));
    }
  fmt::print("\nAll 16 blocks:\n\n| gpu | precision | layerwise | A | B | layerwise / A | B / A "
             "|\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const std::string& s : sums)
    fmt::print("{}\n", s);
  return 0;
}
