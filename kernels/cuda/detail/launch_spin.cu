#include "kernels/cuda/detail/launch_spin.cuh"

#include "kernels/cuda/detail/cuda_call.cuh"

// C linkage: its record name is kLaunchSpinKernel, which timing leaves out of the kernel records.
extern "C" __global__ void brickdl_launch_spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

namespace brickdl::cuda::detail {

void enqueue_launch_spin(cudaStream_t stream, double us) {
  brickdl_launch_spin<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(us * 1e3));
  BRICKDL_CUDA_CALL(cudaGetLastError());
}

} // namespace brickdl::cuda::detail
