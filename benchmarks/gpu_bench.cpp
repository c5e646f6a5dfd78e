// GPU benchmark of the CUDA backend (not run by the test suite): generated merged kernels
// against the cuDNN layer-by-layer baseline on ResNet-50's first two bottleneck blocks
// (batch 8, fp32) and the Fig 11 chain (three 3x3x3 convs on 224^3), through CudaMeasurer.
// Each benchmark is one measurement (warm-up, 10 cold repetitions); the reported time is its
// median, the counters carry DRAM bytes and the cuDNN variants. Without a GPU every benchmark
// reports an error saying so.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "core/zoo.h"
#include "kernels/cuda/cuda_measurer.h"

namespace {

using namespace brickdl;

int layer_id(const Graph& g, const std::string& name) {
  for (const Layer& l : g.layers()) {
    if (l.name == name)
      return l.id;
    for (const auto& f : l.fused_from)
      if (f == name)
        return l.id;
  }
  return -1;
}

Measurer* measurer() {
  static std::unique_ptr<Measurer> m =
      cuda::cuda_device_available() ? cuda::make_cuda_measurer() : nullptr;
  return m.get();
}

void measure(benchmark::State& state, const Graph& g, const Candidate& c) {
  Measurer* m = measurer();
  if (!m) {
    state.SkipWithError(("no GPU: " + cuda::cuda_unavailable_reason()).c_str());
    return;
  }
  MeasureOptions o;
  o.repetitions = 10;
  MeasureResult r;
  for (auto _ : state) {
    r = m->measure(g, c, o);
    state.SetIterationTime(r.median_ms * 1e-3);
  }
  if (r.status != MeasureStatus::kOk) {
    state.SkipWithError((std::string(measure_status_name(r.status)) + ": " + r.error).c_str());
    return;
  }
  auto counter = [&](const char* name) {
    const auto it = r.counters.find(name);
    return it == r.counters.end() ? -1.0 : it->second;
  };
  state.counters["median_ms"] = r.median_ms;
  state.counters["p25_ms"] = r.p25_ms;
  state.counters["p75_ms"] = r.p75_ms;
  state.counters["dram_MB"] =
      (counter("dram__bytes_read.sum") + counter("dram__bytes_write.sum")) / 1e6;
  state.counters["cudnn_tf32_ms"] = counter("variant.cudnn_tf32_ms");
  state.counters["own_layerwise_ms"] = counter("variant.own_layerwise_ms");
}

void register_group(const std::string& label, const Graph& g, Group grp,
                    const std::vector<BrickShape>& bricks, int layer_first, int layer_last) {
  // The cuDNN baseline of a group is its layers one call each: the singleton groups.
  for (int id = layer_first; id <= layer_last; ++id) {
    Candidate c;
    c.group = {id, id};
    c.strategy = Strategy::kLayerwise;
    benchmark::RegisterBenchmark((label + "/cudnn/" + g.layer(id).name).c_str(),
                                 [g, c](benchmark::State& s) { measure(s, g, c); })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
    for (const BrickShape& b : bricks) {
      Candidate c;
      c.group = grp;
      c.strategy = s;
      c.brick = b;
      benchmark::RegisterBenchmark((label + "/" + c.config_str()).c_str(),
                                   [g, c](benchmark::State& st) { measure(st, g, c); })
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void register_all() {
  ZooOptions o;
  o.batch = 8;
  const Graph resnet = fuse_for_inference(build_zoo_model("resnet50", o));
  for (const char* block : {"layer1.0", "layer1.1"}) {
    const int first = layer_id(resnet, std::string(block) + ".conv1");
    const int last = layer_id(resnet, std::string(block) + ".relu_2");
    register_group(std::string("resnet50/") + block, resnet, {first, last},
                   {{1, 8, 8, 0}, {1, 16, 16, 0}, {1, 8, 8, 64}}, first, last);
  }
  ConvChainOptions chain;
  chain.depth = 3;
  chain.channels = 3;
  chain.image = 224;
  const Graph micro = fuse_for_inference(build_conv_chain(chain));
  register_group("fig11", micro, {1, micro.size() - 1}, {{8, 8, 8, 0}, {16, 16, 16, 0}}, 1,
                 micro.size() - 1);
}

} // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
