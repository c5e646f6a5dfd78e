#include "core/graph.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "core/graph_builder.h"

namespace brickdl {

int dtype_bytes(DType t) {
  switch (t) {
  case DType::kF32: return 4;
  case DType::kF16: return 2;
  case DType::kBF16: return 2;
  case DType::kTF32: return 4;
  }
  return 4;
}

const char* dtype_name(DType t) {
  switch (t) {
  case DType::kF32: return "fp32";
  case DType::kF16: return "fp16";
  case DType::kBF16: return "bf16";
  case DType::kTF32: return "tf32";
  }
  return "?";
}

std::vector<std::string> dtype_names() {
  return {dtype_name(DType::kF32), dtype_name(DType::kTF32), dtype_name(DType::kBF16),
          dtype_name(DType::kF16)};
}

bool parse_dtype(const std::string& s, DType* out) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "fp32" || l == "float32" || l == "float") {
    *out = DType::kF32;
  } else if (l == "tf32" || l == "tensorfloat32") {
    *out = DType::kTF32;
  } else if (l == "fp16" || l == "float16" || l == "half") {
    *out = DType::kF16;
  } else if (l == "bf16" || l == "bfloat16") {
    *out = DType::kBF16;
  } else {
    return false;
  }
  return true;
}

std::string TensorShape::str() const {
  std::string s = std::to_string(n) + "x" + std::to_string(c);
  if (spatial_rank == 3)
    s += "x" + std::to_string(d);
  if (spatial_rank >= 2)
    s += "x" + std::to_string(h) + "x" + std::to_string(w);
  return s;
}

namespace {
// Each epilogue and the activation op it is.
constexpr std::pair<Activation, OpKind> kActivationOps[] = {
    {Activation::kRelu, OpKind::kRelu},
    {Activation::kLeakyRelu, OpKind::kLeakyRelu},
    {Activation::kClip, OpKind::kClip},
    {Activation::kSigmoid, OpKind::kSigmoid},
    {Activation::kSilu, OpKind::kSilu},
    {Activation::kHardSwish, OpKind::kHardSwish},
    {Activation::kHardSigmoid, OpKind::kHardSigmoid},
    {Activation::kGelu, OpKind::kGelu},
};
} // namespace

const char* activation_name(Activation a) {
  return a == Activation::kNone ? "none" : op_name(activation_op(a));
}

Activation op_activation(OpKind op) {
  for (const auto& [a, o] : kActivationOps)
    if (o == op)
      return a;
  return Activation::kNone;
}

OpKind activation_op(Activation a) {
  for (const auto& [x, o] : kActivationOps)
    if (x == a)
      return o;
  BRICKDL_CHECK(false, "activation " << static_cast<int>(a) << " has no op");
  return OpKind::kInput;
}

namespace {
uint64_t next_graph_uid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
} // namespace

std::array<bool, 4> broadcast_axes(const TensorShape& operand, const TensorShape& out) {
  const std::array<int64_t, 4> a{operand.c, operand.d, operand.h, operand.w};
  const std::array<int64_t, 4> o{out.c, out.d, out.h, out.w};
  std::array<bool, 4> r{};
  for (size_t i = 0; i < 4; ++i)
    r[i] = a[i] == 1 && o[i] != 1;
  return r;
}

bool is_broadcast(const TensorShape& operand, const TensorShape& out) {
  const std::array<bool, 4> b = broadcast_axes(operand, out);
  return b[0] || b[1] || b[2] || b[3];
}

bool broadcast_shape(const TensorShape& a, const TensorShape& b, TensorShape* out) {
  const auto fits = [](int64_t x, int64_t y) { return x == y || x == 1 || y == 1; };
  if (a.n != b.n || a.spatial_rank != b.spatial_rank || !fits(a.c, b.c) || !fits(a.d, b.d) ||
      !fits(a.h, b.h) || !fits(a.w, b.w))
    return false;
  *out = a;
  out->c = std::max(a.c, b.c);
  out->d = std::max(a.d, b.d);
  out->h = std::max(a.h, b.h);
  out->w = std::max(a.w, b.w);
  return true;
}

bool broadcasts(const Layer& consumer, const TensorShape& operand) {
  const OpTraits& t = traits(consumer.op);
  return t.spatial == SpatialRule::kSame && t.channels == ChannelRule::kSame &&
         is_broadcast(operand, consumer.out);
}

Activation applied_activation(const Layer& l) {
  switch (l.op) {
  case OpKind::kRelu: return Activation::kRelu;
  case OpKind::kLeakyRelu: return Activation::kLeakyRelu;
  default: return l.activation;
  }
}

Graph::Graph(std::string name, DType dtype, std::vector<Layer> layers,
             std::shared_ptr<const ParamStore> params, std::vector<GraphOutput> outputs)
    : uid_(next_graph_uid()), name_(std::move(name)), dtype_(dtype), layers_(std::move(layers)),
      params_(std::move(params)), outputs_(std::move(outputs)) {
  consumers_.assign(layers_.size(), {});
  for (const auto& l : layers_) {
    BRICKDL_CHECK(l.id == static_cast<int>(&l - layers_.data()), "layer ids must be indices");
    for (int in : l.inputs) {
      BRICKDL_CHECK(in >= 0 && in < l.id, "layer " << l.name << " reads a later layer");
      consumers_[static_cast<size_t>(in)].push_back(l.id);
    }
  }
  while (num_inputs_ < size() && layers_[static_cast<size_t>(num_inputs_)].op == OpKind::kInput)
    ++num_inputs_;
  for (int id = num_inputs_; id < size(); ++id)
    BRICKDL_CHECK(layers_[static_cast<size_t>(id)].op != OpKind::kInput,
                  "input layer " << layer(id).name << " after a computed layer");
  if (outputs_.empty() && !layers_.empty())
    outputs_.push_back(GraphOutput{size() - 1, layers_.back().name});
  for (const GraphOutput& o : outputs_) {
    BRICKDL_CHECK(o.layer >= num_inputs_ && o.layer < size(),
                  "graph output " << o.name << " is layer " << o.layer << ", not a computed layer");
    BRICKDL_CHECK(std::find(output_ids_.begin(), output_ids_.end(), o.layer) == output_ids_.end(),
                  "layer " << layer(o.layer).name << " is two graph outputs");
    output_ids_.push_back(o.layer);
  }
}

std::vector<int> Graph::inputs() const {
  std::vector<int> ids(static_cast<size_t>(num_inputs_));
  for (int i = 0; i < num_inputs_; ++i)
    ids[static_cast<size_t>(i)] = i;
  return ids;
}

bool Graph::is_output(int id) const {
  return std::find(output_ids_.begin(), output_ids_.end(), id) != output_ids_.end();
}

int Graph::output() const {
  BRICKDL_CHECK(output_ids_.size() == 1, "graph " << name_ << " has " << output_ids_.size()
                                                  << " outputs; the caller expects one");
  return output_ids_[0];
}

const TensorShape& Graph::input_shape() const {
  BRICKDL_CHECK(num_inputs_ == 1,
                "graph " << name_ << " has " << num_inputs_ << " inputs; the caller expects one");
  return layers_[0].out;
}

int64_t Graph::total_params() const {
  int64_t s = 0;
  for (const auto& l : layers_)
    s += l.params;
  return s;
}

int64_t Graph::total_macs() const {
  int64_t s = 0;
  for (const auto& l : layers_)
    s += l.macs;
  return s;
}

int64_t Graph::input_bytes(int id) const {
  int64_t s = 0;
  for (int in : layer(id).inputs)
    s += layer(in).out.numel();
  return s * dtype_bytes(dtype_);
}

int64_t Graph::output_bytes(int id) const {
  return layer(id).out.numel() * dtype_bytes(dtype_);
}

int64_t Graph::weight_bytes(int id) const {
  return layer(id).params * dtype_bytes(dtype_);
}

int64_t Graph::activation_bytes() const {
  int64_t s = 0;
  for (const auto& l : layers_)
    if (l.op != OpKind::kInput)
      s += output_bytes(l.id);
  return s;
}

int Graph::find(const std::string& layer_name) const {
  for (const auto& l : layers_)
    if (l.name == layer_name)
      return l.id;
  return -1;
}

std::vector<int64_t> weight_dims(const Graph& g, const Layer& l) {
  if (l.op == OpKind::kBatchNorm || l.op == OpKind::kLayerNorm)
    return {l.out.c};
  if (l.op != OpKind::kConv && l.op != OpKind::kConvTranspose && l.op != OpKind::kLinear)
    return {};
  const TensorShape& in = g.layer(l.inputs.at(0)).out;
  if (l.op == OpKind::kLinear)
    return {l.out_channels, in.c * in.spatial()};
  std::vector<int64_t> dims = l.op == OpKind::kConv
                                  ? std::vector<int64_t>{l.out_channels, in.c / l.groups}
                                  : std::vector<int64_t>{in.c, l.out_channels / l.groups};
  for (int a = in.spatial_rank == 3 ? 0 : 1; a < 3; ++a)
    dims.push_back(l.window.kernel[static_cast<size_t>(a)]);
  return dims;
}

void batch_norm_affine(const std::vector<float>& gamma, const std::vector<float>& beta,
                       const std::vector<float>& mean, const std::vector<float>& var, double eps,
                       std::vector<float>* scale, std::vector<float>* shift) {
  const size_t n = gamma.size();
  BRICKDL_CHECK(beta.size() == n && mean.size() == n && var.size() == n, "batch-norm statistics");
  scale->resize(n);
  shift->resize(n);
  for (size_t c = 0; c < n; ++c) {
    const double s = static_cast<double>(gamma[c]) / std::sqrt(static_cast<double>(var[c]) + eps);
    (*scale)[c] = static_cast<float>(s);
    (*shift)[c] = static_cast<float>(static_cast<double>(beta[c]) - mean[c] * s);
  }
}

Graph fuse_for_inference(const Graph& g) {
  // absorbed_into[i] = id (in g) of the layer whose output now stands for layer i's output.
  const int n = g.size();
  std::vector<int> rep(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    rep[static_cast<size_t>(i)] = i;
  std::vector<bool> dropped(static_cast<size_t>(n), false);
  std::vector<Layer> layers = g.layers();

  for (int i = 0; i < n; ++i) {
    Layer& l = layers[static_cast<size_t>(i)];
    if (l.inputs.size() != 1)
      continue;
    const int p = rep[static_cast<size_t>(l.inputs[0])];
    Layer& prod = layers[static_cast<size_t>(p)];
    // The producer may absorb this layer only if this layer is its only reader, and its own
    // output does not leave the graph.
    if (g.consumers(l.inputs[0]).size() != 1 || g.is_output(l.inputs[0]))
      continue;
    const OpTraits& into = traits(prod.op);
    const bool bn_fold = l.op == OpKind::kBatchNorm && into.folds_batch_norm &&
                         prod.activation == Activation::kNone && !prod.bn_folded;
    const bool act_fold =
        traits(l.op).is_activation && into.takes_epilogue && prod.activation == Activation::kNone;
    if (!bn_fold && !act_fold)
      continue;
    if (bn_fold) {
      prod.bn_folded = true;
      prod.bias = true;
    } else {
      prod.activation = op_activation(l.op);
      prod.leaky_slope = l.leaky_slope;
      prod.clip_min = l.clip_min;
      prod.clip_max = l.clip_max;
    }
    prod.fused_from.push_back(l.name);
    dropped[static_cast<size_t>(i)] = true;
    rep[static_cast<size_t>(i)] = p;
  }

  // Renumber the surviving layers and re-infer (the folded conv now has a bias).
  std::vector<int> new_id(static_cast<size_t>(n), -1);
  GraphBuilder b(g.name(), g.layer(0).out, g.dtype(), g.layer(0).name);
  b.set_params(g.params());
  new_id[0] = 0;
  for (int i = 1; i < g.num_inputs(); ++i)
    new_id[static_cast<size_t>(i)] = b.add_input(g.layer(i).out, g.layer(i).name);
  for (int i = g.num_inputs(); i < n; ++i) {
    if (dropped[static_cast<size_t>(i)])
      continue;
    Layer l = layers[static_cast<size_t>(i)];
    for (int& in : l.inputs)
      in = new_id[static_cast<size_t>(rep[static_cast<size_t>(in)])];
    new_id[static_cast<size_t>(i)] = b.add_layer(l);
  }
  for (const GraphOutput& o : g.output_refs())
    b.mark_output(new_id[static_cast<size_t>(rep[static_cast<size_t>(o.layer)])], o.name);
  return b.build();
}

} // namespace brickdl
