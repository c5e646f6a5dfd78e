// Reference ops against small cases computed by hand (the arithmetic is in the comments).
#include <gtest/gtest.h>

#include <cmath>

#include "core/graph_builder.h"
#include "kernels/reference.h"
#include "kernels/weights.h"

namespace brickdl::kernels {
namespace {

Tensor make(const TensorShape& s, std::vector<float> v) {
  Tensor t(s);
  EXPECT_EQ(static_cast<int64_t>(v.size()), s.numel());
  t.values() = std::move(v);
  return t;
}

Tensor iota(const TensorShape& s) {
  Tensor t(s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data()[i] = static_cast<float>(i);
  return t;
}

Window win2d(int k, int s, int p, int d = 1) {
  Window w;
  w.kernel = {1, k, k};
  w.stride = {1, s, s};
  w.pad = {0, p, p};
  w.dilation = {1, d, d};
  return w;
}

TEST(Reference, Conv2dValid) {
  // x = [[1,2,3],[4,5,6],[7,8,9]], w = [[1,2],[3,4]]:
  // y00 = 1+4+12+20 = 37, y01 = 2+6+15+24 = 47, y10 = 4+10+21+32 = 67, y11 = 5+12+24+36 = 77.
  const Tensor x = make({1, 1, 1, 3, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor y = conv(x, {1, 2, 3, 4}, {}, 1, win2d(2, 1, 0), 1);
  EXPECT_EQ(y.shape(), (TensorShape{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(y.values(), (std::vector<float>{37, 47, 67, 77}));
}

TEST(Reference, Conv2dPaddedStrided) {
  // Ones 4x4, 3x3 ones kernel, stride 2, pad 1: out extent (4+2-3)/2+1 = 2; windows cover
  // rows/cols {-1..1} or {1..3}: 2x2 = 4, 2x3 = 6, 3x2 = 6, 3x3 = 9 inside elements.
  const Tensor x(TensorShape{1, 1, 1, 4, 4, 2}, 1.0f);
  const Tensor y = conv(x, std::vector<float>(9, 1.0f), {}, 1, win2d(3, 2, 1), 1);
  EXPECT_EQ(y.values(), (std::vector<float>{4, 6, 6, 9}));
}

TEST(Reference, Conv3dDilated) {
  // x[z][y][x] = 25z + 5y + x on 5^3; kernel 3^3, dilation 2, no pad: one output, reading
  // (0,0,0), (0,0,2), ... (4,4,4). Only taps (0,0,0) and (2,2,2) weigh 1: y = 0 + 124.
  const Tensor x = iota({1, 1, 5, 5, 5, 3});
  std::vector<float> w(27, 0.0f);
  w[0] = 1;
  w[26] = 1;
  Window win;
  win.kernel = {3, 3, 3};
  win.dilation = {2, 2, 2};
  const Tensor y = conv(x, w, {}, 1, win, 1);
  EXPECT_EQ(y.shape(), (TensorShape{1, 1, 1, 1, 1, 3}));
  EXPECT_EQ(y.values(), (std::vector<float>{124}));
}

TEST(Reference, GroupedConvBiasAndEpilogue) {
  // Two groups of one channel: y0 = 2·3 + 1 = 7, y1 = 10·5 − 100 = −50.
  const Tensor x = make({1, 2, 1, 1, 1, 2}, {3, 5});
  const Window w = win2d(1, 1, 0);
  EXPECT_EQ(conv(x, {2, 10}, {1, -100}, 2, w, 2).values(), (std::vector<float>{7, -50}));
  EXPECT_EQ(conv(x, {2, 10}, {1, -100}, 2, w, 2, {Activation::kRelu}).values(),
            (std::vector<float>{7, 0}));
  EXPECT_EQ(conv(x, {2, 10}, {1, -100}, 2, w, 2, {Activation::kLeakyRelu, 0.25f}).values(),
            (std::vector<float>{7, -12.5f}));
}

TEST(Reference, Fp64AccumulationKeepsSmallTerms) {
  // 1x1 conv over 3 channels [1e8, 1, -1e8] with unit weights: in fp32 1e8 + 1 rounds back to
  // 1e8 (spacing 8 there) and the sum is 0; in fp64 it is 1.
  const Tensor x = make({1, 3, 1, 1, 1, 2}, {1e8f, 1.0f, -1e8f});
  const Window w = win2d(1, 1, 0);
  EXPECT_EQ(conv(x, {1, 1, 1}, {}, 1, w, 1, {}, Accumulation::kF32).values()[0], 0.0f);
  EXPECT_EQ(conv(x, {1, 1, 1}, {}, 1, w, 1, {}, Accumulation::kF64).values()[0], 1.0f);
}

TEST(Reference, BatchNormReluLeakyAdd) {
  const Tensor x = make({1, 2, 1, 1, 2, 2}, {1, -2, 3, -4});
  EXPECT_EQ(batch_norm(x, {2, 3}, {1, -1}).values(), (std::vector<float>{3, -3, 8, -13}));
  EXPECT_EQ(relu(x).values(), (std::vector<float>{1, 0, 3, 0}));
  EXPECT_EQ(leaky_relu(x, 0.5f).values(), (std::vector<float>{1, -1, 3, -2}));
  EXPECT_EQ(add(x, x).values(), (std::vector<float>{2, -4, 6, -8}));
  EXPECT_EQ(add(x, x, {Activation::kRelu}).values(), (std::vector<float>{2, 0, 6, 0}));
}

TEST(Reference, ConcatOrdersChannels) {
  const Tensor a = make({1, 1, 1, 2, 2, 2}, {1, 2, 3, 4});
  const Tensor b = make({1, 2, 1, 2, 2, 2}, {5, 6, 7, 8, 9, 10, 11, 12});
  const Tensor y = concat({&b, &a});
  EXPECT_EQ(y.shape().c, 3);
  EXPECT_EQ(y.values(), (std::vector<float>{5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3, 4}));
}

TEST(Reference, MaxPoolCeilModeAndPadding) {
  // 5x5 of 0..24, 2x2 stride 2, ceil mode: 3x3 out; the last row/column windows hold only
  // one row/column of the input: y00 = max(0,1,5,6) = 6, y02 = max(4,9) = 9,
  // y20 = max(20,21) = 21, y22 = 24.
  const Tensor x = iota({1, 1, 1, 5, 5, 2});
  const Tensor y = max_pool(x, win2d(2, 2, 0), true);
  EXPECT_EQ(y.values(), (std::vector<float>{6, 8, 9, 16, 18, 19, 21, 23, 24}));
  // Padding never wins, even over negative values: -x, 3x3 stride 2 pad 1 -> 3x3 out;
  // y00 = max(-0,-1,-5,-6) = 0, y11 = max over rows 1..3, cols 1..3 = -6.
  Tensor neg = x;
  for (float& v : neg.values())
    v = -v;
  const Tensor z = max_pool(neg, win2d(3, 2, 1), false);
  EXPECT_EQ(z.values()[0], 0.0f);
  EXPECT_EQ(z.values()[4], -6.0f);
}

TEST(Reference, AvgPoolCountIncludePadAndCeilDivisor) {
  // 4x4 of 0..15, 3x3 stride 2 pad 1: y00 covers {0,1,4,5} = 10; including padding the
  // divisor is 9, excluding it 4.
  const Tensor x = iota({1, 1, 1, 4, 4, 2});
  EXPECT_FLOAT_EQ(avg_pool(x, win2d(3, 2, 1), false, true).values()[0], 10.0f / 9.0f);
  EXPECT_FLOAT_EQ(avg_pool(x, win2d(3, 2, 1), false, false).values()[0], 2.5f);
  // 1-D row 0..5, kernel 3, stride 2, pad 1, ceil mode: 4 outputs (PyTorch's avg_pool1d):
  // [(0+0+1)/3, (1+2+3)/3, (3+4+5)/3, (5+pad)/2]: the last window [5, 8) is clipped to the
  // padded input [.., 7), so its divisor is 2, not 3.
  const Tensor row = iota({1, 1, 1, 1, 6, 2});
  Window w;
  w.kernel = {1, 1, 3};
  w.stride = {1, 1, 2};
  w.pad = {0, 0, 1};
  const Tensor y = avg_pool(row, w, true, true);
  ASSERT_EQ(y.shape().w, 4);
  EXPECT_FLOAT_EQ(y.values()[0], 1.0f / 3.0f);
  EXPECT_FLOAT_EQ(y.values()[1], 2.0f);
  EXPECT_FLOAT_EQ(y.values()[2], 4.0f);
  EXPECT_FLOAT_EQ(y.values()[3], 2.5f);
}

TEST(Reference, GlobalAvgPoolFlattenLinear) {
  const Tensor x = make({1, 2, 1, 2, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 40});
  const Tensor g = global_avg_pool(x);
  EXPECT_EQ(g.values(), (std::vector<float>{2.5f, 25.0f}));
  const Tensor f = flatten(x);
  EXPECT_EQ(f.shape(), (TensorShape{1, 8, 1, 1, 1, 0}));
  EXPECT_EQ(f.values(), x.values());
  // [1,2,3] · [[1,0,-1],[2,2,2]]^T + [0.5,-1] = [-1.5, 11]; relu -> [0, 11].
  const Tensor v = make({1, 3, 1, 1, 1, 0}, {1, 2, 3});
  EXPECT_EQ(linear(v, {1, 0, -1, 2, 2, 2}, {0.5f, -1}, 2).values(),
            (std::vector<float>{-1.5f, 11}));
  EXPECT_EQ(linear(v, {1, 0, -1, 2, 2, 2}, {0.5f, -1}, 2, {Activation::kRelu}).values(),
            (std::vector<float>{0, 11}));
}

TEST(Reference, UpsampleNearestAndLinear) {
  const Tensor x = make({1, 1, 1, 2, 2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(upsample(x, 2, false).values(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // align_corners=False, row [0, 1] -> 4 columns: src = (dst + 0.5)/2 - 0.5 =
  // -0.25 (clamped to 0), 0.25, 0.75, 1.25 (i1 clamped to 1): [0, 0.25, 0.75, 1].
  const Tensor r = make({1, 1, 1, 1, 2, 2}, {0, 1});
  EXPECT_EQ(upsample(r, 2, true).values(),
            (std::vector<float>{0, 0.25f, 0.75f, 1, 0, 0.25f, 0.75f, 1}));
  // 3-D (trilinear) along depth: [0, 4] -> [0, 1, 3, 4], constant over h and w.
  const Tensor d = make({1, 1, 2, 1, 1, 3}, {0, 4});
  const Tensor u = upsample(d, 2, true);
  EXPECT_EQ(u.shape(), (TensorShape{1, 1, 4, 2, 2, 3}));
  for (int64_t z = 0; z < 4; ++z)
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_EQ(u.values()[static_cast<size_t>(z * 4 + i)], (std::vector<float>{0, 1, 3, 4})[z]);
}

TEST(Reference, FoldedBatchNormEqualsConvThenBatchNorm) {
  const Tensor x = random_tensor({2, 3, 1, 6, 5, 2}, 7);
  LayerWeights raw;
  raw.weight = random_tensor({4, 3, 1, 3, 3, 2}, 8).values();
  raw.bias = random_tensor({1, 4, 1, 1, 1, 0}, 9).values();
  std::vector<float> scale, shift;
  random_batch_norm(10, 4, &scale, &shift);
  const Window w = win2d(3, 1, 1);
  const Tensor two_steps = batch_norm(conv(x, raw.weight, raw.bias, 4, w, 1), scale, shift);
  const LayerWeights folded = fold_batch_norm(raw, scale, shift);
  const Tensor fused = conv(x, folded.weight, folded.bias, 4, w, 1);
  for (int64_t i = 0; i < fused.numel(); ++i)
    EXPECT_NEAR(fused.data()[i], two_steps.data()[i], 1e-5f * (1 + std::fabs(two_steps.data()[i])));
}

TEST(Reference, RunGraphChainsLayersAndChecksShapes) {
  GraphBuilder b("t", TensorShape{1, 2, 1, 6, 6, 2});
  const int c = b.conv2d(b.input(), 3, 3, 1, 1);
  const int p = b.max_pool(c, 2, 2);
  b.global_avg_pool(p);
  const Graph g = b.build();
  const ModelWeights w = make_weights(g, 3);
  const Tensor x = random_tensor(g.input_shape(), 4);
  const Tensor step1 = run_layer(g.layer(c), {&x}, w.at(c));
  const Tensor step2 = max_pool(step1, g.layer(p).window, false);
  const Tensor manual = global_avg_pool(step2);
  EXPECT_EQ(run_graph(g, x, w).values(), manual.values());
  // Weights are keyed by (seed, layer name): same seed, same values; another seed differs.
  EXPECT_EQ(make_weights(g, 3).at(c).weight, w.at(c).weight);
  EXPECT_NE(make_weights(g, 4).at(c).weight, w.at(c).weight);
  EXPECT_EQ(static_cast<int64_t>(w.at(c).weight.size()), g.layer(c).params);
}

} // namespace
} // namespace brickdl::kernels
