// Hand-derived counts of the analytic model for single layers and short chains.
//
// Every expected number is worked out in the comment above it from the conventions at the top
// of model/cost_model.h: per axis, brick j of the last layer covers [4j, min(4j + 3, E − 1)];
// a window layer needs [a·s − p, b·s − p + dil·(k − 1)] of its input, clipped; the sum over a
// grid of products of per-axis extents is the product of the per-axis sums.
#include <gtest/gtest.h>

#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "model/cost_model.h"

namespace brickdl::model {
namespace {

CostModel a100() { return CostModel(*find_gpu_spec("A100-40GB")); }

Candidate candidate(int first, int last, Strategy s, BrickShape b) {
  Candidate c;
  c.group = {first, last};
  c.strategy = s;
  c.brick = b;
  return c;
}

BrickShape brick2d(int e, int cb = 0) { return BrickShape{1, e, e, cb}; }

// input 1x1x10x10 → conv 3x3 pad 1 (1 → 2 channels).
Graph one_conv() {
  GraphBuilder b("one_conv", TensorShape{1, 1, 1, 10, 10, 2});
  b.conv2d(0, 2, 3, 1, 1);
  return fuse_for_inference(b.build());
}

TEST(CostModelHand, SingleConvPadded) {
  const Graph g = one_conv();
  const Prediction p = a100().predict(g, candidate(1, 1, Strategy::kPadded, brick2d(4)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // Bricks per axis: [0,3] [4,7] [8,9] → 3 × 3 = 9 units, one channel block (cb = C = 2).
  EXPECT_EQ(p.thread_blocks, 9);
  ASSERT_EQ(p.bricks_per_layer.size(), 1u);
  EXPECT_EQ(p.bricks_per_layer[0], 9);
  // FLOPs = 2 · (2 · 10 · 10 outputs) · (1 input channel · 9 taps) = 3600, nothing redundant.
  EXPECT_DOUBLE_EQ(p.flops, 3600);
  EXPECT_DOUBLE_EQ(p.useful_flops, 3600);
  EXPECT_DOUBLE_EQ(p.redundant_flops, 0);
  // Input regions per axis: [0,3] → [-1,4] → [0,4] (5); [4,7] → [3,8] (6); [8,9] → [7,10] →
  // [7,9] (3): Σ = 14. bytes = 14 · 14 · 1 channel · 4 B = 784.
  EXPECT_DOUBLE_EQ(p.bytes_input, 784);
  // Weights: 2 · 1 · 9 = 18 parameters read by each of the 9 units: 18 · 9 · 4 B = 648.
  EXPECT_DOUBLE_EQ(p.bytes_weight, 648);
  EXPECT_DOUBLE_EQ(p.bytes_output, 2 * 100 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_load, 0);
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_store, 0);
  EXPECT_DOUBLE_EQ(p.l1_bytes, 784 + 648 + 800);
  EXPECT_DOUBLE_EQ(p.atomics_compulsory, 0);
}

TEST(CostModelHand, SingleConvLayerwiseAndLowerBound) {
  const Graph g = one_conv();
  const CostModel m = a100();
  const Prediction p = m.predict(g, candidate(1, 1, Strategy::kLayerwise, brick2d(4)));
  ASSERT_TRUE(p.feasible);
  // Input 100 · 4 B, weights 18 · 4 B, output 200 · 4 B, all cold: DRAM = the same 1272 B.
  EXPECT_DOUBLE_EQ(p.bytes_input, 400);
  EXPECT_DOUBLE_EQ(p.bytes_weight, 72);
  EXPECT_DOUBLE_EQ(p.bytes_output, 800);
  EXPECT_DOUBLE_EQ(p.dram_bytes, 1272);
  EXPECT_EQ(p.launches, 1);
  const LowerBound lb = m.lower_bound(g, {1, 1});
  EXPECT_DOUBLE_EQ(lb.dram_bytes, 1272);
  EXPECT_DOUBLE_EQ(lb.flops, 3600);
}

// input 1x1x10x10 → conv1 3x3 pad 1 (1 → 2) → conv2 3x3 pad 1 (2 → 1).
Graph two_convs() {
  GraphBuilder b("two_convs", TensorShape{1, 1, 1, 10, 10, 2});
  const int c1 = b.conv2d(0, 2, 3, 1, 1);
  b.conv2d(c1, 1, 3, 1, 1);
  return fuse_for_inference(b.build());
}

TEST(CostModelHand, TwoConvPadded) {
  const Prediction p = a100().predict(two_convs(), candidate(1, 2, Strategy::kPadded, brick2d(4)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // conv1 regions per axis (from conv2 bricks [0,3] [4,7] [8,9]): [0,4] [3,8] [7,9], Σ = 14.
  // input regions (from those): [0,5] [2,9] [6,9], Σ = 6 + 8 + 4 = 18.
  // conv1: 14 · 14 positions · 2 channels · (2 · 1 · 9) = 7056; conv2: 100 · 1 · (2 · 2 · 9)
  // = 3600. Executed 10656; useful 3600 + 3600 = 7200; redundant 3456.
  EXPECT_DOUBLE_EQ(p.flops, 10656);
  EXPECT_DOUBLE_EQ(p.useful_flops, 7200);
  EXPECT_DOUBLE_EQ(p.redundant_flops, 3456);
  EXPECT_DOUBLE_EQ(p.bytes_input, 18 * 18 * 4);
  // Weights: (18 + 18) per unit · 9 units · 4 B.
  EXPECT_DOUBLE_EQ(p.bytes_weight, 36 * 9 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_output, 400);
  EXPECT_EQ(p.bricks_per_layer, (std::vector<int64_t>{9, 9}));
}

TEST(CostModelHand, TwoConvMemoized) {
  const CostModel m = a100();
  const Graph g = two_convs();
  const Prediction p = m.predict(g, candidate(1, 2, Strategy::kMemoized, brick2d(4)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // Every conv1 brick is touched: 3 × 3 = 9 claims. No redundancy.
  EXPECT_EQ(p.bricks_per_layer, (std::vector<int64_t>{9, 9}));
  EXPECT_DOUBLE_EQ(p.atomics_compulsory, 9);
  EXPECT_DOUBLE_EQ(p.flops, 7200);
  EXPECT_DOUBLE_EQ(p.redundant_flops, 0);
  // conv1 stored once: 2 · 100 · 4 B.
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_store, 800);
  // conv2 bricks read conv1 regions [0,4] [3,8] [7,9] per axis (Σ 14), 2 channels:
  // 14 · 14 · 2 · 4 B = 1568.
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_load, 1568);
  // Those regions touch conv1 bricks {0,1}, {0,1,2}, {1,2}: 2 + 3 + 2 = 7 per axis → 49.
  EXPECT_DOUBLE_EQ(p.memo_lookups, 49);
  // conv1 bricks read the input over [0,4] [3,8] [7,9]: 14 · 14 · 4 B = 784.
  EXPECT_DOUBLE_EQ(p.bytes_input, 784);
  // Weights: each of 9 + 9 bricks reads its layer's 18 parameters: 324 · 4 B.
  EXPECT_DOUBLE_EQ(p.bytes_weight, 1296);
  EXPECT_DOUBLE_EQ(p.bytes_output, 400);
  // Lower bound: input 400 B + weights 36 · 4 B + output 400 B; FLOPs 7200.
  const LowerBound lb = m.lower_bound(g, {1, 2});
  EXPECT_DOUBLE_EQ(lb.dram_bytes, 944);
  EXPECT_DOUBLE_EQ(lb.flops, 7200);
}

}  // namespace
}  // namespace brickdl::model
