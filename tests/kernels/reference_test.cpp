// Reference ops against small cases computed by hand (the arithmetic is in the comments);
// conv_transpose also against a scatter-form implementation written here, on random shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

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

// The output extent of a transposed conv on one axis, as ONNX ConvTranspose and PyTorch
// define it: (in − 1)·s − 2p + d·(k − 1) + output_padding + 1.
int64_t deconv_extent(int64_t in, const Window& w, const std::array<int, 3>& op, int a) {
  const size_t i = static_cast<size_t>(a);
  return (in - 1) * w.stride[i] - 2 * w.pad[i] + int64_t{w.dilation[i]} * (w.kernel[i] - 1) +
         op[i] + 1;
}

// A transposed conv in scatter form, independently of kernels::conv_transpose (which gathers
// per output element): every input element, times every tap of every output channel of its
// group, adds into the output element it lands on, o = i·s − p + k·d per axis (skipped when
// outside). Sums in double; `magnitude` receives Σ|terms| per output element (for the fp32
// tolerance). Then bias and relu when asked.
std::vector<double> scatter_deconv(const Tensor& x, const std::vector<float>& w,
                                   const std::vector<float>& bias, const TensorShape& os,
                                   int groups, const Window& win, bool relu,
                                   std::vector<double>* magnitude) {
  const TensorShape& is = x.shape();
  const int64_t cin_g = is.c / groups, cout_g = os.c / groups;
  const auto& k = win.kernel;
  std::vector<double> y(static_cast<size_t>(os.numel()), 0.0);
  magnitude->assign(y.size(), 0.0);
  const auto out_index = [&](int64_t n, int64_t c, const std::array<int64_t, 3>& o) {
    return static_cast<size_t>((((n * os.c + c) * os.d + o[0]) * os.h + o[1]) * os.w + o[2]);
  };
  const std::array<int64_t, 3> ext = {os.d, os.h, os.w};
  for (int64_t n = 0; n < is.n; ++n)
    for (int64_t ci = 0; ci < is.c; ++ci)
      for (int64_t iz = 0; iz < is.d; ++iz)
        for (int64_t iy = 0; iy < is.h; ++iy)
          for (int64_t ix = 0; ix < is.w; ++ix) {
            const std::array<int64_t, 3> i = {iz, iy, ix};
            const double v = x.at(n, ci, iz, iy, ix);
            for (int64_t col = 0; col < cout_g; ++col)
              for (int a = 0; a < k[0]; ++a)
                for (int b = 0; b < k[1]; ++b)
                  for (int c = 0; c < k[2]; ++c) {
                    const std::array<int, 3> tap = {a, b, c};
                    std::array<int64_t, 3> o{};
                    bool inside = true;
                    for (size_t ax = 0; ax < 3; ++ax) {
                      o[ax] = i[ax] * win.stride[ax] - win.pad[ax] +
                              int64_t{tap[ax]} * win.dilation[ax];
                      inside = inside && o[ax] >= 0 && o[ax] < ext[ax];
                    }
                    if (!inside)
                      continue;
                    const double wv = w[static_cast<size_t>(
                        (((ci * cout_g + col) * k[0] + a) * k[1] + b) * k[2] + c)];
                    const size_t at = out_index(n, (ci / cin_g) * cout_g + col, o);
                    y[at] += v * wv;
                    (*magnitude)[at] += std::fabs(v * wv);
                  }
          }
  for (size_t e = 0; e < y.size(); ++e) {
    const size_t co = e / static_cast<size_t>(os.spatial()) % static_cast<size_t>(os.c);
    if (!bias.empty()) {
      y[e] += bias[co];
      (*magnitude)[e] += std::fabs(bias[co]);
    }
    if (relu)
      y[e] = std::max(y[e], 0.0);
  }
  return y;
}

TEST(Reference, ConvTransposeByHand) {
  // 1-D along w, DeepCAM's window (k 3, stride 2, pad 1, output_padding 1): out extent
  // (3 − 1)·2 − 2 + 2 + 1 + 1 = 6. x = [1, 2, 3], w = [1, 10, 100]; input i reaches
  // o = 2i − 1 + k: i=0 → o0 += 1·10, o1 += 1·100 (tap 0 lands on −1); i=1 → o1 += 2·1,
  // o2 += 2·10, o3 += 2·100; i=2 → o3 += 3·1, o4 += 3·10, o5 += 3·100.
  GraphBuilder b("t", TensorShape{1, 1, 1, 1, 3, 2});
  Window w;
  w.kernel = {1, 1, 3};
  w.stride = {1, 1, 2};
  w.pad = {0, 0, 1};
  const Layer& l = b.layer(b.conv_transpose(b.input(), 1, w, {0, 0, 1}, 1, true));
  ASSERT_EQ(l.out, (TensorShape{1, 1, 1, 1, 6, 2}));
  const Tensor x = make({1, 1, 1, 1, 3, 2}, {1, 2, 3});
  EXPECT_EQ(conv_transpose(x, {1, 10, 100}, {}, l).values(),
            (std::vector<float>{10, 102, 20, 203, 30, 300}));
  // Bias −25 then relu: [−15, 77, −5, 178, 5, 275] → [0, 77, 0, 178, 5, 275].
  EXPECT_EQ(conv_transpose(x, {1, 10, 100}, {-25}, l, {Activation::kRelu}).values(),
            (std::vector<float>{0, 77, 0, 178, 5, 275}));

  // 2-D, k 2, stride 2, no pad: each input pixel paints a 2x2 block, x[i][j] · w[a][b] at
  // (2i + a, 2j + b). Two input channels in two groups, one output channel each: the second
  // channel's output is its block times −1.
  GraphBuilder b2("t", TensorShape{1, 2, 1, 2, 2, 2});
  const Window w2 = win2d(2, 2, 0);
  const Layer& l2 = b2.layer(b2.conv_transpose(b2.input(), 2, w2, {0, 0, 0}, 2));
  ASSERT_EQ(l2.out, (TensorShape{1, 2, 1, 4, 4, 2}));
  const Tensor x2 = make({1, 2, 1, 2, 2, 2}, {1, 2, 3, 4, 1, 2, 3, 4});
  const std::vector<float> painted = {1, 10, 2, 20, 100, 1000, 200, 2000,
                                      3, 30, 4, 40, 300, 3000, 400, 4000};
  std::vector<float> both = painted;
  for (float v : painted)
    both.push_back(-v);
  EXPECT_EQ(conv_transpose(x2, {1, 10, 100, 1000, -1, -10, -100, -1000}, {}, l2).values(), both);
}

// One random transposed-conv case: 2-D or 3-D, 1 to 4 groups (or depthwise: one input channel
// per group), kernel 1..4 (3-D 1..3), stride 1..3, dilation 1..2, pad up to the dilated
// kernel, output_padding below max(stride, dilation). False when the pads leave no output.
struct DeconvCase {
  TensorShape in;
  int64_t cout = 1;
  int groups = 1;
  Window win;
  std::array<int, 3> op{0, 0, 0};
  bool bias = false, relu = false;

  bool draw(std::mt19937& rng, int trial) {
    const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution(lo, hi)(rng); };
    const int rank = trial % 3 == 0 ? 3 : 2;
    const int kind = pick(0, 3); // 0, 1: one group; 2: 2..3 groups; 3: depthwise
    groups = kind == 2 ? pick(2, 3) : kind == 3 ? pick(2, 4) : 1;
    const int64_t cin_g = kind == 3 ? 1 : pick(1, 3);
    cout = groups * pick(1, kind == 3 ? 2 : 3);
    in = TensorShape{pick(1, 2), groups * cin_g, rank == 3 ? pick(1, 3) : 1,
                     pick(1, 4), pick(1, 4),     rank};
    win = Window{};
    op = {0, 0, 0};
    for (int a = rank == 3 ? 0 : 1; a < 3; ++a) {
      const size_t i = static_cast<size_t>(a);
      win.kernel[i] = pick(1, rank == 3 ? 3 : 4);
      win.stride[i] = pick(1, 3);
      win.dilation[i] = pick(1, 2);
      win.pad[i] = pick(0, win.dilation[i] * (win.kernel[i] - 1));
      op[i] = pick(0, std::max(win.stride[i], win.dilation[i]) - 1);
    }
    bias = pick(0, 1) == 1;
    relu = pick(0, 3) == 0;
    for (int a = 0; a < 3; ++a)
      if (deconv_extent(in.dim(a), win, op, a) < 1)
        return false;
    return true;
  }
};

TEST(Reference, ConvTransposeEqualsScatterFormOnRandomShapes) {
  std::mt19937 rng(2718);
  int checked = 0, three_d = 0, grouped = 0, stride3 = 0, dilated = 0, out_padded = 0;
  for (int trial = 0; trial < 300; ++trial) {
    DeconvCase c;
    if (!c.draw(rng, trial))
      continue;
    GraphBuilder b("t", c.in);
    const Layer& l = b.layer(b.conv_transpose(b.input(), c.cout, c.win, c.op, c.groups, c.bias));
    TensorShape os = c.in;
    os.c = c.cout;
    os.d = deconv_extent(c.in.d, c.win, c.op, 0);
    os.h = deconv_extent(c.in.h, c.win, c.op, 1);
    os.w = deconv_extent(c.in.w, c.win, c.op, 2);
    ASSERT_EQ(l.out, os) << "trial " << trial;
    const Tensor x = random_tensor(c.in, 11, static_cast<uint64_t>(trial));
    const int64_t nw =
        c.in.c * (c.cout / c.groups) * c.win.kernel[0] * c.win.kernel[1] * c.win.kernel[2];
    const std::vector<float> w = random_tensor({1, nw, 1, 1, 1, 0}, 12, trial).values();
    const std::vector<float> bias =
        c.bias ? random_tensor({1, c.cout, 1, 1, 1, 0}, 13, trial).values() : std::vector<float>{};
    std::vector<double> mag;
    const std::vector<double> want = scatter_deconv(x, w, bias, os, c.groups, c.win, c.relu, &mag);
    const Epilogue ep{c.relu ? Activation::kRelu : Activation::kNone};
    const Tensor y64 = conv_transpose(x, w, bias, l, ep, Accumulation::kF64);
    const Tensor y32 = conv_transpose(x, w, bias, l, ep, Accumulation::kF32);
    for (size_t e = 0; e < want.size(); ++e) {
      // Rounding the double sum once; fp32 sums lose at most ~n·2^-24 of Σ|terms|.
      ASSERT_NEAR(y64.values()[e], want[e], 1e-6 * (1 + std::fabs(want[e])))
          << "trial " << trial << " element " << e;
      ASSERT_NEAR(y32.values()[e], want[e], 1e-5 * (1 + mag[e]))
          << "trial " << trial << " element " << e;
    }
    ++checked;
    three_d += c.in.spatial_rank == 3;
    grouped += c.groups > 1;
    stride3 += std::ranges::count(c.win.stride, 3) > 0;
    dilated += std::ranges::count(c.win.dilation, 2) > 0;
    out_padded += c.op != std::array<int, 3>{0, 0, 0};
  }
  EXPECT_GT(checked, 200);
  for (int seen : {three_d, grouped, stride3, dilated, out_padded})
    EXPECT_GT(seen, 20);
}

TEST(Reference, FoldedBatchNormEqualsConvTransposeThenBatchNorm) {
  // The transposed conv's output channels are its weight's second axis, per group: 6 inputs,
  // 4 outputs in 2 groups, weight [6][2][3][3].
  GraphBuilder b("t", TensorShape{2, 6, 1, 4, 5, 2});
  const Layer& l = b.layer(b.conv_transpose(b.input(), 4, win2d(3, 2, 1), {0, 1, 1}, 2, true));
  const Tensor x = random_tensor({2, 6, 1, 4, 5, 2}, 7);
  LayerWeights raw;
  raw.weight = random_tensor({1, 6 * 2 * 9, 1, 1, 1, 0}, 8).values();
  raw.bias = random_tensor({1, 4, 1, 1, 1, 0}, 9).values();
  std::vector<float> scale, shift;
  random_batch_norm(10, 4, &scale, &shift);
  const Tensor two_steps = batch_norm(conv_transpose(x, raw.weight, raw.bias, l), scale, shift);
  const LayerWeights folded = fold_batch_norm(l, raw, scale, shift);
  const Tensor fused = conv_transpose(x, folded.weight, folded.bias, l);
  ASSERT_EQ(fused.shape(), two_steps.shape());
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
