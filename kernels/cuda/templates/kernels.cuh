#pragma once
// Entry point of every generated kernel: a padded block runs one unit of work; memoized
// grids are persistent (a block walks units block, block + grid, ...).
//
//   generated source:  constexpr GroupDesc G = desc();   (all fields compile-time constants)
//                      __global__ brickdl_group(KernelArgs a) {
//                        run_block(G, a, blockIdx.x, gridDim.x); }
//   emulator:          for each block: run_block(desc, args, block, grid)  (same code, host C++)
//
// The layer-by-layer kernels of our own are single-layer padded groups.
#include "memoized.cuh"

namespace brickdl {
namespace dev {

BRICKDL_DEVICE void run_block(const GroupDesc& G, const KernelArgs& a, int block, int grid) {
  if (G.mode == kModeMemoized) {
    memoized_grid(G, a, block, grid);
  } else {
    padded_block(G, a, block);
  }
}

} // namespace dev
} // namespace brickdl
