#pragma once
// Entry point of every generated kernel: one thread block runs one unit of work.
//
//   generated source:  constexpr GroupDesc G = desc();   (all fields compile-time constants)
//                      __global__ brickdl_group(KernelArgs a) { run_unit(G, a, blockIdx.x); }
//   emulator:          for each block: run_unit(desc, args, block)   (same code, host C++)
//
// The layer-by-layer kernels of our own are single-layer padded groups.
#include "memoized.cuh"

namespace brickdl {
namespace dev {

BRICKDL_DEVICE void run_unit(const GroupDesc& G, const KernelArgs& a, int unit) {
  if (G.mode == kModeMemoized) {
    memoized_block(G, a, unit);
  } else {
    padded_block(G, a, unit);
  }
}

} // namespace dev
} // namespace brickdl
