#include "kernels/cuda/device_session.cuh"

#include <chrono>
#include <iostream>
#include <thread>

#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/statuses.h"

namespace brickdl::cuda {

DeviceSession::DeviceSession(int device, int64_t l2_bytes, bool use_cupti)
    : device_(device), l2_bytes_(l2_bytes), use_cupti_(use_cupti) {
  open();
}

DeviceSession::~DeviceSession() {
  close();
}

void DeviceSession::open() {
  BRICKDL_CUDA_CALL(cudaSetDevice(device_));
  st_ = std::make_unique<State>();
  BRICKDL_CUDA_CALL(cudaStreamCreateWithFlags(&st_->stream, cudaStreamNonBlocking));
  BRICKDL_CUDA_CALL(cudaEventCreate(&st_->start));
  BRICKDL_CUDA_CALL(cudaEventCreate(&st_->stop));
  st_->flush = detail::L2Flush(l2_bytes_);
  if (use_cupti_ && CuptiProfiler::is_supported()) {
    try {
      st_->cupti = std::make_unique<CuptiProfiler>(device_);
    } catch (const std::exception& e) {
      warn_once("CUPTI unavailable, timing with CUDA events only: " + std::string(e.what()));
    }
  }
}

void DeviceSession::close() {
  if (!st_)
    return;
  st_->cupti.reset();
  st_->flush = detail::L2Flush();
  if (st_->start)
    cudaEventDestroy(st_->start);
  if (st_->stop)
    cudaEventDestroy(st_->stop);
  if (st_->stream)
    cudaStreamDestroy(st_->stream);
  st_.reset();
}

DeviceState DeviceSession::check(double grace_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(grace_s);
  cudaError_t q = cudaStreamQuery(st_->stream);
  for (; q == cudaErrorNotReady && Clock::now() < deadline; q = cudaStreamQuery(st_->stream))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int persistent = 0;
  if (q != cudaErrorNotReady) {
    // A sticky error survives cudaGetLastError; two rounds, so that an error reported once by
    // the first synchronization and cleared by the second cudaGetLastError is not counted.
    for (int round = 0; round < 2; ++round) {
      (void)cudaGetLastError();
      persistent = static_cast<int>(cudaDeviceSynchronize());
      if (persistent == 0)
        break;
    }
  }
  const DeviceState state = classify(q != cudaErrorNotReady, persistent);
  if (state == DeviceState::kHealthy && records_on_) {
    try {
      (void)end_kernel_records(); // a failed measurement's records mean nothing
    } catch (const std::exception& e) {
      warn_once(std::string("CUPTI kernel records could not be ended: ") + e.what());
    }
  }
  return state;
}

void DeviceSession::reset(bool still_running) {
  try {
    if (still_running)
      (void)st_.release(); // freeing would wait for the kernel; the reset below frees it
    st_.reset();           // else buffers first (frees may fail harmlessly on a dead context)
    records_on_ = false;
    cudaDeviceReset();
    open();
  } catch (const std::exception& e) {
    std::cerr << "brickdl: the CUDA device could not be recovered: " << e.what() << "\n";
    throw;
  }
}

void DeviceSession::begin_kernel_records() {
  if (!st_->cupti)
    return;
  st_->cupti->begin_kernel_records();
  records_on_ = true;
}

std::vector<KernelRecord> DeviceSession::end_kernel_records() {
  if (!st_->cupti || !records_on_)
    return {};
  records_on_ = false;
  return st_->cupti->end_kernel_records();
}

void DeviceSession::warn_once(const std::string& message) {
  if (warned_.insert(message).second)
    std::cerr << "brickdl: " << message << "\n";
}

void DeviceSession::record_start() {
  BRICKDL_CUDA_CALL(cudaEventRecord(st_->start, st_->stream));
}

float DeviceSession::elapsed_ms() const {
  float ms = 0;
  BRICKDL_CUDA_CALL(cudaEventElapsedTime(&ms, st_->start, st_->stop));
  return ms;
}

void DeviceSession::wait(double seconds) {
  using Clock = std::chrono::steady_clock;
  BRICKDL_CUDA_CALL(cudaEventRecord(st_->stop, st_->stream));
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const cudaError_t q = cudaEventQuery(st_->stop);
    if (q == cudaSuccess)
      return;
    if (q != cudaErrorNotReady)
      BRICKDL_CUDA_CALL(q);
    if (Clock::now() > deadline)
      throw TimedOut("the run did not finish within " + std::to_string(seconds) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

} // namespace brickdl::cuda
