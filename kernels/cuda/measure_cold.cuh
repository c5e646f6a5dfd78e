#pragma once
// Cold timing (DESIGN.md section 6): warm-up runs, then timed repetitions, each
//
//   [L2 flush] ─ start event ─ run() ─ stop event ─ wait ──► one sample (ms, event time)
//
// with the kernels' own durations from CUPTI activity records when the session has a
// profiler. Stops early once the repetitions together exceed MeasureOptions::timeout_s; a
// single run longer than that throws TimedOut.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/measurer.h"
#include "kernels/cuda/device_session.cuh"

namespace brickdl::cuda {

// `run` enqueues one run on dev.stream(). Returns the samples in run order. With a profiler
// and `counters`, adds "kernel_time_ms" (summed kernel durations per run) and
// "kernels_per_run".
std::vector<double> measure_cold(DeviceSession& dev, const std::function<void()>& run,
                                 const MeasureOptions& options,
                                 std::map<std::string, double>* counters);

} // namespace brickdl::cuda
