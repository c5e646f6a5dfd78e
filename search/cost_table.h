#pragma once
// Cost matrices: what the searchers plan over.
//
//   cost[g][i] = milliseconds of candidate i of group g (search/search_space.h indexing);
//   kExcluded (+inf) = not usable (infeasible, or failed when measured).
//
// The measured matrix uses kNotMeasured (NaN) for candidates without a measurement.
// combine_costs() mixes the two for re-planning: a measured time where there is one, else
// the prediction scaled by the median measured / predicted ratio, so that a model for one
// device and measurements on another (the CPU backend) stay comparable.
#include <limits>
#include <vector>

#include "search/search_space.h"

namespace brickdl::search {

using CostMatrix = std::vector<std::vector<double>>;

inline constexpr double kExcluded = std::numeric_limits<double>::infinity();
inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// A matrix shaped like the space, filled with `value`.
CostMatrix make_cost_matrix(const SearchSpace& space, double value);

// The cheapest usable candidate of group `g` (ties to the lower index), or -1.
int best_candidate(const CostMatrix& cost, int g);
// Same, among the candidates of one strategy.
int best_candidate(const SearchSpace& space, const CostMatrix& cost, int g, Strategy strategy);

// Candidate indices of group `g` with a usable cost, cheapest first (ties to lower index).
std::vector<int> ranked_candidates(const CostMatrix& cost, int g);

struct CombinedCosts {
  CostMatrix cost;
  double scale = 1;    // applied to predictions without a measurement
  int measured_ok = 0; // candidates with a usable measurement
};

// Measured where available; a failed measurement excludes the candidate, except the layerwise
// baseline of a layer, which falls back to its scaled prediction so that a plan always exists.
// With `measured_merged_only` (measurements on another kind of device than the model predicts:
// the CPU backend under a GPU model), a merged candidate without a measurement is excluded: one
// scaled factor cannot say how another machine runs it, and a plan must not beat its measured
// baseline on a guess.
CombinedCosts combine_costs(const SearchSpace& space, const CostMatrix& predicted,
                            const CostMatrix& measured, bool measured_merged_only = false);

} // namespace brickdl::search
