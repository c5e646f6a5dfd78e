// ONNX import and export of ResNet-50 (batch 8, 224x224, 25.6 M parameters, a 102 MB file):
// the target is an import well under 2 s. The file is written once by the exporter
// (random weights from kernels/weights.h) into the temporary folder; the baseline in the same
// process is reading the same bytes from the file (the floor of any import).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/onnx.h"
#include "core/zoo.h"
#include "kernels/weights.h"

namespace {

using namespace brickdl;

const Graph& resnet50() {
  static const Graph g = [] {
    ZooOptions o;
    o.batch = 8;
    return build_zoo_model("resnet50", o);
  }();
  return g;
}

const std::string& resnet50_file() {
  static const std::string path = [] {
    const std::string p = (std::filesystem::temp_directory_path() /
                           ("brickdl_onnx_bench_" + std::to_string(::getpid()) + ".onnx"))
                              .string();
    export_onnx(resnet50(), kernels::unfused_params(fuse_for_inference(resnet50()), 1), p);
    return p;
  }();
  return path;
}

void BM_ReadFileBytes(benchmark::State& state) {
  for (auto _ : state) {
    std::ifstream f(resnet50_file(), std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    benchmark::DoNotOptimize(ss.str().size());
  }
}

void BM_ImportResNet50(benchmark::State& state) {
  for (auto _ : state) {
    const OnnxModel m = import_onnx(resnet50_file());
    benchmark::DoNotOptimize(m.graph.size());
  }
}

void BM_ExportResNet50(benchmark::State& state) {
  const ParamStore params = kernels::unfused_params(fuse_for_inference(resnet50()), 1);
  const std::string out = resnet50_file() + ".out";
  for (auto _ : state)
    export_onnx(resnet50(), params, out);
  std::filesystem::remove(out);
}

BENCHMARK(BM_ReadFileBytes)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly();
BENCHMARK(BM_ImportResNet50)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly();
BENCHMARK(BM_ExportResNet50)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly();

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::filesystem::remove(resnet50_file());
  return 0;
}
