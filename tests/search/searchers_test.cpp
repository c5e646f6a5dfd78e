#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/error.h"
#include "core/graph_builder.h"
#include "search/evaluation.h"
#include "search/searcher.h"
#include "tests/search/test_graphs.h"

namespace brickdl::search {
namespace {

using testing::FakePredictor;
using testing::random_graph;

SearchSpaceConfig config(int max_len) {
  SearchSpaceConfig c;
  c.brick_sizes = {4, 8, 16};
  c.channel_blocks = {0, 4};
  c.max_group_len = max_len;
  return c;
}

std::string plan_str(const SearchSpace& sp, const Plan& p) {
  std::string s;
  for (const PlanStep& st : p.steps) {
    const GroupEntry& g = sp.group(st.group);
    s += "[" + std::to_string(g.group.first) + "," + std::to_string(g.group.last) + "] " +
         g.candidates[static_cast<size_t>(st.candidate)].config_str() + "; ";
  }
  return s;
}

// The dynamic program is exact: on many random graphs it finds the same plan, with the same
// total, as enumerating every partition.
TEST(Planners, DpEqualsExhaustiveOnRandomGraphs) {
  int graphs = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    for (int levels : {0, 3}) { // spread costs, and integer costs with many ties
      const bool three_d = seed % 5 == 0;
      const Graph g = random_graph(seed, 4 + static_cast<int>(seed % 5), three_d);
      const SearchSpace sp = SearchSpace::build(g, config(1 + static_cast<int>(seed % 4)));
      const FakePredictor model(seed, levels);
      const CostMatrix cost = evaluate(sp, model).predicted_costs();
      const Plan dp = dp_plan(sp, cost);
      const Plan ex = exhaustive_plan(sp, cost);
      ASSERT_TRUE(dp.valid()) << g.name();
      ASSERT_TRUE(plan_tiles_graph(sp, dp));
      EXPECT_EQ(dp.cost_ms, ex.cost_ms) << g.name() << " levels " << levels;
      EXPECT_EQ(plan_str(sp, dp), plan_str(sp, ex)) << g.name() << " levels " << levels;
      EXPECT_EQ(dp.steps, ex.steps);
      ++graphs;
    }
  }
  EXPECT_EQ(graphs, 120);
}

TEST(Planners, RandomNeverBeatsDp) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const Graph g = random_graph(seed, 6);
    const SearchSpace sp = SearchSpace::build(g, config(3));
    const CostMatrix cost = evaluate(sp, FakePredictor(seed)).predicted_costs();
    const Plan dp = dp_plan(sp, cost);
    const Plan rnd = random_plan(sp, cost, 200, seed);
    ASSERT_TRUE(rnd.valid());
    EXPECT_TRUE(plan_tiles_graph(sp, rnd));
    EXPECT_GE(rnd.cost_ms, dp.cost_ms);
    // Same seed, same plan.
    EXPECT_EQ(random_plan(sp, cost, 200, seed).steps, rnd.steps);
  }
}

TEST(Planners, HandCheckedChain) {
  // A 3-layer chain; costs set by hand: layerwise 1 each, merged [1,3] costs 2.5, merged
  // [2,3] costs 1.2 → best is [1,1] layerwise + [2,3] = 2.2.
  GraphBuilder b("chain", TensorShape{1, 4, 1, 16, 16, 2});
  int x = b.input();
  for (int i = 0; i < 3; ++i)
    x = b.conv2d(x, 4, 3, 1, 1);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {8};
  cfg.strategies = {Strategy::kPadded};
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  CostMatrix cost = make_cost_matrix(sp, kExcluded);
  for (int l = 1; l <= 3; ++l)
    cost[static_cast<size_t>(sp.singleton(l))][0] = 1.0;
  cost[static_cast<size_t>(sp.find(Group{1, 3}))][0] = 2.5;
  cost[static_cast<size_t>(sp.find(Group{2, 3}))][0] = 1.2;
  const Plan p = dp_plan(sp, cost);
  EXPECT_DOUBLE_EQ(p.cost_ms, 2.2);
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(sp.group(p.steps[1].group).group, (Group{2, 3}));
  EXPECT_DOUBLE_EQ(layerwise_plan(sp, cost).cost_ms, 3.0);
  EXPECT_EQ(count_partitions(sp), 4); // 1+1+1, 1+2, 2+1, 3
  // Equal totals: the plan whose last group starts earlier wins ([1,3] over [1,1]+[2,3]).
  cost[static_cast<size_t>(sp.find(Group{1, 3}))][0] = 2.2;
  EXPECT_EQ(sp.group(dp_plan(sp, cost).steps.back().group).group, (Group{1, 3}));
  EXPECT_EQ(dp_plan(sp, cost).steps, exhaustive_plan(sp, cost).steps);
  // Nothing usable for layer 2: no plan.
  for (int g : sp.groups_ending_at(2))
    cost[static_cast<size_t>(g)].assign(1, kExcluded);
  for (int g : sp.groups_starting_at(2))
    cost[static_cast<size_t>(g)].assign(sp.group(g).candidates.size(), kExcluded);
  for (const auto& e : sp.groups())
    if (e.group.contains(2))
      cost[static_cast<size_t>(sp.find(e.group))].assign(e.candidates.size(), kExcluded);
  EXPECT_FALSE(dp_plan(sp, cost).valid());
  EXPECT_FALSE(dp_plan(sp, cost).note.empty());
}

TEST(Planners, ExhaustiveRefusesHugeGraphs) {
  GraphBuilder b("long", TensorShape{1, 4, 1, 8, 8, 2});
  int x = b.input();
  for (int i = 0; i < 40; ++i)
    x = b.conv2d(x, 4, 1);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {8};
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  EXPECT_GT(count_partitions(sp), 2'000'000);
  const CostMatrix cost = make_cost_matrix(sp, 1.0);
  EXPECT_THROW(exhaustive_plan(sp, cost), UserError);
  EXPECT_TRUE(dp_plan(sp, cost).valid());
}

TEST(CostTable, CombineScalesUnmeasuredPredictions) {
  GraphBuilder b("two", TensorShape{1, 4, 1, 8, 8, 2});
  b.conv2d(b.conv2d(b.input(), 4, 3, 1, 1), 4, 3, 1, 1);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4};
  cfg.strategies = {Strategy::kPadded};
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  // groups: [1,1] {lw, padded}, [1,2] {padded}, [2,2] {lw, padded}
  CostMatrix pred = make_cost_matrix(sp, 1.0);
  CostMatrix meas = make_cost_matrix(sp, kNotMeasured);
  const int g11 = sp.singleton(1), g22 = sp.singleton(2), g12 = sp.find(Group{1, 2});
  pred[g11] = {2.0, 1.0};
  pred[g12] = {3.0};
  pred[g22] = {4.0, 8.0};
  meas[g11][0] = 20.0;      // ratio 10
  meas[g22][0] = 120.0;     // ratio 30
  meas[g22][1] = kExcluded; // failed
  const CombinedCosts c = combine_costs(sp, pred, meas);
  EXPECT_DOUBLE_EQ(c.scale, 20.0); // median of {10, 30}
  EXPECT_EQ(c.measured_ok, 2);
  EXPECT_DOUBLE_EQ(c.cost[g11][0], 20.0);
  EXPECT_DOUBLE_EQ(c.cost[g11][1], 20.0); // 1.0 predicted × 20
  EXPECT_DOUBLE_EQ(c.cost[g12][0], 60.0);
  EXPECT_EQ(c.cost[g22][1], kExcluded);
  // A failed layerwise baseline falls back to its scaled prediction.
  meas[g22][0] = kExcluded;
  EXPECT_DOUBLE_EQ(combine_costs(sp, pred, meas).cost[g22][0], 4.0 * 10.0);
  // Measured on another kind of device (the CPU under a GPU model): an unmeasured merged
  // candidate stays out of the plan, where scaled it would have beaten its measured baseline
  // (g11: 1.0 × 10 = 10 < 20 measured); unmeasured baselines still enter scaled.
  const CombinedCosts cpu = combine_costs(sp, pred, meas, true);
  EXPECT_EQ(cpu.cost[g11][1], kExcluded);
  EXPECT_EQ(cpu.cost[g12][0], kExcluded);
  EXPECT_DOUBLE_EQ(cpu.cost[g11][0], 20.0);
  EXPECT_DOUBLE_EQ(cpu.cost[g22][0], 4.0 * 10.0);
}

// The measuring protocol: baselines first, then the top-k of the plan's groups rank by rank.
TEST(Searchers, DpProposesBaselinesThenTopK) {
  GraphBuilder b("chain", TensorShape{1, 4, 1, 16, 16, 2});
  int x = b.input();
  for (int i = 0; i < 3; ++i)
    x = b.conv2d(x, 4, 3, 1, 1);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4, 8};
  cfg.strategies = {Strategy::kPadded, Strategy::kMemoized};
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  CostMatrix cost = make_cost_matrix(sp, 10.0);
  for (int l = 1; l <= 3; ++l)
    cost[static_cast<size_t>(sp.singleton(l))][0] = 1.0;
  const int g13 = sp.find(Group{1, 3});
  cost[static_cast<size_t>(g13)] = {0.4, 0.3, 0.2, 0.1}; // best: the last, then backwards

  SearcherOptions o;
  o.name = "dp";
  o.top_k = 2;
  auto s = make_searcher(o);
  s->init(sp, cost);
  std::vector<CandidateRef> all;
  for (auto batch = s->propose(2); !batch.empty(); batch = s->propose(2)) {
    EXPECT_LE(batch.size(), 2u);
    std::vector<MeasuredCandidate> r;
    for (const auto& c : batch)
      r.push_back(MeasuredCandidate{c, 1.0});
    s->notify(r);
    all.insert(all.end(), batch.begin(), batch.end());
  }
  const std::vector<CandidateRef> want = {
      {sp.singleton(1), 0}, {sp.singleton(2), 0}, {sp.singleton(3), 0}, {g13, 3}, {g13, 2}};
  EXPECT_EQ(all, want);
  EXPECT_EQ(s->rounds(), 1);
}

TEST(Searchers, TopkReplansWithMeasurements) {
  GraphBuilder b("chain", TensorShape{1, 4, 1, 16, 16, 2});
  int x = b.input();
  for (int i = 0; i < 3; ++i)
    x = b.conv2d(x, 4, 3, 1, 1);
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {8};
  cfg.strategies = {Strategy::kPadded};
  cfg.max_group_len = 3;
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  CostMatrix pred = make_cost_matrix(sp, 5.0);
  for (int l = 1; l <= 3; ++l)
    pred[static_cast<size_t>(sp.singleton(l))][0] = 1.0;
  const int g13 = sp.find(Group{1, 3}), g23 = sp.find(Group{2, 3});
  pred[static_cast<size_t>(g13)][0] = 0.5; // predicted winner
  pred[static_cast<size_t>(g23)][0] = 0.8;

  SearcherOptions o;
  o.name = "topk";
  o.top_k = 1;
  auto s = make_searcher(o);
  s->init(sp, pred);
  // Round 1: baselines and [1,3]. [1,3] measures badly (50 ms vs 1 ms per layer).
  std::vector<CandidateRef> round1;
  for (auto c = s->propose(1); !c.empty(); c = s->propose(1)) {
    round1.push_back(c[0]);
    const double ms = c[0].group == g13 ? 50.0 : 1.0;
    s->notify({MeasuredCandidate{c[0], ms}});
    if (round1.size() == 4)
      break;
  }
  ASSERT_EQ(round1.size(), 4u);
  EXPECT_EQ(round1[3], (CandidateRef{g13, 0}));
  // Round 2: the re-planned plan uses [2,3] (scaled 0.8 < 2 layers × 1 ms); measure it.
  const auto next = s->propose(1);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0], (CandidateRef{g23, 0}));
  s->notify({MeasuredCandidate{next[0], 1.5}});
  EXPECT_TRUE(s->propose(1).empty()); // the new plan is measured: converged
  EXPECT_EQ(s->rounds(), 3);
  const Plan final_plan = s->plan(s->current_costs().cost);
  EXPECT_DOUBLE_EQ(final_plan.cost_ms, 2.5); // [1,1] 1 ms + [2,3] 1.5 ms
}

TEST(Searchers, MeasureAllProposesEveryFeasibleCandidateOnce) {
  const Graph g = random_graph(3, 5);
  const SearchSpace sp = SearchSpace::build(g, config(3));
  const Evaluation ev = evaluate(sp, FakePredictor(3));
  SearcherOptions o;
  o.name = "measure_all";
  auto s = make_searcher(o);
  s->init(sp, ev.predicted_costs());
  std::set<CandidateRef> got;
  size_t n = 0;
  for (auto batch = s->propose(5); !batch.empty(); batch = s->propose(5)) {
    std::vector<MeasuredCandidate> r;
    for (const auto& c : batch) {
      got.insert(c);
      r.push_back(MeasuredCandidate{c, 1.0});
    }
    n += batch.size();
    s->notify(r);
  }
  EXPECT_EQ(n, got.size());
  EXPECT_EQ(static_cast<int64_t>(n), ev.feasible_count());
}

TEST(Searchers, SubgraphsAreMeasuredLikePlanGroups) {
  GraphBuilder b("chain", TensorShape{1, 4, 1, 16, 16, 2});
  int x = b.input();
  for (int i = 0; i < 5; ++i)
    x = b.conv2d(x, 4, 3, 1, 1, 1, 1, false, "c" + std::to_string(i));
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4, 8};
  cfg.subgraphs = {{"mid", "c1", "c3"}};
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  const int mid = sp.find(Group{2, 4});
  const Evaluation ev = evaluate(sp, FakePredictor(2, 0, 0)); // all feasible
  // measure_all with a named subgraph: the subgraph's candidates and its layers' baselines.
  SearcherOptions o;
  o.name = "measure_all";
  auto s = make_searcher(o);
  s->init(sp, ev.predicted_costs());
  std::set<CandidateRef> got;
  for (auto c = s->propose(1); !c.empty(); c = s->propose(1)) {
    got.insert(c[0]);
    s->notify({MeasuredCandidate{c[0], 1.0}});
  }
  std::set<CandidateRef> want;
  for (int l = 2; l <= 4; ++l)
    want.insert(CandidateRef{sp.singleton(l), 0});
  for (size_t i = 0; i < sp.group(mid).candidates.size(); ++i)
    want.insert(CandidateRef{mid, static_cast<int>(i)});
  EXPECT_EQ(got, want);
  // dp: the subgraph's top-k besides the plan's, also when the plan (layerwise here) does not
  // use the subgraph.
  CostMatrix cost = make_cost_matrix(sp, 5.0);
  for (int l = 1; l <= 5; ++l)
    cost[static_cast<size_t>(sp.singleton(l))][0] = 1.0;
  o.name = "dp";
  o.top_k = 1;
  auto d = make_searcher(o);
  d->init(sp, cost);
  ASSERT_EQ(d->plan(cost).steps.size(), 5u);
  bool mid_proposed = false;
  for (auto c = d->propose(1); !c.empty(); c = d->propose(1)) {
    mid_proposed = mid_proposed || c[0].group == mid;
    d->notify({MeasuredCandidate{c[0], 1.0}});
  }
  EXPECT_TRUE(mid_proposed);
}

TEST(Searchers, PartitionsEvaluatesEachPartitionPerStrategy) {
  GraphBuilder b("chain6", TensorShape{1, 3, 8, 8, 8, 3});
  int x = b.input();
  for (int i = 0; i < 6; ++i)
    x = b.relu(b.conv3d(x, 3, 3, 1, 1));
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4, 8};
  cfg.partitions = {{2, 2, 2}, {3, 3}, {6}};
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  const CostMatrix cost = evaluate(sp, FakePredictor(11, 0, 0)).predicted_costs();
  SearcherOptions o;
  o.name = "partitions";
  auto s = make_searcher(o);
  s->init(sp, cost);
  const auto alts = s->alternatives(cost);
  ASSERT_EQ(alts.size(), 3u * 2u + 1u);
  EXPECT_EQ(alts[0].label, "2+2+2 padded");
  EXPECT_EQ(alts[3].label, "3+3 memoized");
  EXPECT_EQ(alts.back().label, "layerwise");
  const Plan best = s->plan(cost);
  for (const Plan& a : alts) {
    EXPECT_GE(a.cost_ms, best.cost_ms) << a.label;
    if (a.label == "layerwise")
      continue;
    const Strategy want =
        a.label.find("padded") != std::string::npos ? Strategy::kPadded : Strategy::kMemoized;
    for (const PlanStep& st : a.steps)
      EXPECT_EQ(sp.candidate(CandidateRef{st.group, st.candidate}).strategy, want) << a.label;
  }
}

TEST(Evaluation, ReasonClassesGroupByKind) {
  EXPECT_EQ(reason_class("one memoized brick needs 256 KiB of shared memory per block; "
                         "A100-40GB allows 163 KiB"),
            "one memoized brick needs N KiB of shared memory per block; A100-40GB allows N KiB");
  EXPECT_EQ(reason_class("brick 4x4x4 exceeds 1.5 MB."), "brick 4x4x4 exceeds N MB.");
  EXPECT_EQ(reason_class("12 threads"), "N threads");
}

TEST(Evaluation, PredictsEachWorkloadConfigurationOnce) {
  // Two identical blocks: the second block's groups reuse the first block's predictions.
  GraphBuilder b("blocks", TensorShape{1, 8, 1, 16, 16, 2});
  int x = b.input();
  for (int i = 0; i < 2; ++i)
    x = b.relu(b.add(b.conv2d(b.relu(b.conv2d(x, 8, 3, 1, 1)), 8, 3, 1, 1), x));
  SearchSpaceConfig cfg;
  cfg.brick_sizes = {4, 8};
  cfg.max_group_len = 3;
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(b.build()), cfg);
  const FakePredictor model(1);
  const Evaluation ev = evaluate(sp, model);
  EXPECT_EQ(ev.model_calls, model.calls);
  EXPECT_LT(ev.model_calls, sp.num_candidates());
  const int a = sp.find(Group{1, 3}), c = sp.find(Group{4, 6});
  ASSERT_GE(a, 0);
  ASSERT_GE(c, 0);
  for (size_t i = 0; i < sp.group(a).candidates.size(); ++i)
    EXPECT_EQ(ev.groups[a].candidates[i].prediction.time_ms,
              ev.groups[c].candidates[i].prediction.time_ms);
  int64_t infeasible = 0;
  for (const auto& [r, tally] : ev.infeasible)
    infeasible += tally.count;
  EXPECT_EQ(infeasible + ev.feasible_count(), sp.num_candidates());
}

TEST(Searchers, UnknownNameSuggests) {
  SearcherOptions o;
  o.name = "dpp";
  try {
    make_searcher(o);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'dp'"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace brickdl::search
