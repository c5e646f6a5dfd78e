#pragma once
// Runner-ups: why a group of a plan stays layerwise.
//
//   plan + space + evaluation + the cost matrix the plan was made with ──runner_ups()──►
//        one RunnerUp per layerwise step of the plan (the report's "why these groups stay
//        layerwise" section, and plan.json's "runner_ups", one per plan group)
//
// Definition. A layerwise step runs one layer L. Its runner-up is the best way the plan could
// have merged L: over every group G of the space that holds L, and every usable merged
// (padded / memoized) candidate c of G (cost < kExcluded: feasible, and not failed when
// measured), the (G, c) whose best plan holding it costs least:
//
//   forced(G, c) = best(1 .. G.first-1) + cost(G, c) + best(G.last+1 .. n-1)
//
// best(a..b) being the cheapest tiling of layers a..b with the space's groups under the same
// cost matrix (the dynamic program's, search/searcher.h). Ties: the smaller
// cost(G, c) - layerwise(G), then the lower group index, then the lower candidate index (for a
// given G the best c is its cheapest merged candidate). layerwise(G) = the sum of the layerwise
// costs of G's layers. The plan's loss = forced(G, c) - the plan's cost (>= 0 for dp).
//
// Verdicts, in this order:
//   missed     loss < 0: a plan holding it is cheaper; the searcher (not dp) did not find it
//   slower     cost(G, c) >= layerwise(G): the merged kernel loses to the same layers run
//              layerwise ("0.0421 ms vs 0.0398 ms layerwise: 1.06x slower")
//   tie        faster than layerwise alone and loss == 0: an equal-cost plan; the planners'
//              order (plan_before) chose the plan
//   neighbour  faster than layerwise alone, but the plan's merged groups that overlap G (named
//              in `rivals`) save more: the best plan holding it costs `loss` more
//   checked    the plan held it, and the plan check (search/plan_check.h) sent it back to
//              layerwise: slower inside the whole model, or the plan with it no faster end to
//              end; or "missed" in a plan the check changed (the plan is then not the
//              dynamic program's); `checked` says which and what it measured (set by the
//              driver, not by runner_ups())
//   none       no group holding L has a usable merged candidate; `reasons` say why, with counts
//              summing to the merged candidates of those groups: the model's reasons (numbers
//              as ranges), failed measurements, or a structural reason (the layer has no bricks,
//              or the experiment lists no merged strategy)
// "Usable" and every cost are under the plan's matrix: the model's predictions for a model-only
// run; measured where measured, else the scaled prediction, for a re-plan.
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

enum class RunnerUpVerdict { kMissed, kSlower, kTie, kNeighbour, kChecked, kNone };
// "missed", "slower", "tie", "neighbour", "checked", "none"
const char* verdict_name(RunnerUpVerdict v);

struct RunnerUp {
  int step = 0;  // the layerwise step of the plan (index into plan.steps)
  int layer = 0; // the layer it runs
  RunnerUpVerdict verdict = RunnerUpVerdict::kNone;

  // All verdicts but none: the runner-up.
  Group group;
  std::string layer_names;
  Candidate candidate;
  double cost_ms = 0, layerwise_cost_ms = 0; // under the plan's cost matrix
  double predicted_ms = 0, layerwise_predicted_ms = 0;
  std::optional<double> measured_ms, layerwise_measured_ms; // ok measurements only
  double plan_loss_ms = 0;                                  // forced - the plan's cost
  std::vector<int> rivals; // neighbour: the plan's merged steps overlapping the group (0-based)
  std::string checked;     // checked: what the plan check measured

  // none: why, most frequent first, counts summing to `merged_candidates` (or one structural
  // reason with the count 0 when there is no merged candidate at all).
  std::vector<std::pair<std::string, int64_t>> reasons;
  int64_t merged_candidates = 0; // of every group holding the layer
};

// One RunnerUp per layerwise step of `plan`, in plan order. `cost` is the matrix `plan` was made
// with; `plan` must tile the space's graph.
std::vector<RunnerUp> runner_ups(const Plan& plan, const SearchSpace& space,
                                 const Evaluation& evaluation, const CostMatrix& cost);

// The verdict as one sentence, e.g. "layer1.0.conv2 .. layer1.0.conv3 memoized 8x8/c64:
// 0.0421 ms vs 0.0398 ms layerwise: 1.06x slower". `plan` names the rivals.
std::string runner_up_text(const RunnerUp& r, const PlanSummary& plan);
nlohmann::json runner_up_json(const RunnerUp& r, const PlanSummary& plan);

} // namespace brickdl::search
