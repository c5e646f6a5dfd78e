#pragma once
// Reading a tuning database: the queries behind `brickdl-query`. Each returns typed rows; the
// SQL stays in queries.cpp and the text (tables, CSV, JSON) in print.h.
//
//   brickdl-query ──► TuningDb (read-only) ──► best()                ──► BestRow     ─┐
//                                         ├──► runs()                ──► RunRow       │
//                                         ├──► run_details()         ──► RunDetails   ├─► print.h
//                                         ├──► compare_runs()        ──► Comparison   │
//                                         └──► export_measurements() ──► ExportTable ─┘
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

// Filters of `best`; empty / unset means any.
struct BestFilter {
  std::string model;
  std::string gpu;       // the GPU spec the runs predicted for (case-insensitive)
  std::string precision; // fp32 | fp16 | bf16
  std::optional<int> batch;
  std::string target; // a substring of the target fingerprint
};

struct GroupRef {
  int first_layer = 0, last_layer = 0;
  std::string layer_names, label;
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

// The best configuration of one workload for one (model, batch, precision, target): the
// fastest `ok` measurement on that target, or, where none exists, the best feasible
// prediction (of the most recently written model version) for the runs' GPU spec.
struct BestRow {
  std::string model;
  int batch = 1;
  std::string precision;
  std::string target;   // fingerprint
  std::string gpu_spec; // of the latest run with this workload
  int64_t workload_id = 0;
  std::string signature, description;
  int num_layers = 0;
  int64_t macs = 0;
  std::vector<GroupRef> groups; // where the workload occurs in the model (first at front)

  bool measured = false; // false: `predicted`
  CandidateRef candidate;
  double time_ms = 0;           // median measured, or predicted
  std::optional<Spread> spread; // measured only
  int64_t measurement_id = 0, run_id = 0;
  int num_samples = 0;
  int candidates_measured = 0;        // distinct candidates with an ok measurement
  std::optional<double> predicted_ms; // the chosen candidate's prediction, when there is one
  std::string model_version;          // of that prediction
  // The layerwise baseline of the workload from the same source (measured or predicted).
  std::optional<double> layerwise_ms;
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
};

// The best `ok` measurement of a workload among some measurements (of a run, on a target).
struct BestMeasurement {
  int64_t id = 0, run_id = 0;
  CandidateRef candidate;
  Spread spread;
  int num_samples = 0;
};

// A group of a run with what the run measured of its workload.
struct RunGroupRow {
  int first_layer = 0, last_layer = 0;
  std::string layer_names, label, workload; // workload: its description
  int64_t measurements = 0;                 // of the workload in this run, any status
  std::optional<BestMeasurement> best;      // in this run
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

// A workload measured (ok) in both runs, with each run's best measurement of it.
struct ComparedWorkload {
  std::string name; // the layer names of its first group in run A, else its description
  BestMeasurement a, b;
};

struct Comparison {
  RunSummary a, b;
  std::vector<ComparedWorkload> both; // in the order of their first group in run A
  int only_a = 0, only_b = 0;         // workloads measured ok in one run only
};

// Throws UserError for an unknown run.
Comparison compare_runs(TuningDb& db, int64_t run_a, int64_t run_b);

// ---- export ----------------------------------------------------------------------------

// A value as SQLite stored it: NULL, integer, real or text.
using Cell = std::variant<std::nullptr_t, int64_t, double, std::string>;

// One measurement joined with its run, target, workload, candidate and prediction.
struct ExportRow {
  std::vector<Cell> cells; // one per ExportTable::columns
  CandidateRef candidate;
  std::map<std::string, double> counters;
  std::vector<double> samples_ms; // filled only when asked for
};

// The measurements of one run, or all, ordered by id. Columns: measurement_id (first), run,
// target, workload, candidate (strategy .. threads), status and times, created_at, then the
// prediction for the run's GPU spec (latest model version) as columns named kPredictionPrefix
// + its column name, all NULL when there is none.
struct ExportTable {
  std::vector<std::string> columns;
  std::vector<ExportRow> rows;
  std::set<std::string> counter_names; // of every exported measurement
};

inline constexpr const char* kPredictionPrefix = "pred_";

ExportTable export_measurements(TuningDb& db, std::optional<int64_t> run_id, bool with_samples);

} // namespace brickdl::query
