#pragma once
// The shared-memory rule of a generated kernel's launch (CUDA-free, so host tests check it):
// a block may use 48 KiB of shared memory, static and dynamic together, without asking; more
// needs CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES raised to the dynamic part, and the
// sum must stay within the device's opt-in maximum per block (227 KiB on sm_90).
#include <cstdint>
#include <string>

#include "kernels/cuda/statuses.h"

namespace brickdl::cuda::detail {

inline constexpr int64_t kDefaultSharedBytes = 48 * 1024;

// Whether `symbol` needs the opt-in for `static_bytes` (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
// plus `dynamic_bytes` (the launch's). Throws Unsupported, with both numbers, when the sum
// exceeds `optin_bytes` (cudaDevAttrMaxSharedMemoryPerBlockOptin).
inline bool needs_shared_opt_in(const std::string& symbol, int64_t static_bytes,
                                int64_t dynamic_bytes, int64_t optin_bytes) {
  const int64_t total = static_bytes + dynamic_bytes;
  if (total > optin_bytes)
    throw Unsupported(symbol + " needs " + std::to_string(static_bytes) + " bytes of static plus " +
                      std::to_string(dynamic_bytes) + " bytes of dynamic shared memory (" +
                      std::to_string(total) + "); the device allows " +
                      std::to_string(optin_bytes) + " per block");
  return total > kDefaultSharedBytes;
}

} // namespace brickdl::cuda::detail
