#pragma once
// CUPTI counters (DESIGN.md section 6): a pass of its own after the timing, since the range
// profiler replays the run once per pass the metrics need (and that distorts time). Each pass:
// [L2 flush] outside the range, then one run inside it.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/measurer.h"
#include "kernels/cuda/device_session.cuh"

namespace brickdl::cuda {

// Adds the values of `metrics` (empty: CuptiProfiler::default_metrics()) for one run of `run`
// to `counters`, under the metric names. Does nothing without a profiler or when
// options.collect_counters is off; metrics the chip does not know are skipped with a warning,
// and a profiler that refuses (e.g. counters restricted to administrators) is a warning too:
// the timing stays valid without counters. A CudaError that leaves the device unhealthy
// (DeviceSession::check) is rethrown: the run failed, not the profiler.
void measure_cupti(DeviceSession& dev, const std::function<void()>& run,
                   const MeasureOptions& options, const std::vector<std::string>& metrics,
                   std::map<std::string, double>& counters);

} // namespace brickdl::cuda
