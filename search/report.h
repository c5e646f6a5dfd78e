#pragma once
// The closing report of a tuning run, as text (report.txt, stdout) and as JSON (plan.json):
//
//   header       what was tuned, where; the space's counts, which add up:
//                  enumerated = never built (structurally pruned, by reason) + built
//                  built      = feasible + infeasible under the model (by kind of reason,
//                               each number of a kind shown as its range: "need 180–1189 KiB")
//                and how much was measured and what stopped it
//   subgraphs    the experiment's named subgraphs first (search/subgraph_report.h): per
//                subgraph, layerwise vs the best padded vs the best memoized candidate, times
//                and bytes per level relative to layerwise, or why a strategy has none
//   plan table   one row per group of the plan (columns abridged here), then the legend
//                (report_legend(): every column explained, once)
//
//     #  layers            strategy  brick  pred ms  meas ms  lw pred  lw meas  speedup  xbound
//     4  l1.0.conv2 .. add padded    4x4     0.3121        -   0.3897        -    1.25*    1.00
//
//   runner-ups   "why these groups stay layerwise": per layerwise group of the plan (one
//                layer L), its runner-up = over every group G holding L and every usable
//                padded / memoized candidate c of G, the (G, c) whose best plan holding it
//                costs least (the plan's cost matrix); then why it lost: slower than G's
//                layers run layerwise ("0.0421 ms vs 0.0398 ms layerwise: 1.06x slower"),
//                or faster alone but overlapping plan groups (named) save more, or a tie, or
//                none usable (the reasons, with counts); search/runner_up.h defines each.
//                In plan.json "runner_ups", beside "plan" and aligned with plan.groups (null
//                for merged groups): plan.groups itself stays what brickdl-run --plan reads
//   totals       end to end, predicted and (when every group was measured) measured
//
// speedup = the group's layers run layerwise / the chosen candidate: measured when both were
// measured, else predicted (marked *). Predicted values are the model's for the GPU spec; no
// column mixes predicted and measured values without saying so.
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search/evaluation.h"
#include "search/plan.h"
#include "search/plan_check.h"
#include "search/runner_up.h"
#include "search/subgraph_report.h"

namespace brickdl::search {

// One measuring worker of a run (MPI runs only: a plain run measures in process).
struct WorkerStats {
  int rank = 0;
  std::string host;
  std::string target;        // its fingerprint
  int measured = 0;          // results it returned in this run
  int failed = 0;            // of which not ok
  double busy_s = 0;         // summed wall time of its jobs
  std::string refused;       // why it measured nothing for this run ("" when it took part)
  std::string kind = "rank"; // "rank" (MPI) or "worker" (a worker process on this machine)
  int restarts = 0;          // times its process was started afresh (worker processes)
};

// A run that plans for a GPU it does not have (backend auto without a GPU): the plan is the
// model's, and the CPU runs each merged group of it once to check its output against the
// reference. CPU times play no part in it (search/plan_validation.h).
struct GroupValidation {
  int step = 0;       // index in the plan
  std::string layers; // "first .. last"
  std::string status; // a measure status name ("ok", "wrong_result", ...) or "not validated"
  std::string error;  // why, when not ok
  double max_rel_error = 0;
  bool resumed = false; // taken from the database (validated by an earlier run)
};

struct PlanValidation {
  std::string target;    // where it ran ("cpu:<model>#validation")
  int merged_groups = 0; // groups of the plan that are not layerwise
  int validated = 0;     // of which checked now or before (resumed)
  int resumed = 0;
  int wrong = 0;          // outputs that differ from the reference
  int failed = 0;         // other failures (unsupported, time-out, ...)
  std::string stopped_by; // the budget or a stop request ("" when every group was checked)
  double seconds = 0;
  std::vector<GroupValidation> groups; // the merged groups, in plan order
};

struct TuneReport {
  std::string experiment, model, precision;
  int batch = 1;
  std::string gpu_spec, model_version;
  // The device calibration over the spec (core/gpu_calibration.h AppliedCalibration::summary);
  // "" without one.
  std::string calibration;
  std::string target, backend; // the measurer's target and backend ("none": model only)
  std::string searcher;
  int64_t run_id = 0;
  std::string status; // complete | aborted

  // enumerated = candidates + the sum of `structural`; candidates = feasible + the sum of
  // `infeasible` (search/search_space.h, search/evaluation.h).
  int64_t groups = 0, enumerated = 0, candidates = 0, feasible = 0;
  std::map<std::string, int64_t> structural; // never built, by reason
  ReasonTallies infeasible;                  // built, rejected by the model, by kind of reason

  int measured = 0;                 // measured in this run
  int resumed = 0;                  // taken from the database
  int failed = 0;                   // of both, not ok
  std::string stopped_by;           // why measuring ended early ("" when it did not)
  double scale = 1;                 // measured / predicted ratio applied to unmeasured candidates
  int dropped = 0;                  // in flight on a worker when a stop request ended the run
  double measure_s = 0;             // wall time of the measuring phase
  std::vector<WorkerStats> workers; // MPI runs: every worker rank, refused ones included

  std::optional<PlanValidation> validation; // the model's plan validated on the CPU (no GPU)
  PlanSummary predicted;                    // the model's plan
  std::optional<PlanSummary> replanned;     // with measurements (a measuring backend)
  // A measuring CPU run: the re-planned plan timed inside the whole model against layerwise
  // (search/plan_check.h); `replanned` is what it returned.
  std::optional<PlanCheck> plan_check;
  std::vector<PlanSummary> alternatives; // partitions mode: each partition × strategy
  // The BrickDL paper's own baseline of the whole model, predicted (model/baseline.h
  // 'paper-unfused': every layer's conv, bias, batch-norm and activation passes, each layer
  // alone); unset when the unfused graph could not be built.
  std::optional<double> paper_layerwise_predicted_ms;
  std::vector<SubgraphSummary> subgraphs; // the experiment's named subgraphs
  std::vector<RunnerUp> runner_ups;       // the reported plan's layerwise steps, in order
  double seconds = 0;                     // wall time of the run
};

void print_report(const TuneReport& report, std::ostream& os);
nlohmann::json report_json(const TuneReport& report);

// The legend of the report's columns (plan table, subgraph tables, runner-ups): a few lines,
// printed once under the plan table; tools print it in their help too.
std::string report_legend();

} // namespace brickdl::search
