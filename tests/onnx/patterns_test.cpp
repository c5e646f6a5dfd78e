// The ONNX pattern rewrites (core/onnx/patterns.h) on graphs built here with ONNX's protobuf
// classes: torch's channel shuffle, ConvNeXt's channels-last block with its Erf GELU, and the
// sections left as they are.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/onnx/patterns.h"
#include "core/onnx/proto.h"

namespace brickdl::onnx_detail {
namespace {

class GraphMaker {
public:
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in,
                        const std::string& out) {
    onnx::NodeProto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const auto& i : in)
      n->add_input(i);
    n->add_output(out);
    return n;
  }
  std::string constant(const std::string& name, const std::vector<int64_t>& dims,
                       const std::vector<float>& values) {
    *g.add_initializer() = tensor_to_proto(name, dims, values);
    return name;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  void output(const std::string& name) { g.add_output()->set_name(name); }
  std::vector<std::string> ops() const {
    std::vector<std::string> v;
    for (const auto& n : g.node())
      v.push_back(n.domain().empty() ? n.op_type() : n.domain() + "." + n.op_type());
    return v;
  }
  const onnx::TensorProto* initializer(const std::string& name) const {
    for (const auto& t : g.initializer())
      if (t.name() == name)
        return &t;
    return nullptr;
  }
  onnx::GraphProto g;
};

std::vector<float> iota(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(i);
  return v;
}

TEST(OnnxPatterns, ChannelShuffleBecomesOneNode) {
  GraphMaker m;
  m.node("Reshape", {"x", m.constant("s1", {5}, {1, 3, 2, 8, 8})}, "r1");
  GraphMaker::ints(m.node("Transpose", {"r1"}, "t"), "perm", {0, 2, 1, 3, 4});
  m.node("Reshape", {"t", m.constant("s2", {4}, {1, 6, 8, 8})}, "y");
  m.output("y");
  EXPECT_EQ(rewrite_channel_patterns(m.g), 1);
  ASSERT_EQ(m.ops(), (std::vector<std::string>{"brickdl.ChannelShuffle"}));
  const onnx::NodeProto& n = m.g.node(0);
  EXPECT_EQ(n.input(0), "x");
  EXPECT_EQ(n.output(0), "y");
  EXPECT_EQ(n.attribute(0).name(), "groups");
  EXPECT_EQ(n.attribute(0).i(), 3);
  EXPECT_EQ(std::vector<int64_t>(n.attribute(1).ints().begin(), n.attribute(1).ints().end()),
            (std::vector<int64_t>{1, 6, 8, 8}));
}

TEST(OnnxPatterns, OtherReshapesAndTransposesStay) {
  GraphMaker m;
  m.node("Reshape", {"x", m.constant("s1", {5}, {1, 3, 2, 8, 8})}, "r1");
  GraphMaker::ints(m.node("Transpose", {"r1"}, "t"), "perm", {0, 1, 2, 4, 3});
  m.node("Reshape", {"t", m.constant("s2", {4}, {1, 6, 8, 8})}, "r2");
  GraphMaker::ints(m.node("Transpose", {"r2"}, "y"), "perm", {0, 1, 3, 2});
  m.output("y");
  EXPECT_EQ(rewrite_channel_patterns(m.g), 0);
  EXPECT_EQ(m.ops(), (std::vector<std::string>{"Reshape", "Transpose", "Reshape", "Transpose"}));
}

// torchvision's CNBlock as the TorchScript exporter writes it at opset 17, with GELU as the Erf
// pattern and the layer scale after the Transpose back.
GraphMaker convnext_block() {
  GraphMaker m;
  auto* dw =
      m.node("Conv", {"x", m.constant("dw.w", {4, 1, 7, 7}, std::vector<float>(196, 0.1f))}, "dw");
  GraphMaker::ints(dw, "pads", {3, 3, 3, 3});
  GraphMaker::ints(m.node("Transpose", {"dw"}, "last"), "perm", {0, 2, 3, 1});
  m.node("LayerNormalization",
         {"last", m.constant("ln.g", {4}, {1, 1, 1, 1}), m.constant("ln.b", {4}, {0, 0, 0, 0})},
         "ln");
  m.node("MatMul", {"ln", m.constant("w1", {4, 16}, iota(64))}, "mm1");
  m.node("Add", {m.constant("b1", {16}, iota(16)), "mm1"}, "fc1");
  m.node("Div", {"fc1", m.constant("sqrt2", {}, {1.4142135f})}, "div");
  m.node("Erf", {"div"}, "erf");
  m.node("Add", {"erf", m.constant("one", {}, {1.0f})}, "erf1");
  m.node("Mul", {"fc1", "erf1"}, "gx");
  m.node("Mul", {"gx", m.constant("half", {}, {0.5f})}, "gelu");
  m.node("MatMul", {"gelu", m.constant("w2", {16, 4}, iota(64))}, "mm2");
  m.node("Add", {"mm2", m.constant("b2", {4}, iota(4))}, "fc2");
  m.node("Mul", {"fc2", m.constant("s", {1, 1, 1, 4}, {2, 2, 2, 2})}, "scaled");
  GraphMaker::ints(m.node("Transpose", {"scaled"}, "first"), "perm", {0, 3, 1, 2});
  m.node("Mul", {"first", m.constant("gamma", {4, 1, 1}, {1, 2, 3, 4})}, "ls");
  m.node("Add", {"ls", "x"}, "y");
  m.output("y");
  return m;
}

TEST(OnnxPatterns, ConvNeXtBlockGoesChannelsFirst) {
  GraphMaker m = convnext_block();
  EXPECT_EQ(rewrite_channel_patterns(m.g), 2); // the section, and the Erf GELU in it
  EXPECT_EQ(m.ops(),
            (std::vector<std::string>{"Conv", "Identity", "brickdl.ChannelLayerNorm", "Conv",
                                      "Gelu", "Conv", "Mul", "Identity", "Mul", "Add"}));
  // The first 1x1 conv took the bias Add in (the bias was the Add's first input).
  const onnx::NodeProto& c1 = m.g.node(3);
  ASSERT_EQ(c1.input_size(), 3);
  EXPECT_EQ(c1.input(0), "ln");
  EXPECT_EQ(c1.input(2), "b1");
  EXPECT_EQ(c1.output(0), "fc1");
  // Weight [16, 4, 1, 1]: element (k, c) is w1's (c, k) = 16c + k.
  const onnx::TensorProto* w = m.initializer(c1.input(1));
  ASSERT_NE(w, nullptr);
  const OnnxTensor t = tensor_from_proto(*w, "w1.conv");
  EXPECT_EQ(t.dims, (std::vector<int64_t>{16, 4, 1, 1}));
  for (int k = 0; k < 16; ++k)
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(t.values[static_cast<size_t>(k * 4 + c)], static_cast<float>(16 * c + k));
  EXPECT_EQ(m.g.node(5).output(0), "fc2");
  // The scale by [1, 1, 1, 4] became one by [4, 1, 1].
  const onnx::TensorProto* s = m.initializer(m.g.node(6).input(1));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(tensor_from_proto(*s, "s").dims, (std::vector<int64_t>{4, 1, 1}));
  // x · (erf(x / √2) + 1) · 1/2 of fc1 is one Gelu of fc1 that writes the chain's output.
  EXPECT_EQ(m.g.node(4).input(0), "fc1");
  EXPECT_EQ(m.g.node(4).output(0), "gelu");
}

TEST(OnnxPatterns, SectionsWithOtherOpsStay) {
  GraphMaker m;
  GraphMaker::ints(m.node("Transpose", {"x"}, "last"), "perm", {0, 2, 3, 1});
  m.node("Softmax", {"last"}, "sm");
  GraphMaker::ints(m.node("Transpose", {"sm"}, "y"), "perm", {0, 3, 1, 2});
  m.output("y");
  EXPECT_EQ(rewrite_channel_patterns(m.g), 0);
  EXPECT_EQ(m.ops(), (std::vector<std::string>{"Transpose", "Softmax", "Transpose"}));

  GraphMaker open; // the channels-last tensor is the graph's output: nothing to go back to
  GraphMaker::ints(open.node("Transpose", {"x"}, "last"), "perm", {0, 2, 3, 1});
  open.node("Relu", {"last"}, "y");
  open.output("y");
  EXPECT_EQ(rewrite_channel_patterns(open.g), 0);

  GraphMaker axis; // a LayerNormalization over H, W and C is not a channel norm
  GraphMaker::ints(axis.node("Transpose", {"x"}, "last"), "perm", {0, 2, 3, 1});
  auto* ln = axis.node("LayerNormalization", {"last", axis.constant("g", {4}, {1, 1, 1, 1})}, "ln");
  auto* a = ln->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  GraphMaker::ints(axis.node("Transpose", {"ln"}, "y"), "perm", {0, 3, 1, 2});
  axis.output("y");
  EXPECT_EQ(rewrite_channel_patterns(axis.g), 0);
}

} // namespace
} // namespace brickdl::onnx_detail
