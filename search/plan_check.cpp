#include "search/plan_check.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <ostream>

#include <fmt/format.h>

#include "core/detail/statistics.h"
#include "core/error.h"
#include "kernels/cpu/isa.h"
#include "kernels/merged_executor.h"
#include "kernels/plan_executor.h"
#include "kernels/weights.h"

namespace brickdl::search {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class CpuPlanTimer : public PlanTimer {
public:
  CpuPlanTimer(const Graph& graph, int threads, uint64_t seed)
      : graph_(graph), threads_(threads > 0 ? threads : kernels::usable_cpus()),
        weights_(kernels::make_weights(graph, seed)) {
    for (int id : graph.inputs())
      inputs_.push_back(
          kernels::random_tensor(graph.layer(id).out, seed, static_cast<uint64_t>(id)));
  }

  int prepare(const std::vector<Candidate>& plan, const std::vector<int>& starts) override {
    kernels::PlanOptions o;
    o.exec.threads = threads_;
    o.layerwise = kernels::LayerwiseEngine::kOnednn;
    o.segment_starts = starts;
    plans_.push_back(std::make_unique<kernels::PreparedPlan>(graph_, plan, weights_, o));
    return static_cast<int>(plans_.size()) - 1;
  }

  PlanRunTimes run(int handle, int warmup) override {
    kernels::PlanResult r = plans_.at(static_cast<size_t>(handle))->run(inputs_, warmup, 1);
    PlanRunTimes t;
    for (const kernels::SegmentTiming& s : r.segments) {
      t.segment_first.push_back(s.first);
      t.segment_last.push_back(s.last);
      t.segment_ms.push_back(s.samples_ms.at(0));
    }
    t.end_to_end_ms = r.end_to_end_ms.at(0);
    return t;
  }

  void release(int handle) override { plans_.at(static_cast<size_t>(handle)).reset(); }

  std::string description() const override {
    return fmt::format("plan executor, {} pinned thread{}, {} lanes, layerwise layers on oneDNN",
                       threads_, threads_ == 1 ? "" : "s", kernels::cpu::lanes());
  }

private:
  const Graph& graph_;
  const int threads_;
  const kernels::ModelWeights weights_;
  std::vector<kernels::Tensor> inputs_;
  std::vector<std::unique_ptr<kernels::PreparedPlan>> plans_;
};

bool stopped(const PlanCheckOptions& o) {
  return o.stop && o.stop->load();
}

// One plan of a pair: its merged candidates and where its layerwise runs are split.
struct PlanSpec {
  std::vector<Candidate> merged;
  std::vector<int> starts;
};

// Two plans made ready, then run in turn: rounds of one timed run each (the order swapped every
// round), the first of each plan after one untimed warm-up; at least min_rounds, more while
// within budget; both released after.
std::pair<std::vector<PlanRunTimes>, std::vector<PlanRunTimes>>
interleave(PlanTimer& timer, const PlanSpec& pa, const PlanSpec& pb, const PlanCheckOptions& o) {
  const int a = timer.prepare(pa.merged, pa.starts);
  const int b = timer.prepare(pb.merged, pb.starts);
  std::vector<PlanRunTimes> ra, rb;
  const auto t0 = Clock::now();
  for (int round = 0; round < o.max_rounds; ++round) {
    if (round >= o.min_rounds && seconds_since(t0) * (round + 1) / round > o.budget_s)
      break;
    if (stopped(o))
      break;
    const int warmup = round == 0 ? 1 : 0;
    const bool a_first = round % 2 == 0;
    (a_first ? ra : rb).push_back(timer.run(a_first ? a : b, warmup));
    if (stopped(o)) // a round cut short: the check ends here
      break;
    (a_first ? rb : ra).push_back(timer.run(a_first ? b : a, warmup));
  }
  timer.release(a);
  timer.release(b);
  return {std::move(ra), std::move(rb)};
}

// The samples of the segment [first, last] over the runs (an internal error when a run has no
// such segment: the timer split the plan otherwise than asked).
std::vector<double> segment_samples(const std::vector<PlanRunTimes>& runs, int first, int last) {
  std::vector<double> out;
  for (const PlanRunTimes& r : runs) {
    bool found = false;
    for (size_t k = 0; k < r.segment_first.size() && !found; ++k)
      if (r.segment_first[k] == first) {
        BRICKDL_CHECK(r.segment_last[k] == last, "segment from layer " << first << " ends at "
                                                                       << r.segment_last[k]
                                                                       << ", not " << last);
        out.push_back(r.segment_ms[k]);
        found = true;
      }
    BRICKDL_CHECK(found, "no segment starts at layer " << first);
  }
  return out;
}

std::vector<double> end_to_end(const std::vector<PlanRunTimes>& runs) {
  std::vector<double> out;
  for (const PlanRunTimes& r : runs)
    out.push_back(r.end_to_end_ms);
  return out;
}

std::string spread(const std::vector<double>& ms) {
  if (ms.empty())
    return "-";
  return fmt::format("{:.3f} ms ({:.3f}-{:.3f}, n {})", detail::median(ms),
                     *std::min_element(ms.begin(), ms.end()),
                     *std::max_element(ms.begin(), ms.end()), ms.size());
}

nlohmann::json samples(const std::vector<double>& ms) {
  if (ms.empty())
    return nullptr;
  return {{"median", detail::median(ms)},
          {"min", *std::min_element(ms.begin(), ms.end())},
          {"max", *std::max_element(ms.begin(), ms.end())},
          {"samples", ms}};
}

} // namespace

std::unique_ptr<PlanTimer> make_cpu_plan_timer(const Graph& graph, int threads, uint64_t seed) {
  return std::make_unique<CpuPlanTimer>(graph, threads, seed);
}

namespace {

// The merged steps of `plan`, one PlanCheckGroup each (not yet timed).
std::vector<PlanCheckGroup> merged_groups(const SearchSpace& space, const Plan& plan) {
  const Graph& g = space.graph();
  std::vector<PlanCheckGroup> out;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Candidate& c =
        space.candidate(CandidateRef{plan.steps[i].group, plan.steps[i].candidate});
    if (c.strategy == Strategy::kLayerwise)
      continue;
    PlanCheckGroup pg;
    pg.step = static_cast<int>(i);
    pg.layers = g.layer(c.group.first).name + " .. " + g.layer(c.group.last).name;
    pg.merged = c;
    pg.candidate = std::string(strategy_name(c.strategy)) + " " + c.brick.str();
    out.push_back(std::move(pg));
  }
  return out;
}

// Step 1: the merged groups inside the whole model against their layers run layerwise (the
// layerwise plan split at each group's first layer and the layer after its last).
void check_groups(const Graph& g, PlanCheck& check, PlanTimer& timer, const PlanCheckOptions& o) {
  PlanSpec tuned, split;
  for (const PlanCheckGroup& pg : check.groups) {
    tuned.merged.push_back(pg.merged);
    split.starts.push_back(pg.merged.group.first);
    if (pg.merged.group.last + 1 < g.size())
      split.starts.push_back(pg.merged.group.last + 1);
  }
  const auto [rt, rl] = interleave(timer, tuned, split, o);
  if (stopped(o))
    return;
  check.tuned_ms = end_to_end(rt);
  for (PlanCheckGroup& pg : check.groups) {
    pg.merged_ms = segment_samples(rt, pg.merged.group.first, pg.merged.group.last);
    pg.layerwise_ms = segment_samples(rl, pg.merged.group.first, pg.merged.group.last);
    pg.kept = detail::median(pg.merged_ms) < detail::median(pg.layerwise_ms);
    if (pg.kept)
      check.kept_steps.push_back(pg.step);
    else
      ++check.reverted;
  }
}

// Step 2: the groups kept by step 1 against the whole layerwise plan, end to end.
void check_end_to_end(PlanCheck& check, PlanTimer& timer, const PlanCheckOptions& o) {
  PlanSpec kept;
  for (const PlanCheckGroup& pg : check.groups)
    if (pg.kept)
      kept.merged.push_back(pg.merged);
  const auto [rk, rl] = interleave(timer, kept, PlanSpec{}, o);
  if (stopped(o))
    return;
  check.checked_ms = end_to_end(rk);
  check.layerwise_ms = end_to_end(rl);
  if (detail::median(check.checked_ms) >= detail::median(check.layerwise_ms)) {
    check.fell_back = true;
    check.kept_steps.clear();
  }
}

} // namespace

PlanCheck check_plan(const SearchSpace& space, const Plan& plan, PlanTimer& timer,
                     const PlanCheckOptions& options) {
  BRICKDL_CHECK(options.min_rounds >= 1 && options.max_rounds >= options.min_rounds,
                "plan check rounds " << options.min_rounds << ".." << options.max_rounds);
  const auto t0 = Clock::now();
  PlanCheck check;
  check.how = timer.description();
  check.groups = merged_groups(space, plan);
  check.merged_groups = static_cast<int>(check.groups.size());
  if (check.groups.empty())
    return check;
  check_groups(space.graph(), check, timer, options);
  if (!check.kept_steps.empty() && !stopped(options))
    check_end_to_end(check, timer, options);
  check.interrupted = stopped(options);
  check.seconds = seconds_since(t0);
  return check;
}

Plan checked_plan(const SearchSpace& space, const Plan& plan, const PlanCheck& check,
                  const CostMatrix& cost) {
  if (check.merged_groups == 0 || check.interrupted || !check.error.empty())
    return plan;
  const bool all_gone = check.kept_steps.empty();
  if (all_gone || check.fell_back) {
    Plan p = layerwise_plan(space, cost);
    p.label = plan.label + ", layerwise after the plan check";
    return p;
  }
  Plan p;
  p.label = check.reverted > 0
                ? fmt::format("{}, {} group{} layerwise after the plan check", plan.label,
                              check.reverted, check.reverted == 1 ? "" : "s")
                : plan.label;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    const bool layerwise =
        space.candidate(CandidateRef{s.group, s.candidate}).strategy == Strategy::kLayerwise;
    if (layerwise ||
        std::count(check.kept_steps.begin(), check.kept_steps.end(), static_cast<int>(i)) > 0) {
      p.steps.push_back(s);
      continue;
    }
    const Group& grp = space.group(s.group).group;
    for (int layer = grp.first; layer <= grp.last; ++layer) {
      const int single = space.singleton(layer);
      p.steps.push_back(PlanStep{single, space.group(single).layerwise, 0});
    }
  }
  return recost(p, cost);
}

std::string plan_check_verdict(const PlanCheck& c, const Candidate& candidate) {
  if (c.interrupted || !c.error.empty())
    return "";
  for (const PlanCheckGroup& g : c.groups) {
    if (!(g.merged == candidate))
      continue;
    const double m = detail::median(g.merged_ms), l = detail::median(g.layerwise_ms);
    if (!g.kept)
      return fmt::format("the plan check timed it inside the model at {:.4f} ms vs {:.4f} ms "
                         "layerwise ({:.2f}x): it runs layerwise",
                         m, l, l / m);
    if (c.fell_back)
      return fmt::format("the plan check timed it inside the model at {:.4f} ms vs {:.4f} ms "
                         "layerwise ({:.2f}x), but the plan with it ran no faster end to end "
                         "than layerwise",
                         m, l, l / m);
  }
  return "";
}

void print_plan_check(const PlanCheck& c, std::ostream& os) {
  if (!c.error.empty()) {
    os << "plan check: could not run (" << c.error << "); the plan is unchecked\n";
    return;
  }
  if (c.merged_groups == 0) {
    os << "plan check: the plan runs every layer layerwise; nothing to check\n";
    return;
  }
  if (c.interrupted) {
    os << "plan check: interrupted by a stop request; the plan is unchecked\n";
    return;
  }
  os << fmt::format("plan check ({}; {:.1f} s): the plan's {} merged group{} inside the whole "
                    "model against their layers run layerwise, medians:\n",
                    c.how, c.seconds, c.merged_groups, c.merged_groups == 1 ? "" : "s");
  for (const PlanCheckGroup& g : c.groups) {
    const double m = detail::median(g.merged_ms), l = detail::median(g.layerwise_ms);
    os << fmt::format("  #{} {} ({}): {:.3f} ms vs {:.3f} ms layerwise, {:.2f}x{}\n", g.step + 1,
                      g.layers, g.candidate, m, l, l / m, g.kept ? "" : " -> layerwise");
  }
  os << fmt::format("  end to end: tuned plan {}\n", spread(c.tuned_ms));
  if (c.checked_ms.empty()) {
    os << "  every merged group lost: the plan is the layerwise plan\n";
    return;
  }
  os << fmt::format("  end to end: {} {}, layerwise {}: {:.3f}x{}\n",
                    c.reverted > 0 ? "after reverting" : "checked plan", spread(c.checked_ms),
                    spread(c.layerwise_ms),
                    detail::median(c.layerwise_ms) / detail::median(c.checked_ms),
                    c.fell_back ? " -> not faster: the plan is the layerwise plan" : "");
}

nlohmann::json plan_check_json(const PlanCheck& c) {
  nlohmann::json groups = nlohmann::json::array();
  for (const PlanCheckGroup& g : c.groups)
    groups.push_back({{"step", g.step},
                      {"layers", g.layers},
                      {"candidate", g.candidate},
                      {"merged_ms", samples(g.merged_ms)},
                      {"layerwise_ms", samples(g.layerwise_ms)},
                      {"kept", g.kept}});
  return {{"how", c.how},
          {"merged_groups", c.merged_groups},
          {"groups", groups},
          {"reverted", c.reverted},
          {"tuned_ms", samples(c.tuned_ms)},
          {"checked_ms", samples(c.checked_ms)},
          {"layerwise_ms", samples(c.layerwise_ms)},
          {"fell_back", c.fell_back},
          {"interrupted", c.interrupted},
          {"error", c.error},
          {"kept_steps", c.kept_steps},
          {"seconds", c.seconds}};
}

} // namespace brickdl::search
