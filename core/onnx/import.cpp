// ONNX import: one pass over the nodes in topological order, building the graph with
// GraphBuilder (which infers and checks every shape) and the parameters from the initializers.
// This file is the pass's frame and its dispatch (core/onnx/importer.h shows the parts):
//  - a rank-1 tensor (L) is one flat row (1, L), its one axis brickdl's channel axis;
//  - a model whose output is its input (Identity / Dropout only) gets one copying layer.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/limits.h"
#include "core/onnx.h"
#include "core/onnx/channel_ops.h"
#include "core/onnx/importer.h"
#include "core/onnx/opset.h"
#include "core/onnx/patterns.h"
#include "core/onnx/proto.h"

namespace brickdl {

namespace onnx_detail {
std::string dims_str(const std::vector<int64_t>& d) {
  return "[" + fmt::format("{}", fmt::join(d, ", ")) + "]";
}

// The ONNX axis that is brickdl's channel axis: 1, or 0 for a rank-1 tensor (one flat row).
int channel_axis(int rank) {
  return rank == 1 ? 0 : 1;
}

// The brickdl shape of ONNX dims of rank 1 to 5: (L) is one flat row (1, L); (N, C) flat;
// (N, C, L) is (N, C, 1, L).
TensorShape shape_of(const std::vector<int64_t>& d) {
  const size_t rank = d.size();
  TensorShape s;
  if (rank == 1) {
    s.c = d[0];
    s.spatial_rank = 0;
    return s;
  }
  s.n = d[0];
  s.c = d[1];
  s.spatial_rank = rank == 2 ? 0 : rank == 5 ? 3 : 2;
  if (rank >= 3)
    s.w = d.back();
  if (rank >= 4)
    s.h = d[rank - 2];
  if (rank == 5)
    s.d = d[2];
  return s;
}

OnnxModel Importer::run() {
  if (const std::string why = check_opset(model_, &opset_); !why.empty())
    fail(why);
  graph_ = model_.graph();
  load_external_data();
  onnx_detail::rewrite_channel_patterns(graph_);
  const onnx::GraphProto& g = graph_;
  for (const auto& init : g.initializer())
    constants_[init.name()] = tensor_from_proto(init, where("initializer '" + init.name() + "'"));
  for (const auto& [name, t] : options_.constants)
    constants_[name] = t;
  for (const auto& n : g.node())
    if (n.op_type() == "Constant" && (n.domain().empty() || n.domain() == "ai.onnx"))
      constant_node(n);
  if (g.output_size() < 1)
    fail("the graph has no outputs");
  OnnxModel out;
  out.opset = opset_;
  std::vector<std::string> outputs;
  for (const auto& o : g.output())
    outputs.push_back(o.name());
  out.input_name = read_inputs(g);
  const std::vector<const onnx::NodeProto*> order = live_nodes_in_order(g, outputs);
  for (const onnx::NodeProto* n : order)
    if (!skipped_.count(n))
      node(*n);
  bind_outputs(outputs, order, out);
  b_->set_params(std::make_shared<const ParamStore>(std::move(params_)));
  out.graph = b_->build();
  return out;
}

// Weights the exporter stored beside the model (torch's dynamo exporter: NAME.onnx.data),
// read into the graph's copy before anything reads a tensor.
void Importer::load_external_data() {
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  for (auto& init : *graph_.mutable_initializer())
    onnx_detail::load_external_data(&init, dir.empty() ? "." : dir,
                                    where("initializer '" + init.name() + "'"));
  for (auto& n : *graph_.mutable_node())
    for (auto& a : *n.mutable_attribute())
      if (a.has_t())
        onnx_detail::load_external_data(a.mutable_t(), dir.empty() ? "." : dir,
                                        where(node_label(n)));
}

void Importer::constant_node(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) {
    if (a.name() == "value" && a.has_t()) {
      constants_[n.output(0)] = tensor_from_proto(a.t(), where(node_label(n)));
      return;
    }
    if (a.name() == "value_float") {
      constants_[n.output(0)] = OnnxTensor{{}, {a.f()}};
      return;
    }
    if (a.name() == "value_floats" || a.name() == "value_ints") {
      OnnxTensor t;
      for (float f : a.floats())
        t.values.push_back(f);
      for (int64_t i : a.ints())
        t.values.push_back(static_cast<float>(i));
      t.dims = {static_cast<int64_t>(t.values.size())};
      constants_[n.output(0)] = t;
      return;
    }
    if (a.name() == "value_int") {
      constants_[n.output(0)] = OnnxTensor{{}, {static_cast<float>(a.i())}};
      return;
    }
  }
  refuse(n, "a Constant needs a tensor, float or int value");
}

// The runtime inputs (graph inputs without a value), in the file's order: each one's shape
// from the file, the batch and size from the options (every input takes them), each layer
// named as in the file. Returns the first one's name.
std::string Importer::read_inputs(const onnx::GraphProto& g) {
  std::vector<const onnx::ValueInfoProto*> runtime;
  for (const auto& in : g.input())
    if (!constants_.count(in.name()))
      runtime.push_back(&in);
  if (runtime.empty())
    fail("the graph has no runtime input (every input has a value); brickdl graphs take at "
         "least one");
  for (const onnx::ValueInfoProto* in : runtime)
    read_input(*in);
  return runtime[0]->name();
}

void Importer::read_input(const onnx::ValueInfoProto& in) {
  const auto& type = in.type();
  if (!type.has_tensor_type())
    fail("input '" + in.name() + "' is not a tensor (a sequence, map or optional); brickdl " +
         "computes float tensors");
  if (const int t = type.tensor_type().elem_type(); t != onnx::TensorProto::FLOAT)
    fail("input '" + in.name() + "' is a tensor of " +
         onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t)) +
         "; brickdl computes float tensors");
  const std::vector<int64_t> d = input_dims(in);
  const int rank = static_cast<int>(d.size());
  const TensorShape s = shape_of(d);
  // The file's name for it, so that `brickdl-run --input NAME=FILE` finds a model's one input
  // as it finds one of several.
  const std::string& layer = in.name();
  int id = 0;
  try { // the builder checks the sizes of core/limits.h and that the batches agree
    if (b_) {
      id = b_->add_input(s, layer);
    } else {
      std::string name = options_.name;
      if (name.empty())
        name = std::filesystem::path(path_).stem().string();
      b_.emplace(name, s, options_.dtype, layer);
    }
  } catch (const ShapeError& e) {
    fail("input '" + in.name() + "': " + e.bare_message());
  }
  used_names_.insert(layer);
  values_[in.name()] = Value{id, rank, nullptr};
}

// The graph's outputs in the file's order. An output that is a runtime input, or the layer of
// an output before it (an Identity or a Dropout between them), gets a layer that copies it:
// a brickdl graph output is a computed layer, and each leaves the graph once. One output must
// be the last layer computed; several are marked under their ONNX names.
void Importer::bind_outputs(const std::vector<std::string>& names,
                            const std::vector<const onnx::NodeProto*>& order, OnnxModel& out) {
  std::set<int> taken;
  for (const std::string& name : names) {
    if (const auto in = values_.find(name);
        in != values_.end() && in->second.constant == nullptr &&
        (b_->layer(in->second.layer).op == OpKind::kInput || taken.count(in->second.layer)))
      for (const onnx::NodeProto* n : order)
        if (n->output(0) == name) {
          identity_layer(*n, in->second);
          break;
        }
    const auto it = values_.find(name);
    if (it == values_.end() || it->second.constant != nullptr ||
        b_->layer(it->second.layer).op == OpKind::kInput) {
      for (const onnx::NodeProto* n : order)
        for (int k = 1; k < n->output_size(); ++k)
          if (n->output(k) == name)
            refuse(*n, fmt::format("its output {} '{}' is a graph output; brickdl computes "
                                   "only this op's first output",
                                   k, name));
      fail("the output '" + name + "' is not computed from the inputs by any layer");
    }
    taken.insert(it->second.layer);
    out.outputs.push_back(
        OnnxOutput{name, onnx_dims(b_->shape(it->second.layer), it->second.rank)});
    if (names.size() > 1)
      b_->mark_output(it->second.layer, name);
  }
  if (names.size() == 1 && values_.at(names[0]).layer != last_layer_)
    fail("the output '" + names[0] + "' is not the last layer computed");
  out.output_name = out.outputs[0].name;
  out.output_dims = out.outputs[0].dims;
}

// The runtime input's extents within core/limits.h, checked on the ONNX dims before they
// become a TensorShape (whose int fields would wrap 2^31 and more): the same limits and
// words as the graph builder's check.
void Importer::check_input_extents(const std::string& name, const std::vector<int64_t>& d) const {
  const int rank = static_cast<int>(d.size());
  for (int i = 0; i < rank; ++i) {
    const SizeLimit& limit = rank > 1 && i == 0                     ? kMaxBatch
                             : i == channel_axis(rank) && rank <= 2 ? kMaxFeatures
                             : i == channel_axis(rank)              ? kMaxChannels
                                                                    : kMaxExtent;
    if (d[i] > limit.max)
      fail(fmt::format("input '{}' has {} on axis {}; {}", name, d[i], i, limit_text(limit)));
  }
}

// The runtime input's dims: the file's, with the options' batch and size; each known.
std::vector<int64_t> Importer::input_dims(const onnx::ValueInfoProto& in) const {
  const auto& dims = in.type().tensor_type().shape().dim();
  const int rank = dims.size();
  if (rank < 1 || rank > 5)
    fail(fmt::format("input '{}' has rank {}; brickdl takes rank 1 (L), 2 (N, C), 3 (N, C, L), "
                     "4 (N, C, H, W) or 5 (N, C, D, H, W)",
                     in.name(), rank));
  std::vector<int64_t> d(static_cast<size_t>(rank), -1);
  for (int i = 0; i < rank; ++i)
    if (dims[i].has_dim_value())
      d[static_cast<size_t>(i)] = dims[i].dim_value();
  if (options_.batch > 1 && rank == 1)
    fail(fmt::format("input '{}' has rank 1: no batch axis for `batch` {}", in.name(),
                     options_.batch));
  if (options_.batch > 0 && rank > 1)
    d[0] = options_.batch;
  else if (options_.dynamic_batch > 0 && rank > 1 && d[0] < 0)
    d[0] = options_.dynamic_batch;
  if (!options_.input_size.empty()) {
    if (static_cast<int>(options_.input_size.size()) != rank - 2)
      fail(fmt::format("input_size has {} extents; input '{}' has {} spatial dims",
                       options_.input_size.size(), in.name(), std::max(rank - 2, 0)));
    std::copy(options_.input_size.begin(), options_.input_size.end(), d.begin() + 2);
  }
  for (int i = 0; i < rank; ++i) {
    const int64_t x = d[static_cast<size_t>(i)];
    if (x == 0)
      fail(fmt::format("input '{}' has an empty axis {} (size 0); brickdl tensors are not empty",
                       in.name(), i));
    if (x > 0)
      continue;
    const bool batch = i == 0 && rank > 1, fixed = i == 1 || rank == 1;
    const std::string param = dims[i].has_dim_param() ? " '" + dims[i].dim_param() + "'" : "";
    fail(fmt::format("input '{}' has a dynamic {}{}: give it ({})", in.name(),
                     batch       ? "batch"
                     : rank == 1 ? "length"
                     : fixed     ? "channel count"
                                 : "spatial size",
                     param,
                     batch   ? "`batch`"
                     : fixed ? "it cannot be overridden"
                             : "`input_size`"));
  }
  check_input_extents(in.name(), d);
  return d;
}

// The nodes the output depends on, in an order where every producer comes first (Kahn's
// algorithm; nodes left over form a cycle).
std::vector<const onnx::NodeProto*>
Importer::live_nodes_in_order(const onnx::GraphProto& g, const std::vector<std::string>& outputs) {
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const auto& n : g.node())
    for (const auto& o : n.output())
      if (!o.empty())
        producer[o] = &n;
  std::set<const onnx::NodeProto*> live;
  std::vector<std::string> stack = outputs;
  while (!stack.empty()) {
    const std::string t = stack.back();
    stack.pop_back();
    const auto it = producer.find(t);
    if (it == producer.end() || constants_.count(t) || !live.insert(it->second).second)
      continue;
    for (const auto& i : it->second->input())
      if (!i.empty())
        stack.push_back(i);
  }
  // Ready nodes leave in file order, so a file already in topological order keeps its order
  // (merged groups are ranges of it).
  std::map<const onnx::NodeProto*, int> waiting;
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers;
  std::map<const onnx::NodeProto*, int> index;
  std::set<std::pair<int, const onnx::NodeProto*>> ready;
  std::vector<const onnx::NodeProto*> order;
  for (const auto& n : g.node()) {
    index[&n] = static_cast<int>(index.size());
    if (!live.count(&n))
      continue;
    int deps = 0;
    for (const auto& i : n.input()) {
      if (i.empty() || constants_.count(i) || !producer.count(i))
        continue;
      ++deps;
      readers[i].push_back(&n);
    }
    waiting[&n] = deps;
    if (deps == 0)
      ready.emplace(index[&n], &n);
  }
  while (!ready.empty()) {
    const onnx::NodeProto* n = ready.begin()->second;
    ready.erase(ready.begin());
    order.push_back(n);
    for (const auto& o : n->output())
      for (const onnx::NodeProto* r : readers[o])
        if (--waiting[r] == 0)
          ready.emplace(index[r], r);
  }
  if (order.size() != live.size())
    refuse(*on_cycle(waiting, producer), "the graph has a cycle through this node");
  for (const onnx::NodeProto* n : order)
    for (const auto& i : n->input())
      readers_of_[i].push_back(n);
  return order;
}

// A node on a cycle: nodes still waiting are on one or downstream of one, so walking up
// through waiting producers as many steps as there are nodes ends on a cycle.
const onnx::NodeProto*
Importer::on_cycle(const std::map<const onnx::NodeProto*, int>& waiting,
                   const std::map<std::string, const onnx::NodeProto*>& producer) const {
  const onnx::NodeProto* n = nullptr;
  for (const auto& [node, deps] : waiting)
    if (deps > 0 && !n)
      n = node;
  for (size_t step = 0; step < waiting.size(); ++step)
    for (const auto& i : n->input()) {
      const auto p = producer.find(i);
      if (p != producer.end() && !constants_.count(i) && waiting.count(p->second) &&
          waiting.at(p->second) > 0) {
        n = p->second;
        break;
      }
    }
  return n;
}

// ---- node inputs and layers ------------------------------------------------------------

Value Importer::value(const onnx::NodeProto& n, int i) const {
  if (i >= n.input_size() || n.input(i).empty())
    refuse(n, fmt::format("input {} is missing", i));
  const std::string& t = n.input(i);
  if (const auto c = constants_.find(t); c != constants_.end())
    return Value{-1, static_cast<int>(c->second.dims.size()), &c->second};
  const auto it = values_.find(t);
  if (it == values_.end())
    refuse(n, "input '" + t + "' is produced by no node, initializer or graph input");
  return it->second;
}

// Input i as a layer (not a constant).
Value Importer::tensor(const onnx::NodeProto& n, int i) const {
  const Value v = value(n, i);
  if (v.layer < 0)
    refuse(n, fmt::format("input {} ('{}') is a constant; brickdl needs it computed from the "
                          "graph input",
                          i, n.input(i)));
  return v;
}

// Input i as a constant, or null when absent and optional.
const OnnxTensor* Importer::constant(const onnx::NodeProto& n, int i, bool required) const {
  if (i >= n.input_size() || n.input(i).empty()) {
    if (required)
      refuse(n, fmt::format("input {} is missing", i));
    return nullptr;
  }
  const Value v = value(n, i);
  if (!v.constant)
    refuse(n, fmt::format("input {} ('{}') must be a constant (an initializer)", i, n.input(i)));
  return v.constant;
}

std::string Importer::layer_name(const onnx::NodeProto& n) {
  std::string name = n.name().empty() ? n.output(0) : n.name();
  if (name.empty() || used_names_.count(name))
    name = n.output(0);
  for (int k = 1; used_names_.count(name); ++k)
    name = (n.name().empty() ? n.output(0) : n.name()) + "_" + std::to_string(k);
  used_names_.insert(name);
  return name;
}

// Adds `l` (named after node n unless named) and binds the node's first output to it.
int Importer::emit(const onnx::NodeProto& n, Layer l, int rank, const std::string& output) {
  if (l.name.empty())
    l.name = layer_name(n);
  else
    used_names_.insert(l.name);
  int id = 0;
  try {
    id = b_->add_layer(l);
  } catch (const ShapeError& e) {
    refuse(n, e.bare_message());
  }
  values_[output.empty() ? n.output(0) : output] = Value{id, rank, nullptr};
  last_layer_ = id;
  return id;
}

// A model whose output is its input (Identity / Dropout only) computes it with one layer
// that copies: a batch_norm of scale 1 and shift 0 (x·1 + 0 is x), as a brickdl graph
// computes its output with a layer.
void Importer::identity_layer(const onnx::NodeProto& n, const Value v) {
  Layer l = unary(OpKind::kBatchNorm, v.layer);
  l.name = layer_name(n);
  const auto channels = static_cast<size_t>(b_->shape(v.layer).c);
  params_[l.name] =
      NamedParams{std::vector<float>(channels, 1.0f), std::vector<float>(channels, 0.0f)};
  emit(n, l, v.rank);
}

// The dispatch table of every op the importer reads.
void Importer::node(const onnx::NodeProto& n) {
  if (onnx_detail::is_channel_op(n))
    return fold_constant(n) ? void() : channel_op(n); // a Slice of a Shape is shape arithmetic
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    refuse(n, "op domain '" + n.domain() + "' is not supported (only the default ONNX domain)");
  const std::string& op = n.op_type();
  const bool dropout = op == "Dropout";
  check_outputs(n);
  if (op == "Constant")
    return; // read up front
  if (fold_constant(n))
    return;
  if (op == "Conv" || op == "ConvTranspose") {
    conv(n, op == "ConvTranspose");
  } else if (op == "BatchNormalization") {
    batch_norm(n);
  } else if (op == "Relu") {
    expect_attributes(n, {});
    emit(n, unary(OpKind::kRelu, tensor(n, 0).layer), tensor(n, 0).rank);
  } else if (op == "LeakyRelu") {
    expect_attributes(n, {"alpha"});
    Layer l = unary(OpKind::kLeakyRelu, tensor(n, 0).layer);
    l.leaky_slope = attr_float(n, "alpha", 0.01f);
    emit(n, l, tensor(n, 0).rank);
  } else if (op == "Sigmoid") {
    sigmoid(n);
  } else if (op == "Clip") {
    clip(n);
  } else if (op == "Add" || op == "Mul" || op == "Sub" || op == "Div") {
    elementwise(n);
  } else if (op == "HardSwish" || op == "HardSigmoid" || op == "Gelu") {
    activation(n);
  } else if (op == "Concat") {
    concat(n);
  } else if (op == "MaxPool" || op == "AveragePool") {
    pool(n, op == "MaxPool");
  } else if (op == "GlobalAveragePool") {
    const Value x = tensor(n, 0);
    spatial_rank_of(n, x);
    emit(n, unary(OpKind::kGlobalAvgPool, x.layer), x.rank);
  } else if (op == "ReduceMean" || op == "ReduceMax") {
    reduce(n, op == "ReduceMax");
  } else if (op == "Resize") {
    resize(n);
  } else if (op == "Gemm" || op == "MatMul") {
    gemm(n, op == "MatMul");
  } else if (op == "Flatten" || op == "Reshape") {
    reshape(n, op == "Flatten");
  } else if (op == "Identity" || dropout) {
    identity(n, dropout);
  } else if (op == "Pad") {
    pad(n);
  } else {
    refuse(n, "op '" + op + "' is not supported");
  }
}

// One output, or the first one only read: Dropout's mask and MaxPool's indices may be there
// when nothing reads them.
void Importer::check_outputs(const onnx::NodeProto& n) const {
  int outputs = 0;
  for (const auto& o : n.output())
    outputs += o.empty() ? 0 : 1;
  if (n.op_type() == "Split")
    return;
  const bool extra_unread = n.op_type() == "Dropout" || n.op_type() == "MaxPool";
  if (outputs != 1 && !(extra_unread && n.output_size() >= 1 && !n.output(0).empty()))
    refuse(n, fmt::format("has {} outputs; brickdl reads ops with one output", outputs));
  for (int i = 1; extra_unread && i < n.output_size(); ++i)
    if (!n.output(i).empty() && readers_of_.count(n.output(i)))
      refuse(n, fmt::format("its output {} ('{}') is read; brickdl computes the first output only",
                            i, n.output(i)));
}

// Shape of a tensor, and shape arithmetic on constants (onnx_detail::fold_constant_node): the
// result is a constant. False when the node computes on a tensor.
bool Importer::fold_constant(const onnx::NodeProto& n) {
  if (n.op_type() == "Shape") {
    expect_attributes(n, {"start", "end"});
    const Value x = value(n, 0);
    std::vector<int64_t> dims =
        x.constant ? x.constant->dims : onnx_dims(b_->shape(x.layer), x.rank);
    const auto rank = static_cast<int64_t>(dims.size());
    const auto clamp = [&](int64_t a) {
      return std::clamp(a < 0 ? a + rank : a, int64_t{0}, rank);
    };
    const int64_t start = clamp(attr_int(n, "start", 0)), end = clamp(attr_int(n, "end", rank));
    OnnxTensor t;
    t.integer = true;
    for (int64_t i = start; i < end; ++i)
      t.values.push_back(static_cast<float>(dims[static_cast<size_t>(i)]));
    t.dims = {static_cast<int64_t>(t.values.size())};
    constants_[n.output(0)] = std::move(t);
    return true;
  }
  std::vector<const OnnxTensor*> in;
  for (const auto& name : n.input()) {
    if (name.empty()) {
      in.push_back(nullptr);
      continue;
    }
    const auto c = constants_.find(name);
    if (c == constants_.end())
      return false;
    in.push_back(&c->second);
  }
  if (in.empty())
    return false;
  OnnxTensor out;
  if (!onnx_detail::fold_constant_node(n, in, where(node_label(n)), &out))
    return false;
  constants_[n.output(0)] = std::move(out);
  return true;
}

} // namespace onnx_detail

OnnxModel import_onnx(const std::string& path, const OnnxImportOptions& options) {
  const std::string bytes = onnx_detail::read_file(path);
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes) || !model.has_graph())
    throw UserError(path + ": not an ONNX model (the file does not parse as an ONNX ModelProto; "
                           "is it truncated?)");
  return onnx_detail::Importer(path, options, model).run();
}

} // namespace brickdl
