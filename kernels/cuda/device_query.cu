// Whether there is a usable CUDA device, and what it is (cuda_measurer.h).
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_measurer.h"
#include "kernels/cuda/device_attributes.h"

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

// The measurer's view of the device: a subset of what brickdl-device records, from the one
// query of the device's attributes (device_attributes.cu).
DeviceInfo query_device(int ordinal) {
  const DeviceAttributes a = query_device_attributes(ordinal);
  DeviceInfo d;
  d.ordinal = a.ordinal;
  d.name = a.name;
  d.cc = a.cc;
  d.sm_count = a.sm_count;
  d.l2_bytes = a.l2_bytes;
  d.smem_optin_bytes = a.smem_per_block_optin_bytes;
  d.global_mem_bytes = a.global_mem_bytes;
  d.clock_khz = a.sm_clock_khz;
  d.driver_version = a.driver_version;
  d.runtime_version = a.runtime_version;
  d.cudnn_version = a.cudnn_version;
  return d;
}

} // namespace brickdl::cuda
