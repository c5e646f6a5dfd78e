#include "core/onnx/patterns.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "core/onnx.h"
#include "core/onnx/channel_ops.h"
#include "core/onnx/proto.h"

namespace brickdl::onnx_detail {

namespace {

bool default_domain(const onnx::NodeProto& n) {
  return n.domain().empty() || n.domain() == "ai.onnx";
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

std::vector<int64_t> perm_of(const onnx::NodeProto& n) {
  const onnx::AttributeProto* a = attribute(n, "perm");
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

// Elementwise ops that do not care where the channels are.
bool layout_free(const std::string& op) {
  static const std::set<std::string> ops = {
      "Relu", "LeakyRelu", "Sigmoid", "Gelu",        "Erf",      "Tanh",   "HardSwish",
      "Elu",  "Softplus",  "Sqrt",    "HardSigmoid", "Identity", "Dropout"};
  return ops.count(op) > 0;
}

bool arithmetic(const std::string& op) {
  return op == "Add" || op == "Mul" || op == "Sub" || op == "Div";
}

class Rewriter {
public:
  explicit Rewriter(onnx::GraphProto& g) : g_(g) {
    for (const auto& t : g_.initializer())
      add_constant(t.name(), t);
    for (int i = 0; i < g_.node_size(); ++i) {
      const onnx::NodeProto& n = g_.node(i);
      if (n.op_type() == "Constant" && default_domain(n))
        if (const onnx::AttributeProto* v = attribute(n, "value"); v && n.output_size() == 1)
          add_constant(n.output(0), v->t());
      // torch shares equal initializers through Identity nodes (a bias read under two names)
      if (n.op_type() == "Identity" && default_domain(n) && n.input_size() == 1 &&
          n.output_size() == 1)
        if (const OnnxTensor* c = constant(n.input(0)))
          constants_[n.output(0)] = *c;
      for (const auto& in : n.input())
        if (!in.empty())
          readers_[in].push_back(i);
    }
    for (const auto& o : g_.output())
      outputs_.insert(o.name());
  }

  int run() {
    int rewrites = 0;
    for (int i = 0; i < g_.node_size(); ++i) {
      const onnx::NodeProto& n = g_.node(i);
      if (removed_.count(i) || !default_domain(n))
        continue;
      if (n.op_type() == "Reshape" && shuffle(i))
        ++rewrites;
      else if (n.op_type() == "Erf" && erf_gelu(i))
        ++rewrites;
      else if (n.op_type() == "Transpose" && is_to_channels_last(perm_of(n)) && section(i))
        ++rewrites;
    }
    if (rewrites == 0)
      return 0;
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (int i = 0; i < g_.node_size(); ++i)
      if (!removed_.count(i))
        *kept.Add() = g_.node(i);
    g_.mutable_node()->Swap(&kept);
    return rewrites;
  }

private:
  // A bad tensor is left out here: the importer reports it, naming the file.
  void add_constant(const std::string& name, const onnx::TensorProto& t) {
    try {
      constants_[name] = tensor_from_proto(t, name);
    } catch (const UserError&) {
    }
  }

  // The one node reading tensor `t` (not a graph output), or −1.
  int only_reader(const std::string& t) const {
    const auto it = readers_.find(t);
    if (outputs_.count(t) || it == readers_.end() || it->second.size() != 1)
      return -1;
    return it->second[0];
  }
  const OnnxTensor* constant(const std::string& name) const {
    const auto it = constants_.find(name);
    return it == constants_.end() ? nullptr : &it->second;
  }
  std::vector<int64_t> int_values(const std::string& name) const {
    const OnnxTensor* c = constant(name);
    return c ? std::vector<int64_t>(c->values.begin(), c->values.end()) : std::vector<int64_t>{};
  }
  std::string add_initializer(const std::string& name, const std::vector<int64_t>& dims,
                              const std::vector<float>& values) {
    *g_.add_initializer() = tensor_to_proto(name, dims, values);
    constants_[name] = OnnxTensor{dims, values};
    return name;
  }

  bool shuffle(int i) {
    const onnx::NodeProto& r1 = g_.node(i);
    const int t = r1.output_size() == 1 ? only_reader(r1.output(0)) : -1;
    if (t < 0 || g_.node(t).op_type() != "Transpose" || r1.input_size() < 2)
      return false;
    const int r2 = only_reader(g_.node(t).output(0));
    if (r2 < 0 || g_.node(r2).op_type() != "Reshape" || g_.node(r2).input_size() < 2)
      return false;
    const std::vector<int64_t> split = int_values(r1.input(1));
    const std::vector<int64_t> out = int_values(g_.node(r2).input(1));
    // The input's dims are checked by the importer against `shape`: here, the split shape
    // against the output's, with the input assumed to be the output's shape.
    const int64_t groups = channel_shuffle_groups(out, split, perm_of(g_.node(t)), out);
    if (groups < 1)
      return false;
    onnx::NodeProto n;
    n.set_name(r1.name());
    n.set_op_type("ChannelShuffle");
    n.set_domain(kBrickdlDomain);
    n.add_input(r1.input(0));
    n.add_output(g_.node(r2).output(0));
    auto* a = n.add_attribute();
    a->set_name("groups");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(groups);
    auto* s = n.add_attribute();
    s->set_name("shape");
    s->set_type(onnx::AttributeProto::INTS);
    for (int64_t d : out)
      s->add_ints(d);
    *g_.mutable_node(i) = n;
    removed_.insert(t);
    removed_.insert(r2);
    return true;
  }

  // The node writing tensor `t`, or −1.
  int producer(const std::string& t) const {
    for (int i = 0; i < g_.node_size(); ++i)
      if (!removed_.count(i))
        for (const auto& o : g_.node(i).output())
          if (o == t)
            return i;
    return -1;
  }
  // Whether tensor `t` is a scalar constant within 1e-5 of `v`.
  bool scalar(const std::string& t, float v) const {
    const OnnxTensor* c = constant(t);
    return c && element_count(c->dims) == 1 && std::fabs(c->values[0] - v) <= 1e-5f * std::fabs(v);
  }
  // The input of binary node `n` other than `t`, or "" when `t` is not one of its two.
  static std::string other_input(const onnx::NodeProto& n, const std::string& t) {
    if (n.input_size() != 2)
      return "";
    return n.input(0) == t ? n.input(1) : n.input(1) == t ? n.input(0) : "";
  }
  // The only reader of `t` when it is a default-domain `op`, or −1.
  int only_reader_op(const std::string& t, const char* op) const {
    const int r = only_reader(t);
    return r >= 0 && g_.node(r).op_type() == op && default_domain(g_.node(r)) ? r : -1;
  }

  // torch's exact GELU before opset 20, from Erf node `i`: Div(x, √2) → Erf → Add 1 → Mul by
  // x → Mul by 1/2, each read only by the next ⇒ one Gelu node (ONNX's, opset 20) of x.
  bool erf_gelu(int i) {
    const onnx::NodeProto& erf = g_.node(i);
    const int div = erf.input_size() == 1 ? producer(erf.input(0)) : -1;
    if (div < 0 || g_.node(div).op_type() != "Div" || g_.node(div).input_size() != 2 ||
        only_reader(erf.input(0)) != i || !scalar(g_.node(div).input(1), 1.41421356f))
      return false;
    const std::string x = g_.node(div).input(0);
    const int add = only_reader_op(erf.output(0), "Add");
    if (add < 0 || !scalar(other_input(g_.node(add), erf.output(0)), 1.0f))
      return false;
    const int mul = only_reader_op(g_.node(add).output(0), "Mul");
    if (mul < 0 || other_input(g_.node(mul), g_.node(add).output(0)) != x)
      return false;
    const int half = only_reader_op(g_.node(mul).output(0), "Mul");
    if (half < 0 || !scalar(other_input(g_.node(half), g_.node(mul).output(0)), 0.5f))
      return false;
    onnx::NodeProto gelu;
    gelu.set_name(g_.node(half).name());
    gelu.set_op_type("Gelu");
    gelu.add_input(x);
    gelu.add_output(g_.node(half).output(0));
    *g_.mutable_node(half) = gelu;
    for (int k : {div, i, add, mul})
      removed_.insert(k);
    return true;
  }

  // Plans the channels-last section that starts at Transpose `first`: the nodes inside, and
  // the Transposes back. Nodes are in graph (topological) order, so every input of a node is
  // known to be channels-last or not when it is met. False when any reader of a channels-last
  // tensor is not one the rewrite handles, or one is a graph output.
  bool plan_section(int first, int rank, std::vector<int>* inside, std::vector<int>* exits) const {
    std::set<std::string> last{g_.node(first).output(0)};
    for (int i = first + 1; i < g_.node_size(); ++i) {
      const onnx::NodeProto& n = g_.node(i);
      const bool reads = std::any_of(n.input().begin(), n.input().end(),
                                     [&](const std::string& t) { return last.count(t) > 0; });
      if (!reads || removed_.count(i))
        continue;
      if (!default_domain(n) || n.output_size() < 1)
        return false;
      if (n.op_type() == "Transpose") {
        const std::vector<int64_t> p = perm_of(n);
        if (!is_to_channels_first(p) || static_cast<int>(p.size()) != rank)
          return false;
        exits->push_back(i);
        continue;
      }
      if (!handled(n, rank, last))
        return false;
      inside->push_back(i);
      last.insert(n.output(0));
    }
    for (const std::string& t : last)
      if (outputs_.count(t))
        return false;
    return !exits->empty();
  }

  // A reader of channels-last tensors (`last`) that the rewrite handles.
  bool handled(const onnx::NodeProto& n, int rank, const std::set<std::string>& last) const {
    const std::string& op = n.op_type();
    if (layout_free(op))
      return true;
    if (op == "LayerNormalization") {
      const onnx::AttributeProto* a = attribute(n, "axis");
      const int64_t axis = a ? a->i() : -1;
      const bool unread_stats =
          n.output_size() == 1 || (readers_.count(n.output(1)) == 0 &&
                                   (n.output_size() < 3 || readers_.count(n.output(2)) == 0));
      return (axis == -1 || axis == rank - 1) && unread_stats;
    }
    if (op == "MatMul") {
      const OnnxTensor* w = n.input_size() == 2 ? constant(n.input(1)) : nullptr;
      return w && w->dims.size() == 2 && last.count(n.input(0));
    }
    if (arithmetic(op) && n.input_size() == 2) {
      const bool a = last.count(n.input(0)) > 0, b = last.count(n.input(1)) > 0;
      if (a && b)
        return true;
      const OnnxTensor* c = constant(n.input(a ? 1 : 0));
      return c && (element_count(c->dims) == 1 || channel_vector(*c, rank));
    }
    return false;
  }

  // A constant that broadcasts along the last axis only: [C] or [1, …, 1, C].
  static bool channel_vector(const OnnxTensor& c, int rank) {
    if (c.dims.empty() || static_cast<int>(c.dims.size()) > rank)
      return false;
    for (size_t i = 0; i + 1 < c.dims.size(); ++i)
      if (c.dims[i] != 1)
        return false;
    return true;
  }

  bool section(int first) {
    const int rank = static_cast<int>(perm_of(g_.node(first)).size());
    std::vector<int> inside, exits;
    if (!plan_section(first, rank, &inside, &exits))
      return false;
    // In graph order: a MatMul before the Add of its bias, which it takes in.
    std::sort(inside.begin(), inside.end());
    for (int i : inside)
      if (!removed_.count(i))
        rewrite_inside(i, rank);
    for (int i : exits)
      make_identity(i);
    make_identity(first);
    return true;
  }

  void make_identity(int i) {
    onnx::NodeProto* n = g_.mutable_node(i);
    n->set_op_type("Identity");
    n->clear_attribute();
  }

  void rewrite_inside(int i, int rank) {
    onnx::NodeProto* n = g_.mutable_node(i);
    const std::string op = n->op_type();
    if (op == "LayerNormalization") {
      n->set_op_type("ChannelLayerNorm");
      n->set_domain(kBrickdlDomain);
      while (n->output_size() > 1)
        n->mutable_output()->RemoveLast();
      for (int a = n->attribute_size() - 1; a >= 0; --a)
        if (n->attribute(a).name() != "epsilon") {
          n->mutable_attribute()->SwapElements(a, n->attribute_size() - 1);
          n->mutable_attribute()->RemoveLast();
        }
    } else if (op == "MatMul") {
      to_conv(i, rank);
    } else if (arithmetic(op)) {
      for (int k = 0; k < 2; ++k) {
        const OnnxTensor* c = constant(n->input(k));
        if (!c || element_count(c->dims) == 1)
          continue;
        std::vector<int64_t> dims(static_cast<size_t>(rank - 1), 1);
        dims[0] = c->dims.back();
        n->set_input(k, add_initializer(n->input(k) + ".channels_first", dims, c->values));
      }
    }
  }

  // MatMul by W [C, K] (and a following Add of a constant [K]) ⇒ Conv 1×1, weight [K, C, 1, …].
  void to_conv(int i, int rank) {
    onnx::NodeProto* n = g_.mutable_node(i);
    const OnnxTensor w = *constant(n->input(1));
    const int64_t c = w.dims[0], k = w.dims[1];
    std::vector<float> t(w.values.size());
    for (int64_t a = 0; a < c; ++a)
      for (int64_t b = 0; b < k; ++b)
        t[static_cast<size_t>(b * c + a)] = w.values[static_cast<size_t>(a * k + b)];
    std::vector<int64_t> dims(static_cast<size_t>(rank), 1);
    dims[0] = k;
    dims[1] = c;
    const std::string weight = add_initializer(n->input(1) + ".conv", dims, t);
    n->set_op_type("Conv");
    n->set_input(1, weight);
    const int add = only_reader(n->output(0));
    if (add < 0 || g_.node(add).op_type() != "Add" || g_.node(add).input_size() != 2)
      return;
    const onnx::NodeProto& a = g_.node(add);
    const int other = a.input(0) == n->output(0) ? 1 : 0;
    const OnnxTensor* b = constant(a.input(other));
    if (!b || element_count(b->dims) != k || !channel_vector(*b, rank))
      return;
    n->add_input(a.input(other));
    n->set_output(0, a.output(0));
    removed_.insert(add);
  }

  onnx::GraphProto& g_;
  std::map<std::string, OnnxTensor> constants_;
  std::map<std::string, std::vector<int>> readers_;
  std::set<std::string> outputs_;
  std::set<int> removed_;
};

} // namespace

int rewrite_channel_patterns(onnx::GraphProto& graph) {
  return Rewriter(graph).run();
}

} // namespace brickdl::onnx_detail
