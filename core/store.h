#pragma once
// The SQLite tuning database (schema: core/store_schema.sql).
//
//   driver ──begin_run──► runs          candidates ◄── candidate(workload, config)
//      │                  workloads ◄── workload(signature)
//      ├─put_prediction─► predictions
//      ├─put_measurement► measurements + samples + counters   (one transaction each)
//      └─put_plan───────► plans + plan_groups
//   brickdl-query ──read-only──► the same tables
//
// WAL mode, busy timeout, every write committed when it arrives: a killed tuner loses at
// most the candidate in flight. Opening a corrupt, foreign (not brickdl) or newer-schema
// database throws UserError and changes nothing.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/measurer.h"

struct sqlite3;

namespace brickdl {
namespace detail {
class Statement;
} // namespace detail

inline constexpr int kStoreSchemaVersion = 1;

// The schema script (core/store_schema.sql, embedded at build time): the tables of the current
// schema version, every statement `CREATE ... IF NOT EXISTS`.
const char* store_schema_sql();

struct RunInfo {
  std::string experiment;
  std::string experiment_path;
  std::string config_json = "{}";
  std::string model;
  int batch = 1;
  std::string precision = "fp32";
  std::string gpu_spec;           // spec the model predicted for
  std::string target_fingerprint; // Measurer::target(), or "model:<gpu spec>" when none
  std::string backend = "none";   // cpu | cuda | none
  std::string git_revision;
};

struct WorkloadInfo {
  std::string signature; // canonical group signature (search/workload.h makes it)
  int num_layers = 1;
  std::string description;
  int64_t macs = 0;
};

// One row of `predictions` (model-agnostic so core does not depend on model/).
struct PredictionRow {
  bool feasible = true;
  std::string reason;
  double time_ms = 0, time_dram_ms = 0, time_l2_ms = 0, time_compute_ms = 0;
  double time_atomics_compulsory_ms = 0, time_atomics_conflict_ms = 0, time_other_ms = 0;
  double flops = 0, redundant_flops = 0;
  double l1_bytes = 0, l2_bytes = 0, dram_bytes = 0, dram_lower_bound = 0;
  double atomics_compulsory = 0, atomics_conflict = 0;
};

struct StoredMeasurement {
  int64_t id = 0;
  int64_t run_id = 0;
  MeasureResult result; // status, error, samples, summary, counters
};

struct PlanGroupRow {
  int64_t candidate_id = 0;
  int first_layer = 0, last_layer = 0;
};

struct PlanRow {
  int64_t run_id = 0;
  std::string kind = "predicted"; // predicted | measured
  std::string json;
  double predicted_ms = 0;
  std::optional<double> measured_ms;
  double layerwise_predicted_ms = 0;
  std::optional<double> layerwise_measured_ms;
  std::vector<PlanGroupRow> groups;
};

// One connection to a tuning database; use one TuningDb per thread or process (SQLite's file
// locks and the busy timeout arbitrate between them).
class TuningDb {
public:
  enum class Mode { kReadWrite, kReadOnly };
  static constexpr int kDefaultBusyTimeoutMs = 10000;
  // Creates the file (and schema) in read-write mode when absent. Throws UserError.
  // Read-write: an older schema is migrated in place (one transaction). Read-only: the file
  // is never written; an older schema is migrated in an in-memory copy.
  // `busy_timeout_ms`: how long a write waits for another connection's lock before failing.
  explicit TuningDb(const std::string& path, Mode mode = Mode::kReadWrite,
                    int busy_timeout_ms = kDefaultBusyTimeoutMs);
  ~TuningDb();
  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const;
  Mode mode() const { return mode_; }

  // The clock stamping runs, measurements and plans (ISO-8601 UTC text). Defaults to the
  // system clock with millisecond resolution; tests inject fixed times.
  void set_clock(std::function<std::string()> now_utc);
  std::string now() const { return clock_(); }

  // Runs `body` as one transaction: the writes inside it (which are otherwise committed one
  // by one) become visible together, or not at all when `body` throws. For batches, e.g. the
  // predictions of a whole search space.
  void in_transaction(const std::function<void()>& body);

  int64_t target_id(const std::string& fingerprint, const std::string& backend,
                    const std::string& description = "");
  int64_t begin_run(const RunInfo& info);
  void end_run(int64_t run_id, const std::string& status); // complete | aborted
  int64_t workload_id(const WorkloadInfo& w);              // get or insert
  void add_run_group(int64_t run_id, int64_t workload_id, int first_layer, int last_layer,
                     const std::string& layer_names, const std::string& label = "");
  // Get or insert (group ignored). A layerwise candidate is stored with bd = bh = bw = cb =
  // threads = 0: its brick and threads do not apply, so all of a workload's layerwise
  // candidates are one row.
  int64_t candidate_id(int64_t workload_id, const Candidate& c);
  void put_prediction(int64_t candidate_id, const std::string& gpu_spec,
                      const std::string& model_version, const PredictionRow& p);
  // The latest measurement of a candidate on a target (any run), for resume.
  std::optional<StoredMeasurement> find_measurement(int64_t candidate_id, int64_t target_id);
  // Inserts measurement + samples + counters in one transaction; returns its id.
  int64_t put_measurement(int64_t candidate_id, int64_t target_id, int64_t run_id,
                          const MeasureResult& r);
  int64_t put_plan(const PlanRow& plan);

  sqlite3* handle() { return db_; } // for read-only queries (brickdl-query)

private:
  class CachedStatement;
  void open_schema(int busy_timeout_ms);
  void require_writable(const char* what) const;
  // The prepared statement for `sql`, prepared once per connection (preparing costs about as
  // much as running these small statements); reset when the returned lease ends.
  CachedStatement cached(const std::string& sql, const char* what);

  std::string path_;
  Mode mode_;
  sqlite3* db_ = nullptr;
  int transaction_depth_ = 0;
  std::function<std::string()> clock_;
  std::map<std::string, std::unique_ptr<detail::Statement>> statements_;
};

} // namespace brickdl
