#pragma once
// The closing report of a tuning run: a header (what was tuned, where, how much of the space
// the model kept and why the rest went, how much was measured and what stopped it), the plan
// table and the end-to-end totals; the same as JSON for plan.json.
//
// One row per group of the plan (columns abridged here):
//
//   #  layers            strategy  brick  pred ms  meas ms  lw pred  lw meas  speedup  xbound
//   4  l1.0.conv2 .. add padded    4x4     0.3121        -   0.3897        -    1.25*    1.00
//
// speedup = the group's layers run layerwise / the chosen candidate: measured when both were
// measured, else predicted (marked *). DRAM MB is predicted; bound MB the compulsory traffic.
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search/plan.h"

namespace brickdl::search {

// One measuring worker of a run (MPI runs only: a plain run measures in process).
struct WorkerStats {
  int rank = 0;
  std::string host;
  std::string target;  // its fingerprint
  int measured = 0;    // results it returned in this run
  int failed = 0;      // of which not ok
  double busy_s = 0;   // summed wall time of its jobs
  std::string refused; // why it measured nothing for this run ("" when it took part)
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
  std::string target, backend; // the measurer's target and backend ("none": model only)
  std::string searcher;
  int64_t run_id = 0;
  std::string status; // complete | aborted

  int64_t groups = 0, candidates = 0, feasible = 0;
  std::map<std::string, int64_t> pruned; // structural and model, by reason

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
  std::vector<PlanSummary> alternatives;    // partitions mode: each partition × strategy
  double seconds = 0;                       // wall time of the run
};

void print_report(const TuneReport& report, std::ostream& os);
nlohmann::json report_json(const TuneReport& report);

} // namespace brickdl::search
