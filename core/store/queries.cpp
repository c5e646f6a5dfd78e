#include "core/store/queries.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/detail/statistics.h"
#include "core/error.h"
#include "core/measurer.h"
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

  // `keys` bind ?2, ?3, ... (a target or run id, ...).
  template <typename... Keys>
  std::optional<BestMeasurement> find(int64_t workload_id, const Keys&... keys) {
    st_.reset();
    st_.bind_all(workload_id, keys...);
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

// ---- sources ---------------------------------------------------------------------------

namespace {

constexpr std::string_view kValidationSuffix = kValidationTargetSuffix; // core/measurer.h

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

} // namespace

const char* source_label(Source source) {
  switch (source) {
  case Source::kMeasuredGpu: return "measured (GPU)";
  case Source::kMeasuredCpu: return "measured (CPU)";
  case Source::kPredicted: return "predicted (model)";
  }
  return "?";
}

bool is_validation_target(const std::string& fingerprint) {
  return fingerprint.size() >= kValidationSuffix.size() &&
         fingerprint.compare(fingerprint.size() - kValidationSuffix.size(),
                             kValidationSuffix.size(), kValidationSuffix) == 0;
}

Source target_source(const std::string& fingerprint) {
  if (is_validation_target(fingerprint))
    return Source::kPredicted;
  if (starts_with(fingerprint, "gpu:"))
    return Source::kMeasuredGpu;
  if (starts_with(fingerprint, "cpu:"))
    return Source::kMeasuredCpu;
  return Source::kPredicted;
}

std::string run_kind(const std::string& fingerprint) {
  if (is_validation_target(fingerprint))
    return starts_with(fingerprint, "gpu:") ? "validated (GPU)" : "validated (CPU)";
  const Source s = target_source(fingerprint);
  return s == Source::kPredicted ? "model only" : source_label(s);
}

// ---- best ------------------------------------------------------------------------------

bool BestRow::in_plan() const {
  return std::any_of(groups.begin(), groups.end(), [](const GroupRef& g) { return g.in_plan; });
}

namespace {

// The rows of best() before choosing: one per (source, model, batch, precision, target,
// workload), with the groups where the workload occurs and the GPU spec of its latest run.
struct BestKeys {
  std::vector<BestRow> rows;
  std::vector<int64_t> target_ids; // of rows[i]; 0 for predictions
};

// The groups of runs the filter admits, with their run, target and workload.
constexpr const char* kBestGroupsSql =
    "SELECT r.model, r.batch, r.precision, t.fingerprint, r.target_id, r.gpu_spec, "
    "r.id, w.id, w.signature, w.description, w.num_layers, w.macs, rg.first_layer, "
    "rg.last_layer, rg.layer_names, rg.label, EXISTS (SELECT 1 FROM plan_groups pg WHERE "
    "pg.plan_id = (SELECT max(p.id) FROM plans p WHERE p.run_id = r.id) AND pg.first_layer = "
    "rg.first_layer AND pg.last_layer = rg.last_layer) "
    "FROM run_groups rg JOIN runs r ON r.id = rg.run_id "
    "JOIN targets t ON t.id = r.target_id JOIN workloads w ON w.id = rg.workload_id "
    "WHERE (?1 = '' OR r.model = ?1) AND (?2 = '' OR lower(r.gpu_spec) = lower(?2)) "
    "AND (?3 = '' OR r.precision = ?3) AND (?4 IS NULL OR r.batch = ?4) "
    "AND (?5 = '' OR EXISTS (SELECT 1 FROM run_groups s WHERE s.run_id = rg.run_id AND "
    "s.first_layer = s.last_layer AND s.layer_names = ?5 AND s.first_layer BETWEEN "
    "rg.first_layer AND rg.last_layer)) "
    "ORDER BY r.model, r.batch, r.precision, rg.first_layer, rg.last_layer, r.id";

class BestKeyBuilder {
public:
  explicit BestKeyBuilder(const BestFilter& filter) : filter_(filter) {}

  // Adds the group of the current row of kBestGroupsSql under `source` and `target`.
  void add(const Statement& st, Source source, const std::string& target, int64_t target_id) {
    if (!admits(source, target))
      return;
    const int batch = static_cast<int>(st.int64(1));
    const Key key{static_cast<int>(source), st.text(0), batch, st.text(2), target, st.int64(7)};
    auto [it, fresh] = index_.emplace(key, out_.rows.size());
    if (fresh) {
      BestRow r;
      r.source = source;
      r.measured = source != Source::kPredicted;
      r.model = st.text(0);
      r.batch = batch;
      r.precision = st.text(2);
      r.target = target;
      r.workload_id = st.int64(7);
      r.signature = st.text(8);
      r.description = st.text(9);
      r.num_layers = static_cast<int>(st.int64(10));
      r.macs = st.int64(11);
      out_.rows.push_back(std::move(r));
      out_.target_ids.push_back(target_id);
    }
    BestRow& r = out_.rows[it->second];
    if (st.int64(6) >= latest_run_[key]) {
      latest_run_[key] = st.int64(6);
      r.gpu_spec = st.text(5);
    }
    const GroupRef g{static_cast<int>(st.int64(12)),
                     static_cast<int>(st.int64(13)),
                     st.text(14),
                     st.text(15),
                     st.int64(6),
                     st.int64(16) != 0};
    // The same group in several runs (resumed tuning) is listed once; in the plan if in any.
    auto same = std::find_if(r.groups.begin(), r.groups.end(), [&](const GroupRef& o) {
      return o.first_layer == g.first_layer && o.last_layer == g.last_layer;
    });
    if (same == r.groups.end())
      r.groups.push_back(g);
    else
      same->in_plan = same->in_plan || g.in_plan;
  }

  BestKeys take() { return std::move(out_); }

private:
  bool admits(Source source, const std::string& target) const {
    if (filter_.source == "measured" && source == Source::kPredicted)
      return false;
    if (filter_.source == "predicted" && source != Source::kPredicted)
      return false;
    return filter_.target.empty() || target.find(filter_.target) != std::string::npos;
  }

  using Key = std::tuple<int, std::string, int, std::string, std::string, int64_t>;
  const BestFilter& filter_;
  BestKeys out_;
  std::map<Key, size_t> index_;
  std::map<Key, int64_t> latest_run_;
};

BestKeys best_keys(sqlite3* h, const BestFilter& filter) {
  Statement st(h, kBestGroupsSql, "listing the groups of runs");
  st.bind_all(filter.model, filter.gpu, filter.precision, filter.batch, filter.layer);
  BestKeyBuilder keys(filter);
  while (st.step()) {
    const std::string fingerprint = st.text(3);
    keys.add(st, Source::kPredicted, "model:" + st.text(5), 0);
    const Source measured = target_source(fingerprint);
    if (measured != Source::kPredicted)
      keys.add(st, measured, fingerprint, st.int64(4));
  }
  return keys.take();
}

// The latest paper-unfused baseline prediction of a workload for a GPU spec.
class PaperBaselineLookup {
public:
  explicit PaperBaselineLookup(sqlite3* h)
      : st_(h,
            "SELECT time_ms FROM baseline_predictions WHERE workload_id = ?1 AND gpu_spec = ?2 "
            "AND baseline = 'paper-unfused' ORDER BY rowid DESC LIMIT 1",
            "finding a baseline prediction") {}
  std::optional<double> find(int64_t workload_id, const std::string& gpu_spec) {
    st_.reset();
    st_.bind_all(workload_id, gpu_spec);
    return st_.step() ? std::optional<double>(st_.real(0)) : std::nullopt;
  }

private:
  Statement st_;
};

// A counter of a measurement, when it has it.
std::optional<double> measurement_counter(sqlite3* h, int64_t measurement_id,
                                          const std::string& name) {
  Statement st(h, "SELECT value FROM counters WHERE measurement_id = ?1 AND name = ?2",
               "reading a counter");
  st.bind_all(measurement_id, name);
  return st.step() ? std::optional<double>(st.real(0)) : std::nullopt;
}

// The layerwise baselines of a BestRow, from its source: the workload's own layerwise
// candidate, else its layers' single-layer workloads (in the run of its first group) added up.
class LayerwiseBaselines {
public:
  explicit LayerwiseBaselines(sqlite3* h)
      : h_(h), measured_(h, "m.target_id = ?2 AND c.strategy = 'layerwise'"),
        predicted_(h, "c.strategy = 'layerwise'"), paper_(h),
        layer_workload_(h,
                        "SELECT workload_id FROM run_groups WHERE run_id = ?1 AND first_layer = ?2 "
                        "AND last_layer = ?2",
                        "finding a layer's workload") {}

  void fill(BestRow& r, int64_t target_id) {
    if (auto own = of_workload(r, r.workload_id, target_id)) {
      r.layerwise_ms = own->first;
      r.paper_layerwise_ms = own->second;
      r.layerwise_from = "candidate";
      return;
    }
    const GroupRef& g = r.groups.front();
    if (g.first_layer == g.last_layer)
      return;
    double lw = 0, paper = 0;
    bool paper_complete = true;
    for (int id = g.first_layer; id <= g.last_layer; ++id) {
      layer_workload_.reset();
      layer_workload_.bind_all(g.run_id, id);
      if (!layer_workload_.step())
        return;
      const auto one = of_workload(r, layer_workload_.int64(0), target_id);
      if (!one)
        return;
      lw += one->first;
      paper += one->second.value_or(0);
      paper_complete = paper_complete && one->second.has_value();
    }
    r.layerwise_ms = lw;
    r.layerwise_from = "layers";
    if (paper_complete)
      r.paper_layerwise_ms = paper;
  }

private:
  // (cudnn-fused layerwise, paper-unfused) of a workload from the row's source.
  std::optional<std::pair<double, std::optional<double>>>
  of_workload(const BestRow& r, int64_t workload_id, int64_t target_id) {
    if (r.measured) {
      auto m = measured_.find(workload_id, target_id);
      if (!m)
        return std::nullopt;
      return std::make_pair(m->spread.median_ms,
                            measurement_counter(h_, m->id, "variant.paper_unfused_ms"));
    }
    auto p = predicted_.find(workload_id, r.gpu_spec);
    if (!p)
      return std::nullopt;
    return std::make_pair(p->time_ms, paper_.find(workload_id, r.gpu_spec));
  }

  sqlite3* h_;
  MeasuredLookup measured_;
  PredictedLookup predicted_;
  PaperBaselineLookup paper_;
  Statement layer_workload_;
};

// Chooses a BestRow's candidate: measured on its target, or predicted for its GPU spec.
class BestChooser {
public:
  explicit BestChooser(sqlite3* h)
      : h_(h), measured_(h, "m.target_id = ?2"), predicted_(h, "1"), baselines_(h),
        count_(h,
               "SELECT count(DISTINCT m.candidate_id) FROM measurements m JOIN candidates c "
               "ON c.id = m.candidate_id WHERE c.workload_id = ?1 AND m.target_id = ?2 "
               "AND m.status = 'ok'",
               "counting measured candidates") {}

  // False when the row's source has nothing for the workload: nothing to recommend.
  bool choose(BestRow& r, int64_t target_id) {
    const bool found = r.measured ? choose_measured(r, target_id) : choose_predicted(r);
    if (found)
      baselines_.fill(r, target_id);
    return found;
  }

private:
  bool choose_measured(BestRow& r, int64_t target_id) {
    auto m = measured_.find(r.workload_id, target_id);
    if (!m)
      return false;
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
    if (auto p = candidate_prediction(h_, r.candidate.id, r.gpu_spec)) {
      r.model_version = p->first;
      r.predicted_ms = p->second;
    }
    return true;
  }

  bool choose_predicted(BestRow& r) {
    auto p = predicted_.find(r.workload_id, r.gpu_spec);
    if (!p)
      return false;
    r.candidate = p->candidate;
    r.time_ms = p->time_ms;
    r.predicted_ms = p->time_ms;
    r.model_version = p->model_version;
    return true;
  }

  sqlite3* h_;
  MeasuredLookup measured_;
  PredictedLookup predicted_;
  LayerwiseBaselines baselines_;
  Statement count_;
};

// Measured on GPUs first, then CPUs, then predictions; by target, model, batch, precision and
// the first group's position.
bool best_before(const BestRow& a, const BestRow& b) {
  const auto key = [](const BestRow& r) {
    return std::make_tuple(static_cast<int>(r.source), r.target, r.model, r.batch, r.precision,
                           r.groups.front().first_layer, r.groups.front().last_layer);
  };
  return key(a) < key(b);
}

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
  std::stable_sort(out.begin(), out.end(), best_before);
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
    r.kind = run_kind(r.target);
    out.push_back(std::move(r));
  }
  return out;
}

// ---- one run ---------------------------------------------------------------------------

namespace {

// The run's --fresh flag, command-line overrides and calibration, as its configuration recorded
// them (a configuration that is no JSON, or lacks them, has none).
void read_config_notes(RunSummary& r) {
  const nlohmann::json config = nlohmann::json::parse(r.config_json, nullptr, false);
  if (!config.is_object())
    return;
  if (auto f = config.find("fresh"); f != config.end() && f->is_boolean())
    r.fresh = f->get<bool>();
  if (auto c = config.find("calibration"); c != config.end() && c->is_object())
    if (auto s = c->find("summary"); s != c->end() && s->is_string())
      r.calibration = s->get<std::string>();
  auto o = config.find("overrides");
  if (o == config.end() || !o->is_object())
    return;
  for (const auto& [key, value] : o->items())
    r.overrides.push_back(key + " " +
                          (value.is_string() ? value.get<std::string>() : value.dump()));
}

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
  r.kind = run_kind(r.target);
  read_config_notes(r);
  return r;
}

// The status of a validation run's check of a workload ("" when it checked none).
std::string validation_status(sqlite3* h, int64_t workload_id, int64_t run_id) {
  Statement st(h,
               "SELECT m.status FROM measurements m JOIN candidates c ON c.id = m.candidate_id "
               "WHERE c.workload_id = ?1 AND m.run_id = ?2 AND c.strategy <> 'layerwise' "
               "ORDER BY m.id LIMIT 1",
               "reading a validation");
  st.bind_all(workload_id, run_id);
  return st.step() ? st.text(0) : "";
}

// The run's groups, with what was measured of each (in this run): its best timing with the
// model's prediction of that candidate, or, for a validation run, the status of its check.
std::vector<RunGroupRow> run_groups(sqlite3* h, const RunSummary& run) {
  const int64_t run_id = run.id;
  const bool validation = is_validation_target(run.target);
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
    if (validation) {
      g.validated = validation_status(h, w, run_id);
    } else if ((g.best = best_in_run.find(w, run_id))) {
      if (auto p = candidate_prediction(h, g.best->candidate.id, run.gpu_spec))
        g.best->predicted_ms = p->second;
    }
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
  d.groups = run_groups(h, d.run);
  d.statuses = status_counts(h, run_id);
  d.errors = run_errors(h, run_id);
  d.plans = run_plans(h, run_id);
  return d;
}

// ---- comparing two runs ----------------------------------------------------------------

namespace {

// The measurements a run stands on (queries.h, "The measurements a run stands on"), as an SQL
// condition on `m` with ?2 the run's target, ?3 the run, ?4 1 for its own only, ?5 the end of
// its view (an ISO-8601 stamp).
constexpr const char* kRunViewSql =
    "m.target_id = ?2 AND (m.run_id = ?3 OR (?4 = 0 AND m.created_at <= ?5 AND "
    "c.workload_id IN (SELECT rg.workload_id FROM run_groups rg WHERE rg.run_id = ?3)))";

struct RunView {
  int64_t target_id = 0, run_id = 0;
  bool own_only = false;
  std::string until;
};

RunView run_view(sqlite3* h, const RunSummary& r, bool own_only, const std::string& now) {
  Statement st(h, "SELECT target_id, coalesce(ended_at, heartbeat_at, ?2) FROM runs WHERE id = ?1",
               "reading a run's end");
  st.bind_all(r.id, now);
  BRICKDL_CHECK(st.step());
  return RunView{st.int64(0), r.id, own_only || r.fresh, st.text(1)};
}

// Binds kRunViewSql's parameters ?2 .. ?5.
void bind_view(Statement& st, const RunView& v) {
  st.bind(2, v.target_id).bind(3, v.run_id).bind(4, int64_t{v.own_only}).bind(5, v.until);
}

// The workloads of a run's view (id and name), in the order of their first group in the run.
std::vector<std::pair<int64_t, std::string>> view_workloads(sqlite3* h, const RunView& v) {
  Statement st(h,
               fmt::format("SELECT c.workload_id, min(coalesce(rg.first_layer, 1 << 30)), "
                           "coalesce((SELECT rg2.layer_names FROM run_groups rg2 WHERE "
                           "rg2.run_id = ?3 AND rg2.workload_id = c.workload_id ORDER BY "
                           "rg2.first_layer LIMIT 1), w.description) FROM measurements m "
                           "JOIN candidates c ON c.id = m.candidate_id JOIN workloads w ON "
                           "w.id = c.workload_id LEFT JOIN run_groups rg ON rg.run_id = ?3 AND "
                           "rg.workload_id = c.workload_id WHERE m.status = 'ok' AND "
                           "m.median_ms IS NOT NULL AND {} GROUP BY c.workload_id "
                           "ORDER BY 2, 1",
                           kRunViewSql),
               "listing a run's measured workloads");
  bind_view(st, v);
  std::vector<std::pair<int64_t, std::string>> out;
  while (st.step())
    out.emplace_back(st.int64(0), st.text(2));
  return out;
}

RunMeasurements view_counts(sqlite3* h, const RunView& v) {
  Statement st(h,
               fmt::format("SELECT coalesce(sum(m.run_id = ?3), 0), coalesce(sum(m.run_id <> ?3), "
                           "0) FROM measurements m JOIN candidates c ON c.id = m.candidate_id "
                           "WHERE m.status = 'ok' AND {}",
                           kRunViewSql),
               "counting a run's measurements");
  bind_view(st, v);
  BRICKDL_CHECK(st.step());
  return RunMeasurements{st.int64(0), st.int64(1)};
}

class ViewLookup {
public:
  explicit ViewLookup(sqlite3* h) : lookup_(h, kRunViewSql) {}
  std::optional<BestMeasurement> find(int64_t workload_id, const RunView& v) {
    return lookup_.find(workload_id, v.target_id, v.run_id, int64_t{v.own_only}, v.until);
  }

private:
  MeasuredLookup lookup_;
};

void require_timings(const RunSummary& r) {
  if (target_source(r.target) != Source::kPredicted)
    return;
  throw UserError(fmt::format(
      "run {} has no timings ({}: {}); `brickdl-query accuracy` sets predictions beside "
      "measurements, `brickdl-query best --source predicted` lists the model's choices",
      r.id, r.kind,
      is_validation_target(r.target) ? "its CPU runs check a plan's outputs and are not timed"
                                     : "the model's predictions only"));
}

} // namespace

Comparison compare_runs(TuningDb& db, int64_t run_a, int64_t run_b, bool own_only) {
  Comparison c;
  c.a = run_summary(db, run_a);
  c.b = run_summary(db, run_b);
  require_timings(c.a);
  require_timings(c.b);
  c.own_only = own_only;
  sqlite3* h = StoreAccess::connection(db);
  const std::string now = db.now();
  const RunView va = run_view(h, c.a, own_only, now), vb = run_view(h, c.b, own_only, now);
  c.used_a = view_counts(h, va);
  c.used_b = view_counts(h, vb);
  const auto in_a = view_workloads(h, va);
  const auto in_b = view_workloads(h, vb);
  std::set<int64_t> b_ids;
  for (const auto& [w, name] : in_b)
    b_ids.insert(w);

  ViewLookup best_in_view(h);
  for (const auto& [w, name] : in_a) {
    if (!b_ids.count(w))
      continue;
    auto ba = best_in_view.find(w, va);
    auto bb = best_in_view.find(w, vb);
    BRICKDL_CHECK(ba && bb);
    c.both.push_back({name, std::move(*ba), std::move(*bb)});
  }
  const int both = static_cast<int>(c.both.size());
  c.only_a = static_cast<int>(in_a.size()) - both;
  c.only_b = static_cast<int>(in_b.size()) - both;
  return c;
}

// ---- predicted vs measured ---------------------------------------------------------------

namespace {

using brickdl::detail::median;

// The points of every ok timing with a feasible prediction for its run's GPU spec.
constexpr const char* kAccuracySql =
    "SELECT m.id, m.run_id, t.fingerprint, r.gpu_spec, p.model_version, p.time_ms, m.median_ms, "
    "p.dram_bytes, p.l1_bytes, "
    "(SELECT CASE WHEN count(*) = 2 THEN sum(k.value) END FROM counters k WHERE "
    "k.measurement_id = m.id AND k.name IN ('dram__bytes_read.sum', 'dram__bytes_write.sum')), "
    "(SELECT CASE WHEN count(*) = 2 THEN sum(k.value) END FROM counters k WHERE "
    "k.measurement_id = m.id AND k.name IN ('bytes_loaded', 'bytes_stored')), "
    "coalesce((SELECT rg.layer_names FROM run_groups rg WHERE rg.run_id = m.run_id AND "
    "rg.workload_id = c.workload_id ORDER BY rg.first_layer LIMIT 1), w.description), "
    "c.id, c.strategy, c.bd, c.bh, c.bw, c.cb, c.bn, c.cl, c.threads "
    "FROM measurements m JOIN runs r ON r.id = m.run_id JOIN targets t ON t.id = m.target_id "
    "JOIN candidates c ON c.id = m.candidate_id JOIN workloads w ON w.id = c.workload_id "
    "JOIN predictions p ON p.rowid = (SELECT p2.rowid FROM predictions p2 WHERE "
    "p2.candidate_id = c.id AND p2.gpu_spec = r.gpu_spec ORDER BY p2.rowid DESC LIMIT 1) "
    "WHERE m.status = 'ok' AND m.median_ms IS NOT NULL AND p.feasible = 1 "
    "AND (?1 IS NULL OR m.run_id = ?1) AND (?2 = '' OR instr(t.fingerprint, ?2) > 0) "
    "ORDER BY t.fingerprint, r.gpu_spec, p.model_version, m.id";

void finish_set(AccuracySet& set) {
  std::vector<double> pt, mt, pb, mb;
  for (const AccuracyPoint& p : set.points) {
    pt.push_back(p.predicted_ms);
    mt.push_back(p.measured_ms);
    if (p.predicted_bytes && p.measured_bytes) {
      pb.push_back(*p.predicted_bytes);
      mb.push_back(*p.measured_bytes);
    }
  }
  set.time = accuracy_stats(pt, mt);
  set.bytes = accuracy_stats(pb, mb);
}

} // namespace

AccuracyStats accuracy_stats(const std::vector<double>& predicted,
                             const std::vector<double>& measured) {
  BRICKDL_CHECK(predicted.size() == measured.size());
  AccuracyStats s;
  std::vector<double> ratio, error;
  for (size_t i = 0; i < predicted.size(); ++i) {
    if (!(measured[i] > 0) || !(predicted[i] > 0))
      continue; // a zero or non-finite number has no relative error
    ratio.push_back(measured[i] / predicted[i]);
    error.push_back(std::abs(predicted[i] - measured[i]) / measured[i]);
  }
  s.n = static_cast<int>(error.size());
  if (s.n == 0)
    return s;
  s.median_error = median(error);
  s.worst_error = *std::max_element(error.begin(), error.end());
  s.scale = median(ratio);
  std::vector<double> scaled;
  for (size_t i = 0; i < predicted.size(); ++i)
    if (measured[i] > 0 && predicted[i] > 0)
      scaled.push_back(std::abs(predicted[i] * s.scale - measured[i]) / measured[i]);
  s.median_scaled_error = median(scaled);
  s.worst_scaled_error = *std::max_element(scaled.begin(), scaled.end());
  s.spearman = brickdl::detail::spearman(predicted, measured);
  return s;
}

std::vector<AccuracySet> accuracy(TuningDb& db, const AccuracyFilter& filter) {
  Statement st(StoreAccess::connection(db), kAccuracySql,
               "setting predictions beside measurements");
  st.bind_all(filter.run, filter.target);
  std::vector<AccuracySet> out;
  while (st.step()) {
    const std::string target = st.text(2);
    if (is_validation_target(target))
      continue;
    if (out.empty() || out.back().target != target || out.back().gpu_spec != st.text(3) ||
        out.back().model_version != st.text(4)) {
      AccuracySet set;
      set.target = target;
      set.gpu_spec = st.text(3);
      set.model_version = st.text(4);
      set.source = target_source(target);
      set.bytes_kind = set.source == Source::kMeasuredGpu ? "DRAM" : "L1 (loads + stores)";
      out.push_back(std::move(set));
    }
    AccuracySet& set = out.back();
    AccuracyPoint p;
    p.measurement_id = st.int64(0);
    p.run_id = st.int64(1);
    p.predicted_ms = st.real(5);
    p.measured_ms = st.real(6);
    const bool gpu = set.source == Source::kMeasuredGpu;
    p.predicted_bytes = st.real(gpu ? 7 : 8);
    p.measured_bytes = st.optional_real(gpu ? 9 : 10);
    if (!p.measured_bytes)
      p.predicted_bytes.reset();
    p.group = st.text(11);
    p.candidate = read_candidate(st, 12);
    set.points.push_back(std::move(p));
  }
  for (AccuracySet& set : out)
    finish_set(set);
  return out;
}

// ---- export ----------------------------------------------------------------------------

namespace {

// Column names are the export's column names (see ExportTable).
constexpr const char* kExportSql =
    "SELECT m.id AS measurement_id, m.run_id, r.experiment, r.model, r.batch, r.precision, "
    "r.gpu_spec, t.fingerprint AS target, t.backend, r.git_revision, w.id AS workload_id, "
    "w.signature AS workload_signature, w.description AS workload_description, w.num_layers, "
    "w.macs, c.id AS candidate_id, c.strategy, c.bd, c.bh, c.bw, c.cb, c.bn, c.cl, c.threads, "
    "m.status, CASE WHEN t.fingerprint LIKE '%#validation' THEN 'validation' ELSE 'timing' END "
    "AS measurement_kind, m.error, "
    "CASE WHEN t.fingerprint LIKE '%#validation' THEN NULL ELSE m.median_ms END AS median_ms, "
    "CASE WHEN t.fingerprint LIKE '%#validation' THEN NULL ELSE m.min_ms END AS min_ms, "
    "CASE WHEN t.fingerprint LIKE '%#validation' THEN NULL ELSE m.max_ms END AS max_ms, "
    "CASE WHEN t.fingerprint LIKE '%#validation' THEN NULL ELSE m.p25_ms END AS p25_ms, "
    "CASE WHEN t.fingerprint LIKE '%#validation' THEN NULL ELSE m.p75_ms END AS p75_ms, "
    "m.max_rel_error, "
    "CASE WHEN t.fingerprint LIKE '%#validation' THEN 0 ELSE (SELECT count(*) FROM samples s "
    "WHERE s.measurement_id = m.id) END AS num_samples, "
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
               "ON m.id = s.measurement_id JOIN targets t ON t.id = m.target_id "
               "WHERE (?1 IS NULL OR m.run_id = ?1) AND t.fingerprint NOT LIKE '%#validation' "
               "ORDER BY s.measurement_id, s.idx",
               "exporting samples");
  st.bind_all(run_id);
  std::map<int64_t, std::vector<double>> out;
  while (st.step())
    out[st.int64(0)].push_back(st.real(1));
  return out;
}

// The columns of `predictions` that export_predictions() places beside the candidate; the
// rest follow them under their own names.
constexpr const char* kPredictionKeyCols[] = {"candidate_id", "gpu_spec", "model_version",
                                              "feasible", "reason"};

// The other columns of `predictions` in the schema's order, as the database has them (a
// column added to the schema is exported without a change here).
std::vector<std::string> prediction_value_columns(sqlite3* h) {
  Statement st(h, "SELECT name FROM pragma_table_info('predictions') ORDER BY cid",
               "reading the columns of predictions");
  std::vector<std::string> out;
  while (st.step()) {
    const std::string name = st.text(0);
    if (std::find(std::begin(kPredictionKeyCols), std::end(kPredictionKeyCols), name) ==
        std::end(kPredictionKeyCols))
      out.push_back(name);
  }
  return out;
}

// Every prediction for a run's GPU spec of a candidate of the run's workloads, with the
// workload's first group in the run (the fewest layers first on a tie); `values` are the
// further prediction columns, each selected under its own name.
std::string predictions_sql(const std::vector<std::string>& values) {
  std::string cols;
  for (const std::string& v : values)
    cols += fmt::format(", p.\"{0}\" AS \"{0}\"", v);
  return fmt::format(
      "SELECT r.id AS run, w.id AS workload_id, w.signature AS signature, "
      "w.description AS description, g.layer_names AS layers, g.first_layer AS first_layer, "
      "g.last_layer AS last_layer, c.id AS candidate_id, c.strategy AS strategy, c.bd AS bd, "
      "c.bh AS bh, c.bw AS bw, c.cb AS cb, c.bn AS bn, c.cl AS cl, c.threads AS threads, "
      "p.gpu_spec AS gpu_spec, p.model_version AS model_version, p.feasible AS feasible, "
      "p.reason AS reason{} "
      "FROM runs r JOIN run_groups g ON g.run_id = r.id "
      "JOIN workloads w ON w.id = g.workload_id JOIN candidates c ON c.workload_id = w.id "
      "JOIN predictions p ON p.candidate_id = c.id AND p.gpu_spec = r.gpu_spec "
      "WHERE (?1 IS NULL OR r.id = ?1) AND NOT EXISTS (SELECT 1 FROM run_groups g2 WHERE "
      "g2.run_id = g.run_id AND g2.workload_id = g.workload_id AND (g2.first_layer < "
      "g.first_layer OR (g2.first_layer = g.first_layer AND g2.last_layer < g.last_layer))) "
      "ORDER BY r.id, g.first_layer, c.id, p.model_version",
      cols);
}
constexpr int kPredictionCandidateCol = 7; // candidate_id, strategy, bd, ..., threads

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

ExportTable export_predictions(TuningDb& db, std::optional<int64_t> run_id) {
  if (run_id)
    run_summary(db, *run_id); // an unknown run is a UserError naming it
  sqlite3* h = StoreAccess::connection(db);
  Statement st(h, predictions_sql(prediction_value_columns(h)), "exporting predictions");
  st.bind_all(run_id);
  ExportTable out;
  for (int c = 0; c < st.column_count(); ++c)
    out.columns.push_back(st.column_name(c));
  BRICKDL_CHECK(out.columns[kPredictionCandidateCol] == "candidate_id" &&
                out.columns[kPredictionCandidateCol + 8] == "threads");
  while (st.step()) {
    ExportRow row;
    for (int c = 0; c < st.column_count(); ++c)
      row.cells.push_back(cell(st, c));
    row.candidate = read_candidate(st, kPredictionCandidateCol);
    out.rows.push_back(std::move(row));
  }
  return out;
}

} // namespace brickdl::query
