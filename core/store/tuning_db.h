#pragma once
// The SQLite tuning database: brickdl's store module (core/store/, target brickdl::store).
// Nothing outside the module sees SQLite or a connection; callers use TuningDb's typed
// methods, the read queries of queries.h and the merge of merge.h.
//
//   schema.sql ──CMake: embedded + its version──► detail/schema: create, classify, migrate
//                                                          │
//   tuning_db.h  TuningDb ◄── opens through ───────────────┘
//     │  writes (runs, workloads, candidates, predictions, measurements, plans) and the
//     │  tuner's look-ups (find_measurement, find_measurement_on_other_targets)
//     ├── queries.h   brickdl-query's reads ──► typed rows (BestRow, RunRow, RunDetails,
//     │                                          Comparison, ExportTable)
//     │                 └── print.h   rows ──► tables, CSV, JSON (no SQL, no TuningDb)
//     └── merge.h     copies databases into one
//   detail/sqlite.h  checked SQLite calls; detail/access.h  the connection, for queries/merge
//
// What the tuner writes:
//
//   driver ──begin_run──► runs          candidates ◄── candidate(workload, config)
//      │                  workloads ◄── workload(signature)
//      ├─put_prediction─► predictions (put_baseline_prediction ─► baseline_predictions)
//      ├─put_measurement► measurements + samples + counters   (one transaction each)
//      └─put_plan───────► plans + plan_groups
//   brickdl-query ──read-only──► the same tables
//
// WAL mode, busy timeout, every write committed when it arrives: a killed tuner loses at
// most the candidate in flight. Opening a corrupt, foreign (not brickdl) or newer-schema
// database throws UserError and changes nothing; a database opened for writing passes
// SQLite's integrity check first, so a damaged file is never written into.
//
// Runs record who runs them (host, pid, process start, heartbeat: detail/process.h), so a
// run whose process is gone reads `killed`. Tuners sharing a database claim a candidate
// before measuring it (claim()): a candidate claimed by another live run is not measured
// again; the claim of a dead run is taken over.
//
// Read-only opens need no write permission: a database in a read-only folder or mount is
// read as it is (SQLite's immutable mode) unless its write-ahead log holds data, which SQLite
// cannot read there; that is refused with a message saying so.
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

#ifndef BRICKDL_STORE_SCHEMA_VERSION
#error "BRICKDL_STORE_SCHEMA_VERSION is set by core/store/CMakeLists.txt: link brickdl::store"
#endif

namespace brickdl {
namespace store::detail {
class Statement;
class StoreAccess;
} // namespace store::detail

// The schema version this build writes and reads up to: stated once, in core/store/schema.sql
// (its meta statement), and read from there by CMake.
inline constexpr int kStoreSchemaVersion = BRICKDL_STORE_SCHEMA_VERSION;

// The schema script (core/store/schema.sql, embedded at build time): the tables of the current
// schema version, every statement `CREATE ... IF NOT EXISTS`, and the meta rows.
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
  std::string signature; // canonical group signature (core/group.h makes it)
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

// A measurement taken on another target than the one asked about, with that target.
struct OtherTargetMeasurement {
  StoredMeasurement measurement;
  std::string target_fingerprint;
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

// What claim() found (see TuningDb::claim).
struct ClaimResult {
  enum Outcome {
    kClaimed,  // the candidate is this run's to measure (a new claim, its own, or taken over)
    kMeasured, // a measurement newer than the one asked about exists: use it
    kHeld,     // another live run holds it: come back later
  };
  Outcome outcome = kClaimed;
  int64_t holder_run_id = 0; // kHeld: the run holding it; kClaimed: the run it was taken from
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
  // A second read-write connection to this database, for another thread (RunHeartbeat): the
  // file was checked when this one opened, so it is opened without checks.
  std::unique_ptr<TuningDb> another_connection(int busy_timeout_ms) const;
  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const;
  // SQLite's integrity check (PRAGMA integrity_check; quick_check for files over
  // kFullCheckBytes, which skips comparing indexes with their tables). Throws UserError naming
  // the file and what SQLite reported. Read-write opens run it before writing anything;
  // merge runs it on every input.
  void check_integrity();
  // What the check reports (empty: intact), at most kProblemsShown + 1 lines; `check` is set
  // to the pragma's name.
  std::vector<std::string> integrity_problems(std::string* check = nullptr);
  static constexpr int64_t kFullCheckBytes = int64_t{64} << 20;
  static constexpr size_t kProblemsShown = 4;
  // Whether this read-only connection reads the file in SQLite's immutable mode (the folder
  // or mount is read-only: no -shm file can be made).
  bool immutable() const { return immutable_; }
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
  // Records this process (host, pid, start) as the run's owner. Runs of this host whose
  // process is gone are marked `killed` first (their claims released).
  int64_t begin_run(const RunInfo& info);
  void end_run(int64_t run_id, const std::string& status); // complete | aborted
  // Refreshes the run's heartbeat_at (its sign of life for tuners on other hosts); a run that
  // has ended is left as it is. RunHeartbeat calls it periodically on its own connection.
  void heartbeat(int64_t run_id);
  // Claims (candidate, target) for `run_id` before measuring it, in one write transaction:
  // kMeasured when a measurement of it on the target with an id above `measured_after_id`
  // exists; kHeld when another run holds the claim and is live (this host: its process
  // runs; another host: a heartbeat within the stale limit); else kClaimed (a dead holder's
  // claim is taken over, and a holder of this host whose process is gone is marked killed).
  // The claim goes when the run records the measurement or ends.
  ClaimResult claim(int64_t candidate_id, int64_t target_id, int64_t run_id,
                    int64_t measured_after_id);
  // The id of the newest measurement in the database (0 when none).
  int64_t latest_measurement_id();
  // Marks a run `aborted` (now) if it is still `running`; a run that has ended stays as it
  // is. Returns whether the run changed. For an interrupted tuner, through a connection of
  // its own while another may be writing; throws UserError when the database refuses (e.g.
  // locked past the busy timeout), so the caller decides what to report.
  bool mark_run_aborted(int64_t run_id);
  int64_t workload_id(const WorkloadInfo& w); // get or insert
  void add_run_group(int64_t run_id, int64_t workload_id, int first_layer, int last_layer,
                     const std::string& layer_names, const std::string& label = "");
  // Get or insert (group ignored); candidates differing only in the batch block (brick.nb)
  // are different rows. A layerwise candidate is stored with bd = bh = bw = cb = threads = 0
  // and bn = 1: its brick and threads do not apply, so all of a workload's layerwise
  // candidates are one row.
  int64_t candidate_id(int64_t workload_id, const Candidate& c);
  void put_prediction(int64_t candidate_id, const std::string& gpu_spec,
                      const std::string& model_version, const PredictionRow& p);
  // The model's prediction of another layerwise baseline of a workload ('paper-unfused'),
  // replacing one of the same (workload, spec, version, baseline); `launches` kernels and
  // library calls per run of the group.
  void put_baseline_prediction(int64_t workload_id, const std::string& gpu_spec,
                               const std::string& model_version, const std::string& baseline,
                               const PredictionRow& p, int launches);
  // The latest measurement of a candidate on a target (any run), for resume.
  std::optional<StoredMeasurement> find_measurement(int64_t candidate_id, int64_t target_id);
  // The latest measurement of a candidate on any target but `own_target_id`, with the
  // fingerprint of the target it was taken on (resuming from other targets).
  std::optional<OtherTargetMeasurement> find_measurement_on_other_targets(int64_t candidate_id,
                                                                          int64_t own_target_id);
  // Inserts measurement + samples + counters in one transaction; returns its id.
  int64_t put_measurement(int64_t candidate_id, int64_t target_id, int64_t run_id,
                          const MeasureResult& r);
  int64_t put_plan(const PlanRow& plan);

private:
  friend class store::detail::StoreAccess; // the store's queries and merge read db_
  struct Unchecked {};
  TuningDb(const std::string& path, int busy_timeout_ms, Unchecked);
  class CachedStatement;
  bool open_file(bool existed); // true when it created the file
  void open_immutable();
  void close_connection() noexcept;
  void open_schema(int busy_timeout_ms);
  struct RunningRun;
  // The runs still `running` (only the run `only`, when set).
  std::vector<RunningRun> running_runs(std::optional<int64_t> only);
  void mark_killed(int64_t run_id); // a running run whose process is gone; its claims go
  void mark_dead_runs_killed(const std::string& now); // every such run of this host
  void release_claims(int64_t run_id);
  void open_read_only(int version);
  void open_read_write();
  std::string switch_to_wal(); // the journal mode it ends in
  void require_writable(const char* what) const;
  // The prepared statement for `sql`, prepared once per connection (preparing costs about as
  // much as running these small statements); reset when the returned lease ends.
  CachedStatement cached(const std::string& sql, const char* what);
  // The id `find_sql` selects with the tuple `keys`, after inserting the row with
  // `insert_sql` and the tuple `row` (ON CONFLICT DO NOTHING: another writer may have
  // inserted it) when absent. `what` names the row in errors ("target").
  template <typename Keys, typename Row>
  int64_t get_or_insert(const char* find_sql, const char* insert_sql, const char* what,
                        const Keys& keys, const Row& row);
  // The measurement row `st` is on (columns: id, run_id, status, error, median_ms, min_ms,
  // max_ms, p25_ms, p75_ms, max_rel_error), with its samples and counters.
  StoredMeasurement read_measurement(const store::detail::Statement& st);

  std::string path_;
  Mode mode_;
  sqlite3* db_ = nullptr;
  int transaction_depth_ = 0;
  bool immutable_ = false;
  int busy_ms_ = kDefaultBusyTimeoutMs;
  std::function<std::string()> clock_;
  std::map<std::string, std::unique_ptr<store::detail::Statement>> statements_;
};

} // namespace brickdl
