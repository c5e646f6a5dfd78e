// ONNX export: one node per layer (two for silu and for an epilogue activation, and for a
// linear layer reading an unflattened (N, C, 1, ...) tensor: a Flatten first; three for a
// channel shuffle and a spatial layer norm), named after the layer, every tensor named after
// the layer that computes it. Every file is valid ONNX as ONNX Runtime checks it.
#include <algorithm>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "core/onnx.h"
#include "core/onnx/proto.h"

namespace brickdl {

namespace {

constexpr int64_t kExportOpset = 13;
constexpr int64_t kHardSwishOpset = 14;
constexpr int64_t kLayerNormOpset = 17;

// The ONNX dims of a tensor brickdl writes: rank 2 when flat, else 4 or 5.
std::vector<int64_t> onnx_shape(const TensorShape& s) {
  return onnx_detail::onnx_dims(s, s.spatial_rank == 0 ? 2 : s.spatial_rank + 2);
}

class Exporter {
public:
  Exporter(const Graph& g, const ParamStore& params) : g_(g), params_(params) {}

  onnx::ModelProto run() {
    onnx::ModelProto m;
    m.set_ir_version(7);
    m.set_producer_name("brickdl");
    m.set_model_version(1);
    auto* op = m.add_opset_import();
    op->set_domain("");
    // HardSwish came with opset 14, LayerNormalization with 17; other graphs keep the older
    // opset. (Gelu, opset 20, goes out as torch's Erf form.)
    const auto holds = [&](OpKind k) {
      return std::any_of(g_.layers().begin(), g_.layers().end(),
                         [&](const Layer& l) { return l.op == k; });
    };
    op->set_version(holds(OpKind::kLayerNorm)   ? kLayerNormOpset
                    : holds(OpKind::kHardSwish) ? kHardSwishOpset
                                                : kExportOpset);
    graph_ = m.mutable_graph();
    graph_->set_name(g_.name());
    for (int id : g_.inputs())
      value_info(graph_->add_input(), out_name(id), g_.layer(id).out);
    for (const Layer& l : g_.layers())
      if (l.op != OpKind::kInput)
        layer(l);
    for (const GraphOutput& o : g_.output_refs())
      value_info(graph_->add_output(), output_value(o), g_.layer(o.layer).out);
    return m;
  }

private:
  static void value_info(onnx::ValueInfoProto* v, const std::string& name, const TensorShape& s) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : onnx_shape(s))
      t->mutable_shape()->add_dim()->set_dim_value(d);
  }

  // The tensor that holds layer id's output (after its epilogue activation, if any); the one
  // input of a graph that has one is "input".
  std::string out_name(int id) const {
    return g_.is_input(id) && g_.num_inputs() == 1 ? "input" : g_.layer(id).name;
  }

  // The value a graph output leaves under: its layer's tensor; for a graph of several outputs,
  // an Identity of it under the output's own name where that differs and names no tensor (a
  // re-import then names the outputs as the graph did).
  std::string output_value(const GraphOutput& o) {
    const std::string tensor = out_name(o.layer);
    if (g_.outputs().size() == 1 || o.name == tensor || g_.find(o.name) >= 0 || o.name == "input")
      return tensor;
    add_node("Identity", o.name, {tensor}, o.name);
    return o.name;
  }

  onnx::NodeProto* add_node(const std::string& op, const std::string& name,
                            std::vector<std::string> inputs, const std::string& output) {
    onnx::NodeProto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : inputs)
      n->add_input(std::move(i));
    n->add_output(output);
    return n;
  }
  std::string initializer(const std::string& name, const std::vector<int64_t>& dims,
                          const std::vector<float>& values) {
    *graph_->add_initializer() = onnx_detail::tensor_to_proto(name, dims, values);
    return name;
  }
  std::string int_initializer(const std::string& name, const std::vector<int64_t>& values) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values)
      t->add_int64_data(v);
    return name;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  static void integer(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void real(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void text(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  // The spatial dims of a (d, h, w) triple for the layer's rank.
  std::vector<int64_t> spatial(const Layer& l, const std::array<int, 3>& v) const {
    const int rank = g_.layer(l.inputs.at(0)).out.spatial_rank == 3 ? 3 : 2;
    return rank == 3 ? std::vector<int64_t>{v[0], v[1], v[2]} : std::vector<int64_t>{v[1], v[2]};
  }
  void window(onnx::NodeProto* n, const Layer& l, bool dilation) const {
    ints(n, "kernel_shape", spatial(l, l.window.kernel));
    ints(n, "strides", spatial(l, l.window.stride));
    std::vector<int64_t> pads = spatial(l, l.window.pad);
    const std::vector<int64_t> end = pads;
    pads.insert(pads.end(), end.begin(), end.end());
    ints(n, "pads", pads);
    if (dilation)
      ints(n, "dilations", spatial(l, l.window.dilation));
  }

  const NamedParams& params(const Layer& l) const {
    const auto it = params_.find(l.name);
    if (it == params_.end())
      throw UserError("ONNX export: no parameters for layer '" + l.name + "'");
    return it->second;
  }

  void conv(const Layer& l, const std::string& in, const std::string& out) {
    const NamedParams& p = params(l);
    const bool transposed = l.op == OpKind::kConvTranspose;
    std::vector<std::string> inputs{in,
                                    initializer(l.name + ".weight", weight_dims(g_, l), p.weight)};
    if (l.bias)
      inputs.push_back(initializer(
          l.name + ".bias", {l.out_channels},
          p.bias.empty() ? std::vector<float>(static_cast<size_t>(l.out_channels), 0.0f) : p.bias));
    onnx::NodeProto* n = add_node(transposed ? "ConvTranspose" : "Conv", l.name, inputs, out);
    window(n, l, true);
    integer(n, "group", l.groups);
    if (transposed)
      ints(n, "output_padding", spatial(l, l.output_pad));
  }

  void batch_norm(const Layer& l, const std::string& in, const std::string& out) {
    const NamedParams& p = params(l);
    const std::vector<int64_t> dims = weight_dims(g_, l);
    const auto c = static_cast<size_t>(l.out.c);
    onnx::NodeProto* n = add_node("BatchNormalization", l.name,
                                  {in, initializer(l.name + ".scale", dims, p.weight),
                                   initializer(l.name + ".shift", dims, p.bias),
                                   initializer(l.name + ".mean", dims, std::vector<float>(c, 0.0f)),
                                   initializer(l.name + ".var", dims, std::vector<float>(c, 1.0f))},
                                  out);
    real(n, "epsilon", 0.0f);
  }

  // Whether global average pool `id` goes out flat, as torch writes x.mean([2, 3]) (ReduceMean,
  // keepdims 0): when only linear layers read it, so each Gemm gets the rank-2 input ONNX
  // requires, and a re-import reads the same pool back (no graph output: those keep their
  // (N, C, 1, ...) dims).
  bool flat_pool(int id) const {
    const Layer& l = g_.layer(id);
    const std::vector<int>& readers = g_.consumers(id);
    return l.op == OpKind::kGlobalAvgPool && !g_.is_output(id) && !readers.empty() &&
           std::all_of(readers.begin(), readers.end(),
                       [&](int r) { return g_.layer(r).op == OpKind::kLinear; });
  }

  void global_pool(const Layer& l, const std::string& in, const std::string& out) {
    if (!flat_pool(l.id)) {
      add_node("GlobalAveragePool", l.name, {in}, out);
      return;
    }
    std::vector<int64_t> axes;
    for (int64_t a = 2; a < static_cast<int64_t>(onnx_shape(l.out).size()); ++a)
      axes.push_back(a);
    onnx::NodeProto* n = add_node("ReduceMean", l.name, {in}, out); // axes: an attribute to 17
    ints(n, "axes", axes);
    integer(n, "keepdims", 0);
  }

  // Gemm reads a rank-2 tensor. brickdl's linear layer also reads an (N, C, 1, ...) one (a pool
  // with no flatten after it); unless that is a flat pool, a Flatten "<name>.flatten" comes
  // first (and a re-import has that flatten layer more, with the same output).
  void linear(const Layer& l, std::string in, const std::string& out) {
    const int x = l.inputs.at(0);
    if (g_.layer(x).out.spatial_rank != 0 && !flat_pool(x)) {
      const std::string flat = l.name + ".flatten";
      integer(add_node("Flatten", flat, {in}, flat), "axis", 1);
      in = flat;
    }
    const NamedParams& p = params(l);
    std::vector<std::string> inputs{in,
                                    initializer(l.name + ".weight", weight_dims(g_, l), p.weight)};
    if (l.bias)
      inputs.push_back(initializer(l.name + ".bias", {l.out_channels}, p.bias));
    onnx::NodeProto* n = add_node("Gemm", l.name, inputs, out);
    integer(n, "transB", 1);
  }

  void pool(const Layer& l, const std::string& in, const std::string& out) {
    const bool max = l.op == OpKind::kMaxPool;
    onnx::NodeProto* n = add_node(max ? "MaxPool" : "AveragePool", l.name, {in}, out);
    window(n, l, max);
    integer(n, "ceil_mode", l.ceil_mode ? 1 : 0);
    if (!max)
      integer(n, "count_include_pad", l.count_include_pad ? 1 : 0);
  }

  void upsample(const Layer& l, const std::string& in, const std::string& out) {
    std::vector<float> scales(onnx_shape(l.out).size(), static_cast<float>(l.upsample_scale));
    scales[0] = scales[1] = 1.0f;
    onnx::NodeProto* n = add_node(
        "Resize", l.name,
        {in, "", initializer(l.name + ".scales", {static_cast<int64_t>(scales.size())}, scales)},
        out);
    if (l.bilinear) {
      text(n, "mode", "linear");
      text(n, "coordinate_transformation_mode", "half_pixel");
    } else {
      text(n, "mode", "nearest");
      text(n, "coordinate_transformation_mode", "asymmetric");
      text(n, "nearest_mode", "floor");
    }
  }

  void pad(const Layer& l, const std::string& in, const std::string& out) {
    std::vector<int64_t> pads{0, 0};
    for (int64_t v : spatial(l, l.pad_begin))
      pads.push_back(v);
    pads.insert(pads.end(), {0, 0});
    for (int64_t v : spatial(l, l.pad_end))
      pads.push_back(v);
    add_node("Pad", l.name,
             {in, int_initializer(l.name + ".pads", pads),
              initializer(l.name + ".value", {}, {l.pad_value})},
             out);
  }

  void slice(const Layer& l, const std::string& in, const std::string& out) {
    add_node("Slice", l.name,
             {in, int_initializer(l.name + ".starts", {l.slice_begin}),
              int_initializer(l.name + ".ends", {l.slice_end}),
              int_initializer(l.name + ".axes", {1})},
             out);
  }

  // torch's export: Reshape [N, g, C/g, ...] → Transpose of the two channel axes → Reshape.
  void channel_shuffle(const Layer& l, const std::string& in, const std::string& out) {
    const std::vector<int64_t> dims = onnx_shape(l.out);
    std::vector<int64_t> split{dims[0], l.groups, dims[1] / l.groups}, perm{0, 2, 1};
    for (size_t a = 2; a < dims.size(); ++a) {
      split.push_back(dims[a]);
      perm.push_back(static_cast<int64_t>(a) + 1);
    }
    add_node("Reshape", l.name + ".split", {in, int_initializer(l.name + ".split_shape", split)},
             l.name + ".split");
    ints(add_node("Transpose", l.name + ".swap", {l.name + ".split"}, l.name + ".swap"), "perm",
         perm);
    add_node("Reshape", l.name, {l.name + ".swap", int_initializer(l.name + ".shape", dims)}, out);
  }

  // ConvNeXt's LayerNorm2d: Transpose to channels-last, LayerNormalization over the last axis,
  // Transpose back (a flat tensor needs no transposes).
  void layer_norm(const Layer& l, const std::string& in, const std::string& out) {
    const NamedParams& p = params(l);
    const auto rank = static_cast<int64_t>(onnx_shape(l.out).size());
    std::vector<int64_t> to_last{0}, to_first{0, rank - 1};
    for (int64_t a = 2; a < rank; ++a) {
      to_last.push_back(a);
      to_first.push_back(a - 1);
    }
    to_last.push_back(1);
    const bool spatial = rank > 2;
    const std::string x = spatial ? l.name + ".last" : in;
    const std::string y = spatial ? l.name + ".norm" : out;
    if (spatial)
      ints(add_node("Transpose", l.name + ".last", {in}, x), "perm", to_last);
    onnx::NodeProto* n = add_node("LayerNormalization", l.name,
                                  {x, initializer(l.name + ".gamma", {l.out.c}, p.weight),
                                   initializer(l.name + ".beta", {l.out.c}, p.bias)},
                                  y);
    integer(n, "axis", -1);
    real(n, "epsilon", l.epsilon);
    if (spatial)
      ints(add_node("Transpose", l.name + ".first", {y}, out), "perm", to_first);
  }

  // torch's hardsigmoid: HardSigmoid with alpha 1/6 (ONNX's default is 0.2), beta 1/2.
  void hard_sigmoid(const std::string& name, const std::string& x, const std::string& y) {
    onnx::NodeProto* n = add_node("HardSigmoid", name, {x}, y);
    real(n, "alpha", 1.0f / 6.0f);
    real(n, "beta", 0.5f);
  }

  // Gelu is opset 20: x · (erf(x / √2) + 1) · 1/2, as torch's TorchScript exporter writes it
  // (and the importer's pattern pass reads back as one gelu).
  void gelu(const std::string& name, const std::string& x, const std::string& y) {
    const std::string p = name + ".gelu";
    add_node("Div", p + ".div", {x, initializer(p + ".sqrt2", {}, {1.41421356237309515f})},
             p + ".div");
    add_node("Erf", p + ".erf", {p + ".div"}, p + ".erf");
    add_node("Add", p + ".add", {p + ".erf", initializer(p + ".one", {}, {1.0f})}, p + ".add");
    add_node("Mul", p + ".mul", {x, p + ".add"}, p + ".mul");
    add_node("Mul", name, {p + ".mul", initializer(p + ".half", {}, {0.5f})}, y);
  }

  // Activation `a` of layer l (its op, or its epilogue) from x to y, in the nodes the op's own
  // layer writes: silu as Sigmoid and Mul, clip with its range as inputs.
  void activation(Activation a, const Layer& l, const std::string& name, const std::string& x,
                  const std::string& y) {
    switch (a) {
    case Activation::kNone: break;
    case Activation::kRelu: add_node("Relu", name, {x}, y); break;
    case Activation::kLeakyRelu:
      real(add_node("LeakyRelu", name, {x}, y), "alpha", l.leaky_slope);
      break;
    case Activation::kSigmoid: add_node("Sigmoid", name, {x}, y); break;
    case Activation::kHardSigmoid: hard_sigmoid(name, x, y); break;
    case Activation::kHardSwish: add_node("HardSwish", name, {x}, y); break;
    case Activation::kGelu: gelu(name, x, y); break;
    case Activation::kSilu:
      add_node("Sigmoid", name + ".sigmoid", {x}, name + ".sigmoid");
      add_node("Mul", name, {x, name + ".sigmoid"}, y);
      break;
    case Activation::kClip:
      add_node("Clip", name,
               {x, initializer(name + ".min", {}, {l.clip_min}),
                initializer(name + ".max", {}, {l.clip_max})},
               y);
      break;
    }
  }

  // Long on purpose: one case per op.
  void layer(const Layer& l) {
    BRICKDL_CHECK(!l.bn_folded, "ONNX export takes unfused graphs (layer " << l.name << ")");
    std::vector<std::string> in;
    for (int i : l.inputs)
      in.push_back(out_name(i));
    // With an epilogue, the op writes "<name>.pre" and the activation "<name>".
    const bool epilogue = l.activation != Activation::kNone;
    const std::string out = epilogue ? l.name + ".pre" : l.name;
    switch (l.op) {
    case OpKind::kInput: break;
    case OpKind::kConv:
    case OpKind::kConvTranspose: conv(l, in[0], out); break;
    case OpKind::kBatchNorm: batch_norm(l, in[0], out); break;
    case OpKind::kRelu:
    case OpKind::kLeakyRelu:
    case OpKind::kSigmoid:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kGelu:
    case OpKind::kSilu:
    case OpKind::kClip: activation(op_activation(l.op), l, l.name, in[0], out); break;
    case OpKind::kChannelMul: add_node("Mul", l.name, in, out); break; // ONNX broadcasts
    case OpKind::kSub: add_node("Sub", l.name, in, out); break;
    case OpKind::kDiv: add_node("Div", l.name, in, out); break;
    case OpKind::kAdd: add_node("Add", l.name, in, out); break;
    case OpKind::kMul: add_node("Mul", l.name, in, out); break;
    case OpKind::kConcat: integer(add_node("Concat", l.name, in, out), "axis", 1); break;
    case OpKind::kMaxPool:
    case OpKind::kAvgPool: pool(l, in[0], out); break;
    case OpKind::kGlobalAvgPool: global_pool(l, in[0], out); break;
    case OpKind::kUpsample: upsample(l, in[0], out); break;
    case OpKind::kFlatten: integer(add_node("Flatten", l.name, in, out), "axis", 1); break;
    case OpKind::kLinear: linear(l, in[0], out); break;
    case OpKind::kPad: pad(l, in[0], out); break;
    case OpKind::kSlice: slice(l, in[0], out); break;
    case OpKind::kChannelShuffle: channel_shuffle(l, in[0], out); break;
    case OpKind::kLayerNorm: layer_norm(l, in[0], out); break;
    }
    if (epilogue)
      activation(l.activation, l, l.name + ".act", out, l.name);
  }

  const Graph& g_;
  const ParamStore& params_;
  onnx::GraphProto* graph_ = nullptr;
};

} // namespace

void export_onnx(const Graph& graph, const ParamStore& params, const std::string& path) {
  const onnx::ModelProto m = Exporter(graph, params).run();
  std::ofstream f(path, std::ios::binary);
  if (!f || !m.SerializeToOstream(&f) || !f.flush())
    throw UserError(path + ": cannot write the ONNX model");
}

} // namespace brickdl
