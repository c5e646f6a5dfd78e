// Speed of the analytic model (Google Benchmark, one thread).
//
//   BM_Predict3Layer/<strategy>/<brick>: one 3-layer group predicted over and over —
//     resnet50_block: layer1.0 (conv1x1 64, conv3x3 64, conv1x1 256) of ResNet-50, batch 8;
//     micro_bricksize: the paper's 3-layer 3-D chain on 224³.
//     items_per_second = candidates per second.
//   BM_ResNet50Space: every valid group of up to 8 layers of the fused ResNet-50 (batch 8),
//     × bricks {4, 8, 16, 32} × {padded, memoized}, plus layerwise once per group; one
//     iteration scores the whole space (its time is the time to score the space).
#include <benchmark/benchmark.h>

#include "core/gpu_spec.h"
#include "core/zoo.h"
#include "model/cost_model.h"

namespace {

using namespace brickdl;

const Graph& resnet50() {
  static const Graph g = [] {
    ZooOptions o;
    o.batch = 8;
    return fuse_for_inference(build_zoo_model("resnet50", o));
  }();
  return g;
}

const Graph& micro_bricksize() {
  static const Graph g = fuse_for_inference(build_zoo_model("micro_bricksize", ZooOptions{}));
  return g;
}

bool valid_group(const Graph& g, int first, int last) {
  for (int id = first; id < last; ++id)
    for (int c : g.consumers(id))
      if (c > last)
        return false;
  return true;
}

// The first valid 3-layer group starting at a layer named `first_name`.
Group group_at(const Graph& g, const std::string& first_name) {
  const int first = g.find(first_name);
  if (first < 1 || !valid_group(g, first, first + 2))
    throw std::runtime_error("no 3-layer group at '" + first_name + "' in " + g.name());
  return {first, first + 2};
}

void predict_loop(benchmark::State& state, const Graph& g, const Group& grp) {
  const model::CostModel m(*find_gpu_spec("A100-40GB"));
  Candidate c;
  c.group = grp;
  c.strategy = static_cast<Strategy>(state.range(0));
  const int e = static_cast<int>(state.range(1));
  c.brick = {g.input_shape().spatial_rank == 3 ? e : 1, e, e, 0};
  for (auto _ : state) {
    model::Prediction p = m.predict(g, c);
    benchmark::DoNotOptimize(p.time_ms);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(strategy_name(c.strategy)) + " " + c.brick.str());
}

void BM_Predict3Layer_resnet50_block(benchmark::State& state) {
  predict_loop(state, resnet50(), group_at(resnet50(), "layer1.0.conv1"));
}

void BM_Predict3Layer_micro_bricksize(benchmark::State& state) {
  const Graph& g = micro_bricksize();
  predict_loop(state, g, {1, g.size() - 1});
}

void strategies_and_bricks(benchmark::internal::Benchmark* b) {
  for (int s : {static_cast<int>(Strategy::kPadded), static_cast<int>(Strategy::kMemoized),
                static_cast<int>(Strategy::kLayerwise)})
    for (int e : {4, 8, 16, 32})
      b->Args({s, e});
}

BENCHMARK(BM_Predict3Layer_resnet50_block)->Apply(strategies_and_bricks);
BENCHMARK(BM_Predict3Layer_micro_bricksize)->Apply(strategies_and_bricks);

void BM_ResNet50Space(benchmark::State& state) {
  const Graph& g = resnet50();
  const model::CostModel m(*find_gpu_spec("A100-40GB"));
  std::vector<Candidate> space;
  for (int first = 1; first < g.size(); ++first)
    for (int last = first; last < g.size() && last < first + 8; ++last) {
      if (!valid_group(g, first, last))
        continue;
      Candidate c;
      c.group = {first, last};
      c.strategy = Strategy::kLayerwise;
      space.push_back(c);
      for (Strategy s : {Strategy::kPadded, Strategy::kMemoized})
        for (int e : {4, 8, 16, 32}) {
          c.strategy = s;
          c.brick = {1, e, e, 0};
          space.push_back(c);
        }
    }
  int64_t feasible = 0;
  for (auto _ : state) {
    feasible = 0;
    for (const Candidate& c : space) {
      const model::Prediction p = m.predict(g, c);
      feasible += p.feasible ? 1 : 0;
      benchmark::DoNotOptimize(p.time_ms);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(space.size()));
  state.counters["candidates"] = static_cast<double>(space.size());
  state.counters["feasible"] = static_cast<double>(feasible);
  state.counters["layers"] = g.size() - 1;
}

BENCHMARK(BM_ResNet50Space)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
