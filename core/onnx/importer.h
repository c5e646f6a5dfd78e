#pragma once
// The ONNX importer behind import_onnx (core/onnx.h), internal to core/onnx/: one Importer per
// file, one pass over the nodes in topological order. Its parts, one file per concern:
//
//   model.onnx
//     │  import.cpp       the frame: the opset (opset.h), external data and constants (proto.h:
//     │                   tensor.cpp, fold.cpp), the pattern rewrites (patterns.h), runtime
//     │                   inputs, node order, outputs
//     ▼
//   Importer::node        the dispatch on the op type (import.cpp), per node to
//     ├─► op_map.cpp      one mapping per op; the forms that differ between opsets via opset.h
//     └─► channel_ops.h   Slice, Split, a one-input Concat, channel shuffle, layer norm
//     ▼
//   GraphBuilder (core/graph_builder.h), which infers and checks every shape ──► Graph
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/onnx.h"

namespace brickdl::onnx_detail {

// What an ONNX tensor name stands for: a layer's output (with its ONNX rank) or a constant.
struct Value {
  int layer = -1;
  int rank = 0;
  const OnnxTensor* constant = nullptr;
};

std::string dims_str(const std::vector<int64_t>& d);
// The ONNX axis that is brickdl's channel axis: 1, or 0 for a rank-1 tensor (one flat row).
int channel_axis(int rank);
// The brickdl shape of ONNX dims of rank 1 to 5: (L) is one flat row (1, L); (N, C) flat;
// (N, C, L) is (N, C, 1, L).
TensorShape shape_of(const std::vector<int64_t>& d);

class Importer {
public:
  Importer(std::string path, const OnnxImportOptions& options, const onnx::ModelProto& model)
      : path_(std::move(path)), options_(options), model_(model) {}

  OnnxModel run();

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

  // ---- the model's frame (import.cpp) ------------------------------------------------------
  void load_external_data();
  void constant_node(const onnx::NodeProto& n);
  std::string read_inputs(const onnx::GraphProto& g);
  void read_input(const onnx::ValueInfoProto& in);
  void bind_outputs(const std::vector<std::string>& names,
                    const std::vector<const onnx::NodeProto*>& order, OnnxModel& out);
  void check_input_extents(const std::string& name, const std::vector<int64_t>& d) const;
  std::vector<int64_t> input_dims(const onnx::ValueInfoProto& in) const;
  std::vector<const onnx::NodeProto*> live_nodes_in_order(const onnx::GraphProto& g,
                                                          const std::vector<std::string>& outputs);
  const onnx::NodeProto*
  on_cycle(const std::map<const onnx::NodeProto*, int>& waiting,
           const std::map<std::string, const onnx::NodeProto*>& producer) const;

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
  // (import.cpp)
  Value value(const onnx::NodeProto& n, int i) const;
  Value tensor(const onnx::NodeProto& n, int i) const;
  const OnnxTensor* constant(const onnx::NodeProto& n, int i, bool required) const;

  // ---- layers (import.cpp) -----------------------------------------------------------------
  std::string layer_name(const onnx::NodeProto& n);
  int emit(const onnx::NodeProto& n, Layer l, int rank, const std::string& output = "");
  Layer unary(OpKind op, int input) const {
    Layer l;
    l.op = op;
    l.inputs = {input};
    return l;
  }
  void alias(const onnx::NodeProto& n, const Value v) { values_[n.output(0)] = v; }
  void identity_layer(const onnx::NodeProto& n, const Value v);

  // ---- windows and pads (op_map.cpp) -------------------------------------------------------
  // A spatial list of the node's rank into (d, h, w) order; unused dims get `fill`.
  static std::array<int, 3> triple(const std::vector<int64_t>& v, int spatial, int fill) {
    std::array<int, 3> t{fill, fill, fill};
    for (int i = 0; i < spatial; ++i)
      t[static_cast<size_t>(3 - spatial + i)] = static_cast<int>(v[static_cast<size_t>(i)]);
    return t;
  }
  std::array<int, 3> spatial_attr(const onnx::NodeProto& n, const std::string& name, int spatial,
                                  int dflt) const;
  int spatial_rank_of(const onnx::NodeProto& n, const Value v) const;

  // Begin and end pads of a windowed node (explicit or from auto_pad), (d, h, w) order.
  struct Pads {
    std::array<int, 3> begin{0, 0, 0}, end{0, 0, 0};
  };
  Pads read_pads(const onnx::NodeProto& n, int spatial, const TensorShape& in,
                 const std::array<int, 3>& kernel, const std::array<int, 3>& stride,
                 const std::array<int, 3>& dil) const;
  // The part of `p` common to both ends (for the window) and the rest (for a pad layer).
  static std::array<int, 3> common(const Pads& p) {
    return {std::min(p.begin[0], p.end[0]), std::min(p.begin[1], p.end[1]),
            std::min(p.begin[2], p.end[2])};
  }
  int pad_rest(const onnx::NodeProto& n, int input, int rank, const Pads& p,
               const std::array<int, 3>& sym, int sign, float value, const std::string& name);

  // ---- ops: the dispatch (import.cpp), the mappings (op_map.cpp) ---------------------------
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

} // namespace brickdl::onnx_detail
