#include <gtest/gtest.h>

#include "core/error.h"
#include "core/graph.h"
#include "core/graph_builder.h"
#include "core/group.h"

namespace brickdl {
namespace {

TEST(GraphBuilder, Conv2dShapeParamsMacs) {
  GraphBuilder b("t", TensorShape{2, 3, 1, 32, 30, 2});
  const int c = b.conv2d(b.input(), 16, 3, 2, 1);
  const Layer& l = b.layer(c);
  // out = floor((32 + 2 - 3) / 2) + 1 = 16 ; floor((30 + 2 - 3) / 2) + 1 = 15
  EXPECT_EQ(l.out, (TensorShape{2, 16, 1, 16, 15, 2}));
  EXPECT_EQ(l.params, 16 * 3 * 9);
  EXPECT_EQ(l.macs, int64_t{2} * 16 * 16 * 15 * 3 * 9);
}

TEST(GraphBuilder, Conv3dDilatedGrouped) {
  GraphBuilder b("t", TensorShape{1, 8, 10, 10, 10, 3});
  const int c = b.conv3d(b.input(), 4, 3, 1, 2, 2, 2, true);
  const Layer& l = b.layer(c);
  // span = 2*(3-1)+1 = 5 ; out = 10 + 4 - 5 + 1 = 10
  EXPECT_EQ(l.out, (TensorShape{1, 4, 10, 10, 10, 3}));
  EXPECT_EQ(l.params, 4 * (8 / 2) * 27 + 4);
  EXPECT_EQ(l.macs, int64_t{4} * 1000 * 4 * 27);
}

TEST(GraphBuilder, CeilModePool) {
  GraphBuilder b("t", TensorShape{1, 1, 1, 147, 147, 2});
  // 3x3/2, no padding: (147 - 3) / 2 + 1 = 73 in floor and ceil mode alike.
  EXPECT_EQ(b.shape(b.max_pool(b.input(), 3, 2, 0, true)).h, 73);
  // 3x3/2, pad 1, floor mode: (147 + 2 - 3) / 2 + 1 = 74.
  EXPECT_EQ(b.shape(b.max_pool(b.input(), 3, 2, 1, false)).h, 74);
  // 2x2/2 on 147, ceil mode: ceil(145 / 2) + 1 = 74, the last window starts at 146 < 147.
  EXPECT_EQ(b.shape(b.max_pool(b.input(), 2, 2, 0, true)).h, 74);
  EXPECT_EQ(b.shape(b.max_pool(b.input(), 2, 2, 0, false)).h, 73);
}

TEST(GraphBuilder, ShapeErrorNamesLayerAndShapes) {
  GraphBuilder b("t", TensorShape{1, 3, 1, 8, 8, 2});
  const int a = b.conv2d(b.input(), 4, 3, 1, 1);
  const int c = b.conv2d(b.input(), 4, 3, 2, 1);
  try {
    b.add(a, c, "bad_add");
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("bad_add"), std::string::npos) << m;
    EXPECT_NE(m.find("1x4x8x8"), std::string::npos) << m;
    EXPECT_NE(m.find("1x4x4x4"), std::string::npos) << m;
  }
  EXPECT_THROW(b.conv2d(b.input(), 4, 11), ShapeError);            // window larger than the input
  EXPECT_THROW(b.conv2d(b.input(), 4, 3, 1, 1, 1, 2), ShapeError); // 3 % 2 != 0
}

Window deconv_window(std::array<int, 3> k, std::array<int, 3> s, std::array<int, 3> p,
                     std::array<int, 3> d = {1, 1, 1}) {
  Window w;
  w.kernel = k;
  w.stride = s;
  w.pad = p;
  w.dilation = d;
  return w;
}

TEST(GraphBuilder, ConvTransposeShapeParamsMacs) {
  // DeepCAM's window (k 3, stride 2, pad 1, output_padding 1), 8 -> 6 channels in 2 groups:
  // out = (in − 1)·2 − 2 + 2·1 + 1 + 1 = 2·in, so 5x7 -> 10x14.
  GraphBuilder b("t", TensorShape{2, 8, 1, 5, 7, 2});
  const Layer& l = b.layer(b.conv_transpose(
      b.input(), 6, deconv_window({1, 3, 3}, {1, 2, 2}, {0, 1, 1}), {0, 1, 1}, 2, true));
  EXPECT_EQ(l.out, (TensorShape{2, 6, 1, 10, 14, 2}));
  // Weight [Cin 8][Cout/groups 3][3][3], bias 6.
  EXPECT_EQ(l.params, 8 * 3 * 9 + 6);
  // Every input pixel meets every tap of its group's 3 outputs: N · Cin · 5·7 · 3 · 9.
  EXPECT_EQ(l.macs, int64_t{2} * 8 * 35 * 3 * 9);

  // 3-D, kernel 2, stride 3, dilation 2, pad 1: out = (in − 1)·3 − 2 + 2 + op + 1. Output
  // padding may reach max(stride, dilation) − 1 = 2: d 3 -> 6 + 1 + 1 = 8 (op 1), h 4 -> 9 + 2
  // + 1 = 12 (op 2), w 2 -> 3 + 0 + 1 = 4 (op 0).
  GraphBuilder b3("t", TensorShape{1, 4, 3, 4, 2, 3});
  const Layer& l3 = b3.layer(b3.conv_transpose(
      b3.input(), 5, deconv_window({2, 2, 2}, {3, 3, 3}, {1, 1, 1}, {2, 2, 2}), {1, 2, 0}));
  EXPECT_EQ(l3.out, (TensorShape{1, 5, 8, 12, 4, 3}));
  EXPECT_EQ(l3.params, 4 * 5 * 8);             // no bias
  EXPECT_EQ(l3.macs, int64_t{4} * 24 * 5 * 8); // Cin · (3·4·2) inputs · Cout · kvol
}

TEST(GraphBuilder, ConvTransposeErrors) {
  GraphBuilder b("t", TensorShape{1, 8, 1, 4, 4, 2});
  const Window s2 = deconv_window({1, 3, 3}, {1, 2, 2}, {0, 1, 1});
  const Window s1 = deconv_window({1, 3, 3}, {1, 1, 1}, {0, 1, 1});
  const Window s1d2 = deconv_window({1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 2, 2});
  const auto message = [&](const Window& w, std::array<int, 3> op, int64_t cout, int groups) {
    try {
      b.conv_transpose(b.input(), cout, w, op, groups, false, "bad");
    } catch (const ShapeError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // output_padding must stay below the stride or the dilation, whichever is larger.
  EXPECT_NE(message(s2, {0, 2, 0}, 8, 1).find("output_padding"), std::string::npos);
  EXPECT_NE(message(s1, {0, 0, 1}, 8, 1).find("output_padding"), std::string::npos);
  EXPECT_EQ(message(s1d2, {0, 1, 1}, 8, 1), ""); // the dilation 2 allows 1
  EXPECT_EQ(message(s2, {0, 1, 1}, 8, 1), "");
  // groups must divide both channel counts.
  EXPECT_NE(message(s2, {0, 1, 1}, 6, 3).find("groups 3"), std::string::npos); // 8 % 3
  EXPECT_NE(message(s2, {0, 1, 1}, 6, 4).find("groups 4"), std::string::npos); // 6 % 4
  EXPECT_EQ(message(s2, {0, 1, 1}, 8, 8), "");                                 // depthwise
  // Padding that leaves no output: (4 − 1)·1 − 2·3 + 2 + 1 = 0.
  EXPECT_NE(message(deconv_window({1, 3, 3}, {1, 1, 1}, {0, 3, 3}), {0, 0, 0}, 8, 1)
                .find("leaves no output"),
            std::string::npos);
  // A depth window on a 2-D input.
  EXPECT_NE(
      message(deconv_window({3, 3, 3}, {1, 1, 1}, {0, 1, 1}), {0, 0, 0}, 8, 1).find("3-D window"),
      std::string::npos);
}

TEST(Fusion, FoldsBatchNormAndRelu) {
  GraphBuilder b("t", TensorShape{1, 3, 1, 8, 8, 2});
  const int x = b.conv_bn_relu(b.input(), 8, 3, 1, 1, 1, "a");
  const int y = b.conv2d(x, 8, 3, 1, 1, 1, 1, false, "b.conv");
  const int z = b.batch_norm(y, "b.bn");
  const int s = b.add(z, x, "add");
  b.relu(s, "out");
  const Graph g = b.build();
  const Graph f = fuse_for_inference(g);
  ASSERT_EQ(f.size(), 4); // input, a.conv(+bn+relu), b.conv(+bn), add(+relu)
  EXPECT_EQ(f.layer(1).activation, Activation::kRelu);
  EXPECT_TRUE(f.layer(1).bn_folded);
  EXPECT_TRUE(f.layer(1).bias);
  EXPECT_EQ(f.layer(2).activation, Activation::kNone);
  EXPECT_TRUE(f.layer(2).bn_folded);
  EXPECT_EQ(f.layer(3).op, OpKind::kAdd);
  EXPECT_EQ(f.layer(3).activation, Activation::kRelu);
  EXPECT_EQ(f.layer(3).inputs, (std::vector<int>{2, 1}));
  EXPECT_EQ(f.total_macs(), g.total_macs());
}

TEST(Fusion, KeepsReluWhoseProducerHasTwoReaders) {
  GraphBuilder b("t", TensorShape{1, 3, 1, 8, 8, 2});
  const int c = b.conv2d(b.input(), 3, 3, 1, 1);
  const int r = b.relu(c);
  b.add(c, r);
  const Graph f = fuse_for_inference(b.build());
  EXPECT_EQ(f.size(), 4);
  EXPECT_EQ(f.layer(2).op, OpKind::kRelu);
}

// Every activation op folds into a conv, an add or a linear layer before it as that layer's
// epilogue, with its parameters (the clip's range, the leaky slope); the workload signature
// names it, so plans of the two forms never share tuning results.
TEST(Fusion, FoldsEveryActivationWithItsParameters) {
  int ops = 0;
  for (const std::string& name : op_names()) {
    OpKind op{};
    ASSERT_TRUE(parse_op(name, &op));
    EXPECT_EQ(traits(op).is_activation, op_activation(op) != Activation::kNone) << name;
    if (op_activation(op) == Activation::kNone)
      continue;
    ++ops;
    GraphBuilder b("t", TensorShape{2, 4, 1, 6, 6, 2});
    const int c = b.conv2d(b.input(), 4, 3, 1, 1, 1, 1, true, "c");
    Layer l;
    l.leaky_slope = 0.25f;
    l.clip_min = -1.0f;
    l.clip_max = 2.0f;
    const int a = b.activation(c, op_activation(op), l, "act");
    const int s = b.add(a, b.input(), "s");
    b.activation(s, op_activation(op), l, "act2");
    const Graph f = fuse_for_inference(b.build());
    ASSERT_EQ(f.size(), 3) << name; // input, c(+act), s(+act2)
    for (int id : {1, 2}) {
      EXPECT_EQ(f.layer(id).activation, op_activation(op)) << name;
      EXPECT_EQ(std::string(activation_name(f.layer(id).activation)), name);
    }
    const std::string key = workload_signature(f, Group{1, 1});
    const std::string word = op == OpKind::kClip        ? " clip-1:2 "
                             : op == OpKind::kLeakyRelu ? " leaky0.25 "
                                                        : " " + name + " ";
    EXPECT_NE(key.find(word), std::string::npos) << key;
    if (op == OpKind::kClip) {
      EXPECT_EQ(f.layer(1).clip_min, -1.0f);
      EXPECT_EQ(f.layer(1).clip_max, 2.0f);
    } else if (op == OpKind::kLeakyRelu) {
      EXPECT_EQ(f.layer(1).leaky_slope, 0.25f);
    }
  }
  EXPECT_EQ(ops, 8);
}

TEST(Errors, DidYouMean) {
  EXPECT_EQ(did_you_mean("bacth", {"batch", "model"}), " (did you mean 'batch'?)");
  EXPECT_EQ(did_you_mean("zzzzzz", {"batch", "model"}), "");
}

} // namespace
} // namespace brickdl
