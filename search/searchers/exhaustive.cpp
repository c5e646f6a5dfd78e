// exhaustive: every tiling of the graph by the space's groups, each group with its best
// candidate. The reference the dynamic program is tested against; small graphs only.
#include <fmt/format.h>

#include <limits>

#include "core/error.h"
#include "search/detail/searchers.h"

namespace brickdl::search {

int64_t count_partitions(const SearchSpace& space) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> ways(static_cast<size_t>(space.num_layers()), 0);
  ways[static_cast<size_t>(space.first_layer() - 1)] = 1; // the empty tiling
  for (int i = space.first_layer(); i < space.num_layers(); ++i)
    for (int g : space.groups_ending_at(i)) {
      const int64_t w = ways[static_cast<size_t>(space.group(g).group.first - 1)];
      int64_t& acc = ways[static_cast<size_t>(i)];
      acc = w > kMax - acc ? kMax : acc + w;
    }
  return ways.back();
}

namespace {

struct Enumerator {
  const SearchSpace& space;
  const CostMatrix& cost;
  std::vector<int> best_of; // best candidate per group, -1 when none is usable
  Plan current;
  Plan best;

  void extend(int next_layer) {
    if (next_layer == space.num_layers()) {
      Plan p = current;
      p.cost_ms = 0;
      for (const PlanStep& s : p.steps)
        p.cost_ms += s.cost_ms; // left to right, as dp sums
      if (!best.valid() || plan_before(space, p, best))
        best = std::move(p);
      return;
    }
    for (int g : space.groups_starting_at(next_layer)) {
      const int c = best_of[static_cast<size_t>(g)];
      if (c < 0)
        continue;
      current.steps.push_back(PlanStep{g, c, cost[static_cast<size_t>(g)][static_cast<size_t>(c)]});
      extend(space.group(g).group.last + 1);
      current.steps.pop_back();
    }
  }
};

class ExhaustiveSearcher final : public Searcher {
public:
  using Searcher::Searcher;
  Plan plan(const CostMatrix& cost) const override { return exhaustive_plan(space(), cost); }
};

} // namespace

Plan exhaustive_plan(const SearchSpace& space, const CostMatrix& cost, int64_t max_partitions) {
  const int64_t n = count_partitions(space);
  if (n > max_partitions)
    throw UserError(fmt::format(
        "exhaustive search: graph '{}' has {} partitions into groups of the space, more than "
        "the {} it enumerates; use the 'dp' searcher (exact under the model) or a smaller "
        "search.max_group_len",
        space.graph().name(), n, max_partitions));
  Enumerator e{space, cost, {}, {}, {}};
  for (size_t g = 0; g < space.groups().size(); ++g)
    e.best_of.push_back(best_candidate(cost, static_cast<int>(g)));
  e.extend(space.first_layer());
  e.best.label = "exhaustive";
  if (!e.best.valid())
    e.best.note = "no usable candidate covers every layer";
  return e.best;
}

namespace detail {
std::unique_ptr<Searcher> make_exhaustive_searcher(const SearcherOptions& o) {
  return std::make_unique<ExhaustiveSearcher>(o);
}
} // namespace detail

} // namespace brickdl::search
