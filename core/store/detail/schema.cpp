#include "core/store/detail/schema.h"

#include <iterator>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/store/detail/sqlite.h"
#include "core/store/tuning_db.h"
#include "generated/store_schema_sql.h"

namespace brickdl::store::detail {

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
    // Version 2 keys candidates by the batch block bn too. SQLite cannot change a UNIQUE
    // constraint in place, so the table is rebuilt (SQLite's "making other kinds of table
    // schema changes" procedure): ids are kept, since predictions, measurements and plan_groups
    // refer to them, and every old candidate computed one image per unit of work (bn = 1).
    // The new table is renamed, not the old one: renaming `candidates` would rewrite the other
    // tables' references to follow it.
    {1, "rebuilding candidates with the batch block bn in its unique key", R"sql(
CREATE TABLE candidates_v2 (
  id          INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  strategy    TEXT NOT NULL CHECK (strategy IN ('layerwise', 'padded', 'memoized')),
  bd INTEGER NOT NULL, bh INTEGER NOT NULL, bw INTEGER NOT NULL,
  cb INTEGER NOT NULL,
  bn INTEGER NOT NULL DEFAULT 1 CHECK (bn >= 1),
  threads     INTEGER NOT NULL,
  UNIQUE (workload_id, strategy, bd, bh, bw, cb, bn, threads)
);
INSERT INTO candidates_v2 (id, workload_id, strategy, bd, bh, bw, cb, bn, threads)
  SELECT id, workload_id, strategy, bd, bh, bw, cb, 1, threads FROM candidates ORDER BY id;
DROP TABLE candidates;
ALTER TABLE candidates_v2 RENAME TO candidates;
CREATE INDEX IF NOT EXISTS candidates_by_workload ON candidates(workload_id);
)sql"},
    // Version 3 records who runs each run (host, pid, process start, heartbeat) and allows
    // the status `killed`; it adds the claims of candidates being measured. The runs table is
    // rebuilt for its CHECK constraint, like candidates above (ids kept: measurements,
    // run_groups and plans refer to them); old runs have no identity (host '').
    {2, "recording who runs each run; claims of candidates being measured", R"sql(
CREATE TABLE runs_v3 (
  id            INTEGER PRIMARY KEY,
  experiment    TEXT NOT NULL,
  experiment_path TEXT NOT NULL DEFAULT '',
  config_json   TEXT NOT NULL DEFAULT '{}',
  model         TEXT NOT NULL,
  batch         INTEGER NOT NULL,
  precision     TEXT NOT NULL,
  gpu_spec      TEXT NOT NULL,
  target_id     INTEGER NOT NULL REFERENCES targets(id),
  git_revision  TEXT NOT NULL,
  started_at    TEXT NOT NULL,
  ended_at      TEXT,
  status        TEXT NOT NULL CHECK (status IN ('running', 'complete', 'aborted', 'killed')),
  host          TEXT NOT NULL DEFAULT '',
  pid           INTEGER,
  process_start TEXT NOT NULL DEFAULT '',
  heartbeat_at  TEXT
);
INSERT INTO runs_v3 (id, experiment, experiment_path, config_json, model, batch, precision,
                     gpu_spec, target_id, git_revision, started_at, ended_at, status)
  SELECT id, experiment, experiment_path, config_json, model, batch, precision, gpu_spec,
         target_id, git_revision, started_at, ended_at, status FROM runs ORDER BY id;
DROP TABLE runs;
ALTER TABLE runs_v3 RENAME TO runs;
CREATE TABLE IF NOT EXISTS claims (
  candidate_id INTEGER NOT NULL REFERENCES candidates(id),
  target_id    INTEGER NOT NULL REFERENCES targets(id),
  run_id       INTEGER NOT NULL REFERENCES runs(id),
  claimed_at   TEXT NOT NULL,
  PRIMARY KEY (candidate_id, target_id)
);
)sql"},
    // Version 4 keys candidates by the thread block cluster cl too (CTAs per unit), rebuilt
    // as for bn above (ids kept); every old candidate ran one CTA per unit (cl = 1).
    {3, "rebuilding candidates with the thread block cluster cl in its unique key", R"sql(
CREATE TABLE candidates_v4 (
  id          INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  strategy    TEXT NOT NULL CHECK (strategy IN ('layerwise', 'padded', 'memoized')),
  bd INTEGER NOT NULL, bh INTEGER NOT NULL, bw INTEGER NOT NULL,
  cb INTEGER NOT NULL,
  bn INTEGER NOT NULL DEFAULT 1 CHECK (bn >= 1),
  cl INTEGER NOT NULL DEFAULT 1 CHECK (cl >= 1),
  threads     INTEGER NOT NULL,
  UNIQUE (workload_id, strategy, bd, bh, bw, cb, bn, cl, threads)
);
INSERT INTO candidates_v4 (id, workload_id, strategy, bd, bh, bw, cb, bn, cl, threads)
  SELECT id, workload_id, strategy, bd, bh, bw, cb, bn, 1, threads FROM candidates ORDER BY id;
DROP TABLE candidates;
ALTER TABLE candidates_v4 RENAME TO candidates;
CREATE INDEX IF NOT EXISTS candidates_by_workload ON candidates(workload_id);
)sql"},
    // Version 5 adds the model's predictions of other layerwise baselines than the layerwise
    // candidates' (the paper's unfused cuDNN baseline); older runs have none.
    {4, "adding the predictions of other layerwise baselines", R"sql(
CREATE TABLE IF NOT EXISTS baseline_predictions (
  workload_id        INTEGER NOT NULL REFERENCES workloads(id),
  gpu_spec           TEXT NOT NULL,
  model_version      TEXT NOT NULL,
  baseline           TEXT NOT NULL,
  time_ms            REAL NOT NULL,
  time_dram_ms       REAL NOT NULL,
  time_l2_ms         REAL NOT NULL,
  time_compute_ms    REAL NOT NULL,
  time_atomics_compulsory_ms REAL NOT NULL,
  time_atomics_conflict_ms   REAL NOT NULL,
  time_other_ms      REAL NOT NULL,
  flops              REAL NOT NULL,
  redundant_flops    REAL NOT NULL,
  l1_bytes           REAL NOT NULL,
  l2_bytes           REAL NOT NULL,
  dram_bytes         REAL NOT NULL,
  dram_lower_bound   REAL NOT NULL,
  atomics_compulsory REAL NOT NULL,
  atomics_conflict   REAL NOT NULL,
  launches           INTEGER NOT NULL,
  PRIMARY KEY (workload_id, gpu_spec, model_version, baseline)
);
)sql"},
    // Version 6 allows the measurement status `crashed`: the worker process that measured the
    // candidate died (distributed/process_pool.h). The table is rebuilt for its CHECK
    // constraint, as candidates above (ids kept: samples and counters refer to them).
    {5, "allowing the measurement status 'crashed'", R"sql(
CREATE TABLE measurements_v6 (
  id            INTEGER PRIMARY KEY,
  candidate_id  INTEGER NOT NULL REFERENCES candidates(id),
  target_id     INTEGER NOT NULL REFERENCES targets(id),
  run_id        INTEGER NOT NULL REFERENCES runs(id),
  status        TEXT NOT NULL CHECK (status IN ('ok', 'compile_error', 'launch_error',
                                                'timeout', 'wrong_result', 'unsupported',
                                                'crashed')),
  error         TEXT NOT NULL DEFAULT '',
  median_ms     REAL, min_ms REAL, max_ms REAL, p25_ms REAL, p75_ms REAL,
  max_rel_error REAL,
  created_at    TEXT NOT NULL,
  UNIQUE (candidate_id, target_id, run_id)
);
INSERT INTO measurements_v6 (id, candidate_id, target_id, run_id, status, error, median_ms,
                             min_ms, max_ms, p25_ms, p75_ms, max_rel_error, created_at)
  SELECT id, candidate_id, target_id, run_id, status, error, median_ms, min_ms, max_ms, p25_ms,
         p75_ms, max_rel_error, created_at FROM measurements ORDER BY id;
DROP TABLE measurements;
ALTER TABLE measurements_v6 RENAME TO measurements;
CREATE INDEX IF NOT EXISTS measurements_by_candidate ON measurements(candidate_id, target_id);
)sql"},
};
static_assert(std::size(kMigrations) == kStoreSchemaVersion,
              "one migration step per schema version above 0");

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
int version_of(const DbState& s, const std::string& path) {
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
      exec_sql(mem, kSchemaSql, "creating the reference schema");
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

} // namespace

int classify(sqlite3* db, const std::string& path) {
  return version_of(inspect(db), path);
}

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

void migrate(sqlite3* db, int from_version, const std::string& path) {
  {
    // A step that rebuilds a table drops the old one, which fails with foreign keys on while
    // other tables refer to its rows. TuningDb enables them after migrating.
    Statement fk(db, "PRAGMA foreign_keys", "reading the foreign-key setting");
    BRICKDL_CHECK(fk.step() && fk.int64(0) == 0, "migrating with foreign keys enabled");
  }
  for (int v = from_version; v < kStoreSchemaVersion; ++v) {
    const Migration& m = kMigrations[v];
    BRICKDL_CHECK(m.from_version == v, "migration list out of order at " << v);
    try {
      exec_sql(db, m.sql, fmt::format("migrating from schema version {}: {}", v, m.what));
    } catch (const InternalError& e) {
      // The steps are tested on every released schema (tests/store): SQL that fails here
      // (a table or column missing) means the file is not the version it says it is.
      throw UserError(fmt::format("'{}' says it has schema version {}, but it does not have that "
                                  "version's tables ({}); it is damaged or was not written by "
                                  "brickdl: restore it from a copy",
                                  path, from_version, e.what()));
    }
  }
  Statement st(db, "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
               "recording the schema version");
  st.bind_all(std::to_string(kStoreSchemaVersion)).run();
}

sqlite3* migrated_copy(sqlite3* db, int from_version, const std::string& path) {
  sqlite3* mem = nullptr;
  const int rc = sqlite3_open(":memory:", &mem);
  try {
    check_sqlite(mem, rc, "opening an in-memory copy");
    sqlite3_backup* backup = sqlite3_backup_init(mem, "main", db, "main");
    if (!backup)
      throw_sqlite(mem, sqlite3_errcode(mem), "copying it to memory");
    sqlite3_backup_step(backup, -1); // its error, if any, is what finish returns
    check_sqlite(mem, sqlite3_backup_finish(backup), "copying it to memory");
    migrate(mem, from_version, path);
  } catch (...) {
    sqlite3_close(mem);
    throw;
  }
  return mem;
}

void create_schema(sqlite3* db) {
  // The script writes the meta rows (application, schema version) too.
  exec_sql(db, kSchemaSql, "creating the schema");
}

} // namespace brickdl::store::detail
