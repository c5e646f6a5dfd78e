#pragma once
// The exceptions of the CUDA backend, one per failing measurement status (CUDA-free header:
// host code catches them). The measurer records each as its status and goes on tuning:
//
//   exception      MeasureStatus    thrown when                              device afterwards
//   Unsupported    unsupported      no template / too much shared memory /   untouched
//                                   cuDNN lacks an op (codegen, cuDNN)
//   CompileError   compile_error    NVRTC rejects a generated source (log)   untouched
//   CudaError      launch_error     a CUDA / driver / NVRTC / cuDNN / CUPTI  checked: reset
//                                   call failed (detail/cuda_call.cuh)       only if sticky
//   TimedOut       timeout          a run exceeded MeasureOptions::timeout_s checked: waited
//                                   or a memoized wait its spin limit        for, reset only
//                                                                            if still running
//                                                                            or sticky
//   WrongResult    wrong_result     validation failed (kernels/validation.h) untouched
//
// "Checked" (DeviceSession::check, then classify below): the failed work gets a grace period
// to finish; then the last error is cleared and the device synchronized, and an error that
// persists through that is sticky (an illegal address, a kernel fault: the context is unusable
// until cudaDeviceReset). A memoized time-out is cooperative (the kernel set its error flag
// and returned), so its device is healthy; a non-sticky error (a refused launch, a cuDNN
// status) is cleared. Only a sticky error or work still running after the grace period costs
// a reset, and with it the session's CUPTI and flush state.
//
// Any other exception during a measurement is recorded as launch_error too. Outside a
// measurement (no device, a broken setup) CudaError is an ordinary error.
#include <stdexcept>
#include <string>

#include "core/measurer.h"

namespace brickdl::cuda {

// A failure that a measurement records as a status.
class Failure : public std::runtime_error {
public:
  Failure(MeasureStatus status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  MeasureStatus status() const { return status_; }
  // Whether the device must be checked before the next measurement (the table above).
  bool touches_device() const {
    return status_ == MeasureStatus::kLaunchError || status_ == MeasureStatus::kTimeout;
  }
  // What MeasureResult::error records.
  virtual std::string detail() const { return what(); }

private:
  MeasureStatus status_;
};

class Unsupported : public Failure {
public:
  explicit Unsupported(const std::string& message)
      : Failure(MeasureStatus::kUnsupported, message) {}
};

class CompileError : public Failure {
public:
  CompileError(const std::string& message, std::string log)
      : Failure(MeasureStatus::kCompileError, message), log_(std::move(log)) {}
  const std::string& log() const { return log_; }
  // The message and the compiler log (its first 4000 characters).
  std::string detail() const override {
    constexpr size_t kMax = 4000;
    const std::string log = log_.size() <= kMax ? log_
                                                : log_.substr(0, kMax) + "\n[... " +
                                                      std::to_string(log_.size() - kMax) + " more]";
    return std::string(what()) + "\n" + log;
  }

private:
  std::string log_;
};

class CudaError : public Failure {
public:
  explicit CudaError(const std::string& message) : Failure(MeasureStatus::kLaunchError, message) {}
};

class TimedOut : public Failure {
public:
  explicit TimedOut(const std::string& message) : Failure(MeasureStatus::kTimeout, message) {}
};

class WrongResult : public Failure {
public:
  explicit WrongResult(const std::string& message)
      : Failure(MeasureStatus::kWrongResult, message) {}
};

// How the device stands after a failure that touched it (the table above).
enum class DeviceState {
  kHealthy,      // idle, no error left: measurements go on
  kStillRunning, // the failed work outlived its grace period: only a reset stops it
  kStickyError,  // an error persisted through clearing and synchronizing
};

// The rule of the table: `drained` whether the failed work finished within its grace period;
// `persistent_error` the CUDA error code (0 = success) that cudaDeviceSynchronize still
// returns after cudaGetLastError cleared whatever was clearable (not asked when not drained).
inline DeviceState classify(bool drained, int persistent_error) {
  if (!drained)
    return DeviceState::kStillRunning;
  return persistent_error != 0 ? DeviceState::kStickyError : DeviceState::kHealthy;
}

inline bool needs_reset(DeviceState s) {
  return s != DeviceState::kHealthy;
}

} // namespace brickdl::cuda
