#pragma once
// Reading a tuning database: the queries behind `brickdl-query`.
//
//   brickdl-query ──► TuningDb (read-only) ──► best()  ──► BestRow ──► print_best | best_json
//                                         ├──► print_runs / print_run / print_comparison
//                                         └──► export_measurements (CSV | JSON)
//
// Every function here only reads, so a database copied from another machine (or an older
// schema, migrated in memory by TuningDb) works the same. Output is deterministic for a given
// database: rows are ordered by ids and layer positions, numbers printed with fixed formats.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/store.h"

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
void print_best(const std::vector<BestRow>& rows, std::ostream& os);
nlohmann::ordered_json best_json(const std::vector<BestRow>& rows);

// One line per run: id, experiment, model, batch, precision, target, status, times, #meas.
void print_runs(TuningDb& db, std::ostream& os);
// A run's configuration, groups, measurement status counts and errors, and plans.
// Throws UserError for an unknown run.
void print_run(TuningDb& db, int64_t run_id, std::ostream& os);
// Per workload measured (ok) in both runs: each run's best candidate with its median and
// spread, and the ratio B/A of the medians. Throws UserError for an unknown run.
void print_comparison(TuningDb& db, int64_t run_a, int64_t run_b, std::ostream& os);

enum class ExportFormat { kCsv, kJson };
// One row per measurement (of one run, or all) joined with its candidate, workload, run,
// target, the prediction for the run's GPU spec (latest model version) and its counters
// (CSV: one `counter.<name>` column each; JSON: a `counters` object, plus `samples_ms`).
void export_measurements(TuningDb& db, ExportFormat format, std::optional<int64_t> run_id,
                         std::ostream& os);

} // namespace brickdl::query
