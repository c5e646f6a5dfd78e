#include "search/searcher.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "core/error.h"
#include "search/detail/searchers.h"

namespace brickdl::search {

void Searcher::init(const SearchSpace& space, const CostMatrix& predicted) {
  BRICKDL_CHECK(space_ == nullptr, "Searcher::init called twice");
  BRICKDL_CHECK(predicted.size() == space.groups().size(), "cost matrix does not fit the space");
  space_ = &space;
  predicted_ = predicted;
  measured_ = make_cost_matrix(space, kNotMeasured);
}

std::vector<CandidateRef> Searcher::propose(int n) {
  BRICKDL_CHECK(space_ != nullptr, "Searcher::propose before init");
  std::vector<CandidateRef> out;
  while (static_cast<int>(out.size()) < n) {
    // Skip what became known while queued (a shared workload measured through another group).
    while (queue_pos_ < queue_.size() && notified_.count(queue_[queue_pos_]))
      ++queue_pos_;
    if (queue_pos_ < queue_.size()) {
      out.push_back(queue_[queue_pos_++]);
      continue;
    }
    // A new round plans with every result so far: not while some are still to come.
    if (!out.empty() || !pending_.empty() || converged_ || rounds_ >= max_rounds())
      break;
    next_round();
  }
  pending_.insert(out.begin(), out.end());
  return out;
}

void Searcher::next_round() {
  const Plan p = plan(rounds_ == 0 ? predicted_ : current_costs().cost);
  ++rounds_;
  queue_.clear();
  queue_pos_ = 0;
  if (!p.valid()) {
    converged_ = true;
    return;
  }
  for (const CandidateRef& r : round_wishes(p))
    if (seen_.insert(r).second)
      queue_.push_back(r);
  converged_ = queue_.empty(); // nothing new: the plan is measured
}

void Searcher::notify(const std::vector<MeasuredCandidate>& results) {
  BRICKDL_CHECK(space_ != nullptr, "Searcher::notify before init");
  for (const MeasuredCandidate& m : results) {
    measured_.at(static_cast<size_t>(m.ref.group)).at(static_cast<size_t>(m.ref.index)) = m.ms;
    seen_.insert(m.ref);
    notified_.insert(m.ref);
    pending_.erase(m.ref);
  }
}

CombinedCosts Searcher::current_costs() const {
  BRICKDL_CHECK(space_ != nullptr, "Searcher::current_costs before init");
  return combine_costs(*space_, predicted_, measured_);
}

std::vector<CandidateRef> Searcher::baselines(const std::vector<int>& groups) const {
  std::vector<CandidateRef> out;
  for (int g : groups) {
    const Group& grp = space().group(g).group;
    for (int layer = grp.first; layer <= grp.last; ++layer) {
      const int sg = space().singleton(layer);
      out.push_back(CandidateRef{sg, space().group(sg).layerwise});
    }
  }
  return out;
}

std::vector<int> Searcher::studied_groups(const Plan& plan) const {
  std::vector<int> groups;
  for (const PlanStep& s : plan.steps)
    groups.push_back(s.group);
  for (int g : space().subgraphs())
    if (std::find(groups.begin(), groups.end(), g) == groups.end())
      groups.push_back(g);
  return groups;
}

std::vector<CandidateRef> Searcher::round_wishes(const Plan& plan) const {
  const std::vector<int> groups = studied_groups(plan);
  std::vector<CandidateRef> out = baselines(groups);
  std::vector<std::vector<int>> ranked;
  for (int g : groups)
    ranked.push_back(ranked_candidates(predicted_, g));
  for (int r = 0; r < options_.top_k; ++r)
    for (size_t i = 0; i < groups.size(); ++i)
      if (r < static_cast<int>(ranked[i].size()))
        out.push_back(CandidateRef{groups[i], ranked[i][static_cast<size_t>(r)]});
  return out;
}

namespace {
using Factory = std::unique_ptr<Searcher> (*)(const SearcherOptions&);
const std::vector<std::pair<std::string, Factory>>& factories() {
  static const std::vector<std::pair<std::string, Factory>> f = {
      {"dp", detail::make_dp_searcher},
      {"exhaustive", detail::make_exhaustive_searcher},
      {"random", detail::make_random_searcher},
      {"topk", detail::make_topk_searcher},
      {"measure_all", detail::make_measure_all_searcher},
      {"partitions", detail::make_partitions_searcher},
  };
  return f;
}
} // namespace

std::vector<std::string> searcher_names() {
  std::vector<std::string> v;
  for (const auto& [name, f] : factories())
    v.push_back(name);
  return v;
}

std::unique_ptr<Searcher> make_searcher(const SearcherOptions& options) {
  if (options.top_k < 1)
    throw UserError("top-k must be >= 1, got " + std::to_string(options.top_k));
  for (const auto& [name, f] : factories())
    if (name == options.name)
      return f(options);
  throw UserError("unknown searcher '" + options.name + "'" +
                  did_you_mean(options.name, searcher_names()) +
                  "; valid: " + join_names(searcher_names()));
}

} // namespace brickdl::search
