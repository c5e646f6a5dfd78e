#include "kernels/cuda/detail/l2_flush.cuh"

#include <algorithm>

#include "kernels/cuda/detail/cuda_call.cuh"

namespace brickdl::cuda::detail {

L2Flush::L2Flush(int64_t l2_bytes)
    : buffer_(static_cast<size_t>(std::max<int64_t>(2 * l2_bytes, 1 << 20))) {}

void L2Flush::enqueue(cudaStream_t stream) {
  BRICKDL_CUDA_CALL(cudaMemsetAsync(buffer_.as<void>(), ++count_ & 0xff, buffer_.bytes(), stream));
}

} // namespace brickdl::cuda::detail
