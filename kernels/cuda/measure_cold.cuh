#pragma once
// Cold timing (DESIGN.md section 6): warm-up runs (their host queuing timed), then timed
// repetitions, each
//
//   [L2 flush (read sweep)] ─ [spin] ─ start event ─ run() ─ stop event ─ wait ──► one sample (ms)
//
// The spin (detail/launch_spin.h) keeps the GPU busy until the host has queued the whole run,
// so a run of many launches (a cuDNN sequence) is not charged the host's queuing that a single
// merged launch escapes. With the kernels' own durations from CUPTI activity records when the
// session has a profiler (the flush and the spin left out). Stops early once the repetitions
// together exceed MeasureOptions::timeout_s; a single run longer than that throws TimedOut.
//
// Warm timing is the same without the flush: each repetition finds in L2 what the previous
// one left there (its inputs, intermediates and weights), as a framework running the layers
// back to back would. Tuning compares cold to cold; warm times are reported beside them.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/measurer.h"
#include "kernels/cuda/device_session.cuh"

namespace brickdl::cuda {

// `run` enqueues one run on dev.stream(). Returns the samples in run order. With `counters`,
// adds "launch_spin_us" (the spin's length) and "launch_spin_short_runs" (repetitions whose
// queuing outlasted it: their samples may include host time), and with a profiler
// "kernel_time_ms" (summed kernel durations per run, mean over the repetitions; the samples'
// median minus it is the GPU's idle time between launches) and "kernels_per_run". Without
// options.flush_l2, the runs are warm.
std::vector<double> measure_cold(DeviceSession& dev, const std::function<void()>& run,
                                 const MeasureOptions& options,
                                 std::map<std::string, double>* counters);

// measure_cold without the flush (whatever options.flush_l2 says) and without counters.
std::vector<double> measure_warm(DeviceSession& dev, const std::function<void()>& run,
                                 const MeasureOptions& options);

} // namespace brickdl::cuda
