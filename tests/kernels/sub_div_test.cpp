// sub and div of two computed tensors of one shape: the reference against values by hand and
// against the definitions in double on random shapes, the shape rule's refusals, YAML, and the
// merged executor against the reference over every group of a MobileNetV3-style block (the
// activations of issue 32 around them) and a 3-D chain.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/yaml_graph.h"
#include "kernels/reference.h"
#include "kernels/weights.h"
#include "tests/kernels/group_check.h"

namespace brickdl::kernels {
namespace {

using test_support::expect_groups_match;

Tensor of(std::vector<float> v) {
  Tensor t(TensorShape{1, 1, 1, 1, static_cast<int64_t>(v.size()), 2});
  t.values() = std::move(v);
  return t;
}

TEST(SubDiv, ByHand) {
  EXPECT_EQ(sub(of({5, 1, -2}), of({2, 3, -2})).values(), (std::vector<float>{3, -2, 0}));
  EXPECT_EQ(div(of({6, 1, -3}), of({2, 4, 0.5f})).values(), (std::vector<float>{3, 0.25f, -6}));
  EXPECT_TRUE(std::isinf(div(of({1}), of({0})).values()[0])); // IEEE, as ONNX Runtime
}

TEST(SubDiv, RandomShapesMatchTheirDefinitions) {
  std::mt19937 rng(41);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < 12; ++i) {
    TensorShape s{pick(1, 3), pick(1, 6), 1, pick(1, 7), pick(1, 7), 2};
    if (i % 3 == 0)
      s.spatial_rank = 3, s.d = pick(1, 3);
    const Tensor x = random_tensor(s, 9, static_cast<uint64_t>(i));
    Tensor y = random_tensor(s, 9, static_cast<uint64_t>(100 + i));
    for (float& v : y.values())
      v = v >= 0 ? v + 0.5f : v - 0.5f; // away from 0 for the quotient
    const Tensor d = sub(x, y), q = div(x, y);
    ASSERT_EQ(d.shape(), s);
    ASSERT_EQ(q.shape(), s);
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double v = x.data()[k], u = y.data()[k];
      ASSERT_NEAR(d.data()[k], v - u, 1e-6 * (1 + std::fabs(v - u))) << k;
      ASSERT_NEAR(q.data()[k], v / u, 1e-6 * (1 + std::fabs(v / u))) << k;
    }
  }
}

TEST(SubDiv, ShapesRefusalsAndYaml) {
  GraphBuilder b("s", TensorShape{2, 6, 1, 5, 4, 2});
  const int r = b.relu(b.input());
  const int s = b.sub(b.input(), r);
  const int d = b.div(s, r);
  const Graph g = b.build();
  for (int id : {s, d}) {
    EXPECT_EQ(g.layer(id).out, g.input_shape()) << id;
    EXPECT_EQ(g.layer(id).params + g.layer(id).macs, 0) << id;
  }
  GraphBuilder bad("bad", TensorShape{1, 6, 1, 4, 4, 2});
  const int c = bad.conv2d(bad.input(), 3, 1, 1, 0);
  EXPECT_THROW(bad.sub(bad.input(), c), ShapeError);
  EXPECT_THROW(bad.div(c, bad.input()), ShapeError);
  const Graph y = parse_yaml_graph(R"(
input: {channels: 4, size: [3, 3]}
layers:
  - {name: a, op: relu}
  - {name: d, op: sub, inputs: [input, a]}
  - {name: e, op: div, inputs: [d, a]}
)",
                                   "subdiv.yaml");
  ASSERT_EQ(y.size(), 4);
  EXPECT_EQ(y.layer(2).op, OpKind::kSub);
  EXPECT_EQ(y.layer(3).op, OpKind::kDiv);
  EXPECT_EQ(y.layer(3).inputs, (std::vector<int>{2, 1}));
}

// A MobileNetV3-style block on equal shapes: expand 1x1 → BN → hard_swish → depthwise 3x3 →
// hard_swish, a project 1x1 → gelu, then (x − project) / sigmoid(project) + x: sub and div read
// two tensors made inside the group.
Graph v3_block(const TensorShape& in) {
  GraphBuilder b("v3_block", in);
  const int64_t c = in.c;
  const int e = b.hard_swish(b.batch_norm(b.conv2d(b.input(), 2 * c, 1, 1, 0, 1, 1, false)));
  const int dw = b.hard_swish(b.conv2d(e, 2 * c, 3, 1, 1, 1, static_cast<int>(2 * c), true));
  const int proj = b.gelu(b.conv2d(dw, c, 1, 1, 0, 1, 1, true, "project"));
  const int diff = b.sub(b.input(), proj, "diff");
  const int q = b.div(diff, b.sigmoid(proj), "quot");
  b.add(q, b.input(), "residual");
  return fuse_for_inference(b.build());
}

TEST(SubDiv, MergedV3BlockMatchesTheReference) {
  expect_groups_match(v3_block(TensorShape{2, 4, 1, 9, 7, 2}), 1, {OpKind::kSub, OpKind::kDiv});
  expect_groups_match(v3_block(TensorShape{1, 3, 1, 6, 10, 2}), 2, {OpKind::kSub, OpKind::kDiv});
}

TEST(SubDiv, Merged3dChainMatchesTheReference) {
  GraphBuilder b("three_d", TensorShape{1, 4, 4, 5, 6, 3});
  const int c = b.conv3d(b.input(), 4, 3, 1, 1);
  const int s = b.sub(b.hard_swish(c), b.hard_sigmoid(c));
  b.conv3d(b.div(s, b.sigmoid(c)), 4, 3, 1, 1, 1, 1, true);
  expect_groups_match(fuse_for_inference(b.build()), 3, {OpKind::kSub, OpKind::kDiv});
}

} // namespace
} // namespace brickdl::kernels
