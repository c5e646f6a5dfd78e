// The in-plan check of a CPU plan (search/plan_check.h): with a timer whose times come from a
// table, so every verdict is derived by hand below; then the CPU plan executor's timer on a
// small chain (its segments split where asked).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "core/graph_builder.h"
#include "search/plan_check.h"
#include "search/runner_up.h"

namespace brickdl::search {
namespace {

// c1 .. c5: 3x3 convs (distinct workloads), layers 1..5 of the fused graph.
Graph chain() {
  GraphBuilder b("chain5", TensorShape{1, 8, 1, 12, 12, 2});
  int x = b.input();
  for (int i = 1; i <= 5; ++i)
    x = b.conv2d(x, 8 + 4 * i, 3, 1, 1, 1, 1, false, fmt::format("c{}", i));
  return fuse_for_inference(b.build());
}

SearchSpace chain_space() {
  SearchSpaceConfig c;
  c.brick_sizes = {4};
  c.max_group_len = 2;
  return SearchSpace::build(chain(), c);
}

// The step of group [first, last] with its first candidate of `strategy`.
PlanStep step(const SearchSpace& space, int first, int last, Strategy strategy) {
  const int g = space.find(Group{first, last});
  EXPECT_GE(g, 0);
  const GroupEntry& e = space.group(g);
  for (size_t k = 0; k < e.candidates.size(); ++k)
    if (e.candidates[k].strategy == strategy)
      return PlanStep{g, static_cast<int>(k), 1.0};
  ADD_FAILURE() << "no " << strategy_name(strategy) << " candidate for " << first << ".." << last;
  return {};
}

// [c1 c2] padded, c3 layerwise, [c4 c5] padded.
Plan two_merged(const SearchSpace& space) {
  Plan p;
  p.label = "dp";
  p.steps = {step(space, 1, 2, Strategy::kPadded), step(space, 3, 3, Strategy::kLayerwise),
             step(space, 4, 5, Strategy::kPadded)};
  p.cost_ms = 3;
  return p;
}

// Three rounds per step, whatever the time (the table's runs take none).
PlanCheckOptions three_rounds() {
  PlanCheckOptions o;
  o.min_rounds = o.max_rounds = 3;
  return o;
}

// Times from a table: a layer run layerwise takes 1 ms; merged [1,2] takes merged12, [4,5]
// merged45; a plan with any merged group pays `penalty` end to end (what happens between
// segments: caches, barriers). Records what it was asked.
class TableTimer final : public PlanTimer {
public:
  double merged12 = 1.5, merged45 = 2.5, penalty = 0;
  std::atomic<bool>* stop = nullptr; // set during run number stop_after (1-based)
  int stop_after = 0;
  std::vector<std::vector<Candidate>> plans;
  std::vector<std::vector<int>> starts;
  std::vector<int> order, warmups;
  int released = 0;

  int prepare(const std::vector<Candidate>& plan, const std::vector<int>& s) override {
    plans.push_back(plan);
    starts.push_back(s);
    return static_cast<int>(plans.size()) - 1;
  }
  PlanRunTimes run(int h, int warmup) override {
    if (stop && static_cast<int>(order.size()) + 1 == stop_after)
      *stop = true; // a Ctrl-C during this run
    order.push_back(h);
    warmups.push_back(warmup);
    const std::vector<Candidate>& plan = plans.at(static_cast<size_t>(h));
    const std::vector<int>& s = starts.at(static_cast<size_t>(h));
    PlanRunTimes t;
    for (int id = 1; id <= 5;) {
      int last = id;
      double ms = 1;
      bool merged = false;
      for (const Candidate& c : plan)
        if (c.group.first == id) {
          last = c.group.last;
          ms = id == 1 ? merged12 : merged45;
          merged = true;
        }
      if (!merged) // a layerwise run: up to the next merged group or segment start
        while (last + 1 <= 5 && std::count(s.begin(), s.end(), last + 1) == 0 &&
               std::none_of(plan.begin(), plan.end(),
                            [&](const Candidate& c) { return c.group.first == last + 1; })) {
          ++last;
          ms += 1;
        }
      t.segment_first.push_back(id);
      t.segment_last.push_back(last);
      t.segment_ms.push_back(ms);
      t.end_to_end_ms += ms;
      id = last + 1;
    }
    if (!plan.empty())
      t.end_to_end_ms += penalty;
    return t;
  }
  void release(int) override { ++released; }
  std::string description() const override { return "table"; }
};

TEST(PlanCheck, AGroupSlowerInsideTheModelGoesBackToLayerwise) {
  const SearchSpace space = chain_space();
  const Plan plan = two_merged(space);
  TableTimer timer;
  const PlanCheck c = check_plan(space, plan, timer, three_rounds());

  // Step 1: the tuned plan (its two merged groups) and the layerwise plan split at 1, 3 and 4
  // (the groups' first layers and the layers after them; 6 is past the graph).
  ASSERT_EQ(timer.plans.size(), 4u);
  EXPECT_EQ(timer.plans[0].size(), 2u);
  EXPECT_TRUE(timer.starts[0].empty());
  EXPECT_TRUE(timer.plans[1].empty());
  EXPECT_EQ(timer.starts[1], (std::vector<int>{1, 3, 4}));
  // [1,2]: 1.5 vs 2 layerwise, kept; [4,5]: 2.5 vs 2, reverted.
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.merged_groups, 2);
  EXPECT_EQ(c.groups[0].step, 0);
  EXPECT_EQ(c.groups[0].layers, "c1 .. c2");
  EXPECT_EQ(c.groups[0].candidate, "padded 4x4");
  EXPECT_EQ(c.groups[0].merged_ms, (std::vector<double>{1.5, 1.5, 1.5}));
  EXPECT_EQ(c.groups[0].layerwise_ms, (std::vector<double>{2, 2, 2}));
  EXPECT_TRUE(c.groups[0].kept);
  EXPECT_EQ(c.groups[1].step, 2);
  EXPECT_FALSE(c.groups[1].kept);
  EXPECT_EQ(c.reverted, 1);
  EXPECT_EQ(c.tuned_ms, (std::vector<double>{5, 5, 5})); // 1.5 + 1 + 2.5
  // Step 2: [1,2] merged (1.5 + 3 = 4.5) against the unsplit layerwise plan (5).
  EXPECT_EQ(timer.plans[2].size(), 1u);
  EXPECT_EQ(timer.plans[2][0].group, (Group{1, 2}));
  EXPECT_TRUE(timer.plans[3].empty());
  EXPECT_TRUE(timer.starts[3].empty());
  EXPECT_EQ(c.checked_ms, (std::vector<double>{4.5, 4.5, 4.5}));
  EXPECT_EQ(c.layerwise_ms, (std::vector<double>{5, 5, 5}));
  EXPECT_FALSE(c.fell_back);
  EXPECT_EQ(c.kept_steps, std::vector<int>{0});
  EXPECT_EQ(timer.released, 4);
  // Interleaved, the order swapped every round, one warm-up before each plan's first run.
  EXPECT_EQ(timer.order, (std::vector<int>{0, 1, 1, 0, 0, 1, 2, 3, 3, 2, 2, 3}));
  EXPECT_EQ(timer.warmups, (std::vector<int>{1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0}));
}

// The same check: the plan it returns, its lines in the report and plan.json, and what the
// runner-ups say.
TEST(PlanCheck, TheCheckedPlanAndWhatTheReportSays) {
  const SearchSpace space = chain_space();
  const Plan plan = two_merged(space);
  TableTimer timer;
  const PlanCheck c = check_plan(space, plan, timer, three_rounds());
  // The plan returned: [c1 c2] padded, then c3, c4, c5 layerwise, re-costed (every step 1).
  const CostMatrix cost = make_cost_matrix(space, 1.0);
  const Plan p = checked_plan(space, plan, c, cost);
  ASSERT_EQ(p.steps.size(), 4u);
  EXPECT_EQ(p.steps[0], (PlanStep{plan.steps[0].group, plan.steps[0].candidate, 1.0}));
  for (int layer = 3; layer <= 5; ++layer) {
    const PlanStep& s = p.steps[static_cast<size_t>(layer - 2)];
    EXPECT_EQ(space.group(s.group).group, (Group{layer, layer}));
    EXPECT_EQ(s.candidate, space.group(s.group).layerwise);
  }
  EXPECT_DOUBLE_EQ(p.cost_ms, 4);
  EXPECT_EQ(p.label, "dp, 1 group layerwise after the plan check");
  EXPECT_TRUE(plan_tiles_graph(space, p));

  std::ostringstream text;
  print_plan_check(c, text);
  EXPECT_NE(text.str().find("#3 c4 .. c5 (padded 4x4): 2.500 ms vs 2.000 ms layerwise, 0.80x -> "
                            "layerwise"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("after reverting 4.500 ms (4.500-4.500, n 3), layerwise 5.000 ms "
                            "(5.000-5.000, n 3): 1.111x"),
            std::string::npos)
      << text.str();
  // What the runner-ups say of the two groups: the reverted one why, the kept one nothing.
  EXPECT_EQ(plan_check_verdict(c, c.groups[1].merged),
            "the plan check timed it inside the model at 2.5000 ms vs 2.0000 ms layerwise "
            "(0.80x): it runs layerwise");
  EXPECT_EQ(plan_check_verdict(c, c.groups[0].merged), "");
  RunnerUp u;
  u.verdict = RunnerUpVerdict::kChecked;
  u.layer_names = "c4 .. c5";
  u.candidate = c.groups[1].merged;
  u.cost_ms = 1.5;
  u.layerwise_cost_ms = 2;
  u.checked = plan_check_verdict(c, u.candidate);
  const std::string why = runner_up_text(u, PlanSummary{});
  EXPECT_NE(why.find("; the plan check timed it inside the model at 2.5000 ms"), std::string::npos)
      << why;
  EXPECT_EQ(runner_up_json(u, PlanSummary{})["verdict"], "checked");
  const nlohmann::json j = plan_check_json(c);
  EXPECT_EQ(j["reverted"], 1);
  EXPECT_EQ(j["groups"][1]["kept"], false);
  EXPECT_DOUBLE_EQ(j["layerwise_ms"]["median"].get<double>(), 5);
}

TEST(PlanCheck, APlanNoFasterEndToEndIsReplacedByLayerwise) {
  const SearchSpace space = chain_space();
  const Plan plan = two_merged(space);
  TableTimer timer;
  timer.merged45 = 1.9; // both groups win alone ...
  timer.penalty = 1.0;  // ... but the plan pays 1 ms between them: 1.5 + 1 + 1.9 + 1 = 5.4 > 5
  const PlanCheck c = check_plan(space, plan, timer, three_rounds());
  EXPECT_EQ(c.reverted, 0);
  EXPECT_TRUE(c.groups[0].kept && c.groups[1].kept);
  EXPECT_EQ(c.checked_ms, (std::vector<double>{5.4, 5.4, 5.4}));
  EXPECT_TRUE(c.fell_back);
  EXPECT_TRUE(c.kept_steps.empty());
  const CostMatrix cost = make_cost_matrix(space, 1.0);
  const Plan p = checked_plan(space, plan, c, cost);
  EXPECT_EQ(p.steps, layerwise_plan(space, cost).steps);
  EXPECT_EQ(p.label, "dp, layerwise after the plan check");
  std::ostringstream text;
  print_plan_check(c, text);
  EXPECT_NE(text.str().find("0.926x -> not faster: the plan is the layerwise plan"),
            std::string::npos)
      << text.str();
  EXPECT_EQ(plan_check_verdict(c, c.groups[0].merged),
            "the plan check timed it inside the model at 1.5000 ms vs 2.0000 ms layerwise "
            "(1.33x), but the plan with it ran no faster end to end than layerwise");
}

TEST(PlanCheck, ATieIsNoGainAndEveryGroupLostMeansNoSecondStep) {
  const SearchSpace space = chain_space();
  const Plan plan = two_merged(space);
  TableTimer timer;
  timer.merged12 = 2.0; // equal to its layers layerwise: not kept
  const PlanCheck c = check_plan(space, plan, timer, three_rounds());
  EXPECT_EQ(c.reverted, 2);
  EXPECT_FALSE(c.fell_back);
  EXPECT_TRUE(c.kept_steps.empty());
  EXPECT_TRUE(c.checked_ms.empty());
  EXPECT_EQ(timer.plans.size(), 2u); // step 2 never ran
  const CostMatrix cost = make_cost_matrix(space, 1.0);
  EXPECT_EQ(checked_plan(space, plan, c, cost).steps, layerwise_plan(space, cost).steps);
}

// A stop request during a step ends the check between runs: the plan comes back unchecked, and
// nothing is said of its groups.
TEST(PlanCheck, AStopRequestLeavesThePlanUnchecked) {
  const SearchSpace space = chain_space();
  const Plan plan = two_merged(space);
  const CostMatrix cost = make_cost_matrix(space, 1.0);
  for (int after : {3, 8}) { // in step 1; in step 2
    SCOPED_TRACE(after);
    std::atomic<bool> stop{false};
    TableTimer timer;
    timer.stop = &stop;
    timer.stop_after = after;
    PlanCheckOptions o = three_rounds();
    o.stop = &stop;
    const PlanCheck c = check_plan(space, plan, timer, o);
    EXPECT_TRUE(c.interrupted);
    EXPECT_EQ(static_cast<int>(timer.order.size()), after); // no run after the request
    EXPECT_FALSE(plan_check_changed(c));
    const Plan p = checked_plan(space, plan, c, cost);
    EXPECT_EQ(p.steps, plan.steps);
    EXPECT_EQ(p.label, plan.label);
    EXPECT_EQ(plan_check_verdict(c, c.groups[1].merged), "");
    std::ostringstream text;
    print_plan_check(c, text);
    EXPECT_EQ(text.str(), "plan check: interrupted by a stop request; the plan is unchecked\n");
    EXPECT_EQ(plan_check_json(c)["interrupted"], true);
  }
}

// A timer that cannot run the plan: the check says why, and the plan comes back unchecked.
TEST(PlanCheck, ACheckThatCannotRunLeavesThePlanUnchecked) {
  const SearchSpace space = chain_space();
  const Plan plan = two_merged(space);
  PlanCheck c;
  c.error = "no memory";
  EXPECT_FALSE(plan_check_changed(c));
  const Plan p = checked_plan(space, plan, c, make_cost_matrix(space, 1.0));
  EXPECT_EQ(p.steps, plan.steps);
  std::ostringstream text;
  print_plan_check(c, text);
  EXPECT_EQ(text.str(), "plan check: could not run (no memory); the plan is unchecked\n");
  EXPECT_EQ(plan_check_json(c)["error"], "no memory");
}

TEST(PlanCheck, ALayerwisePlanIsNotRunAndComesBackAsItWas) {
  const SearchSpace space = chain_space();
  const CostMatrix cost = make_cost_matrix(space, 1.0);
  const Plan plan = layerwise_plan(space, cost);
  TableTimer timer;
  const PlanCheck c = check_plan(space, plan, timer, three_rounds());
  EXPECT_EQ(c.merged_groups, 0);
  EXPECT_TRUE(timer.plans.empty());
  const Plan p = checked_plan(space, plan, c, cost);
  EXPECT_EQ(p.steps, plan.steps);
  EXPECT_EQ(p.label, plan.label);
}

TEST(PlanCheck, RoundsStopAtTheBudgetButNotBeforeTheMinimum) {
  const SearchSpace space = chain_space();
  const Plan plan = two_merged(space);
  TableTimer timer;
  PlanCheckOptions o;
  o.min_rounds = 2;
  o.max_rounds = 5;
  o.budget_s = 0; // every round is over it: the minimum only
  const PlanCheck c = check_plan(space, plan, timer, o);
  EXPECT_EQ(c.groups[0].merged_ms.size(), 2u);
  EXPECT_EQ(c.checked_ms.size(), 2u);
  o.budget_s = 1e9; // never over it: the maximum
  TableTimer timer2;
  const PlanCheck c2 = check_plan(space, plan, timer2, o);
  EXPECT_EQ(c2.groups[0].merged_ms.size(), 5u);
  EXPECT_EQ(c2.layerwise_ms.size(), 5u);
}

// The CPU plan executor's timer: segments split where asked, merged groups as segments of
// their own, every time positive.
TEST(PlanCheck, TheCpuTimerSplitsTheLayerwisePlanWhereAsked) {
  const SearchSpace space = chain_space();
  const std::unique_ptr<PlanTimer> timer = make_cpu_plan_timer(space.graph(), 2, 7);
  const int split = timer->prepare({}, {1, 3, 4});
  const PlanRunTimes t = timer->run(split, 1);
  EXPECT_EQ(t.segment_first, (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(t.segment_last, (std::vector<int>{2, 3, 5}));
  const int whole = timer->prepare({}, {});
  EXPECT_EQ(timer->run(whole, 0).segment_first, std::vector<int>{1});
  const Plan plan = two_merged(space);
  std::vector<Candidate> merged = {space.candidate({plan.steps[0].group, plan.steps[0].candidate}),
                                   space.candidate({plan.steps[2].group, plan.steps[2].candidate})};
  const int tuned = timer->prepare(merged, {});
  const PlanRunTimes m = timer->run(tuned, 0);
  EXPECT_EQ(m.segment_first, (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(m.segment_last, (std::vector<int>{2, 3, 5}));
  for (double ms : m.segment_ms)
    EXPECT_GT(ms, 0);
  EXPECT_GE(m.end_to_end_ms, m.segment_ms[0] + m.segment_ms[1] + m.segment_ms[2]);
  EXPECT_NE(timer->description().find("2 pinned threads"), std::string::npos);
  timer->release(split);
  timer->release(whole);
  timer->release(tuned);
}

} // namespace
} // namespace brickdl::search
