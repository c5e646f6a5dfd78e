#include "core/store/queries.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/store/detail/access.h"
#include "core/store/detail/process.h"
#include "core/store/detail/sqlite.h"
#include "core/store/tuning_db.h"

namespace brickdl::query {

using store::detail::Statement;
using store::detail::StoreAccess;

namespace {

// Candidate columns in this order: id, strategy, bd, bh, bw, cb, bn, cl, threads.
CandidateRef read_candidate(const Statement& st, int first_col) {
  CandidateRef c;
  c.id = st.int64(first_col);
  if (!parse_strategy(st.text(first_col + 1), &c.strategy))
    st.damaged_row("candidate " + std::to_string(c.id) + " has strategy '" +
                   st.text(first_col + 1) + "'");
  c.brick.d = static_cast<int>(st.int64(first_col + 2));
  c.brick.h = static_cast<int>(st.int64(first_col + 3));
  c.brick.w = static_cast<int>(st.int64(first_col + 4));
  c.brick.cb = static_cast<int>(st.int64(first_col + 5));
  c.brick.nb = static_cast<int>(st.int64(first_col + 6));
  c.brick.cl = static_cast<int>(st.int64(first_col + 7));
  c.threads = static_cast<int>(st.int64(first_col + 8));
  return c;
}

constexpr const char* kCandidateCols =
    "c.id, c.strategy, c.bd, c.bh, c.bw, c.cb, c.bn, c.cl, c.threads";

// The best `ok` measurement of a workload among `where` (an SQL condition on m and c).
class MeasuredLookup {
public:
  MeasuredLookup(sqlite3* db, const std::string& where)
      : st_(db,
            fmt::format("SELECT m.id, m.run_id, m.median_ms, m.p25_ms, m.p75_ms, m.min_ms, "
                        "m.max_ms, (SELECT count(*) FROM samples s WHERE s.measurement_id = "
                        "m.id), {} FROM measurements m JOIN candidates c "
                        "ON c.id = m.candidate_id WHERE m.status = 'ok' AND m.median_ms IS NOT "
                        "NULL AND c.workload_id = ?1 AND {} ORDER BY m.median_ms, m.id LIMIT 1",
                        kCandidateCols, where),
            "finding the best measurement") {}

  // `key` binds ?2 (a target or run id).
  std::optional<BestMeasurement> find(int64_t workload_id, int64_t key) {
    st_.reset();
    st_.bind_all(workload_id, key);
    if (!st_.step())
      return std::nullopt;
    BestMeasurement b;
    b.id = st_.int64(0);
    b.run_id = st_.int64(1);
    b.spread = {st_.real(2), st_.real(3), st_.real(4), st_.real(5), st_.real(6)};
    b.num_samples = static_cast<int>(st_.int64(7));
    b.candidate = read_candidate(st_, 8);
    return b;
  }

private:
  Statement st_;
};

// The best feasible prediction of a workload for a GPU spec, from the model version written
// last (predictions of different model versions are not compared with each other).
class PredictedLookup {
public:
  PredictedLookup(sqlite3* db, const std::string& where)
      : st_(db,
            fmt::format("SELECT p.model_version, p.time_ms, {} FROM predictions p "
                        "JOIN candidates c ON c.id = p.candidate_id "
                        "WHERE c.workload_id = ?1 AND p.gpu_spec = ?2 AND p.feasible = 1 AND {} "
                        "AND p.model_version = (SELECT p2.model_version FROM predictions p2 "
                        "JOIN candidates c2 ON c2.id = p2.candidate_id WHERE c2.workload_id = ?1 "
                        "AND p2.gpu_spec = ?2 ORDER BY p2.rowid DESC LIMIT 1) "
                        "ORDER BY p.time_ms, c.id LIMIT 1",
                        kCandidateCols, where),
            "finding the best prediction") {}

  struct Found {
    std::string model_version;
    double time_ms = 0;
    CandidateRef candidate;
  };
  std::optional<Found> find(int64_t workload_id, const std::string& gpu_spec) {
    st_.reset();
    st_.bind_all(workload_id, gpu_spec);
    if (!st_.step())
      return std::nullopt;
    return Found{st_.text(0), st_.real(1), read_candidate(st_, 2)};
  }

private:
  Statement st_;
};

// The latest model version's prediction of one candidate for a GPU spec.
std::optional<std::pair<std::string, double>>
candidate_prediction(sqlite3* db, int64_t candidate_id, const std::string& gpu_spec) {
  Statement st(db,
               "SELECT model_version, time_ms FROM predictions WHERE candidate_id = ?1 AND "
               "gpu_spec = ?2 AND feasible = 1 ORDER BY rowid DESC LIMIT 1",
               "reading a prediction");
  st.bind_all(candidate_id, gpu_spec);
  if (!st.step())
    return std::nullopt;
  return std::make_pair(st.text(0), st.real(1));
}

} // namespace

std::string CandidateRef::config() const {
  Candidate c;
  c.strategy = strategy;
  c.brick = brick;
  c.threads = threads;
  return c.config_str();
}

// ---- best ------------------------------------------------------------------------------

namespace {

// The rows of best() before choosing: one per (model, batch, precision, target, workload),
// with the groups where the workload occurs and the GPU spec of its latest run.
struct BestKeys {
  std::vector<BestRow> rows;
  std::vector<int64_t> target_ids; // of rows[i]
};

BestKeys best_keys(sqlite3* h, const BestFilter& filter) {
  Statement keys(h,
                 "SELECT r.model, r.batch, r.precision, t.fingerprint, r.target_id, r.gpu_spec, "
                 "r.id, w.id, w.signature, w.description, w.num_layers, w.macs, rg.first_layer, "
                 "rg.last_layer, rg.layer_names, rg.label "
                 "FROM run_groups rg JOIN runs r ON r.id = rg.run_id "
                 "JOIN targets t ON t.id = r.target_id JOIN workloads w ON w.id = rg.workload_id "
                 "WHERE (?1 = '' OR r.model = ?1) AND (?2 = '' OR lower(r.gpu_spec) = lower(?2)) "
                 "AND (?3 = '' OR r.precision = ?3) AND (?4 IS NULL OR r.batch = ?4) "
                 "AND (?5 = '' OR instr(t.fingerprint, ?5) > 0) "
                 "ORDER BY r.model, r.batch, r.precision, t.fingerprint, rg.first_layer, "
                 "rg.last_layer, r.id",
                 "listing the groups of runs");
  keys.bind_all(filter.model, filter.gpu, filter.precision, filter.batch, filter.target);

  using Key = std::tuple<std::string, int, std::string, int64_t, int64_t>;
  BestKeys out;
  std::map<Key, size_t> index;
  std::map<Key, int64_t> latest_run;
  while (keys.step()) {
    const int batch = static_cast<int>(keys.int64(1));
    const Key key{keys.text(0), batch, keys.text(2), keys.int64(4), keys.int64(7)};
    auto [it, fresh] = index.emplace(key, out.rows.size());
    if (fresh) {
      BestRow r;
      r.model = keys.text(0);
      r.batch = batch;
      r.precision = keys.text(2);
      r.target = keys.text(3);
      r.workload_id = keys.int64(7);
      r.signature = keys.text(8);
      r.description = keys.text(9);
      r.num_layers = static_cast<int>(keys.int64(10));
      r.macs = keys.int64(11);
      out.rows.push_back(std::move(r));
      out.target_ids.push_back(keys.int64(4));
    }
    BestRow& r = out.rows[it->second];
    if (keys.int64(6) >= latest_run[key]) {
      latest_run[key] = keys.int64(6);
      r.gpu_spec = keys.text(5);
    }
    const GroupRef g{static_cast<int>(keys.int64(12)), static_cast<int>(keys.int64(13)),
                     keys.text(14), keys.text(15)};
    // The same group in several runs (resumed tuning) is listed once.
    const bool seen = std::any_of(r.groups.begin(), r.groups.end(), [&](const GroupRef& o) {
      return o.first_layer == g.first_layer && o.last_layer == g.last_layer;
    });
    if (!seen)
      r.groups.push_back(g);
  }
  return out;
}

// Chooses a BestRow's candidate: measured on its target, else predicted for its GPU spec.
class BestChooser {
public:
  explicit BestChooser(sqlite3* h)
      : h_(h), measured_(h, "m.target_id = ?2"),
        measured_layerwise_(h, "m.target_id = ?2 AND c.strategy = 'layerwise'"), predicted_(h, "1"),
        predicted_layerwise_(h, "c.strategy = 'layerwise'"),
        count_(h,
               "SELECT count(DISTINCT m.candidate_id) FROM measurements m JOIN candidates c "
               "ON c.id = m.candidate_id WHERE c.workload_id = ?1 AND m.target_id = ?2 "
               "AND m.status = 'ok'",
               "counting measured candidates") {}

  // False when the workload is neither measured nor predicted: nothing to recommend.
  bool choose(BestRow& r, int64_t target_id) {
    if (auto m = measured_.find(r.workload_id, target_id)) {
      r.measured = true;
      r.candidate = m->candidate;
      r.time_ms = m->spread.median_ms;
      r.spread = m->spread;
      r.measurement_id = m->id;
      r.run_id = m->run_id;
      r.num_samples = m->num_samples;
      count_.reset();
      count_.bind_all(r.workload_id, target_id);
      BRICKDL_CHECK(count_.step());
      r.candidates_measured = static_cast<int>(count_.int64(0));
      if (auto lw = measured_layerwise_.find(r.workload_id, target_id))
        r.layerwise_ms = lw->spread.median_ms;
      if (auto p = candidate_prediction(h_, r.candidate.id, r.gpu_spec)) {
        r.model_version = p->first;
        r.predicted_ms = p->second;
      }
      return true;
    }
    if (auto p = predicted_.find(r.workload_id, r.gpu_spec)) {
      r.candidate = p->candidate;
      r.time_ms = p->time_ms;
      r.predicted_ms = p->time_ms;
      r.model_version = p->model_version;
      if (auto lw = predicted_layerwise_.find(r.workload_id, r.gpu_spec))
        r.layerwise_ms = lw->time_ms;
      return true;
    }
    return false;
  }

private:
  sqlite3* h_;
  MeasuredLookup measured_, measured_layerwise_;
  PredictedLookup predicted_, predicted_layerwise_;
  Statement count_;
};

} // namespace

std::vector<BestRow> best(TuningDb& db, const BestFilter& filter) {
  sqlite3* h = StoreAccess::connection(db);
  BestKeys keys = best_keys(h, filter);
  BestChooser chooser(h);
  std::vector<BestRow> out;
  for (size_t i = 0; i < keys.rows.size(); ++i) {
    if (chooser.choose(keys.rows[i], keys.target_ids[i]))
      out.push_back(std::move(keys.rows[i]));
  }
  return out;
}

// ---- runs ------------------------------------------------------------------------------

std::string shown_status(const std::string& status, const std::string& host, int64_t pid,
                         const std::string& process_start, const std::string& last_seen,
                         const std::string& now) {
  if (status != "running")
    return status;
  using store::detail::Liveness;
  switch (store::detail::liveness({host, pid, process_start}, last_seen, now)) {
  case Liveness::kGone: return "killed";
  case Liveness::kStale: return "stale?";
  default: return status;
  }
}

namespace {

// The columns shown_status() needs, from `runs r`.
constexpr const char* kWhoCols =
    "r.host, coalesce(r.pid, 0), r.process_start, coalesce(r.heartbeat_at, r.started_at)";

std::string status_at(const Statement& st, int status_col, int who_col, const std::string& now) {
  return shown_status(st.text(status_col), st.text(who_col), st.int64(who_col + 1),
                      st.text(who_col + 2), st.text(who_col + 3), now);
}

} // namespace

std::vector<RunRow> runs(TuningDb& db) {
  Statement st(StoreAccess::connection(db),
               fmt::format("SELECT r.id, r.experiment, r.model, r.batch, r.precision, "
                           "t.fingerprint, r.status, r.started_at, r.ended_at, "
                           "(SELECT count(*) FROM measurements m WHERE m.run_id = r.id), {} "
                           "FROM runs r JOIN targets t ON t.id = r.target_id ORDER BY r.id",
                           kWhoCols),
               "listing runs");
  const std::string now = db.now();
  std::vector<RunRow> out;
  while (st.step()) {
    RunRow r;
    r.id = st.int64(0);
    r.experiment = st.text(1);
    r.model = st.text(2);
    r.batch = static_cast<int>(st.int64(3));
    r.precision = st.text(4);
    r.target = st.text(5);
    r.status = status_at(st, 6, 10, now);
    r.started_at = st.text(7);
    if (!st.is_null(8))
      r.ended_at = st.text(8);
    r.measurements = st.int64(9);
    out.push_back(std::move(r));
  }
  return out;
}

// ---- one run ---------------------------------------------------------------------------

namespace {

RunSummary run_summary(TuningDb& db, int64_t run_id) {
  Statement st(StoreAccess::connection(db),
               fmt::format("SELECT r.id, r.experiment, r.experiment_path, r.config_json, "
                           "r.model, r.batch, r.precision, r.gpu_spec, t.fingerprint, t.backend, "
                           "r.git_revision, r.started_at, r.ended_at, r.status, {} FROM runs r "
                           "JOIN targets t ON t.id = r.target_id WHERE r.id = ?1",
                           kWhoCols),
               "reading a run");
  st.bind_all(run_id);
  if (!st.step()) {
    throw UserError(
        fmt::format("no run {} in '{}'; `brickdl-query runs` lists the runs", run_id, db.path()));
  }
  RunSummary r;
  r.id = st.int64(0);
  r.experiment = st.text(1);
  r.experiment_path = st.text(2);
  r.config_json = st.text(3);
  r.model = st.text(4);
  r.batch = static_cast<int>(st.int64(5));
  r.precision = st.text(6);
  r.gpu_spec = st.text(7);
  r.target = st.text(8);
  r.backend = st.text(9);
  r.git_revision = st.text(10);
  r.started_at = st.text(11);
  if (!st.is_null(12))
    r.ended_at = st.text(12);
  r.status = status_at(st, 13, 14, db.now());
  return r;
}

// The run's groups, with what was measured of each (in this run).
std::vector<RunGroupRow> run_groups(sqlite3* h, int64_t run_id) {
  Statement groups(h,
                   "SELECT rg.first_layer, rg.last_layer, rg.layer_names, rg.label, "
                   "w.description, rg.workload_id FROM run_groups rg "
                   "JOIN workloads w ON w.id = rg.workload_id WHERE rg.run_id = ?1 "
                   "ORDER BY rg.first_layer, rg.last_layer",
                   "listing a run's groups");
  groups.bind_all(run_id);
  MeasuredLookup best_in_run(h, "m.run_id = ?2");
  Statement measured_count(h,
                           "SELECT count(*) FROM measurements m JOIN candidates c ON "
                           "c.id = m.candidate_id WHERE c.workload_id = ?1 AND m.run_id = ?2",
                           "counting a group's measurements");
  std::vector<RunGroupRow> out;
  while (groups.step()) {
    const int64_t w = groups.int64(5);
    measured_count.reset();
    measured_count.bind_all(w, run_id);
    BRICKDL_CHECK(measured_count.step());
    RunGroupRow g;
    g.first_layer = static_cast<int>(groups.int64(0));
    g.last_layer = static_cast<int>(groups.int64(1));
    g.layer_names = groups.text(2);
    g.label = groups.text(3);
    g.workload = groups.text(4);
    g.measurements = measured_count.int64(0);
    g.best = best_in_run.find(w, run_id);
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<StatusCount> status_counts(sqlite3* h, int64_t run_id) {
  Statement st(h,
               "SELECT status, count(*) FROM measurements WHERE run_id = ?1 "
               "GROUP BY status ORDER BY status",
               "counting a run's measurements");
  st.bind_all(run_id);
  std::vector<StatusCount> out;
  while (st.step())
    out.push_back({st.text(0), st.int64(1)});
  return out;
}

std::vector<ErrorRow> run_errors(sqlite3* h, int64_t run_id) {
  // The candidate columns are those of the first measurement of each group (SQLite takes bare
  // columns from the row that min() picked).
  Statement st(
      h,
      "SELECT m.status, m.error, count(*), min(m.id), w.description, "
      "c.id, c.strategy, c.bd, c.bh, c.bw, c.cb, c.bn, c.cl, c.threads FROM measurements m "
      "JOIN candidates c ON c.id = m.candidate_id "
      "JOIN workloads w ON w.id = c.workload_id "
      "WHERE m.run_id = ?1 AND m.status <> 'ok' GROUP BY m.status, m.error "
      "ORDER BY min(m.id)",
      "listing a run's errors");
  st.bind_all(run_id);
  std::vector<ErrorRow> out;
  while (st.step()) {
    ErrorRow e;
    e.status = st.text(0);
    e.error = st.text(1);
    e.count = st.int64(2);
    e.first_candidate = read_candidate(st, 5);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<PlanDetails> run_plans(sqlite3* h, int64_t run_id) {
  Statement plans(h,
                  "SELECT id, kind, predicted_ms, measured_ms, layerwise_predicted_ms, "
                  "layerwise_measured_ms, created_at FROM plans WHERE run_id = ?1 ORDER BY id",
                  "listing a run's plans");
  plans.bind_all(run_id);
  Statement groups(h,
                   fmt::format("SELECT pg.idx, pg.first_layer, pg.last_layer, "
                               "coalesce(rg.layer_names, ''), {} FROM plan_groups pg "
                               "JOIN candidates c ON c.id = pg.candidate_id "
                               "LEFT JOIN run_groups rg ON rg.run_id = ?2 AND rg.first_layer = "
                               "pg.first_layer AND rg.last_layer = pg.last_layer "
                               "WHERE pg.plan_id = ?1 ORDER BY pg.idx",
                               kCandidateCols),
                   "listing a plan's groups");
  std::vector<PlanDetails> out;
  while (plans.step()) {
    PlanDetails p;
    p.id = plans.int64(0);
    p.kind = plans.text(1);
    p.predicted_ms = plans.real(2);
    p.measured_ms = plans.optional_real(3);
    p.layerwise_predicted_ms = plans.real(4);
    p.layerwise_measured_ms = plans.optional_real(5);
    p.created_at = plans.text(6);
    groups.reset();
    groups.bind_all(p.id, run_id);
    while (groups.step()) {
      p.groups.push_back({groups.int64(0), static_cast<int>(groups.int64(1)),
                          static_cast<int>(groups.int64(2)), groups.text(3),
                          read_candidate(groups, 4)});
    }
    out.push_back(std::move(p));
  }
  return out;
}

} // namespace

RunDetails run_details(TuningDb& db, int64_t run_id) {
  RunDetails d;
  d.run = run_summary(db, run_id);
  sqlite3* h = StoreAccess::connection(db);
  d.groups = run_groups(h, run_id);
  d.statuses = status_counts(h, run_id);
  d.errors = run_errors(h, run_id);
  d.plans = run_plans(h, run_id);
  return d;
}

// ---- comparing two runs ----------------------------------------------------------------

namespace {

// The workloads a run measured ok (id and name), in the order of their first group in the run.
std::vector<std::pair<int64_t, std::string>> measured_workloads(sqlite3* h, int64_t run) {
  Statement st(h,
               "SELECT c.workload_id, min(coalesce(rg.first_layer, 1 << 30)), "
               "coalesce((SELECT rg2.layer_names FROM run_groups rg2 WHERE rg2.run_id = ?1 AND "
               "rg2.workload_id = c.workload_id ORDER BY rg2.first_layer LIMIT 1), "
               "w.description) FROM measurements m JOIN candidates c ON c.id = m.candidate_id "
               "JOIN workloads w ON w.id = c.workload_id "
               "LEFT JOIN run_groups rg ON rg.run_id = ?1 AND rg.workload_id = c.workload_id "
               "WHERE m.run_id = ?1 AND m.status = 'ok' GROUP BY c.workload_id "
               "ORDER BY 2, 1",
               "listing a run's measured workloads");
  st.bind_all(run);
  std::vector<std::pair<int64_t, std::string>> out;
  while (st.step())
    out.emplace_back(st.int64(0), st.text(2));
  return out;
}

} // namespace

Comparison compare_runs(TuningDb& db, int64_t run_a, int64_t run_b) {
  Comparison c;
  c.a = run_summary(db, run_a);
  c.b = run_summary(db, run_b);
  sqlite3* h = StoreAccess::connection(db);
  const auto in_a = measured_workloads(h, run_a);
  const auto in_b = measured_workloads(h, run_b);
  std::set<int64_t> b_ids;
  for (const auto& [w, name] : in_b)
    b_ids.insert(w);

  MeasuredLookup best_in_run(h, "m.run_id = ?2");
  for (const auto& [w, name] : in_a) {
    if (!b_ids.count(w))
      continue;
    auto ba = best_in_run.find(w, run_a);
    auto bb = best_in_run.find(w, run_b);
    BRICKDL_CHECK(ba && bb);
    c.both.push_back({name, std::move(*ba), std::move(*bb)});
  }
  const int both = static_cast<int>(c.both.size());
  c.only_a = static_cast<int>(in_a.size()) - both;
  c.only_b = static_cast<int>(in_b.size()) - both;
  return c;
}

// ---- export ----------------------------------------------------------------------------

namespace {

// Column names are the export's column names (see ExportTable).
constexpr const char* kExportSql =
    "SELECT m.id AS measurement_id, m.run_id, r.experiment, r.model, r.batch, r.precision, "
    "r.gpu_spec, t.fingerprint AS target, t.backend, r.git_revision, w.id AS workload_id, "
    "w.signature AS workload_signature, w.description AS workload_description, w.num_layers, "
    "w.macs, c.id AS candidate_id, c.strategy, c.bd, c.bh, c.bw, c.cb, c.bn, c.cl, c.threads, "
    "m.status, "
    "m.error, m.median_ms, m.min_ms, m.max_ms, m.p25_ms, m.p75_ms, m.max_rel_error, "
    "(SELECT count(*) FROM samples s WHERE s.measurement_id = m.id) AS num_samples, "
    "m.created_at, p.model_version AS pred_model_version, p.feasible AS pred_feasible, "
    "p.reason AS pred_reason, p.time_ms AS pred_time_ms, p.time_dram_ms AS pred_time_dram_ms, "
    "p.time_l2_ms AS pred_time_l2_ms, p.time_compute_ms AS pred_time_compute_ms, "
    "p.time_atomics_compulsory_ms AS pred_time_atomics_compulsory_ms, "
    "p.time_atomics_conflict_ms AS pred_time_atomics_conflict_ms, "
    "p.time_other_ms AS pred_time_other_ms, p.flops AS pred_flops, "
    "p.redundant_flops AS pred_redundant_flops, p.l1_bytes AS pred_l1_bytes, "
    "p.l2_bytes AS pred_l2_bytes, p.dram_bytes AS pred_dram_bytes, "
    "p.dram_lower_bound AS pred_dram_lower_bound, "
    "p.atomics_compulsory AS pred_atomics_compulsory, "
    "p.atomics_conflict AS pred_atomics_conflict "
    "FROM measurements m JOIN runs r ON r.id = m.run_id "
    "JOIN targets t ON t.id = m.target_id JOIN candidates c ON c.id = m.candidate_id "
    "JOIN workloads w ON w.id = c.workload_id "
    "LEFT JOIN predictions p ON p.rowid = (SELECT p2.rowid FROM predictions p2 WHERE "
    "p2.candidate_id = c.id AND p2.gpu_spec = r.gpu_spec ORDER BY p2.rowid DESC LIMIT 1) "
    "WHERE (?1 IS NULL OR m.run_id = ?1) ORDER BY m.id";
constexpr int kCandidateCol = 15; // candidate_id, strategy, bd, bh, bw, cb, bn, cl, threads

// A column value as SQLite stored it (a blob as text).
Cell cell(const Statement& st, int col) {
  switch (st.column_type(col)) {
  case SQLITE_INTEGER: return st.int64(col);
  case SQLITE_FLOAT: return st.real(col);
  case SQLITE_NULL: return nullptr;
  default: return st.text(col);
  }
}

// Counters of the exported measurements, by measurement id; `names` collects their names.
std::map<int64_t, std::map<std::string, double>>
export_counters(sqlite3* h, std::optional<int64_t> run_id, std::set<std::string>* names) {
  Statement st(h,
               "SELECT k.measurement_id, k.name, k.value FROM counters k JOIN measurements m "
               "ON m.id = k.measurement_id WHERE (?1 IS NULL OR m.run_id = ?1) "
               "ORDER BY k.measurement_id, k.name",
               "exporting counters");
  st.bind_all(run_id);
  std::map<int64_t, std::map<std::string, double>> out;
  while (st.step()) {
    out[st.int64(0)][st.text(1)] = st.real(2);
    names->insert(st.text(1));
  }
  return out;
}

// Samples of the exported measurements in order, by measurement id.
std::map<int64_t, std::vector<double>> export_samples(sqlite3* h, std::optional<int64_t> run_id) {
  Statement st(h,
               "SELECT s.measurement_id, s.time_ms FROM samples s JOIN measurements m "
               "ON m.id = s.measurement_id WHERE (?1 IS NULL OR m.run_id = ?1) "
               "ORDER BY s.measurement_id, s.idx",
               "exporting samples");
  st.bind_all(run_id);
  std::map<int64_t, std::vector<double>> out;
  while (st.step())
    out[st.int64(0)].push_back(st.real(1));
  return out;
}

} // namespace

ExportTable export_measurements(TuningDb& db, std::optional<int64_t> run_id, bool with_samples) {
  sqlite3* h = StoreAccess::connection(db);
  Statement st(h, kExportSql, "exporting measurements");
  st.bind_all(run_id);
  ExportTable out;
  for (int c = 0; c < st.column_count(); ++c)
    out.columns.push_back(st.column_name(c));
  BRICKDL_CHECK(out.columns[kCandidateCol] == "candidate_id" &&
                out.columns[kCandidateCol + 7] == "cl" &&
                out.columns[kCandidateCol + 8] == "threads");

  auto counters = export_counters(h, run_id, &out.counter_names);
  auto samples =
      with_samples ? export_samples(h, run_id) : std::map<int64_t, std::vector<double>>{};
  while (st.step()) {
    ExportRow row;
    for (int c = 0; c < st.column_count(); ++c)
      row.cells.push_back(cell(st, c));
    row.candidate = read_candidate(st, kCandidateCol);
    const int64_t id = st.int64(0);
    if (auto it = counters.find(id); it != counters.end())
      row.counters = std::move(it->second);
    if (auto it = samples.find(id); it != samples.end())
      row.samples_ms = std::move(it->second);
    out.rows.push_back(std::move(row));
  }
  return out;
}

} // namespace brickdl::query
