#include "core/store/print.h"

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

// ---- runs ------------------------------------------------------------------------------

void print_runs(const std::vector<RunRow>& rows, const std::string& db_path, std::ostream& os) {
  if (rows.empty()) {
    os << "no runs in '" << db_path << "'\n";
    return;
  }
  TextTable t({"id", "experiment", "model", "batch", "precision", "target", "status", "started",
               "ended", "measurements"},
              "rllrlllllr");
  for (const RunRow& r : rows) {
    t.add_row({std::to_string(r.id), r.experiment, r.model, std::to_string(r.batch), r.precision,
               r.target, r.status, r.started_at, r.ended_at.value_or("-"),
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
  os << fmt::format("  target     {} ({})\n", r.target, r.backend);
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

void print_run_groups(const std::vector<RunGroupRow>& groups, std::ostream& os) {
  TextTable gt({"layers", "group", "label", "workload", "measured", "best", "median_ms"},
               "llllrlr");
  for (const RunGroupRow& g : groups) {
    gt.add_row({fmt::format("{}-{}", g.first_layer, g.last_layer), g.layer_names, g.label,
                g.workload, std::to_string(g.measurements),
                g.best ? g.best->candidate.config() : "-",
                g.best ? ms(g.best->spread.median_ms) : "-"});
  }
  os << fmt::format("groups ({}):\n", gt.num_rows());
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
  os << fmt::format("measurements ({}){}{}\n", total, total ? ": " : "", counts);
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

void print_run_plans(const std::vector<PlanDetails>& plans, std::ostream& os) {
  os << fmt::format("plans ({}):\n", plans.size());
  for (const PlanDetails& p : plans) {
    os << fmt::format(
        "  plan {} ({}, {}): predicted {} ms, measured {} ms; layerwise predicted {} ms, "
        "measured {} ms\n",
        p.id, p.kind, p.created_at, ms(p.predicted_ms), ms(p.measured_ms),
        ms(p.layerwise_predicted_ms), ms(p.layerwise_measured_ms));
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
  print_run_groups(details.groups, os);
  print_run_measurements(details, os);
  print_run_plans(details.plans, os);
}

// ---- comparing two runs ----------------------------------------------------------------

void print_comparison(const Comparison& c, std::ostream& os) {
  for (const RunSummary* r : {&c.a, &c.b}) {
    os << fmt::format("run {} = {}: {}, {}, batch {}, {}, started {}\n", r == &c.a ? "A" : "B",
                      r->id, r->experiment, r->target, r->batch, r->precision, r->started_at);
  }
  TextTable t({"group", "A best", "A median_ms", "A p25-p75", "A min-max", "B best", "B median_ms",
               "B p25-p75", "B min-max", "B/A"},
              "llrrrlrrrr");
  double log_sum = 0, sum_a = 0, sum_b = 0;
  for (const ComparedWorkload& w : c.both) {
    const Spread& sa = w.a.spread;
    const Spread& sb = w.b.spread;
    const double ratio = sb.median_ms / sa.median_ms;
    log_sum += std::log(ratio);
    sum_a += sa.median_ms;
    sum_b += sb.median_ms;
    t.add_row({w.name, w.a.candidate.config(), ms(sa.median_ms), range(sa.p25_ms, sa.p75_ms),
               range(sa.min_ms, sa.max_ms), w.b.candidate.config(), ms(sb.median_ms),
               range(sb.p25_ms, sb.p75_ms), range(sb.min_ms, sb.max_ms),
               fmt::format("{:.3f}", ratio)});
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
  const size_t threads_col = threads_column(table);
  std::vector<std::string> header;
  for (size_t c = 0; c < table.columns.size(); ++c) {
    header.push_back(table.columns[c]);
    if (c == threads_col)
      header.push_back("config");
  }
  for (const auto& name : table.counter_names)
    header.push_back("counter." + name);
  os << join_names(header, ",") << "\n";
  for (const ExportRow& row : table.rows) {
    std::vector<std::string> cells;
    for (size_t c = 0; c < row.cells.size(); ++c) {
      cells.push_back(csv_cell(row.cells[c]));
      if (c == threads_col)
        cells.push_back(csv_text(row.candidate.config()));
    }
    for (const auto& name : table.counter_names) {
      auto it = row.counters.find(name);
      cells.push_back(it != row.counters.end() ? csv_cell(it->second) : "");
    }
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

void print_export(const ExportTable& table, ExportFormat format, std::ostream& os) {
  if (format == ExportFormat::kCsv) {
    print_export_csv(table, os);
  } else {
    print_export_json(table, os);
  }
}

} // namespace brickdl::query
