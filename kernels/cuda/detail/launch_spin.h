#pragma once
// The spin before a timed run (measure_cold.cuh): its length, a pure rule (CUDA-free; the
// kernel is launch_spin.cuh).
//
//   host:  flush ─ spin ─ start event ─ run's launches (k1 k2 ... kn) ─ stop event
//   GPU:   [flush][ spin ][k1][k2]...[kn]
//
// Without the spin the GPU reaches the start event as soon as the flush ends, while the host may
// still be queuing the run: a cuDNN sequence of n calls would then be charged the host's time
// between its launches, a merged kernel of one launch almost none. The spin keeps the GPU busy
// until the host has queued the whole run, so the events time the GPU's work and the gaps the
// GPU itself leaves between kernels, for every side alike.
#include <algorithm>
#include <vector>

namespace brickdl::cuda::detail {

// The spin kernel's name in CUPTI kernel records (timing leaves it out of a run's kernels).
inline constexpr const char* kLaunchSpinKernel = "brickdl_launch_spin";

inline constexpr double kSpinMarginFactor = 4;   // × the slowest warm-up enqueue measured
inline constexpr double kSpinFloorUs = 20;       // a launch or two, whatever the host measured
inline constexpr double kSpinCeilingUs = 5000;   // never more idle time than this per sample
inline constexpr double kSpinUnmeasuredUs = 500; // no warm-up enqueue measured

// The spin's length (µs) from the host's enqueue times of the warm-up runs (µs, run order):
// kSpinMarginFactor × the slowest one after the first (the first also loads modules and warms
// cuDNN's host caches), within [kSpinFloorUs, kSpinCeilingUs]. The margin absorbs the jitter of
// a shared host; the timed runs count the repetitions whose enqueue outlasted the spin anyway
// ("launch_spin_short_runs").
inline double spin_us_for(const std::vector<double>& warmup_enqueue_us) {
  if (warmup_enqueue_us.empty())
    return kSpinUnmeasuredUs;
  const auto first =
      warmup_enqueue_us.size() > 1 ? warmup_enqueue_us.begin() + 1 : warmup_enqueue_us.begin();
  const double slowest = *std::max_element(first, warmup_enqueue_us.end());
  return std::clamp(kSpinMarginFactor * slowest, kSpinFloorUs, kSpinCeilingUs);
}

} // namespace brickdl::cuda::detail
