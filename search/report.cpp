#include "search/report.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace brickdl::search {

namespace {

std::string ms(const std::optional<double>& v) {
  return v ? fmt::format("{:.4f}", *v) : "-";
}

std::string mb(double bytes) {
  return fmt::format("{:.2f}", bytes / 1e6);
}

// Layerwise time over plan time: measured when both were measured, else predicted with '*'.
std::string speedup(double pred, double lw_pred, const std::optional<double>& meas,
                    const std::optional<double>& lw_meas) {
  if (meas && lw_meas && *meas > 0)
    return fmt::format("{:.2f}", *lw_meas / *meas);
  if (pred > 0)
    return fmt::format("{:.2f}*", lw_pred / pred);
  return "-";
}

std::string brick_str(const Candidate& c) {
  if (c.strategy == Strategy::kLayerwise)
    return "-";
  return c.brick.str();
}

void print_plan(const PlanSummary& p, std::ostream& os) {
  size_t name_w = 6;
  for (const auto& r : p.groups)
    name_w = std::max(name_w, r.layer_names.size());
  name_w = std::min<size_t>(name_w, 40);
  auto name = [&](const std::string& s) {
    return s.size() <= name_w ? s : s.substr(0, name_w - 2) + "..";
  };
  const std::string head =
      fmt::format("{:>3}  {:<{}}  {:<9}  {:<11}  {:>9}  {:>9}  {:>9}  {:>9}  {:>7}  {:>9}  "
                  "{:>9}  {:>6}",
                  "#", "layers", name_w, "strategy", "brick", "pred ms", "meas ms", "lw pred",
                  "lw meas", "speedup", "DRAM MB", "bound MB", "xbound");
  os << head << '\n';
  int i = 0;
  for (const auto& r : p.groups) {
    os << fmt::format(
              "{:>3}  {:<{}}  {:<9}  {:<11}  {:>9.4f}  {:>9}  {:>9.4f}  {:>9}  {:>7}  {:>9}  "
              "{:>9}  {:>6.2f}",
              ++i, name(r.layer_names), name_w, strategy_name(r.candidate.strategy),
              brick_str(r.candidate), r.predicted_ms, ms(r.measured_ms), r.layerwise_predicted_ms,
              ms(r.layerwise_measured_ms),
              speedup(r.predicted_ms, r.layerwise_predicted_ms, r.measured_ms,
                      r.layerwise_measured_ms),
              mb(r.dram_bytes), mb(r.dram_lower_bound),
              r.dram_lower_bound > 0 ? r.dram_bytes / r.dram_lower_bound : 0.0)
       << '\n';
  }
  os << fmt::format("{:>3}  {:<{}}  {:<9}  {:<11}  {:>9.4f}  {:>9}  {:>9.4f}  {:>9}  {:>7}  {:>9}  "
                    "{:>9}  {:>6.2f}",
                    "", "total", name_w, "", "", p.predicted_ms, ms(p.measured_ms),
                    p.layerwise_predicted_ms, ms(p.layerwise_measured_ms),
                    speedup(p.predicted_ms, p.layerwise_predicted_ms, p.measured_ms,
                            p.layerwise_measured_ms),
                    mb(p.dram_bytes), mb(p.dram_lower_bound),
                    p.dram_lower_bound > 0 ? p.dram_bytes / p.dram_lower_bound : 0.0)
     << '\n';
}

void print_end_to_end(const PlanSummary& p, const std::string& target,
                      const std::optional<double>& paper_ms, std::ostream& os) {
  os << fmt::format("end to end (model): plan {:.4f} ms, layerwise {:.4f} ms, speedup {:.3f}x\n",
                    p.predicted_ms, p.layerwise_predicted_ms,
                    p.predicted_ms > 0 ? p.layerwise_predicted_ms / p.predicted_ms : 0.0);
  if (paper_ms)
    os << fmt::format("  against the BrickDL paper's own baseline (cuDNN unfused: conv, bias, "
                      "batch-norm, activation passes; model): {:.4f} ms, speedup {:.3f}x\n",
                      *paper_ms, p.predicted_ms > 0 ? *paper_ms / p.predicted_ms : 0.0);
  if (p.measured_ms && p.layerwise_measured_ms) {
    os << fmt::format(
        "end to end (measured on {}): plan {:.4f} ms, layerwise {:.4f} ms, speedup {:.3f}x\n",
        target, *p.measured_ms, *p.layerwise_measured_ms,
        *p.measured_ms > 0 ? *p.layerwise_measured_ms / *p.measured_ms : 0.0);
  } else if (p.groups_measured > 0) {
    os << fmt::format(
        "end to end (measured): {} of {} groups of the plan measured; measured totals need "
        "all of them and every layerwise baseline\n",
        p.groups_measured, p.groups.size());
  }
}

} // namespace

namespace {

// MPI runs and worker processes: what each worker measured, its throughput over the
// measuring phase, how often its process was replaced, and why a refused one measured nothing.
void print_workers(const TuneReport& r, std::ostream& os) {
  for (const WorkerStats& w : r.workers) {
    if (!w.refused.empty()) {
      os << fmt::format("  {} {} ({}): refused: {}\n", w.kind, w.rank, w.host, w.refused);
      continue;
    }
    os << fmt::format(
        "  {} {} ({}): {} measured, {} failed, {:.1f} s busy, {:.3f} candidates/s{}\n", w.kind,
        w.rank, w.host, w.measured, w.failed, w.busy_s,
        r.measure_s > 0 ? w.measured / r.measure_s : 0.0,
        w.restarts ? fmt::format(", restarted {} times", w.restarts) : "");
  }
}

} // namespace

// A validate-only run (no GPU for the GPU target): what was checked, and that CPU times play no
// part.
void print_validation(const TuneReport& r, const PlanValidation& v, std::ostream& os) {
  os << fmt::format("validated, not measured: no GPU for {}; the plan is the model's, and {} of "
                    "its {} merged groups were checked against the reference on {} ({} from the "
                    "database): {} ok, {} wrong, {} failed",
                    r.gpu_spec, v.validated, v.merged_groups, v.target, v.resumed,
                    v.validated - v.wrong - v.failed, v.wrong, v.failed);
  if (!v.stopped_by.empty())
    os << "; stopped by " << v.stopped_by;
  os << fmt::format(" ({:.1f} s); CPU times are not used\n", v.seconds);
}

void print_validated_groups(const PlanValidation& v, std::ostream& os) {
  os << "validation of the merged groups (output against the reference, run once on " << v.target
     << "):\n";
  for (const GroupValidation& g : v.groups) {
    os << fmt::format("  {:>3}  {:<40}  {}", g.step + 1, g.layers, g.status);
    if (g.status == "ok" || g.status == "wrong_result")
      os << fmt::format(" (max relative error {:.3g})", g.max_rel_error);
    if (g.resumed)
      os << " (from the database)";
    if (!g.error.empty() && g.status != "ok")
      os << ": " << g.error;
    os << '\n';
  }
}

// A measuring backend whose device is not the model's GPU spec (an explicit CPU backend): the
// re-planned plan is this CPU's; say which column is which.
void print_time_labels(const TuneReport& r, std::ostream& os) {
  if (!r.replanned || r.backend == "cuda")
    return;
  os << fmt::format(
      "re-planned for {}: 'meas ms' are times measured there; 'pred ms' and 'lw "
      "pred' are the model's predictions for {} ({})\n",
      r.target, r.gpu_spec,
      r.backend == "cpu"
          ? fmt::format("only measured merged candidates enter the plan; an "
                        "unmeasured layerwise baseline enters scaled by {:.4g}",
                        r.scale)
          : fmt::format("unmeasured candidates enter the plan scaled by {:.4g}", r.scale));
}

namespace {

template <typename Map> int64_t sum_of(const Map& m) {
  int64_t n = 0;
  for (const auto& [k, v] : m)
    n += v;
  return n;
}

// Reasons with their counts, most frequent first (then by text).
std::vector<std::pair<std::string, int64_t>> by_count(const TuneReport& r, bool structural) {
  std::vector<std::pair<std::string, int64_t>> out;
  if (structural)
    out.assign(r.structural.begin(), r.structural.end());
  else
    for (const auto& [kind, t] : r.infeasible)
      out.emplace_back(t.str(), t.count);
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

// The space's counts, which add up: enumerated = never built + built; built = feasible +
// infeasible; each list of reasons sums to its total.
void print_space(const TuneReport& r, std::ostream& os) {
  const int64_t never_built = sum_of(r.structural), infeasible = total_count(r.infeasible);
  os << fmt::format("space: {} groups; {} candidates enumerated = {} never built (structurally "
                    "pruned) + {} built and predicted\n",
                    r.groups, r.enumerated, never_built, r.candidates);
  if (never_built > 0)
    os << fmt::format("  never built ({}), by reason:\n", never_built);
  for (const auto& [reason, n] : by_count(r, true))
    os << fmt::format("  {:>10}  {}\n", n, reason);
  os << fmt::format("  built ({}) = {} feasible + {} infeasible under the model{}\n", r.candidates,
                    r.feasible, infeasible, infeasible > 0 ? ", by reason:" : "");
  for (const auto& [reason, n] : by_count(r, false))
    os << fmt::format("  {:>10}  {}\n", n, reason);
}

void print_measured(const TuneReport& r, std::ostream& os) {
  if (r.validation) {
    print_validation(r, *r.validation, os);
    return;
  }
  if (r.backend == "none")
    return;
  os << fmt::format("measured: {} now, {} from the database, {} failed", r.measured, r.resumed,
                    r.failed);
  if (!r.stopped_by.empty())
    os << "; stopped by " << r.stopped_by;
  if (r.dropped > 0)
    os << fmt::format("; {} in flight dropped", r.dropped);
  os << fmt::format("; unmeasured predictions scaled by {:.4g}\n", r.scale);
  print_workers(r, os);
}

// What the times of the subgraph tables and runner-ups are.
std::string times_note(const TuneReport& r) {
  if (!r.replanned)
    return fmt::format("pred = the model's prediction for {}; meas = measured (- = not measured)",
                       r.gpu_spec);
  return fmt::format("pred = the model's prediction for {}; meas = measured on {}; the best "
                     "candidate is chosen as the re-plan costs it (measured where measured, else "
                     "predicted x {:.4g})",
                     r.gpu_spec, r.target, r.scale);
}

void print_runner_ups(const TuneReport& r, const PlanSummary& plan, std::ostream& os) {
  if (r.runner_ups.empty())
    return;
  os << "\nwhy these groups stay layerwise (runner-up: the merged candidate, of any group holding "
        "the layer, whose best plan costs least):\n";
  for (const RunnerUp& u : r.runner_ups)
    os << fmt::format("  #{:<3} {}: {}\n", u.step + 1,
                      plan.groups.at(static_cast<size_t>(u.step)).layer_names,
                      runner_up_text(u, plan));
}

void print_alternatives(const TuneReport& r, std::ostream& os) {
  if (r.alternatives.empty())
    return;
  os << "\npartitions (speedup: layerwise / partition, predicted and measured):\n";
  os << fmt::format("  {:<24}  {:>10}  {:>10}  {:>8}  {:>8}\n", "partition", "pred ms", "meas ms",
                    "speedup", "meas spd");
  for (const auto& a : r.alternatives) {
    if (a.groups.empty()) {
      os << fmt::format("  {:<24}  {:>10}\n", a.label, "infeasible");
      continue;
    }
    os << fmt::format("  {:<24}  {:>10.4f}  {:>10}  {:>8.3f}  {:>8}\n", a.label, a.predicted_ms,
                      ms(a.measured_ms),
                      a.predicted_ms > 0 ? a.layerwise_predicted_ms / a.predicted_ms : 0.0,
                      a.measured_ms && a.layerwise_measured_ms && *a.measured_ms > 0
                          ? fmt::format("{:.3f}", *a.layerwise_measured_ms / *a.measured_ms)
                          : std::string("-"));
  }
}

} // namespace

std::string report_legend() {
  return "legend (times in ms; pred = the model's prediction, meas = a measured median, - = "
         "none):\n"
         "  #          the group's step in the plan, in topological order\n"
         "  layers     its first .. last layer\n"
         "  strategy   layerwise = one library kernel per layer; padded / memoized = one merged "
         "kernel\n"
         "  brick      output brick h x w (d x h x w in 3-D); /cN channel block, /nN images per "
         "unit,\n"
         "             /xN CTAs per cluster\n"
         "  pred ms    predicted time of the chosen candidate; meas ms: its measured time\n"
         "  lw pred    the same layers run layerwise, predicted; lw meas: measured (every "
         "layer's)\n"
         "  speedup    layerwise / chosen: measured when both were measured, else predicted and "
         "marked *\n"
         "  DRAM MB    predicted DRAM traffic (10^6 bytes); bound MB: the compulsory traffic, "
         "every "
         "input,\n"
         "             weight and output once; xbound = DRAM MB / bound MB\n"
         "  subgraphs  pred spd, meas spd = layerwise / strategy, predicted, measured; L1 /lw, L2 "
         "/lw,\n"
         "             DRAM /lw = predicted bytes at that level / layerwise's; meas DRAM /lw = "
         "measured\n"
         "             DRAM bytes (GPU counters) / layerwise's\n"
         "  runner-up  the merged candidate whose best plan costs least, its time vs the same "
         "layers run\n"
         "             layerwise, and why it lost (search/runner_up.h)\n";
}

namespace {

void print_report_text(const TuneReport& r, std::ostream& os);

} // namespace

// Layer, subgraph and experiment names come from files: the text is printed through
// printable() (core/error.h).
void print_report(const TuneReport& r, std::ostream& os) {
  std::ostringstream text;
  print_report_text(r, text);
  os << printable(text.str(), /*keep_newlines=*/true);
}

namespace {

void print_report_text(const TuneReport& r, std::ostream& os) {
  os << fmt::format("experiment {}: {} batch {} {}; model {} for {}; searcher {}\n", r.experiment,
                    r.model, r.batch, r.precision, r.model_version, r.gpu_spec, r.searcher);
  if (!r.calibration.empty())
    os << "spec " << r.gpu_spec << ": " << r.calibration << '\n';
  os << fmt::format("run {} ({}) in {:.1f} s; target {}\n", r.run_id, r.status, r.seconds,
                    r.target);
  print_space(r, os);
  print_measured(r, os);
  const PlanSummary& plan = r.replanned ? *r.replanned : r.predicted;
  if (!r.subgraphs.empty()) {
    os << "\nsubgraphs named by the experiment, each against its layers run layerwise (" +
              times_note(r) + "):\n";
    print_subgraphs(r.subgraphs, plan, os);
  }
  os << '\n';
  os << "plan " << plan.label << (r.replanned ? " (re-planned with measurements)" : " (model)")
     << ":\n";
  print_plan(plan, os);
  os << report_legend();
  print_time_labels(r, os);
  if (r.validation)
    print_validated_groups(*r.validation, os);
  if (r.plan_check)
    print_plan_check(*r.plan_check, os);
  if (r.replanned)
    os << fmt::format("the model's own plan: {:.4f} ms predicted in {} groups\n",
                      r.predicted.predicted_ms, r.predicted.groups.size());
  print_runner_ups(r, plan, os);
  print_alternatives(r, os);
  os << '\n';
  print_end_to_end(plan, r.target, r.paper_layerwise_predicted_ms, os);
}

} // namespace

namespace {

nlohmann::json workers_json(const std::vector<WorkerStats>& workers) {
  nlohmann::json out = nlohmann::json::array();
  for (const WorkerStats& w : workers) {
    out.push_back({{"rank", w.rank},
                   {"host", w.host},
                   {"target", w.target},
                   {"measured", w.measured},
                   {"failed", w.failed},
                   {"busy_s", w.busy_s},
                   {"kind", w.kind},
                   {"restarts", w.restarts}});
    if (!w.refused.empty())
      out.back()["refused"] = w.refused;
  }
  return out;
}

nlohmann::json validation_json(const PlanValidation& v) {
  nlohmann::json groups = nlohmann::json::array();
  for (const GroupValidation& g : v.groups) {
    groups.push_back({{"step", g.step},
                      {"layers", g.layers},
                      {"status", g.status},
                      {"max_rel_error", g.max_rel_error},
                      {"resumed", g.resumed}});
    if (!g.error.empty())
      groups.back()["error"] = g.error;
  }
  return {{"note", "the model's plan, its merged groups run once on the CPU and checked against "
                   "the reference; CPU times are not used"},
          {"target", v.target},
          {"merged_groups", v.merged_groups},
          {"validated", v.validated},
          {"resumed", v.resumed},
          {"wrong", v.wrong},
          {"failed", v.failed},
          {"stopped_by", v.stopped_by},
          {"seconds", v.seconds},
          {"groups", groups}};
}

nlohmann::json reasons_json(const std::vector<std::pair<std::string, int64_t>>& reasons) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [reason, n] : reasons)
    out.push_back({{"reason", reason}, {"count", n}});
  return out;
}

// enumerated = never_built + candidates; candidates = feasible + infeasible; each reasons list
// sums to its total. "pruned" (both kinds by reason) is kept for older readers.
nlohmann::json space_json(const TuneReport& r) {
  nlohmann::json pruned = nlohmann::json::object();
  for (const auto& [reason, n] : r.structural)
    pruned[reason] = n;
  for (const auto& [kind, t] : r.infeasible)
    pruned[t.str()] = t.count;
  return {{"groups", r.groups},
          {"enumerated", r.enumerated},
          {"never_built", sum_of(r.structural)},
          {"candidates", r.candidates},
          {"feasible", r.feasible},
          {"infeasible", total_count(r.infeasible)},
          {"never_built_reasons", reasons_json(by_count(r, true))},
          {"infeasible_reasons", reasons_json(by_count(r, false))},
          {"pruned", pruned}};
}

// "runner_ups": one entry per group of the plan, in its order: the runner-up of a layerwise
// group ("step": its 0-based index in plan.groups, "layer": the layer it runs; the runner-up's
// own group is "first_layer" .. "last_layer", "layers"), null for a merged one. Beside "plan",
// not in it: brickdl-run --plan reads plan.groups and refuses keys it does not know.
nlohmann::json runner_ups_json(const TuneReport& r) {
  const PlanSummary& plan = r.replanned ? *r.replanned : r.predicted;
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < plan.groups.size(); ++i)
    out.push_back(nullptr);
  for (const RunnerUp& u : r.runner_ups) {
    if (u.step < 0 || static_cast<size_t>(u.step) >= plan.groups.size())
      continue;
    nlohmann::json j = runner_up_json(u, plan);
    j["step"] = u.step;
    j["layer"] = plan.groups[static_cast<size_t>(u.step)].layer_names;
    out[static_cast<size_t>(u.step)] = std::move(j);
  }
  return out;
}

} // namespace

nlohmann::json report_json(const TuneReport& r) {
  nlohmann::json alts = nlohmann::json::array();
  for (const auto& a : r.alternatives)
    alts.push_back(to_json(a));
  nlohmann::json out = {
      {"experiment", r.experiment},
      {"model", r.model},
      {"batch", r.batch},
      {"precision", r.precision},
      {"gpu_spec", r.gpu_spec},
      {"model_version", r.model_version},
      {"target", r.target},
      {"backend", r.backend},
      {"searcher", r.searcher},
      {"run_id", r.run_id},
      {"status", r.status},
      {"space", space_json(r)},
      {"measurements",
       {{"measured", r.measured},
        {"resumed", r.resumed},
        {"failed", r.failed},
        {"stopped_by", r.stopped_by},
        {"prediction_scale", r.scale}}},
      {"plan", to_json(r.replanned ? *r.replanned : r.predicted, /*bytes_per_level=*/true)},
      {"model_plan", to_json(r.predicted, /*bytes_per_level=*/true)},
      {"alternatives", alts},
  };
  if (r.paper_layerwise_predicted_ms)
    out["paper_layerwise_predicted_ms"] = *r.paper_layerwise_predicted_ms;
  out["subgraphs"] = subgraphs_json(r.subgraphs);
  out["runner_ups"] = runner_ups_json(r);
  // Which device the plan is for: the measuring target when it re-planned, else the model's
  // GPU spec; and where the measured times come from.
  out["plan_for"] = r.replanned ? r.target : r.gpu_spec;
  if (!r.calibration.empty()) // absent without one: plans of plain specs read as before
    out["calibration"] = r.calibration;
  out["measurements"]["measured_on"] = r.backend == "none" || r.validation ? "" : r.target;
  if (r.validation)
    out["validation"] = validation_json(*r.validation);
  if (r.plan_check)
    out["plan_check"] = plan_check_json(*r.plan_check);
  if (r.dropped > 0)
    out["measurements"]["dropped"] = r.dropped;
  if (!r.workers.empty())
    out["workers"] = workers_json(r.workers); // MPI and worker processes: in process, none
  return out;
}

} // namespace brickdl::search
