// The structural ops (slice, channel_shuffle, layer_norm): the reference against cases
// computed by hand and against independent index arithmetic on random shapes, and the merged
// executor against the reference for groups holding each op (ShuffleNet's split / shuffle
// unit, ConvNeXt's block on our layout).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/yaml_graph.h"
#include "kernels/merged_executor.h"
#include "kernels/reference.h"
#include "kernels/weights.h"
#include "tests/kernels/group_check.h"

namespace brickdl::kernels {
namespace {

Tensor iota(const TensorShape& s) {
  Tensor t(s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data()[i] = static_cast<float>(i);
  return t;
}

TEST(StructOps, SliceByHand) {
  // 2 images of 4 channels of 1x2: channel c of image n holds 8n + 2c, 8n + 2c + 1.
  const Tensor x = iota(TensorShape{2, 4, 1, 1, 2, 2});
  const Tensor y = slice(x, 1, 3);
  EXPECT_EQ(y.shape(), (TensorShape{2, 2, 1, 1, 2, 2}));
  EXPECT_EQ(y.values(), (std::vector<float>{2, 3, 4, 5, 10, 11, 12, 13}));
}

TEST(StructOps, ChannelShuffleByHand) {
  // 6 channels, 2 groups: [0 1 2 | 3 4 5] → [0 3 1 4 2 5]; 3 groups: [0 1 | 2 3 | 4 5] →
  // [0 2 4 1 3 5]. One value per channel (1x1).
  const Tensor x = iota(TensorShape{1, 6, 1, 1, 1, 2});
  EXPECT_EQ(channel_shuffle(x, 2).values(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(channel_shuffle(x, 3).values(), (std::vector<float>{0, 2, 4, 1, 3, 5}));
  EXPECT_EQ(channel_shuffle(x, 1).values(), x.values());
  EXPECT_EQ(channel_shuffle(x, 6).values(), x.values());
}

TEST(StructOps, LayerNormByHand) {
  // One pixel of channels (1, 2, 3, 6): mean 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5;
  // with eps 0.5 the deviation is 2, so the normalised values are (−1, −0.5, 0, 1.5); then
  // gamma (1, 2, 1, 2) and beta (0, 0, 1, −1): (−1, −1, 1, 2). The second pixel is constant
  // (all 5): normalised 0, so the output is beta.
  Tensor x(TensorShape{1, 4, 1, 1, 2, 2});
  x.values() = {1, 5, 2, 5, 3, 5, 6, 5};
  const Tensor y = layer_norm(x, {1, 2, 1, 2}, {0, 0, 1, -1}, 0.5f);
  const std::vector<float> want{-1, 0, -1, 0, 1, 1, 2, -1};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_FLOAT_EQ(y.values()[i], want[i]) << i;
}

// The ops on random shapes against the definitions written out here: torch's view /
// transpose / view for the shuffle, and the mean and variance in double for the norm.
TEST(StructOps, RandomShapesMatchTheirDefinitions) {
  std::mt19937 rng(31);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < 20; ++i) {
    const int g = pick(1, 4);
    TensorShape s{pick(1, 3), int64_t{g} * pick(1, 5), 1, pick(1, 6), pick(1, 6), 2};
    if (i % 3 == 0)
      s.spatial_rank = 3, s.d = pick(1, 4);
    const Tensor x = random_tensor(s, 7, static_cast<uint64_t>(i));
    const int64_t begin = pick(0, static_cast<int>(s.c) - 1), end = pick(begin + 1, s.c);
    const Tensor sl = slice(x, begin, end);
    const Tensor sh = channel_shuffle(x, g);
    std::vector<float> gamma(static_cast<size_t>(s.c)), beta(gamma.size());
    for (size_t c = 0; c < gamma.size(); ++c)
      gamma[c] = 0.5f + 0.1f * static_cast<float>(c), beta[c] = 0.05f * static_cast<float>(c);
    const Tensor ln = layer_norm(x, gamma, beta, 1e-5f, Accumulation::kF64);
    const int64_t k = s.c / g;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t z = 0; z < s.d; ++z)
        for (int64_t y = 0; y < s.h; ++y)
          for (int64_t w = 0; w < s.w; ++w) {
            for (int64_t c = begin; c < end; ++c)
              ASSERT_EQ(sl.at(n, c - begin, z, y, w), x.at(n, c, z, y, w));
            // view [g][k] → transpose → [k][g]: element (j, q) of the result is (q, j).
            for (int64_t q = 0; q < g; ++q)
              for (int64_t j = 0; j < k; ++j)
                ASSERT_EQ(sh.at(n, j * g + q, z, y, w), x.at(n, q * k + j, z, y, w));
            double mean = 0, var = 0;
            for (int64_t c = 0; c < s.c; ++c)
              mean += x.at(n, c, z, y, w);
            mean /= static_cast<double>(s.c);
            for (int64_t c = 0; c < s.c; ++c)
              var += (x.at(n, c, z, y, w) - mean) * (x.at(n, c, z, y, w) - mean);
            var /= static_cast<double>(s.c);
            for (int64_t c = 0; c < s.c; ++c) {
              const double want = (x.at(n, c, z, y, w) - mean) / std::sqrt(var + 1e-5) *
                                      gamma[static_cast<size_t>(c)] +
                                  beta[static_cast<size_t>(c)];
              ASSERT_NEAR(ln.at(n, c, z, y, w), want, 1e-5 * (1 + std::fabs(want)));
            }
          }
  }
}

TEST(StructOps, ShapesParamsAndRefusals) {
  GraphBuilder b("s", TensorShape{2, 12, 1, 5, 5, 2});
  const int sl = b.slice(b.input(), 4, 10, "slice");
  const int sh = b.channel_shuffle(sl, 3, "shuffle");
  const int ln = b.layer_norm(sh, 1e-6f, "ln");
  const Graph g = b.build();
  EXPECT_EQ(g.layer(sl).out, (TensorShape{2, 6, 1, 5, 5, 2}));
  EXPECT_EQ(g.layer(sh).out, g.layer(sl).out);
  EXPECT_EQ(g.layer(ln).params, 12); // gamma and beta
  EXPECT_EQ(g.layer(ln).macs, 0);    // MACs count conv and linear only
  EXPECT_EQ(g.layer(sl).params + g.layer(sh).params, 0);
  EXPECT_EQ(weight_dims(g, g.layer(ln)), (std::vector<int64_t>{6}));
  GraphBuilder bad("bad", TensorShape{1, 6, 1, 4, 4, 2});
  EXPECT_THROW(bad.slice(bad.input(), 3, 3), ShapeError);
  EXPECT_THROW(bad.slice(bad.input(), -1, 2), ShapeError);
  EXPECT_THROW(bad.slice(bad.input(), 2, 7), ShapeError);
  EXPECT_THROW(bad.channel_shuffle(bad.input(), 4), ShapeError);
  EXPECT_THROW(bad.channel_shuffle(bad.input(), 0), ShapeError);
  EXPECT_THROW(bad.layer_norm(bad.input(), 0.0f), ShapeError);
  EXPECT_THROW(bad.layer_norm(bad.input(), -1.0f), ShapeError);
}

TEST(StructOps, YamlReadsTheAttributes) {
  const Graph g = parse_yaml_graph(R"(
input: {channels: 8, size: [4, 4]}
layers:
  - {op: slice, name: s, begin: 2, end: 8}
  - {op: channel_shuffle, name: sh, groups: 3}
  - {op: layer_norm, name: ln, epsilon: 1.0e-6}
  - {op: slice, name: head, end: 2}
)",
                                   "struct.yaml");
  EXPECT_EQ(attribute_text(g.layer(g.find("s"))), " ch2:8");
  EXPECT_EQ(attribute_text(g.layer(g.find("sh"))), " g3");
  EXPECT_EQ(g.layer(g.find("ln")).epsilon, 1e-6f);
  EXPECT_EQ(attribute_text(g.layer(g.find("head"))), " ch0:2");
  EXPECT_EQ(g.layer(g.find("head")).out.c, 2);
  const auto error = [](const std::string& layer) {
    try {
      parse_yaml_graph("input: {channels: 8, size: [4, 4]}\nlayers:\n  - " + layer + "\n",
                       "bad.yaml");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("{op: slice, begin: 2}").find("end"), std::string::npos);
  EXPECT_NE(error("{op: slice, begin: 4, end: 9}").find("channels [4, 9)"), std::string::npos);
  EXPECT_NE(error("{op: channel_shuffle, groups: 3}").find("groups 3 must divide"),
            std::string::npos);
  EXPECT_NE(error("{op: layer_norm, epsilon: 0}").find("epsilon"), std::string::npos);
}

// ShuffleNetV2's unit: split the channels in two, one half through 1x1 → depthwise 3x3 → 1x1,
// concat with the other half, shuffle; then a 3x3 conv reads the shuffled channels.
Graph shuffle_unit(const TensorShape& in) {
  GraphBuilder b("shuffle_unit", in);
  const int c = in.c;
  const int x = b.relu(b.batch_norm(b.conv2d(b.input(), c, 1, 1, 0)));
  const int left = b.slice(x, 0, c / 2, "left");
  const int right = b.slice(x, c / 2, c, "right");
  const int r1 = b.relu(b.conv2d(right, c / 2, 1, 1, 0, 1, 1, true));
  const int r2 = b.conv2d(r1, c / 2, 3, 1, 1, 1, c / 2, true);
  const int r3 = b.conv2d(r2, c / 2, 1, 1, 0, 1, 1, true);
  const int cat = b.concat({left, r3});
  const int sh = b.channel_shuffle(cat, 2, "shuffle");
  b.conv2d(sh, c, 3, 1, 1, 1, 1, true);
  return fuse_for_inference(b.build());
}

// ConvNeXt's block on our layout: depthwise 7x7 → layer norm → 1x1 (4C) → activation → 1x1
// (C) → per-channel scale (a batch-norm stands in) → + residual.
Graph convnext_block(const TensorShape& in) {
  GraphBuilder b("convnext_block", in);
  const int64_t c = in.c;
  const int dw = b.conv2d(b.input(), c, 7, 1, 3, 1, static_cast<int>(c), true, "dw");
  const int ln = b.layer_norm(dw, 1e-6f, "ln");
  const int up = b.relu(b.conv2d(ln, 4 * c, 1, 1, 0, 1, 1, true, "pw1"));
  const int down = b.conv2d(up, c, 1, 1, 0, 1, 1, true, "pw2");
  const int scale = b.batch_norm(b.leaky_relu(down, 0.5f), "scale");
  b.add(scale, b.input(), "residual");
  return fuse_for_inference(b.build());
}

using test_support::expect_groups_match;

const std::set<OpKind> kStructOps{OpKind::kSlice, OpKind::kChannelShuffle, OpKind::kLayerNorm};

TEST(StructOps, MergedShuffleUnitMatchesTheReference) {
  expect_groups_match(shuffle_unit(TensorShape{2, 8, 1, 9, 7, 2}), 1, kStructOps);
  expect_groups_match(shuffle_unit(TensorShape{1, 4, 1, 5, 11, 2}), 2, kStructOps);
}

TEST(StructOps, MergedConvNeXtBlockMatchesTheReference) {
  expect_groups_match(convnext_block(TensorShape{2, 8, 1, 9, 10, 2}), 3, kStructOps);
  expect_groups_match(convnext_block(TensorShape{1, 3, 1, 8, 8, 2}), 4, kStructOps);
}

TEST(StructOps, Merged3dGroupsMatchTheReference) {
  GraphBuilder b("three_d", TensorShape{1, 6, 4, 5, 6, 3});
  const int c = b.conv3d(b.input(), 6, 3, 1, 1);
  const int sl = b.slice(c, 1, 5);
  const int sh = b.channel_shuffle(sl, 2);
  const int ln = b.layer_norm(sh);
  b.conv3d(ln, 4, 3, 1, 1, 1, 1, true);
  expect_groups_match(fuse_for_inference(b.build()), 5, kStructOps);
}

} // namespace
} // namespace brickdl::kernels
