// query_device_attributes (device_attributes.h): the runtime's device attributes.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_measurer.h"
#include "kernels/cuda/cudnn_layerwise.h"
#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/device_attributes.h"
#include "kernels/cuda/nvrtc_compiler.h"

namespace brickdl::cuda {

namespace {

int attribute(cudaDeviceAttr what, int ordinal) {
  int v = 0;
  BRICKDL_CUDA_CALL(cudaDeviceGetAttribute(&v, what, ordinal));
  return v;
}

} // namespace

DeviceAttributes query_device_attributes(int ordinal) {
  const std::string why = cuda_unavailable_reason();
  if (!why.empty())
    throw CudaError(why);
  cudaDeviceProp p{};
  BRICKDL_CUDA_CALL(cudaGetDeviceProperties(&p, ordinal));
  DeviceAttributes a;
  a.ordinal = ordinal;
  a.name = p.name;
  a.pci_bus_id = cuda_pci_bus_id(ordinal);
  a.cc = p.major * 10 + p.minor;
  a.sm_count = attribute(cudaDevAttrMultiProcessorCount, ordinal);
  a.l2_bytes = attribute(cudaDevAttrL2CacheSize, ordinal);
  a.persisting_l2_max_bytes = attribute(cudaDevAttrMaxPersistingL2CacheSize, ordinal);
  a.smem_per_sm_bytes = attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, ordinal);
  a.smem_per_block_optin_bytes = attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal);
  a.registers_per_sm = attribute(cudaDevAttrMaxRegistersPerMultiprocessor, ordinal);
  a.max_threads_per_sm = attribute(cudaDevAttrMaxThreadsPerMultiProcessor, ordinal);
  a.max_blocks_per_sm = attribute(cudaDevAttrMaxBlocksPerMultiprocessor, ordinal);
  a.sm_clock_khz = attribute(cudaDevAttrClockRate, ordinal);
  a.mem_clock_khz = attribute(cudaDevAttrMemoryClockRate, ordinal);
  a.mem_bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, ordinal);
  a.global_mem_bytes = static_cast<int64_t>(p.totalGlobalMem);
  BRICKDL_CUDA_CALL(cudaDriverGetVersion(&a.driver_version));
  BRICKDL_CUDA_CALL(cudaRuntimeGetVersion(&a.runtime_version));
  a.cudnn_version = CudnnLayerwise::is_supported() ? CudnnLayerwise::version() : "none";
  a.nvrtc_version = NvrtcCompiler::is_supported() ? NvrtcCompiler::version() : "none";
  return a;
}

} // namespace brickdl::cuda
