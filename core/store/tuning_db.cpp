#include "core/store/tuning_db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "core/store/detail/process.h"
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

// Creates `path` as an empty file unless it exists; true when this call created it.
bool create_exclusively(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return false; // it exists (another process made it), or SQLite reports why not
  ::close(fd);
  return true;
}

// Whether SQLite failed for want of writing (the -shm file of a WAL database in a read-only
// folder or mount), not because of the file's content.
bool needs_write_access(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN;
}

// `path` as an SQLite URI path: absolute, with the characters URIs reserve percent-encoded.
std::string uri_path(const std::string& path) {
  const std::string abs = std::filesystem::absolute(path).string();
  std::string out;
  for (const char c : abs) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~')
      out += c;
    else
      out += fmt::format("%{:02X}", u);
  }
  return out;
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
  bool created = false;
  try {
    created = open_file(existed);
    open_schema(busy_timeout_ms);
  } catch (const store::detail::LockedError&) {
    close_connection(); // another process has the file open: it stays
    throw;
  } catch (...) {
    close_connection();
    if (created)
      remove_created(path);
    throw;
  }
}

TuningDb::TuningDb(const std::string& path, int busy_timeout_ms, Unchecked)
    : path_(path), mode_(Mode::kReadWrite), clock_(utc_now) {
  try {
    check_sqlite(db_, sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr),
                 "opening it");
    check_sqlite(db_, sqlite3_busy_timeout(db_, busy_timeout_ms), "setting the busy timeout");
    exec_sql(db_, "PRAGMA synchronous = NORMAL", "setting the synchronous mode");
    exec_sql(db_, "PRAGMA foreign_keys = ON", "enabling foreign keys");
  } catch (...) {
    close_connection();
    throw;
  }
}

std::unique_ptr<TuningDb> TuningDb::another_connection(int busy_timeout_ms) const {
  require_writable("opening another connection");
  return std::unique_ptr<TuningDb>(new TuningDb(path_, busy_timeout_ms, Unchecked{}));
}

void TuningDb::close_connection() noexcept {
  statements_.clear();
  sqlite3_close(db_);
  db_ = nullptr;
}

bool TuningDb::open_file(bool existed) {
  if (mode_ == Mode::kReadWrite) {
    // A new file is created here, exclusively: of several processes creating the same new
    // database at once, exactly one owns the creation (and removes the file if it fails);
    // the others open the file it made.
    const bool created = !existed && create_exclusively(path_);
    const int rc = sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr);
    check_sqlite(db_, rc, "opening it");
    return created;
  }
  // Read-only mode opens a writable file read-write, with writes disabled (PRAGMA query_only):
  // a read-only SQLite connection to a WAL database leaves its -wal and -shm side files
  // behind on close, a read-write one removes them when it is the last connection. Where that
  // cannot read the file (a read-only folder or mount: WAL needs its -shm file), a read-only
  // connection is tried, then SQLite's immutable mode (open_immutable).
  for (const int flags : {SQLITE_OPEN_READWRITE, SQLITE_OPEN_READONLY}) {
    if (flags == SQLITE_OPEN_READWRITE && ::access(path_.c_str(), W_OK) != 0)
      continue;
    const int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
    if (rc == SQLITE_OK) {
      const int probe =
          sqlite3_exec(db_, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
      if (!needs_write_access(probe))
        return false; // readable (or an error classify reports)
    } else if (!needs_write_access(rc)) {
      check_sqlite(db_, rc, "opening it");
    }
    close_connection();
  }
  open_immutable();
  return false;
}

void TuningDb::open_schema(int busy_timeout_ms) {
  busy_ms_ = busy_timeout_ms;
  check_sqlite(db_, sqlite3_busy_timeout(db_, busy_timeout_ms), "setting the busy timeout");
  if (mode_ == Mode::kReadOnly)
    exec_sql(db_, "PRAGMA query_only = 1", "disabling writes");
  if (mode_ == Mode::kReadWrite && sqlite3_db_readonly(db_, "main") == 1) {
    throw UserError("'" + path_ +
                    "' is not writable; check its permissions, or read it with brickdl-query");
  }
  // Everything up to here only reads: a foreign, newer, damaged or garbage file stays
  // untouched.
  const int version = store::detail::classify(db_, path_);
  if (mode_ == Mode::kReadWrite && version >= 0)
    check_integrity();
  if (mode_ == Mode::kReadOnly) {
    open_read_only(version);
  } else {
    open_read_write();
  }
}

void TuningDb::open_immutable() {
  // Immutable mode reads the database file alone: committed transactions still in the
  // write-ahead log would be silently missing, so a log with content is refused.
  std::error_code ec;
  const std::string wal = path_ + "-wal";
  const auto wal_bytes = std::filesystem::file_size(wal, ec);
  if (!ec && wal_bytes > 0) {
    throw UserError(fmt::format(
        "'{}' cannot be read without write access: its write-ahead log '{}' holds {} bytes "
        "of data that SQLite reads only through a '-shm' file, which cannot be created in its "
        "folder; copy the database with its -wal file to a writable folder and read the "
        "copy, or open it once with write access (that folds the log into the database)",
        path_, wal, wal_bytes));
  }
  const std::string uri = "file:" + uri_path(path_) + "?immutable=1";
  const int rc =
      sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  check_sqlite(db_, rc, "opening it read-only");
  immutable_ = true;
}

std::vector<std::string> TuningDb::integrity_problems(std::string* check) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path_, ec);
  const bool full = ec || static_cast<int64_t>(bytes) <= kFullCheckBytes;
  const char* pragma = full ? "integrity_check" : "quick_check";
  if (check)
    *check = pragma;
  std::vector<std::string> problems;
  Statement st(db_, fmt::format("PRAGMA {}({})", pragma, kProblemsShown + 1),
               "checking its integrity");
  while (st.step()) {
    // One problem per row; a row may open with the name of the schema it is about.
    std::string line = store::detail::one_line(st.text(0));
    const std::string header = "*** in database main *** ";
    if (line.rfind(header, 0) == 0)
      line.erase(0, header.size());
    if (line != "ok")
      problems.push_back(line);
  }
  return problems;
}

void TuningDb::check_integrity() {
  std::string check;
  std::vector<std::string> problems = integrity_problems(&check);
  if (problems.empty())
    return;
  const bool more = problems.size() > kProblemsShown;
  problems.resize(std::min<size_t>(problems.size(), kProblemsShown));
  throw UserError(fmt::format(
      "'{}' is damaged: SQLite's {} reports: {}{}. Nothing was written to it: restore it "
      "from a copy or start a new database (brickdl-tune --db NEW.db); brickdl-query can "
      "still read what is intact (e.g. `brickdl-query --db {} export`)",
      path_, check, join_names(problems, "; "), more ? "; ..." : "", path_));
}

void TuningDb::open_read_only(int version) {
  if (version < 0) {
    throw UserError("'" + path_ +
                    "' is an empty SQLite file, not a brickdl tuning database; pass the "
                    "path of a database brickdl-tune wrote");
  }
  if (version < kStoreSchemaVersion) {
    // Read the old file as it is: migrate a private in-memory copy.
    sqlite3* mem = store::detail::migrated_copy(db_, version, path_);
    sqlite3_close(db_);
    db_ = mem;
  }
  store::detail::verify_schema(db_, path_);
}

std::string TuningDb::switch_to_wal() {
  // Of several processes opening a new file at once, the switch fails at once with SQLITE_BUSY
  // for all but one (SQLite does not wait in its busy handler for it): retried here within
  // the busy timeout.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_ms_);
  for (;;) {
    try {
      Statement st(db_, "PRAGMA journal_mode = WAL", "switching to WAL mode");
      return st.step() ? st.text(0) : "";
    } catch (const store::detail::LockedError&) {
      if (std::chrono::steady_clock::now() >= deadline)
        throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void TuningDb::open_read_write() {
  const std::string journal_mode = switch_to_wal();
  if (journal_mode != "wal") {
    throw UserError("'" + path_ + "' cannot use SQLite's WAL mode (journal mode '" + journal_mode +
                    "'); put the database on a local file system");
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
      store::detail::migrate(db_, locked_version, path_);
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
  if (!id) {
    // The insert succeeded (or met a row it conflicts with) yet the look-up by its unique key
    // finds nothing: an index no longer matches its table.
    throw UserError(fmt::format("'{}' is damaged: the {} just recorded is not found by its "
                                "key (an index does not match its table); restore it from a "
                                "copy, or tune into a new database (--db NEW.db)",
                                path_, what));
  }
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
  const std::string now = clock_();
  mark_dead_runs_killed(now);
  const int64_t target = target_id(info.target_fingerprint, info.backend);
  const store::detail::ProcessIdentity self = store::detail::self_identity();
  Statement(db_,
            "INSERT INTO runs (experiment, experiment_path, config_json, model, batch, "
            "precision, gpu_spec, target_id, git_revision, started_at, status, host, pid, "
            "process_start, heartbeat_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
            "'running', ?11, ?12, ?13, ?10)",
            "starting a run")
      .bind_all(info.experiment, info.experiment_path, info.config_json, info.model, info.batch,
                info.precision, info.gpu_spec, target, info.git_revision, now, self.host, self.pid,
                self.start)
      .run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

// The runs still `running` with who runs them, for liveness checks.
struct TuningDb::RunningRun {
  int64_t id = 0;
  store::detail::ProcessIdentity who;
  std::string last_seen; // heartbeat_at, else started_at
};

std::vector<TuningDb::RunningRun> TuningDb::running_runs(std::optional<int64_t> only) {
  auto st = cached("SELECT id, host, pid, process_start, coalesce(heartbeat_at, started_at) "
                   "FROM runs WHERE status = 'running' AND (?1 IS NULL OR id = ?1)",
                   "listing running runs");
  st->bind_all(only);
  std::vector<RunningRun> out;
  while (st->step())
    out.push_back(RunningRun{st->int64(0), {st->text(1), st->int64(2), st->text(3)}, st->text(4)});
  return out;
}

void TuningDb::mark_killed(int64_t run_id) {
  cached("UPDATE runs SET status = 'killed', ended_at = coalesce(heartbeat_at, started_at) "
         "WHERE id = ?1 AND status = 'running'",
         "marking a run killed")
      ->bind_all(run_id)
      .run();
  release_claims(run_id);
}

void TuningDb::mark_dead_runs_killed(const std::string& now) {
  for (const RunningRun& r : running_runs(std::nullopt)) {
    if (store::detail::liveness(r.who, r.last_seen, now) == store::detail::Liveness::kGone)
      mark_killed(r.id);
  }
}

void TuningDb::release_claims(int64_t run_id) {
  cached("DELETE FROM claims WHERE run_id = ?1", "releasing claims")->bind_all(run_id).run();
}

void TuningDb::heartbeat(int64_t run_id) {
  require_writable("recording a heartbeat");
  Transaction tx(db_, &transaction_depth_, "recording a heartbeat");
  cached("UPDATE runs SET heartbeat_at = ?1 WHERE id = ?2 AND status = 'running'",
         "recording a heartbeat")
      ->bind_all(clock_(), run_id)
      .run();
  tx.commit();
}

int64_t TuningDb::latest_measurement_id() {
  auto st = cached("SELECT coalesce(max(id), 0) FROM measurements", "reading measurements");
  return st->step() ? st->int64(0) : 0;
}

// One transaction reads the measurement, the claim and its holder's liveness, and claims.
ClaimResult TuningDb::claim(int64_t candidate_id, int64_t target_id, int64_t run_id,
                            int64_t measured_after_id) {
  require_writable("claiming a candidate");
  Transaction tx(db_, &transaction_depth_, "claiming a candidate");
  {
    auto measured = cached("SELECT 1 FROM measurements WHERE candidate_id = ?1 AND "
                           "target_id = ?2 AND id > ?3 LIMIT 1",
                           "looking up a measurement");
    measured->bind_all(candidate_id, target_id, measured_after_id);
    if (measured->step())
      return {ClaimResult::kMeasured, 0};
  }
  int64_t holder = 0;
  {
    auto st = cached("SELECT run_id FROM claims WHERE candidate_id = ?1 AND target_id = ?2",
                     "looking up a claim");
    st->bind_all(candidate_id, target_id);
    if (st->step())
      holder = st->int64(0);
  }
  ClaimResult result{ClaimResult::kClaimed, 0};
  if (holder != 0 && holder != run_id) {
    const std::vector<RunningRun> running = running_runs(holder);
    if (!running.empty()) {
      const auto live = store::detail::liveness(running[0].who, running[0].last_seen, clock_());
      if (live == store::detail::Liveness::kAlive || live == store::detail::Liveness::kRecent)
        return {ClaimResult::kHeld, holder};
      if (live == store::detail::Liveness::kGone)
        mark_killed(holder);
    }
    result.holder_run_id = holder; // taken over
  }
  cached("INSERT INTO claims (candidate_id, target_id, run_id, claimed_at) "
         "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (candidate_id, target_id) DO UPDATE SET "
         "run_id = excluded.run_id, claimed_at = excluded.claimed_at",
         "claiming a candidate")
      ->bind_all(candidate_id, target_id, run_id, clock_())
      .run();
  tx.commit();
  return result;
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
  release_claims(run_id);
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
  release_claims(run_id);
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
  const int cl = layerwise ? 1 : c.brick.cl;
  const char* strategy = strategy_name(c.strategy);
  return get_or_insert(
      "SELECT id FROM candidates WHERE workload_id = ?1 AND strategy = ?2 AND "
      "bd = ?3 AND bh = ?4 AND bw = ?5 AND cb = ?6 AND bn = ?7 AND cl = ?8 AND threads = ?9",
      "INSERT INTO candidates (workload_id, strategy, bd, bh, bw, cb, bn, cl, threads) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT DO NOTHING",
      "candidate", std::tie(workload_id, strategy, bd, bh, bw, cb, bn, cl, threads),
      std::tie(workload_id, strategy, bd, bh, bw, cb, bn, cl, threads));
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

void TuningDb::put_baseline_prediction(int64_t workload_id, const std::string& gpu_spec,
                                       const std::string& model_version,
                                       const std::string& baseline, const PredictionRow& p,
                                       int launches) {
  require_writable("recording a baseline prediction");
  Transaction tx(db_, &transaction_depth_, "recording a baseline prediction");
  cached("INSERT OR REPLACE INTO baseline_predictions (workload_id, gpu_spec, model_version, "
         "baseline, time_ms, time_dram_ms, time_l2_ms, time_compute_ms, "
         "time_atomics_compulsory_ms, time_atomics_conflict_ms, time_other_ms, flops, "
         "redundant_flops, l1_bytes, l2_bytes, dram_bytes, dram_lower_bound, "
         "atomics_compulsory, atomics_conflict, launches) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
         "?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
         "recording a baseline prediction")
      ->bind_all(workload_id, gpu_spec, model_version, baseline, p.time_ms, p.time_dram_ms,
                 p.time_l2_ms, p.time_compute_ms, p.time_atomics_compulsory_ms,
                 p.time_atomics_conflict_ms, p.time_other_ms, p.flops, p.redundant_flops,
                 p.l1_bytes, p.l2_bytes, p.dram_bytes, p.dram_lower_bound, p.atomics_compulsory,
                 p.atomics_conflict, int64_t{launches})
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
  if (!parse_measure_status(st.text(2), &r.status))
    st.damaged_row("measurement " + std::to_string(st.int64(0)) + " has status '" + st.text(2) +
                   "'");
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
  const std::string now = clock_();
  cached("INSERT INTO measurements (candidate_id, target_id, run_id, status, error, "
         "median_ms, min_ms, max_ms, p25_ms, p75_ms, max_rel_error, created_at) "
         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
         "recording a measurement")
      ->bind_all(candidate_id, target_id, run_id, measure_status_name(r.status), r.error,
                 if_measured(timed, r.median_ms), if_measured(timed, r.min_ms),
                 if_measured(timed, r.max_ms), if_measured(timed, r.p25_ms),
                 if_measured(timed, r.p75_ms), if_measured(validated, r.max_rel_error), now)
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
  // A result is a sign of life too (a killed run ends at its last one).
  cached("UPDATE runs SET heartbeat_at = ?1 WHERE id = ?2 AND status = 'running'",
         "recording a heartbeat")
      ->bind_all(now, run_id)
      .run();
  // The claim has served its purpose: the measurement is there for other tuners to find.
  cached("DELETE FROM claims WHERE candidate_id = ?1 AND target_id = ?2 AND run_id = ?3",
         "releasing a claim")
      ->bind_all(candidate_id, target_id, run_id)
      .run();
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
