#pragma once
// What the CUDA measurer runs on, shared by every kind of measurement (measure_cold.cuh,
// measure_cupti.cuh): one device, a non-blocking stream, a start / stop event pair, the L2
// flush buffer and the CUPTI profiler when there is one.
//
//   open ──► measurements ──(launch error or time-out: statuses.h)──► check(grace) ──┐
//        ◄──────────────────────── healthy: nothing to redo ◄─────────────────────────┤
//        ◄── reset(): cudaDeviceReset, everything opened afresh ◄── still running / sticky
//
// A reset costs the CUPTI profiler's and the flush buffer's set-up, so it happens only when
// the rule of statuses.h (classify) asks for it. Warnings are printed once per session.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/cupti_profiler.h"
#include "kernels/cuda/detail/l2_flush.cuh"
#include "kernels/cuda/statuses.h"

namespace brickdl::cuda {

class DeviceSession {
public:
  // Opens `device`; CUPTI only when `use_cupti` and built with it (a profiler that fails to
  // start is a warning: timing then uses CUDA events only).
  DeviceSession(int device, int64_t l2_bytes, bool use_cupti);
  ~DeviceSession();
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return st_->stream; }
  CuptiProfiler* cupti() const { return st_->cupti.get(); } // null when unavailable

  void flush_l2() { st_->flush.enqueue(st_->stream); }
  // CUPTI kernel records around timed repetitions (no-ops without a profiler); the session
  // knows whether they are on, so check() can end them after a failure.
  void begin_kernel_records();
  std::vector<KernelRecord> end_kernel_records();
  // Records the start event on the stream; elapsed_ms() is from it to the stop event that the
  // next wait() records.
  void record_start();
  float elapsed_ms() const;
  // Records the stop event and waits for the stream; throws TimedOut after `seconds` (the
  // work keeps running).
  void wait(double seconds);

  // After a failure that touched the device: waits up to `grace_s` for the stream, then
  // clears the last error and synchronizes to see whether an error persists (statuses.h,
  // classify). When healthy, also ends kernel records a failure left on.
  DeviceState check(double grace_s);
  // cudaDeviceReset and everything opened afresh. `still_running`: the session's own device
  // state is abandoned, not freed (freeing waits for the running kernel; the reset frees it).
  void reset(bool still_running);
  void warn_once(const std::string& message);

private:
  struct State {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    detail::L2Flush flush;
    std::unique_ptr<CuptiProfiler> cupti;
  };
  void open();
  void close();

  int device_;
  int64_t l2_bytes_;
  bool use_cupti_;
  bool records_on_ = false;
  std::unique_ptr<State> st_;
  std::set<std::string> warned_;
};

} // namespace brickdl::cuda
