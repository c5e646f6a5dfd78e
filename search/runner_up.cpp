#include "search/runner_up.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/group.h"

namespace brickdl::search {

namespace {

bool is_merged(Strategy s) {
  return s != Strategy::kLayerwise;
}

double at(const CostMatrix& cost, int g, int i) {
  return cost[static_cast<size_t>(g)][static_cast<size_t>(i)];
}

// The cheapest usable merged candidate of group g (ties to the lower index), or -1.
int best_merged(const SearchSpace& space, const CostMatrix& cost, int g) {
  const auto& cands = space.group(g).candidates;
  int best = -1;
  for (size_t i = 0; i < cands.size(); ++i) {
    const double c = at(cost, g, static_cast<int>(i));
    if (is_merged(cands[i].strategy) && c < kExcluded && (best < 0 || c < at(cost, g, best)))
      best = static_cast<int>(i);
  }
  return best;
}

// Cheapest tilings of the layers before and after every point: before[j] covers f..j, after[i]
// covers i..n-1 (before[f − 1] = after[n] = 0; f = the first layer after the inputs, 1 for
// one input), under one cost matrix, summed left to right.
struct Tilings {
  std::vector<double> before, after;
};

Tilings best_tilings(const SearchSpace& space, const CostMatrix& cost) {
  const auto n = static_cast<size_t>(space.num_layers());
  Tilings t{std::vector<double>(n, kExcluded), std::vector<double>(n + 1, kExcluded)};
  const auto f = static_cast<size_t>(space.first_layer());
  t.before[f - 1] = 0;
  t.after[n] = 0;
  for (size_t i = f; i < n; ++i)
    for (int g : space.groups_ending_at(static_cast<int>(i))) {
      const int c = best_candidate(cost, g);
      if (c >= 0)
        t.before[i] =
            std::min(t.before[i], t.before[static_cast<size_t>(space.group(g).group.first - 1)] +
                                      at(cost, g, c));
    }
  for (size_t i = n - 1; i >= f; --i)
    for (int g : space.groups_starting_at(static_cast<int>(i))) {
      const int c = best_candidate(cost, g);
      if (c >= 0)
        t.after[i] =
            std::min(t.after[i],
                     at(cost, g, c) + t.after[static_cast<size_t>(space.group(g).group.last + 1)]);
    }
  return t;
}

double layerwise_cost(const SearchSpace& space, const CostMatrix& cost, const Group& g) {
  double sum = 0;
  for (int l = g.first; l <= g.last; ++l) {
    const int s = space.singleton(l);
    sum += at(cost, s, space.group(s).layerwise);
  }
  return sum;
}

std::optional<double> measured(const CandidateEval& ce) {
  if (ce.measurement && ce.measurement->status == MeasureStatus::kOk)
    return ce.measurement->median_ms;
  return std::nullopt;
}

// What every runner-up is chosen from, computed once per plan.
struct Context {
  const SearchSpace& space;
  const Evaluation& ev;
  const CostMatrix& cost;
  Tilings tilings;
  std::vector<std::vector<int>> holding; // per layer: the groups holding it, by index
  std::vector<int> merged;               // per group: best_merged()
};

Context make_context(const SearchSpace& space, const Evaluation& ev, const CostMatrix& cost) {
  Context ctx{space, ev, cost, best_tilings(space, cost), {}, {}};
  ctx.holding.resize(static_cast<size_t>(space.num_layers()));
  for (size_t g = 0; g < space.groups().size(); ++g) {
    const Group& grp = space.groups()[g].group;
    for (int l = grp.first; l <= grp.last; ++l)
      ctx.holding[static_cast<size_t>(l)].push_back(static_cast<int>(g));
    ctx.merged.push_back(best_merged(space, cost, static_cast<int>(g)));
  }
  return ctx;
}

// The best (G, c) holding `layer`, by forced plan cost (see runner_up.h); group -1 when none.
struct Choice {
  int group = -1, candidate = -1;
  double forced = kExcluded, margin = kExcluded; // margin: cost - layerwise(G)
};

Choice choose(const Context& ctx, int layer) {
  Choice best;
  for (int g : ctx.holding[static_cast<size_t>(layer)]) {
    const int c = ctx.merged[static_cast<size_t>(g)];
    if (c < 0)
      continue;
    const Group& grp = ctx.space.group(g).group;
    const double own = at(ctx.cost, g, c);
    const double forced = ctx.tilings.before[static_cast<size_t>(grp.first - 1)] + own +
                          ctx.tilings.after[static_cast<size_t>(grp.last + 1)];
    const double margin = own - layerwise_cost(ctx.space, ctx.cost, grp);
    if (forced < best.forced || (forced == best.forced && margin < best.margin))
      best = Choice{g, c, forced, margin};
  }
  return best;
}

// Why no group holding `layer` has a usable merged candidate: tallies over their merged
// candidates, or one structural reason when there are none.
void explain_none(const Context& ctx, RunnerUp& r) {
  ReasonTallies tallies;
  for (int g : ctx.holding[static_cast<size_t>(r.layer)]) {
    const GroupEntry& e = ctx.space.group(g);
    for (size_t i = 0; i < e.candidates.size(); ++i) {
      if (!is_merged(e.candidates[i].strategy))
        continue;
      ++r.merged_candidates;
      const CandidateEval& ce = ctx.ev.at(CandidateRef{g, static_cast<int>(i)});
      if (!ce.prediction.feasible)
        add_reason(tallies, ce.prediction.reason);
      else if (at(ctx.cost, g, static_cast<int>(i)) >= kExcluded)
        add_reason(tallies, std::string("failed when measured (") +
                                (ce.measurement ? measure_status_name(ce.measurement->status)
                                                : "no measurement") +
                                ")");
    }
  }
  for (const auto& [kind, t] : tallies)
    r.reasons.emplace_back(t.str(), t.count);
  std::stable_sort(r.reasons.begin(), r.reasons.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (r.merged_candidates > 0)
    return;
  const std::string blocker = brick_blocker(ctx.space.graph(), Group{r.layer, r.layer});
  r.reasons.emplace_back(ctx.space.merged_strategies().empty()
                             ? "the experiment lists no merged strategy (search.strategies)"
                         : blocker.empty() ? "no group holding it has a merged candidate"
                                           : blocker,
                         0);
}

void fill_times(const SearchSpace& space, const Evaluation& ev, const CostMatrix& cost,
                const Choice& ch, RunnerUp& r) {
  const GroupEntry& e = space.group(ch.group);
  const CandidateEval& ce = ev.at(CandidateRef{ch.group, ch.candidate});
  r.group = e.group;
  r.layer_names = e.layer_names;
  r.candidate = e.candidates[static_cast<size_t>(ch.candidate)];
  r.cost_ms = at(cost, ch.group, ch.candidate);
  r.layerwise_cost_ms = layerwise_cost(space, cost, e.group);
  r.predicted_ms = ce.prediction.time_ms;
  r.measured_ms = measured(ce);
  double lw_measured = 0;
  bool all = true;
  for (int l = e.group.first; l <= e.group.last; ++l) {
    const int s = space.singleton(l);
    const CandidateEval& lw = ev.at(CandidateRef{s, space.group(s).layerwise});
    r.layerwise_predicted_ms += lw.prediction.time_ms;
    const std::optional<double> m = measured(lw);
    all = all && m.has_value();
    lw_measured += m.value_or(0);
  }
  if (all)
    r.layerwise_measured_ms = lw_measured;
}

RunnerUpVerdict verdict(const RunnerUp& r, double plan_cost) {
  const double tol = 1e-9 * std::max(1.0, std::abs(plan_cost));
  if (r.plan_loss_ms < -tol)
    return RunnerUpVerdict::kMissed;
  if (r.cost_ms >= r.layerwise_cost_ms)
    return RunnerUpVerdict::kSlower;
  if (r.plan_loss_ms <= tol)
    return RunnerUpVerdict::kTie;
  return RunnerUpVerdict::kNeighbour;
}

// The plan's merged steps whose layers overlap `g`.
std::vector<int> rivals(const Plan& plan, const SearchSpace& space, const Group& g) {
  std::vector<int> out;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const GroupEntry& e = space.group(plan.steps[i].group);
    const bool overlaps = e.group.first <= g.last && g.first <= e.group.last;
    if (overlaps &&
        is_merged(
            space.candidate(CandidateRef{plan.steps[i].group, plan.steps[i].candidate}).strategy))
      out.push_back(static_cast<int>(i));
  }
  return out;
}

std::string brick_text(const Candidate& c) {
  return is_merged(c.strategy) ? " " + c.brick.str() : std::string();
}

// What a time of the plan's cost matrix is: the model's prediction, a measurement, or (a
// re-plan, unmeasured) the prediction scaled by the measured / predicted ratio. A sum over
// layers (`sum`) may mix the last two.
std::string basis(double cost, double predicted, const std::optional<double>& measured, bool sum) {
  if (cost == predicted)
    return "predicted";
  if (measured && cost == *measured)
    return "measured";
  if (sum || predicted <= 0)
    return "measured where measured, else predicted x scale";
  return fmt::format("predicted x {:.4g}", cost / predicted);
}

// "1.2 ms vs 1.0 ms layerwise (predicted)", or each side labelled when they differ.
std::string times_text(const RunnerUp& r) {
  const std::string own = basis(r.cost_ms, r.predicted_ms, r.measured_ms, false);
  const std::string lw =
      basis(r.layerwise_cost_ms, r.layerwise_predicted_ms, r.layerwise_measured_ms, true);
  if (own == lw)
    return fmt::format("{:.4f} ms vs {:.4f} ms layerwise ({})", r.cost_ms, r.layerwise_cost_ms,
                       own);
  return fmt::format("{:.4f} ms ({}) vs {:.4f} ms layerwise ({})", r.cost_ms, own,
                     r.layerwise_cost_ms, lw);
}

// "the plan's #4 a .. b (padded 4x4), which overlaps it, gives" (several: "... which overlap
// it, give").
std::string rivals_text(const RunnerUp& r, const PlanSummary& plan) {
  std::string out;
  for (int i : r.rivals) {
    const PlanGroupSummary& g = plan.groups.at(static_cast<size_t>(i));
    out += fmt::format("{}#{} {} ({}{})", out.empty() ? "" : " and ", i + 1, g.layer_names,
                       strategy_name(g.candidate.strategy), brick_text(g.candidate));
  }
  if (out.empty())
    return "the plan's other groups give";
  return "the plan's " + out +
         (r.rivals.size() == 1 ? ", which overlaps it, gives" : ", which overlap it, give");
}

// How much slower or faster: two decimals, four when two would read 1.00.
std::string times(double ratio) {
  const std::string two = fmt::format("{:.2f}", ratio);
  return two == "1.00" ? fmt::format("{:.4f}", ratio) : two;
}

std::string none_text(const RunnerUp& r) {
  if (r.merged_candidates == 0)
    return "no merged candidate: " + (r.reasons.empty() ? std::string("?") : r.reasons[0].first);
  std::string out = fmt::format("none of the {} merged candidates of the groups holding it is "
                                "usable:",
                                r.merged_candidates);
  for (size_t i = 0; i < r.reasons.size(); ++i)
    out += fmt::format("{} {} ({})", i == 0 ? "" : ";", r.reasons[i].first, r.reasons[i].second);
  return out;
}

} // namespace

std::string runner_up_text(const RunnerUp& r, const PlanSummary& plan) {
  if (r.verdict == RunnerUpVerdict::kNone)
    return none_text(r);
  std::string out = fmt::format("{} {}{}: {}", r.layer_names, strategy_name(r.candidate.strategy),
                                brick_text(r.candidate), times_text(r));
  const double slower = r.layerwise_cost_ms > 0 ? r.cost_ms / r.layerwise_cost_ms : 0.0;
  const double faster = r.cost_ms > 0 ? r.layerwise_cost_ms / r.cost_ms : 0.0;
  switch (r.verdict) {
  case RunnerUpVerdict::kSlower:
    return out + (r.cost_ms == r.layerwise_cost_ms
                      ? std::string(": the same time; the tie went to layerwise")
                      : fmt::format(": {}x slower", times(slower)));
  case RunnerUpVerdict::kTie:
    return out + fmt::format(": {}x faster alone, and a plan with it costs the same as the "
                             "plan; the planners' order chose the plan",
                             times(faster));
  case RunnerUpVerdict::kNeighbour:
    return out + fmt::format(": {}x faster alone, but {} more: a plan with it is {:.4f} ms slower",
                             times(faster), rivals_text(r, plan), r.plan_loss_ms);
  case RunnerUpVerdict::kMissed:
    return out + fmt::format("; a plan with it is {:.4f} ms faster, which the searcher did not "
                             "find (only dp is exact)",
                             -r.plan_loss_ms);
  case RunnerUpVerdict::kChecked: return out + "; " + r.checked;
  case RunnerUpVerdict::kNone: break;
  }
  return out;
}

nlohmann::json runner_up_json(const RunnerUp& r, const PlanSummary& plan) {
  nlohmann::json j = {{"verdict", verdict_name(r.verdict)}, {"text", runner_up_text(r, plan)}};
  if (r.verdict == RunnerUpVerdict::kNone) {
    j["merged_candidates"] = r.merged_candidates;
    j["reasons"] = nlohmann::json::array();
    for (const auto& [reason, n] : r.reasons)
      j["reasons"].push_back({{"reason", reason}, {"count", n}});
    return j;
  }
  auto opt = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  j.update({{"first_layer", r.group.first},
            {"last_layer", r.group.last},
            {"layers", r.layer_names},
            {"strategy", strategy_name(r.candidate.strategy)},
            {"brick", brick_json(r.candidate.brick)},
            {"threads", r.candidate.threads},
            {"cost_ms", r.cost_ms},
            {"layerwise_cost_ms", r.layerwise_cost_ms},
            {"predicted_ms", r.predicted_ms},
            {"measured_ms", opt(r.measured_ms)},
            {"layerwise_predicted_ms", r.layerwise_predicted_ms},
            {"layerwise_measured_ms", opt(r.layerwise_measured_ms)},
            {"plan_loss_ms", r.plan_loss_ms},
            {"rivals", r.rivals}});
  return j;
}

const char* verdict_name(RunnerUpVerdict v) {
  switch (v) {
  case RunnerUpVerdict::kMissed: return "missed";
  case RunnerUpVerdict::kSlower: return "slower";
  case RunnerUpVerdict::kTie: return "tie";
  case RunnerUpVerdict::kNeighbour: return "neighbour";
  case RunnerUpVerdict::kChecked: return "checked";
  case RunnerUpVerdict::kNone: return "none";
  }
  return "none";
}

std::vector<RunnerUp> runner_ups(const Plan& plan, const SearchSpace& space, const Evaluation& ev,
                                 const CostMatrix& cost) {
  BRICKDL_CHECK(plan_tiles_graph(space, plan), "runner_ups: the plan does not tile the graph");
  const Context ctx = make_context(space, ev, cost);
  std::vector<RunnerUp> out;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    if (is_merged(space.candidate(CandidateRef{step.group, step.candidate}).strategy))
      continue;
    RunnerUp r;
    r.step = static_cast<int>(i);
    r.layer = space.group(step.group).group.first;
    const Choice ch = choose(ctx, r.layer);
    if (ch.group < 0) {
      explain_none(ctx, r);
    } else {
      fill_times(space, ev, cost, ch, r);
      r.plan_loss_ms = ch.forced - plan.cost_ms;
      r.verdict = verdict(r, plan.cost_ms);
      if (r.verdict == RunnerUpVerdict::kNeighbour)
        r.rivals = rivals(plan, space, r.group);
    }
    out.push_back(std::move(r));
  }
  return out;
}

} // namespace brickdl::search
