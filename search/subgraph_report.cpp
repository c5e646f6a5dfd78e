#include "search/subgraph_report.h"

#include <algorithm>
#include <ostream>

#include <fmt/format.h>

#include "core/group.h"

namespace brickdl::search {

namespace {

std::optional<double> measured(const CandidateEval& ce) {
  if (ce.measurement && ce.measurement->status == MeasureStatus::kOk)
    return ce.measurement->median_ms;
  return std::nullopt;
}

std::optional<double> measured_dram(const CandidateEval& ce) {
  if (ce.measurement && ce.measurement->status == MeasureStatus::kOk)
    return measured_dram_bytes(*ce.measurement);
  return std::nullopt;
}

void add_prediction(const model::Prediction& p, StrategyRow& row) {
  row.predicted_ms += p.time_ms;
  row.l1_bytes += p.l1_bytes;
  row.l2_bytes += p.l2_bytes;
  row.dram_bytes += p.dram_bytes;
}

// The subgraph's layers, each its own library kernel; measured values when every layer has one.
StrategyRow layerwise_row(const SearchSpace& space, const Evaluation& ev, const Group& g) {
  StrategyRow row;
  double ms = 0, dram = 0;
  bool all_ms = true, all_dram = true;
  for (int l = g.first; l <= g.last; ++l) {
    const int s = space.singleton(l);
    const CandidateEval& ce = ev.at(CandidateRef{s, space.group(s).layerwise});
    add_prediction(ce.prediction, row);
    const std::optional<double> m = measured(ce), d = measured_dram(ce);
    all_ms = all_ms && m.has_value();
    all_dram = all_dram && d.has_value();
    ms += m.value_or(0);
    dram += d.value_or(0);
  }
  if (all_ms)
    row.measured_ms = ms;
  if (all_dram)
    row.measured_dram_bytes = dram;
  return row;
}

// Why strategy `s` has no usable candidate in group g: the candidates' reasons, or a structural
// one when the group has none of the strategy.
void explain_none(const SearchSpace& space, const Evaluation& ev, const CostMatrix& cost, int g,
                  StrategyRow& row) {
  const GroupEntry& e = space.group(g);
  ReasonTallies tallies;
  for (size_t i = 0; i < e.candidates.size(); ++i) {
    if (e.candidates[i].strategy != row.strategy)
      continue;
    const CandidateEval& ce = ev.at(CandidateRef{g, static_cast<int>(i)});
    if (!ce.prediction.feasible)
      add_reason(tallies, ce.prediction.reason);
    else if (!(cost[static_cast<size_t>(g)][i] < kExcluded))
      add_reason(tallies, std::string("failed when measured (") +
                              (ce.measurement ? measure_status_name(ce.measurement->status)
                                              : "no measurement") +
                              ")");
  }
  for (const auto& [kind, t] : tallies)
    row.reasons.emplace_back(t.str(), t.count);
  std::stable_sort(row.reasons.begin(), row.reasons.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (row.candidates == 0) {
    const std::string blocker = brick_blocker(space.graph(), e.group);
    row.reasons.emplace_back(blocker.empty() ? "no candidate of this strategy" : blocker, 0);
  }
}

StrategyRow merged_row(const SearchSpace& space, const Evaluation& ev, const CostMatrix& cost,
                       int g, Strategy s) {
  StrategyRow row;
  row.strategy = s;
  for (const Candidate& c : space.group(g).candidates)
    row.candidates += c.strategy == s ? 1 : 0;
  const int best = best_candidate(space, cost, g, s);
  if (best < 0) {
    explain_none(space, ev, cost, g, row);
    return row;
  }
  const CandidateEval& ce = ev.at(CandidateRef{g, best});
  row.candidate = space.candidate(CandidateRef{g, best});
  add_prediction(ce.prediction, row);
  row.measured_ms = measured(ce);
  row.measured_dram_bytes = measured_dram(ce);
  return row;
}

std::vector<int> steps_over(const Plan& plan, const SearchSpace& space, const Group& g) {
  std::vector<int> out;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Group& s = space.group(plan.steps[i].group).group;
    if (s.first <= g.last && g.first <= s.last)
      out.push_back(static_cast<int>(i));
  }
  return out;
}

std::string ratio(double x, double base) {
  return base > 0 ? fmt::format("{:.2f}", x / base) : std::string("-");
}
std::string ratio(const std::optional<double>& x, const std::optional<double>& base) {
  return x && base ? ratio(*x, *base) : std::string("-");
}
std::string ms(const std::optional<double>& v) {
  return v ? fmt::format("{:.4f}", *v) : std::string("-");
}

constexpr const char* kRowFormat =
    "  {:<9}  {:<12}  {:>9}  {:>9}  {:>8}  {:>8}  {:>6}  {:>6}  {:>8}  {:>8}  {:>13}\n";

// "in the plan: #2 layerwise, #4 padded 4x4 (layer1.0.conv3 .. layer1.0.add)"
std::string plan_steps_text(const SubgraphSummary& s, const PlanSummary& plan) {
  std::string out;
  for (int i : s.plan_steps) {
    const PlanGroupSummary& g = plan.groups.at(static_cast<size_t>(i));
    out += fmt::format("{}#{} {}", out.empty() ? "" : ", ", i + 1,
                       strategy_name(g.candidate.strategy));
    if (g.candidate.strategy != Strategy::kLayerwise)
      out += fmt::format(" {} ({})", g.candidate.brick.str(), g.layer_names);
  }
  return out;
}

void print_row(const StrategyRow& r, const StrategyRow& lw, std::ostream& os) {
  if (!r.candidate && r.strategy != Strategy::kLayerwise) {
    os << fmt::format("  {:<9}  no usable candidate of {}:\n", strategy_name(r.strategy),
                      r.candidates);
    for (const auto& [reason, n] : r.reasons) // a structural reason has no count
      os << fmt::format("  {:>9}  {:>12}  {}\n", "", n > 0 ? std::to_string(n) : "", reason);
    return;
  }
  os << fmt::format(kRowFormat, strategy_name(r.strategy),
                    r.candidate ? r.candidate->brick.str() : "-", ms(r.predicted_ms),
                    ms(r.measured_ms), ratio(lw.predicted_ms, r.predicted_ms),
                    ratio(lw.measured_ms, r.measured_ms), ratio(r.l1_bytes, lw.l1_bytes),
                    ratio(r.l2_bytes, lw.l2_bytes), ratio(r.dram_bytes, lw.dram_bytes),
                    fmt::format("{:.2f}", r.dram_bytes / 1e6),
                    ratio(r.measured_dram_bytes, lw.measured_dram_bytes));
}

nlohmann::json opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json opt_ratio(const std::optional<double>& x, const std::optional<double>& base) {
  return x && base && *base > 0 ? nlohmann::json(*x / *base) : nlohmann::json(nullptr);
}

nlohmann::json row_json(const StrategyRow& r, const StrategyRow& lw) {
  nlohmann::json j = {{"strategy", strategy_name(r.strategy)}};
  if (!r.candidate && r.strategy != Strategy::kLayerwise) {
    j["candidates"] = r.candidates;
    j["best"] = nullptr;
    j["reasons"] = nlohmann::json::array();
    for (const auto& [reason, n] : r.reasons)
      j["reasons"].push_back({{"reason", reason}, {"count", n}});
    return j;
  }
  if (r.candidate) {
    j["candidates"] = r.candidates;
    j["best"] = {{"brick", brick_json(r.candidate->brick)}, {"threads", r.candidate->threads}};
  }
  j.update({{"predicted_ms", r.predicted_ms},
            {"measured_ms", opt(r.measured_ms)},
            {"speedup_predicted", opt_ratio(lw.predicted_ms, r.predicted_ms)},
            {"speedup_measured", opt_ratio(lw.measured_ms, r.measured_ms)},
            {"l1_bytes", r.l1_bytes},
            {"l2_bytes", r.l2_bytes},
            {"dram_bytes", r.dram_bytes},
            {"measured_dram_bytes", opt(r.measured_dram_bytes)},
            {"relative_to_layerwise",
             {{"l1", opt_ratio(r.l1_bytes, lw.l1_bytes)},
              {"l2", opt_ratio(r.l2_bytes, lw.l2_bytes)},
              {"dram", opt_ratio(r.dram_bytes, lw.dram_bytes)},
              {"measured_dram", opt_ratio(r.measured_dram_bytes, lw.measured_dram_bytes)}}}});
  return j;
}

} // namespace

void print_subgraphs(const std::vector<SubgraphSummary>& subgraphs, const PlanSummary& plan,
                     std::ostream& os) {
  for (const SubgraphSummary& s : subgraphs) {
    os << fmt::format("{}: {} (layers {}-{}); in the plan: {}\n", s.name, s.layer_names,
                      s.group.first, s.group.last, plan_steps_text(s, plan));
    os << fmt::format(kRowFormat, "strategy", "brick", "pred ms", "meas ms", "pred spd", "meas spd",
                      "L1 /lw", "L2 /lw", "DRAM /lw", "DRAM MB", "meas DRAM /lw");
    for (const StrategyRow& r : s.rows)
      print_row(r, s.rows.front(), os);
  }
}

nlohmann::json subgraphs_json(const std::vector<SubgraphSummary>& subgraphs) {
  nlohmann::json out = nlohmann::json::array();
  for (const SubgraphSummary& s : subgraphs) {
    nlohmann::json rows = nlohmann::json::array();
    for (const StrategyRow& r : s.rows)
      rows.push_back(row_json(r, s.rows.front()));
    out.push_back({{"name", s.name},
                   {"first_layer", s.group.first},
                   {"last_layer", s.group.last},
                   {"layers", s.layer_names},
                   {"plan_steps", s.plan_steps},
                   {"strategies", std::move(rows)}});
  }
  return out;
}

std::optional<double> measured_dram_bytes(const MeasureResult& result) {
  const auto r = result.counters.find("dram__bytes_read.sum");
  const auto w = result.counters.find("dram__bytes_write.sum");
  if (r == result.counters.end() || w == result.counters.end())
    return std::nullopt;
  return r->second + w->second;
}

std::vector<SubgraphSummary> summarize_subgraphs(const SearchSpace& space, const Evaluation& ev,
                                                 const CostMatrix& cost, const Plan& plan) {
  std::vector<SubgraphSummary> out;
  for (size_t i = 0; i < space.subgraphs().size(); ++i) {
    const int g = space.subgraphs()[i];
    const GroupEntry& e = space.group(g);
    SubgraphSummary s;
    s.name = space.subgraph_names()[i];
    s.group = e.group;
    s.layer_names = e.layer_names;
    s.rows.push_back(layerwise_row(space, ev, e.group));
    for (Strategy st : space.merged_strategies())
      s.rows.push_back(merged_row(space, ev, cost, g, st));
    s.plan_steps = steps_over(plan, space, e.group);
    out.push_back(std::move(s));
  }
  return out;
}

} // namespace brickdl::search
