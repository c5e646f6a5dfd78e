#pragma once
// Validating a plan instead of measuring it: what a run does when the measuring backend is
// not the device the plan is for (backend auto on a machine without a GPU, the target a GPU
// spec). The plan stays the model's; each merged group of it (not layerwise) runs once on the
// CPU and its output is checked against the reference. CPU times never re-plan a GPU target:
// they are not shown beside the predictions and not stored as that target's times.
//
//   model plan ──merged groups──► resumed from the database (an earlier validation) or
//                                  Measurer::measure once (warmup 0, no timed repetition:
//                                  the validated run is the one sample; no counters) ──► database
//                                  (under the validating measurer's own target,
//                                  "cpu:<model>#validation") ──► PlanValidation
//
// measurement.budget_s bounds the fresh validations; a stop request ends them.
#include <cstdint>

#include "search/evaluation.h"
#include "search/plan.h"
#include "search/report.h"
#include "search/tune_context.h"

namespace brickdl::search {

// The options a validation runs with: the experiment's, once (repetitions 0: the CPU measurer
// times only the validated run), cold, without counters.
MeasureOptions validation_options(MeasureOptions options);

// Validates the merged groups of `plan` with ctx.measurer; results go to ctx.db under
// `target_id` and `run_id`. A candidate already validated on that target (an earlier run) is
// taken from the database unless ctx.options.fresh.
PlanValidation validate_plan(const TuneContext& ctx, const SearchSpace& space, const Evaluation& ev,
                             const Plan& plan, int64_t run_id, int64_t target_id,
                             const std::string& target);

} // namespace brickdl::search
