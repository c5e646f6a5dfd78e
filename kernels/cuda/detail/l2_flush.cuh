#pragma once
// Cold runs (DESIGN.md section 6): before each timed repetition, a memset of a buffer twice
// the size of the L2 evicts whatever the previous repetition left there.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/detail/device_buffers.cuh"

namespace brickdl::cuda::detail {

class L2Flush {
public:
  L2Flush() = default;
  // A buffer of 2 · l2_bytes (at least 1 MiB) on the current device.
  explicit L2Flush(int64_t l2_bytes);
  // Enqueues the flush on `stream` (each with another byte value).
  void enqueue(cudaStream_t stream);

private:
  DeviceBuffer buffer_;
  unsigned count_ = 0;
};

} // namespace brickdl::cuda::detail
