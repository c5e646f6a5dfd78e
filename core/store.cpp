#include "core/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <set>

#include <fmt/format.h>

#include "core/detail/sqlite.h"
#include "core/error.h"
#include "generated/store_schema_sql.h"

namespace brickdl {

using detail::check_sqlite;
using detail::exec_sql;
using detail::Statement;
using detail::Transaction;

const char* store_schema_sql() {
  return detail::kStoreSchemaSql;
}

namespace {

constexpr const char* kApplication = "brickdl";

// Forward migrations: step i turns a database of schema version i into version i + 1. The
// schema script always describes the newest version (fresh databases are created from it);
// a step is the delta from its predecessor, so older databases end up with the same tables
// and columns (checked by verify_schema after migrating).
struct Migration {
  int from_version;
  const char* what;
  const char* sql;
};
constexpr Migration kMigrations[] = {
    // Version 1 is the first released schema. Version 0 is a hypothetical predecessor kept
    // to exercise the mechanism: it lacked the validation error of each measurement.
    {0, "adding measurements.max_rel_error",
     "ALTER TABLE measurements ADD COLUMN max_rel_error REAL"},
};
static_assert(std::size(kMigrations) == kStoreSchemaVersion,
              "one migration step per schema version above 0");

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

// What an opened file holds, read without writing anything.
struct DbState {
  int num_tables = 0;
  std::vector<std::string> tables; // a few names, for error messages
  bool has_meta = false;
  std::string application;
  std::string version_text;
};

DbState inspect(sqlite3* db) {
  DbState s;
  {
    // The first read of the file: fails with SQLITE_NOTADB / SQLITE_CORRUPT on garbage.
    Statement st(db,
                 "SELECT name FROM sqlite_master WHERE type = 'table' "
                 "AND name NOT LIKE 'sqlite_%' ORDER BY name",
                 "reading the list of tables");
    while (st.step()) {
      ++s.num_tables;
      if (s.tables.size() < 6)
        s.tables.push_back(st.text(0));
      if (st.text(0) == "meta")
        s.has_meta = true;
    }
  }
  if (!s.has_meta)
    return s;
  {
    // A foreign database may have its own `meta` table with other columns.
    Statement st(db, "SELECT name FROM pragma_table_info('meta')", "reading the meta table");
    std::set<std::string> cols;
    while (st.step())
      cols.insert(st.text(0));
    if (!cols.count("key") || !cols.count("value")) {
      s.has_meta = false;
      return s;
    }
  }
  Statement st(db, "SELECT key, value FROM meta WHERE key IN ('application', 'schema_version')",
               "reading the meta table");
  while (st.step()) {
    if (st.text(0) == "application")
      s.application = st.text(1);
    if (st.text(0) == "schema_version")
      s.version_text = st.text(1);
  }
  return s;
}

// The schema version of a brickdl database; 0 tables means a new (empty) file → -1.
// Throws UserError for a foreign, damaged or newer database.
int classify(const DbState& s, const std::string& path) {
  if (s.num_tables == 0)
    return -1;
  if (!s.has_meta || s.application != kApplication) {
    std::string tables = join_names(s.tables);
    if (s.num_tables > static_cast<int>(s.tables.size()))
      tables += ", ...";
    throw UserError("'" + path + "' is an SQLite database of another application (tables: " +
                    tables + "; no meta row application = 'brickdl'); pass the path of a " +
                    "brickdl tuning database, or a new path to create one");
  }
  int version = -1;
  try {
    size_t used = 0;
    version = std::stoi(s.version_text, &used);
    if (used != s.version_text.size())
      version = -1;
  } catch (const std::exception&) {
    version = -1;
  }
  if (version < 0) {
    throw UserError("'" + path + "' is a damaged brickdl database: meta 'schema_version' is '" +
                    s.version_text + "', expected a number; restore it from a copy");
  }
  if (version > kStoreSchemaVersion) {
    throw UserError(fmt::format(
        "'{}' was written by a newer brickdl (schema version {}; this build reads versions up "
        "to {}); update brickdl to use it",
        path, version, kStoreSchemaVersion));
  }
  return version;
}

using TableColumns = std::map<std::string, std::set<std::string>>;

TableColumns table_columns(sqlite3* db) {
  TableColumns out;
  Statement tables(db,
                   "SELECT name FROM sqlite_master WHERE type = 'table' "
                   "AND name NOT LIKE 'sqlite_%'",
                   "reading the list of tables");
  while (tables.step()) {
    const std::string table = tables.text(0);
    Statement cols(db, "SELECT name FROM pragma_table_info(?1)", "reading table columns");
    cols.bind_all(table);
    auto& set = out[table];
    while (cols.step())
      set.insert(cols.text(0));
  }
  return out;
}

// The tables and columns of a fresh database, built once from the schema script.
const TableColumns& expected_columns() {
  static const TableColumns expected = [] {
    sqlite3* mem = nullptr;
    const int rc = sqlite3_open(":memory:", &mem);
    TableColumns out;
    try {
      check_sqlite(mem, rc, "opening an in-memory database");
      exec_sql(mem, store_schema_sql(), "creating the reference schema");
      out = table_columns(mem);
    } catch (...) {
      sqlite3_close(mem);
      throw;
    }
    sqlite3_close(mem);
    return out;
  }();
  return expected;
}

// Every table and column the current schema has must be there (extra ones are tolerated).
void verify_schema(sqlite3* db, const std::string& path) {
  const TableColumns have = table_columns(db);
  for (const auto& [table, cols] : expected_columns()) {
    auto it = have.find(table);
    if (it == have.end()) {
      throw UserError("'" + path + "' is a damaged brickdl database: table '" + table +
                      "' is missing; restore it from a copy");
    }
    for (const auto& col : cols) {
      if (!it->second.count(col)) {
        throw UserError("'" + path + "' is a damaged brickdl database: table '" + table +
                        "' lacks column '" + col + "'; restore it from a copy");
      }
    }
  }
}

void migrate(sqlite3* db, int from_version) {
  for (int v = from_version; v < kStoreSchemaVersion; ++v) {
    const Migration& m = kMigrations[v];
    BRICKDL_CHECK(m.from_version == v, "migration list out of order at " << v);
    exec_sql(db, m.sql, fmt::format("migrating from schema version {}: {}", v, m.what));
  }
  Statement st(db, "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
               "recording the schema version");
  st.bind_all(std::to_string(kStoreSchemaVersion)).run();
}

void create_schema(sqlite3* db) {
  exec_sql(db, store_schema_sql(), "creating the schema");
  Statement st(db,
               "INSERT INTO meta (key, value) VALUES ('application', ?1), "
               "('schema_version', ?2)",
               "writing the meta rows");
  st.bind_all(kApplication, std::to_string(kStoreSchemaVersion)).run();
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
  const int version = classify(inspect(db_), path_);

  if (mode_ == Mode::kReadOnly) {
    if (version < 0) {
      throw UserError("'" + path_ +
                      "' is an empty SQLite file, not a brickdl tuning database; pass the "
                      "path of a database brickdl-tune wrote");
    }
    if (version < kStoreSchemaVersion) {
      // Read the old file as it is: migrate a private in-memory copy.
      sqlite3* mem = nullptr;
      const int rc = sqlite3_open(":memory:", &mem);
      try {
        check_sqlite(mem, rc, "opening an in-memory copy");
        sqlite3_backup* backup = sqlite3_backup_init(mem, "main", db_, "main");
        if (!backup)
          detail::throw_sqlite(mem, sqlite3_errcode(mem), "copying it to memory");
        sqlite3_backup_step(backup, -1); // its error, if any, is what finish returns
        check_sqlite(mem, sqlite3_backup_finish(backup), "copying it to memory");
        migrate(mem, version);
      } catch (...) {
        sqlite3_close(mem);
        throw;
      }
      sqlite3_close(db_);
      db_ = mem;
    }
    verify_schema(db_, path_);
    return;
  }

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
    const int locked_version = classify(inspect(db_), path_);
    if (locked_version < 0) {
      create_schema(db_);
    } else if (locked_version < kStoreSchemaVersion) {
      migrate(db_, locked_version);
    }
    verify_schema(db_, path_);
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
  ~CachedStatement() { sqlite3_reset(st_.handle()); } // errors were reported by step()
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
  auto find = cached("SELECT id FROM targets WHERE fingerprint = ?1", "looking up a target");
  find->bind_all(fingerprint);
  if (auto id = lookup_id(*find))
    return *id;
  require_writable("recording a target");
  Transaction tx(db_, &transaction_depth_, "recording a target");
  cached("INSERT INTO targets (fingerprint, backend, description) VALUES (?1, ?2, ?3) "
         "ON CONFLICT (fingerprint) DO NOTHING",
         "recording a target")
      ->bind_all(fingerprint, backend, description)
      .run();
  find->reset();
  find->bind_all(fingerprint);
  const auto id = lookup_id(*find);
  BRICKDL_CHECK(id.has_value());
  tx.commit();
  return *id;
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

int64_t TuningDb::workload_id(const WorkloadInfo& w) {
  auto find = cached("SELECT id FROM workloads WHERE signature = ?1", "looking up a workload");
  find->bind_all(w.signature);
  if (auto id = lookup_id(*find))
    return *id;
  require_writable("recording a workload");
  Transaction tx(db_, &transaction_depth_, "recording a workload");
  cached("INSERT INTO workloads (signature, num_layers, description, macs) "
         "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (signature) DO NOTHING",
         "recording a workload")
      ->bind_all(w.signature, w.num_layers, w.description, w.macs)
      .run();
  find->reset();
  find->bind_all(w.signature);
  const auto id = lookup_id(*find);
  BRICKDL_CHECK(id.has_value());
  tx.commit();
  return *id;
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
  const int threads = layerwise ? 0 : c.threads;
  const char* strategy = strategy_name(c.strategy);
  auto find = cached("SELECT id FROM candidates WHERE workload_id = ?1 AND strategy = ?2 AND "
                     "bd = ?3 AND bh = ?4 AND bw = ?5 AND cb = ?6 AND threads = ?7",
                     "looking up a candidate");
  find->bind_all(workload_id, strategy, bd, bh, bw, cb, threads);
  if (auto id = lookup_id(*find))
    return *id;
  require_writable("recording a candidate");
  Transaction tx(db_, &transaction_depth_, "recording a candidate");
  cached("INSERT INTO candidates (workload_id, strategy, bd, bh, bw, cb, threads) "
         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
         "recording a candidate")
      ->bind_all(workload_id, strategy, bd, bh, bw, cb, threads)
      .run();
  find->reset();
  find->bind_all(workload_id, strategy, bd, bh, bw, cb, threads);
  const auto id = lookup_id(*find);
  BRICKDL_CHECK(id.has_value());
  tx.commit();
  return *id;
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

std::optional<StoredMeasurement> TuningDb::find_measurement(int64_t candidate_id,
                                                            int64_t target_id) {
  auto st = cached("SELECT id, run_id, status, error, median_ms, min_ms, max_ms, p25_ms, p75_ms, "
                   "max_rel_error FROM measurements WHERE candidate_id = ?1 AND target_id = ?2 "
                   "ORDER BY id DESC LIMIT 1",
                   "looking up a measurement");
  st->bind_all(candidate_id, target_id);
  if (!st->step())
    return std::nullopt;
  StoredMeasurement m;
  m.id = st->int64(0);
  m.run_id = st->int64(1);
  MeasureResult& r = m.result;
  BRICKDL_CHECK(parse_measure_status(st->text(2), &r.status), "bad status " << st->text(2));
  r.error = st->text(3);
  r.median_ms = st->optional_real(4).value_or(0);
  r.min_ms = st->optional_real(5).value_or(0);
  r.max_ms = st->optional_real(6).value_or(0);
  r.p25_ms = st->optional_real(7).value_or(0);
  r.p75_ms = st->optional_real(8).value_or(0);
  r.max_rel_error = st->optional_real(9).value_or(0);

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
