#pragma once
// Small statistics shared by the model's calibration report (model/calibration.h) and the
// store's predicted-vs-measured queries (core/store/queries.h): one definition of a median and
// of Spearman's rank correlation for every number brickdl reports.
#include <optional>
#include <vector>

namespace brickdl::detail {

// The median (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

// 1-based ranks, ties given their average rank.
std::vector<double> ranks(const std::vector<double>& values);

// Spearman's rank correlation (the Pearson correlation of the ranks); unset below 2 points or
// when one side is constant. `a` and `b` have the same size.
std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b);

} // namespace brickdl::detail
