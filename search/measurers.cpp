#include "search/measurers.h"

#include "core/error.h"
#include "kernels/cpu_measurer.h"
#include "kernels/cuda/cuda_measurer.h"

namespace brickdl::search {

std::vector<std::string> backend_names() {
  return {"none", "cpu", "cuda", "auto"};
}

std::unique_ptr<Measurer> make_cuda_measurer(const MeasurementConfig& config,
                                             std::string* why_not) {
  if (!cuda::cuda_device_available()) {
    if (why_not)
      *why_not = cuda::cuda_unavailable_reason();
    return nullptr;
  }
  cuda::CudaMeasurerOptions options;
  options.metrics = config.counters; // empty: the profiler's defaults
  try {
    return cuda::make_cuda_measurer(options);
  } catch (const std::exception& e) {
    if (why_not)
      *why_not = e.what();
    return nullptr;
  }
}

std::unique_ptr<Measurer> make_measurer(const std::string& backend, const MeasurementConfig& config,
                                        const Logger& log) {
  if (backend == "none")
    return nullptr;
  if (backend == "cpu")
    return std::make_unique<kernels::CpuMeasurer>(config.cpu_threads);
  if (backend == "cuda" || backend == "auto") {
    std::string why_not;
    if (auto m = make_cuda_measurer(config, &why_not))
      return m;
    if (backend == "cuda")
      throw UserError("backend 'cuda' is not available: " + why_not +
                      "; use backend 'cpu', 'auto' (cuda when available, else cpu) or 'none'");
    log.warn("no usable GPU (" + why_not + "): falling back to the CPU backend");
    return std::make_unique<kernels::CpuMeasurer>(config.cpu_threads);
  }
  throw UserError("unknown backend '" + backend + "'" + did_you_mean(backend, backend_names()) +
                  "; valid: " + join_names(backend_names()));
}

} // namespace brickdl::search
