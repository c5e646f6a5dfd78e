// The shared statistics (core/detail/statistics.h), on values worked out by hand.
#include <gtest/gtest.h>

#include "core/detail/statistics.h"

namespace brickdl::detail {
namespace {

TEST(Statistics, MedianOfOddEvenAndNone) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

TEST(Statistics, TiesShareTheirAverageRank) {
  EXPECT_EQ(ranks({10, 30, 20, 30}), (std::vector<double>{1, 3.5, 2, 3.5}));
}

// x = 1..5, y = 2, 1, 4, 3, 5: rank differences d = 1, 1, 1, 1, 0; with no ties
// rho = 1 − 6·Σd² / (n(n² − 1)) = 1 − 24 / 120 = 0.8.
TEST(Statistics, SpearmanByHand) {
  EXPECT_NEAR(*spearman({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
  EXPECT_NEAR(*spearman({1, 2, 3}, {30, 20, 10}), -1.0, 1e-12);
  // Ranks, not values: any increasing function of x correlates 1.
  EXPECT_NEAR(*spearman({1, 2, 3, 4}, {1, 8, 27, 1000}), 1.0, 1e-12);
  EXPECT_FALSE(spearman({1}, {2}).has_value());
  EXPECT_FALSE(spearman({1, 2, 3}, {5, 5, 5}).has_value()); // a constant side
}

} // namespace
} // namespace brickdl::detail
