#pragma once
// What a device calibration (core/gpu_calibration.h) changes in the model's plans: each
// experiment tuned model-only (backend none) twice, for its spec as named and for the spec
// calibrated, into a database of its own that the caller names (brickdl-calibration-diff: a
// temporary one, removed after), so that nothing reaches the user's database.
//
//   plain experiment ─┐                        ┌─► before (PlanSummary: times, groups)
//                     ├─ tune(backend none) ───┤
//   calibrated one ───┘                        └─► after  ──► changes by layer range
//
// Every time here is a model prediction: no kernel runs.
#include <ostream>
#include <string>
#include <vector>

#include "core/experiment.h"
#include "search/plan.h"

namespace brickdl::search {

// One group that differs: the same layers with another candidate, or layers that form a group
// in one plan only ("" on the other side).
struct GroupChange {
  std::string layers; // "first .. last"
  std::string before; // Candidate::config_str(), "" when the plan has no such group
  std::string after;
};

struct CalibrationDiff {
  std::string experiment, model, precision;
  std::string spec_before, spec_after; // "H200", "H200+cal-1a2b3c4d"
  PlanSummary before, after;           // the model's plans
  std::vector<GroupChange> changes;    // in the order of the layers
  double seconds = 0;                  // wall time of both tunes
};

// Tunes `plain` and `calibrated` (the same experiment loaded without and with the calibration)
// model-only into the database at `db_path`. Throws UserError for bad input.
CalibrationDiff diff_calibration(const ExperimentConfig& plain, const ExperimentConfig& calibrated,
                                 const std::string& db_path);

// The groups that differ between two plans, by layer range (search/plan.h).
std::vector<GroupChange> plan_changes(const PlanSummary& before, const PlanSummary& after);

// A table of every experiment (end-to-end predicted ms and speedup over layerwise, before and
// after), then each experiment's changed groups.
void print_calibration_diffs(const std::vector<CalibrationDiff>& diffs, std::ostream& os);

} // namespace brickdl::search
