// random: samples plans (a random group at each position, then a random usable candidate of
// it) and keeps the best. The baseline that shows what the model-guided planners add.
#include <random>

#include "search/detail/searchers.h"

namespace brickdl::search {

Plan random_plan(const SearchSpace& space, const CostMatrix& cost, int samples, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::vector<std::vector<int>> usable(space.groups().size());
  for (size_t g = 0; g < usable.size(); ++g)
    for (size_t i = 0; i < cost[g].size(); ++i)
      if (cost[g][i] < kExcluded)
        usable[g].push_back(static_cast<int>(i));

  Plan best;
  best.label = "random";
  for (int s = 0; s < samples; ++s) {
    Plan p;
    p.label = "random";
    p.cost_ms = 0;
    int next = space.first_layer();
    while (next < space.num_layers()) {
      std::vector<int> options;
      for (int g : space.groups_starting_at(next))
        if (!usable[static_cast<size_t>(g)].empty())
          options.push_back(g);
      if (options.empty())
        break;
      const int g = options[pick(options.size())];
      const auto& cands = usable[static_cast<size_t>(g)];
      const int c = cands[pick(cands.size())];
      p.steps.push_back(PlanStep{g, c, cost[static_cast<size_t>(g)][static_cast<size_t>(c)]});
      p.cost_ms += p.steps.back().cost_ms;
      next = space.group(g).group.last + 1;
    }
    if (next < space.num_layers())
      continue; // a dead end: some layer has no usable group
    if (!best.valid() || plan_before(space, p, best))
      best = std::move(p);
  }
  if (!best.valid())
    best.note = "no sampled plan covers every layer";
  return best;
}

namespace {

class RandomSearcher final : public Searcher {
public:
  using Searcher::Searcher;
  Plan plan(const CostMatrix& cost) const override {
    return random_plan(space(), cost, options().random_samples, options().seed);
  }
};

} // namespace

namespace detail {
std::unique_ptr<Searcher> make_random_searcher(const SearcherOptions& o) {
  return std::make_unique<RandomSearcher>(o);
}
} // namespace detail

} // namespace brickdl::search
