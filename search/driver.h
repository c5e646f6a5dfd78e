#pragma once
// The tuning driver: one experiment, end to end.
//
//   experiment ─► fuse_for_inference ─► SearchSpace ─► evaluate (model) ─► database
//        (workloads, candidates, predictions in one transaction) ─► Searcher::plan (model plan,
//        stored) ─► measuring loop: propose → resume from the database or submit to the
//        MeasurePool (in process, or MPI workers: as many in flight as it has slots, results
//        taken as they finish) → callbacks (database writer first: each result committed as
//        it arrives; then progress, ...) → notify ─► re-plan with the measurements (stored)
//        ─► TuneReport
//
// Resume: a candidate already measured on this target (any run) is not measured again unless
// options.fresh; measurements of other targets are used only with options.use_other_targets.
// Repeated workloads share results: a measurement applies to every group with the same
// signature. Tuners sharing a database share the work: a candidate is claimed in the database
// before it is measured; one claimed by another live tuner is left to it and its result taken
// from the database when it appears; a dead tuner's claim is taken over (TuningDb::claim). A
// heartbeat thread (RunHeartbeat) keeps the run's sign of life fresh meanwhile. The budget
// (measurement.budget_s, measurement.max_measurements) stops fresh measurements; candidates already
// in the database are still used. A stop request (Ctrl-C) ends the run as `aborted` after the
// candidate in flight (in process), or at once with the candidates in flight on workers dropped (a
// pool), keeping everything measured.
#include <string>

#include <nlohmann/json.hpp>

#include "search/report.h"
#include "search/tune_context.h"

namespace brickdl::search {

struct TuneResult {
  int64_t run_id = 0;
  bool aborted = false;
  TuneReport report;
};

// Checks the names the experiment gives of the search module's registries (searcher,
// backend) against them: an unknown one is a UserError at its place in the experiment file,
// with a suggestion and the valid names.
void check_names(const ExperimentConfig& experiment);

// Checks that the experiment's backend computes its precision (search/measurers.h,
// check_backend_precision): else a UserError where the backend was chosen (YAML or
// --backend), or where the precision was when the backend is the default. Model-only work
// (brickdl-tune --describe) does not need it.
void check_precision(const ExperimentConfig& experiment);

// Checks what tune() would reject before starting a run (names, the search space and the
// searcher), so that a tool can fail on bad input before it creates anything. Throws
// UserError.
void check_experiment(const ExperimentConfig& experiment);

// Throws UserError for bad input found before the run starts (search space, searcher name);
// a failure after the run row exists marks the run aborted and rethrows.
TuneResult tune(TuneContext& context);

// Writes plan.json and report.txt into `dir` (created when missing). Throws UserError.
void write_outputs(const TuneResult& result, const std::string& dir);

} // namespace brickdl::search
