#include "kernels/cuda/measure_cupti.cuh"

#include <algorithm>

#include "kernels/cuda/cuda_measurer.h"
#include "kernels/cuda/detail/cuda_call.cuh"
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
    // A run that failed inside the profiled range is the measurement's failure: the device
    // must be checked (statuses.h), not left to fail the next candidate.
    if (dev.check(0) != DeviceState::kHealthy)
      throw;
    // Profiling may be restricted to administrators; timing stays valid without counters.
    dev.warn_once(std::string("CUPTI counters unavailable: ") + e.what());
  }
}

// The reader is a flush kernel on a buffer of one L2 (it writes nothing); the dirt a memset of
// two L2 sizes (every line it leaves is dirty), as the flush itself used to be.
FlushCheck check_l2_flush(int device) {
  const DeviceInfo info = query_device(device);
  DeviceSession dev(device, info.l2_bytes, true);
  if (!dev.cupti())
    throw CudaError("check_l2_flush: no CUPTI profiler on this device or build");
  detail::L2Flush reader(info.l2_bytes / 2);
  detail::DeviceBuffer dirt(static_cast<size_t>(2 * info.l2_bytes));
  const auto written = [&](bool flush) {
    const auto values = dev.cupti()->collect(
        {"dram__bytes_write.sum"},
        [&] {
          BRICKDL_CUDA_CALL(cudaMemsetAsync(dirt.as<void>(), 1, dirt.bytes(), dev.stream()));
          if (flush)
            dev.flush_l2();
        },
        [&] {
          reader.enqueue(dev.stream());
          dev.wait(60);
        });
    return values.at("dram__bytes_write.sum");
  };
  FlushCheck c;
  c.l2_bytes = info.l2_bytes;
  c.after_flush_write_bytes = written(true);
  c.after_memset_write_bytes = written(false);
  return c;
}

} // namespace brickdl::cuda
