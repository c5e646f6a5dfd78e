#include "kernels/cuda/measure_cold.cuh"

#include <algorithm>
#include <chrono>

#include "core/detail/statistics.h"
#include "kernels/cuda/cuda_measurer.h"
#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/detail/launch_spin.cuh"

// An empty kernel: check_cold_timing's run of many launches.
__global__ void brickdl_timing_probe() {}

namespace brickdl::cuda {

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

// The kernels CUPTI recorded over `runs` runs, per run; the L2 flush and the spin are not the
// run's.
void add_kernel_records(const std::vector<KernelRecord>& recs, size_t runs,
                        std::map<std::string, double>& counters) {
  if (runs == 0)
    return;
  double total = 0;
  size_t kernels = 0;
  for (const auto& k : recs) {
    if (k.name == detail::kL2FlushKernel || k.name == detail::kLaunchSpinKernel)
      continue;
    total += k.ms();
    ++kernels;
  }
  counters["kernel_time_ms"] = total / static_cast<double>(runs);
  counters["kernels_per_run"] = static_cast<double>(kernels) / static_cast<double>(runs);
}

} // namespace

// Why a spin and not CUDA graphs (both make the host's queuing invisible to the events): a
// graph would time a different launch path (one graph launch instead of the n stream launches
// a framework makes), and every cuDNN call of every baseline would have to be capturable; the
// spin needs nothing from the run and times exactly what is enqueued, on both sides alike.
std::vector<double> measure_cold(DeviceSession& dev, const std::function<void()>& run,
                                 const MeasureOptions& o, std::map<std::string, double>* counters) {
  std::vector<double> enqueue_us; // the host's queuing of each warm-up run
  for (int i = 0; i < o.warmup; ++i) {
    const auto t = Clock::now();
    run();
    enqueue_us.push_back(us_since(t));
  }
  dev.wait(o.timeout_s);
  const double spin_us = detail::spin_us_for(enqueue_us);
  std::vector<double> samples;
  int short_spins = 0; // repetitions whose queuing outlasted the spin
  dev.begin_kernel_records();
  const auto t0 = Clock::now();
  for (int i = 0; i < o.repetitions; ++i) {
    if (o.flush_l2)
      dev.flush_l2();
    detail::enqueue_launch_spin(dev.stream(), spin_us);
    const auto queued = Clock::now();
    dev.record_start();
    run();
    short_spins += us_since(queued) > spin_us ? 1 : 0;
    dev.wait(o.timeout_s);
    samples.push_back(dev.elapsed_ms());
    if (std::chrono::duration<double>(Clock::now() - t0).count() > o.timeout_s)
      break;
  }
  const auto recs = dev.end_kernel_records();
  if (!counters)
    return samples;
  if (dev.cupti())
    add_kernel_records(recs, samples.size(), *counters);
  (*counters)["launch_spin_us"] = spin_us;
  (*counters)["launch_spin_short_runs"] = short_spins;
  return samples;
}

std::vector<double> measure_warm(DeviceSession& dev, const std::function<void()>& run,
                                 const MeasureOptions& options) {
  MeasureOptions warm = options;
  warm.flush_l2 = false;
  return measure_cold(dev, run, warm, nullptr);
}

ColdTimingCheck check_cold_timing(int device, int launches) {
  const DeviceInfo info = query_device(device);
  DeviceSession dev(device, info.l2_bytes, true);
  const MeasureOptions o;
  ColdTimingCheck c;
  std::map<std::string, double> empty, many;
  c.empty_run_ms = brickdl::detail::median(measure_cold(
      dev, [] {}, o, &empty));
  c.empty_spin_us = empty.at("launch_spin_us");
  const auto run = [&] {
    for (int i = 0; i < launches; ++i)
      brickdl_timing_probe<<<1, 1, 0, dev.stream()>>>();
    BRICKDL_CUDA_CALL(cudaGetLastError());
  };
  c.launches_ms = brickdl::detail::median(measure_cold(dev, run, o, &many));
  c.launches_spin_us = many.at("launch_spin_us");
  c.launches_short_runs = static_cast<int>(many.at("launch_spin_short_runs"));
  if (const auto k = many.find("kernel_time_ms"); k != many.end())
    c.launches_kernel_ms = k->second;
  return c;
}

} // namespace brickdl::cuda
