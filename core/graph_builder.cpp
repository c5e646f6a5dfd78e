#include "core/graph_builder.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/limits.h"

namespace brickdl {

namespace {

[[noreturn]] void shape_error(const Layer& l, const std::string& what) {
  throw ShapeError("layer '" + l.name + "' (" + op_name(l.op) + "): " + what);
}

std::string shapes_str(const std::vector<const TensorShape*>& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i)
      s += " and ";
    s += in[i]->str();
  }
  return s;
}

// The number of inputs the op's traits allow.
void check_arity(const Layer& l, const std::vector<const TensorShape*>& in) {
  const OpTraits& t = traits(l.op);
  const int n = static_cast<int>(in.size());
  if (t.max_inputs < 0 && n < t.min_inputs)
    shape_error(l, "takes at least " + std::to_string(t.min_inputs) + " inputs, got " +
                       std::to_string(n));
  if (t.max_inputs >= 0 && (n < t.min_inputs || n > t.max_inputs))
    shape_error(l, "takes " + std::to_string(t.min_inputs) + " input(s), got " + std::to_string(n));
}

// A spatial input, or a ShapeError.
void require_spatial(const Layer& l, const TensorShape& x) {
  if (x.spatial_rank == 0)
    shape_error(l, "needs a spatial input, got " + x.str());
}

void infer_window(Layer& l, const TensorShape& x) {
  require_spatial(l, x);
  const Window& w = l.window;
  for (int a = 0; a < 3; ++a) {
    if (w.kernel[a] < 1 || w.stride[a] < 1 || w.dilation[a] < 1 || w.pad[a] < 0)
      shape_error(l, "kernel, stride and dilation must be >= 1 and padding >= 0");
  }
  if (x.spatial_rank == 2 &&
      (w.kernel[0] != 1 || w.stride[0] != 1 || w.pad[0] != 0 || w.dilation[0] != 1))
    shape_error(l, "a 3-D window on the 2-D input " + x.str());
  l.out = x;
  for (int a = 0; a < 3; ++a) {
    const int64_t e =
        window_out_extent(x.dim(a), w.kernel[a], w.stride[a], w.pad[a], w.dilation[a], l.ceil_mode);
    if (e < 1) {
      const char* axis = a == 0 ? "depth" : a == 1 ? "height" : "width";
      shape_error(l, std::string("window of extent ") +
                         std::to_string(w.dilation[a] * (w.kernel[a] - 1) + 1) + " does not fit " +
                         axis + " " + std::to_string(x.dim(a)) + " (padding " +
                         std::to_string(w.pad[a]) + ") of input " + x.str());
    }
    (a == 0 ? l.out.d : a == 1 ? l.out.h : l.out.w) = e;
  }
}

int64_t kernel_volume(const Window& w) {
  return int64_t{w.kernel[0]} * w.kernel[1] * w.kernel[2];
}

} // namespace

int64_t window_out_extent(int64_t in, int kernel, int stride, int pad, int dilation,
                          bool ceil_mode) {
  const int64_t span = int64_t{dilation} * (kernel - 1) + 1;
  const int64_t num = in + 2 * int64_t{pad} - span;
  if (num < 0)
    return 0;
  int64_t out = (ceil_mode ? (num + stride - 1) / stride : num / stride) + 1;
  // PyTorch: in ceil mode the last window must start inside the input or left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad)
    --out;
  return out;
}

namespace {

void infer_conv(Layer& l, const TensorShape& x) {
  if (l.out_channels < 1)
    shape_error(l, "out_channels must be >= 1");
  if (l.groups < 1 || x.c % l.groups != 0 || l.out_channels % l.groups != 0)
    shape_error(l, "groups " + std::to_string(l.groups) + " must divide input channels " +
                       std::to_string(x.c) + " (input " + x.str() + ") and out_channels " +
                       std::to_string(l.out_channels));
  infer_window(l, x);
  l.out.c = l.out_channels;
  const int64_t per_out = (x.c / l.groups) * kernel_volume(l.window);
  // Saturating: the limits (core/limits.h) are checked on the result.
  l.params = saturating_add(saturating_mul(l.out_channels, per_out), l.bias ? l.out_channels : 0);
  l.macs = saturating_mul(checked_numel(l.out), per_out);
}

void infer_concat(Layer& l, const std::vector<const TensorShape*>& in) {
  l.out = *in[0];
  l.out.c = 0;
  for (const auto* s : in) {
    TensorShape a = *s, b = *in[0];
    a.c = b.c = 0;
    if (!(a == b))
      shape_error(l, "inputs must agree in all dims but channels, got " + shapes_str(in));
    l.out.c += s->c;
  }
}

void infer_upsample(Layer& l, const TensorShape& x) {
  if (l.upsample_scale < 1)
    shape_error(l, "scale must be >= 1");
  require_spatial(l, x);
  l.out = x;
  if (l.out.spatial_rank == 3)
    l.out.d *= l.upsample_scale;
  l.out.h *= l.upsample_scale;
  l.out.w *= l.upsample_scale;
}

void infer_linear(Layer& l, const TensorShape& x) {
  if (x.spatial_rank != 0 && x.spatial() != 1)
    shape_error(l, "needs a flat input (flatten first), got " + x.str());
  if (l.out_channels < 1)
    shape_error(l, "out_features must be >= 1");
  l.out = TensorShape{x.n, l.out_channels, 1, 1, 1, 0};
  l.params = saturating_add(saturating_mul(x.c, l.out_channels), l.bias ? l.out_channels : 0);
  l.macs = saturating_mul(x.n, saturating_mul(x.c, l.out_channels));
}

// ONNX ConvTranspose / PyTorch ConvTranspose: out = (in − 1)·s − 2p + d·(k − 1) + op + 1; the
// weight is [Cin][Cout/groups][kd][kh][kw]; every input pixel meets every tap once, so MACs are
// N · Cin · in_spatial · (Cout/groups) · kvol.
void infer_conv_transpose(Layer& l, const TensorShape& x) {
  require_spatial(l, x);
  if (l.out_channels < 1)
    shape_error(l, "out_channels must be >= 1");
  if (l.groups < 1 || x.c % l.groups != 0 || l.out_channels % l.groups != 0)
    shape_error(l, "groups " + std::to_string(l.groups) + " must divide input channels " +
                       std::to_string(x.c) + " and out_channels " + std::to_string(l.out_channels));
  const Window& w = l.window;
  l.out = x;
  l.out.c = l.out_channels;
  for (int a = 0; a < 3; ++a) {
    const bool unused = a == 0 && x.spatial_rank == 2;
    if (w.kernel[a] < 1 || w.stride[a] < 1 || w.dilation[a] < 1 || w.pad[a] < 0 ||
        l.output_pad[a] < 0)
      shape_error(l, "kernel, stride and dilation must be >= 1, padding and output_padding >= 0");
    if (unused && (w.kernel[a] != 1 || w.stride[a] != 1 || w.pad[a] != 0 || l.output_pad[a] != 0))
      shape_error(l, "a 3-D window on the 2-D input " + x.str());
    if (l.output_pad[a] >= std::max(w.stride[a], w.dilation[a]))
      shape_error(l, "output_padding must be smaller than the stride or the dilation");
    const int64_t e = (x.dim(a) - 1) * w.stride[a] - 2 * int64_t{w.pad[a]} +
                      int64_t{w.dilation[a]} * (w.kernel[a] - 1) + l.output_pad[a] + 1;
    if (e < 1)
      shape_error(l,
                  "padding " + std::to_string(w.pad[a]) + " leaves no output of input " + x.str());
    (a == 0 ? l.out.d : a == 1 ? l.out.h : l.out.w) = e;
  }
  const int64_t per_in = (l.out_channels / l.groups) * kernel_volume(w);
  l.params = saturating_add(saturating_mul(x.c, per_in), l.bias ? l.out_channels : 0);
  l.macs = saturating_mul(checked_numel(x), per_in);
}

void infer_pad(Layer& l, const TensorShape& x) {
  require_spatial(l, x);
  l.out = x;
  for (int a = 0; a < 3; ++a) {
    if (a == 0 && x.spatial_rank == 2 && (l.pad_begin[0] != 0 || l.pad_end[0] != 0))
      shape_error(l, "pads a depth the 2-D input " + x.str() + " does not have");
    const int64_t e = x.dim(a) + l.pad_begin[a] + l.pad_end[a];
    if (e < 1)
      shape_error(l, "negative pads leave nothing of input " + x.str());
    (a == 0 ? l.out.d : a == 1 ? l.out.h : l.out.w) = e;
  }
}

void infer_slice(Layer& l, const TensorShape& x) {
  if (l.slice_begin < 0 || l.slice_end > x.c || l.slice_begin >= l.slice_end)
    shape_error(l, "channels [" + std::to_string(l.slice_begin) + ", " +
                       std::to_string(l.slice_end) + ") are not a non-empty range of the " +
                       std::to_string(x.c) + " channels of input " + x.str());
  l.out = x;
  l.out.c = l.slice_end - l.slice_begin;
}

void infer_channel_shuffle(Layer& l, const TensorShape& x) {
  if (l.groups < 1 || x.c % l.groups != 0)
    shape_error(l, "groups " + std::to_string(l.groups) + " must divide the " +
                       std::to_string(x.c) + " channels of input " + x.str());
  l.out = x;
}

// Params: gamma and beta per channel; no MACs (only conv and linear count, graph.h).
void infer_layer_norm(Layer& l, const TensorShape& x) {
  if (!(l.epsilon > 0.0f) || !std::isfinite(l.epsilon))
    shape_error(l, "epsilon must be a finite number > 0");
  l.out = x;
  l.params = 2 * x.c;
}

// Binary elementwise ops broadcast as numpy does, per axis but the batch: equal extents, or
// 1 on either side (core/graph.h broadcast_axes).
void infer_broadcast(Layer& l, const std::vector<const TensorShape*>& in) {
  if (!broadcast_shape(*in[0], *in[1], &l.out))
    shape_error(l, "inputs must have equal shapes, or extent 1 on the axes where they differ "
                   "(broadcasting; the batch must agree), got " +
                       shapes_str(in));
}

} // namespace

void infer_layer(Layer& l, const std::vector<const TensorShape*>& in) {
  l.params = 0;
  l.macs = 0;
  check_arity(l, in);
  switch (l.op) {
  case OpKind::kInput: break;
  case OpKind::kConv: infer_conv(l, *in[0]); break;
  case OpKind::kBatchNorm:
    l.out = *in[0];
    l.params = 2 * l.out.c; // weight and bias; running mean/var are buffers
    break;
  case OpKind::kRelu:
  case OpKind::kLeakyRelu:
  case OpKind::kSigmoid:
  case OpKind::kSilu:
  case OpKind::kHardSwish:
  case OpKind::kHardSigmoid:
  case OpKind::kGelu: l.out = *in[0]; break;
  case OpKind::kChannelMul:
    if (in[1]->n != in[0]->n || in[1]->c != in[0]->c || in[1]->spatial() != 1)
      shape_error(l, "multiplies (N, C, ...) by one value per image and channel (N, C, 1, ...), "
                     "got " +
                         shapes_str(in));
    l.out = *in[0];
    break;
  case OpKind::kClip:
    if (!(l.clip_min <= l.clip_max))
      shape_error(l, "min must not exceed max");
    l.out = *in[0];
    break;
  case OpKind::kAdd:
  case OpKind::kMul:
  case OpKind::kSub:
  case OpKind::kDiv: infer_broadcast(l, in); break;
  case OpKind::kConcat: infer_concat(l, in); break;
  case OpKind::kMaxPool:
  case OpKind::kAvgPool: infer_window(l, *in[0]); break;
  case OpKind::kGlobalAvgPool:
    require_spatial(l, *in[0]);
    l.out = *in[0];
    l.out.d = l.out.h = l.out.w = 1;
    break;
  case OpKind::kUpsample: infer_upsample(l, *in[0]); break;
  case OpKind::kFlatten:
    l.out = TensorShape{in[0]->n, saturating_mul(in[0]->c, in[0]->spatial()), 1, 1, 1, 0};
    break;
  case OpKind::kLinear: infer_linear(l, *in[0]); break;
  case OpKind::kConvTranspose: infer_conv_transpose(l, *in[0]); break;
  case OpKind::kPad: infer_pad(l, *in[0]); break;
  case OpKind::kSlice: infer_slice(l, *in[0]); break;
  case OpKind::kChannelShuffle: infer_channel_shuffle(l, *in[0]); break;
  case OpKind::kLayerNorm: infer_layer_norm(l, *in[0]); break;
  }
}

namespace {

void check_input_shape(const std::string& graph, const std::string& input, const TensorShape& s) {
  if (s.n < 1 || s.c < 1 || s.d < 1 || s.h < 1 || s.w < 1)
    throw ShapeError("graph '" + graph + "': input '" + input + "' shape " + s.str() +
                     " must have every dimension >= 1");
  const std::string too_big = shape_limit_problem(s);
  if (!too_big.empty())
    throw ShapeError("graph '" + graph + "': input '" + input + "' " + too_big);
}

} // namespace

GraphBuilder::GraphBuilder(std::string graph_name, TensorShape input, DType dtype,
                           std::string input_name)
    : name_(std::move(graph_name)), dtype_(dtype), op_counters_(op_names().size(), 0) {
  check_input_shape(name_, input_name, input);
  Layer l;
  l.id = 0;
  l.name = std::move(input_name);
  l.op = OpKind::kInput;
  l.out = input;
  layers_.push_back(l);
}

int GraphBuilder::add_input(const TensorShape& shape, const std::string& name) {
  if (layers_.back().op != OpKind::kInput)
    throw ShapeError("graph '" + name_ + "': input '" + name +
                     "' comes after computed layers; declare every input first");
  check_input_shape(name_, name, shape);
  if (shape.n != layers_[0].out.n)
    throw ShapeError("graph '" + name_ + "': input '" + name + "' " + shape.str() + " has batch " +
                     std::to_string(shape.n) + ", input '" + layers_[0].name + "' " +
                     layers_[0].out.str() + " batch " + std::to_string(layers_[0].out.n) +
                     "; every input must have the same batch");
  for (const Layer& l : layers_)
    if (l.name == name)
      throw ShapeError("graph '" + name_ + "': two inputs are named '" + name + "'");
  Layer l;
  l.id = static_cast<int>(layers_.size());
  l.name = name;
  l.op = OpKind::kInput;
  l.out = shape;
  layers_.push_back(l);
  return l.id;
}

void GraphBuilder::mark_output(int id, const std::string& name) {
  const Layer& l = layer(id);
  const std::string out_name = name.empty() ? l.name : name;
  if (l.op == OpKind::kInput)
    throw ShapeError("graph '" + name_ + "': output '" + out_name + "' is the input '" + l.name +
                     "'; an output must be computed by a layer");
  for (const GraphOutput& o : outputs_) {
    if (o.layer == id)
      throw ShapeError("graph '" + name_ + "': outputs '" + o.name + "' and '" + out_name +
                       "' are both layer '" + l.name + "'");
    if (o.name == out_name)
      throw ShapeError("graph '" + name_ + "': two outputs are named '" + out_name + "'");
  }
  outputs_.push_back(GraphOutput{id, out_name});
}

const TensorShape& GraphBuilder::shape(int id) const {
  return layer(id).out;
}

const Layer& GraphBuilder::layer(int id) const {
  BRICKDL_CHECK(id >= 0 && id < static_cast<int>(layers_.size()), "no layer " << id);
  return layers_[static_cast<size_t>(id)];
}

std::string GraphBuilder::auto_name(OpKind op, const std::string& given) {
  if (!given.empty())
    return given;
  const int k = ++op_counters_[static_cast<size_t>(op)];
  return std::string(op_name(op)) + std::to_string(k);
}

int GraphBuilder::add_layer(Layer l) {
  l.id = static_cast<int>(layers_.size());
  l.name = auto_name(l.op, l.name);
  if (l.op == OpKind::kInput)
    shape_error(l, "an input is declared with add_input, before the computed layers");
  std::vector<const TensorShape*> in;
  for (int x : l.inputs) {
    if (x < 0 || x >= l.id)
      throw ShapeError("layer '" + l.name + "': input " + std::to_string(x) +
                       " is not an earlier layer");
    in.push_back(&layers_[static_cast<size_t>(x)].out);
  }
  if (l.id > kMaxLayers.max)
    shape_error(l, "is layer " + std::to_string(l.id) + "; " + limit_text(kMaxLayers));
  // The attributes first, so that no arithmetic of the inference can overflow.
  std::string too_big = attribute_limit_problem(l);
  if (!too_big.empty())
    shape_error(l, too_big);
  infer_layer(l, in);
  too_big = layer_limit_problem(l);
  if (!too_big.empty())
    shape_error(l, too_big);
  total_macs_ = saturating_add(total_macs_, l.macs);
  if (total_macs_ > kMaxGraphMacs.max)
    shape_error(l, "brings the graph to more than " + std::to_string(kMaxGraphMacs.max) +
                       " MACs; " + limit_text(kMaxGraphMacs));
  layers_.push_back(std::move(l));
  return layers_.back().id;
}

Window GraphBuilder::square_window(int x, int kernel, int stride, int pad, int dilation) const {
  Window w;
  const int first = shape(x).spatial_rank == 3 ? 0 : 1;
  for (int a = first; a < 3; ++a) {
    w.kernel[a] = kernel;
    w.stride[a] = stride;
    w.pad[a] = pad;
    w.dilation[a] = dilation;
  }
  return w;
}

int GraphBuilder::conv(int x, int64_t out_channels, const Window& w, int groups, bool bias,
                       const std::string& name) {
  Layer l;
  l.op = OpKind::kConv;
  l.name = name;
  l.inputs = {x};
  l.out_channels = out_channels;
  l.window = w;
  l.groups = groups;
  l.bias = bias;
  return add_layer(l);
}

int GraphBuilder::conv2d(int x, int64_t out_channels, int kernel, int stride, int pad, int dilation,
                         int groups, bool bias, const std::string& name) {
  Window w;
  w.kernel = {1, kernel, kernel};
  w.stride = {1, stride, stride};
  w.pad = {0, pad, pad};
  w.dilation = {1, dilation, dilation};
  return conv(x, out_channels, w, groups, bias, name);
}

int GraphBuilder::conv2d_rect(int x, int64_t out_channels, int kh, int kw, int ph, int pw,
                              int stride, bool bias, const std::string& name) {
  Window w;
  w.kernel = {1, kh, kw};
  w.stride = {1, stride, stride};
  w.pad = {0, ph, pw};
  return conv(x, out_channels, w, 1, bias, name);
}

int GraphBuilder::conv3d(int x, int64_t out_channels, int kernel, int stride, int pad, int dilation,
                         int groups, bool bias, const std::string& name) {
  Window w;
  w.kernel = {kernel, kernel, kernel};
  w.stride = {stride, stride, stride};
  w.pad = {pad, pad, pad};
  w.dilation = {dilation, dilation, dilation};
  return conv(x, out_channels, w, groups, bias, name);
}

namespace {
Layer unary(OpKind op, int x, const std::string& name) {
  Layer l;
  l.op = op;
  l.name = name;
  l.inputs = {x};
  return l;
}
} // namespace

int GraphBuilder::batch_norm(int x, const std::string& name) {
  return add_layer(unary(OpKind::kBatchNorm, x, name));
}

int GraphBuilder::relu(int x, const std::string& name) {
  return add_layer(unary(OpKind::kRelu, x, name));
}

int GraphBuilder::leaky_relu(int x, float slope, const std::string& name) {
  Layer l = unary(OpKind::kLeakyRelu, x, name);
  l.leaky_slope = slope;
  return add_layer(l);
}

int GraphBuilder::add(int a, int b, const std::string& name) {
  Layer l;
  l.op = OpKind::kAdd;
  l.name = name;
  l.inputs = {a, b};
  return add_layer(l);
}

int GraphBuilder::concat(const std::vector<int>& xs, const std::string& name) {
  Layer l;
  l.op = OpKind::kConcat;
  l.name = name;
  l.inputs = xs;
  return add_layer(l);
}

int GraphBuilder::max_pool(int x, const Window& w, bool ceil_mode, const std::string& name) {
  Layer l = unary(OpKind::kMaxPool, x, name);
  l.window = w;
  l.ceil_mode = ceil_mode;
  return add_layer(l);
}

int GraphBuilder::avg_pool(int x, const Window& w, bool count_include_pad, bool ceil_mode,
                           const std::string& name) {
  Layer l = unary(OpKind::kAvgPool, x, name);
  l.window = w;
  l.ceil_mode = ceil_mode;
  l.count_include_pad = count_include_pad;
  return add_layer(l);
}

int GraphBuilder::max_pool(int x, int kernel, int stride, int pad, bool ceil_mode,
                           const std::string& name) {
  return max_pool(x, square_window(x, kernel, stride, pad, 1), ceil_mode, name);
}

int GraphBuilder::avg_pool(int x, int kernel, int stride, int pad, bool count_include_pad,
                           const std::string& name) {
  return avg_pool(x, square_window(x, kernel, stride, pad, 1), count_include_pad, false, name);
}

int GraphBuilder::global_avg_pool(int x, const std::string& name) {
  return add_layer(unary(OpKind::kGlobalAvgPool, x, name));
}

int GraphBuilder::upsample(int x, int scale, bool bilinear, const std::string& name) {
  Layer l = unary(OpKind::kUpsample, x, name);
  l.upsample_scale = scale;
  l.bilinear = bilinear;
  return add_layer(l);
}

int GraphBuilder::flatten(int x, const std::string& name) {
  return add_layer(unary(OpKind::kFlatten, x, name));
}

int GraphBuilder::linear(int x, int64_t out_features, bool bias, const std::string& name) {
  Layer l = unary(OpKind::kLinear, x, name);
  l.out_channels = out_features;
  l.bias = bias;
  return add_layer(l);
}

int GraphBuilder::conv_transpose(int x, int64_t out_channels, const Window& w,
                                 const std::array<int, 3>& output_pad, int groups, bool bias,
                                 const std::string& name) {
  Layer l = unary(OpKind::kConvTranspose, x, name);
  l.out_channels = out_channels;
  l.window = w;
  l.output_pad = output_pad;
  l.groups = groups;
  l.bias = bias;
  return add_layer(l);
}

int GraphBuilder::activation(int x, Activation a, const Layer& params, const std::string& name) {
  if (a == Activation::kNone)
    throw ShapeError("graph '" + name_ + "': layer '" + name + "': no activation to add");
  Layer l = unary(activation_op(a), x, name);
  l.leaky_slope = params.leaky_slope;
  l.clip_min = params.clip_min;
  l.clip_max = params.clip_max;
  return add_layer(l);
}

int GraphBuilder::sigmoid(int x, const std::string& name) {
  return add_layer(unary(OpKind::kSigmoid, x, name));
}

int GraphBuilder::silu(int x, const std::string& name) {
  return add_layer(unary(OpKind::kSilu, x, name));
}

int GraphBuilder::hard_swish(int x, const std::string& name) {
  return add_layer(unary(OpKind::kHardSwish, x, name));
}

int GraphBuilder::hard_sigmoid(int x, const std::string& name) {
  return add_layer(unary(OpKind::kHardSigmoid, x, name));
}

int GraphBuilder::gelu(int x, const std::string& name) {
  return add_layer(unary(OpKind::kGelu, x, name));
}

int GraphBuilder::channel_mul(int x, int scale, const std::string& name) {
  Layer l = unary(OpKind::kChannelMul, x, name);
  l.inputs.push_back(scale);
  return add_layer(l);
}

int GraphBuilder::clip(int x, float lo, float hi, const std::string& name) {
  Layer l = unary(OpKind::kClip, x, name);
  l.clip_min = lo;
  l.clip_max = hi;
  return add_layer(l);
}

int GraphBuilder::mul(int a, int b, const std::string& name) {
  Layer l;
  l.op = OpKind::kMul;
  l.name = name;
  l.inputs = {a, b};
  return add_layer(l);
}

int GraphBuilder::sub(int a, int b, const std::string& name) {
  Layer l;
  l.op = OpKind::kSub;
  l.name = name;
  l.inputs = {a, b};
  return add_layer(l);
}

int GraphBuilder::div(int a, int b, const std::string& name) {
  Layer l;
  l.op = OpKind::kDiv;
  l.name = name;
  l.inputs = {a, b};
  return add_layer(l);
}

int GraphBuilder::pad(int x, const std::array<int, 3>& begin, const std::array<int, 3>& end,
                      float value, const std::string& name) {
  Layer l = unary(OpKind::kPad, x, name);
  l.pad_begin = begin;
  l.pad_end = end;
  l.pad_value = value;
  return add_layer(l);
}

int GraphBuilder::slice(int x, int64_t begin, int64_t end, const std::string& name) {
  Layer l = unary(OpKind::kSlice, x, name);
  l.slice_begin = begin;
  l.slice_end = end;
  return add_layer(l);
}

int GraphBuilder::channel_shuffle(int x, int groups, const std::string& name) {
  Layer l = unary(OpKind::kChannelShuffle, x, name);
  l.groups = groups;
  return add_layer(l);
}

int GraphBuilder::layer_norm(int x, float epsilon, const std::string& name) {
  Layer l = unary(OpKind::kLayerNorm, x, name);
  l.epsilon = epsilon;
  return add_layer(l);
}

int GraphBuilder::conv_bn_relu(int x, int64_t out_channels, int kernel, int stride, int pad,
                               int dilation, const std::string& prefix) {
  const bool three_d = shape(x).spatial_rank == 3;
  const auto nm = [&](const char* s) { return prefix.empty() ? std::string() : prefix + s; };
  const int c = three_d
                    ? conv3d(x, out_channels, kernel, stride, pad, dilation, 1, false, nm(".conv"))
                    : conv2d(x, out_channels, kernel, stride, pad, dilation, 1, false, nm(".conv"));
  return relu(batch_norm(c, nm(".bn")), nm(".relu"));
}

Graph GraphBuilder::build() const {
  return Graph(name_, dtype_, layers_, params_, outputs_);
}

} // namespace brickdl
