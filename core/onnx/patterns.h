#pragma once
// Pattern rewrites on an ONNX graph before its import: node groups that brickdl maps as a whole
// become nodes the importer maps one by one (ops of the "brickdl" domain where ONNX has none).
//
//   torch's exact GELU (opset <20) Div(x, √2) → Erf → Add 1 → Mul by x → Mul by 1/2
//                                  ⇒ Gelu(x) (ONNX's opset-20 op, which the importer maps)
//   torch's channel shuffle        Reshape [N, g, C/g, …] → Transpose (0, 2, 1, 3, …) →
//                                  Reshape [N, C, …], constant shapes
//                                  ⇒ brickdl.ChannelShuffle(groups = g, shape = [N, C, …])
//   a channels-last section        Transpose (0, 2, …, 1) → ops on the channels-last tensor →
//   (ConvNeXt's block, its         Transpose (0, r−1, 1, …) back, every reader of a
//   LayerNorm2d and head)          channels-last tensor one of:
//       LayerNormalization over the last axis   ⇒ brickdl.ChannelLayerNorm (same inputs)
//       MatMul by a constant [C, K] (+ Add of a constant [K])
//                                               ⇒ Conv 1×1 (weight [K, C, 1, …], bias)
//       Mul / Add / Sub / Div by a constant [C], [1, …, 1, C] or a scalar
//                                               ⇒ the same op by [C, 1, …] (or the scalar)
//       elementwise ops (Relu, Gelu, Erf, Sigmoid, …; binary ones of two channels-last tensors)
//                                               ⇒ unchanged
//     and the two Transposes become Identity. A section with anything else (another reader, a
//     graph output inside it) is left as it is, and the importer refuses its Transpose.
//
// Shapes that are computed (Shape → Gather → Concat) are not constants here: such a shuffle is
// left for the importer too.
#include <cstdint>

namespace onnx {
class GraphProto;
}

namespace brickdl::onnx_detail {

inline constexpr const char* kBrickdlDomain = "brickdl";

// Rewrites the patterns above in place; returns how many it rewrote.
int rewrite_channel_patterns(onnx::GraphProto& graph);

} // namespace brickdl::onnx_detail
