#pragma once
// Plans: a partition of the whole fused graph into groups, one candidate each.
//
//   Searcher::plan(cost) ──► Plan (steps by position in the space)
//   summarize(plan, space, evaluation) ──► PlanSummary (what the report and plan.json show)
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search/cost_table.h"
#include "search/evaluation.h"
#include "search/search_space.h"

namespace brickdl::search {

struct PlanStep {
  int group = -1;     // index into SearchSpace::groups()
  int candidate = -1; // index into that group's candidates
  double cost_ms = 0; // under the matrix the plan was made with
  bool operator==(const PlanStep&) const = default;
};

struct Plan {
  std::string label;           // "dp", "layerwise", "3+3 memoized", ...
  std::vector<PlanStep> steps; // in topological order; tile layers 1..n-1 exactly once
  double cost_ms = kExcluded;  // left-to-right sum of the steps' costs
  std::string note;            // why there is no usable plan, when cost_ms is kExcluded

  bool valid() const { return !steps.empty() && cost_ms < kExcluded; }
};

// True when the steps tile layers 1..n-1 of the space's graph in order.
bool plan_tiles_graph(const SearchSpace& space, const Plan& plan);

// Recomputes step costs and the total under `cost` (a step whose candidate is excluded makes
// the plan unusable).
Plan recost(const Plan& plan, const CostMatrix& cost);

// Every layer as its own library kernel: the baseline.
Plan layerwise_plan(const SearchSpace& space, const CostMatrix& cost);

// The order all planners agree on (so that equal-cost plans resolve the same way): lower total
// first; then the plan whose last group starts earlier; then the same comparison on the
// plans without their last group (the dynamic program's choice). `a` and `b` must be costed under
// the same matrix.
bool plan_before(const SearchSpace& space, const Plan& a, const Plan& b);

// One row of a plan as reported.
struct PlanGroupSummary {
  Group group;
  std::string layer_names;
  std::string description;
  Candidate candidate;
  double predicted_ms = 0;
  std::optional<double> measured_ms;
  bool measurement_resumed = false;
  double layerwise_predicted_ms = 0;           // the group's layers, each as a library kernel
  std::optional<double> layerwise_measured_ms; // when every one of them was measured
  double dram_bytes = 0;                       // predicted
  double dram_lower_bound = 0;                 // compulsory traffic of the group
  double l1_bytes = 0, l2_bytes = 0;           // predicted (model/cost_model.h)
};

struct PlanSummary {
  std::string label;
  std::vector<PlanGroupSummary> groups;
  double predicted_ms = 0;
  std::optional<double> measured_ms; // when every group's candidate was measured
  double layerwise_predicted_ms = 0;
  std::optional<double> layerwise_measured_ms;
  double dram_bytes = 0, dram_lower_bound = 0;
  double l1_bytes = 0, l2_bytes = 0;
  int groups_measured = 0;
};

PlanSummary summarize(const Plan& plan, const SearchSpace& space, const Evaluation& evaluation);

// With `bytes_per_level`, each group and the total also carry the predicted "l1_bytes" and
// "l2_bytes" (plan.json); without, the form the database stores (plans.json).
nlohmann::json to_json(const PlanSummary& summary, bool bytes_per_level = false);
// A merged candidate's brick as plan.json writes it ({"d", "h", "w", "cb"}, "nb" / "cl" when not
// 1).
nlohmann::json brick_json(const BrickShape& brick);

} // namespace brickdl::search
