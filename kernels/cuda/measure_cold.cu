#include "kernels/cuda/measure_cold.cuh"

#include <chrono>

namespace brickdl::cuda {

namespace {

// The kernels CUPTI recorded over `runs` runs, per run; the L2 flush is not the run's.
void add_kernel_records(const std::vector<KernelRecord>& recs, size_t runs,
                        std::map<std::string, double>& counters) {
  if (runs == 0)
    return;
  double total = 0;
  size_t kernels = 0;
  for (const auto& k : recs) {
    if (k.name == detail::kL2FlushKernel)
      continue;
    total += k.ms();
    ++kernels;
  }
  counters["kernel_time_ms"] = total / static_cast<double>(runs);
  counters["kernels_per_run"] = static_cast<double>(kernels) / static_cast<double>(runs);
}

} // namespace

std::vector<double> measure_cold(DeviceSession& dev, const std::function<void()>& run,
                                 const MeasureOptions& o, std::map<std::string, double>* counters) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < o.warmup; ++i)
    run();
  dev.wait(o.timeout_s);
  std::vector<double> samples;
  dev.begin_kernel_records();
  const auto t0 = Clock::now();
  for (int i = 0; i < o.repetitions; ++i) {
    if (o.flush_l2)
      dev.flush_l2();
    dev.record_start();
    run();
    dev.wait(o.timeout_s);
    samples.push_back(dev.elapsed_ms());
    if (std::chrono::duration<double>(Clock::now() - t0).count() > o.timeout_s)
      break;
  }
  const auto recs = dev.end_kernel_records();
  if (counters && dev.cupti())
    add_kernel_records(recs, samples.size(), *counters);
  return samples;
}

std::vector<double> measure_warm(DeviceSession& dev, const std::function<void()>& run,
                                 const MeasureOptions& options) {
  MeasureOptions warm = options;
  warm.flush_l2 = false;
  return measure_cold(dev, run, warm, nullptr);
}

} // namespace brickdl::cuda
