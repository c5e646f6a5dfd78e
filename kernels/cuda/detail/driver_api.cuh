#pragma once
// The CUDA driver API through cudart's entry-point query instead of linking libcuda: binaries
// then start (and device tests skip) on machines without a GPU driver, while the measurer
// still loads NVRTC cubins with cuModuleLoadDataEx and launches them with cuLaunchKernel.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/statuses.h"

namespace brickdl::cuda::detail {

struct DriverApi {
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  PFN_cuModuleLoadDataEx_v2010 module_load_data_ex = nullptr;
  PFN_cuModuleUnload_v2000 module_unload = nullptr;
  PFN_cuModuleGetFunction_v2000 module_get_function = nullptr;
  PFN_cuFuncSetAttribute_v9000 func_set_attribute = nullptr;
  PFN_cuFuncGetAttribute_v2020 func_get_attribute = nullptr;
  PFN_cuLaunchKernel_v4000 launch_kernel = nullptr;
  PFN_cuLaunchKernelEx_v11060 launch_kernel_ex = nullptr; // thread block clusters
  PFN_cuOccupancyMaxActiveClusters_v11070 occupancy_max_active_clusters = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
  PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050 occupancy_blocks_per_sm = nullptr;
};

template <class F> void load_entry(const char* name, unsigned version, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  const cudaError_t rc = cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q);
  if (rc != cudaSuccess || q != cudaDriverEntryPointSuccess || !p)
    throw CudaError(std::string("CUDA driver entry point ") + name +
                    " unavailable: " + cudaGetErrorString(rc));
  *fn = reinterpret_cast<F>(p);
}

// Loaded on first use; throws CudaError without a driver.
inline const DriverApi& driver() {
  static const DriverApi api = [] {
    DriverApi a;
    load_entry("cuGetErrorString", 6000, &a.get_error_string);
    load_entry("cuModuleLoadDataEx", 2010, &a.module_load_data_ex);
    load_entry("cuModuleUnload", 2000, &a.module_unload);
    load_entry("cuModuleGetFunction", 2000, &a.module_get_function);
    load_entry("cuFuncSetAttribute", 9000, &a.func_set_attribute);
    load_entry("cuFuncGetAttribute", 2020, &a.func_get_attribute);
    load_entry("cuLaunchKernel", 4000, &a.launch_kernel);
    load_entry("cuLaunchKernelEx", 11060, &a.launch_kernel_ex);
    load_entry("cuOccupancyMaxActiveClusters", 11070, &a.occupancy_max_active_clusters);
    load_entry("cuCtxGetCurrent", 4000, &a.ctx_get_current);
    load_entry("cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050, &a.occupancy_blocks_per_sm);
    return a;
  }();
  return api;
}

inline std::string driver_error_string(CUresult r) {
  const char* s = nullptr;
  try {
    driver().get_error_string(r, &s);
  } catch (const CudaError&) {
  }
  return s ? s : "CUresult " + std::to_string(static_cast<int>(r));
}

} // namespace brickdl::cuda::detail
