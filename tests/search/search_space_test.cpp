#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "core/graph_builder.h"
#include "search/search_space.h"
#include "tests/core/small_graphs.h"

namespace brickdl::search {
namespace {

using testing::residual_graph;

SearchSpaceConfig small_config() {
  SearchSpaceConfig c;
  c.brick_sizes = {4, 8};
  c.max_group_len = 4;
  return c;
}

TEST(SearchSpace, GroupsHaveOneOutput) {
  const Graph g = residual_graph();
  ASSERT_EQ(g.size(), 6);
  const SearchSpace sp = SearchSpace::build(g, small_config());
  std::vector<Group> groups;
  for (const auto& e : sp.groups())
    groups.push_back(e.group);
  // Ending at 1: [1,1]; 2: [2,2]; 3: [2,3] [3,3]; 4: [1,4] [2,4] [3,4] [4,4];
  // 5: [2,5] [3,5] [4,5] [5,5] ([1,5] is 5 layers, over max_group_len 4).
  const std::vector<Group> want = {{1, 1}, {2, 2}, {2, 3}, {3, 3}, {1, 4}, {2, 4},
                                   {3, 4}, {4, 4}, {2, 5}, {3, 5}, {4, 5}, {5, 5}};
  EXPECT_EQ(groups, want);
  EXPECT_EQ(sp.find(Group{1, 3}), -1);
  EXPECT_EQ(sp.group(sp.singleton(3)).group, (Group{3, 3}));
}

TEST(SearchSpace, CandidatesPerGroup) {
  const SearchSpace sp = SearchSpace::build(residual_graph(), small_config());
  const GroupEntry& single = sp.group(sp.singleton(2));
  // layerwise + 2 bricks × 1 channel block × {padded, memoized} × 1 thread count.
  ASSERT_EQ(single.candidates.size(), 5u);
  EXPECT_EQ(single.layerwise, 0);
  EXPECT_EQ(single.candidates[0].strategy, Strategy::kLayerwise);
  EXPECT_EQ(single.candidates[1].strategy, Strategy::kPadded);
  EXPECT_EQ(single.candidates[1].brick, (BrickShape{1, 4, 4, 0}));
  EXPECT_EQ(single.candidates[4].strategy, Strategy::kMemoized);
  EXPECT_EQ(single.candidates[4].brick, (BrickShape{1, 8, 8, 0}));
  const GroupEntry& multi = sp.group(sp.find(Group{2, 4}));
  EXPECT_EQ(multi.layerwise, -1); // layerwise lives on singletons only
  EXPECT_EQ(multi.candidates.size(), 4u);
  for (const auto& c : multi.candidates)
    EXPECT_EQ(c.group, (Group{2, 4}));
  EXPECT_EQ(sp.num_candidates(), 5 * 5 + 7 * 4);
  EXPECT_TRUE(sp.pruned().empty());
}

TEST(SearchSpace, PrunesBricksAndChannelBlocksThatRepeatWork) {
  // 6x6 tensors with 16 channels: bricks 8, 16, 32 all cover them; 16 and 32 repeat 8.
  GraphBuilder b("small", TensorShape{1, 16, 1, 6, 6, 2});
  b.conv2d(b.input(), 16, 3, 1, 1);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {32, 4, 8, 16};
  cfg.channel_blocks = {0, 8, 16, 32}; // 16 and 32 cover all 16 channels, as 0 does
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  const GroupEntry& e = sp.group(sp.singleton(1));
  // Kept: bricks {4, 8} × blocks {0, 8} × {padded, memoized} + layerwise.
  EXPECT_EQ(e.candidates.size(), 2u * 2u * 2u + 1u);
  int64_t pruned = 0;
  for (const auto& [reason, n] : sp.pruned())
    pruned += n;
  EXPECT_EQ(pruned, 4 * 4 * 2 - 2 * 2 * 2);
  // Bricks 16, 32 × all 4 blocks × 2 strategies; then blocks 16, 32 × kept bricks × 2.
  ASSERT_EQ(sp.pruned().size(), 2u);
  for (const auto& [reason, n] : sp.pruned())
    EXPECT_EQ(n, reason.find("brick") == 0 ? 2 * 4 * 2 : 2 * 2 * 2) << reason;
}

TEST(SearchSpace, BatchBlocksAreClampedToTheBatch) {
  // Batch 8: 16 is clamped to 8, which is listed already; 1, 2, 4, 8 stay.
  GraphBuilder b("batch8", TensorShape{8, 4, 1, 8, 8, 2});
  b.conv2d(b.input(), 4, 3, 1, 1);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4};
  cfg.batch_blocks = {16, 1, 2, 4, 8};
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  const GroupEntry& e = sp.group(sp.singleton(1));
  ASSERT_EQ(e.candidates.size(), 1u + 2u * 4u);
  EXPECT_EQ(e.candidates[0].brick.nb, 1); // layerwise has no brick
  std::vector<int> padded;
  for (const auto& c : e.candidates)
    if (c.strategy == Strategy::kPadded)
      padded.push_back(c.brick.nb);
  EXPECT_EQ(padded, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(e.candidates[4].brick, (BrickShape{1, 4, 4, 0, 8}));
  EXPECT_EQ(e.candidates[4].brick.str(), "4x4/n8");
  ASSERT_EQ(sp.pruned().size(), 1u);
  EXPECT_EQ(sp.pruned().begin()->first.find("batch block"), 0u);
  EXPECT_EQ(sp.pruned().begin()->second, 2); // nb 16 × {padded, memoized}

  // Batch 6: 8 and 16 both become 6, kept once.
  GraphBuilder b6("batch6", TensorShape{6, 4, 1, 8, 8, 2});
  b6.conv2d(b6.input(), 4, 3, 1, 1);
  cfg.batch_blocks = {1, 4, 8, 16};
  cfg.strategies = {Strategy::kMemoized};
  const SearchSpace sp6 = SearchSpace::build(fuse_for_inference(b6.build()), cfg);
  std::vector<int> memoized;
  for (const auto& c : sp6.group(sp6.singleton(1)).candidates)
    if (c.strategy == Strategy::kMemoized)
      memoized.push_back(c.brick.nb);
  EXPECT_EQ(memoized, (std::vector<int>{1, 4, 6}));
  EXPECT_EQ(sp6.pruned().begin()->second, 1);

  // Batch 1: only nb = 1.
  GraphBuilder b1("batch1", TensorShape{1, 4, 1, 8, 8, 2});
  b1.conv2d(b1.input(), 4, 3, 1, 1);
  const SearchSpace sp1 = SearchSpace::build(fuse_for_inference(b1.build()), cfg);
  const GroupEntry& e1 = sp1.group(sp1.singleton(1));
  ASSERT_EQ(e1.candidates.size(), 2u);
  EXPECT_EQ(e1.candidates[1].brick, (BrickShape{1, 4, 4, 0, 1}));
  EXPECT_EQ(sp1.pruned().begin()->second, 3);
}

// Thread block clusters: padded candidates without channel blocks only (memoized units and
// channel blocks run one CTA per unit: core/candidate.h cluster_problem).
TEST(SearchSpace, ClustersArePaddedWithEveryChannel) {
  GraphBuilder b("wide", TensorShape{1, 64, 1, 8, 8, 2});
  b.conv2d(b.input(), 64, 3, 1, 1);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4};
  cfg.channel_blocks = {0, 32};
  cfg.clusters = {8, 1, 4};
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  std::vector<std::string> configs;
  for (const auto& c : sp.group(sp.singleton(1)).candidates)
    configs.push_back(c.config_str());
  EXPECT_EQ(configs, (std::vector<std::string>{"layerwise", "padded 4x4 t256", "padded 4x4/x4 t256",
                                               "padded 4x4/x8 t256", "padded 4x4/c32 t256",
                                               "memoized 4x4 t256", "memoized 4x4/c32 t256"}));
  // Listed: 2 strategies x 2 blocks x 3 clusters = 12 merged; built 6; the other 6 (padded /c32
  // on 4 or 8 CTAs, memoized on 4 or 8 CTAs with either block) are counted, never built.
  ASSERT_EQ(sp.pruned().size(), 1u);
  EXPECT_EQ(sp.pruned().begin()->first.find("cluster of several CTAs"), 0u);
  EXPECT_EQ(sp.pruned().begin()->second, 6);
  EXPECT_EQ(sp.enumerated(), 1 + 12);
}

TEST(SearchSpace, PrunedCountsAddUpWithEveryReason) {
  // 6x6, 16 channels, batch 2: bricks 8 and 16 cover 6x6, blocks 0 and 16 cover the channels,
  // batch blocks 2 and 4 cover the batch. Every listed candidate is kept or counted once.
  GraphBuilder b("small", TensorShape{2, 16, 1, 6, 6, 2});
  b.conv2d(b.input(), 16, 3, 1, 1);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4, 8, 16};
  cfg.channel_blocks = {0, 8, 16};
  cfg.batch_blocks = {1, 2, 4};
  cfg.threads = {128, 256};
  const Graph g = fuse_for_inference(b.build());
  const SearchSpace sp = SearchSpace::build(g, cfg);
  const GroupEntry& e = sp.group(sp.singleton(1));
  // Kept: bricks {4, 8} × blocks {0, 8} × batch blocks {1, 2} × 2 strategies × 2 thread counts.
  EXPECT_EQ(e.candidates.size(), 1u + 2u * 2u * 2u * 2u * 2u);
  int64_t pruned = 0;
  for (const auto& [reason, n] : sp.pruned())
    pruned += n;
  EXPECT_EQ(pruned, 3 * 3 * 3 * 2 * 2 - 2 * 2 * 2 * 2 * 2);
  EXPECT_EQ(sp.pruned().size(), 3u);
  // Enumerated = the layerwise candidate + every listed combination = built + pruned.
  EXPECT_EQ(sp.enumerated(), 1 + 3 * 3 * 3 * 2 * 2);
  EXPECT_EQ(sp.enumerated(), sp.num_candidates() + pruned);

  cfg.batch_blocks = {0};
  EXPECT_THROW(SearchSpace::build(g, cfg), UserError);
}

TEST(SearchSpace, ThreeDimensionalBricksAreCubes) {
  GraphBuilder b("c3", TensorShape{1, 3, 16, 16, 16, 3});
  b.relu(b.conv3d(b.input(), 3, 3, 1, 1));
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {8};
  cfg.strategies = {Strategy::kMemoized};
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  const auto& cands = sp.group(sp.singleton(1)).candidates;
  ASSERT_EQ(cands.size(), 2u);
  EXPECT_EQ(cands[1].brick, (BrickShape{8, 8, 8, 0}));
  EXPECT_EQ(cands[1].strategy, Strategy::kMemoized);
}

TEST(SearchSpace, BrickDepthsGiveThreeDGroupsThinAndTallBricks) {
  // 3-D: 64 channels on 4 x 16 x 16; 2-D: a conv beside it would ignore the depths (below).
  GraphBuilder b("c3", TensorShape{1, 8, 4, 16, 16, 3});
  b.relu(b.conv3d(b.input(), 8, 3, 1, 1));
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4, 8, 16, 32};
  cfg.brick_depths = {8, 1, 2, 4};
  cfg.strategies = {Strategy::kPadded};
  const Graph g = fuse_for_inference(b.build());
  const SearchSpace sp = SearchSpace::build(g, cfg);
  const auto& cands = sp.group(sp.singleton(1)).candidates;
  // Sizes by the plane (16 x 16): 4, 8, 16 (32 repeats 16); depths by the depth (4): 1, 2, 4
  // (8 repeats 4). Size-major, depths ascending; the layerwise candidate first.
  std::vector<BrickShape> bricks;
  for (size_t i = 1; i < cands.size(); ++i)
    bricks.push_back(cands[i].brick);
  const std::vector<BrickShape> want = {{1, 4, 4, 0},   {2, 4, 4, 0},   {4, 4, 4, 0},
                                        {1, 8, 8, 0},   {2, 8, 8, 0},   {4, 8, 8, 0},
                                        {1, 16, 16, 0}, {2, 16, 16, 0}, {4, 16, 16, 0}};
  EXPECT_EQ(bricks, want);
  EXPECT_EQ(sp.pruned().at("brick depth beyond every tensor's depth: same work as a shallower "
                           "brick"),
            3); // depth 8 with sizes 4, 8, 16
  EXPECT_EQ(sp.pruned().at("brick larger than every tensor of the group: same work as a smaller "
                           "brick"),
            4); // size 32 with every depth
  EXPECT_EQ(sp.enumerated(), sp.num_candidates() + 7);

  // Without depths: cubes, pruned by every extent (16: 4, 8, 16 kept), as before the key.
  cfg.brick_depths.clear();
  const SearchSpace cubes = SearchSpace::build(g, cfg);
  const auto& cc = cubes.group(cubes.singleton(1)).candidates;
  ASSERT_EQ(cc.size(), 4u);
  EXPECT_EQ(cc[3].brick, (BrickShape{16, 16, 16, 0}));

  // 2-D groups ignore the depths: the space of a 2-D graph is the same with and without them.
  GraphBuilder b2("c2", TensorShape{1, 8, 1, 16, 16, 2});
  b2.conv2d(b2.input(), 8, 3, 1, 1);
  const Graph g2 = fuse_for_inference(b2.build());
  cfg.brick_depths = {1, 2};
  const SearchSpace with = SearchSpace::build(g2, cfg);
  cfg.brick_depths.clear();
  const SearchSpace without = SearchSpace::build(g2, cfg);
  EXPECT_EQ(with.num_candidates(), without.num_candidates());
  EXPECT_EQ(with.enumerated(), without.enumerated());

  cfg.brick_depths = {0};
  EXPECT_THROW(SearchSpace::build(g, cfg), UserError);
}

TEST(SearchSpace, NonSpatialLayersAreLayerwiseOnly) {
  GraphBuilder b("head", TensorShape{2, 8, 1, 8, 8, 2});
  const int c = b.conv2d(b.input(), 8, 3, 1, 1);
  b.linear(b.flatten(b.global_avg_pool(c)), 10);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4};
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  for (const auto& e : sp.groups()) {
    if (e.group.first >= 2) {
      EXPECT_FALSE(e.mergeable) << e.layer_names;
      EXPECT_EQ(e.group.size(), 1) << "multi-layer groups without spatial extent have no "
                                      "candidate and are left out: "
                                   << e.layer_names;
      EXPECT_EQ(e.candidates.size(), 1u);
    }
  }
  // gap, flatten, linear: 3 layers × 1 brick × 2 merged strategies pruned with one reason.
  ASSERT_EQ(sp.pruned().size(), 1u);
  EXPECT_EQ(sp.pruned().begin()->second, 6);
  EXPECT_EQ(sp.enumerated(), sp.num_candidates() + 6);
}

TEST(SearchSpace, ConvTransposeRunsLayerwiseOnly) {
  // conv → conv_transpose (k 3, stride 2, pad 1, output_padding 1) → conv: every group holding
  // the transposed conv can only run layerwise (core/group.h: brick_blocker), so the space keeps
  // its singleton, with the layerwise candidate alone, and leaves the longer groups out.
  GraphBuilder b("deconv", TensorShape{1, 8, 1, 8, 8, 2});
  const int c = b.conv2d(b.input(), 8, 3, 1, 1);
  Window w;
  w.kernel = {1, 3, 3};
  w.stride = {1, 2, 2};
  w.pad = {0, 1, 1};
  const int t = b.conv_transpose(c, 8, w, {0, 1, 1});
  b.conv2d(t, 8, 3, 1, 1);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4};
  const Graph g = fuse_for_inference(b.build());
  const SearchSpace sp = SearchSpace::build(g, cfg);
  for (const auto& e : sp.groups()) {
    EXPECT_EQ(e.mergeable, !e.group.contains(2)) << e.layer_names;
    if (e.group.contains(2)) {
      EXPECT_EQ(e.group, (Group{2, 2})) << e.layer_names;
      ASSERT_EQ(e.candidates.size(), 1u);
      EXPECT_EQ(e.candidates[0].strategy, Strategy::kLayerwise);
    }
  }
  EXPECT_GE(sp.find(Group{2, 2}), 0);
  EXPECT_EQ(sp.find(Group{1, 2}), -1);
  EXPECT_EQ(sp.find(Group{2, 3}), -1);
  EXPECT_GE(sp.find(Group{1, 1}), 0);
  EXPECT_GE(sp.find(Group{3, 3}), 0);
}

TEST(SearchSpace, ExplicitPartitions) {
  GraphBuilder b("chain", TensorShape{1, 3, 8, 8, 8, 3});
  int x = b.input();
  for (int i = 0; i < 6; ++i)
    x = b.relu(b.conv3d(x, 3, 3, 1, 1));
  const Graph g = fuse_for_inference(b.build());
  ASSERT_EQ(g.size(), 7);
  SearchSpaceConfig cfg;
  cfg.max_group_len = 2;
  cfg.partitions = {{2, 2, 2}, {3, 3}, {6}};
  const SearchSpace sp = SearchSpace::build(g, cfg);
  ASSERT_EQ(sp.partitions().size(), 3u);
  EXPECT_EQ(sp.partition_labels()[1], "3+3");
  EXPECT_EQ(sp.group(sp.partitions()[1][1]).group, (Group{4, 6}));
  EXPECT_EQ(sp.group(sp.partitions()[2][0]).group, (Group{1, 6})); // beyond max_group_len
  EXPECT_EQ(sp.groups_starting_at(1).size(), 4u); // [1,1] [1,2], and [1,3] [1,6] from partitions
  EXPECT_GE(sp.find(Group{1, 3}), 0);

  cfg.partitions = {{2, 2}};
  try {
    SearchSpace::build(g, cfg, "fig10.yaml");
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("fig10.yaml"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("search.partitions[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("add up to 4"), std::string::npos) << e.what();
  }
}

TEST(SearchSpace, PartitionThatCutsAResidualIsRejected) {
  GraphBuilder b("res", TensorShape{1, 8, 1, 16, 16, 2});
  const int c1 = b.conv2d(b.input(), 8, 3, 1, 1, 1, 1, false, "c1");
  const int c2 = b.conv2d(c1, 8, 3, 1, 1, 1, 1, false, "c2");
  b.add(c2, c1, "add");
  SearchSpaceConfig cfg;
  cfg.partitions = {{2, 1}}; // [c1, c2] leaves c1 read by add
  EXPECT_THROW(SearchSpace::build(fuse_for_inference(b.build()), cfg), UserError);
  cfg.partitions = {{1, 2}};
  EXPECT_NO_THROW(SearchSpace::build(fuse_for_inference(b.build()), cfg));
}

TEST(SearchSpace, NamedSubgraphs) {
  const Graph g = residual_graph();
  SearchSpaceConfig cfg = small_config();
  cfg.max_group_len = 1;
  // "relu1" (the relu after c2) was folded into c2 by fuse_for_inference: it names c2's layer.
  cfg.subgraphs = {{"tail", "c2", "add"}, {"pair", "relu1", "c3"}};
  const SearchSpace sp = SearchSpace::build(g, cfg);
  ASSERT_EQ(sp.subgraphs().size(), 2u);
  EXPECT_EQ(sp.group(sp.subgraphs()[0]).group, (Group{2, 4})); // longer than max_group_len
  EXPECT_EQ(sp.group(sp.subgraphs()[1]).group, (Group{2, 3}));
  EXPECT_EQ(sp.subgraph_names()[1], "pair");
  EXPECT_EQ(fused_layer_id(g, "relu1"), 2);
  EXPECT_EQ(fused_layer_id(g, "nope"), -1);

  cfg.subgraphs = {{"cut", "c1", "c3"}}; // c1 is read by add, outside
  try {
    SearchSpace::build(g, cfg, "fig8.yaml");
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("search.subgraphs[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'cut'"), std::string::npos) << e.what();
  }
}

TEST(SearchSpace, BadConfig) {
  SearchSpaceConfig cfg;
  cfg.max_group_len = 0;
  EXPECT_THROW(SearchSpace::build(residual_graph(), cfg), UserError);
  cfg = SearchSpaceConfig{};
  cfg.brick_sizes = {};
  EXPECT_THROW(SearchSpace::build(residual_graph(), cfg), UserError);
  cfg = SearchSpaceConfig{};
  cfg.threads = {0};
  EXPECT_THROW(SearchSpace::build(residual_graph(), cfg), UserError);
}

} // namespace
} // namespace brickdl::search
