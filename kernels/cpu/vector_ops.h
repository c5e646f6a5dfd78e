#pragma once
// The vector loops of the CPU kernels (kernels/cpu/region_ops.h), one instance per lane count
// (8: nChw8c, 16: nChw16c). Each inner loop runs over the lanes of one channel block (omp simd);
// sigmoid, silu and gelu take Eigen's vectorized logistic / erf. The whole project is built for
// AVX2 + FMA (x86-64-v3, the top-level CMakeLists.txt), so a 16-lane block is two AVX2 vectors
// here; the GEMMs (libxsmm) and oneDNN are JIT'd for the host's full ISA.
#include <cstdint>
#include <span>

#include "core/graph.h"
#include "kernels/cpu/blocked.h"
#include "kernels/cpu/packed.h"
#include "kernels/region.h"

namespace brickdl::kernels::cpu::detail {

// An activation with its parameters (a layer's epilogue or its own op).
struct ActParams {
  Activation act = Activation::kNone;
  float slope = 0.0f, lo = 0.0f, hi = 0.0f;
};
ActParams epilogue_of(const Layer& l);

// p[0, n) <- act(p), as kernels/detail/op_math.h's activate() computes it (NaN stays NaN,
// infinities as in the reference), vectorized.
void activate(float* p, int64_t n, const ActParams& a);

struct VectorKernels {
  // Tile c of n rows (pixels), m columns (channels), row stride ldc: c[j][i] += bias[i] (bias
  // may be null), then the activation.
  void (*bias_act)(float* c, int64_t n, int m, int64_t ldc, const float* bias, const ActParams& a);
  // Stores row pixels [0, count) of tile c (pixel stride ldc; column i is channel ch0 + i, m
  // columns) into out at (z, y, x0 + j), only channels [c0, c1).
  void (*store_row)(const float* c, int64_t ldc, int64_t ch0, int m, int64_t c0, int64_t c1,
                    const BlockedView& out, int64_t z, int64_t y, int64_t x0, int64_t count);
  // A brickable op other than a GEMM conv over `what` (region_ops.h compute_region's contract).
  void (*compute)(const Graph& g, const PackedLayer& p, std::span<const ConstBlockedView> in,
                  const BlockedView& out, const Region& what);
  // Global average pool of image n.
  void (*global_avg_pool)(const BlockedTensor& in, BlockedTensor& out, int64_t n);
};

const VectorKernels& vector_kernels(int lanes);

} // namespace brickdl::kernels::cpu::detail
