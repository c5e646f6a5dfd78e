// Import of the structural ops (pending the importer's mapping): Split / Slice on channels,
// one-input Concat, channel shuffle, ConvNeXt's channels-last block; and their refusals.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/onnx.h"
#include "kernels/reference.h"
#include "kernels/weights.h"
#include "tests/onnx/onnx_test_model.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

using onnx_test::Model;

std::vector<std::string> ops_of(const Graph& g) {
  std::vector<std::string> v;
  for (const Layer& l : g.layers())
    if (l.op != OpKind::kInput)
      v.emplace_back(op_name(l.op));
  return v;
}

kernels::Tensor run(const OnnxModel& m, const kernels::Tensor& x) {
  return kernels::run_graph(m.graph, x, kernels::model_weights(m.graph, 1));
}

TEST(OnnxStructImport, SplitOnChannelsIsOneSlicePerOutput) {
  Model m({1, 3, 4, 4}, 13);
  Model::attr(m.node("Split", {"x", m.ints("sizes", {1, 2})}, {"a", "b"}), "axis", int64_t{1});
  Model::attr(m.node("Concat", {"b", "a"}, {"y"}), "axis", int64_t{1});
  const OnnxModel out = m.import();
  EXPECT_EQ(ops_of(out.graph), (std::vector<std::string>{"slice", "slice", "concat"}));
  const kernels::Tensor x = kernels::random_tensor(out.graph.input_shape(), 1, 0);
  const kernels::Tensor y = run(out, x);
  for (int64_t p = 0; p < 16; ++p) {
    EXPECT_EQ(y.at(0, 0, 0, p / 4, p % 4), x.at(0, 1, 0, p / 4, p % 4));
    EXPECT_EQ(y.at(0, 2, 0, p / 4, p % 4), x.at(0, 0, 0, p / 4, p % 4));
  }
}

TEST(OnnxStructImport, SliceOnChannelsByOnnxRules) {
  Model m({1, 3, 4, 4});
  m.node("Slice",
         {"x", m.ints("s", {-2}), m.ints("e", {INT64_MAX}), m.ints("ax", {1}), m.ints("st", {1})},
         {"y"});
  const OnnxModel out = m.import();
  ASSERT_EQ(ops_of(out.graph), (std::vector<std::string>{"slice"}));
  EXPECT_EQ(out.graph.layer(1).slice_begin, 1);
  EXPECT_EQ(out.graph.layer(1).slice_end, 3);
}

TEST(OnnxStructImport, SlicesOfOtherAxesOrStepsAreRefused) {
  std::string error;
  Model h({1, 3, 4, 4});
  h.node("Slice", {"x", h.ints("s", {0}), h.ints("e", {2}), h.ints("ax", {2})}, {"y"});
  h.import(&error);
  EXPECT_NE(error.find("axis 2"), std::string::npos) << error;
  Model step({1, 3, 4, 4});
  step.node(
      "Slice",
      {"x", step.ints("s", {0}), step.ints("e", {3}), step.ints("ax", {1}), step.ints("st", {2})},
      {"y"});
  step.import(&error);
  EXPECT_NE(error.find("step 2"), std::string::npos) << error;
}

TEST(OnnxStructImport, OneInputConcatIsItsInput) {
  Model m({1, 3, 4, 4});
  Model::attr(m.node("Concat", {"x"}, {"c"}), "axis", int64_t{1});
  m.node("Relu", {"c"}, {"y"});
  EXPECT_EQ(ops_of(m.import().graph), (std::vector<std::string>{"relu"}));
}

TEST(OnnxStructImport, ChannelShuffleIsOneLayer) {
  Model m({1, 6, 3, 3});
  m.node("Reshape", {"x", m.ints("s1", {1, 2, 3, 3, 3})}, {"r1"});
  Model::attr(m.node("Transpose", {"r1"}, {"t"}), "perm", std::vector<int64_t>{0, 2, 1, 3, 4});
  m.node("Reshape", {"t", m.ints("s2", {1, 6, 3, 3})}, {"y"});
  const OnnxModel out = m.import();
  ASSERT_EQ(ops_of(out.graph), (std::vector<std::string>{"channel_shuffle"}));
  EXPECT_EQ(out.graph.layer(1).groups, 2);
}

TEST(OnnxStructImport, OtherTransposesAreRefused) {
  std::string error;
  Model m({1, 3, 4, 4});
  Model::attr(m.node("Transpose", {"x"}, {"y"}), "perm", std::vector<int64_t>{0, 1, 3, 2});
  m.import(&error);
  EXPECT_NE(error.find("Transpose"), std::string::npos) << error;
}

// ConvNeXt's block with Relu for GELU: dw 7x7 → Transpose → LayerNormalization → MatMul + Add
// → Relu → MatMul + Add → Transpose → Mul by gamma [C, 1, 1] → + x; against the same math on
// our layout with the reference ops.
TEST(OnnxStructImport, ConvNeXtBlockOnOurLayout) {
  const int64_t c = 4, k = 8;
  Model m({1, c, 5, 5});
  std::vector<float> dw(c * 49), w1(c * k), b1(k), w2(k * c), b2(c), g(c), be(c), ls(c);
  for (size_t i = 0; i < dw.size(); ++i)
    dw[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  for (size_t i = 0; i < w1.size(); ++i)
    w1[i] = 0.1f * static_cast<float>(i % 7) - 0.3f, w2[i] = 0.05f * static_cast<float>(i % 5);
  for (size_t i = 0; i < b1.size(); ++i)
    b1[i] = 0.02f * static_cast<float>(i);
  for (size_t i = 0; i < b2.size(); ++i)
    b2[i] = -0.1f * static_cast<float>(i), g[i] = 1.0f + 0.1f * static_cast<float>(i),
    be[i] = 0.05f, ls[i] = 0.5f + static_cast<float>(i);
  auto* dwn = m.node("Conv", {"x", m.floats("dw.w", {c, 1, 7, 7}, dw)}, {"dw"});
  Model::attr(dwn, "pads", std::vector<int64_t>{3, 3, 3, 3});
  Model::attr(dwn, "group", c);
  Model::attr(m.node("Transpose", {"dw"}, {"last"}), "perm", std::vector<int64_t>{0, 2, 3, 1});
  m.node("LayerNormalization", {"last", m.floats("g", {c}, g), m.floats("be", {c}, be)}, {"ln"});
  m.node("MatMul", {"ln", m.floats("w1", {c, k}, w1)}, {"mm1"});
  m.node("Add", {"mm1", m.floats("b1", {k}, b1)}, {"fc1"});
  m.node("Relu", {"fc1"}, {"act"});
  m.node("MatMul", {"act", m.floats("w2", {k, c}, w2)}, {"mm2"});
  m.node("Add", {"mm2", m.floats("b2", {c}, b2)}, {"fc2"});
  Model::attr(m.node("Transpose", {"fc2"}, {"first"}), "perm", std::vector<int64_t>{0, 3, 1, 2});
  m.node("Mul", {"first", m.floats("ls", {c, 1, 1}, ls)}, {"scaled"});
  m.node("Add", {"scaled", "x"}, {"y"});
  const OnnxModel out = m.import();
  EXPECT_EQ(ops_of(out.graph), (std::vector<std::string>{"conv", "layer_norm", "conv", "relu",
                                                         "conv", "batch_norm", "add"}));
  const kernels::Tensor x = kernels::random_tensor(out.graph.input_shape(), 3, 0);
  // Our layout by hand: 1x1 convs take the MatMul weights transposed.
  std::vector<float> w1t(w1.size()), w2t(w2.size());
  for (int64_t a = 0; a < c; ++a)
    for (int64_t b = 0; b < k; ++b)
      w1t[static_cast<size_t>(b * c + a)] = w1[static_cast<size_t>(a * k + b)],
                                      w2t[static_cast<size_t>(a * k + b)] =
                                          w2[static_cast<size_t>(b * c + a)];
  Window w7;
  w7.kernel = {1, 7, 7};
  w7.pad = {0, 3, 3};
  using namespace kernels;
  const Tensor h = conv(x, dw, {}, c, w7, static_cast<int>(c));
  const Tensor n = layer_norm(h, g, be, 1e-5f);
  const Tensor u = relu(conv(n, w1t, b1, k, Window{}, 1));
  const Tensor v = conv(u, w2t, b2, c, Window{}, 1);
  const Tensor want = add(batch_norm(v, ls, std::vector<float>(c, 0.0f)), x);
  const Tensor got = run(out, x);
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(got.data()[i], want.data()[i], 1e-5f) << i;
}

// Our export of every structural op reads back to the same layers and outputs.
TEST(OnnxStructImport, ExportRoundTrip) {
  GraphBuilder b("rt", TensorShape{2, 8, 1, 5, 6, 2});
  const int cv = b.conv2d(b.input(), 8, 3, 1, 1, 1, 1, true, "cv");
  const int sl = b.slice(cv, 2, 8, "sl");
  const int sh = b.channel_shuffle(sl, 3, "sh");
  b.layer_norm(sh, 1e-6f, "ln");
  const Graph g = b.build();
  const fs::path p =
      fs::temp_directory_path() / ("brickdl_rt_" + std::to_string(::getpid()) + ".onnx");
  export_onnx(g, kernels::unfused_params(fuse_for_inference(g), 1), p.string());
  const OnnxModel back = import_onnx(p.string());
  fs::remove(p);
  EXPECT_EQ(ops_of(back.graph), ops_of(g));
  const kernels::Tensor x = kernels::random_tensor(g.input_shape(), 2, 0);
  const kernels::Tensor want = kernels::run_graph(g, x, kernels::make_weights(g, 1));
  EXPECT_EQ(run(back, x).values(), want.values());
}

} // namespace
} // namespace brickdl
