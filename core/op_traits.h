#pragma once
// Op traits: everything brickdl knows about an op that is not its math, in one table.
//
//   OpKind ──traits()──► OpTraits
//                          name         "conv": YAML, signatures, manifests, messages
//                          arity        inputs it takes                 (graph builder)
//                          brickable    padded / memoized can compute   (model, search,
//                                       a region of its output from      CPU executor)
//                                       regions of its inputs
//                          spatial,     the receptive rule: which input  (model geometry,
//                          channels     region an output region needs     kernels/region.h)
//                          attributes   what changes its work, in        (signatures, YAML
//                                       canonical order                   keys, manifests,
//                                                                         describe)
//                          epilogue...  how fuse_for_inference folds it  (core/graph.cpp)
//                          generated    the CUDA templates implement it  (kernels/cuda/codegen)
//
// Adding an op: one row in op_traits.cpp, its shape rule (core/graph_builder.cpp), its
// reference math (kernels/reference.cpp) and, when brickable, its block kernel
// (kernels/detail/block_ops.cpp); docs/extending.md lists the rest.
//
// Attributes are serialised from this table only: the canonical text of a layer's attributes
// (attribute_text) is part of the workload signature under which the tuning database shares
// results (and keys the CPU measurer's reference cache), so its format must not change
// without a new signature version.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace brickdl {

struct Layer;

enum class OpKind {
  kInput,
  kConv,
  kBatchNorm,
  kRelu,
  kLeakyRelu,
  kAdd,
  kConcat,
  kMaxPool,
  kAvgPool,
  kGlobalAvgPool,
  kUpsample,
  kFlatten,
  kLinear,
  kConvTranspose,
  kSigmoid,
  kSilu,
  kClip,
  kMul,
  kPad,
  kSlice,
  kChannelShuffle,
  kLayerNorm,
  kHardSwish,
  kHardSigmoid,
  kGelu,
  kChannelMul,
  kSub,
  kDiv,
};

// Which region of an input one output region needs, per spatial axis.
enum class SpatialRule : uint8_t {
  kNone,     // reads nothing (the graph input)
  kSame,     // the same box (elementwise ops, concat); an operand broadcast along an axis
             // (extent 1, core/graph.h broadcast_axes) is read at 0 there
  kWindow,   // output [a, b] needs [a·s − p, b·s − p + dil·(k − 1)] (conv, pools)
  kUpsample, // by r: nearest [⌊a/r⌋, ⌊b/r⌋]; bilinear one more on each side
  kWhole,    // the whole input (global pool, flatten, linear)
};

// Which channels of an input one output channel range needs.
enum class ChannelRule : uint8_t {
  kNone,        // reads nothing (the graph input)
  kSame,        // the same channels (channel 0 of an operand broadcast over channels)
  kConvGroups,  // the input channels of the conv groups the output channels belong to
  kConcatSlice, // the part of each input's channels that the range overlaps
  kWhole,       // all channels
  kSlice,       // a slice's input channels: [begin + a, begin + b) for output channels [a, b)
};

// An attribute of a layer that changes its work. Each has one canonical text, JSON form and
// display form (op_traits.cpp), and YAML keys.
enum class Attr : uint8_t {
  kConvWindow,      // kernel, stride, padding, dilation (stride defaults to 1)
  kPoolWindow,      // kernel, stride, padding, dilation (stride defaults to the kernel)
  kAvgPoolWindow,   // kernel, stride, padding (stride defaults to the kernel; no dilation)
  kGroups,          // conv groups
  kOutChannels,     // conv output channels
  kOutFeatures,     // linear output features (YAML: out_features or out_channels)
  kBias,            // a bias term
  kCeilMode,        // pools: ceil instead of floor for the output extent
  kCountIncludePad, // avg pool: padding counts in the divisor
  kScale,           // upsample factor
  kMode,            // upsample: nearest or bilinear
  kSlope,           // leaky relu negative slope
  kOutputPadding,   // transposed conv: extra output extent on the far side, per dim
  kClipRange,       // clip: the min and max values
  kPads,            // pad: begin and end extents per dim, and the fill value
  kChannelRange,    // slice: the input channels [begin, end) it keeps
  kEpsilon,         // layer norm: added to the variance
};

// A short list of attributes in a fixed array (the table is constexpr; predictions read it).
class AttrList {
public:
  constexpr AttrList(std::initializer_list<Attr> attrs) {
    for (Attr a : attrs)
      items_[static_cast<size_t>(size_++)] = a;
  }
  constexpr const Attr* begin() const { return items_.data(); }
  constexpr const Attr* end() const { return items_.data() + size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr int size() const { return size_; }

private:
  std::array<Attr, 6> items_{};
  int size_ = 0;
};

struct OpTraits {
  OpKind op;
  const char* name;
  int min_inputs, max_inputs; // max_inputs −1: any number
  bool brickable;
  SpatialRule spatial;
  ChannelRule channels;
  AttrList attributes;   // canonical order
  bool folds_batch_norm; // a following batch-norm folds into its weights (conv, linear)
  bool takes_epilogue;   // a following activation becomes its epilogue (conv, add, linear)
  bool is_activation;    // relu, leaky_relu, clip, sigmoid, silu, hard_swish, hard_sigmoid,
                         // gelu: folded as an epilogue when possible (core/graph.h Activation)
  bool generated;        // the CUDA kernel templates compute it

  constexpr bool windowed() const { return spatial == SpatialRule::kWindow; }
  bool has_attribute(Attr a) const;
};

// The row of `op`.
const OpTraits& traits(OpKind op);

const char* op_name(OpKind op);
// False for an unknown name.
bool parse_op(const std::string& s, OpKind* out);
// Every op's name, in table order.
std::vector<std::string> op_names();

// True when padded / memoized can compute `layer` brick by brick: a brickable op with a
// spatial output (not a flat tensor).
bool is_brickable(const Layer& layer);

// ---- attributes ----------------------------------------------------------------------------

// The canonical text of a layer's attributes: one token per attribute, each after a space
// (" k1x3x3 s1x1x1 p0x1x1 d1x1x1 g1 c64 b1"); flags that are off give no token. Part of the
// workload signature (core/group.h): do not change the format.
std::string attribute_text(const Layer& layer);

// The layer's attributes as a JSON object under their YAML names ({"kernel": [1,3,3], ...}),
// what `brickdl-run` writes into manifest.json.
nlohmann::json attribute_json(const Layer& layer);

// The attributes for people, as `brickdl-tune --describe` lists them (" 3x3/1 p1 d1 g1").
std::string attribute_display(const Layer& layer);

// The YAML keys of an attribute (core/yaml_graph.cpp reads them).
std::vector<std::string> attribute_keys(Attr a);

} // namespace brickdl
