// The mobile and modern activations (hard_swish, hard_sigmoid, gelu) and squeeze-excitation's
// channel_mul: the reference against values worked out by hand and against the definitions
// written out in double on random shapes, their shape rules, and the merged executor against
// the reference over every group of an EfficientNet MBConv block, a MobileNetV3 block and a
// GELU MLP block (channel_mul, not brickable, runs layerwise between merged groups).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "core/error.h"
#include "core/graph_builder.h"
#include "kernels/reference.h"
#include "kernels/weights.h"
#include "tests/kernels/group_check.h"

namespace brickdl::kernels {
namespace {

using test_support::expect_groups_match;

Tensor of(const std::vector<float>& v) {
  Tensor t(TensorShape{1, 1, 1, 1, static_cast<int64_t>(v.size()), 2});
  t.values() = v;
  return t;
}

TEST(ActivationOps, ByHand) {
  // hard_sigmoid: 0 below −3, 1 above 3, x/6 + 1/2 between; hard_swish x times that.
  EXPECT_EQ(hard_sigmoid(of({-4, -3, 0, 3, 5})).values(), (std::vector<float>{0, 0, 0.5f, 1, 1}));
  const std::vector<float> hs = hard_swish(of({-4, 0, 1, 3, 5})).values();
  EXPECT_EQ(hs[0], 0.0f);
  EXPECT_EQ(hs[1], 0.0f);
  EXPECT_FLOAT_EQ(hs[2], 1.0f * (1.0f / 6 + 0.5f));
  EXPECT_EQ(hs[3], 3.0f);
  EXPECT_EQ(hs[4], 5.0f);
  // gelu(x) = x·Φ(x): Φ(1) = 0.8413447461, Φ(−1) = 0.1586552539, Φ(2) = 0.9772498681.
  const std::vector<float> g = gelu(of({0, 1, -1, 2})).values();
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_NEAR(g[1], 0.8413447461, 1e-7);
  EXPECT_NEAR(g[2], -0.1586552539, 1e-7);
  EXPECT_NEAR(g[3], 2 * 0.9772498681, 1e-6);
  EXPECT_TRUE(std::isnan(gelu(of({NAN})).values()[0]));
  EXPECT_TRUE(std::isnan(hard_swish(of({NAN})).values()[0]));
  // channel_mul: 2 images × 2 channels of 1×2, times s = (10, 100 | 1000, 10000).
  Tensor x(TensorShape{2, 2, 1, 1, 2, 2});
  x.values() = {1, 2, 3, 4, 5, 6, 7, 8};
  Tensor s(TensorShape{2, 2, 1, 1, 1, 2});
  s.values() = {10, 100, 1000, 10000};
  EXPECT_EQ(channel_mul(x, s).values(),
            (std::vector<float>{10, 20, 300, 400, 5000, 6000, 70000, 80000}));
}

TEST(ActivationOps, RandomShapesMatchTheirDefinitions) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 12; ++trial) {
    const auto dim = [&](int lo, int hi) {
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    const TensorShape shape{dim(1, 3), dim(1, 9), 1, dim(1, 7), dim(1, 7), 2};
    Tensor x = random_tensor(shape, trial, 0);
    for (float& v : x.values())
      v *= 6; // reach past hard_sigmoid's knees at ±3
    const Tensor hs = hard_swish(x), hg = hard_sigmoid(x), ge = gelu(x);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = x.data()[i];
      const double relu6 = std::min(std::max(v + 3, 0.0), 6.0); // torch's form
      EXPECT_NEAR(hg.data()[i], relu6 / 6, 1e-6) << i;
      EXPECT_NEAR(hs.data()[i], v * relu6 / 6, 1e-5) << i;
      EXPECT_NEAR(ge.data()[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-5) << i;
    }
    TensorShape vs = shape;
    vs.h = vs.w = 1;
    const Tensor s = random_tensor(vs, trial, 1);
    const Tensor y = channel_mul(x, s);
    for (int64_t n = 0; n < shape.n; ++n)
      for (int64_t c = 0; c < shape.c; ++c)
        for (int64_t h = 0; h < shape.h; ++h)
          for (int64_t w = 0; w < shape.w; ++w)
            EXPECT_EQ(y.at(n, c, 0, h, w), x.at(n, c, 0, h, w) * s.at(n, c, 0, 0, 0));
  }
}

TEST(ActivationOps, ShapesAndRefusals) {
  GraphBuilder b("s", TensorShape{2, 6, 1, 5, 5, 2});
  const int hs = b.hard_swish(b.input());
  const int pool = b.global_avg_pool(hs);
  const int se = b.channel_mul(b.gelu(hs), b.hard_sigmoid(pool));
  const Graph g = b.build();
  EXPECT_EQ(g.layer(se).out, g.input_shape());
  for (const Layer& l : g.layers())
    EXPECT_EQ(l.params + l.macs, 0) << l.name;
  EXPECT_FALSE(is_brickable(g.layer(se)));
  EXPECT_TRUE(is_brickable(g.layer(hs)));
  GraphBuilder bad("bad", TensorShape{1, 6, 1, 4, 4, 2});
  EXPECT_THROW(bad.channel_mul(bad.input(), bad.input()), ShapeError); // not (N, C, 1, 1)
  const int fewer = bad.conv2d(bad.global_avg_pool(bad.input()), 3, 1);
  EXPECT_THROW(bad.channel_mul(bad.input(), fewer), ShapeError); // 3 channels for 6
}

// EfficientNet-B0's MBConv (expand 6, SE 1/4 of the input channels), as torchvision builds it.
Graph mbconv(const TensorShape& in) {
  GraphBuilder b("mbconv", in);
  const int64_t c = in.c, e = 6 * c, sq = std::max<int64_t>(1, c / 4);
  const int expand = b.silu(b.batch_norm(b.conv2d(b.input(), e, 1, 1, 0, 1, 1, false, "expand")));
  const int dw = b.silu(b.batch_norm(b.conv2d(expand, e, 3, 1, 1, 1, static_cast<int>(e), false)));
  const int pooled = b.global_avg_pool(dw, "se.pool");
  const int fc1 = b.silu(b.conv2d(pooled, sq, 1, 1, 0, 1, 1, true, "se.fc1"));
  const int gate = b.sigmoid(b.conv2d(fc1, e, 1, 1, 0, 1, 1, true, "se.fc2"));
  const int scaled = b.channel_mul(dw, gate, "se.mul");
  const int proj = b.batch_norm(b.conv2d(scaled, c, 1, 1, 0, 1, 1, false, "project"));
  b.add(proj, b.input(), "residual");
  return fuse_for_inference(b.build());
}

// MobileNetV3's block: hard_swish activations, a hard_sigmoid SE gate.
Graph mobilenet_v3_block(const TensorShape& in) {
  GraphBuilder b("mnv3", in);
  const int64_t c = in.c, e = 3 * c;
  const int expand = b.hard_swish(b.batch_norm(b.conv2d(b.input(), e, 1)));
  const int dw = b.hard_swish(b.batch_norm(b.conv2d(expand, e, 5, 1, 2, 1, static_cast<int>(e))));
  const int fc1 = b.relu(b.conv2d(b.global_avg_pool(dw), 4, 1, 1, 0, 1, 1, true));
  const int gate = b.hard_sigmoid(b.conv2d(fc1, e, 1, 1, 0, 1, 1, true));
  b.batch_norm(b.conv2d(b.channel_mul(dw, gate), c, 1));
  return fuse_for_inference(b.build());
}

// A GELU MLP on our layout (ConvNeXt's inner block): 1×1 up, gelu, 1×1 down.
Graph gelu_mlp(const TensorShape& in) {
  GraphBuilder b("mlp", in);
  const int up = b.gelu(b.conv2d(b.input(), 4 * in.c, 1, 1, 0, 1, 1, true));
  b.add(b.conv2d(up, in.c, 1, 1, 0, 1, 1, true), b.input());
  return fuse_for_inference(b.build());
}

TEST(ActivationOps, MergedMBConvMatchesTheReference) {
  expect_groups_match(mbconv(TensorShape{2, 4, 1, 9, 7, 2}), 1, {OpKind::kSilu});
  expect_groups_match(mbconv(TensorShape{1, 8, 1, 6, 6, 2}), 2, {OpKind::kSilu});
}

TEST(ActivationOps, MergedMobileNetV3BlockMatchesTheReference) {
  expect_groups_match(mobilenet_v3_block(TensorShape{2, 4, 1, 8, 9, 2}), 3, {OpKind::kHardSwish});
}

TEST(ActivationOps, MergedGeluMlpMatchesTheReference) {
  expect_groups_match(gelu_mlp(TensorShape{2, 3, 1, 9, 8, 2}), 4, {OpKind::kGelu});
}

} // namespace
} // namespace brickdl::kernels
