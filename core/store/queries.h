#pragma once
// Reading a tuning database: the queries behind `brickdl-query`. Each returns typed rows; the
// SQL stays in queries.cpp and the text (tables, CSV, JSON) in print.h.
//
//   brickdl-query ──► TuningDb (read-only) ──► best()                ──► BestRow     ─┐
//                                         ├──► runs()                ──► RunRow       │
//                                         ├──► run_details()         ──► RunDetails   ├─► print.h
//                                         ├──► compare_runs()        ──► Comparison   │
//                                         ├──► export_measurements() ──► ExportTable ─┤
//                                         └──► export_predictions()  ──► ExportTable ─┘
//
// Every function here only reads, so a database copied from another machine (or an older
// schema, migrated in memory by TuningDb) works the same. Rows are deterministic for a given
// database: ordered by ids and layer positions.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/candidate.h"

namespace brickdl {
class TuningDb;
} // namespace brickdl

namespace brickdl::query {

// What kind of number a time is. A column of brickdl-query's output holds one kind only: a
// GPU's time, a CPU's time and the model's prediction for a GPU spec are never compared in one
// column, and a validation (a CPU run that checks a GPU plan's output, target
// "cpu:<model>#validation") is never a time.
enum class Source { kMeasuredGpu, kMeasuredCpu, kPredicted };
const char* source_label(Source source); // "measured (GPU)", "measured (CPU)", "predicted (model)"

// What a run's target says about its measurements: "gpu:..." → kMeasuredGpu, "cpu:..." →
// kMeasuredCpu, "model:<spec>" → kPredicted (nothing measured); validation targets → kPredicted
// too, and is_validation_target() is true.
Source target_source(const std::string& fingerprint);
bool is_validation_target(const std::string& fingerprint);
// "model only", "measured (GPU)", "measured (CPU)", "validated (CPU)": what a run did.
std::string run_kind(const std::string& fingerprint);

// Filters of `best`; empty / unset means any.
struct BestFilter {
  std::string model;
  std::string gpu;       // the GPU spec the runs predicted for (case-insensitive)
  std::string precision; // fp32 | tf32 | bf16 | fp16
  std::optional<int> batch;
  std::string target; // a substring of the row's target ("cpu:", "gpu:", "model:H200", ...)
  std::string layer;  // only groups that contain the layer of this name
  std::string source; // "measured" or "predicted"; "" = both
};

struct GroupRef {
  int first_layer = 0, last_layer = 0;
  std::string layer_names, label;
  int64_t run_id = 0;   // the run that considered it
  bool in_plan = false; // a group of that run's latest plan
};

struct CandidateRef {
  int64_t id = 0;
  Strategy strategy = Strategy::kLayerwise;
  BrickShape brick;
  int threads = 0;
  std::string config() const; // "memoized 8x8 t256", "layerwise"
};

struct Spread {
  double median_ms = 0, p25_ms = 0, p75_ms = 0, min_ms = 0, max_ms = 0;
};

// The best configuration of one workload for one (model, batch, precision) and one source of
// numbers: the fastest `ok` measurement on a measuring target (source kMeasuredGpu /
// kMeasuredCpu, target its fingerprint), or the best feasible prediction of the most recently
// written model version for a GPU spec (source kPredicted, target "model:<spec>"). Every run
// contributes its groups' predictions for its GPU spec; a run on a measuring target also its
// measured workloads. Validations are never timings.
struct BestRow {
  Source source = Source::kPredicted;
  std::string model;
  int batch = 1;
  std::string precision;
  std::string target;   // the measuring target's fingerprint, or "model:<gpu spec>"
  std::string gpu_spec; // of the latest run with this workload
  int64_t workload_id = 0;
  std::string signature, description;
  int num_layers = 0;
  int64_t macs = 0;
  std::vector<GroupRef> groups; // where the workload occurs in the model (first at front)

  bool measured = false; // source != kPredicted
  CandidateRef candidate;
  double time_ms = 0;           // median measured, or predicted
  std::optional<Spread> spread; // measured only
  int64_t measurement_id = 0, run_id = 0;
  int num_samples = 0;
  int candidates_measured = 0;        // distinct candidates with an ok measurement
  std::optional<double> predicted_ms; // the chosen candidate's prediction, when there is one
  std::string model_version;          // of that prediction
  // The group's layers run layerwise, from the same source as time_ms (measured on the same
  // target, or predicted for the same spec): the workload's own layerwise candidate, else the
  // single-layer layerwise candidates of its layers added up (`layerwise_from` "layers");
  // unset when not every one of them has such a number.
  std::optional<double> layerwise_ms;
  std::string layerwise_from; // "candidate" | "layers" | ""
  // The same for the paper's own baseline ('paper-unfused': unfused cuDNN passes): predicted
  // from baseline_predictions, measured from the layerwise measurements' counter
  // "variant.paper_unfused_ms" (cuda backend).
  std::optional<double> paper_layerwise_ms;
  bool in_plan() const; // one of its groups is a group of its run's latest plan
};

std::vector<BestRow> best(TuningDb& db, const BestFilter& filter);

// ---- runs ------------------------------------------------------------------------------

// The status a run is shown with: the recorded one, except for a `running` run whose process
// is known to be gone (this host: its pid is gone or is another process now) → "killed", or
// whose last sign of life (heartbeat, else start) on another host, or by an unknown process,
// is older than the stale limit (2 minutes; a live tuner beats every 15 s) → "stale?". `now`
// and `last_seen` are ISO-8601 UTC stamps; `process_start` is the recorded start (runs
// table).
std::string shown_status(const std::string& status, const std::string& host, int64_t pid,
                         const std::string& process_start, const std::string& last_seen,
                         const std::string& now);

// One line of the list of runs.
struct RunRow {
  int64_t id = 0;
  std::string experiment, model;
  int batch = 1;
  std::string precision, target, started_at;
  std::string status; // shown_status(): running | complete | aborted | killed | stale?
  std::optional<std::string> ended_at; // unset while running (or when cut short)
  int64_t measurements = 0;
  std::string kind; // run_kind(): model only, measured (GPU / CPU), validated (CPU)
};

std::vector<RunRow> runs(TuningDb& db);

// ---- one run ---------------------------------------------------------------------------

struct RunSummary {
  int64_t id = 0;
  std::string experiment, experiment_path, config_json, model, precision, gpu_spec;
  int batch = 1;
  std::string target, backend, git_revision, started_at;
  std::optional<std::string> ended_at;
  std::string status; // as in RunRow
  std::string kind;   // as in RunRow
  bool fresh = false; // tuned with --fresh: it took nothing from the database
  // What the command line changed in the experiment (the config's "overrides": "gpu",
  // "precision", "batch", "input_size"), as "key value" texts; empty when nothing.
  std::vector<std::string> overrides;
  // The device calibration over the spec, as the config's "calibration" summarised it
  // (core/gpu_calibration.h); "" without one.
  std::string calibration;
};

// The best `ok` measurement of a workload among some measurements (of a run, on a target).
struct BestMeasurement {
  int64_t id = 0, run_id = 0;
  CandidateRef candidate;
  Spread spread;
  int num_samples = 0;
  std::optional<double> predicted_ms; // the candidate's prediction for the run's GPU spec
};

// A group of a run with what the run measured of its workload.
struct RunGroupRow {
  int first_layer = 0, last_layer = 0;
  std::string layer_names, label, workload; // workload: its description
  int64_t measurements = 0;                 // of the workload in this run, any status
  std::optional<BestMeasurement> best;      // in this run (a validation run: none)
  std::string validated;                    // a validation run: the status of its check, or ""
};

struct StatusCount {
  std::string status;
  int64_t count = 0;
};

// The failed measurements of a run with one (status, error) text.
struct ErrorRow {
  std::string status, error;
  int64_t count = 0;
  CandidateRef first_candidate; // of the first such measurement
};

struct PlanGroupDetails {
  int64_t idx = 0;
  int first_layer = 0, last_layer = 0;
  std::string layer_names; // of the run's group with these layers, "" when none
  CandidateRef candidate;
};

struct PlanDetails {
  int64_t id = 0;
  std::string kind, created_at;
  double predicted_ms = 0;
  std::optional<double> measured_ms;
  double layerwise_predicted_ms = 0;
  std::optional<double> layerwise_measured_ms;
  std::vector<PlanGroupDetails> groups;
};

// A run's configuration, groups, measurement counts per status, errors, and plans.
struct RunDetails {
  RunSummary run;
  std::vector<RunGroupRow> groups;   // by layer position
  std::vector<StatusCount> statuses; // by status name
  std::vector<ErrorRow> errors;      // by first occurrence
  std::vector<PlanDetails> plans;    // by id
};

// Throws UserError for an unknown run.
RunDetails run_details(TuningDb& db, int64_t run_id);

// ---- comparing two runs ----------------------------------------------------------------

// The measurements a run stands on: its own, and those it resumed: `ok` measurements of its
// workloads on its target that earlier runs (or tuners sharing the database) took before the
// run ended (its last heartbeat, or now, when it has not ended). A run tuned with --fresh, or
// any run when `own_only`, stands on its own measurements only.

// A workload measured (ok) in both runs, with each run's best measurement of it.
struct ComparedWorkload {
  std::string name;     // the layer names of its first group in run A, else its description
  BestMeasurement a, b; // a.run_id != A: resumed from that run
};

struct RunMeasurements {
  int64_t own = 0;     // ok measurements taken by the run
  int64_t resumed = 0; // ok measurements it resumed (0 when own_only or fresh)
};

struct Comparison {
  RunSummary a, b;
  bool own_only = false;
  RunMeasurements used_a, used_b;
  std::vector<ComparedWorkload> both; // in the order of their first group in run A
  int only_a = 0, only_b = 0;         // workloads measured ok in one run only
};

// Throws UserError for an unknown run and for a run without timings (model only, or a
// validation).
Comparison compare_runs(TuningDb& db, int64_t run_a, int64_t run_b, bool own_only = false);

// ---- predicted vs measured ---------------------------------------------------------------

// One measured candidate beside the model's prediction for its run's GPU spec.
struct AccuracyPoint {
  int64_t run_id = 0, measurement_id = 0;
  std::string group; // the layer names of the workload's first group in the run
  CandidateRef candidate;
  double predicted_ms = 0, measured_ms = 0;
  // Bytes, when the measurement counted them: on a GPU the DRAM counters
  // (dram__bytes_read.sum + dram__bytes_write.sum) against the predicted DRAM bytes; on the
  // CPU the executor's loads + stores against the predicted L1 bytes (the same count).
  std::optional<double> predicted_bytes, measured_bytes;
};

// The summary of one quantity: n points; relative error |predicted − measured| / measured
// (median and worst); `scale`, the median of measured / predicted, and the errors after
// multiplying every prediction by it (a model of another device than the measured one is
// judged on these and on the ranking); Spearman's rank correlation (unset below 2 points or
// with a constant side).
struct AccuracyStats {
  int n = 0;
  double median_error = 0, worst_error = 0;
  double scale = 1, median_scaled_error = 0, worst_scaled_error = 0;
  std::optional<double> spearman;
};

// The points of one (target, GPU spec, model version): comparable with each other.
struct AccuracySet {
  std::string target, gpu_spec, model_version;
  Source source = Source::kMeasuredCpu;
  std::string bytes_kind;            // "DRAM" or "L1 (loads + stores)"
  std::vector<AccuracyPoint> points; // by measurement id
  AccuracyStats time, bytes;
};

struct AccuracyFilter {
  std::optional<int64_t> run;
  std::string target; // a substring of the target fingerprint
};

// Every `ok` measurement (validations excluded) that has a feasible prediction for its run's
// GPU spec (the latest of its model version), in sets by target, spec and model version.
std::vector<AccuracySet> accuracy(TuningDb& db, const AccuracyFilter& filter);
AccuracyStats accuracy_stats(const std::vector<double>& predicted,
                             const std::vector<double>& measured);

// ---- export ----------------------------------------------------------------------------

// A value as SQLite stored it: NULL, integer, real or text.
using Cell = std::variant<std::nullptr_t, int64_t, double, std::string>;

// One measurement joined with its run, target, workload, candidate and prediction (or one
// prediction with its run, workload and candidate: export_predictions()).
struct ExportRow {
  std::vector<Cell> cells; // one per ExportTable::columns
  CandidateRef candidate;
  std::map<std::string, double> counters;
  std::vector<double> samples_ms; // filled only when asked for
};

// The measurements of one run, or all, ordered by id. Columns: measurement_id (first), run,
// target, workload, candidate (strategy .. threads), status, measurement_kind ('timing', or
// 'validation': a CPU check of a GPU plan's output, whose times are NULL and whose samples are
// not exported), times, created_at, then the prediction for the run's GPU spec (latest model
// version) as columns named kPredictionPrefix + its column name, all NULL when there is none.
struct ExportTable {
  std::vector<std::string> columns;
  std::vector<ExportRow> rows;
  std::set<std::string> counter_names; // of every exported measurement
};

inline constexpr const char* kPredictionPrefix = "pred_";

ExportTable export_measurements(TuningDb& db, std::optional<int64_t> run_id, bool with_samples);

// The model's predictions of one run, or of every run: each candidate of the run's workloads
// with a prediction for the run's GPU spec, one row per model version stored (predictions for
// other specs are left out), ordered by run, the workload's first group in the run, candidate
// id and model version. Columns: run, workload_id, signature, description, layers (the layer
// names of the workload's first group in the run), first_layer, last_layer, candidate_id,
// strategy .. threads, gpu_spec, model_version, feasible, reason, then every further column of
// the predictions table by its own name (time_ms .. atomics_conflict). No counters, no
// samples. Throws UserError for an unknown run.
ExportTable export_predictions(TuningDb& db, std::optional<int64_t> run_id);

} // namespace brickdl::query
