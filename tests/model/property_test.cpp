// Properties the model must have whatever its coefficients: redundancy grows with depth and
// shrinks with brick size, memoized recomputes nothing on stride-1 chains, nothing beats the
// lower bound, and the L2 model keeps small intermediates out of DRAM.
#include <gtest/gtest.h>

#include <random>

#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "core/zoo.h"
#include "model/cost_model.h"
#include "tests/model/random_graphs.h"

namespace brickdl::model {
namespace {

// A chain of `depth` convs ("same" padding) with relu epilogues, from the zoo's generator.
Graph conv_chain(int depth, int64_t channels, int64_t image, int dims = 2, int kernel = 3) {
  ConvChainOptions o;
  o.depth = depth;
  o.channels = channels;
  o.image = image;
  o.dims = dims;
  o.kernel = kernel;
  o.relu = true;
  return fuse_for_inference(build_conv_chain(o));
}

Candidate make(int first, int last, Strategy s, BrickShape brick) {
  Candidate c;
  c.group = {first, last};
  c.strategy = s;
  c.brick = brick;
  return c;
}

TEST(CostModelProperties, PaddedRedundancyGrowsWithDepth) {
  const CostModel m(*find_gpu_spec("A100-40GB"));
  double prev = -1;
  for (int depth = 1; depth <= 6; ++depth) {
    const Graph g = conv_chain(depth, 8, 56);
    const Prediction p = m.predict(g, make(1, depth, Strategy::kPadded, {1, 8, 8, 0}));
    const double fraction = p.redundant_flops / p.useful_flops;
    if (depth == 1)
      EXPECT_DOUBLE_EQ(fraction, 0.0);
    EXPECT_GT(fraction, prev) << "depth " << depth;
    prev = fraction;
  }
}

TEST(CostModelProperties, PaddedRedundancyShrinksWithBrickSize) {
  const CostModel m(*find_gpu_spec("A100-40GB"));
  for (int dims : {2, 3}) {
    const Graph g = conv_chain(3, 3, dims == 3 ? 64 : 128, dims);
    double prev = 1e300;
    for (int e : {4, 8, 16, 32}) {
      const BrickShape b{dims == 3 ? e : 1, e, e, 0};
      const Prediction p = m.predict(g, make(1, 3, Strategy::kPadded, b));
      EXPECT_GT(p.redundant_flops, 0);
      EXPECT_LT(p.redundant_flops, prev) << dims << "-D brick " << e;
      prev = p.redundant_flops;
    }
  }
}

TEST(CostModelProperties, MemoizedRecomputesNothingOnStrideOneChains) {
  const CostModel m(*find_gpu_spec("H200"));
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const int dims = trial % 2 ? 3 : 2;
    const int depth = testing::pick(rng, 1, 5);
    const int kernel = testing::pick(rng, 0, 1) ? 3 : 5;
    const Graph g = conv_chain(depth, testing::pick(rng, 1, 6), testing::pick(rng, 5, 20), dims,
                               dims == 3 ? 3 : kernel);
    const Prediction p =
        m.predict(g, make(1, depth, Strategy::kMemoized, testing::random_brick(rng)));
    EXPECT_DOUBLE_EQ(p.redundant_flops, 0) << "trial " << trial;
    EXPECT_DOUBLE_EQ(p.flops, p.useful_flops);
  }
}

TEST(CostModelProperties, NoCandidateBeatsTheLowerBound) {
  std::mt19937 rng(2024);
  int checked = 0;
  for (const GpuSpec& gpu : gpu_specs()) {
    const CostModel m(gpu);
    for (int trial = 0; trial < 80; ++trial) {
      const int dims = trial % 3 == 0 ? 3 : 2;
      const Graph g =
          fuse_for_inference(testing::random_graph(rng, dims, testing::pick(rng, 1, 6)));
      const int last = g.size() - 1;
      const Group grp{testing::pick(rng, 1, last), last};
      if (!is_valid_group(g, grp))
        continue;
      const LowerBound lb = m.lower_bound(g, grp);
      ASSERT_GT(lb.dram_bytes, 0);
      for (Strategy s : {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized}) {
        const Prediction p = m.predict(g, make(grp.first, grp.last, s, testing::random_brick(rng)));
        const std::string ctx = std::string(strategy_name(s)) + " trial " + std::to_string(trial);
        EXPECT_GE(p.dram_bytes, lb.dram_bytes * (1 - 1e-12)) << ctx;
        EXPECT_GE(p.flops, lb.flops * (1 - 1e-12)) << ctx;
        EXPECT_GE(p.time_ms, lb.time_ms * (1 - 1e-12)) << ctx;
        EXPECT_GE(p.l2_bytes, p.dram_bytes * (1 - 1e-12)) << ctx;
        EXPECT_NEAR(p.time_ms,
                    p.bound_dram_ms + p.bound_l2_ms + p.bound_compute_ms +
                        p.t_atomic_compulsory_ms + p.t_atomic_conflict_ms + p.t_launch_ms +
                        p.t_sync_ms,
                    1e-12 * p.time_ms)
            << ctx;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 600);
}

TEST(CostModelProperties, LayerwiseIntermediatesStayInL2OnlyWhenTheyFit) {
  const CostModel m(*find_gpu_spec("A100-40GB")); // 40 MiB L2, half of it counted on
  // Two 1x1 convs, 64 channels. 64x64 images: 1 MiB tensors, the intermediate stays in L2:
  // DRAM = input + 2 · weights + output, nothing of the intermediate.
  {
    const Graph g = conv_chain(2, 64, 64, 2, 1);
    const Prediction p = m.predict(g, make(1, 2, Strategy::kLayerwise, {}));
    const double t = 64.0 * 64 * 64 * 4, w = 64.0 * 64 * 4;
    EXPECT_DOUBLE_EQ(p.bytes_intermediate_store, t);
    EXPECT_DOUBLE_EQ(p.bytes_intermediate_load, t);
    EXPECT_DOUBLE_EQ(p.dram_bytes, t + 2 * w + t);
    EXPECT_EQ(p.launches, 2);
  }
  // 512x512 images: 64 MiB tensors overflow the 20 MiB share: the intermediate is written
  // back and read again from DRAM.
  {
    const Graph g = conv_chain(2, 64, 512, 2, 1);
    const Prediction p = m.predict(g, make(1, 2, Strategy::kLayerwise, {}));
    const double t = 64.0 * 512 * 512 * 4, w = 64.0 * 64 * 4;
    EXPECT_DOUBLE_EQ(p.dram_read_bytes, t + w + t + w);
    EXPECT_DOUBLE_EQ(p.dram_write_bytes, t + t);
  }
}

TEST(CostModelProperties, MergedKernelsCutDramTrafficOfLargeChains) {
  // A 3-layer chain too large for L2 between layers: both merged strategies move fewer DRAM
  // bytes than layerwise, and memoized fewer FLOPs than padded.
  const CostModel m(*find_gpu_spec("A100-40GB"));
  const Graph g = conv_chain(3, 16, 512);
  const Prediction lw = m.predict(g, make(1, 3, Strategy::kLayerwise, {}));
  const Prediction pad = m.predict(g, make(1, 3, Strategy::kPadded, {1, 16, 16, 0}));
  const Prediction memo = m.predict(g, make(1, 3, Strategy::kMemoized, {1, 16, 16, 0}));
  ASSERT_TRUE(pad.feasible) << pad.reason;
  ASSERT_TRUE(memo.feasible) << memo.reason;
  EXPECT_LT(pad.dram_bytes, lw.dram_bytes);
  EXPECT_LT(memo.dram_bytes, lw.dram_bytes);
  EXPECT_LT(memo.flops, pad.flops);
  EXPECT_GT(memo.atomics_compulsory, 0);
  EXPECT_GT(memo.t_atomic_compulsory_ms, 0);
  EXPECT_EQ(pad.atomics_compulsory, 0);
}

TEST(CostModelProperties, LiveMemoBricksMustFitL2) {
  // Memoized, 16x16 bricks of 64 channels: each unit stores 128 KiB of intermediate bricks
  // (two layers of 256 channels over the last layer's four channel blocks). The persistent
  // grid keeps the resident units' and about one row of units' bricks alive: at 1024 x 1024
  // (a row of 4 x 64 units) that is over the A100's 40 MiB of L2; with 64 channels, a quarter
  // of it, well under.
  const CostModel m(*find_gpu_spec("A100-40GB"));
  const Candidate c = make(1, 3, Strategy::kMemoized, {1, 16, 16, 64});
  const Prediction wide = m.predict(conv_chain(3, 256, 1024), c);
  EXPECT_FALSE(wide.feasible);
  EXPECT_NE(wide.reason.find("live memo bricks need"), std::string::npos) << wide.reason;
  const Prediction narrow = m.predict(conv_chain(3, 64, 1024), c);
  EXPECT_TRUE(narrow.feasible) << narrow.reason;
  // The whole memo buffer (2 x 1024 x 1024 x 64 x 4 B = 512 MiB) is far larger than L2: only
  // what is alive at once counts.
  EXPECT_GT(narrow.bytes_intermediate_store, 10 * find_gpu_spec("A100-40GB")->l2_bytes);
}

TEST(CostModelProperties, PredictionsDoNotDependOnCallHistory) {
  // The model caches a group's structure between calls: interleaving groups, graphs of other
  // shapes at the same positions and strategies must not change any answer.
  const CostModel m(*find_gpu_spec("A100-80GB"));
  std::vector<Graph> graphs;
  for (int64_t image : {10, 12, 10})
    graphs.push_back(conv_chain(3, 4, image));
  graphs.push_back(conv_chain(3, 4, 10, 3));
  std::vector<std::pair<int, Candidate>> calls;
  for (int gi = 0; gi < static_cast<int>(graphs.size()); ++gi)
    for (int first : {1, 2})
      for (Strategy s : {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized})
        for (int e : {2, 4})
          calls.emplace_back(gi, make(first, 3, s, {e, e, e, 2}));
  std::vector<Prediction> forward;
  for (const auto& [gi, c] : calls)
    forward.push_back(m.predict(graphs[static_cast<size_t>(gi)], c));
  for (size_t k = calls.size(); k-- > 0;) {
    const Prediction p = m.predict(graphs[static_cast<size_t>(calls[k].first)], calls[k].second);
    EXPECT_EQ(p.time_ms, forward[k].time_ms) << k;
    EXPECT_EQ(p.dram_bytes, forward[k].dram_bytes) << k;
    EXPECT_EQ(p.flops, forward[k].flops) << k;
    EXPECT_EQ(p.bricks_per_layer, forward[k].bricks_per_layer) << k;
    EXPECT_EQ(p.memo_lookups, forward[k].memo_lookups) << k;
  }
  // Graphs 0 and 2 are equal: same answers; graph 1 (12x12) differs.
  EXPECT_EQ(forward[0].flops, forward[24].flops);
  EXPECT_NE(forward[0].flops, forward[12].flops);
}

} // namespace
} // namespace brickdl::model
