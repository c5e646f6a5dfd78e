// brickdl-device: what the CUDA device reports about itself, next to the named GPU spec the
// model predicts for (core/gpu_spec.h), with every field where the two differ. The device run
// (scripts/device/run.sh) records it first; a user checks with it whether a spec fits a GPU.
//
// Exit status: 0 printed; 2 bad flags or an unknown spec; 3 internal error; 4 no usable GPU
// (one line on stderr saying why: no driver, no device, or brickdl built without CUDA; NVRTC's
// version, or "none", still on stdout, as "nvrtc_version: X.Y" or {"gpu": false, ...}).
// With a GPU the driver's, the CUDA runtime's, cuDNN's and NVRTC's versions are among the
// attributes (driver_version, runtime_version, cudnn_version, nvrtc_version).
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/run_tool.h"
#include "core/error.h"
#include "core/gpu_spec.h"
#include "kernels/cuda/cuda_measurer.h"
#include "kernels/cuda/device_attributes.h"
#include "kernels/cuda/nvrtc_compiler.h"

namespace {

using namespace brickdl;

constexpr int kNoGpu = 4;

struct Options {
  int device = 0;
  std::optional<std::string> spec;
  bool json = false;
};

std::string nvrtc_version() {
  return cuda::NvrtcCompiler::is_supported() ? cuda::NvrtcCompiler::version() : "none";
}

const GpuSpec* chosen_spec(const Options& o, const cuda::DeviceAttributes& a) {
  if (!o.spec)
    return cuda::spec_for_device(a.name);
  const GpuSpec* s = find_gpu_spec(*o.spec);
  if (!s) {
    std::string names;
    for (const std::string& n : gpu_spec_names())
      names += (names.empty() ? "" : ", ") + n;
    throw UserError("--spec: unknown GPU spec '" + *o.spec + "' (known: " + names + ")");
  }
  return s;
}

int run(const Options& o) {
  if (o.spec)
    chosen_spec(o, {}); // an unknown name is bad input whether or not there is a GPU
  if (!cuda::cuda_device_available()) {
    std::cerr << "brickdl-device: no GPU: " << cuda::cuda_unavailable_reason() << "\n";
    // What is known without a device: NVRTC's version, which decides whether a precompiled
    // NVRTC cache is used here (its key holds it; scripts/device/run.sh compares).
    std::cout << (o.json ? "{\"gpu\": false, \"nvrtc_version\": \"" + nvrtc_version() + "\"}\n"
                         : "nvrtc_version: " + nvrtc_version() + "\n");
    return kNoGpu;
  }
  if (o.device < 0 || o.device >= cuda::cuda_device_count())
    throw UserError("--device: no CUDA device " + std::to_string(o.device) + " (" +
                    std::to_string(cuda::cuda_device_count()) + " visible)");
  const cuda::DeviceAttributes a = cuda::query_device_attributes(o.device);
  const GpuSpec* spec = chosen_spec(o, a);
  std::cout << (o.json ? cuda::to_json(a, spec) + "\n" : cuda::describe(a, spec));
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"brickdl-device: a CUDA device's attributes (SMs, L2, shared memory, clocks, "
               "driver, cuDNN, NVRTC) and where they differ from the named GPU spec the model "
               "predicts for. Exit 4 without a usable GPU."};
  Options o;
  app.add_option("--device", o.device, "CUDA device ordinal (default 0)");
  app.add_option("--spec", o.spec,
                 "compare with this named spec (default: the one matching the device's name)");
  app.add_flag("--json", o.json, "one JSON object instead of text");
  return run_tool("brickdl-device", app, argc, argv, [&] { return run(o); });
}
