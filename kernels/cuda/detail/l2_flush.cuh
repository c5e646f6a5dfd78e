#pragma once
// Cold runs (DESIGN.md section 6): before each timed repetition, a kernel READS a buffer twice
// the size of the L2, which evicts whatever the previous repetition left there. A read sweep
// leaves only clean lines behind: the dirty lines it evicts are written back during the flush,
// and nothing it leaves needs a write-back inside the next timed run or counter range (a
// memset would leave 2 · L2 of dirty lines whose write-backs land there).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/detail/device_buffers.cuh"

namespace brickdl::cuda::detail {

// The flush kernel's name in CUPTI kernel records (timing leaves it out of a run's kernels).
inline constexpr const char* kL2FlushKernel = "brickdl_l2_flush";

class L2Flush {
public:
  L2Flush() = default;
  // A buffer of 2 · l2_bytes (at least 1 MiB) on the current device, zeroed once here (then
  // synchronized: the flush runs on non-blocking streams).
  explicit L2Flush(int64_t l2_bytes);
  // Enqueues the read sweep on `stream`.
  void enqueue(cudaStream_t stream) const;
  size_t bytes() const { return buffer_.bytes(); }

private:
  DeviceBuffer buffer_, sink_; // sink_: written only if the zeroed buffer read non-zero
  unsigned blocks_ = 0;
};

} // namespace brickdl::cuda::detail
