#include "core/store/tuning_db.h"

#include <sqlite3.h>
#include <tuple>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "core/store/detail/schema.h"
#include "core/store/detail/sqlite.h"
#include "generated/store_schema_sql.h"

namespace brickdl {

using store::detail::check_sqlite;
using store::detail::exec_sql;
using store::detail::Statement;
using store::detail::Transaction;

const char* store_schema_sql() {
  return store::detail::kSchemaSql;
}

namespace {

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm t{};
  gmtime_r(&secs, &t);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", t.tm_year + 1900, t.tm_mon + 1,
                     t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ms % 1000);
}

// A file this constructor created (with its WAL side files) goes again when opening fails.
void remove_created(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    std::filesystem::remove(path + suffix, ec);
}

std::optional<int64_t> lookup_id(Statement& st) {
  if (!st.step())
    return std::nullopt;
  return st.int64(0);
}

std::optional<double> if_measured(bool measured, double v) {
  return measured ? std::optional<double>(v) : std::nullopt;
}

} // namespace

TuningDb::TuningDb(const std::string& path, Mode mode, int busy_timeout_ms)
    : path_(path), mode_(mode), clock_(utc_now) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool existed = fs::exists(path, ec);
  if (existed && fs::is_directory(path, ec)) {
    throw UserError("'" + path + "' is a folder; pass the path of a tuning database file");
  }
  if (mode == Mode::kReadOnly && !existed) {
    throw UserError("no tuning database at '" + path +
                    "'; pass the path of an existing database (brickdl-tune creates one)");
  }
  // Read-only mode still opens a writable file read-write, with writes disabled (PRAGMA
  // query_only): a read-only SQLite connection to a WAL database leaves its -wal and -shm side
  // files behind on close, a read-write one removes them when it is the last connection.
  const bool writable = existed && ::access(path.c_str(), W_OK) == 0;
  const int flags = mode == Mode::kReadOnly
                        ? (writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY)
                        : SQLITE_OPEN_READWRITE | (existed ? 0 : SQLITE_OPEN_CREATE);
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  try {
    check_sqlite(db_, rc, "opening it");
    open_schema(busy_timeout_ms);
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    if (!existed)
      remove_created(path);
    throw;
  }
}

void TuningDb::open_schema(int busy_timeout_ms) {
  check_sqlite(db_, sqlite3_busy_timeout(db_, busy_timeout_ms), "setting the busy timeout");
  if (mode_ == Mode::kReadOnly)
    exec_sql(db_, "PRAGMA query_only = 1", "disabling writes");
  if (mode_ == Mode::kReadWrite && sqlite3_db_readonly(db_, "main") == 1) {
    throw UserError("'" + path_ +
                    "' is not writable; check its permissions, or read it with brickdl-query");
  }
  // Everything up to here only reads: a foreign, newer or garbage file stays untouched.
  const int version = store::detail::classify(db_, path_);
  if (mode_ == Mode::kReadOnly) {
    open_read_only(version);
  } else {
    open_read_write();
  }
}

void TuningDb::open_read_only(int version) {
  if (version < 0) {
    throw UserError("'" + path_ +
                    "' is an empty SQLite file, not a brickdl tuning database; pass the "
                    "path of a database brickdl-tune wrote");
  }
  if (version < kStoreSchemaVersion) {
    // Read the old file as it is: migrate a private in-memory copy.
    sqlite3* mem = store::detail::migrated_copy(db_, version);
    sqlite3_close(db_);
    db_ = mem;
  }
  store::detail::verify_schema(db_, path_);
}

void TuningDb::open_read_write() {
  {
    Statement st(db_, "PRAGMA journal_mode = WAL", "switching to WAL mode");
    if (!st.step() || st.text(0) != "wal") {
      throw UserError("'" + path_ + "' cannot use SQLite's WAL mode (journal mode '" + st.text(0) +
                      "'); put the database on a local file system");
    }
  }
  // In WAL mode, NORMAL keeps every committed transaction across a killed process (only a
  // power loss may drop the last ones) and saves an fsync per result.
  exec_sql(db_, "PRAGMA synchronous = NORMAL", "setting the synchronous mode");
  {
    // Under the write lock: two tuners creating the same new file do not both create it.
    Transaction tx(db_, &transaction_depth_, "preparing the schema");
    const int locked_version = store::detail::classify(db_, path_);
    if (locked_version < 0) {
      store::detail::create_schema(db_);
    } else if (locked_version < kStoreSchemaVersion) {
      store::detail::migrate(db_, locked_version);
    }
    store::detail::verify_schema(db_, path_);
    tx.commit();
  }
  exec_sql(db_, "PRAGMA foreign_keys = ON", "enabling foreign keys");
}

TuningDb::~TuningDb() {
  statements_.clear(); // finalized before the connection closes
  sqlite3_close(db_);
}

// A cached statement in use; resetting it when the use ends also ends any read it holds open
// (a statement left on a row keeps its read snapshot, which would pin the WAL).
class TuningDb::CachedStatement {
public:
  explicit CachedStatement(Statement& st) : st_(st) {}
  ~CachedStatement() { st_.rewind(); }
  CachedStatement(const CachedStatement&) = delete;
  CachedStatement& operator=(const CachedStatement&) = delete;
  Statement* operator->() { return &st_; }
  Statement& operator*() { return st_; }

private:
  Statement& st_;
};

TuningDb::CachedStatement TuningDb::cached(const std::string& sql, const char* what) {
  auto it = statements_.find(sql);
  if (it == statements_.end())
    it = statements_.emplace(sql, std::make_unique<Statement>(db_, sql, what)).first;
  return CachedStatement(*it->second);
}

template <typename Keys, typename Row>
int64_t TuningDb::get_or_insert(const char* find_sql, const char* insert_sql, const char* what,
                                const Keys& keys, const Row& row) {
  const std::string look_up = std::string("looking up a ") + what;
  const std::string record = std::string("recording a ") + what;
  auto find = cached(find_sql, look_up.c_str());
  const auto bind_keys = [&] { std::apply([&](const auto&... k) { find->bind_all(k...); }, keys); };
  bind_keys();
  if (auto id = lookup_id(*find))
    return *id;
  require_writable(record.c_str());
  Transaction tx(db_, &transaction_depth_, record.c_str());
  auto insert = cached(insert_sql, record.c_str());
  std::apply([&](const auto&... v) { insert->bind_all(v...).run(); }, row);
  find->reset();
  bind_keys();
  const auto id = lookup_id(*find);
  BRICKDL_CHECK(id.has_value(), "the " << what << " just inserted is not found");
  tx.commit();
  return *id;
}

int TuningDb::schema_version() const {
  Statement st(db_, "SELECT value FROM meta WHERE key = 'schema_version'",
               "reading the schema version");
  BRICKDL_CHECK(st.step(), "meta has no schema_version");
  return std::stoi(st.text(0));
}

void TuningDb::set_clock(std::function<std::string()> now_utc) {
  BRICKDL_CHECK(now_utc != nullptr);
  clock_ = std::move(now_utc);
}

void TuningDb::require_writable(const char* what) const {
  BRICKDL_CHECK(mode_ == Mode::kReadWrite,
                "'" << path_ << "' was opened read-only; cannot do " << what);
}

void TuningDb::in_transaction(const std::function<void()>& body) {
  require_writable("a write transaction");
  Transaction tx(db_, &transaction_depth_, "writing a batch");
  body();
  tx.commit();
}

int64_t TuningDb::target_id(const std::string& fingerprint, const std::string& backend,
                            const std::string& description) {
  return get_or_insert(
      "SELECT id FROM targets WHERE fingerprint = ?1",
      "INSERT INTO targets (fingerprint, backend, description) VALUES (?1, ?2, ?3) "
      "ON CONFLICT (fingerprint) DO NOTHING",
      "target", std::forward_as_tuple(fingerprint),
      std::forward_as_tuple(fingerprint, backend, description));
}

int64_t TuningDb::begin_run(const RunInfo& info) {
  require_writable("starting a run");
  Transaction tx(db_, &transaction_depth_, "starting a run");
  const int64_t target = target_id(info.target_fingerprint, info.backend);
  Statement(db_,
            "INSERT INTO runs (experiment, experiment_path, config_json, model, batch, "
            "precision, gpu_spec, target_id, git_revision, started_at, status) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'running')",
            "starting a run")
      .bind_all(info.experiment, info.experiment_path, info.config_json, info.model, info.batch,
                info.precision, info.gpu_spec, target, info.git_revision, clock_())
      .run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

void TuningDb::end_run(int64_t run_id, const std::string& status) {
  require_writable("ending a run");
  BRICKDL_CHECK(status == "complete" || status == "aborted",
                "a run ends 'complete' or 'aborted', not '" << status << "'");
  Transaction tx(db_, &transaction_depth_, "ending a run");
  Statement(db_, "UPDATE runs SET status = ?1, ended_at = ?2 WHERE id = ?3", "ending a run")
      .bind_all(status, clock_(), run_id)
      .run();
  BRICKDL_CHECK(sqlite3_changes(db_) == 1, "no run " << run_id);
  tx.commit();
}

bool TuningDb::mark_run_aborted(int64_t run_id) {
  require_writable("marking a run aborted");
  Transaction tx(db_, &transaction_depth_, "marking a run aborted");
  Statement(db_,
            "UPDATE runs SET status = 'aborted', ended_at = ?1 WHERE id = ?2 AND "
            "status = 'running'",
            "marking a run aborted")
      .bind_all(clock_(), run_id)
      .run();
  const bool changed = sqlite3_changes(db_) == 1;
  tx.commit();
  return changed;
}

int64_t TuningDb::workload_id(const WorkloadInfo& w) {
  return get_or_insert("SELECT id FROM workloads WHERE signature = ?1",
                       "INSERT INTO workloads (signature, num_layers, description, macs) "
                       "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (signature) DO NOTHING",
                       "workload", std::forward_as_tuple(w.signature),
                       std::forward_as_tuple(w.signature, w.num_layers, w.description, w.macs));
}

void TuningDb::add_run_group(int64_t run_id, int64_t workload_id, int first_layer, int last_layer,
                             const std::string& layer_names, const std::string& label) {
  require_writable("recording a group");
  Transaction tx(db_, &transaction_depth_, "recording a group");
  cached("INSERT INTO run_groups (run_id, workload_id, first_layer, last_layer, layer_names, "
         "label) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
         "ON CONFLICT (run_id, first_layer, last_layer) DO NOTHING",
         "recording a group")
      ->bind_all(run_id, workload_id, first_layer, last_layer, layer_names, label)
      .run();
  tx.commit();
}

int64_t TuningDb::candidate_id(int64_t workload_id, const Candidate& c) {
  const bool layerwise = c.strategy == Strategy::kLayerwise;
  const int bd = layerwise ? 0 : c.brick.d, bh = layerwise ? 0 : c.brick.h;
  const int bw = layerwise ? 0 : c.brick.w, cb = layerwise ? 0 : c.brick.cb;
  const int bn = layerwise ? 1 : c.brick.nb, threads = layerwise ? 0 : c.threads;
  const char* strategy = strategy_name(c.strategy);
  return get_or_insert(
      "SELECT id FROM candidates WHERE workload_id = ?1 AND strategy = ?2 AND "
      "bd = ?3 AND bh = ?4 AND bw = ?5 AND cb = ?6 AND bn = ?7 AND threads = ?8",
      "INSERT INTO candidates (workload_id, strategy, bd, bh, bw, cb, bn, threads) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING",
      "candidate", std::tie(workload_id, strategy, bd, bh, bw, cb, bn, threads),
      std::tie(workload_id, strategy, bd, bh, bw, cb, bn, threads));
}

void TuningDb::put_prediction(int64_t candidate_id, const std::string& gpu_spec,
                              const std::string& model_version, const PredictionRow& p) {
  require_writable("recording a prediction");
  Transaction tx(db_, &transaction_depth_, "recording a prediction");
  // A re-run of the same model version on the same spec replaces its earlier prediction.
  cached("INSERT OR REPLACE INTO predictions (candidate_id, gpu_spec, model_version, "
         "feasible, reason, time_ms, time_dram_ms, time_l2_ms, time_compute_ms, "
         "time_atomics_compulsory_ms, time_atomics_conflict_ms, time_other_ms, flops, "
         "redundant_flops, l1_bytes, l2_bytes, dram_bytes, dram_lower_bound, "
         "atomics_compulsory, atomics_conflict) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
         "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
         "recording a prediction")
      ->bind_all(candidate_id, gpu_spec, model_version, p.feasible ? 1 : 0, p.reason, p.time_ms,
                 p.time_dram_ms, p.time_l2_ms, p.time_compute_ms, p.time_atomics_compulsory_ms,
                 p.time_atomics_conflict_ms, p.time_other_ms, p.flops, p.redundant_flops,
                 p.l1_bytes, p.l2_bytes, p.dram_bytes, p.dram_lower_bound, p.atomics_compulsory,
                 p.atomics_conflict)
      .run();
  tx.commit();
}

// The columns read_measurement() expects, from `measurements m`.
constexpr const char* kMeasurementCols = "m.id, m.run_id, m.status, m.error, m.median_ms, "
                                         "m.min_ms, m.max_ms, m.p25_ms, m.p75_ms, m.max_rel_error";

StoredMeasurement TuningDb::read_measurement(const Statement& st) {
  StoredMeasurement m;
  m.id = st.int64(0);
  m.run_id = st.int64(1);
  MeasureResult& r = m.result;
  BRICKDL_CHECK(parse_measure_status(st.text(2), &r.status), "bad status " << st.text(2));
  r.error = st.text(3);
  r.median_ms = st.optional_real(4).value_or(0);
  r.min_ms = st.optional_real(5).value_or(0);
  r.max_ms = st.optional_real(6).value_or(0);
  r.p25_ms = st.optional_real(7).value_or(0);
  r.p75_ms = st.optional_real(8).value_or(0);
  r.max_rel_error = st.optional_real(9).value_or(0);

  auto samples = cached("SELECT time_ms FROM samples WHERE measurement_id = ?1 ORDER BY idx",
                        "reading samples");
  samples->bind_all(m.id);
  while (samples->step())
    r.samples_ms.push_back(samples->real(0));
  auto counters =
      cached("SELECT name, value FROM counters WHERE measurement_id = ?1", "reading counters");
  counters->bind_all(m.id);
  while (counters->step())
    r.counters[counters->text(0)] = counters->real(1);
  return m;
}

std::optional<StoredMeasurement> TuningDb::find_measurement(int64_t candidate_id,
                                                            int64_t target_id) {
  static const std::string sql =
      fmt::format("SELECT {} FROM measurements m WHERE m.candidate_id = ?1 AND m.target_id = ?2 "
                  "ORDER BY m.id DESC LIMIT 1",
                  kMeasurementCols);
  auto st = cached(sql, "looking up a measurement");
  st->bind_all(candidate_id, target_id);
  if (!st->step())
    return std::nullopt;
  return read_measurement(*st);
}

std::optional<OtherTargetMeasurement>
TuningDb::find_measurement_on_other_targets(int64_t candidate_id, int64_t own_target_id) {
  static const std::string sql =
      fmt::format("SELECT {}, t.fingerprint FROM measurements m JOIN targets t ON t.id = "
                  "m.target_id WHERE m.candidate_id = ?1 AND m.target_id <> ?2 "
                  "ORDER BY m.id DESC LIMIT 1",
                  kMeasurementCols);
  auto st = cached(sql, "looking up a measurement on other targets");
  st->bind_all(candidate_id, own_target_id);
  if (!st->step())
    return std::nullopt;
  return OtherTargetMeasurement{read_measurement(*st), st->text(10)};
}

int64_t TuningDb::put_measurement(int64_t candidate_id, int64_t target_id, int64_t run_id,
                                  const MeasureResult& r) {
  require_writable("recording a measurement");
  Transaction tx(db_, &transaction_depth_, "recording a measurement");
  // Times exist only when something was timed; a validation error only when the output was
  // compared with the reference (ok or wrong_result).
  const bool timed = !r.samples_ms.empty();
  const bool validated = r.status == MeasureStatus::kOk || r.status == MeasureStatus::kWrongResult;
  cached("INSERT INTO measurements (candidate_id, target_id, run_id, status, error, "
         "median_ms, min_ms, max_ms, p25_ms, p75_ms, max_rel_error, created_at) "
         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
         "recording a measurement")
      ->bind_all(candidate_id, target_id, run_id, measure_status_name(r.status), r.error,
                 if_measured(timed, r.median_ms), if_measured(timed, r.min_ms),
                 if_measured(timed, r.max_ms), if_measured(timed, r.p25_ms),
                 if_measured(timed, r.p75_ms), if_measured(validated, r.max_rel_error), clock_())
      .run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  auto sample = cached("INSERT INTO samples (measurement_id, idx, time_ms) VALUES (?1, ?2, ?3)",
                       "recording samples");
  for (size_t i = 0; i < r.samples_ms.size(); ++i) {
    sample->bind_all(id, static_cast<int64_t>(i), r.samples_ms[i]).run();
    sample->reset();
  }
  auto counter = cached("INSERT INTO counters (measurement_id, name, value) VALUES (?1, ?2, ?3)",
                        "recording counters");
  for (const auto& [name, value] : r.counters) {
    counter->bind_all(id, name, value).run();
    counter->reset();
  }
  tx.commit();
  return id;
}

int64_t TuningDb::put_plan(const PlanRow& plan) {
  require_writable("recording a plan");
  BRICKDL_CHECK(plan.kind == "predicted" || plan.kind == "measured",
                "plan kind '" << plan.kind << "'");
  Transaction tx(db_, &transaction_depth_, "recording a plan");
  Statement(db_,
            "INSERT INTO plans (run_id, kind, json, predicted_ms, measured_ms, "
            "layerwise_predicted_ms, layerwise_measured_ms, created_at) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            "recording a plan")
      .bind_all(plan.run_id, plan.kind, plan.json, plan.predicted_ms, plan.measured_ms,
                plan.layerwise_predicted_ms, plan.layerwise_measured_ms, clock_())
      .run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  Statement group(db_,
                  "INSERT INTO plan_groups (plan_id, idx, candidate_id, first_layer, "
                  "last_layer) VALUES (?1, ?2, ?3, ?4, ?5)",
                  "recording a plan's groups");
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const PlanGroupRow& g = plan.groups[i];
    group.bind_all(id, static_cast<int64_t>(i), g.candidate_id, g.first_layer, g.last_layer).run();
    group.reset();
  }
  tx.commit();
  return id;
}

} // namespace brickdl
