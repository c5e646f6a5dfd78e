// The lower bound's work grows with the extents of a group, not with their products: a wide
// dense conv maps every output channel to every input channel, which must not cost
// channels^2 (brickdl-tune --describe bounds every layer and the whole model).
#include <gtest/gtest.h>

#include <chrono>

#include "core/graph_builder.h"
#include "model/cost_model.h"
#include "model/report.h"

namespace brickdl::model {
namespace {

// 64 dense 1x1 convs of 16384 channels (2^28 weights each, the most a layer may have).
Graph wide_chain() {
  GraphBuilder b("wide", TensorShape{1, 16384, 1, 2, 2, 2});
  int x = b.input();
  for (int i = 0; i < 64; ++i)
    x = b.conv2d(x, 16384, 1);
  return fuse_for_inference(b.build());
}

TEST(LowerBoundScaling, WideDenseConvsAreLinearInChannels) {
  const Graph g = wide_chain();
  const CostModel m(*find_gpu_spec("H200"));
  const auto start = std::chrono::steady_clock::now();
  const LowerBound whole = m.lower_bound(g, {1, g.size() - 1});
  for (int id = 1; id < g.size(); ++id)
    EXPECT_GT(m.lower_bound(g, {id, id}).dram_bytes, 0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Quadratic, this is 2^28 marks per layer (tens of seconds); linear, milliseconds.
  EXPECT_LT(s, 2.0);
  // Every output needs every input channel and all weights: input, weights, output once.
  const double bytes = 4.0 * (4 * 16384 + 64 * 16384.0 * 16384 + 4 * 16384);
  EXPECT_DOUBLE_EQ(whole.dram_bytes, bytes);
  EXPECT_DOUBLE_EQ(whole.flops, 64 * 2.0 * 16384 * 16384 * 4);
}

// Flattening 65536 channels of 8x8 reads every input channel for each of its 2^22 features:
// quadratic, 2^38 marks (minutes); linear, milliseconds.
TEST(LowerBoundScaling, FlattenOfManyChannelsIsLinear) {
  GraphBuilder b("flat", TensorShape{1, 65536, 1, 8, 8, 2});
  b.linear(b.flatten(b.input()), 64, false);
  const Graph g = fuse_for_inference(b.build());
  const CostModel m(*find_gpu_spec("H200"));
  const auto start = std::chrono::steady_clock::now();
  const LowerBound flatten = m.lower_bound(g, {1, 1});
  const LowerBound whole = m.lower_bound(g, {1, 2});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  EXPECT_DOUBLE_EQ(flatten.dram_bytes, 2 * 4.0 * 65536 * 64);
  EXPECT_DOUBLE_EQ(whole.dram_bytes, 4.0 * (65536 * 64 + 65536 * 64 * 64 + 64));
}

} // namespace
} // namespace brickdl::model
