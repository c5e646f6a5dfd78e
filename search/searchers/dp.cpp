// dp: the dynamic program over the topological order (exact under the cost it is given).
#include <vector>

#include "search/detail/searchers.h"
#include "search/searcher.h"

namespace brickdl::search {

Plan dp_plan(const SearchSpace& space, const CostMatrix& cost) {
  const int n = space.num_layers();
  // best[i]: cheapest tiling of layers first..i (first = the layer after the inputs, 1 for one
  // input; best[first − 1] is the empty tiling); via[i]: its last step.
  const int first = space.first_layer();
  std::vector<double> best(static_cast<size_t>(n), kExcluded);
  std::vector<PlanStep> via(static_cast<size_t>(n));
  best[static_cast<size_t>(first - 1)] = 0;
  for (int i = first; i < n; ++i) {
    // groups_ending_at is ordered by increasing `first`; strict < keeps the earliest start
    // among equal costs, the tie-break plan_before() states.
    for (int g : space.groups_ending_at(i)) {
      const double before = best[static_cast<size_t>(space.group(g).group.first - 1)];
      if (!(before < kExcluded))
        continue;
      const int c = best_candidate(cost, g);
      if (c < 0)
        continue;
      const double step = cost[static_cast<size_t>(g)][static_cast<size_t>(c)];
      const double v = before + step;
      if (v < best[static_cast<size_t>(i)]) {
        best[static_cast<size_t>(i)] = v;
        via[static_cast<size_t>(i)] = PlanStep{g, c, step};
      }
    }
  }
  Plan p;
  p.label = "dp";
  if (!(best[static_cast<size_t>(n - 1)] < kExcluded)) {
    p.note = "no usable candidate covers every layer";
    return p;
  }
  for (int i = n - 1; i >= first;
       i = space.group(via[static_cast<size_t>(i)].group).group.first - 1)
    p.steps.insert(p.steps.begin(), via[static_cast<size_t>(i)]);
  p.cost_ms = best[static_cast<size_t>(n - 1)];
  return p;
}

namespace detail {
std::unique_ptr<Searcher> make_dp_searcher(const SearcherOptions& o) {
  return std::make_unique<DpSearcher>(o);
}
} // namespace detail

} // namespace brickdl::search
