#include "search/calibration_diff.h"

#include <chrono>
#include <map>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "core/detail/text_table.h"
#include "core/store/tuning_db.h"
#include "search/driver.h"
#include "search/predictor.h"

namespace brickdl::search {

namespace {

// The model's plan of `exp` with no measurement (backend none), tuned into `db`.
PlanSummary model_plan(ExperimentConfig exp, TuningDb& db) {
  exp.measurement.backend = "none";
  exp.measurement.backend_at = {};
  check_experiment(exp);
  const std::unique_ptr<Predictor> predictor = make_model_predictor(exp.gpu);
  TuneContext ctx;
  ctx.experiment = std::move(exp);
  ctx.predictor = predictor.get();
  ctx.db = &db;
  ctx.seed = ctx.experiment.seed;
  return tune(ctx).report.predicted;
}

std::string speedup(const PlanSummary& p) {
  return p.predicted_ms > 0 ? fmt::format("{:.3f}x", p.layerwise_predicted_ms / p.predicted_ms)
                            : "-";
}

std::string change(double before, double after) {
  return before > 0 ? fmt::format("{:+.1f}%", 100.0 * (after - before) / before) : "-";
}

} // namespace

std::vector<GroupChange> plan_changes(const PlanSummary& before, const PlanSummary& after) {
  // By layer range: a group both plans have with the same candidate is unchanged.
  std::map<std::pair<int, int>, GroupChange> by_range;
  for (const PlanGroupSummary& g : before.groups) {
    GroupChange& c = by_range[{g.group.first, g.group.last}];
    c.layers = g.layer_names;
    c.before = g.candidate.config_str();
  }
  for (const PlanGroupSummary& g : after.groups) {
    GroupChange& c = by_range[{g.group.first, g.group.last}];
    c.layers = g.layer_names;
    c.after = g.candidate.config_str();
  }
  std::vector<GroupChange> out;
  for (auto& [range, c] : by_range)
    if (c.before != c.after)
      out.push_back(std::move(c));
  return out;
}

CalibrationDiff diff_calibration(const ExperimentConfig& plain, const ExperimentConfig& calibrated,
                                 const std::string& db_path) {
  const auto start = std::chrono::steady_clock::now();
  TuningDb db(db_path);
  CalibrationDiff d;
  d.experiment = plain.name;
  d.model = plain.model;
  d.precision = dtype_name(plain.precision);
  d.spec_before = plain.gpu.name;
  d.spec_after = calibrated.gpu.name;
  d.before = model_plan(plain, db);
  d.after = model_plan(calibrated, db);
  d.changes = plan_changes(d.before, d.after);
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return d;
}

void print_calibration_diffs(const std::vector<CalibrationDiff>& diffs, std::ostream& os) {
  if (diffs.empty())
    return;
  os << fmt::format("model predictions (backend none: nothing measured), {} for {} before and "
                    "{} after:\n",
                    diffs.front().precision, diffs.front().spec_before, diffs.front().spec_after);
  detail::TextTable t({"experiment", "ms before", "ms after", "change", "layerwise before",
                       "layerwise after", "speedup before", "speedup after", "groups", "changed"},
                      "lrrrrrrrrr");
  for (const CalibrationDiff& d : diffs)
    t.add_row({d.experiment, fmt::format("{:.4f}", d.before.predicted_ms),
               fmt::format("{:.4f}", d.after.predicted_ms),
               change(d.before.predicted_ms, d.after.predicted_ms),
               fmt::format("{:.4f}", d.before.layerwise_predicted_ms),
               fmt::format("{:.4f}", d.after.layerwise_predicted_ms), speedup(d.before),
               speedup(d.after),
               fmt::format("{} -> {}", d.before.groups.size(), d.after.groups.size()),
               std::to_string(d.changes.size())});
  t.print(os, "  ");
  os << "  ms: the plan's predicted end-to-end time; layerwise: every layer as a library kernel; "
        "speedup: layerwise / plan;\n"
        "  groups: the plan's groups before -> after; changed: layer ranges whose candidate "
        "differs or that are a group in one plan only\n";
  for (const CalibrationDiff& d : diffs) {
    if (d.changes.empty())
      continue;
    os << fmt::format("\n{}: groups that changed (strategy brick threads; - = not a group of "
                      "that plan):\n",
                      d.experiment);
    detail::TextTable g({"layers", "before", "after"}, "lll");
    for (const GroupChange& c : d.changes)
      g.add_row({c.layers, c.before.empty() ? "-" : c.before, c.after.empty() ? "-" : c.after});
    g.print(os, "  ");
  }
}

} // namespace brickdl::search
