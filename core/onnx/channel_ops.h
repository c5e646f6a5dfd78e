#pragma once
// The index arithmetic of ONNX's channel-structure ops, apart from the importer so that it is
// tested on its own: Slice ranges by ONNX's rules, the Transposes that bracket a channels-last
// section (ConvNeXt), and torch's channel-shuffle Reshape → Transpose → Reshape. Split's sizes
// in each opset's form are core/onnx/opset.h's split_sizes.
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/onnx.h"

namespace onnx {
class NodeProto;
}

namespace brickdl::onnx_detail {

// [begin, end) of an ONNX Slice with step 1 on an axis of `extent`: negative indices count
// from the end, then both are clamped to [0, extent] (INT64_MAX / INT64_MIN as torch writes
// for an open end work the same). begin >= end is an empty slice.
struct IndexRange {
  int64_t begin = 0, end = 0;
  bool empty() const { return begin >= end; }
};
IndexRange slice_range(int64_t start, int64_t end, int64_t extent);

// Transpose perms of a rank-r tensor: (0, 2, …, r−1, 1) moves the channels last; (0, r−1, 1,
// …, r−2) moves them back first.
bool is_to_channels_last(const std::vector<int64_t>& perm);
bool is_to_channels_first(const std::vector<int64_t>& perm);

// torch's channel shuffle, exported as Reshape [N, g, C/g, rest…] → Transpose (0, 2, 1, 3, …)
// → Reshape [N, C, rest…] of an input of dims `in` (resolved shapes: no 0 or −1): the groups
// g, or 0 when the three are anything else.
int64_t channel_shuffle_groups(const std::vector<int64_t>& in, const std::vector<int64_t>& split,
                               const std::vector<int64_t>& perm, const std::vector<int64_t>& out);

// How the importer maps one channel-structure node: a layer on the node's runtime input 0 per
// output (Layer::inputs and name left to the importer), or the output being that input itself.
struct ChannelOpPlan {
  struct Output {
    bool alias = false; // the output is input 0 (a one-input Concat, a Slice of every channel)
    Layer layer;
  };
  std::vector<Output> outputs; // one per node output
  NamedParams params;          // a layer_norm's gamma (weight) and beta (bias)
};

// True for the ops plan_channel_op maps: Slice, Split, a one-input Concat, and the brickdl
// domain's ChannelShuffle and ChannelLayerNorm (core/onnx/patterns.h); and Transpose, which it
// refuses with the reason (the patterns took the ones brickdl maps).
bool is_channel_op(const onnx::NodeProto& n);

// Plans node `n` (is_channel_op) of a model of `opset`: `in_dims` are the ONNX dims of its
// runtime input 0, `constants[i]` its input i when that is a constant (else null). Returns ""
// and fills `plan`, or the reason it is refused (what the node does and what brickdl takes).
std::string plan_channel_op(const onnx::NodeProto& n, int64_t opset,
                            const std::vector<int64_t>& in_dims,
                            const std::vector<const OnnxTensor*>& constants, ChannelOpPlan* plan);

} // namespace brickdl::onnx_detail
