// Whether there is a usable CUDA device, and what it is (cuda_measurer.h).
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_measurer.h"
#include "kernels/cuda/cudnn_layerwise.h"
#include "kernels/cuda/detail/cuda_call.cuh"

namespace brickdl::cuda {

std::string cuda_unavailable_reason() {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    cudaGetLastError(); // clear it
    if (rc == cudaErrorInsufficientDriver)
      return "no NVIDIA GPU driver found (libcuda missing or older than CUDA " +
             std::to_string(CUDART_VERSION / 1000) + ")";
    if (rc == cudaErrorNoDevice)
      return "no CUDA device";
    return std::string("no usable CUDA device (") + cudaGetErrorString(rc) + ")";
  }
  if (n == 0)
    return "no CUDA device";
  return "";
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); // clear it
    return 0;
  }
  return n;
}

std::string cuda_pci_bus_id(int ordinal) {
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof id, ordinal) != cudaSuccess) {
    cudaGetLastError(); // clear it
    return "";
  }
  return id;
}

bool cuda_device_available() {
  return cuda_unavailable_reason().empty();
}

DeviceInfo query_device(int ordinal) {
  const std::string why = cuda_unavailable_reason();
  if (!why.empty())
    throw CudaError(why);
  cudaDeviceProp p{};
  BRICKDL_CUDA_CALL(cudaGetDeviceProperties(&p, ordinal));
  DeviceInfo d;
  d.ordinal = ordinal;
  d.name = p.name;
  d.cc = p.major * 10 + p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = p.l2CacheSize;
  d.smem_optin_bytes = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  d.global_mem_bytes = static_cast<int64_t>(p.totalGlobalMem);
  BRICKDL_CUDA_CALL(cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, ordinal));
  BRICKDL_CUDA_CALL(cudaDriverGetVersion(&d.driver_version));
  BRICKDL_CUDA_CALL(cudaRuntimeGetVersion(&d.runtime_version));
  d.cudnn_version = CudnnLayerwise::is_supported() ? CudnnLayerwise::version() : "none";
  return d;
}

} // namespace brickdl::cuda
