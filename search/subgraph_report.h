#pragma once
// The experiment's named subgraphs (search.subgraphs, Figs 8-9), each compared across the
// strategies: what the report prints first, and plan.json's "subgraphs".
//
//   space (subgraphs) + evaluation + the plan's cost matrix ──summarize_subgraphs()──►
//        one SubgraphSummary per named subgraph: a layerwise row (the subgraph's layers, each
//        its own library kernel), then per merged strategy of the experiment its best usable
//        candidate (cheapest under the plan's cost matrix: the model's predictions, or measured
//        where measured in a re-plan), or why it has none
//
// Bytes per level (L1 = the kernels' global loads and stores, L2, DRAM) are the model's; the
// measured DRAM bytes are CUPTI's (dram__bytes_read.sum + dram__bytes_write.sum) where the
// measurement has those counters. Layerwise values are the sums over its layers.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "search/cost_table.h"
#include "search/evaluation.h"
#include "search/plan.h"
#include "search/search_space.h"

namespace brickdl::search {

struct StrategyRow {
  Strategy strategy = Strategy::kLayerwise;
  std::optional<Candidate> candidate; // merged rows: the best usable one (none: `reasons`)
  int64_t candidates = 0;             // merged rows: the strategy's candidates of the group
  double predicted_ms = 0;
  std::optional<double> measured_ms; // ok measurements only (layerwise: every layer's)
  double l1_bytes = 0, l2_bytes = 0, dram_bytes = 0; // predicted
  std::optional<double> measured_dram_bytes;         // counters (layerwise: every layer's)
  // No usable candidate: why, most frequent first, counts summing to `candidates` (a
  // structural reason with count 0 when the group has no candidate of the strategy).
  std::vector<std::pair<std::string, int64_t>> reasons;
};

struct SubgraphSummary {
  std::string name; // as the experiment names it
  Group group;
  std::string layer_names;
  std::vector<StrategyRow> rows; // layerwise, then the experiment's merged strategies
  std::vector<int> plan_steps;   // the steps of the plan that run its layers
};

// One summary per named subgraph, in the experiment's order. `cost` is the matrix `plan` was
// made with.
std::vector<SubgraphSummary> summarize_subgraphs(const SearchSpace& space,
                                                 const Evaluation& evaluation,
                                                 const CostMatrix& cost, const Plan& plan);

// The DRAM bytes a measurement's counters saw (read + write), when it has both counters.
std::optional<double> measured_dram_bytes(const MeasureResult& result);

// The subgraph tables of the text report; `plan` (the reported plan) names the plan's steps.
void print_subgraphs(const std::vector<SubgraphSummary>& subgraphs, const PlanSummary& plan,
                     std::ostream& os);
nlohmann::json subgraphs_json(const std::vector<SubgraphSummary>& subgraphs);

} // namespace brickdl::search
