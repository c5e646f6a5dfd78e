#include "search/plan_validation.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace brickdl::search {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Why no more fresh validations start ("" while they may).
std::string stop_reason(const TuneContext& ctx, Clock::time_point t0) {
  if (ctx.stop_requested && ctx.stop_requested->load())
    return "a stop request";
  const double budget = ctx.experiment.measurement.budget_s;
  if (budget > 0 && seconds_since(t0) >= budget)
    return fmt::format("the time budget (measurement.budget_s = {} s)", budget);
  return "";
}

void count(PlanValidation& v, const GroupValidation& g) {
  if (g.status == "not validated")
    return;
  ++v.validated;
  v.resumed += g.resumed ? 1 : 0;
  if (g.status == measure_status_name(MeasureStatus::kWrongResult))
    ++v.wrong;
  else if (g.status != measure_status_name(MeasureStatus::kOk))
    ++v.failed;
}

GroupValidation from_result(int step, const std::string& layers, const MeasureResult& r,
                            bool resumed) {
  return GroupValidation{step,    layers,          measure_status_name(r.status),
                         r.error, r.max_rel_error, resumed};
}

} // namespace

MeasureOptions validation_options(MeasureOptions options) {
  options.warmup = 0;
  options.repetitions = 0; // the validated run is the only one (kernels/cpu_measurer.h)
  options.collect_counters = false;
  return options;
}

namespace {

// The merged (not layerwise) steps of `plan`, cheapest first under the model: within the
// budget, as many groups as possible are checked.
std::vector<int> merged_steps_cheapest_first(const SearchSpace& space, const Evaluation& ev,
                                             const Plan& plan) {
  std::vector<int> steps;
  for (size_t i = 0; i < plan.steps.size(); ++i)
    if (space.candidate(CandidateRef{plan.steps[i].group, plan.steps[i].candidate}).strategy !=
        Strategy::kLayerwise)
      steps.push_back(static_cast<int>(i));
  const auto predicted = [&](int i) {
    return ev
        .at(CandidateRef{plan.steps[static_cast<size_t>(i)].group,
                         plan.steps[static_cast<size_t>(i)].candidate})
        .prediction.time_ms;
  };
  std::stable_sort(steps.begin(), steps.end(),
                   [&](int a, int b) { return predicted(a) < predicted(b); });
  return steps;
}

} // namespace

PlanValidation validate_plan(const TuneContext& ctx, const SearchSpace& space, const Evaluation& ev,
                             const Plan& plan, int64_t run_id, int64_t target_id,
                             const std::string& target) {
  BRICKDL_CHECK(ctx.measurer != nullptr, "validating a plan needs a measurer");
  PlanValidation v;
  v.target = target;
  const auto t0 = Clock::now();
  const MeasureOptions options = validation_options(ctx.experiment.measurement.options);
  const std::vector<int> order = merged_steps_cheapest_first(space, ev, plan);
  v.merged_groups = static_cast<int>(order.size());
  std::map<int64_t, GroupValidation> done; // by candidate id: repeated workloads share it
  std::map<int, GroupValidation> by_step;
  for (const int step : order) {
    const CandidateRef ref{plan.steps[static_cast<size_t>(step)].group,
                           plan.steps[static_cast<size_t>(step)].candidate};
    const Candidate& cand = space.candidate(ref);
    const std::string& layers = space.group(ref.group).layer_names;
    const int64_t id = ev.at(ref).candidate_id;
    GroupValidation g{step, layers, "not validated", "", 0, false};
    if (auto it = done.find(id); it != done.end()) {
      g = it->second;
      g.step = step;
      g.layers = layers;
    } else if (auto prior =
                   ctx.options.fresh ? std::nullopt : ctx.db->find_measurement(id, target_id)) {
      g = from_result(step, layers, prior->result, /*resumed=*/true);
    } else if (const std::string why = stop_reason(ctx, t0); !why.empty()) {
      v.stopped_by = why;
    } else {
      const MeasureResult r = ctx.measurer->measure(space.graph(), cand, options);
      ctx.db->put_measurement(id, target_id, run_id, r);
      g = from_result(step, layers, r, /*resumed=*/false);
    }
    if (g.status != "not validated")
      done.emplace(id, g);
    count(v, g);
    ctx.log.info(fmt::format("validate {}/{}: {} ({} {}): {}{}", by_step.size() + 1, order.size(),
                             layers, strategy_name(cand.strategy), cand.brick.str(), g.status,
                             g.resumed ? " (from the database)" : ""));
    by_step.emplace(step, std::move(g));
  }
  for (auto& [step, g] : by_step) // plan order
    v.groups.push_back(std::move(g));
  v.seconds = seconds_since(t0);
  return v;
}

} // namespace brickdl::search
