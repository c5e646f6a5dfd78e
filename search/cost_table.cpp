#include "search/cost_table.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace brickdl::search {

CostMatrix make_cost_matrix(const SearchSpace& space, double value) {
  CostMatrix m(space.groups().size());
  for (size_t g = 0; g < m.size(); ++g)
    m[g].assign(space.groups()[g].candidates.size(), value);
  return m;
}

int best_candidate(const CostMatrix& cost, int g) {
  const auto& row = cost.at(static_cast<size_t>(g));
  int best = -1;
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] < kExcluded && (best < 0 || row[i] < row[static_cast<size_t>(best)]))
      best = static_cast<int>(i);
  return best;
}

int best_candidate(const SearchSpace& space, const CostMatrix& cost, int g, Strategy strategy) {
  const auto& row = cost.at(static_cast<size_t>(g));
  const auto& cands = space.group(g).candidates;
  int best = -1;
  for (size_t i = 0; i < row.size(); ++i)
    if (cands[i].strategy == strategy && row[i] < kExcluded &&
        (best < 0 || row[i] < row[static_cast<size_t>(best)]))
      best = static_cast<int>(i);
  return best;
}

std::vector<int> ranked_candidates(const CostMatrix& cost, int g) {
  const auto& row = cost.at(static_cast<size_t>(g));
  std::vector<int> idx;
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] < kExcluded)
      idx.push_back(static_cast<int>(i));
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
    return row[static_cast<size_t>(a)] < row[static_cast<size_t>(b)];
  });
  return idx;
}

CombinedCosts combine_costs(const SearchSpace& space, const CostMatrix& predicted,
                            const CostMatrix& measured, bool measured_merged_only) {
  BRICKDL_CHECK(predicted.size() == space.groups().size() && measured.size() == predicted.size(),
                "cost matrices do not match the space");
  CombinedCosts out;
  std::vector<double> ratios;
  for (size_t g = 0; g < measured.size(); ++g)
    for (size_t i = 0; i < measured[g].size(); ++i) {
      const double m = measured[g][i], p = predicted[g][i];
      if (std::isnan(m) || m == kExcluded)
        continue;
      ++out.measured_ok;
      if (p > 0 && p < kExcluded && m > 0)
        ratios.push_back(m / p);
    }
  if (!ratios.empty()) {
    std::sort(ratios.begin(), ratios.end());
    const size_t h = ratios.size() / 2;
    out.scale = ratios.size() % 2 ? ratios[h] : 0.5 * (ratios[h - 1] + ratios[h]);
  }
  out.cost = predicted;
  for (size_t g = 0; g < measured.size(); ++g) {
    const int layerwise = space.groups()[g].layerwise;
    for (size_t i = 0; i < measured[g].size(); ++i) {
      const double m = measured[g][i];
      double& c = out.cost[g][i];
      const bool baseline = static_cast<int>(i) == layerwise;
      if (std::isnan(m) && !baseline && measured_merged_only) {
        c = kExcluded;
      } else if (std::isnan(m) || (m == kExcluded && baseline)) {
        c = c < kExcluded ? c * out.scale : c;
      } else {
        c = m;
      }
    }
  }
  return out;
}

} // namespace brickdl::search
