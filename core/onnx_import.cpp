// ONNX import: one pass over the nodes in topological order, building the graph with
// GraphBuilder (which infers and checks every shape) and the parameters from the initializers.
//
// Where ONNX's semantics and brickdl's (PyTorch's) differ, a node maps exactly or is refused
// (tests/onnx/node_tests.cpp runs ONNX's node tests; expected_refusals.txt lists what is
// refused and why):
//  - a rank-1 tensor (L) is one flat row (1, L), its one axis brickdl's channel axis;
//  - a model whose output is its input (Identity / Dropout only) gets one copying layer;
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
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "core/detail/onnx_proto.h"
#include "core/error.h"
#include "core/graph_builder.h"
#include "core/limits.h"
#include "core/onnx.h"
#include "core/onnx/channel_ops.h"
#include "core/onnx/patterns.h"

namespace brickdl {

using onnx_detail::element_count;
using onnx_detail::onnx_dims;
using onnx_detail::read_file;
using onnx_detail::tensor_from_proto;

int64_t onnx_max_opset() {
  return kOnnxMaxOpset;
}

namespace {

// What an ONNX tensor name stands for: a layer's output (with its ONNX rank) or a constant.
struct Value {
  int layer = -1;
  int rank = 0;
  const OnnxTensor* constant = nullptr;
};

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

class Importer {
public:
  Importer(std::string path, const OnnxImportOptions& options, const onnx::ModelProto& model)
      : path_(std::move(path)), options_(options), model_(model) {}

  OnnxModel run() {
    check_opset();
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

private:
  // ---- errors ------------------------------------------------------------------------------
  std::string where(const std::string& what) const { return path_ + ": " + what; }
  [[noreturn]] void fail(const std::string& what) const { throw UserError(where(what)); }
  static std::string node_label(const onnx::NodeProto& n) {
    const std::string name = n.name().empty() ? (n.output_size() ? n.output(0) : "?") : n.name();
    return "node '" + name + "' (" + n.op_type() + ")";
  }
  [[noreturn]] void refuse(const onnx::NodeProto& n, const std::string& what) const {
    throw UserError(where(node_label(n) + ": " + what));
  }

  // ---- the model's frame -------------------------------------------------------------------
  // Weights the exporter stored beside the model (torch's dynamo exporter: NAME.onnx.data),
  // read into the graph's copy before anything reads a tensor.
  void load_external_data() {
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

  void check_opset() {
    for (const auto& o : model_.opset_import()) {
      if (!o.domain().empty() && o.domain() != "ai.onnx")
        continue;
      opset_ = o.version();
    }
    if (opset_ == 0)
      fail("no default-domain opset is imported (is this an ONNX model?)");
    if (opset_ < kOnnxMinOpset || opset_ > onnx_max_opset())
      fail(fmt::format("opset {} is not supported; brickdl reads opsets {} to {}", opset_,
                       kOnnxMinOpset, onnx_max_opset()));
  }

  void constant_node(const onnx::NodeProto& n) {
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
  // from the file, the batch and size from the options (every input takes them). One input is
  // the layer "input"; several are named as in the file. Returns the first one's name.
  std::string read_inputs(const onnx::GraphProto& g) {
    std::vector<const onnx::ValueInfoProto*> runtime;
    for (const auto& in : g.input())
      if (!constants_.count(in.name()))
        runtime.push_back(&in);
    if (runtime.empty())
      fail("the graph has no runtime input (every input has a value); brickdl graphs take at "
           "least one");
    for (const onnx::ValueInfoProto* in : runtime)
      read_input(*in, runtime.size() > 1);
    return runtime[0]->name();
  }

  void read_input(const onnx::ValueInfoProto& in, bool several) {
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
    const std::string layer = several ? in.name() : "input";
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
  void bind_outputs(const std::vector<std::string>& names,
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
  void check_input_extents(const std::string& name, const std::vector<int64_t>& d) const {
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
  std::vector<int64_t> input_dims(const onnx::ValueInfoProto& in) const {
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
  std::vector<const onnx::NodeProto*> live_nodes_in_order(const onnx::GraphProto& g,
                                                          const std::vector<std::string>& outputs) {
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
  on_cycle(const std::map<const onnx::NodeProto*, int>& waiting,
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

  // ---- node inputs and attributes ----------------------------------------------------------
  const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) const {
    for (const auto& a : n.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t dflt) const {
    const auto* a = attr(n, name);
    return a ? a->i() : dflt;
  }
  float attr_float(const onnx::NodeProto& n, const std::string& name, float dflt) const {
    const auto* a = attr(n, name);
    return a ? a->f() : dflt;
  }
  std::string attr_string(const onnx::NodeProto& n, const std::string& name,
                          const std::string& dflt) const {
    const auto* a = attr(n, name);
    return a ? a->s() : dflt;
  }
  std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name) const {
    const auto* a = attr(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }
  // Refuses attributes the node has beyond `known`.
  void expect_attributes(const onnx::NodeProto& n, const std::set<std::string>& known) const {
    for (const auto& a : n.attribute())
      if (!known.count(a.name()))
        refuse(n, "attribute '" + a.name() + "' is not supported");
  }

  Value value(const onnx::NodeProto& n, int i) const {
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
  Value tensor(const onnx::NodeProto& n, int i) const {
    const Value v = value(n, i);
    if (v.layer < 0)
      refuse(n, fmt::format("input {} ('{}') is a constant; brickdl needs it computed from the "
                            "graph input",
                            i, n.input(i)));
    return v;
  }
  // Input i as a constant, or null when absent and optional.
  const OnnxTensor* constant(const onnx::NodeProto& n, int i, bool required) const {
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

  // ---- layers ------------------------------------------------------------------------------
  std::string layer_name(const onnx::NodeProto& n) {
    std::string name = n.name().empty() ? n.output(0) : n.name();
    if (name.empty() || used_names_.count(name))
      name = n.output(0);
    for (int k = 1; used_names_.count(name); ++k)
      name = (n.name().empty() ? n.output(0) : n.name()) + "_" + std::to_string(k);
    used_names_.insert(name);
    return name;
  }

  // Adds `l` (named after node n unless named) and binds the node's first output to it.
  int emit(const onnx::NodeProto& n, Layer l, int rank, const std::string& output = "") {
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
  Layer unary(OpKind op, int input) const {
    Layer l;
    l.op = op;
    l.inputs = {input};
    return l;
  }
  void alias(const onnx::NodeProto& n, const Value v) { values_[n.output(0)] = v; }
  // A model whose output is its input (Identity / Dropout only) computes it with one layer
  // that copies: a batch_norm of scale 1 and shift 0 (x·1 + 0 is x), as a brickdl graph
  // computes its output with a layer.
  void identity_layer(const onnx::NodeProto& n, const Value v) {
    Layer l = unary(OpKind::kBatchNorm, v.layer);
    l.name = layer_name(n);
    const auto channels = static_cast<size_t>(b_->shape(v.layer).c);
    params_[l.name] =
        NamedParams{std::vector<float>(channels, 1.0f), std::vector<float>(channels, 0.0f)};
    emit(n, l, v.rank);
  }

  // A spatial list of the node's rank into (d, h, w) order; unused dims get `fill`.
  static std::array<int, 3> triple(const std::vector<int64_t>& v, int spatial, int fill) {
    std::array<int, 3> t{fill, fill, fill};
    for (int i = 0; i < spatial; ++i)
      t[static_cast<size_t>(3 - spatial + i)] = static_cast<int>(v[static_cast<size_t>(i)]);
    return t;
  }
  std::array<int, 3> spatial_attr(const onnx::NodeProto& n, const std::string& name, int spatial,
                                  int dflt) const {
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
  int spatial_rank_of(const onnx::NodeProto& n, const Value v) const {
    if (v.rank < 3)
      refuse(n, "needs a spatial input (N, C, ...), got rank " + std::to_string(v.rank));
    return v.rank - 2;
  }

  // Begin and end pads of a windowed node (explicit or from auto_pad), (d, h, w) order.
  struct Pads {
    std::array<int, 3> begin{0, 0, 0}, end{0, 0, 0};
  };
  Pads read_pads(const onnx::NodeProto& n, int spatial, const TensorShape& in,
                 const std::array<int, 3>& kernel, const std::array<int, 3>& stride,
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
  // The part of `p` common to both ends (for the window) and the rest (for a pad layer).
  static std::array<int, 3> common(const Pads& p) {
    return {std::min(p.begin[0], p.end[0]), std::min(p.begin[1], p.end[1]),
            std::min(p.begin[2], p.end[2])};
  }
  // A pad layer `name` (made unique) of what `p` has beyond `sym` (sign −1: crop), or `input`
  // when nothing is left.
  int pad_rest(const onnx::NodeProto& n, int input, int rank, const Pads& p,
               const std::array<int, 3>& sym, int sign, float value, const std::string& name) {
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

  // ---- ops ---------------------------------------------------------------------------------
  void node(const onnx::NodeProto& n);
  bool fold_constant(const onnx::NodeProto& n);
  void check_outputs(const onnx::NodeProto& n) const;
  void conv(const onnx::NodeProto& n, bool transposed);
  Layer conv_layer(const onnx::NodeProto& n, const TensorShape& in, int sp, bool transposed) const;
  Pads transposed_pads(const onnx::NodeProto& n, int sp, const TensorShape& in, Layer* l) const;
  void batch_norm(const onnx::NodeProto& n);
  void concat(const onnx::NodeProto& n);
  void identity(const onnx::NodeProto& n, bool dropout);
  void elementwise(const onnx::NodeProto& n);
  void affine_by_constant(const onnx::NodeProto& n, const Value x, const OnnxTensor& c,
                          bool constant_first);
  void activation(const onnx::NodeProto& n);
  void pool(const onnx::NodeProto& n, bool max);
  void check_ceil_mode(const onnx::NodeProto& n, const Layer& l, const TensorShape& in,
                       bool max) const;
  void avg_pool_cropped(const onnx::NodeProto& n, const Value x, Layer l, const Pads& p);
  void resize(const onnx::NodeProto& n);
  std::vector<double> resize_scales(const onnx::NodeProto& n, const std::vector<int64_t>& dims);
  void reduce(const onnx::NodeProto& n, bool max);
  void gemm(const onnx::NodeProto& n, bool matmul);
  static bool per_output(const OnnxTensor& c, int64_t out);
  void reshape(const onnx::NodeProto& n, bool flatten_op);
  bool identity_gather(const onnx::NodeProto& n, const std::vector<int64_t>& dims);
  std::vector<int64_t> reshape_target(const onnx::NodeProto& n,
                                      const std::vector<int64_t>& dims) const;
  void pad(const onnx::NodeProto& n);
  std::vector<int64_t> pads_of_every_axis(const onnx::NodeProto& n, const OnnxTensor& pads,
                                          int rank) const;
  void clip(const onnx::NodeProto& n);
  void sigmoid(const onnx::NodeProto& n);

  // The single reader of tensor `t`, or null.
  const onnx::NodeProto* only_reader(const std::string& t) const {
    const auto it = readers_of_.find(t);
    return it != readers_of_.end() && it->second.size() == 1 ? it->second[0] : nullptr;
  }

  void channel_op(const onnx::NodeProto& n);

  onnx::GraphProto graph_; // the model's graph after the pattern rewrites
  std::string path_;
  const OnnxImportOptions& options_;
  const onnx::ModelProto& model_;
  int64_t opset_ = 0;
  std::optional<GraphBuilder> b_;
  ParamStore params_;
  std::map<std::string, OnnxTensor> constants_;
  std::map<std::string, Value> values_;
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers_of_;
  std::set<const onnx::NodeProto*> skipped_; // folded into an earlier node (bias Add, SiLU Mul)
  std::set<std::string> used_names_{"input"};
  int last_layer_ = 0;
};

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
    if (!(sa == sb) || a.rank != b.rank)
      refuse(n,
             "inputs of shapes " + dims_str(onnx_dims(sa, a.rank)) + " and " +
                 dims_str(onnx_dims(sb, b.rank)) +
                 " must be equal (brickdl broadcasts only Mul of (N, C, ...) by (N, C, 1, ...))");
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
  // Opset 19's half_pixel_symmetric shifts the source by (1 − out_int / out) · in / 2: nothing
  // when the output size is the exact multiple brickdl's integer factors give.
  std::string coord = attr_string(n, "coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel_symmetric")
    coord = "half_pixel";
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

// One scale per axis of `dims`, from the constant scales or sizes input, of every axis or of
// opset 18's `axes` (the others 1); sizes with keep_aspect_ratio_policy not_larger /
// not_smaller give those axes one scale, the smallest / largest of their ratios.
std::vector<double> Importer::resize_scales(const onnx::NodeProto& n,
                                            const std::vector<int64_t>& dims) {
  const auto rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> axes = attr_ints(n, "axes");
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank)
      refuse(n, fmt::format("axis {} is out of range for rank {}", a, rank));
    a = a < 0 ? a + rank : a;
  }
  std::vector<double> given;
  bool sizes = false;
  if (const OnnxTensor* s = constant(n, 2, false); s && !s->values.empty()) {
    given.assign(s->values.begin(), s->values.end());
  } else if (const OnnxTensor* z = constant(n, 3, false)) {
    sizes = true;
    for (size_t i = 0; i < z->values.size() && i < axes.size(); ++i)
      given.push_back(static_cast<double>(z->values[i]) /
                      static_cast<double>(dims[static_cast<size_t>(axes[i])]));
  }
  if (given.size() != axes.size())
    refuse(n, fmt::format("needs constant scales or sizes, one per axis ({})", axes.size()));
  const std::string policy = attr_string(n, "keep_aspect_ratio_policy", "stretch");
  if (sizes && policy != "stretch") {
    if (policy != "not_larger" && policy != "not_smaller")
      refuse(n, "keep_aspect_ratio_policy '" + policy +
                    "' is not one of stretch, not_larger, not_smaller");
    const double one = policy == "not_larger" ? *std::min_element(given.begin(), given.end())
                                              : *std::max_element(given.begin(), given.end());
    std::fill(given.begin(), given.end(), one);
  }
  std::vector<double> scales(dims.size(), 1.0);
  for (size_t i = 0; i < axes.size(); ++i)
    scales[static_cast<size_t>(axes[i])] = given[i];
  return scales;
}

// ReduceMean / ReduceMax over every spatial axis of an (N, C, ...) tensor: the global average
// pool, or a max pool whose window is the whole input; keepdims 0 leaves (N, C), the same
// values in brickdl's layout. The axes are an attribute before opset 18 and an input since.
void Importer::reduce(const onnx::NodeProto& n, bool max) {
  expect_attributes(n, {"axes", "keepdims", "noop_with_empty_axes"});
  const Value x = tensor(n, 0);
  spatial_rank_of(n, x);
  std::vector<int64_t> axes = attr_ints(n, "axes");
  if (const OnnxTensor* a = constant(n, 1, false))
    for (float v : a->values)
      axes.push_back(static_cast<int64_t>(v));
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

// Pad's begin and end pads of every axis: `pads` lists every axis, or (opset 18) the axes of
// the `axes` input, the others unpadded.
std::vector<int64_t> Importer::pads_of_every_axis(const onnx::NodeProto& n, const OnnxTensor& pads,
                                                  int rank) const {
  std::vector<int64_t> axes;
  if (const OnnxTensor* a = constant(n, 3, false))
    for (float f : a->values)
      axes.push_back(static_cast<int64_t>(f) < 0 ? static_cast<int64_t>(f) + rank
                                                 : static_cast<int64_t>(f));
  else
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  if (pads.values.size() != 2 * axes.size())
    refuse(n, fmt::format("pads has {} values for {} axes", pads.values.size(), axes.size()));
  std::vector<int64_t> v(2 * static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      refuse(n, fmt::format("axis {} is out of range for rank {}", axes[i], rank));
    v[static_cast<size_t>(axes[i])] = static_cast<int64_t>(pads.values[i]);
    v[static_cast<size_t>(axes[i] + rank)] = static_cast<int64_t>(pads.values[axes.size() + i]);
  }
  return v;
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
  const std::vector<int64_t> v = pads_of_every_axis(n, pads, x.rank);
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

} // namespace

OnnxModel import_onnx(const std::string& path, const OnnxImportOptions& options) {
  const std::string bytes = read_file(path);
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes) || !model.has_graph())
    throw UserError(path + ": not an ONNX model (the file does not parse as an ONNX ModelProto; "
                           "is it truncated?)");
  return Importer(path, options, model).run();
}

} // namespace brickdl
