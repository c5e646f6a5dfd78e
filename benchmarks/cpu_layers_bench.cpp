// Benchmark (a) of the CPU target: every distinct conv layer of ResNet-50, MobileNetV2 and
// EfficientNet-B0 (batch 1 and 8; distinct by workload signature: shape, attributes, epilogue),
// through oneDNN (the honest baseline: its conv with bias and activation post-ops, on the
// blocked layout of this ISA) and through the brick kernels' layerwise path
// (kernels/cpu/region_ops.h run_whole_layer), both on the same inputs and threads; and the
// machine's FMA peak (a register-resident FMA loop per thread), which GFLOP/s are a fraction of.
//
//   build/benchmarks/cpu_layers_bench --benchmark_repetitions=5 \
//       --benchmark_enable_random_interleaving=true --benchmark_format=json > layers.json
//   scripts/cpu-layers-report.py layers.json          (ratios per layer, medians, the table)
//
// BRICKDL_BENCH_THREADS sets the threads (default: every usable CPU); BRICKDL_BENCH_MODELS a
// comma-separated subset of the models.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <set>
#include <sstream>

#include "benchmarks/cpu_bench_threads.h"
#include "core/group.h"
#include "core/zoo.h"
#include "kernels/cpu/blocked.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/region_ops.h"
#include "kernels/cpu_measurer.h"
#include "kernels/merged_executor.h"
#include "kernels/weights.h"

#ifdef BRICKDL_OPENMP
#include <omp.h>
#endif

namespace {

using namespace brickdl;
using namespace brickdl::kernels;

int threads() {
  return bench::cpu_bench_threads();
}

// One conv layer alone: its graph, weights, packed parameters, input and oneDNN's primitive.
struct LayerCase {
  Graph graph;
  int id = 0;
  ModelWeights weights;
  std::unique_ptr<cpu::PackedModel> packed;
  std::unique_ptr<cpu::OnednnGroup> onednn;
  cpu::BlockedTensor input;
  int64_t flops = 0;
};

std::vector<std::unique_ptr<LayerCase>>& cases() {
  static std::vector<std::unique_ptr<LayerCase>> c;
  return c;
}

// FMA loops: independent accumulators per thread (more than FMA latency x FMA pipes), on
// AVX2 vectors and, where the host has them, AVX-512 ones (the JIT'd GEMMs use those).
float fma_loop_avx2(int64_t iters) {
  __m256 a[12];
  for (int k = 0; k < 12; ++k)
    a[k] = _mm256_set1_ps(static_cast<float>(k));
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k)
      a[k] = _mm256_fmadd_ps(a[k], x, y);
  float s = 0;
  for (int k = 0; k < 12; ++k)
    s += _mm256_cvtss_f32(a[k]);
  return s;
}

__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  __m512 a[24];
  for (int k = 0; k < 24; ++k)
    a[k] = _mm512_set1_ps(static_cast<float>(k));
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.001f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 24
    for (int k = 0; k < 24; ++k)
      a[k] = _mm512_fmadd_ps(a[k], x, y);
  float s = 0;
  for (int k = 0; k < 24; ++k)
    s += _mm512_reduce_add_ps(a[k]);
  return s;
}

// FMA peak of all threads: `wide` the AVX-512 loop (16 lanes x 24 accumulators), else AVX2
// (8 x 12).
void BM_FmaPeak(benchmark::State& state, bool wide) {
  const int t = threads();
  const int64_t iters = 1 << 21;
  for (auto _ : state) {
    float sink = 0;
#pragma omp parallel num_threads(t) reduction(+ : sink)
    sink += wide ? fma_loop_avx512(iters) : fma_loop_avx2(iters);
    benchmark::DoNotOptimize(sink);
  }
  const double flops = wide ? 2.0 * 16 * 24 * iters : 2.0 * 8 * 12 * iters;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * t * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = t;
}

// max |a - b| / max |b| of two blocked outputs.
double normwise_error(const cpu::BlockedTensor& a, const cpu::BlockedTensor& b) {
  const Tensor x = cpu::from_blocked(a), y = cpu::from_blocked(b);
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(x.data()[i] - y.data()[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(y.data()[i])));
  }
  return std::isfinite(diff) ? diff / std::max(scale, 1e-30) : INFINITY;
}

void BM_Layer(benchmark::State& state, const LayerCase* c, bool onednn) {
  const int t = threads();
  const cpu::ScopedPinning pin(t);
  const std::vector<const cpu::BlockedTensor*> in{&c->input};
  // Validated before it is timed: the two engines agree (each is checked against the
  // reference ops by tests/kernels/cpu_kernels_test.cpp).
  const double err = normwise_error(cpu::run_whole_layer(c->graph, c->packed->at(c->id), in, t),
                                    c->onednn->run(in, t).output);
  if (!(err <= 1e-4)) {
    state.SkipWithError(("the engines disagree: normwise error " + std::to_string(err)).c_str());
    return;
  }
  for (auto _ : state) {
    cpu::BlockedTensor out = onednn ? c->onednn->run(in, t).output
                                    : cpu::run_whole_layer(c->graph, c->packed->at(c->id), in, t);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(c->flops) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = t;
  state.counters["lanes"] = c->packed->lanes();
}

std::vector<std::string> models() {
  std::vector<std::string> m{"resnet50", "mobilenet_v2", "efficientnet_b0"};
  if (const char* e = std::getenv("BRICKDL_BENCH_MODELS")) {
    m.clear();
    std::stringstream ss(e);
    for (std::string s; std::getline(ss, s, ',');)
      m.push_back(s);
  }
  return m;
}

void register_layers() {
  std::set<std::string> seen;
  for (int batch : {1, 8})
    for (const std::string& name : models()) {
      ZooOptions zo;
      zo.batch = batch;
      const Graph g = fuse_for_inference(build_zoo_model(name, zo));
      for (const Layer& l : g.layers()) {
        if (l.op != OpKind::kConv)
          continue;
        const std::string sig = workload_signature(g, Group{l.id, l.id});
        if (!seen.insert(sig).second)
          continue;
        auto c = std::make_unique<LayerCase>();
        c->graph = g;
        c->id = l.id;
        c->weights = ModelWeights(std::vector<LayerWeights>(static_cast<size_t>(g.size())));
        c->weights.at(l.id) = make_layer_weights(g, l.id, 1);
        c->packed = std::make_unique<cpu::PackedModel>(c->graph, c->weights, cpu::lanes());
        c->onednn = std::make_unique<cpu::OnednnGroup>(c->graph, Group{l.id, l.id}, *c->packed,
                                                       cpu::OnednnOptions{true, false});
        c->input = cpu::to_blocked(random_tensor(g.layer(l.inputs[0]).out, 1, 0), cpu::lanes());
        c->flops = 2 * l.macs;
        const std::string label = name + "/b" + std::to_string(batch) + "/" + l.name + "/" +
                                  workload_description(g, Group{l.id, l.id});
        for (bool dnn : {true, false})
          benchmark::RegisterBenchmark((label + (dnn ? "/onednn" : "/bricks")).c_str(), BM_Layer,
                                       c.get(), dnn)
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime()
              ->MinTime(0.2);
        cases().push_back(std::move(c));
      }
    }
}

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RegisterBenchmark("peak/fma_avx2", BM_FmaPeak, false)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  if (cpu::host_supports_lanes(16))
    benchmark::RegisterBenchmark("peak/fma_avx512", BM_FmaPeak, true)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  register_layers();
  benchmark::AddCustomContext("isa", cpu::isa().name);
  benchmark::AddCustomContext("lanes", std::to_string(cpu::lanes()));
  benchmark::AddCustomContext("libxsmm_target", cpu::isa().libxsmm);
  benchmark::AddCustomContext("onednn", cpu::onednn_version());
  benchmark::AddCustomContext("cpu_model", cpu_model_name());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
