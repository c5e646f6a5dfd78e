#pragma once
// Exceptions of the CUDA backend (CUDA-free header: host code catches them).
//
// CudaError: a CUDA runtime / driver / NVRTC / cuDNN / CUPTI call failed (the setup is broken
// or the device faulted); its message names the call, the library's error text, file:line.
// CompileError: NVRTC rejected a generated source; carries the compiler log. The measurer
// turns both into statuses (compile_error, launch_error) so tuning continues.
#include <stdexcept>
#include <string>

namespace brickdl::cuda {

class CudaError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class CompileError : public std::runtime_error {
public:
  CompileError(const std::string& message, std::string log)
      : std::runtime_error(message), log_(std::move(log)) {}
  const std::string& log() const { return log_; }

private:
  std::string log_;
};

} // namespace brickdl::cuda
