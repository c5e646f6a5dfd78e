// The ONNX ops the importer maps (Importer::node dispatches to them), each node to brickdl
// layers. Where ONNX's semantics and brickdl's (PyTorch's) differ, a node maps exactly or is
// refused (tests/onnx/node_tests.cpp runs ONNX's node tests; expected_refusals.txt lists what
// is refused and why):
//  - ConvTranspose: auto_pad SAME_* and output_shape give pads by ONNX's rule (SAME_UPPER
//    puts the smaller half first); an output_shape beyond the full output extends the far
//    end (output padding); one that would extend the start is refused;
//  - MaxPool / AveragePool with ceil_mode: refused where ONNX's extent (every window that
//    starts before the end of the padded input) differs from PyTorch's (which drops a last
//    window starting in the end padding), and for averages counting the padding whose last
//    window overhangs the padded input; pads that differ at the two ends go to a pad layer
//    (−inf for max, zeros for averages counting the padding), or, for averages not counting
//    it, the larger pad at both ends and the extra outputs cropped;
//  - Reshape applies ONNX's 0 / −1 / allowzero rules, then maps to a flatten or to dims of
//    the same layout (N, C, L ↔ N, C, 1, L; L ↔ 1, L).
// The forms that differ between opsets are read by core/onnx/opset.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "core/graph_builder.h"
#include "core/onnx.h"
#include "core/onnx/channel_ops.h"
#include "core/onnx/importer.h"
#include "core/onnx/opset.h"
#include "core/onnx/proto.h"

namespace brickdl::onnx_detail {

// ---- windows and pads ---------------------------------------------------------------------

std::array<int, 3> Importer::spatial_attr(const onnx::NodeProto& n, const std::string& name,
                                          int spatial, int dflt) const {
  const std::vector<int64_t> v = attr_ints(n, name);
  if (v.empty())
    return {dflt, dflt, dflt};
  if (static_cast<int>(v.size()) != spatial)
    refuse(n, fmt::format("{} has {} values for {} spatial dims", name, v.size(), spatial));
  for (int64_t x : v)
    if (x < 0 || x > std::numeric_limits<int>::max())
      refuse(n, fmt::format("{} value {} is out of range", name, x));
  return triple(v, spatial, dflt);
}

int Importer::spatial_rank_of(const onnx::NodeProto& n, const Value v) const {
  if (v.rank < 3)
    refuse(n, "needs a spatial input (N, C, ...), got rank " + std::to_string(v.rank));
  return v.rank - 2;
}

Importer::Pads Importer::read_pads(const onnx::NodeProto& n, int spatial, const TensorShape& in,
                                   const std::array<int, 3>& kernel,
                                   const std::array<int, 3>& stride,
                                   const std::array<int, 3>& dil) const {
  Pads p;
  const std::string autopad = attr_string(n, "auto_pad", "NOTSET");
  const std::vector<int64_t> v = attr_ints(n, "pads");
  if (autopad == "NOTSET") {
    if (v.empty())
      return p;
    if (static_cast<int>(v.size()) != 2 * spatial)
      refuse(n, fmt::format("pads has {} values for {} spatial dims", v.size(), spatial));
    for (int64_t x : v)
      if (x < 0 || x > std::numeric_limits<int>::max())
        refuse(n, fmt::format("pads value {} is out of range", x));
    p.begin = triple(std::vector<int64_t>(v.begin(), v.begin() + spatial), spatial, 0);
    p.end = triple(std::vector<int64_t>(v.begin() + spatial, v.end()), spatial, 0);
    return p;
  }
  if (autopad == "VALID")
    return p;
  if (autopad != "SAME_UPPER" && autopad != "SAME_LOWER")
    refuse(n, "auto_pad '" + autopad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  for (int a = 3 - spatial; a < 3; ++a) {
    const int64_t x = in.dim(a), s = stride[static_cast<size_t>(a)];
    const int64_t out = (x + s - 1) / s;
    const int64_t total = std::max<int64_t>(
        0, (out - 1) * s + int64_t{dil[static_cast<size_t>(a)]} * (kernel[a] - 1) + 1 - x);
    const int64_t small = total / 2, large = total - small;
    p.begin[static_cast<size_t>(a)] = static_cast<int>(autopad == "SAME_UPPER" ? small : large);
    p.end[static_cast<size_t>(a)] = static_cast<int>(autopad == "SAME_UPPER" ? large : small);
  }
  return p;
}

// A pad layer `name` (made unique) of what `p` has beyond `sym` (sign −1: crop), or `input`
// when nothing is left.
int Importer::pad_rest(const onnx::NodeProto& n, int input, int rank, const Pads& p,
                       const std::array<int, 3>& sym, int sign, float value,
                       const std::string& name) {
  Layer l = unary(OpKind::kPad, input);
  bool any = false;
  for (size_t a = 0; a < 3; ++a) {
    l.pad_begin[a] = sign * (p.begin[a] - sym[a]);
    l.pad_end[a] = sign * (p.end[a] - sym[a]);
    any = any || l.pad_begin[a] != 0 || l.pad_end[a] != 0;
  }
  if (!any)
    return input;
  l.pad_value = value;
  l.name = name;
  for (int k = 1; used_names_.count(l.name); ++k)
    l.name = name + "_" + std::to_string(k);
  const std::string out = "\x01" + l.name; // an internal tensor name no ONNX file uses
  return emit(n, l, rank, out);
}

// ---- ops -------------------------------------------------------------------------------------

void Importer::conv(const onnx::NodeProto& n, bool transposed) {
  expect_attributes(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides",
                        "output_padding", "output_shape"});
  if (!transposed)
    for (const char* name : {"output_padding", "output_shape"})
      if (attr(n, name))
        refuse(n, std::string("attribute '") + name + "' is not supported on a Conv");
  const Value x = tensor(n, 0);
  const int sp = spatial_rank_of(n, x);
  const TensorShape in = b_->shape(x.layer);
  Layer l = conv_layer(n, in, sp, transposed);
  const OnnxTensor& w = *constant(n, 1, true);
  const OnnxTensor* bias = constant(n, 2, false);
  const Pads p = transposed
                     ? transposed_pads(n, sp, in, &l)
                     : read_pads(n, sp, in, l.window.kernel, l.window.stride, l.window.dilation);
  l.window.pad = common(p);
  l.bias = bias != nullptr;
  if (bias && element_count(bias->dims) != l.out_channels)
    refuse(n, fmt::format("bias '{}' has {} values for {} output channels", n.input(2),
                          element_count(bias->dims), l.out_channels));
  l.name = layer_name(n);
  NamedParams& params = params_[l.name];
  params.weight = w.values;
  if (bias)
    params.bias = bias->values;
  if (!transposed) {
    l.inputs = {pad_rest(n, x.layer, x.rank, p, l.window.pad, 1, 0.0f, l.name + ".pad")};
    emit(n, l, x.rank);
    return;
  }
  l.inputs = {x.layer};
  const int id = emit(n, l, x.rank, "\x01" + l.name);
  const int cropped = pad_rest(n, id, x.rank, p, l.window.pad, -1, 0.0f, l.name + ".crop");
  values_[n.output(0)] = Value{cropped, x.rank, nullptr};
}

// A conv / conv_transpose layer from the node's weight and attributes (no pads yet).
Layer Importer::conv_layer(const onnx::NodeProto& n, const TensorShape& in, int sp,
                           bool transposed) const {
  const OnnxTensor& w = *constant(n, 1, true);
  if (static_cast<int>(w.dims.size()) != sp + 2)
    refuse(n, fmt::format("weight '{}' has dims {}; expected rank {}", n.input(1), dims_str(w.dims),
                          sp + 2));
  const int64_t group = attr_int(n, "group", 1);
  if (group < 1 || group > in.c)
    refuse(n, fmt::format("group {} is out of range for {} input channels", group, in.c));
  Layer l;
  l.op = transposed ? OpKind::kConvTranspose : OpKind::kConv;
  l.groups = static_cast<int>(group);
  l.out_channels = transposed ? w.dims[1] * group : w.dims[0];
  const int64_t w_in = transposed ? w.dims[0] : w.dims[1] * group;
  if (w_in != in.c)
    refuse(n, fmt::format("weight '{}' has dims {}, which needs {} input channels; the input has "
                          "{}",
                          n.input(1), dims_str(w.dims), w_in, in.c));
  const std::vector<int64_t> kdims(w.dims.begin() + 2, w.dims.end());
  const std::vector<int64_t> kattr = attr_ints(n, "kernel_shape");
  if (!kattr.empty() && kattr != kdims)
    refuse(n, fmt::format("kernel_shape {} does not match weight '{}' of dims {}", dims_str(kattr),
                          n.input(1), dims_str(w.dims)));
  l.window.kernel = triple(kdims, sp, 1);
  l.window.stride = spatial_attr(n, "strides", sp, 1);
  l.window.dilation = spatial_attr(n, "dilations", sp, 1);
  if (transposed)
    l.output_pad = spatial_attr(n, "output_padding", sp, 0);
  return l;
}

// A ConvTranspose's begin and end pads: explicit, or (ONNX's rule) from the total padding
// that auto_pad SAME_* (output = input · stride) or output_shape asks for, SAME_UPPER putting
// the smaller half first and the others the larger half. A negative end pad (output_shape
// beyond the full output) extends the far end: it becomes output padding (`l->output_pad`).
Importer::Pads Importer::transposed_pads(const onnx::NodeProto& n, int sp, const TensorShape& in,
                                         Layer* l) const {
  const std::string autopad = attr_string(n, "auto_pad", "NOTSET");
  const std::vector<int64_t> shape = attr_ints(n, "output_shape");
  if (autopad != "NOTSET" && autopad != "SAME_UPPER" && autopad != "SAME_LOWER" &&
      autopad != "VALID")
    refuse(n, "auto_pad '" + autopad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  if (autopad == "VALID" || (autopad == "NOTSET" && shape.empty()))
    return read_pads(n, sp, in, l->window.kernel, {1, 1, 1}, l->window.dilation);
  const std::vector<int64_t> explicit_pads = attr_ints(n, "pads");
  if (!shape.empty() &&
      std::any_of(explicit_pads.begin(), explicit_pads.end(), [](int64_t v) { return v != 0; }))
    refuse(n, "has both pads and output_shape; give one");
  if (!shape.empty() && static_cast<int>(shape.size()) != sp)
    refuse(n, fmt::format("output_shape has {} values for {} spatial dims", shape.size(), sp));
  Pads p;
  for (int i = 0; i < sp; ++i) {
    const auto a = static_cast<size_t>(3 - sp + i);
    const Window& w = l->window;
    const int64_t full = (in.dim(static_cast<int>(a)) - 1) * w.stride[a] +
                         int64_t{w.dilation[a]} * (w.kernel[a] - 1) + 1 + l->output_pad[a];
    const int64_t want =
        shape.empty() ? in.dim(static_cast<int>(a)) * w.stride[a] : shape[static_cast<size_t>(i)];
    const int64_t total = full - want;
    const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); // floor(total / 2)
    const int64_t begin = autopad == "SAME_UPPER" ? half : total - half;
    const int64_t end = total - begin;
    if (begin < 0)
      refuse(n, fmt::format("output_shape {} extends the output before its start (pads {}, {}); "
                            "brickdl extends transposed convs at the far end only",
                            dims_str(shape), begin, end));
    p.begin[a] = static_cast<int>(begin);
    p.end[a] = static_cast<int>(std::max<int64_t>(end, 0));
    l->output_pad[a] += static_cast<int>(std::max<int64_t>(-end, 0));
  }
  return p;
}

void Importer::concat(const onnx::NodeProto& n) {
  expect_attributes(n, {"axis"});
  const Value first = tensor(n, 0);
  const int64_t axis = attr_int(n, "axis", 1);
  const int ch = channel_axis(first.rank);
  if (axis != ch && axis != ch - first.rank)
    refuse(n, fmt::format("concatenates along axis {} of a rank-{} tensor; brickdl concatenates "
                          "channels (axis {})",
                          axis, first.rank, ch));
  Layer l;
  l.op = OpKind::kConcat;
  for (int i = 0; i < n.input_size(); ++i) {
    const Value v = tensor(n, i);
    if (v.rank != first.rank)
      refuse(n, fmt::format("input {} has rank {}, input 0 rank {}", i, v.rank, first.rank));
    l.inputs.push_back(v.layer);
  }
  emit(n, l, first.rank);
}

// Identity and Dropout (at inference) pass their input on: no layer.
void Importer::identity(const onnx::NodeProto& n, bool dropout) {
  if (dropout && n.input_size() > 2 && !n.input(2).empty()) {
    const OnnxTensor* training = constant(n, 2, true);
    if (!training->values.empty() && training->values[0] != 0)
      refuse(n, "training_mode is on; brickdl runs inference");
  }
  alias(n, value(n, 0).layer >= 0 ? tensor(n, 0) : value(n, 0));
}

void Importer::batch_norm(const onnx::NodeProto& n) {
  expect_attributes(n, {"epsilon", "momentum", "training_mode", "spatial"});
  if (attr_int(n, "training_mode", 0) != 0)
    refuse(n, "training_mode is on; brickdl runs inference");
  const Value x = tensor(n, 0);
  if (x.rank < 2)
    refuse(n, "needs an input of rank 2 or more (N, C, ...), got rank 1");
  const int64_t c = b_->shape(x.layer).c;
  std::vector<float> stats[4];
  const char* names[4] = {"scale", "B", "mean", "var"};
  for (int i = 0; i < 4; ++i) {
    const OnnxTensor& t = *constant(n, i + 1, true);
    if (static_cast<int64_t>(t.values.size()) != c)
      refuse(n, fmt::format("{} '{}' has {} values for {} channels", names[i], n.input(i + 1),
                            t.values.size(), c));
    stats[i] = t.values;
  }
  Layer l = unary(OpKind::kBatchNorm, x.layer);
  l.name = layer_name(n);
  NamedParams& p = params_[l.name];
  batch_norm_affine(stats[0], stats[1], stats[2], stats[3], attr_float(n, "epsilon", 1e-5f),
                    &p.weight, &p.bias);
  emit(n, l, x.rank);
}

void Importer::sigmoid(const onnx::NodeProto& n) {
  expect_attributes(n, {});
  const Value x = tensor(n, 0);
  // SiLU: Mul(x, Sigmoid(x)), the sigmoid read by that Mul only.
  const onnx::NodeProto* m = only_reader(n.output(0));
  if (m && m->op_type() == "Mul" && m->input_size() == 2 && m->domain().empty()) {
    const std::string& other = m->input(0) == n.output(0) ? m->input(1) : m->input(0);
    if (other == n.input(0)) {
      Layer l = unary(OpKind::kSilu, x.layer);
      l.name = layer_name(*m);
      emit(*m, l, x.rank);
      skipped_.insert(m);
      return;
    }
  }
  emit(n, unary(OpKind::kSigmoid, x.layer), x.rank);
}

// HardSwish; HardSigmoid with torch's alpha 1/6 and beta 1/2; Gelu (exact; opset 20, or one
// node from the pattern pass's rewrite of x · (erf(x / √2) + 1) · 1/2).
void Importer::activation(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  const Value x = tensor(n, 0);
  if (op == "HardSwish") {
    expect_attributes(n, {});
    emit(n, unary(OpKind::kHardSwish, x.layer), x.rank);
  } else if (op == "HardSigmoid") {
    expect_attributes(n, {"alpha", "beta"});
    const float alpha = attr_float(n, "alpha", 0.2f), beta = attr_float(n, "beta", 0.5f);
    if (std::fabs(alpha - 1.0f / 6.0f) > 1e-6f || beta != 0.5f)
      refuse(n, fmt::format("alpha {} and beta {}: brickdl's hard_sigmoid is torch's (alpha 1/6, "
                            "beta 0.5)",
                            alpha, beta));
    emit(n, unary(OpKind::kHardSigmoid, x.layer), x.rank);
  } else {
    expect_attributes(n, {"approximate"});
    if (const std::string a = attr_string(n, "approximate", "none"); a != "none")
      refuse(n, "approximate '" + a + "' is not supported (none: the exact, erf GELU)");
    emit(n, unary(OpKind::kGelu, x.layer), x.rank);
  }
}

void Importer::clip(const onnx::NodeProto& n) {
  expect_attributes(n, {"min", "max"});
  const Value x = tensor(n, 0);
  Layer l = unary(OpKind::kClip, x.layer);
  l.clip_min = attr_float(n, "min", std::numeric_limits<float>::lowest());
  l.clip_max = attr_float(n, "max", std::numeric_limits<float>::max());
  for (int i = 1; i <= 2; ++i) {
    const OnnxTensor* t = constant(n, i, false);
    if (!t)
      continue;
    if (t->values.size() != 1)
      refuse(n, fmt::format("{} must be a scalar", i == 1 ? "min" : "max"));
    (i == 1 ? l.clip_min : l.clip_max) = t->values[0];
  }
  if (!(l.clip_min <= l.clip_max))
    refuse(n, fmt::format("min {} exceeds max {}", l.clip_min, l.clip_max));
  emit(n, l, x.rank);
}

// Add / Sub / Mul / Div of two tensors of one shape; Mul of (N, C, ...) by one value per image and
// channel (N, C, 1, ...), either way round: the squeeze-excitation multiply (channel_mul); any of
// the four by a constant scalar or per-channel vector (affine_by_constant).
void Importer::elementwise(const onnx::NodeProto& n) {
  expect_attributes(n, {});
  const std::string& op = n.op_type();
  const Value a = value(n, 0);
  const Value b = value(n, 1);
  if (a.layer < 0 && b.layer < 0)
    refuse(n, "both inputs are constants; brickdl needs one computed from the graph input");
  if (a.layer >= 0 && b.layer >= 0) {
    const TensorShape sa = b_->shape(a.layer), sb = b_->shape(b.layer);
    const bool vector_b = sb.spatial() == 1 && sa.spatial() > 1; // x · s, or s · x
    const TensorShape& sv = vector_b ? sb : sa;
    const TensorShape& sx = vector_b ? sa : sb;
    if (op == "Mul" && a.rank == b.rank && a.rank >= 3 && sv.spatial() == 1 && sv.n == sx.n &&
        sv.c == sx.c && !(sa == sb)) {
      Layer l;
      l.op = OpKind::kChannelMul;
      l.inputs = vector_b ? std::vector<int>{a.layer, b.layer} : std::vector<int>{b.layer, a.layer};
      emit(n, l, a.rank);
      return;
    }
    // Numpy broadcasting between two computed tensors of one rank (core/graph.h).
    TensorShape out;
    if (a.rank != b.rank || !broadcast_shape(sa, sb, &out))
      refuse(n, "inputs of shapes " + dims_str(onnx_dims(sa, a.rank)) + " and " +
                    dims_str(onnx_dims(sb, b.rank)) +
                    " must be equal, or of one rank with extent 1 on the axes where they differ "
                    "(brickdl broadcasts two computed tensors so, the batch excepted)");
    Layer l;
    l.op = op == "Add"   ? OpKind::kAdd
           : op == "Sub" ? OpKind::kSub
           : op == "Div" ? OpKind::kDiv
                         : OpKind::kMul;
    l.inputs = {a.layer, b.layer};
    emit(n, l, a.rank);
    return;
  }
  const Value x = a.layer >= 0 ? a : b;
  const OnnxTensor& c = *(a.layer >= 0 ? b : a).constant;
  if (static_cast<int>(c.dims.size()) > x.rank)
    refuse(n, fmt::format("the constant of dims {} has a higher rank than the tensor (rank {}); "
                          "broadcasting would grow the output",
                          dims_str(c.dims), x.rank));
  affine_by_constant(n, x, c, a.layer < 0);
}

// x·c, x + c, x − c, c − x or x / c for a constant c that is a scalar or one value per
// channel: a batch_norm (scale and shift per channel). c / x is refused.
void Importer::affine_by_constant(const onnx::NodeProto& n, const Value x, const OnnxTensor& c,
                                  bool constant_first) {
  const std::string& op = n.op_type();
  const bool mul = op == "Mul" || op == "Div";
  const TensorShape s = b_->shape(x.layer);
  const int64_t count = element_count(c.dims);
  // Per channel: dims (C, 1, ..., 1) aligned to the trailing axes, or (1, C, 1, ...).
  bool per_channel = count == s.c && count > 1;
  if (per_channel) {
    const int lead = x.rank - static_cast<int>(c.dims.size()); // leading axes c lacks
    for (size_t i = 0; i < c.dims.size(); ++i) {
      const int axis = lead + static_cast<int>(i);
      if (c.dims[i] != 1 && axis != channel_axis(x.rank))
        per_channel = false;
    }
  }
  if (count != 1 && !per_channel)
    refuse(n, fmt::format("{} a constant of dims {}; brickdl takes a scalar or one value per "
                          "channel ({} channels) here",
                          op == "Mul"   ? "multiplies by"
                          : op == "Add" ? "adds"
                          : op == "Sub" ? "subtracts"
                                        : "divides by",
                          dims_str(c.dims), s.c));
  if (op == "Div" && constant_first)
    refuse(n, "divides a constant by a computed tensor; brickdl divides by constants only");
  Layer l = unary(OpKind::kBatchNorm, x.layer);
  l.name = layer_name(n);
  NamedParams& p = params_[l.name];
  const auto channels = static_cast<size_t>(s.c);
  p.weight.assign(channels, 1.0f);
  p.bias.assign(channels, 0.0f);
  for (size_t ch = 0; ch < channels; ++ch) {
    const float v = c.values[count == 1 ? 0 : ch];
    if (op == "Div")
      p.weight[ch] = 1.0f / v;
    else if (mul)
      p.weight[ch] = v;
    else if (op == "Add")
      p.bias[ch] = v;
    else if (constant_first) // c − x
      p.weight[ch] = -1.0f, p.bias[ch] = v;
    else
      p.bias[ch] = -v;
  }
  emit(n, l, x.rank);
}

void Importer::pool(const onnx::NodeProto& n, bool max) {
  expect_attributes(n, {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
                        "pads", "strides", "storage_order"});
  if (!max) // opset 19 gave AveragePool dilations
    for (int64_t d : attr_ints(n, "dilations"))
      if (d != 1)
        refuse(n, fmt::format("dilations {} on AveragePool are not supported (1)", d));
  // storage_order orders the Indices output only, which node() refuses (one output).
  const Value x = tensor(n, 0);
  const int sp = spatial_rank_of(n, x);
  const TensorShape in = b_->shape(x.layer);
  Layer l = unary(max ? OpKind::kMaxPool : OpKind::kAvgPool, x.layer);
  const std::vector<int64_t> k = attr_ints(n, "kernel_shape");
  if (static_cast<int>(k.size()) != sp)
    refuse(n, fmt::format("kernel_shape has {} values for {} spatial dims", k.size(), sp));
  l.window.kernel = spatial_attr(n, "kernel_shape", sp, 1);
  l.window.stride = spatial_attr(n, "strides", sp, 1);
  l.window.dilation = spatial_attr(n, "dilations", sp, 1);
  l.ceil_mode = attr_int(n, "ceil_mode", 0) != 0;
  l.count_include_pad = attr_int(n, "count_include_pad", 0) != 0;
  const Pads p = read_pads(n, sp, in, l.window.kernel, l.window.stride, l.window.dilation);
  l.window.pad = common(p);
  if (p.begin != p.end && l.ceil_mode)
    refuse(n, "pads that differ at the two ends with ceil_mode are not supported");
  if (l.ceil_mode)
    check_ceil_mode(n, l, in, max);
  l.name = layer_name(n);
  if (p.begin != p.end && !max && !l.count_include_pad) {
    avg_pool_cropped(n, x, l, p);
    return;
  }
  // The rest of uneven pads as a pad layer: −inf never wins a max; zeros count in an average
  // that counts the padding (count_include_pad 1), as ONNX's do.
  const float fill = max ? -std::numeric_limits<float>::infinity() : 0.0f;
  l.inputs = {pad_rest(n, x.layer, x.rank, p, l.window.pad, 1, fill, l.name + ".pad")};
  emit(n, l, x.rank);
}

// ceil_mode: ONNX's extent is ⌈(in + pads − window) / stride⌉ + 1 on every axis; brickdl's
// (PyTorch's) drops a last window that starts in the end padding, and averages a window that
// overhangs the padded input over its part inside. Refused where they differ.
void Importer::check_ceil_mode(const onnx::NodeProto& n, const Layer& l, const TensorShape& in,
                               bool max) const {
  const Window& w = l.window;
  for (int a = 0; a < 3; ++a) {
    const int64_t span = int64_t{w.dilation[a]} * (w.kernel[a] - 1) + 1;
    const int64_t num = in.dim(a) + 2 * int64_t{w.pad[a]} - span;
    if (num < 0)
      continue; // the shape rule refuses it
    const int64_t onnx = (num + w.stride[a] - 1) / w.stride[a] + 1;
    const int64_t ours =
        window_out_extent(in.dim(a), w.kernel[a], w.stride[a], w.pad[a], w.dilation[a], true);
    if (onnx != ours)
      refuse(n, fmt::format("ceil_mode: the last window starts in the end padding; ONNX keeps it "
                            "({} outputs), brickdl (PyTorch) drops it ({})",
                            onnx, ours));
    if (!max && l.count_include_pad && (onnx - 1) * w.stride[a] + span > in.dim(a) + 2 * w.pad[a])
      refuse(n, "ceil_mode with count_include_pad: the last window overhangs the padded input, "
                "whose divisor ONNX and brickdl count differently");
  }
}

// An average that does not count the padding, with pads that differ at the two ends: pooled
// with the larger pad at both ends (the padding never counts), then the outputs ONNX does
// not have cropped. Windows line up when the extra begin pad is a multiple of the stride.
void Importer::avg_pool_cropped(const onnx::NodeProto& n, const Value x, Layer l, const Pads& p) {
  const TensorShape in = b_->shape(x.layer);
  Pads crop;
  for (size_t a = 0; a < 3; ++a) {
    const Window& w = l.window;
    const int big = std::max(p.begin[a], p.end[a]);
    if ((big - p.begin[a]) % w.stride[a] != 0)
      refuse(n, fmt::format("pads {} and {} with stride {} and count_include_pad 0 are not "
                            "supported (the windows of even padding do not line up)",
                            p.begin[a], p.end[a], w.stride[a]));
    const int64_t span = int64_t{w.dilation[a]} * (w.kernel[a] - 1) + 1;
    const int64_t onnx =
        (in.dim(static_cast<int>(a)) + p.begin[a] + p.end[a] - span) / w.stride[a] + 1;
    const int64_t ours = window_out_extent(in.dim(static_cast<int>(a)), w.kernel[a], w.stride[a],
                                           big, w.dilation[a], false);
    crop.begin[a] = (big - p.begin[a]) / w.stride[a];
    crop.end[a] = static_cast<int>(ours - onnx - crop.begin[a]);
    l.window.pad[a] = big;
  }
  l.inputs = {x.layer};
  const int id = emit(n, l, x.rank, "\x01" + l.name);
  values_[n.output(0)] =
      Value{pad_rest(n, id, x.rank, crop, {0, 0, 0}, -1, 0.0f, l.name + ".crop"), x.rank, nullptr};
}

void Importer::resize(const onnx::NodeProto& n) {
  // Opset 18's antialias filters only when downscaling, which brickdl refuses; its axes and
  // keep_aspect_ratio_policy are read by resize_scales.
  expect_attributes(n, {"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a",
                        "exclude_outside", "extrapolation_value", "keep_aspect_ratio_policy",
                        "mode", "nearest_mode"});
  const Value x = tensor(n, 0);
  const int sp = spatial_rank_of(n, x);
  const TensorShape in = b_->shape(x.layer);
  const std::vector<int64_t> dims = onnx_dims(in, x.rank);
  const std::vector<double> scales = resize_scales(n, dims);
  const double r = scales.back();
  const auto scale = static_cast<int>(std::lround(r));
  bool ok = scales[0] == 1.0 && scales[1] == 1.0 && scale >= 1 && r == scale;
  for (int a = 0; a < sp; ++a)
    ok = ok && scales[static_cast<size_t>(2 + a)] == r;
  if (!ok)
    refuse(n, fmt::format("scales [{}] are not one integer factor on every spatial axis (and 1 "
                          "on N and C)",
                          fmt::join(scales, ", ")));
  const std::string mode = attr_string(n, "mode", "nearest");
  const std::string coord =
      resize_coordinate_mode(attr_string(n, "coordinate_transformation_mode", "half_pixel"));
  const std::string nearest = attr_string(n, "nearest_mode", "round_prefer_floor");
  Layer l = unary(OpKind::kUpsample, x.layer);
  l.upsample_scale = scale;
  if (mode == "nearest") {
    // With an integer factor, floor(dst / r) is what asymmetric + floor computes, and what the
    // half-pixel modes give when rounding (the source is never at a half).
    const bool half = coord == "half_pixel" || coord == "pytorch_half_pixel";
    const bool round = nearest == "round_prefer_floor" || nearest == "round_prefer_ceil";
    if (!((coord == "asymmetric" && nearest == "floor") || (half && round)))
      refuse(n, "nearest resize with coordinate_transformation_mode '" + coord +
                    "' and nearest_mode '" + nearest +
                    "' is not supported (asymmetric + floor, or half_pixel + round_prefer_*)");
  } else if (mode == "linear") {
    if (coord != "half_pixel" && coord != "pytorch_half_pixel")
      refuse(n, "linear resize with coordinate_transformation_mode '" + coord +
                    "' is not supported (half_pixel, pytorch_half_pixel)");
    l.bilinear = true;
  } else {
    refuse(n, "mode '" + mode + "' is not supported (nearest, linear)");
  }
  if (sp == 1 && scale != 1)
    refuse(n, "a 1-D resize is not supported");
  emit(n, l, x.rank);
}

// One scale per axis of `dims`, from the node's constant scales or sizes input and its
// attributes (scales_of_every_axis).
std::vector<double> Importer::resize_scales(const onnx::NodeProto& n,
                                            const std::vector<int64_t>& dims) {
  std::string why;
  const std::vector<int64_t> axes =
      resize_axes(attr_ints(n, "axes"), static_cast<int64_t>(dims.size()), &why);
  if (!why.empty())
    refuse(n, why);
  const OnnxTensor* scales = constant(n, 2, false);
  const OnnxTensor* sizes = scales && !scales->values.empty() ? nullptr : constant(n, 3, false);
  std::vector<double> result = scales_of_every_axis(
      dims, axes, scales, sizes, attr_string(n, "keep_aspect_ratio_policy", "stretch"), &why);
  if (!why.empty())
    refuse(n, why);
  return result;
}

// ReduceMean / ReduceMax over every spatial axis of an (N, C, ...) tensor: the global average
// pool, or a max pool whose window is the whole input; keepdims 0 leaves (N, C), the same
// values in brickdl's layout. The axes are an attribute before opset 18 and an input since.
void Importer::reduce(const onnx::NodeProto& n, bool max) {
  expect_attributes(n, {"axes", "keepdims", "noop_with_empty_axes"});
  const Value x = tensor(n, 0);
  spatial_rank_of(n, x);
  const std::vector<int64_t> axes = reduce_axes(attr_ints(n, "axes"), constant(n, 1, false));
  if (axes.empty() && attr_int(n, "noop_with_empty_axes", 0) != 0) {
    alias(n, x);
    return;
  }
  std::set<int64_t> want;
  for (int64_t a : axes)
    want.insert(a < 0 ? a + x.rank : a);
  std::set<int64_t> spatial;
  for (int64_t a = 2; a < x.rank; ++a)
    spatial.insert(a);
  if (want != spatial)
    refuse(n, fmt::format("reduces axes [{}]; brickdl reduces every spatial axis ([{}]) of an "
                          "(N, C, ...) tensor",
                          fmt::join(axes, ", "), fmt::join(spatial, ", ")));
  const int rank = attr_int(n, "keepdims", 1) != 0 ? x.rank : 2;
  if (!max) {
    emit(n, unary(OpKind::kGlobalAvgPool, x.layer), rank);
    return;
  }
  const TensorShape in = b_->shape(x.layer);
  Layer l = unary(OpKind::kMaxPool, x.layer);
  l.window.kernel = {static_cast<int>(in.d), static_cast<int>(in.h), static_cast<int>(in.w)};
  emit(n, l, rank);
}

void Importer::gemm(const onnx::NodeProto& n, bool matmul) {
  if (!matmul)
    expect_attributes(n, {"alpha", "beta", "transA", "transB"});
  const Value x = tensor(n, 0);
  if (x.rank != 2)
    refuse(n, fmt::format("input '{}' has rank {}; brickdl's linear layer reads a flat (N, C) "
                          "tensor",
                          n.input(0), x.rank));
  const int64_t in = b_->shape(x.layer).c;
  const OnnxTensor& w = *constant(n, 1, true);
  if (!matmul && attr_int(n, "transA", 0) != 0)
    refuse(n, "transA 1 is not supported");
  const bool trans_b = !matmul && attr_int(n, "transB", 0) != 0;
  if (w.dims.size() != 2 || w.dims[trans_b ? 1 : 0] != in)
    refuse(n, fmt::format("weight '{}' of dims {} does not fit {} input features", n.input(1),
                          dims_str(w.dims), in));
  const int64_t out = w.dims[trans_b ? 0 : 1];
  Layer l = unary(OpKind::kLinear, x.layer);
  l.out_channels = out;
  l.name = layer_name(n);
  NamedParams& p = params_[l.name];
  const float alpha = matmul ? 1.0f : attr_float(n, "alpha", 1.0f);
  const float beta = matmul ? 1.0f : attr_float(n, "beta", 1.0f);
  p.weight.resize(w.values.size());
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      p.weight[static_cast<size_t>(o * in + i)] =
          alpha * w.values[static_cast<size_t>(trans_b ? o * in + i : i * out + o)];
  const OnnxTensor* c = matmul ? nullptr : constant(n, 2, false);
  std::string output = n.output(0);
  // MatMul followed by Add (its only reader) of a constant per output or scalar: the bias.
  if (const onnx::NodeProto* add = only_reader(n.output(0));
      matmul && add && add->op_type() == "Add" && add->domain().empty()) {
    const std::string& other = add->input(0) == n.output(0) ? add->input(1) : add->input(0);
    if (const auto it = constants_.find(other);
        it != constants_.end() && per_output(it->second, out)) {
      c = &it->second;
      skipped_.insert(add);
      output = add->output(0);
    }
  }
  if (c) {
    if (!per_output(*c, out))
      refuse(n, fmt::format("bias of dims {} is not a scalar or one value per output ({} "
                            "outputs); brickdl's linear layer adds a bias per output",
                            dims_str(c->dims), out));
    l.bias = true;
    p.bias.resize(static_cast<size_t>(out));
    const bool scalar = c->values.size() == 1;
    for (int64_t o = 0; o < out; ++o)
      p.bias[static_cast<size_t>(o)] = beta * c->values[static_cast<size_t>(scalar ? 0 : o)];
  }
  emit(n, l, 2, output);
}

// Whether `c` broadcasts over (batch, out) as one value per output or one value: dims [],
// [1], [out], [1, 1] or [1, out].
bool Importer::per_output(const OnnxTensor& c, int64_t out) {
  if (c.dims.size() > 2)
    return false;
  for (size_t i = 0; i + 1 < c.dims.size(); ++i)
    if (c.dims[i] != 1)
      return false;
  return c.dims.empty() || c.dims.back() == 1 || c.dims.back() == out;
}

// The dynamo exporter's as_strided of a contiguous tensor: Reshape to 1-D, read only by a
// Gather on axis 0 of the constant indices 0, 1, 2, ... laid out in the input's own dims — the
// input itself. True when `n` (the Reshape of a tensor of ONNX dims `dims`) is one.
bool Importer::identity_gather(const onnx::NodeProto& n, const std::vector<int64_t>& dims) {
  const onnx::NodeProto* g = only_reader(n.output(0));
  if (!g || g->op_type() != "Gather" || g->input_size() != 2 || g->input(0) != n.output(0) ||
      attr_int(*g, "axis", 0) != 0)
    return false;
  const auto c = constants_.find(g->input(1));
  // (indices past 2^24 are not exact in the float copy)
  if (c == constants_.end() || c->second.dims != dims || c->second.values.size() > (1u << 24))
    return false;
  for (size_t i = 0; i < c->second.values.size(); ++i)
    if (c->second.values[i] != static_cast<float>(i))
      return false;
  values_[g->output(0)] = tensor(n, 0);
  skipped_.insert(g);
  return true;
}

void Importer::reshape(const onnx::NodeProto& n, bool flatten_op) {
  const Value x = tensor(n, 0);
  const TensorShape s = b_->shape(x.layer);
  if (flatten_op) {
    expect_attributes(n, {"axis"});
    const int64_t axis = attr_int(n, "axis", 1);
    if (x.rank < 2 || (axis != 1 && axis != 1 - x.rank))
      refuse(n, fmt::format("flattens a rank-{} tensor from axis {}; brickdl flattens (N, C, ...) "
                            "to (N, C·spatial) (axis 1)",
                            x.rank, axis));
  } else {
    expect_attributes(n, {"allowzero"});
    const std::vector<int64_t> dims = onnx_dims(s, x.rank);
    const std::vector<int64_t> target = reshape_target(n, dims);
    if (!target.empty() && target.size() <= 5 && shape_of(target) == s) {
      alias(n, Value{x.layer, static_cast<int>(target.size()), nullptr}); // the same layout
      return;
    }
    if (target.size() == 1 && identity_gather(n, dims))
      return;
    if (!(x.rank >= 2 && target == std::vector<int64_t>{s.n, s.c * s.spatial()}))
      refuse(n, fmt::format("reshapes {} to {}; brickdl reshapes only to (N, C·spatial) or to "
                            "dims of the same layout",
                            dims_str(dims), dims_str(target)));
  }
  if (x.rank == 2) {
    alias(n, x);
    return;
  }
  emit(n, unary(OpKind::kFlatten, x.layer), 2);
}

// A Reshape's target dims with ONNX's rules applied: 0 copies the input's dim (unless
// allowzero), one −1 is what the others leave.
std::vector<int64_t> Importer::reshape_target(const onnx::NodeProto& n,
                                              const std::vector<int64_t>& dims) const {
  const OnnxTensor& shape = *constant(n, 1, true);
  const bool allowzero = attr_int(n, "allowzero", 0) != 0;
  std::vector<int64_t> t(shape.values.begin(), shape.values.end());
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == 0 && !allowzero && i < dims.size())
      t[i] = dims[i];
    if (t[i] == -1 && infer < 0)
      infer = static_cast<int>(i);
    else if (t[i] <= 0)
      refuse(n,
             fmt::format("shape {} has an empty or invalid dim; brickdl tensors are not empty",
                         dims_str(std::vector<int64_t>(shape.values.begin(), shape.values.end()))));
    else
      known *= t[i];
  }
  const int64_t count = element_count(dims);
  if (infer >= 0 && known > 0 && count % known == 0)
    t[static_cast<size_t>(infer)] = count / known;
  if (element_count(t) != count)
    refuse(n, fmt::format("shape {} does not hold the {} values of dims {}", dims_str(t), count,
                          dims_str(dims)));
  return t;
}

void Importer::pad(const onnx::NodeProto& n) {
  expect_attributes(n, {"mode"});
  const std::string mode = attr_string(n, "mode", "constant");
  if (mode != "constant")
    refuse(n, "mode '" + mode + "' is not supported (constant)");
  const Value x = tensor(n, 0);
  const int sp = spatial_rank_of(n, x);
  const OnnxTensor& pads = *constant(n, 1, true);
  const auto r = static_cast<size_t>(x.rank);
  std::string why;
  const std::vector<int64_t> v = pads_of_every_axis(pads, constant(n, 3, false), x.rank, &why);
  if (!why.empty())
    refuse(n, why);
  if (v[0] != 0 || v[1] != 0 || v[r] != 0 || v[r + 1] != 0)
    refuse(n, "pads the batch or channel axis; brickdl pads spatial axes only");
  Layer l = unary(OpKind::kPad, x.layer);
  const auto half = static_cast<std::ptrdiff_t>(r);
  l.pad_begin = triple(std::vector<int64_t>(v.begin() + 2, v.begin() + half), sp, 0);
  l.pad_end = triple(std::vector<int64_t>(v.begin() + half + 2, v.end()), sp, 0);
  if (const OnnxTensor* value = constant(n, 2, false); value && !value->values.empty())
    l.pad_value = value->values[0];
  emit(n, l, x.rank);
}

void Importer::channel_op(const onnx::NodeProto& n) {
  const Value x = tensor(n, 0);
  std::vector<const OnnxTensor*> c{nullptr};
  for (int i = 1; i < n.input_size(); ++i)
    c.push_back(n.input(i).empty() ? nullptr : value(n, i).constant);
  onnx_detail::ChannelOpPlan plan;
  const std::string why =
      onnx_detail::plan_channel_op(n, opset_, onnx_dims(b_->shape(x.layer), x.rank), c, &plan);
  if (!why.empty())
    refuse(n, why);
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const std::string& out = n.output(static_cast<int>(i));
    if (plan.outputs[i].alias) {
      values_[out] = x;
      continue;
    }
    Layer l = plan.outputs[i].layer;
    l.inputs = {x.layer};
    l.name = i == 0 ? layer_name(n) : out;
    if (l.op == OpKind::kLayerNorm)
      params_[l.name] = plan.params;
    emit(n, l, x.rank, out);
  }
}

} // namespace brickdl::onnx_detail
