#pragma once
// Block kernels: one layer computed over a region of one image, reading its inputs from dense
// blocks that cover (at least) the regions the layer needs of them. The padded and memoized
// executors are built from these; the reference ops are not (they are the independent truth
// these kernels are tested against).
#include <span>

#include "core/graph.h"
#include "kernels/region.h"
#include "kernels/weights.h"

namespace brickdl::kernels::detail {

// A dense block of one image: the values of region `stored`, laid out [c][z][y][x] with the
// region's extents. A whole image of a Tensor is the block over Region::whole(shape).
struct ConstBlock {
  const float* data = nullptr;
  Region stored;
};
struct Block {
  float* data = nullptr;
  Region stored;
};

// Computes region `what` of the output of `layer` (a brickable op, core/op_traits.h) into `out`,
// which must cover `what`. inputs[i] holds layer.inputs[i] and must cover input_need(graph, layer,
// i, what); an input that is not needed may be empty. Padding follows PyTorch (see
// kernels/reference.h), and so does the summation order.
void compute_block(const Graph& graph, const Layer& layer, const LayerWeights& weights,
                   std::span<const ConstBlock> inputs, const Block& out, const Region& what);

} // namespace brickdl::kernels::detail
