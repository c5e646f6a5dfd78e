#include "core/query.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "core/detail/sqlite.h"
#include "core/detail/text_table.h"
#include "core/error.h"

namespace brickdl::query {

using detail::Statement;
using detail::TextTable;
using Json = nlohmann::ordered_json;

namespace {

std::string ms(double v) {
  return fmt::format("{:.4f}", v);
}
std::string ms(const std::optional<double>& v) {
  return v ? ms(*v) : "-";
}
std::string range(double lo, double hi) {
  return ms(lo) + "-" + ms(hi);
}

Json optional_json(const std::optional<double>& v) {
  return v ? Json(*v) : Json(nullptr);
}

// Candidate columns in this order: id, strategy, bd, bh, bw, cb, threads.
CandidateRef read_candidate(const Statement& st, int first_col) {
  CandidateRef c;
  c.id = st.int64(first_col);
  BRICKDL_CHECK(parse_strategy(st.text(first_col + 1), &c.strategy),
                "bad strategy '" << st.text(first_col + 1) << "'");
  c.brick.d = static_cast<int>(st.int64(first_col + 2));
  c.brick.h = static_cast<int>(st.int64(first_col + 3));
  c.brick.w = static_cast<int>(st.int64(first_col + 4));
  c.brick.cb = static_cast<int>(st.int64(first_col + 5));
  c.threads = static_cast<int>(st.int64(first_col + 6));
  return c;
}

constexpr const char* kCandidateCols = "c.id, c.strategy, c.bd, c.bh, c.bw, c.cb, c.threads";

Json candidate_json(const CandidateRef& c) {
  Json j;
  j["id"] = c.id;
  j["strategy"] = strategy_name(c.strategy);
  j["brick"] = {{"d", c.brick.d}, {"h", c.brick.h}, {"w", c.brick.w}, {"cb", c.brick.cb}};
  j["threads"] = c.threads;
  j["config"] = c.config();
  return j;
}

std::string group_text(const GroupRef& g) {
  return g.label.empty() ? g.layer_names : g.label + ": " + g.layer_names;
}

struct RunSummary {
  int64_t id = 0;
  std::string experiment, experiment_path, config_json, model, precision, gpu_spec;
  int batch = 1;
  std::string target, backend, git_revision, started_at, ended_at, status;
};

RunSummary load_run(TuningDb& db, int64_t run_id) {
  Statement st(db.handle(),
               "SELECT r.id, r.experiment, r.experiment_path, r.config_json, r.model, r.batch, "
               "r.precision, r.gpu_spec, t.fingerprint, t.backend, r.git_revision, r.started_at, "
               "r.ended_at, r.status FROM runs r JOIN targets t ON t.id = r.target_id "
               "WHERE r.id = ?1",
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
  r.ended_at = st.text(12);
  r.status = st.text(13);
  return r;
}

// The best `ok` measurement of a workload among `where` (an SQL condition on m and c).
struct BestMeasurement {
  int64_t id = 0, run_id = 0;
  CandidateRef candidate;
  Spread spread;
  int num_samples = 0;
};

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

std::vector<BestRow> best(TuningDb& db, const BestFilter& filter) {
  sqlite3* h = db.handle();
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
  std::vector<BestRow> rows;
  std::vector<int64_t> target_ids; // of rows[i]
  std::map<Key, size_t> index;
  std::map<Key, int64_t> latest_run;
  while (keys.step()) {
    const int batch = static_cast<int>(keys.int64(1));
    const Key key{keys.text(0), batch, keys.text(2), keys.int64(4), keys.int64(7)};
    auto [it, fresh] = index.emplace(key, rows.size());
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
      rows.push_back(std::move(r));
      target_ids.push_back(keys.int64(4));
    }
    BestRow& r = rows[it->second];
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

  MeasuredLookup measured(h, "m.target_id = ?2");
  MeasuredLookup measured_layerwise(h, "m.target_id = ?2 AND c.strategy = 'layerwise'");
  PredictedLookup predicted(h, "1");
  PredictedLookup predicted_layerwise(h, "c.strategy = 'layerwise'");
  Statement count(h,
                  "SELECT count(DISTINCT m.candidate_id) FROM measurements m JOIN candidates c "
                  "ON c.id = m.candidate_id WHERE c.workload_id = ?1 AND m.target_id = ?2 "
                  "AND m.status = 'ok'",
                  "counting measured candidates");

  std::vector<BestRow> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    BestRow& r = rows[i];
    const int64_t target_id = target_ids[i];
    if (auto m = measured.find(r.workload_id, target_id)) {
      r.measured = true;
      r.candidate = m->candidate;
      r.time_ms = m->spread.median_ms;
      r.spread = m->spread;
      r.measurement_id = m->id;
      r.run_id = m->run_id;
      r.num_samples = m->num_samples;
      count.reset();
      count.bind_all(r.workload_id, target_id);
      BRICKDL_CHECK(count.step());
      r.candidates_measured = static_cast<int>(count.int64(0));
      if (auto lw = measured_layerwise.find(r.workload_id, target_id))
        r.layerwise_ms = lw->spread.median_ms;
      if (auto p = candidate_prediction(h, r.candidate.id, r.gpu_spec)) {
        r.model_version = p->first;
        r.predicted_ms = p->second;
      }
    } else if (auto p = predicted.find(r.workload_id, r.gpu_spec)) {
      r.candidate = p->candidate;
      r.time_ms = p->time_ms;
      r.predicted_ms = p->time_ms;
      r.model_version = p->model_version;
      if (auto lw = predicted_layerwise.find(r.workload_id, r.gpu_spec))
        r.layerwise_ms = lw->time_ms;
    } else {
      continue; // neither measured nor predicted: nothing to recommend
    }
    out.push_back(r);
  }
  return out;
}

void print_best(const std::vector<BestRow>& rows, std::ostream& os) {
  if (rows.empty()) {
    os << "no groups match (brickdl-query runs lists what the database holds)\n";
    return;
  }
  TextTable t({"model", "batch", "precision", "target", "group", "best", "source", "time_ms",
               "p25-p75_ms", "layerwise_ms", "speedup"},
              "lrlllllrrrr");
  for (const BestRow& r : rows) {
    std::string group = group_text(r.groups.front());
    if (r.groups.size() > 1)
      group += fmt::format(" (x{})", r.groups.size());
    t.add_row({r.model, std::to_string(r.batch), r.precision, r.target, group, r.candidate.config(),
               r.measured ? "measured" : "predicted", ms(r.time_ms),
               r.spread ? range(r.spread->p25_ms, r.spread->p75_ms) : "-", ms(r.layerwise_ms),
               r.layerwise_ms && r.time_ms > 0 ? fmt::format("{:.2f}x", *r.layerwise_ms / r.time_ms)
                                               : "-"});
  }
  t.print(os);
}

Json best_json(const std::vector<BestRow>& rows) {
  Json out = Json::array();
  for (const BestRow& r : rows) {
    Json j;
    j["model"] = r.model;
    j["batch"] = r.batch;
    j["precision"] = r.precision;
    j["target"] = r.target;
    j["gpu_spec"] = r.gpu_spec;
    j["workload"] = {{"id", r.workload_id},
                     {"signature", r.signature},
                     {"description", r.description},
                     {"num_layers", r.num_layers},
                     {"macs", r.macs}};
    Json groups = Json::array();
    for (const GroupRef& g : r.groups) {
      groups.push_back({{"first_layer", g.first_layer},
                        {"last_layer", g.last_layer},
                        {"layer_names", g.layer_names},
                        {"label", g.label}});
    }
    j["groups"] = groups;
    j["source"] = r.measured ? "measured" : "predicted";
    j["candidate"] = candidate_json(r.candidate);
    j["time_ms"] = r.time_ms;
    if (r.measured) {
      j["measurement"] = {{"id", r.measurement_id},
                          {"run_id", r.run_id},
                          {"median_ms", r.spread->median_ms},
                          {"p25_ms", r.spread->p25_ms},
                          {"p75_ms", r.spread->p75_ms},
                          {"min_ms", r.spread->min_ms},
                          {"max_ms", r.spread->max_ms},
                          {"num_samples", r.num_samples},
                          {"candidates_measured", r.candidates_measured}};
    } else {
      j["measurement"] = nullptr;
    }
    if (r.predicted_ms) {
      j["prediction"] = {{"model_version", r.model_version}, {"time_ms", *r.predicted_ms}};
    } else {
      j["prediction"] = nullptr;
    }
    j["layerwise_ms"] = optional_json(r.layerwise_ms);
    j["speedup_vs_layerwise"] =
        r.layerwise_ms && r.time_ms > 0 ? Json(*r.layerwise_ms / r.time_ms) : Json(nullptr);
    out.push_back(std::move(j));
  }
  return out;
}

// ---- runs / show -----------------------------------------------------------------------

void print_runs(TuningDb& db, std::ostream& os) {
  Statement st(db.handle(),
               "SELECT r.id, r.experiment, r.model, r.batch, r.precision, t.fingerprint, "
               "r.status, r.started_at, r.ended_at, "
               "(SELECT count(*) FROM measurements m WHERE m.run_id = r.id) "
               "FROM runs r JOIN targets t ON t.id = r.target_id ORDER BY r.id",
               "listing runs");
  TextTable t({"id", "experiment", "model", "batch", "precision", "target", "status", "started",
               "ended", "measurements"},
              "rllrlllllr");
  while (st.step()) {
    t.add_row({std::to_string(st.int64(0)), st.text(1), st.text(2), std::to_string(st.int64(3)),
               st.text(4), st.text(5), st.text(6), st.text(7), st.is_null(8) ? "-" : st.text(8),
               std::to_string(st.int64(9))});
  }
  if (t.num_rows() == 0) {
    os << "no runs in '" << db.path() << "'\n";
    return;
  }
  t.print(os);
}

void print_run(TuningDb& db, int64_t run_id, std::ostream& os) {
  sqlite3* h = db.handle();
  const RunSummary r = load_run(db, run_id);
  os << fmt::format("run {}: {}", r.id, r.experiment);
  if (!r.experiment_path.empty())
    os << " (" << r.experiment_path << ")";
  os << "\n";
  os << fmt::format("  model      {}, batch {}, {}\n", r.model, r.batch, r.precision);
  os << fmt::format("  gpu spec   {}\n", r.gpu_spec);
  os << fmt::format("  target     {} ({})\n", r.target, r.backend);
  os << fmt::format("  revision   {}\n", r.git_revision);
  os << fmt::format("  status     {}, started {}, ended {}\n", r.status, r.started_at,
                    r.ended_at.empty() ? "-" : r.ended_at);

  // The configuration as the tuner recorded it (pretty-printed when it is JSON).
  os << "config:\n";
  std::string config = r.config_json;
  try {
    config = Json::parse(r.config_json).dump(2);
  } catch (const Json::exception&) {
  }
  size_t pos = 0;
  while (pos <= config.size()) {
    const size_t nl = config.find('\n', pos);
    os << "  " << config.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos)
       << "\n";
    if (nl == std::string::npos)
      break;
    pos = nl + 1;
  }

  // Groups, with what was measured of each (in this run).
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
  TextTable gt({"layers", "group", "label", "workload", "measured", "best", "median_ms"},
               "llllrlr");
  while (groups.step()) {
    const int64_t w = groups.int64(5);
    measured_count.reset();
    measured_count.bind_all(w, run_id);
    BRICKDL_CHECK(measured_count.step());
    const auto b = best_in_run.find(w, run_id);
    gt.add_row({fmt::format("{}-{}", groups.int64(0), groups.int64(1)), groups.text(2),
                groups.text(3), groups.text(4), std::to_string(measured_count.int64(0)),
                b ? b->candidate.config() : "-", b ? ms(b->spread.median_ms) : "-"});
  }
  os << fmt::format("groups ({}):\n", gt.num_rows());
  if (gt.num_rows() > 0)
    gt.print(os, "  ");

  // Measurements: counts per status, then the distinct errors.
  Statement statuses(h,
                     "SELECT status, count(*) FROM measurements WHERE run_id = ?1 "
                     "GROUP BY status ORDER BY status",
                     "counting a run's measurements");
  statuses.bind_all(run_id);
  int64_t total = 0;
  std::string counts;
  while (statuses.step()) {
    total += statuses.int64(1);
    counts +=
        fmt::format("{}{} {}", counts.empty() ? "" : ", ", statuses.text(0), statuses.int64(1));
  }
  os << fmt::format("measurements ({}){}{}\n", total, total ? ": " : "", counts);
  Statement errors(h,
                   "SELECT m.status, m.error, count(*), min(m.id), w.description, "
                   "c.strategy, c.bd, c.bh, c.bw, c.cb, c.threads FROM measurements m "
                   "JOIN candidates c ON c.id = m.candidate_id "
                   "JOIN workloads w ON w.id = c.workload_id "
                   "WHERE m.run_id = ?1 AND m.status <> 'ok' GROUP BY m.status, m.error "
                   "ORDER BY min(m.id)",
                   "listing a run's errors");
  errors.bind_all(run_id);
  TextTable et({"status", "count", "first candidate", "error"}, "lrll");
  while (errors.step()) {
    CandidateRef c;
    parse_strategy(errors.text(5), &c.strategy);
    c.brick = BrickShape{static_cast<int>(errors.int64(6)), static_cast<int>(errors.int64(7)),
                         static_cast<int>(errors.int64(8)), static_cast<int>(errors.int64(9))};
    c.threads = static_cast<int>(errors.int64(10));
    std::string error = errors.text(1);
    const size_t nl = error.find('\n');
    if (nl != std::string::npos)
      error = error.substr(0, nl) + " ...";
    if (error.size() > 100)
      error = error.substr(0, 97) + "...";
    et.add_row({errors.text(0), std::to_string(errors.int64(2)), c.config(), error});
  }
  if (et.num_rows() > 0) {
    os << "errors:\n";
    et.print(os, "  ");
  }

  // Plans with their groups.
  Statement plans(h,
                  "SELECT id, kind, predicted_ms, measured_ms, layerwise_predicted_ms, "
                  "layerwise_measured_ms, created_at FROM plans WHERE run_id = ?1 ORDER BY id",
                  "listing a run's plans");
  plans.bind_all(run_id);
  Statement plan_groups(h,
                        "SELECT pg.idx, pg.first_layer, pg.last_layer, "
                        "coalesce(rg.layer_names, ''), " +
                            std::string(kCandidateCols) +
                            " FROM plan_groups pg JOIN candidates c ON c.id = pg.candidate_id "
                            "LEFT JOIN run_groups rg ON rg.run_id = ?2 AND rg.first_layer = "
                            "pg.first_layer AND rg.last_layer = pg.last_layer "
                            "WHERE pg.plan_id = ?1 ORDER BY pg.idx",
                        "listing a plan's groups");
  int num_plans = 0;
  std::string plan_text;
  while (plans.step()) {
    ++num_plans;
    const auto measured = plans.optional_real(3);
    const auto lw_measured = plans.optional_real(5);
    plan_text += fmt::format(
        "  plan {} ({}, {}): predicted {} ms, measured {} ms; layerwise predicted {} ms, "
        "measured {} ms\n",
        plans.int64(0), plans.text(1), plans.text(6), ms(plans.real(2)), ms(measured),
        ms(plans.real(4)), ms(lw_measured));
    plan_groups.reset();
    plan_groups.bind_all(plans.int64(0), run_id);
    TextTable pt({"#", "layers", "group", "candidate"}, "rlll");
    while (plan_groups.step()) {
      pt.add_row({std::to_string(plan_groups.int64(0)),
                  fmt::format("{}-{}", plan_groups.int64(1), plan_groups.int64(2)),
                  plan_groups.text(3), read_candidate(plan_groups, 4).config()});
    }
    std::ostringstream table;
    pt.print(table, "    ");
    plan_text += table.str();
  }
  os << fmt::format("plans ({}):\n", num_plans) << plan_text;
}

// ---- compare ---------------------------------------------------------------------------

void print_comparison(TuningDb& db, int64_t run_a, int64_t run_b, std::ostream& os) {
  sqlite3* h = db.handle();
  const RunSummary a = load_run(db, run_a), b = load_run(db, run_b);
  for (const RunSummary* r : {&a, &b}) {
    os << fmt::format("run {} = {}: {}, {}, batch {}, {}, started {}\n", r == &a ? "A" : "B", r->id,
                      r->experiment, r->target, r->batch, r->precision, r->started_at);
  }

  // The workloads each run measured ok, in the order of their first group in the run.
  auto workloads_of = [&](int64_t run) {
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
  };
  const auto in_a = workloads_of(run_a);
  const auto in_b = workloads_of(run_b);
  std::set<int64_t> b_ids;
  for (const auto& [w, name] : in_b)
    b_ids.insert(w);

  MeasuredLookup best_in_run(h, "m.run_id = ?2");
  TextTable t({"group", "A best", "A median_ms", "A p25-p75", "A min-max", "B best", "B median_ms",
               "B p25-p75", "B min-max", "B/A"},
              "llrrrlrrrr");
  double log_sum = 0, sum_a = 0, sum_b = 0;
  int both = 0;
  for (const auto& [w, name] : in_a) {
    if (!b_ids.count(w))
      continue;
    const auto ba = best_in_run.find(w, run_a);
    const auto bb = best_in_run.find(w, run_b);
    BRICKDL_CHECK(ba && bb);
    const Spread& sa = ba->spread;
    const Spread& sb = bb->spread;
    const double ratio = sb.median_ms / sa.median_ms;
    ++both;
    log_sum += std::log(ratio);
    sum_a += sa.median_ms;
    sum_b += sb.median_ms;
    t.add_row({name, ba->candidate.config(), ms(sa.median_ms), range(sa.p25_ms, sa.p75_ms),
               range(sa.min_ms, sa.max_ms), bb->candidate.config(), ms(sb.median_ms),
               range(sb.p25_ms, sb.p75_ms), range(sb.min_ms, sb.max_ms),
               fmt::format("{:.3f}", ratio)});
  }
  const int only_a = static_cast<int>(in_a.size()) - both;
  const int only_b = static_cast<int>(in_b.size()) - both;
  if (both == 0) {
    os << "no workload has an ok measurement in both runs";
  } else {
    t.print(os);
    os << fmt::format("{} workloads in both: sum of medians A {} ms, B {} ms; geometric mean "
                      "B/A {:.3f}",
                      both, ms(sum_a), ms(sum_b), std::exp(log_sum / both));
  }
  os << fmt::format(" ({} only in A, {} only in B)\n", only_a, only_b);
}

// ---- export ----------------------------------------------------------------------------

namespace {

// A column value as JSON: integer, real, text or null, as SQLite stored it.
Json column_json(Statement& st, int col) {
  switch (sqlite3_column_type(st.handle(), col)) {
  case SQLITE_INTEGER: return st.int64(col);
  case SQLITE_FLOAT: return st.real(col);
  case SQLITE_NULL: return nullptr;
  default: return st.text(col);
  }
}

std::string csv_cell(const Json& v) {
  if (v.is_null())
    return "";
  if (v.is_number_integer())
    return std::to_string(v.get<int64_t>());
  if (v.is_number_float())
    return fmt::format("{}", v.get<double>());
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\n\r") == std::string::npos)
    return s;
  std::string quoted = "\"";
  for (char ch : s) {
    if (ch == '"')
      quoted += '"';
    quoted += ch;
  }
  return quoted + "\"";
}

constexpr const char* kPredictionPrefix = "pred_";

} // namespace

void export_measurements(TuningDb& db, ExportFormat format, std::optional<int64_t> run_id,
                         std::ostream& os) {
  sqlite3* h = db.handle();
  Statement st(
      h,
      "SELECT m.id AS measurement_id, m.run_id, r.experiment, r.model, r.batch, r.precision, "
      "r.gpu_spec, t.fingerprint AS target, t.backend, r.git_revision, w.id AS workload_id, "
      "w.signature AS workload_signature, w.description AS workload_description, w.num_layers, "
      "w.macs, c.id AS candidate_id, c.strategy, c.bd, c.bh, c.bw, c.cb, c.threads, m.status, "
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
      "WHERE (?1 IS NULL OR m.run_id = ?1) ORDER BY m.id",
      "exporting measurements");
  st.bind_all(run_id);

  // Counters and samples of the exported measurements, by measurement id.
  std::map<int64_t, Json> counters;
  std::set<std::string> counter_names;
  {
    Statement cs(h,
                 "SELECT k.measurement_id, k.name, k.value FROM counters k JOIN measurements m "
                 "ON m.id = k.measurement_id WHERE (?1 IS NULL OR m.run_id = ?1) "
                 "ORDER BY k.measurement_id, k.name",
                 "exporting counters");
    cs.bind_all(run_id);
    while (cs.step()) {
      counters[cs.int64(0)][cs.text(1)] = cs.real(2);
      counter_names.insert(cs.text(1));
    }
  }
  std::map<int64_t, Json> samples;
  if (format == ExportFormat::kJson) {
    Statement ss(h,
                 "SELECT s.measurement_id, s.time_ms FROM samples s JOIN measurements m "
                 "ON m.id = s.measurement_id WHERE (?1 IS NULL OR m.run_id = ?1) "
                 "ORDER BY s.measurement_id, s.idx",
                 "exporting samples");
    ss.bind_all(run_id);
    while (ss.step())
      samples[ss.int64(0)].push_back(ss.real(1));
  }

  const int ncols = st.column_count();
  const int strategy_col = 16, threads_col = 21; // checked below against the names
  BRICKDL_CHECK(st.column_name(strategy_col) == "strategy" &&
                st.column_name(threads_col) == "threads");
  auto config_of = [&] {
    CandidateRef c;
    parse_strategy(st.text(strategy_col), &c.strategy);
    c.brick = BrickShape{static_cast<int>(st.int64(17)), static_cast<int>(st.int64(18)),
                         static_cast<int>(st.int64(19)), static_cast<int>(st.int64(20))};
    c.threads = static_cast<int>(st.int64(threads_col));
    return c.config();
  };

  if (format == ExportFormat::kCsv) {
    std::vector<std::string> header;
    for (int c = 0; c < ncols; ++c) {
      header.push_back(st.column_name(c));
      if (c == threads_col)
        header.push_back("config");
    }
    for (const auto& name : counter_names)
      header.push_back("counter." + name);
    os << join_names(header, ",") << "\n";
    while (st.step()) {
      std::vector<std::string> cells;
      for (int c = 0; c < ncols; ++c) {
        cells.push_back(csv_cell(column_json(st, c)));
        if (c == threads_col)
          cells.push_back(csv_cell(config_of()));
      }
      const Json& cs = counters[st.int64(0)];
      for (const auto& name : counter_names)
        cells.push_back(cs.contains(name) ? csv_cell(cs[name]) : "");
      os << join_names(cells, ",") << "\n";
    }
    return;
  }

  Json out = Json::array();
  const std::string prefix = kPredictionPrefix;
  while (st.step()) {
    Json row, prediction;
    for (int c = 0; c < ncols; ++c) {
      const std::string name = st.column_name(c);
      if (name.rfind(prefix, 0) == 0) {
        prediction[name.substr(prefix.size())] = column_json(st, c);
      } else {
        row[name] = column_json(st, c);
      }
      if (c == threads_col)
        row["config"] = config_of();
    }
    row["prediction"] = prediction["model_version"].is_null() ? Json(nullptr) : prediction;
    const int64_t id = st.int64(0);
    row["counters"] = counters.count(id) ? counters[id] : Json::object();
    row["samples_ms"] = samples.count(id) ? samples[id] : Json::array();
    out.push_back(std::move(row));
  }
  os << out.dump(2) << "\n";
}

} // namespace brickdl::query
