#include "core/store/print.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "core/detail/text_table.h"
#include "core/error.h"

namespace brickdl::query {

using brickdl::detail::TextTable;
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

Json candidate_json(const CandidateRef& c) {
  Json j;
  j["id"] = c.id;
  j["strategy"] = strategy_name(c.strategy);
  j["brick"] = {{"d", c.brick.d},   {"h", c.brick.h},   {"w", c.brick.w},
                {"cb", c.brick.cb}, {"nb", c.brick.nb}, {"cl", c.brick.cl}};
  j["threads"] = c.threads;
  j["config"] = c.config();
  return j;
}

std::string group_text(const GroupRef& g) {
  return g.label.empty() ? g.layer_names : g.label + ": " + g.layer_names;
}

} // namespace

// ---- best ------------------------------------------------------------------------------

std::string json_text(const Json& json, int indent) {
  return json.dump(indent, ' ', false, Json::error_handler_t::replace);
}

namespace {

// "1.74x", or "-" without both numbers.
std::string speedup_text(const std::optional<double>& baseline, double time) {
  return baseline && time > 0 ? fmt::format("{:.2f}x", *baseline / time) : "-";
}

// The heading of one section of `best`: where its numbers come from.
std::string best_heading(const BestRow& r, const std::vector<std::string>& versions) {
  if (r.source == Source::kPredicted)
    return fmt::format("predicted by the model for {} ({}; not measured):",
                       r.target.substr(r.target.find(':') + 1), join_names(versions, "; "));
  return fmt::format("{} on {} (median of each candidate's samples):", source_label(r.source),
                     r.target);
}

// One section of `best`: rows [begin, end) share source and target.
void print_best_section(const std::vector<BestRow>& rows, size_t begin, size_t end,
                        std::ostream& os) {
  const bool measured = rows[begin].measured;
  std::vector<std::string> versions;
  bool paper = false;
  for (size_t i = begin; i < end; ++i) {
    const BestRow& r = rows[i];
    if (!r.model_version.empty() &&
        std::find(versions.begin(), versions.end(), r.model_version) == versions.end())
      versions.push_back(r.model_version);
    paper = paper || r.paper_layerwise_ms.has_value();
  }
  os << best_heading(rows[begin], versions) << '\n';
  std::vector<std::string> header = {"model", "batch", "precision",
                                     "group", "best",  measured ? "median_ms" : "predicted_ms"};
  std::string align = "lrlllr";
  const auto add = [&](const char* name, char a) {
    header.emplace_back(name);
    align += a;
  };
  if (measured)
    add("p25-p75_ms", 'r');
  add("layerwise_ms", 'r');
  add("speedup", 'r');
  if (paper) {
    add("paper_lw_ms", 'r');
    add("paper_speedup", 'r');
  }
  add("plan", 'l');
  TextTable t(header, align);
  for (size_t i = begin; i < end; ++i) {
    const BestRow& r = rows[i];
    std::string group = group_text(r.groups.front());
    if (r.groups.size() > 1)
      group += fmt::format(" (x{})", r.groups.size());
    std::vector<std::string> row = {r.model, std::to_string(r.batch), r.precision,
                                    group,   r.candidate.config(),    ms(r.time_ms)};
    if (measured)
      row.push_back(range(r.spread->p25_ms, r.spread->p75_ms));
    row.push_back(ms(r.layerwise_ms) + (r.layerwise_from == "layers" ? "+" : ""));
    row.push_back(speedup_text(r.layerwise_ms, r.time_ms));
    if (paper)
      row.insert(row.end(),
                 {ms(r.paper_layerwise_ms), speedup_text(r.paper_layerwise_ms, r.time_ms)});
    row.emplace_back(r.in_plan() ? "yes" : "");
    t.add_row(std::move(row));
  }
  t.print(os, "  ");
}

bool same_section(const BestRow& a, const BestRow& b) {
  return a.source == b.source && a.target == b.target;
}

} // namespace

const char* best_legend() {
  return "group: layers the search considered as one group ('label: layers'; (xN): the same\n"
         "  workload N times in the model); best: its fastest candidate in the section's numbers\n"
         "layerwise_ms: the group's layers run layerwise (cuDNN, conv + bias + activation fused,\n"
         "  on a GPU; the model's estimate of it otherwise), from the same source as the time;\n"
         "  '+': its layers' single-layer times added up; '-': not all of them have one\n"
         "speedup: layerwise_ms / time (above 1: the group is faster than its layers)\n"
         "paper_lw_ms, paper_speedup: the same against the BrickDL paper's own baseline (cuDNN\n"
         "  unfused: implicit-GEMM conv, then bias, batch-norm and activation passes)\n"
         "plan: 'yes' when the group is one of its run's latest plan";
}

void print_best(const std::vector<BestRow>& rows, std::ostream& os) {
  if (rows.empty()) {
    os << "no groups match (brickdl-query runs lists what the database holds)\n";
    return;
  }
  for (size_t begin = 0; begin < rows.size();) {
    size_t end = begin + 1;
    while (end < rows.size() && same_section(rows[begin], rows[end]))
      ++end;
    if (begin > 0)
      os << '\n';
    print_best_section(rows, begin, end, os);
    begin = end;
  }
  os << '\n' << best_legend() << '\n';
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
                        {"label", g.label},
                        {"run_id", g.run_id},
                        {"in_plan", g.in_plan}});
    }
    j["groups"] = groups;
    j["source"] = r.measured ? "measured" : "predicted";
    j["kind"] = source_label(r.source);
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
    j["layerwise_from"] = r.layerwise_from.empty() ? Json(nullptr) : Json(r.layerwise_from);
    j["speedup_vs_layerwise"] =
        r.layerwise_ms && r.time_ms > 0 ? Json(*r.layerwise_ms / r.time_ms) : Json(nullptr);
    j["paper_layerwise_ms"] = optional_json(r.paper_layerwise_ms);
    j["speedup_vs_paper_layerwise"] = r.paper_layerwise_ms && r.time_ms > 0
                                          ? Json(*r.paper_layerwise_ms / r.time_ms)
                                          : Json(nullptr);
    j["in_plan"] = r.in_plan();
    out.push_back(std::move(j));
  }
  return out;
}

// ---- runs ------------------------------------------------------------------------------

void print_runs(const std::vector<RunRow>& rows, const std::string& db_path, std::ostream& os) {
  if (rows.empty()) {
    os << "no runs in '" << db_path << "'\n";
    return;
  }
  TextTable t({"id", "experiment", "model", "batch", "precision", "target", "kind", "status",
               "started", "ended", "measurements"},
              "rllrllllllr");
  for (const RunRow& r : rows) {
    t.add_row({std::to_string(r.id), r.experiment, r.model, std::to_string(r.batch), r.precision,
               r.target, r.kind, r.status, r.started_at, r.ended_at.value_or("-"),
               std::to_string(r.measurements)});
  }
  t.print(os);
}

// ---- one run ---------------------------------------------------------------------------

namespace {

void print_run_header(const RunSummary& r, std::ostream& os) {
  os << fmt::format("run {}: {}", r.id, r.experiment);
  if (!r.experiment_path.empty())
    os << " (" << r.experiment_path << ")";
  os << "\n";
  os << fmt::format("  model      {}, batch {}, {}\n", r.model, r.batch, r.precision);
  os << fmt::format("  gpu spec   {}\n", r.gpu_spec);
  if (!r.calibration.empty())
    os << fmt::format("             {}\n", r.calibration); // of the spec above
  os << fmt::format("  target     {} ({}; {})\n", r.target, r.backend, r.kind);
  if (!r.overrides.empty())
    os << fmt::format("  overrides  {} (from the command line)\n", join_names(r.overrides));
  os << fmt::format("  revision   {}\n", r.git_revision);
  const bool ended = r.ended_at && !r.ended_at->empty();
  os << fmt::format("  status     {}, started {}, ended {}\n", r.status, r.started_at,
                    ended ? *r.ended_at : "-");

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
}

// The relative error of a prediction, "+12%" / "-40%", or "-".
std::string error_text(const std::optional<double>& predicted, double measured) {
  if (!predicted || !(measured > 0))
    return "-";
  return fmt::format("{:+.0f}%", 100.0 * (*predicted - measured) / measured);
}

void print_validated_groups(const std::vector<RunGroupRow>& groups, std::ostream& os) {
  TextTable gt({"layers", "group", "label", "workload", "validated"}, "lllll");
  for (const RunGroupRow& g : groups) {
    gt.add_row({fmt::format("{}-{}", g.first_layer, g.last_layer), g.layer_names, g.label,
                g.workload, g.validated.empty() ? "-" : g.validated});
  }
  os << fmt::format("groups ({}; validated: the output of the plan's merged group checked "
                    "against the reference; no times):\n",
                    gt.num_rows());
  if (gt.num_rows() > 0)
    gt.print(os, "  ");
}

void print_run_groups(const RunSummary& run, const std::vector<RunGroupRow>& groups,
                      std::ostream& os) {
  if (is_validation_target(run.target)) {
    print_validated_groups(groups, os);
    return;
  }
  const Source source = target_source(run.target);
  const bool gpu = source == Source::kMeasuredGpu;
  TextTable gt({"layers", "group", "label", "workload", "measured", "best", "median_ms",
                "predicted_ms", gpu ? "error" : "meas/pred"},
               "llllrlrrr");
  for (const RunGroupRow& g : groups) {
    const auto& b = g.best;
    std::string compared = "-";
    if (b && b->predicted_ms && *b->predicted_ms > 0)
      compared = gpu ? error_text(b->predicted_ms, b->spread.median_ms)
                     : fmt::format("{:.4g}", b->spread.median_ms / *b->predicted_ms);
    gt.add_row({fmt::format("{}-{}", g.first_layer, g.last_layer), g.layer_names, g.label,
                g.workload, std::to_string(g.measurements), b ? b->candidate.config() : "-",
                b ? ms(b->spread.median_ms) : "-", b ? ms(b->predicted_ms) : "-", compared});
  }
  os << fmt::format("groups ({}", gt.num_rows());
  if (source != Source::kPredicted)
    os << fmt::format("; best: the run's fastest measured candidate, median_ms measured on {}, "
                      "predicted_ms the model's prediction of it for {}, {}; more: brickdl-query "
                      "accuracy --run {}",
                      run.target, run.gpu_spec,
                      gpu ? "error (predicted - measured) / measured"
                          : "meas/pred measured / predicted (a CPU against a GPU model)",
                      run.id);
  os << "):\n";
  if (gt.num_rows() > 0)
    gt.print(os, "  ");
}

// Counts per status, then the distinct errors (first line, at most 100 characters).
void print_run_measurements(const RunDetails& d, std::ostream& os) {
  int64_t total = 0;
  std::string counts;
  for (const StatusCount& s : d.statuses) {
    total += s.count;
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", s.status, s.count);
  }
  os << fmt::format("{} ({}){}{}\n",
                    is_validation_target(d.run.target) ? "validations" : "measurements", total,
                    total ? ": " : "", counts);
  TextTable et({"status", "count", "first candidate", "error"}, "lrll");
  for (const ErrorRow& e : d.errors) {
    std::string error = e.error;
    const size_t nl = error.find('\n');
    if (nl != std::string::npos)
      error = error.substr(0, nl) + " ...";
    if (error.size() > 100)
      error = error.substr(0, 97) + "...";
    et.add_row({e.status, std::to_string(e.count), e.first_candidate.config(), error});
  }
  if (et.num_rows() > 0) {
    os << "errors:\n";
    et.print(os, "  ");
  }
}

void print_run_plans(const RunSummary& run, const std::vector<PlanDetails>& plans,
                     std::ostream& os) {
  os << fmt::format("plans ({}):\n", plans.size());
  const bool timed = target_source(run.target) != Source::kPredicted;
  for (const PlanDetails& p : plans) {
    os << fmt::format("  plan {} ({}, {}): predicted for {}: {} ms, layerwise {} ms", p.id, p.kind,
                      p.created_at, run.gpu_spec, ms(p.predicted_ms), ms(p.layerwise_predicted_ms));
    if (timed && (p.measured_ms || p.layerwise_measured_ms))
      os << fmt::format("; measured on {}: {} ms, layerwise {} ms", run.target, ms(p.measured_ms),
                        ms(p.layerwise_measured_ms));
    os << '\n';
    TextTable pt({"#", "layers", "group", "candidate"}, "rlll");
    for (const PlanGroupDetails& g : p.groups) {
      pt.add_row({std::to_string(g.idx), fmt::format("{}-{}", g.first_layer, g.last_layer),
                  g.layer_names, g.candidate.config()});
    }
    pt.print(os, "    ");
  }
}

} // namespace

void print_run(const RunDetails& details, std::ostream& os) {
  print_run_header(details.run, os);
  print_run_groups(details.run, details.groups, os);
  print_run_measurements(details, os);
  print_run_plans(details.run, details.plans, os);
}

// ---- comparing two runs ----------------------------------------------------------------

namespace {

// What a run's side of a comparison stands on.
std::string used_text(const RunSummary& r, const RunMeasurements& used, bool own_only) {
  std::string s = fmt::format("{} ok measurements of its own", used.own);
  if (own_only)
    return s + " (--own: resumed ones left out)";
  if (r.fresh)
    return s + " (tuned with --fresh: it resumed none)";
  return s + fmt::format(", {} resumed from earlier runs on its target", used.resumed);
}

// "12" or "12 (run 9)" when resumed from another run.
std::string from_text(const BestMeasurement& b, int64_t run) {
  return b.run_id == run ? std::string("own") : fmt::format("run {}", b.run_id);
}

} // namespace

void print_comparison(const Comparison& c, std::ostream& os) {
  for (const auto* r : {&c.a, &c.b}) {
    const RunMeasurements& used = r == &c.a ? c.used_a : c.used_b;
    os << fmt::format("run {} = {}: {}, {}, batch {}, {}, started {}; {}\n", r == &c.a ? "A" : "B",
                      r->id, r->experiment, r->target, r->batch, r->precision, r->started_at,
                      used_text(*r, used, c.own_only));
  }
  if (c.a.target != c.b.target)
    os << "A and B were measured on different targets: B/A compares devices as well as "
          "configurations\n";
  TextTable t({"group", "A best", "A from", "A median_ms", "A p25-p75", "A min-max", "B best",
               "B from", "B median_ms", "B p25-p75", "B min-max", "B/A"},
              "lllrrrllrrrr");
  double log_sum = 0, sum_a = 0, sum_b = 0;
  for (const ComparedWorkload& w : c.both) {
    const Spread& sa = w.a.spread;
    const Spread& sb = w.b.spread;
    const double ratio = sb.median_ms / sa.median_ms;
    log_sum += std::log(ratio);
    sum_a += sa.median_ms;
    sum_b += sb.median_ms;
    t.add_row({w.name, w.a.candidate.config(), from_text(w.a, c.a.id), ms(sa.median_ms),
               range(sa.p25_ms, sa.p75_ms), range(sa.min_ms, sa.max_ms), w.b.candidate.config(),
               from_text(w.b, c.b.id), ms(sb.median_ms), range(sb.p25_ms, sb.p75_ms),
               range(sb.min_ms, sb.max_ms), fmt::format("{:.3f}", ratio)});
  }
  const int both = static_cast<int>(c.both.size());
  if (both == 0) {
    os << "no workload has an ok measurement in both runs";
  } else {
    t.print(os);
    os << fmt::format("{} workloads in both: sum of medians A {} ms, B {} ms; geometric mean "
                      "B/A {:.3f}",
                      both, ms(sum_a), ms(sum_b), std::exp(log_sum / both));
  }
  os << fmt::format(" ({} only in A, {} only in B)\n", c.only_a, c.only_b);
  os << "from: the run whose measurement is the best one ('own', or the earlier run it was "
        "resumed from)\n";
}

// ---- predicted vs measured -------------------------------------------------------------

namespace {

std::string stats_text(const AccuracyStats& s, bool same_device) {
  if (s.n == 0)
    return "no points";
  std::string text =
      same_device
          ? fmt::format("n {}, median |error| {:.1f}%, worst {:.1f}%", s.n, 100 * s.median_error,
                        100 * s.worst_error)
          : fmt::format("n {}, measured/predicted median {:.4g}; after that one scale: median "
                        "|error| {:.1f}%, worst {:.1f}%",
                        s.n, s.scale, 100 * s.median_scaled_error, 100 * s.worst_scaled_error);
  return text +
         (s.spearman ? fmt::format(", Spearman {:.3f}", *s.spearman) : std::string(", Spearman -"));
}

std::string mb_text(const std::optional<double>& bytes) {
  return bytes ? fmt::format("{:.3f}", *bytes / 1e6) : "-";
}

// A model of another device than the measured one (a CPU) is judged after one scale: its
// points show the error of the scaled prediction ("scaled_error").
void print_accuracy_points(const AccuracySet& set, std::ostream& os) {
  const bool same_device = set.source == Source::kMeasuredGpu;
  const double scale = same_device ? 1.0 : set.time.scale;
  TextTable t({"run", "group", "candidate", "predicted_ms", "measured_ms", "meas/pred",
               same_device ? "error" : "scaled_error", "pred_MB", "meas_MB", "bytes_error"},
              "rllrrrrrrr");
  for (const AccuracyPoint& p : set.points) {
    t.add_row({std::to_string(p.run_id), p.group, p.candidate.config(), ms(p.predicted_ms),
               ms(p.measured_ms),
               p.predicted_ms > 0 ? fmt::format("{:.4g}", p.measured_ms / p.predicted_ms) : "-",
               error_text(p.predicted_ms * scale, p.measured_ms), mb_text(p.predicted_bytes),
               mb_text(p.measured_bytes),
               p.measured_bytes ? error_text(p.predicted_bytes, *p.measured_bytes) : "-"});
  }
  t.print(os, "  ");
}

} // namespace

void print_accuracy(const std::vector<AccuracySet>& sets, bool with_points, std::ostream& os) {
  if (sets.empty()) {
    os << "no ok measurement with a prediction (model-only runs and validations have no "
          "timings; brickdl-query runs lists the runs)\n";
    return;
  }
  for (size_t i = 0; i < sets.size(); ++i) {
    const AccuracySet& set = sets[i];
    const bool same_device = set.source == Source::kMeasuredGpu;
    if (i > 0)
      os << '\n';
    os << fmt::format("predicted for {} ({}) vs {} on {}:\n", set.gpu_spec, set.model_version,
                      source_label(set.source), set.target);
    if (!same_device)
      os << "  (the model predicts a GPU; these are CPU times: the ranking and the proportions "
            "compare, the raw error is the device gap)\n";
    if (with_points)
      print_accuracy_points(set, os);
    os << "  time:  " << stats_text(set.time, same_device) << '\n';
    os << fmt::format("  bytes ({}): {}\n", set.bytes_kind,
                      set.bytes.n ? stats_text(set.bytes, true) : "not counted");
  }
  os << "\nerror: (predicted - measured) / measured; scaled_error: the same with every "
        "prediction multiplied by the set's median measured/predicted (a model of another "
        "device); meas/pred: measured / predicted time; Spearman: rank correlation of predicted "
        "and measured (1: the same order)\n";
}

namespace {

Json stats_json(const AccuracyStats& s) {
  if (s.n == 0)
    return Json(nullptr);
  return {{"n", s.n},
          {"median_error", s.median_error},
          {"worst_error", s.worst_error},
          {"scale", s.scale},
          {"median_scaled_error", s.median_scaled_error},
          {"worst_scaled_error", s.worst_scaled_error},
          {"spearman", optional_json(s.spearman)}};
}

} // namespace

Json accuracy_json(const std::vector<AccuracySet>& sets) {
  Json out = Json::array();
  for (const AccuracySet& set : sets) {
    Json points = Json::array();
    for (const AccuracyPoint& p : set.points) {
      points.push_back({{"run_id", p.run_id},
                        {"measurement_id", p.measurement_id},
                        {"group", p.group},
                        {"candidate", candidate_json(p.candidate)},
                        {"predicted_ms", p.predicted_ms},
                        {"measured_ms", p.measured_ms},
                        {"predicted_bytes", optional_json(p.predicted_bytes)},
                        {"measured_bytes", optional_json(p.measured_bytes)}});
    }
    out.push_back({{"target", set.target},
                   {"kind", source_label(set.source)},
                   {"gpu_spec", set.gpu_spec},
                   {"model_version", set.model_version},
                   {"bytes_kind", set.bytes_kind},
                   {"time", stats_json(set.time)},
                   {"bytes", stats_json(set.bytes)},
                   {"points", points}});
  }
  return out;
}

// ---- export ----------------------------------------------------------------------------

namespace {

Json cell_json(const Cell& v) {
  return std::visit([](const auto& x) { return Json(x); }, v);
}

std::string csv_text(const std::string& s) {
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

std::string csv_cell(const Cell& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>)
          return "";
        else if constexpr (std::is_same_v<T, int64_t>)
          return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>)
          return fmt::format("{}", x);
        else
          return csv_text(x);
      },
      v);
}

// The column after which `config` (the candidate's configuration text) goes.
size_t threads_column(const ExportTable& table) {
  for (size_t c = 0; c < table.columns.size(); ++c)
    if (table.columns[c] == "threads")
      return c;
  BRICKDL_CHECK(false, "the export has no 'threads' column");
  return 0;
}

void print_export_csv(const ExportTable& table, std::ostream& os) {
  const ExportGrid grid = export_grid(table);
  os << join_names(grid.columns, ",") << "\n";
  for (const std::vector<Cell>& row : grid.rows) {
    std::vector<std::string> cells;
    for (const Cell& cell : row)
      cells.push_back(csv_cell(cell));
    os << join_names(cells, ",") << "\n";
  }
}

void print_export_json(const ExportTable& table, std::ostream& os) {
  const size_t threads_col = threads_column(table);
  const std::string prefix = kPredictionPrefix;
  Json out = Json::array();
  for (const ExportRow& r : table.rows) {
    Json row, prediction;
    for (size_t c = 0; c < r.cells.size(); ++c) {
      const std::string& name = table.columns[c];
      if (name.rfind(prefix, 0) == 0) {
        prediction[name.substr(prefix.size())] = cell_json(r.cells[c]);
      } else {
        row[name] = cell_json(r.cells[c]);
      }
      if (c == threads_col)
        row["config"] = r.candidate.config();
    }
    row["prediction"] = prediction["model_version"].is_null() ? Json(nullptr) : prediction;
    Json counters = Json::object();
    for (const auto& [name, value] : r.counters)
      counters[name] = value;
    row["counters"] = counters;
    row["samples_ms"] = r.samples_ms;
    out.push_back(std::move(row));
  }
  os << json_text(out) << "\n";
}

} // namespace

ExportGrid export_grid(const ExportTable& table) {
  const size_t threads_col = threads_column(table);
  ExportGrid grid;
  for (size_t c = 0; c < table.columns.size(); ++c) {
    grid.columns.push_back(table.columns[c]);
    if (c == threads_col)
      grid.columns.push_back("config");
  }
  for (const auto& name : table.counter_names)
    grid.columns.push_back("counter." + name);
  for (const ExportRow& row : table.rows) {
    std::vector<Cell> cells;
    for (size_t c = 0; c < row.cells.size(); ++c) {
      cells.push_back(row.cells[c]);
      if (c == threads_col)
        cells.emplace_back(std::in_place_type<std::string>, row.candidate.config());
    }
    for (const auto& name : table.counter_names) {
      auto it = row.counters.find(name);
      if (it != row.counters.end())
        cells.emplace_back(std::in_place_type<double>, it->second);
      else
        cells.emplace_back(std::in_place_type<std::nullptr_t>, nullptr);
    }
    grid.rows.push_back(std::move(cells));
  }
  return grid;
}

void print_export(const ExportTable& table, ExportFormat format, std::ostream& os) {
  if (format == ExportFormat::kCsv) {
    print_export_csv(table, os);
  } else {
    print_export_json(table, os);
  }
}

} // namespace brickdl::query
