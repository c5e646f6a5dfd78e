// The search over a graph of several runtime inputs: groups and plans tile the layers after
// the inputs (never an input), and the planners agree on random costs.
#include <gtest/gtest.h>

#include <random>

#include "core/graph_builder.h"
#include "search/plan.h"
#include "search/search_space.h"
#include "search/searcher.h"

namespace brickdl::search {
namespace {

// Three inputs (same batch and size), five computed layers: conv a, conv b, add, conv c, add.
Graph three_inputs() {
  TensorShape s{2, 4, 1, 8, 8, 2};
  GraphBuilder b("three", s, DType::kF32, "a");
  const int in_b = b.add_input(s, "b");
  const int in_c = b.add_input(s, "c");
  const int ca = b.conv2d(b.input(), 4, 3, 1, 1);
  const int cb = b.conv2d(in_b, 4, 3, 1, 1);
  const int s1 = b.add(ca, cb);
  const int cc = b.conv2d(in_c, 4, 1);
  b.add(s1, cc);
  return fuse_for_inference(b.build());
}

SearchSpaceConfig config() {
  SearchSpaceConfig c;
  c.brick_sizes = {4, 8};
  c.max_group_len = 5;
  return c;
}

// The groups of a plan cover first_layer() .. num_layers() − 1 once, in order.
void expect_tiles(const SearchSpace& sp, const Plan& p) {
  ASSERT_TRUE(p.valid()) << p.note;
  int next = sp.first_layer();
  for (const auto& step : p.steps) {
    const Group& g = sp.group(step.group).group;
    EXPECT_EQ(g.first, next);
    next = g.last + 1;
  }
  EXPECT_EQ(next, sp.num_layers());
}

TEST(GraphIoSearch, GroupsAndPlansStartAfterTheInputs) {
  const Graph g = three_inputs();
  ASSERT_EQ(g.num_inputs(), 3);
  const SearchSpace sp = SearchSpace::build(g, config());
  EXPECT_EQ(sp.first_layer(), 3);
  for (const auto& e : sp.groups())
    EXPECT_GE(e.group.first, 3) << e.group.first << ".." << e.group.last;
  EXPECT_EQ(sp.find(Group{2, 3}), -1);
  for (int l = 3; l < g.size(); ++l)
    EXPECT_GE(sp.singleton(l), 0) << l;
  const CostMatrix ones = make_cost_matrix(sp, 1.0);
  const Plan lw = layerwise_plan(sp, ones);
  expect_tiles(sp, lw);
  EXPECT_EQ(lw.steps.size(), static_cast<size_t>(g.size() - 3));
  // Random costs: dp and exhaustive find the same cheapest tiling of layers 3..7.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 2.0);
  for (int trial = 0; trial < 20; ++trial) {
    CostMatrix cost = make_cost_matrix(sp, 1.0);
    for (auto& row : cost)
      for (double& x : row)
        x = u(rng);
    const Plan dp = dp_plan(sp, cost);
    expect_tiles(sp, dp);
    const Plan ex = exhaustive_plan(sp, cost);
    expect_tiles(sp, ex);
    EXPECT_NEAR(dp.cost_ms, ex.cost_ms, 1e-9);
  }
  EXPECT_GT(count_partitions(sp), 1);
}

TEST(GraphIoSearch, PartitionLengthsCoverTheLayersAfterTheInputs) {
  const Graph g = three_inputs();
  SearchSpaceConfig c = config();
  c.partitions = {{3, 2}}; // 5 layers after 3 inputs: [3..5], [6..7]
  EXPECT_NO_THROW(SearchSpace::build(g, c));
  c.partitions = {{3, 3}};
  try {
    SearchSpace::build(g, c);
    ADD_FAILURE() << "a partition of 6 layers was accepted for 5";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("has 5 layers after its inputs"), std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace brickdl::search
