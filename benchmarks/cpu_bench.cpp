// Wall time of the CPU merged executor (kernels/): a 6-layer 3-D conv chain (3x3x3 conv + relu,
// 3 channels, 48^3, batch 1), the shape of the paper's microbenchmark 1 at a CPU-sized extent,
// run as one group per strategy and brick size. Not run by the test suite:
//
//   build/benchmarks/cpu_bench [--benchmark_filter=...]   (BRICKDL_BENCH_THREADS = workers)
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "core/zoo.h"
#include "kernels/merged_executor.h"
#include "kernels/weights.h"

namespace {

using namespace brickdl;
using namespace brickdl::kernels;

struct Chain {
  Graph graph;
  Tensor input;
  ModelWeights weights;
  Chain() {
    ConvChainOptions o;
    o.depth = 6;
    o.channels = 3;
    o.image = 48;
    o.dims = 3;
    graph = fuse_for_inference(build_conv_chain(o));
    input = random_tensor(graph.input_shape(), 1, 0);
    weights = make_weights(graph, 1);
  }
};

const Chain& chain() {
  static const Chain c;
  return c;
}

int threads() {
  const char* t = std::getenv("BRICKDL_BENCH_THREADS");
  return t ? std::atoi(t) : 0;
}

void run(benchmark::State& state, Strategy s) {
  const Chain& c = chain();
  Candidate cand;
  cand.group = Group{1, c.graph.size() - 1};
  cand.strategy = s;
  const int e = static_cast<int>(state.range(0));
  cand.brick = BrickShape{e, e, e, 0};
  const std::vector<const Tensor*> in = {&c.input};
  ExecCounters counters;
  for (auto _ : state) {
    GroupResult r = execute_group(c.graph, cand, in, c.weights, ExecOptions{threads()});
    benchmark::DoNotOptimize(r.output.data());
    counters = r.counters;
  }
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(counters.flops) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flops_vs_useful"] =
      static_cast<double>(counters.flops) / static_cast<double>(counters.useful_flops);
  state.counters["conflicts"] = static_cast<double>(counters.memo_conflicts);
}

void BM_Layerwise(benchmark::State& state) {
  run(state, Strategy::kLayerwise);
}
void BM_Padded(benchmark::State& state) {
  run(state, Strategy::kPadded);
}
void BM_Memoized(benchmark::State& state) {
  run(state, Strategy::kMemoized);
}

BENCHMARK(BM_Layerwise)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Padded)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Memoized)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

} // namespace

BENCHMARK_MAIN();
