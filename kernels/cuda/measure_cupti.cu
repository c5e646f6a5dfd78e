#include "kernels/cuda/measure_cupti.cuh"

#include <algorithm>

#include "kernels/cuda/statuses.h"

namespace brickdl::cuda {

namespace {

// `wanted` (or the defaults) less the metrics the chip does not know, each with a warning.
std::vector<std::string> known_metrics(DeviceSession& dev, const std::vector<std::string>& wanted) {
  std::vector<std::string> metrics = wanted.empty() ? CuptiProfiler::default_metrics() : wanted;
  const std::string& chip = dev.cupti()->chip();
  for (const auto& u : CuptiProfiler::unknown_metrics(chip, metrics)) {
    dev.warn_once("CUPTI: metric " + u + " is unknown on " + chip + "; skipped");
    metrics.erase(std::find(metrics.begin(), metrics.end(), u));
  }
  return metrics;
}

} // namespace

void measure_cupti(DeviceSession& dev, const std::function<void()>& run, const MeasureOptions& o,
                   const std::vector<std::string>& wanted,
                   std::map<std::string, double>& counters) {
  if (!o.collect_counters || !dev.cupti())
    return;
  const std::vector<std::string> metrics = known_metrics(dev, wanted);
  if (metrics.empty())
    return;
  try {
    const auto values = dev.cupti()->collect(
        metrics,
        [&] {
          if (o.flush_l2)
            dev.flush_l2();
        },
        [&] {
          run();
          dev.wait(o.timeout_s);
        });
    for (const auto& [k, v] : values)
      counters[k] = v;
  } catch (const CudaError& e) {
    // Profiling may be restricted to administrators; timing stays valid without counters.
    dev.warn_once(std::string("CUPTI counters unavailable: ") + e.what());
  }
}

} // namespace brickdl::cuda
