#pragma once
// Checked calls into CUDA libraries: every call of the runtime, the driver (through the entry
// points of detail/driver_api.cuh), NVRTC, cuDNN and CUPTI goes through one of these macros,
// which throw CudaError naming the call, the library's error text and file:line.
#include <string>

#include "kernels/cuda/statuses.h"

namespace brickdl::cuda::detail {

[[noreturn]] inline void throw_call_error(const char* lib, const char* call,
                                          const std::string& what, const char* file, int line) {
  throw CudaError(std::string(lib) + " call failed: " + call + ": " + what + " (" + file + ":" +
                  std::to_string(line) + ")");
}

} // namespace brickdl::cuda::detail

#define BRICKDL_CUDA_CALL(expr)                                                                    \
  do {                                                                                             \
    const cudaError_t brickdl_status_ = (expr);                                                    \
    if (brickdl_status_ != cudaSuccess)                                                            \
      ::brickdl::cuda::detail::throw_call_error(                                                   \
          "CUDA", #expr, cudaGetErrorString(brickdl_status_), __FILE__, __LINE__);                 \
  } while (0)

#define BRICKDL_NVRTC_CALL(expr)                                                                   \
  do {                                                                                             \
    const nvrtcResult brickdl_status_ = (expr);                                                    \
    if (brickdl_status_ != NVRTC_SUCCESS)                                                          \
      ::brickdl::cuda::detail::throw_call_error(                                                   \
          "NVRTC", #expr, nvrtcGetErrorString(brickdl_status_), __FILE__, __LINE__);               \
  } while (0)

// Driver API calls through ::brickdl::cuda::detail::driver() (no link against libcuda).
#define BRICKDL_CU_CALL(expr)                                                                      \
  do {                                                                                             \
    const CUresult brickdl_status_ = (expr);                                                       \
    if (brickdl_status_ != CUDA_SUCCESS)                                                           \
      ::brickdl::cuda::detail::throw_call_error(                                                   \
          "CUDA driver", #expr, ::brickdl::cuda::detail::driver_error_string(brickdl_status_),     \
          __FILE__, __LINE__);                                                                     \
  } while (0)

#define BRICKDL_CUDNN_CALL(expr)                                                                   \
  do {                                                                                             \
    const cudnnStatus_t brickdl_status_ = (expr);                                                  \
    if (brickdl_status_ != CUDNN_STATUS_SUCCESS)                                                   \
      ::brickdl::cuda::detail::throw_call_error(                                                   \
          "cuDNN", #expr, cudnnGetErrorString(brickdl_status_), __FILE__, __LINE__);               \
  } while (0)

#define BRICKDL_CUPTI_CALL(expr)                                                                   \
  do {                                                                                             \
    const CUptiResult brickdl_status_ = (expr);                                                    \
    if (brickdl_status_ != CUPTI_SUCCESS) {                                                        \
      const char* brickdl_msg_ = nullptr;                                                          \
      cuptiGetResultString(brickdl_status_, &brickdl_msg_);                                        \
      ::brickdl::cuda::detail::throw_call_error(                                                   \
          "CUPTI", #expr, brickdl_msg_ ? brickdl_msg_ : "unknown error", __FILE__, __LINE__);      \
    }                                                                                              \
  } while (0)
