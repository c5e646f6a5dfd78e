#include "core/op_traits.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "core/error.h"
#include "core/graph.h"

namespace brickdl {

namespace {

using enum Attr;
using enum SpatialRule;

// One row per op, in OpKind order (checked at compile time below).
// clang-format off
constexpr std::array<OpTraits, 28> kTable = {{
  //  op                      name               inputs brick  spatial    channels                  attributes                                          bn     epi    act    gen
      {OpKind::kInput,         "input",            0, 0, false, kNone,     ChannelRule::kNone,       {},                                                 false, false, false, false},
      {OpKind::kConv,          "conv",             1, 1, true,  kWindow,   ChannelRule::kConvGroups, {kConvWindow, kGroups, kOutChannels, kBias},        true,  true,  false, true},
      {OpKind::kBatchNorm,     "batch_norm",       1, 1, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, false, true},
      {OpKind::kRelu,          "relu",             1, 1, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, true,  true},
      {OpKind::kLeakyRelu,     "leaky_relu",       1, 1, true,  kSame,     ChannelRule::kSame,       {kSlope},                                           false, false, true,  true},
      {OpKind::kAdd,           "add",              2, 2, true,  kSame,     ChannelRule::kSame,       {},                                                 false, true,  false, true},
      {OpKind::kConcat,        "concat",           2, -1, true, kSame,     ChannelRule::kConcatSlice, {},                                                false, false, false, false},
      {OpKind::kMaxPool,       "max_pool",         1, 1, true,  kWindow,   ChannelRule::kSame,       {kPoolWindow, kCeilMode},                           false, false, false, true},
      {OpKind::kAvgPool,       "avg_pool",         1, 1, true,  kWindow,   ChannelRule::kSame,       {kAvgPoolWindow, kCeilMode, kCountIncludePad},      false, false, false, true},
      {OpKind::kGlobalAvgPool, "global_avg_pool",  1, 1, false, kWhole,    ChannelRule::kWhole,      {},                                                 false, false, false, false},
      {OpKind::kUpsample,      "upsample",         1, 1, true,  kUpsample, ChannelRule::kSame,       {kScale, kMode},                                    false, false, false, false},
      {OpKind::kFlatten,       "flatten",          1, 1, false, kWhole,    ChannelRule::kWhole,      {},                                                 false, false, false, false},
      {OpKind::kLinear,        "linear",           1, 1, false, kWhole,    ChannelRule::kWhole,      {kOutFeatures, kBias},                              true,  true,  false, false},
      {OpKind::kConvTranspose, "conv_transpose",   1, 1, false, kWhole,    ChannelRule::kWhole,      {kConvWindow, kOutputPadding, kGroups, kOutChannels, kBias}, true, true, false, false},
      {OpKind::kSigmoid,       "sigmoid",          1, 1, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, true,  true},
      {OpKind::kSilu,          "silu",             1, 1, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, true,  true},
      {OpKind::kClip,          "clip",             1, 1, true,  kSame,     ChannelRule::kSame,       {kClipRange},                                       false, false, true,  true},
      {OpKind::kMul,           "mul",              2, 2, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, false, true},
      {OpKind::kPad,           "pad",              1, 1, false, kWhole,    ChannelRule::kSame,       {kPads},                                            false, false, false, false},
      {OpKind::kSlice,         "slice",            1, 1, true,  kSame,     ChannelRule::kSlice,      {kChannelRange},                                    false, false, false, false},
      // channel_shuffle: an output channel range reads channels scattered over the whole input
      // (o ← (o mod g)·C/g + o div g); kWhole is the conservative rule.
      {OpKind::kChannelShuffle, "channel_shuffle", 1, 1, true,  kSame,     ChannelRule::kWhole,      {kGroups},                                          false, false, false, false},
      // layer_norm: all channels of a pixel (kWhole); brickable as a 1x1 conv is, since a
      // unit's input block holds every channel even when it computes a block of the output's.
      {OpKind::kLayerNorm,     "layer_norm",       1, 1, true,  kSame,     ChannelRule::kWhole,      {kEpsilon},                                         false, false, false, false},
      // hard_swish x·hard_sigmoid(x), hard_sigmoid clip(x/6 + 1/2, 0, 1): torch's (ONNX's
      // HardSigmoid with alpha 1/6, beta 1/2); gelu the exact one, x/2·(1 + erf(x/√2)).
      {OpKind::kHardSwish,     "hard_swish",       1, 1, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, true,  true},
      {OpKind::kHardSigmoid,   "hard_sigmoid",     1, 1, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, true,  true},
      {OpKind::kGelu,          "gelu",             1, 1, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, true,  true},
      // channel_mul: x (N, C, …) times s (N, C, 1, …), one value per image and channel (the
      // squeeze-excitation multiply): s is broadcast (core/graph.h broadcast_axes), so a brick
      // of the output reads s[n, c0:c1] whole. Brickable when s comes from outside the group
      // (core/group.h brick_blocker): the SE vector's global pool ends the group before.
      {OpKind::kChannelMul,    "channel_mul",      2, 2, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, false, true},
      // sub / div: two computed tensors, broadcast like add and mul (a constant operand imports
      // as an affine op).
      {OpKind::kSub,           "sub",              2, 2, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, false, true},
      {OpKind::kDiv,           "div",              2, 2, true,  kSame,     ChannelRule::kSame,       {},                                                 false, false, false, true},
}};
// clang-format on

constexpr bool in_op_order() {
  for (size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<size_t>(kTable[i].op) != i)
      return false;
  return true;
}
static_assert(in_op_order(), "kTable rows must follow the order of OpKind");
// The last OpKind: a new op goes at the end of the enum and of kTable, and moves this check.
static_assert(kTable.back().op == OpKind::kDiv, "kTable needs a row for every OpKind");

constexpr bool is_window(Attr a) {
  return a == kConvWindow || a == kPoolWindow || a == kAvgPoolWindow;
}

bool has_dilation(Attr a) {
  return a == kConvWindow || a == kPoolWindow;
}

std::string triple(const std::array<int, 3>& v) {
  return fmt::format("{}x{}x{}", v[0], v[1], v[2]);
}

// The canonical token of one attribute; "" for a flag that is off.
std::string token(Attr a, const Layer& l) {
  const Window& w = l.window;
  switch (a) {
  case kConvWindow:
  case kPoolWindow:
  case kAvgPoolWindow:
    return "k" + triple(w.kernel) + " s" + triple(w.stride) + " p" + triple(w.pad) + " d" +
           triple(w.dilation);
  case kGroups: return fmt::format("g{}", l.groups);
  case kOutChannels:
  case kOutFeatures: return fmt::format("c{}", l.out_channels);
  case kBias: return fmt::format("b{}", l.bias ? 1 : 0);
  case kCeilMode: return l.ceil_mode ? "ceil" : "";
  case kCountIncludePad: return l.count_include_pad ? "incpad" : "";
  case kScale: return fmt::format("x{}", l.upsample_scale);
  case kMode: return l.bilinear ? "bilinear" : "nearest";
  case kSlope: return fmt::format("slope{}", l.leaky_slope);
  case kOutputPadding: return "op" + triple(l.output_pad);
  case kClipRange: return fmt::format("clip{}:{}", l.clip_min, l.clip_max);
  case kPads:
    return "pb" + triple(l.pad_begin) + " pe" + triple(l.pad_end) +
           fmt::format(" v{}", l.pad_value);
  case kChannelRange: return fmt::format("ch{}:{}", l.slice_begin, l.slice_end);
  case kEpsilon: return fmt::format("eps{}", l.epsilon);
  }
  return "";
}

void add_json(Attr a, const Layer& l, nlohmann::json& j) {
  if (is_window(a)) {
    j["kernel"] = l.window.kernel;
    j["stride"] = l.window.stride;
    j["padding"] = l.window.pad;
    if (has_dilation(a))
      j["dilation"] = l.window.dilation;
    return;
  }
  const std::string key = attribute_keys(a).front();
  switch (a) {
  case kGroups: j[key] = l.groups; break;
  case kOutChannels:
  case kOutFeatures: j[key] = l.out_channels; break;
  case kBias: j[key] = l.bias; break;
  case kCeilMode: j[key] = l.ceil_mode; break;
  case kCountIncludePad: j[key] = l.count_include_pad; break;
  case kScale: j[key] = l.upsample_scale; break;
  case kMode: j[key] = l.bilinear ? "bilinear" : "nearest"; break;
  case kSlope: j[key] = l.leaky_slope; break;
  case kOutputPadding: j[key] = l.output_pad; break;
  case kClipRange:
    j["min"] = l.clip_min;
    j["max"] = l.clip_max;
    break;
  case kPads:
    j["pad_begin"] = l.pad_begin;
    j["pad_end"] = l.pad_end;
    j["value"] = l.pad_value;
    break;
  case kChannelRange:
    j["begin"] = l.slice_begin;
    j["end"] = l.slice_end;
    break;
  case kEpsilon: j[key] = l.epsilon; break;
  default: break;
  }
}

// The spatial dims a window uses: (d, h, w) for 3-D, (h, w) for 2-D.
std::vector<int> window_dims(const std::array<int, 3>& v, int rank) {
  return rank == 3 ? std::vector<int>{v[0], v[1], v[2]} : std::vector<int>{v[1], v[2]};
}

// "3" when every dim agrees, else "1,2,2".
std::string uniform_or_list(const std::vector<int>& v) {
  if (std::all_of(v.begin(), v.end(), [&](int x) { return x == v[0]; }))
    return std::to_string(v[0]);
  return fmt::format("{}", fmt::join(v, ","));
}

// " 3x3/2 p1", with " d2" when dilated (conv: always).
std::string window_display(Attr a, const Layer& l) {
  const int rank = l.out.spatial_rank == 3 ? 3 : 2;
  const Window& w = l.window;
  std::string s = fmt::format(" {}/{} p{}", fmt::join(window_dims(w.kernel, rank), "x"),
                              uniform_or_list(window_dims(w.stride, rank)),
                              uniform_or_list(window_dims(w.pad, rank)));
  const std::vector<int> dil = window_dims(w.dilation, rank);
  const bool dilated = std::any_of(dil.begin(), dil.end(), [](int x) { return x != 1; });
  if (a == kConvWindow || dilated)
    s += " d" + uniform_or_list(dil);
  return s;
}

// Output channels and bias are left out: the shape column and the epilogue show them.
std::string display(Attr a, const Layer& l) {
  if (is_window(a))
    return window_display(a, l);
  switch (a) {
  case kGroups: return " g" + std::to_string(l.groups);
  case kCeilMode: return l.ceil_mode ? " ceil" : "";
  case kCountIncludePad: return l.count_include_pad ? "" : " excl_pad";
  case kScale: return " x" + std::to_string(l.upsample_scale);
  case kMode: return l.bilinear ? " bilinear" : " nearest";
  case kSlope: return fmt::format(" {:g}", l.leaky_slope);
  case kOutputPadding: {
    const std::vector<int> op = window_dims(l.output_pad, l.out.spatial_rank == 3 ? 3 : 2);
    return std::all_of(op.begin(), op.end(), [](int x) { return x == 0; })
               ? ""
               : " op" + uniform_or_list(op);
  }
  case kClipRange: return fmt::format(" [{:g}, {:g}]", l.clip_min, l.clip_max);
  case kPads: {
    const int rank = l.out.spatial_rank == 3 ? 3 : 2;
    return fmt::format(" {}/{} v{:g}", uniform_or_list(window_dims(l.pad_begin, rank)),
                       uniform_or_list(window_dims(l.pad_end, rank)), l.pad_value);
  }
  case kChannelRange: return fmt::format(" c[{}:{})", l.slice_begin, l.slice_end);
  case kEpsilon: return fmt::format(" eps{:g}", l.epsilon);
  default: return "";
  }
}

} // namespace

bool OpTraits::has_attribute(Attr a) const {
  return std::find(attributes.begin(), attributes.end(), a) != attributes.end();
}

const OpTraits& traits(OpKind op) {
  return kTable[static_cast<size_t>(op)];
}

const char* op_name(OpKind op) {
  return traits(op).name;
}

bool parse_op(const std::string& s, OpKind* out) {
  for (const OpTraits& t : kTable) {
    if (s == t.name) {
      *out = t.op;
      return true;
    }
  }
  return false;
}

std::vector<std::string> op_names() {
  std::vector<std::string> v;
  for (const OpTraits& t : kTable)
    v.emplace_back(t.name);
  return v;
}

bool is_brickable(const Layer& layer) {
  return traits(layer.op).brickable && layer.out.spatial_rank >= 2;
}

std::string attribute_text(const Layer& layer) {
  std::string s;
  for (Attr a : traits(layer.op).attributes) {
    const std::string t = token(a, layer);
    if (!t.empty())
      s += " " + t;
  }
  return s;
}

nlohmann::json attribute_json(const Layer& layer) {
  nlohmann::json j = nlohmann::json::object();
  for (Attr a : traits(layer.op).attributes)
    add_json(a, layer, j);
  return j;
}

std::string attribute_display(const Layer& layer) {
  std::string s;
  for (Attr a : traits(layer.op).attributes)
    s += display(a, layer);
  return s;
}

std::vector<std::string> attribute_keys(Attr a) {
  switch (a) {
  case kConvWindow:
  case kPoolWindow: return {"kernel", "stride", "padding", "dilation"};
  case kAvgPoolWindow: return {"kernel", "stride", "padding"};
  case kGroups: return {"groups"};
  case kOutChannels: return {"out_channels"};
  case kOutFeatures: return {"out_features", "out_channels"};
  case kBias: return {"bias"};
  case kCeilMode: return {"ceil_mode"};
  case kCountIncludePad: return {"count_include_pad"};
  case kScale: return {"scale"};
  case kMode: return {"mode"};
  case kSlope: return {"slope"};
  case kOutputPadding: return {"output_padding"};
  case kClipRange: return {"min", "max"};
  case kPads: return {"pad_begin", "pad_end", "value"};
  case kChannelRange: return {"begin", "end"};
  case kEpsilon: return {"epsilon"};
  }
  return {};
}

} // namespace brickdl
