// The mobile and modern activations (hard_swish, hard_sigmoid, gelu) and squeeze-excitation's
// channel_mul: the reference against values worked out by hand and against the definitions
// written out in double on random shapes, their shape rules, and the merged executor against
// the reference over every group of an EfficientNet MBConv block, a MobileNetV3 block and a
// GELU MLP block (channel_mul merges into the group after the SE vector's pool). Numpy
// broadcasting of add / sub / mul / div: the reference against index arithmetic, the shape
// rule, and merged groups reading a broadcast operand.
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
  EXPECT_TRUE(is_brickable(g.layer(se))); // its s from outside a group: core/group.h
  EXPECT_TRUE(is_brickable(g.layer(hs)));
  // The gate computed inside the group: padded and memoized refuse it, naming the operand.
  const std::string why = brick_blocker(g, Group{pool + 1, se});
  EXPECT_NE(why.find("broadcasts"), std::string::npos) << why;
  EXPECT_EQ(brick_blocker(g, Group{se, se}), "");
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
  expect_groups_match(mbconv(TensorShape{2, 4, 1, 9, 7, 2}), 1,
                      {OpKind::kSilu, OpKind::kChannelMul});
  expect_groups_match(mbconv(TensorShape{1, 8, 1, 6, 6, 2}), 2,
                      {OpKind::kSilu, OpKind::kChannelMul});
}

TEST(ActivationOps, MergedMobileNetV3BlockMatchesTheReference) {
  expect_groups_match(mobilenet_v3_block(TensorShape{2, 4, 1, 8, 9, 2}), 3,
                      {OpKind::kHardSwish, OpKind::kHardSigmoid, OpKind::kChannelMul});
}

// ---- broadcasting ----------------------------------------------------------------------------

// y[n, c, h, w] = f(a at the index, b at the index), an axis of extent 1 read at 0: written
// out with explicit indices, in double.
template <typename F>
void expect_broadcast(const Tensor& a, const Tensor& b, const Tensor& y, F f) {
  const auto get = [](const Tensor& t, int64_t n, int64_t c, int64_t h, int64_t w) {
    const TensorShape& s = t.shape();
    return double{t.at(n, s.c == 1 ? 0 : c, 0, s.h == 1 ? 0 : h, s.w == 1 ? 0 : w)};
  };
  const TensorShape& o = y.shape();
  for (int64_t n = 0; n < o.n; ++n)
    for (int64_t c = 0; c < o.c; ++c)
      for (int64_t h = 0; h < o.h; ++h)
        for (int64_t w = 0; w < o.w; ++w)
          ASSERT_NEAR(y.at(n, c, 0, h, w), f(get(a, n, c, h, w), get(b, n, c, h, w)),
                      1e-6 * (1 + std::fabs(f(get(a, n, c, h, w), get(b, n, c, h, w)))))
              << n << " " << c << " " << h << " " << w;
}

TEST(Broadcast, ReferenceOpsBroadcastEitherOperand) {
  std::mt19937_64 rng(5);
  int seed = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const auto dim = [&](int lo, int hi) {
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    const TensorShape full{dim(1, 3), dim(2, 7), 1, dim(2, 6), dim(2, 6), 2};
    TensorShape per_channel = full, scalar = full, plane = full;
    per_channel.h = per_channel.w = 1;
    scalar.c = scalar.h = scalar.w = 1;
    plane.c = 1;
    const Tensor x = random_tensor(full, ++seed, 0);
    for (const TensorShape& bs : {full, per_channel, scalar, plane}) {
      const Tensor v = random_tensor(bs, ++seed, 0);
      Tensor den = random_tensor(bs, ++seed, 0);
      for (float& d : den.values())
        d = 0.5f + std::fabs(d); // away from 0
      SCOPED_TRACE(full.str() + " with " + bs.str());
      expect_broadcast(x, v, add(x, v), [](double a, double b) { return a + b; });
      expect_broadcast(v, x, add(v, x), [](double a, double b) { return a + b; });
      expect_broadcast(x, v, sub(x, v), [](double a, double b) { return a - b; });
      expect_broadcast(v, x, sub(v, x), [](double a, double b) { return a - b; });
      expect_broadcast(v, x, mul(v, x), [](double a, double b) { return a * b; });
      expect_broadcast(x, den, div(x, den), [](double a, double b) { return a / b; });
      EXPECT_EQ(add(x, v).shape(), full);
      EXPECT_EQ(sub(v, x).shape(), full);
    }
  }
}

TEST(Broadcast, ShapeRule) {
  GraphBuilder b("b", TensorShape{2, 6, 1, 5, 4, 2});
  const int x = b.input();
  const int v = b.conv2d(b.global_avg_pool(x), 6, 1, 1, 0, 1, 1, true, "v"); // 2x6x1x1
  const int s = b.conv2d(b.global_avg_pool(x), 1, 1, 1, 0, 1, 1, true, "s"); // 2x1x1x1
  const int sub = b.sub(v, x), div = b.div(x, s), add = b.add(s, v);
  const int three = b.conv2d(x, 3, 1, 1, 0, 1, 1, true, "three");
  try {
    b.add(x, three, "bad");
    ADD_FAILURE() << "6 channels against 3 accepted";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("extent 1 on the axes where they differ"), std::string::npos) << m;
    EXPECT_NE(m.find("2x3x5x4"), std::string::npos) << m;
  }
  const Graph g = b.build();
  EXPECT_EQ(g.layer(sub).out, (TensorShape{2, 6, 1, 5, 4, 2}));
  EXPECT_EQ(g.layer(div).out, (TensorShape{2, 6, 1, 5, 4, 2}));
  EXPECT_EQ(g.layer(add).out, (TensorShape{2, 6, 1, 1, 1, 2}));
  GraphBuilder other("o", TensorShape{2, 6, 1, 5, 4, 2});
  const int pooled = other.global_avg_pool(other.input());
  const int flat = other.flatten(pooled); // rank 0 against rank 2
  EXPECT_THROW(other.mul(other.input(), flat), ShapeError);
}

// Per-channel, per-image and plane operands from outside the group (a pool, then 1x1 convs)
// and from inside it (which runs layerwise), either side of each op, in merged groups.
Graph broadcast_chain(const TensorShape& in) {
  GraphBuilder b("bcast", in);
  const int x = b.input();
  const int pooled = b.global_avg_pool(x, "pool");
  const int v = b.sigmoid(b.conv2d(pooled, 8, 1, 1, 0, 1, 1, true, "v"));
  const int s = b.conv2d(pooled, 1, 1, 1, 0, 1, 1, true, "s");
  const int c1 = b.conv2d(x, 8, 3, 1, 1, 1, 1, true, "c1");
  int y = b.add(b.mul(c1, v, "mul"), s, "add");
  y = b.sub(v, b.conv2d(y, 8, 1, 1, 0, 1, 1, true, "c2"), "sub");
  const int den = b.add(v, b.clip(v, 1.f, 1.f), "den"); // v + 1, in [1, 2]
  y = b.div(b.conv2d(y, 8, 3, 1, 1, 1, 1, true, "c3"), den, "div");
  const int plane = b.conv2d(c1, 1, 1, 1, 0, 1, 1, true, "plane"); // (N, 1, H, W)
  b.relu(b.add(y, plane, "add_plane"));
  return fuse_for_inference(b.build());
}

TEST(Broadcast, MergedGroupsMatchTheReference) {
  expect_groups_match(broadcast_chain(TensorShape{2, 3, 1, 7, 9, 2}), 7,
                      {OpKind::kMul, OpKind::kAdd, OpKind::kSub, OpKind::kDiv});
}

TEST(ActivationOps, MergedGeluMlpMatchesTheReference) {
  expect_groups_match(gelu_mlp(TensorShape{2, 3, 1, 9, 8, 2}), 4, {OpKind::kGelu});
}

} // namespace
} // namespace brickdl::kernels
