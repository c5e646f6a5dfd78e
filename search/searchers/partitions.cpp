// partitions: the experiment's explicit partitions (search.partitions), each evaluated under
// one merged strategy for all its groups (the best brick per group), as the paper's Fig 10
// compares them; plus the layerwise baseline. The best of them is the plan.
#include <fmt/format.h>

#include "core/error.h"
#include "search/detail/searchers.h"

namespace brickdl::search {

namespace {

class PartitionsSearcher final : public Searcher {
public:
  using Searcher::Searcher;

  Plan plan(const CostMatrix& cost) const override {
    Plan best;
    for (const Plan& p : alternatives(cost))
      if (p.valid() && (!best.valid() || p.cost_ms < best.cost_ms))
        best = p;
    if (!best.valid())
      best.note = "no partition has a usable candidate for every group";
    return best;
  }

  std::vector<Plan> alternatives(const CostMatrix& cost) const override {
    std::vector<Plan> out;
    const SearchSpace& sp = space();
    if (sp.partitions().empty())
      throw UserError("the 'partitions' searcher needs search.partitions in the experiment");
    for (size_t pi = 0; pi < sp.partitions().size(); ++pi) {
      for (Strategy s : sp.merged_strategies()) {
        Plan p;
        p.label = sp.partition_labels()[pi] + " " + strategy_name(s);
        p.cost_ms = 0;
        for (int g : sp.partitions()[pi]) {
          const int c = best_candidate(sp, cost, g, s);
          if (c < 0) {
            p.note = fmt::format("no feasible {} candidate for layers {}", strategy_name(s),
                                 sp.group(g).layer_names);
            p.cost_ms = kExcluded;
            break;
          }
          p.steps.push_back(PlanStep{g, c, cost[static_cast<size_t>(g)][static_cast<size_t>(c)]});
          p.cost_ms += p.steps.back().cost_ms;
        }
        out.push_back(std::move(p));
      }
    }
    out.push_back(layerwise_plan(sp, cost));
    return out;
  }

protected:
  // Baselines, then rank by rank the best candidates of each partition group under the
  // partition's strategy.
  std::vector<CandidateRef> round_wishes(const Plan&) const override {
    const SearchSpace& sp = space();
    std::vector<int> singletons;
    for (const PlanStep& st : layerwise_plan(sp, predicted()).steps)
      singletons.push_back(st.group);
    std::vector<CandidateRef> out = baselines(singletons);
    for (int r = 0; r < options().top_k; ++r)
      for (const auto& part : sp.partitions())
        for (Strategy s : sp.merged_strategies())
          for (int g : part) {
            int seen = 0;
            for (int c : ranked_candidates(predicted(), g)) {
              if (sp.group(g).candidates[static_cast<size_t>(c)].strategy != s)
                continue;
              if (seen++ == r) {
                out.push_back(CandidateRef{g, c});
                break;
              }
            }
          }
    return out;
  }
};

} // namespace

namespace detail {
std::unique_ptr<Searcher> make_partitions_searcher(const SearcherOptions& o) {
  return std::make_unique<PartitionsSearcher>(o);
}
} // namespace detail

} // namespace brickdl::search
