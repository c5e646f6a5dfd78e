#pragma once
// The micro-measurements of brickdl-calibrate (CUDA-free interface; calibration.cu, or the
// stub in cuda_stub.cpp without CUDA). Each returns raw timings; calibration_file.h turns them
// into values. The tensor-core fractions are not here: they time the generated kernels
// themselves, through CudaMeasurer (cuda_measurer.h).
//
//   measure_dram_read    one read-only sweep over a buffer far larger than L2, per run
//   measure_l2_read      `passes` sweeps over a buffer well inside L2 (ld.global.cg: L1 is
//                        bypassed, so every load is an L2 hit), per run, after a warming sweep
//   measure_launch_gap   1 and then N empty kernels queued behind a gate kernel, so the host's
//                        launch calls are done before the first runs: the GPU's own gap
//   cupti_chip           the CUPTI chip name of a device ("GH100"), for checking metric names
//
// Every wait is bounded by `timeout_s` (TimedOut, statuses.h); CUDA failures throw CudaError.
#include <cstdint>
#include <string>
#include <vector>

namespace brickdl::cuda {

struct StreamTiming {
  double bytes_per_run = 0;       // bytes the kernel loads per timed run
  std::vector<double> samples_ms; // one per run (CUDA events)
};

// Reads `buffer_bytes` (rounded down to 16 bytes) once per run, `runs` times.
StreamTiming measure_dram_read(int device, int64_t buffer_bytes, int runs, double timeout_s);
// Reads `buffer_bytes` `passes` times per run, `runs` times.
StreamTiming measure_l2_read(int device, int64_t buffer_bytes, int passes, int runs,
                             double timeout_s);

struct LaunchGapTiming {
  int kernels = 0;              // N
  std::vector<double> first_ms; // t_1 per run: the first kernel alone
  std::vector<double> all_ms;   // t_N per run: N kernels back to back
  // Longest host time to queue the N launches, ms; when it exceeds the gate's time the GPU
  // waited for the host and t_N measures the host's launch rate.
  double enqueue_ms = 0;
  double gate_ms = 0; // how long the gate kernel holds the stream
};

LaunchGapTiming measure_launch_gap(int device, int kernels, int runs, double timeout_s);

// Throws CudaError without CUPTI (is_supported false) or a device.
std::string cupti_chip(int device);

} // namespace brickdl::cuda
