#pragma once
// The CPU kernels of one layer over a region of one image, in the blocked layout
// (kernels/cpu/blocked.h), and of the layers that only run over whole tensors.
//
//   conv, linear ──► batch-reduce GEMM (kernels/cpu/brgemm.h: libxsmm) into a tile
//   [pixel][channel],
//                    then its epilogue (bias, activation) and a store into the blocked output
//   depthwise conv, pools, elementwise ops, upsample, concat / slice / shuffle, layer norm,
//   global average pool ──► vector loops over the lanes of a channel block (omp simd; the
//                    exp / erf of sigmoid, silu and gelu through Eigen's vectorized functions),
//                    one template instance per lane count (kernels/cpu/vector_ops.cpp)
//   flatten of a spatial tensor, conv_transpose, pad ──► the reference ops
//                    (kernels/reference.h) on a dense copy: no fast kernel yet
//                    (run_whole_layer reports it through `fallback`)
//
// Every kernel computes each output element from the same inputs as the reference; sums run in
// another order (GEMM blocking), so results agree within a floating-point tolerance, not bit for
// bit (kernels/validation.h).
#include <span>
#include <string>
#include <vector>

#include "core/graph.h"
#include "kernels/cpu/blocked.h"
#include "kernels/cpu/packed.h"
#include "kernels/region.h"

namespace brickdl::kernels::cpu {

// Computes region `what` of the output of p.layer (a brickable op, core/op_traits.h) into
// `out`, which must store it. inputs[i] holds layer.inputs[i] and must store
// input_need(graph, layer, i, what) (an input not needed may be empty). Writes only the
// channels of `what`, so units that share a channel block never write each other's lanes.
// Thread-safe: scratch is per thread.
void compute_region(const Graph& graph, const PackedLayer& p,
                    std::span<const ConstBlockedView> inputs, const BlockedView& out,
                    const Region& what);

// Whole-tensor execution of a layer of any op: brickable ops through compute_region over
// (image, channel-block range, slab) units on `threads` threads; global average pool, linear and
// flatten of flat tensors with their own kernels; the rest through the reference ops on a dense
// copy, and then `*fallback` (when given) is set to why.
BlockedTensor run_whole_layer(const Graph& graph, const PackedLayer& p,
                              const std::vector<const BlockedTensor*>& inputs, int threads,
                              std::string* fallback = nullptr);

// Empty when layer `l` has a fast kernel over whole tensors, else what runs it instead.
std::string whole_layer_fallback(const Graph& graph, const Layer& l);

} // namespace brickdl::kernels::cpu
