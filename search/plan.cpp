#include "search/plan.h"

#include "core/error.h"

namespace brickdl::search {

bool plan_tiles_graph(const SearchSpace& space, const Plan& plan) {
  int next = space.first_layer();
  for (const PlanStep& s : plan.steps) {
    if (s.group < 0 || s.group >= static_cast<int>(space.groups().size()))
      return false;
    const GroupEntry& g = space.group(s.group);
    if (g.group.first != next)
      return false;
    if (s.candidate < 0 || s.candidate >= static_cast<int>(g.candidates.size()))
      return false;
    next = g.group.last + 1;
  }
  return next == space.num_layers();
}

Plan recost(const Plan& plan, const CostMatrix& cost) {
  Plan p = plan;
  p.cost_ms = 0;
  for (PlanStep& s : p.steps) {
    s.cost_ms = cost.at(static_cast<size_t>(s.group)).at(static_cast<size_t>(s.candidate));
    p.cost_ms += s.cost_ms;
  }
  if (p.steps.empty())
    p.cost_ms = kExcluded;
  return p;
}

Plan layerwise_plan(const SearchSpace& space, const CostMatrix& cost) {
  Plan p;
  p.label = "layerwise";
  for (int layer = space.first_layer(); layer < space.num_layers(); ++layer) {
    const int g = space.singleton(layer);
    p.steps.push_back(PlanStep{g, space.group(g).layerwise, 0});
  }
  return recost(p, cost);
}

bool plan_before(const SearchSpace& space, const Plan& a, const Plan& b) {
  if (a.cost_ms != b.cost_ms)
    return a.cost_ms < b.cost_ms;
  // Prefix totals, summed left to right as the planners sum them.
  auto prefixes = [](const Plan& p) {
    std::vector<double> s(p.steps.size() + 1, 0.0);
    for (size_t i = 0; i < p.steps.size(); ++i)
      s[i + 1] = s[i] + p.steps[i].cost_ms;
    return s;
  };
  const std::vector<double> pa = prefixes(a), pb = prefixes(b);
  size_t ia = a.steps.size(), ib = b.steps.size();
  while (ia > 0 && ib > 0) {
    if (pa[ia] != pb[ib])
      return pa[ia] < pb[ib];
    const PlanStep& sa = a.steps[ia - 1];
    const PlanStep& sb = b.steps[ib - 1];
    const int fa = space.group(sa.group).group.first, fb = space.group(sb.group).group.first;
    if (fa != fb)
      return fa < fb;
    if (sa.candidate != sb.candidate)
      return sa.candidate < sb.candidate;
    --ia;
    --ib;
  }
  return ia < ib;
}

namespace {

// The group's layers run layerwise, each as its own library kernel, into `r`: predicted, and
// measured when every one of them was (the return value).
bool add_layerwise(const Group& group, const SearchSpace& space, const Evaluation& ev,
                   PlanGroupSummary& r) {
  double measured = 0;
  bool all = true;
  for (int layer = group.first; layer <= group.last; ++layer) {
    const int g = space.singleton(layer);
    const CandidateEval& lw = ev.at(CandidateRef{g, space.group(g).layerwise});
    r.layerwise_predicted_ms += lw.prediction.time_ms;
    if (lw.measurement && lw.measurement->status == MeasureStatus::kOk) {
      measured += lw.measurement->median_ms;
    } else {
      all = false;
    }
  }
  if (all)
    r.layerwise_measured_ms = measured;
  return all;
}

} // namespace

PlanSummary summarize(const Plan& plan, const SearchSpace& space, const Evaluation& ev) {
  PlanSummary s;
  s.label = plan.label;
  bool all_measured = !plan.steps.empty();
  bool all_layerwise_measured = true;
  for (const PlanStep& step : plan.steps) {
    const GroupEntry& ge = space.group(step.group);
    const CandidateEval& ce = ev.at(CandidateRef{step.group, step.candidate});
    PlanGroupSummary r;
    r.group = ge.group;
    r.layer_names = ge.layer_names;
    r.description = ge.description;
    r.candidate = ge.candidates[static_cast<size_t>(step.candidate)];
    r.predicted_ms = ce.prediction.time_ms;
    if (ce.measurement && ce.measurement->status == MeasureStatus::kOk) {
      r.measured_ms = ce.measurement->median_ms;
      r.measurement_resumed = ce.resumed;
      ++s.groups_measured;
    } else {
      all_measured = false;
    }
    r.dram_bytes = ce.prediction.dram_bytes;
    r.l1_bytes = ce.prediction.l1_bytes;
    r.l2_bytes = ce.prediction.l2_bytes;
    r.dram_lower_bound = ev.groups[static_cast<size_t>(step.group)].lower_bound.dram_bytes;
    const bool lw_all = add_layerwise(ge.group, space, ev, r);
    all_layerwise_measured = all_layerwise_measured && lw_all;
    s.predicted_ms += r.predicted_ms;
    s.layerwise_predicted_ms += r.layerwise_predicted_ms;
    s.dram_bytes += r.dram_bytes;
    s.dram_lower_bound += r.dram_lower_bound;
    s.l1_bytes += r.l1_bytes;
    s.l2_bytes += r.l2_bytes;
    s.groups.push_back(std::move(r));
  }
  if (all_measured) {
    double t = 0;
    for (const auto& r : s.groups)
      t += *r.measured_ms;
    s.measured_ms = t;
  }
  if (all_layerwise_measured && !s.groups.empty()) {
    double t = 0;
    for (const auto& r : s.groups)
      t += *r.layerwise_measured_ms;
    s.layerwise_measured_ms = t;
  }
  return s;
}

namespace {
nlohmann::json opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
} // namespace

nlohmann::json brick_json(const BrickShape& b) {
  nlohmann::json j = {{"d", b.d}, {"h", b.h}, {"w", b.w}, {"cb", b.cb}};
  // nb only when a unit computes several images: absent means 1 (kernels/plan_io.h), so plans
  // without batch blocks read as they did before nb existed (the database keeps this text, and
  // the committed result set compares it).
  if (b.nb != 1)
    j["nb"] = b.nb;
  if (b.cl != 1) // likewise the thread block cluster
    j["cl"] = b.cl;
  return j;
}

nlohmann::json to_json(const PlanSummary& s, bool bytes_per_level) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& r : s.groups) {
    const Candidate& c = r.candidate;
    nlohmann::json g = {
        {"first_layer", r.group.first},
        {"last_layer", r.group.last},
        {"layers", r.layer_names},
        {"workload", r.description},
        {"strategy", strategy_name(c.strategy)},
        {"predicted_ms", r.predicted_ms},
        {"measured_ms", opt(r.measured_ms)},
        {"layerwise_predicted_ms", r.layerwise_predicted_ms},
        {"layerwise_measured_ms", opt(r.layerwise_measured_ms)},
        {"dram_bytes", r.dram_bytes},
        {"dram_lower_bound", r.dram_lower_bound},
    };
    if (c.strategy != Strategy::kLayerwise) {
      g["brick"] = brick_json(c.brick);
      g["threads"] = c.threads;
    }
    if (bytes_per_level) {
      g["l1_bytes"] = r.l1_bytes;
      g["l2_bytes"] = r.l2_bytes;
    }
    groups.push_back(std::move(g));
  }
  nlohmann::json out = {
      {"label", s.label},
      {"predicted_ms", s.predicted_ms},
      {"measured_ms", opt(s.measured_ms)},
      {"layerwise_predicted_ms", s.layerwise_predicted_ms},
      {"layerwise_measured_ms", opt(s.layerwise_measured_ms)},
      {"dram_bytes", s.dram_bytes},
      {"dram_lower_bound", s.dram_lower_bound},
      {"groups", std::move(groups)},
  };
  if (bytes_per_level) {
    out["l1_bytes"] = s.l1_bytes;
    out["l2_bytes"] = s.l2_bytes;
  }
  return out;
}

} // namespace brickdl::search
