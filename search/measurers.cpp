#include "search/measurers.h"

#include "core/error.h"
#include "kernels/cpu_measurer.h"
#include "kernels/cuda/cuda_measurer.h"

namespace brickdl::search {

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

namespace {

std::unique_ptr<Measurer> make_none(const MeasurementConfig&, const Logger&) {
  return nullptr;
}

std::unique_ptr<Measurer> make_cpu(const MeasurementConfig& config, const Logger&) {
  return std::make_unique<kernels::CpuMeasurer>(config.cpu_threads);
}

std::unique_ptr<Measurer> make_cuda(const MeasurementConfig& config, const Logger&) {
  std::string why_not;
  if (auto m = make_cuda_measurer(config, &why_not))
    return m;
  throw UserError("backend 'cuda' is not available: " + why_not +
                  "; use backend 'cpu', 'auto' (cuda when available, else cpu) or 'none'");
}

std::unique_ptr<Measurer> make_auto(const MeasurementConfig& config, const Logger& log) {
  std::string why_not;
  if (auto m = make_cuda_measurer(config, &why_not))
    return m;
  log.warn("no usable GPU (" + why_not + "): falling back to the CPU backend");
  return make_cpu(config, log);
}

struct Backend {
  const char* name;
  std::unique_ptr<Measurer> (*make)(const MeasurementConfig&, const Logger&);
};

// The registry: the only list of backend names (YAML, command line, errors).
constexpr Backend kBackends[] = {
    {"none", make_none},
    {"cpu", make_cpu},
    {"cuda", make_cuda},
    {"auto", make_auto},
};

} // namespace

std::vector<std::string> backend_names() {
  std::vector<std::string> v;
  for (const Backend& b : kBackends)
    v.emplace_back(b.name);
  return v;
}

std::unique_ptr<Measurer> make_measurer(const std::string& backend, const MeasurementConfig& config,
                                        const Logger& log) {
  for (const Backend& b : kBackends)
    if (backend == b.name)
      return b.make(config, log);
  throw UserError("unknown backend '" + backend + "'" + did_you_mean(backend, backend_names()) +
                  "; valid: " + join_names(backend_names()));
}

} // namespace brickdl::search
