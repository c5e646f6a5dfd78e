// Runner-ups (search/runner_up.h) and subgraph tables (search/subgraph_report.h) on a chain of
// five convs whose costs come from a table, so every expectation is derived by hand below.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include <fmt/format.h>

#include "core/graph_builder.h"
#include "search/runner_up.h"
#include "search/searcher.h"
#include "search/subgraph_report.h"

namespace brickdl::search {
namespace {

// c1 .. c5: 3x3 convs with 8, 12, 16, 20, 24 output channels (distinct workloads).
Graph chain() {
  GraphBuilder b("chain5", TensorShape{1, 4, 1, 8, 8, 2});
  int x = b.input();
  for (int i = 1; i <= 5; ++i)
    x = b.conv2d(x, 4 + 4 * i, 3, 1, 1, 1, 1, false, fmt::format("c{}", i));
  return fuse_for_inference(b.build());
}

// Costs (ms) by (first, last, strategy); a merged candidate not listed is infeasible:
//   layerwise  every layer 1.0 (bytes 100 at every level)
//   padded     [1,1] 1.2  [1,2] 2.3  [2,2] 1.1  [2,3] 1.4  [3,3] 1.05  [3,4] 1.5  [4,4] 1.3
//              [4,5] needs 300 KiB, [5,5] 200 KiB of shared memory
//   memoized   never fits: [f,l] needs 170 + 10 f KiB
class TablePredictor final : public Predictor {
public:
  model::Prediction predict(const Graph&, const Candidate& c) const override {
    static const std::map<std::tuple<int, int>, double> padded = {
        {{1, 1}, 1.2},  {{1, 2}, 2.3}, {{2, 2}, 1.1}, {{2, 3}, 1.4},
        {{3, 3}, 1.05}, {{3, 4}, 1.5}, {{4, 4}, 1.3}};
    model::Prediction p;
    p.l1_bytes = p.l2_bytes = p.dram_bytes = 100;
    if (c.strategy == Strategy::kLayerwise) {
      p.time_ms = 1.0;
      return p;
    }
    const auto it = padded.find({c.group.first, c.group.last});
    if (c.strategy == Strategy::kPadded && it != padded.end()) {
      p.time_ms = it->second;
      if (c.group == Group{2, 3}) {
        p.l1_bytes = 300;
        p.l2_bytes = 250;
        p.dram_bytes = 120;
      }
      return p;
    }
    p.feasible = false;
    p.reason = c.strategy == Strategy::kPadded
                   ? fmt::format("padded regions need {} KiB of shared memory per block; FakeGPU "
                                 "allows 163 KiB",
                                 c.group.first == 4 ? 300 : 200)
                   : fmt::format("one memoized brick needs {} KiB of shared memory per block; "
                                 "FakeGPU allows 163 KiB",
                                 170 + 10 * c.group.first);
    return p;
  }
  model::LowerBound lower_bound(const Graph&, const Group&) const override { return {}; }
  std::string version() const override { return "table-1"; }
  std::string gpu_name() const override { return "FakeGPU"; }
};

class RunnerUps : public ::testing::Test {
protected:
  RunnerUps() : space_(SearchSpace::build(chain(), config())), ev_(evaluate(space_, model_)) {}

  static SearchSpaceConfig config() {
    SearchSpaceConfig c;
    c.brick_sizes = {4};
    c.max_group_len = 2;
    c.subgraphs = {{"middle", "c2", "c3"}, {"tail", "c4", "c5"}};
    return c;
  }

  TablePredictor model_;
  SearchSpace space_;
  Evaluation ev_;
};

TEST_F(RunnerUps, EachVerdictByHand) {
  const CostMatrix cost = ev_.predicted_costs();
  // Plans over c1..c5: all layerwise 5.0; [2,3] padded 1 + 1.4 + 1 + 1 = 4.4; [3,4] 4.5;
  // [1,2] + [3,4] 2.3 + 1.5 + 1 = 4.8; [2,3] + [4,4] 4.7. The dp plan: c1, [c2 c3], c4, c5.
  const Plan plan = dp_plan(space_, cost);
  ASSERT_EQ(plan.steps.size(), 4u);
  EXPECT_DOUBLE_EQ(plan.cost_ms, 4.4);
  const std::vector<RunnerUp> ups = runner_ups(plan, space_, ev_, cost);
  ASSERT_EQ(ups.size(), 3u); // steps 0 (c1), 2 (c4), 3 (c5)
  const PlanSummary summary = summarize(plan, space_, ev_);

  // c1: [1,1] padded forces 1.2 + best(2..5) = 1.2 + 3.4 = 4.6; [1,2] 2.3 + best(3..5) =
  // 2.3 + 2.5 = 4.8. Runner-up [1,1]: 1.2 vs 1.0 layerwise, the plan loses 0.2.
  EXPECT_EQ(ups[0].step, 0);
  EXPECT_EQ(ups[0].verdict, RunnerUpVerdict::kSlower);
  EXPECT_EQ(ups[0].group, (Group{1, 1}));
  EXPECT_NEAR(ups[0].plan_loss_ms, 0.2, 1e-12);
  EXPECT_EQ(runner_up_text(ups[0], summary),
            "c1 padded 4x4: 1.2000 ms vs 1.0000 ms layerwise (predicted): 1.20x slower");

  // c4: [3,4] forces best(1..2) + 1.5 + best(5..5) = 2 + 1.5 + 1 = 4.5; [4,4] 2.4 + 1.3 + 1 =
  // 4.7; [4,5] has no usable candidate. [3,4] is faster alone (2.0 / 1.5) but overlaps the
  // plan's [2,3] (step #2), which saves more: the plan loses 0.1 with it.
  EXPECT_EQ(ups[1].step, 2);
  EXPECT_EQ(ups[1].verdict, RunnerUpVerdict::kNeighbour);
  EXPECT_EQ(ups[1].group, (Group{3, 4}));
  EXPECT_EQ(ups[1].rivals, std::vector<int>{1});
  EXPECT_NEAR(ups[1].plan_loss_ms, 0.1, 1e-12);
  EXPECT_EQ(runner_up_text(ups[1], summary),
            "c3 .. c4 padded 4x4: 1.5000 ms vs 2.0000 ms layerwise (predicted): 1.33x faster "
            "alone, but the plan's #2 c2 .. c3 (padded 4x4), which overlaps it, gives more: a plan "
            "with it is 0.1000 ms slower");

  // c5: [4,5] and [5,5], two merged candidates each, none feasible; the numbers of each kind
  // of reason are kept as ranges.
  EXPECT_EQ(ups[2].step, 3);
  EXPECT_EQ(ups[2].verdict, RunnerUpVerdict::kNone);
  EXPECT_EQ(ups[2].merged_candidates, 4);
  const std::vector<std::pair<std::string, int64_t>> reasons = {
      {"one memoized brick needs 210–220 KiB of shared memory per block; FakeGPU allows 163 KiB",
       2},
      {"padded regions need 200–300 KiB of shared memory per block; FakeGPU allows 163 KiB", 2}};
  EXPECT_EQ(ups[2].reasons, reasons);
  EXPECT_EQ(runner_up_text(ups[2], summary),
            "none of the 4 merged candidates of the groups holding it is usable: " +
                reasons[0].first + " (2); " + reasons[1].first + " (2)");
}

TEST_F(RunnerUps, APlanThatMissedAMergeSaysSo) {
  const CostMatrix cost = ev_.predicted_costs();
  // The all-layerwise plan (5.0): c2's best merge is [2,3], whose best plan costs 4.4.
  const Plan lw = layerwise_plan(space_, cost);
  const std::vector<RunnerUp> ups = runner_ups(lw, space_, ev_, cost);
  ASSERT_EQ(ups.size(), 5u);
  EXPECT_EQ(ups[1].verdict, RunnerUpVerdict::kMissed);
  EXPECT_EQ(ups[1].group, (Group{2, 3}));
  EXPECT_NEAR(ups[1].plan_loss_ms, -0.6, 1e-12);
}

TEST_F(RunnerUps, ATieIsNamed) {
  CostMatrix cost = ev_.predicted_costs();
  // [3,4] at 1.4 ties [2,3]: c1, c2, [3,4], c5 and c1, [2,3], c4, c5 both cost 4.4. At c4 the dp
  // keeps the group that starts earlier ([3,4]), so c2 stays layerwise and its runner-up [2,3]
  // ties with the plan.
  const int g34 = space_.find(Group{3, 4});
  for (size_t i = 0; i < cost[static_cast<size_t>(g34)].size(); ++i)
    if (cost[static_cast<size_t>(g34)][i] < kExcluded)
      cost[static_cast<size_t>(g34)][i] = 1.4;
  const Plan plan = dp_plan(space_, cost);
  ASSERT_DOUBLE_EQ(plan.cost_ms, 4.4);
  const std::vector<RunnerUp> ups = runner_ups(plan, space_, ev_, cost);
  const RunnerUp* tied = nullptr;
  for (const RunnerUp& u : ups)
    if (u.verdict == RunnerUpVerdict::kTie)
      tied = &u;
  ASSERT_NE(tied, nullptr);
  EXPECT_EQ(tied->layer, 2);
  EXPECT_EQ(tied->group, (Group{2, 3}));
  EXPECT_NEAR(tied->plan_loss_ms, 0.0, 1e-12);
  EXPECT_LT(tied->cost_ms, tied->layerwise_cost_ms);
}

TEST_F(RunnerUps, SubgraphTablesByHand) {
  const CostMatrix cost = ev_.predicted_costs();
  const Plan plan = dp_plan(space_, cost);
  // A measurement of the layerwise c2 and c3 and of the padded [2,3] with DRAM counters.
  auto measure = [&](CandidateRef ref, double ms, double dram) {
    MeasureResult m;
    m.median_ms = ms;
    m.counters = {{"dram__bytes_read.sum", dram / 2}, {"dram__bytes_write.sum", dram / 2}};
    ev_.at(ref).measurement = m;
  };
  const int g23 = space_.find(Group{2, 3});
  measure(CandidateRef{space_.singleton(2), 0}, 0.9, 80);
  measure(CandidateRef{space_.singleton(3), 0}, 1.1, 120);
  measure(CandidateRef{g23, best_candidate(space_, cost, g23, Strategy::kPadded)}, 1.6, 150);

  const std::vector<SubgraphSummary> s = summarize_subgraphs(space_, ev_, cost, plan);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "middle");
  EXPECT_EQ(s[0].plan_steps, std::vector<int>{1});
  ASSERT_EQ(s[0].rows.size(), 3u); // layerwise, padded, memoized
  const StrategyRow &lw = s[0].rows[0], &pad = s[0].rows[1], &memo = s[0].rows[2];
  EXPECT_DOUBLE_EQ(lw.predicted_ms, 2.0);
  EXPECT_DOUBLE_EQ(*lw.measured_ms, 2.0); // 0.9 + 1.1
  EXPECT_DOUBLE_EQ(*lw.measured_dram_bytes, 200);
  EXPECT_DOUBLE_EQ(lw.l1_bytes, 200);
  ASSERT_TRUE(pad.candidate.has_value());
  EXPECT_DOUBLE_EQ(pad.predicted_ms, 1.4);
  EXPECT_DOUBLE_EQ(*pad.measured_ms, 1.6);
  EXPECT_DOUBLE_EQ(pad.l1_bytes / lw.l1_bytes, 1.5);
  EXPECT_DOUBLE_EQ(pad.dram_bytes / lw.dram_bytes, 0.6);
  EXPECT_DOUBLE_EQ(*pad.measured_dram_bytes / *lw.measured_dram_bytes, 0.75);
  EXPECT_FALSE(memo.candidate.has_value());
  EXPECT_EQ(memo.candidates, 1);
  ASSERT_EQ(memo.reasons.size(), 1u);
  EXPECT_EQ(memo.reasons[0].second, 1);
  EXPECT_EQ(memo.reasons[0].first,
            "one memoized brick needs 190 KiB of shared memory per block; FakeGPU allows 163 KiB");

  // "tail" (c4, c5): no padded candidate is feasible: 300 KiB for its one candidate.
  EXPECT_EQ(s[1].plan_steps, (std::vector<int>{2, 3}));
  EXPECT_FALSE(s[1].rows[1].candidate.has_value());
  EXPECT_EQ(s[1].rows[1].reasons[0].first,
            "padded regions need 300 KiB of shared memory per block; FakeGPU allows 163 KiB");

  // The JSON keeps the values and says which are measured.
  const nlohmann::json j = subgraphs_json(s);
  EXPECT_DOUBLE_EQ(j[0]["strategies"][1]["speedup_measured"].get<double>(), 2.0 / 1.6);
  EXPECT_DOUBLE_EQ(j[0]["strategies"][1]["relative_to_layerwise"]["measured_dram"].get<double>(),
                   0.75);
  EXPECT_TRUE(j[1]["strategies"][1]["best"].is_null());
}

TEST(ReasonTally, KeepsTheRangeOfEveryNumber) {
  ReasonTallies t;
  add_reason(t, "padded regions need 180 KiB; A100-40GB allows 163 KiB");
  add_reason(t, "padded regions need 1189 KiB; A100-40GB allows 163 KiB");
  add_reason(t, "padded regions need 512.5 KiB; A100-40GB allows 163 KiB");
  add_reason(t, "256 threads per block; the GPU allows 1..1024");
  add_reason(t, "");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(total_count(t), 5);
  const ReasonTally& kib = t.at("padded regions need N KiB; A100-40GB allows N KiB");
  EXPECT_EQ(kib.count, 3);
  EXPECT_EQ(kib.str(), "padded regions need 180–1189 KiB; A100-40GB allows 163 KiB");
  EXPECT_EQ(t.at("N threads per block; the GPU allows N..N").str(),
            "256 threads per block; the GPU allows 1..1024");
  EXPECT_EQ(t.at("infeasible (no reason given)").count, 1);
}

} // namespace
} // namespace brickdl::search
