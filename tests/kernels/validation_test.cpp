// The shared output-vs-reference comparison (kernels/validation.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/validation.h"

namespace brickdl::kernels {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A reference in [−2, 2) and an output that is off by up to `noise` (relative) or exact.
struct Pair {
  std::vector<float> out, ref;
};

Pair random_pair(std::mt19937_64& rng, size_t n, double noise) {
  std::uniform_real_distribution<float> val(-2.f, 2.f), rel(-1.f, 1.f);
  Pair p;
  for (size_t i = 0; i < n; ++i) {
    const float r = val(rng);
    p.ref.push_back(r);
    p.out.push_back(r * (1.f + static_cast<float>(noise) * rel(rng)));
  }
  return p;
}

TEST(Validation, RandomFiniteInputsAgreeWithTheDefinition) {
  std::mt19937_64 rng(7);
  const Tolerance tol{1e-5, 1e-4};
  for (int trial = 0; trial < 50; ++trial) {
    const Pair p = random_pair(rng, 1 + rng() % 500, trial % 2 ? 1e-3 : 1e-6);
    int64_t bad = 0, first = -1;
    double max_abs = 0, max_ref = 0;
    for (size_t i = 0; i < p.ref.size(); ++i) {
      const double d = std::fabs(double{p.out[i]} - double{p.ref[i]});
      if (d > tol.atol + tol.rtol * std::fabs(double{p.ref[i]}) && bad++ == 0)
        first = static_cast<int64_t>(i);
      max_abs = std::max(max_abs, d);
      max_ref = std::max(max_ref, std::fabs(double{p.ref[i]}));
    }
    const Comparison c = compare(p.out, p.ref, tol);
    SCOPED_TRACE(trial);
    EXPECT_EQ(c.elements, static_cast<int64_t>(p.ref.size()));
    EXPECT_EQ(c.bad, bad);
    EXPECT_EQ(c.first_bad, first);
    EXPECT_EQ(c.undefined, 0);
    EXPECT_EQ(c.max_abs_error, max_abs);
    EXPECT_EQ(c.max_rel_error, max_abs / max_ref);
    EXPECT_EQ(c.ok(), bad == 0);
    EXPECT_EQ(c.message.empty(), bad == 0);
  }
}

TEST(Validation, MessageNamesCountFirstIndexValuesAndError) {
  const std::vector<float> ref = {1.f, 2.f, 3.f, 4.f};
  const std::vector<float> out = {1.f, 2.5f, 3.f, 5.f};
  const Comparison c = compare(out, ref, Tolerance{1e-5, 1e-4});
  EXPECT_EQ(c.bad, 2);
  EXPECT_EQ(c.first_bad, 1);
  EXPECT_DOUBLE_EQ(c.max_abs_error, 1.0);
  EXPECT_DOUBLE_EQ(c.max_rel_error, 0.25);
  EXPECT_EQ(c.message, "2 of 4 output elements differ from the reference beyond atol 0.000010 + "
                       "rtol 0.000100 (first at flat index 1: 2.500000 vs 2.000000); max "
                       "relative error 0.250000");
}

TEST(Validation, NaNWhereTheReferenceIsFiniteFailsAndIsNeverDropped) {
  std::mt19937_64 rng(3);
  for (size_t at : {size_t{0}, size_t{17}, size_t{99}}) { // first, middle, last element
    Pair p = random_pair(rng, 100, 0);
    p.out[at] = kNaN;
    const Comparison c = compare(p.out, p.ref, Tolerance{});
    SCOPED_TRACE(at);
    EXPECT_FALSE(c.ok());
    EXPECT_EQ(c.bad, 1);
    EXPECT_EQ(c.first_bad, static_cast<int64_t>(at));
    EXPECT_EQ(c.undefined, 1);
    EXPECT_EQ(c.max_abs_error, std::numeric_limits<double>::infinity());
    EXPECT_EQ(c.max_rel_error, std::numeric_limits<double>::infinity());
    EXPECT_NE(c.message.find("first at flat index " + std::to_string(at) + ": nan vs"),
              std::string::npos)
        << c.message;
  }
}

TEST(Validation, InfinitiesAndNaNsInTheReference) {
  const std::vector<float> ref = {1.f, kInf, -kInf, kNaN, 2.f};
  // Matching non-finite values are right and add no error.
  Comparison c = compare(std::vector<float>{1.f, kInf, -kInf, kNaN, 2.f}, ref, Tolerance{});
  EXPECT_TRUE(c.ok()) << c.message;
  EXPECT_EQ(c.undefined, 0);
  EXPECT_EQ(c.max_abs_error, 0);
  EXPECT_EQ(c.max_rel_error, 0);
  // Each kind of mismatch: the wrong infinity, a finite value for an infinity, a value for a
  // NaN, an infinity where the reference is finite.
  c = compare(std::vector<float>{1.f, -kInf, 5.f, 0.f, kInf}, ref, Tolerance{});
  EXPECT_EQ(c.bad, 4);
  EXPECT_EQ(c.first_bad, 1);
  EXPECT_EQ(c.undefined, 4);
  EXPECT_EQ(c.max_rel_error, std::numeric_limits<double>::infinity());
}

TEST(Validation, ToleranceIsAbsolutePlusRelative) {
  const std::vector<float> ref = {0.f, 100.f};
  EXPECT_TRUE(compare(std::vector<float>{0.5f, 100.f}, ref, Tolerance{0.5, 0}).ok());
  EXPECT_FALSE(compare(std::vector<float>{0.75f, 100.f}, ref, Tolerance{0.5, 0}).ok());
  EXPECT_TRUE(compare(std::vector<float>{0.f, 101.f}, ref, Tolerance{0, 0.01}).ok());
  EXPECT_FALSE(compare(std::vector<float>{0.f, 102.f}, ref, Tolerance{0, 0.01}).ok());
  // An all-zero reference: the relative error is the absolute one.
  const Comparison z = compare(std::vector<float>{0.25f}, std::vector<float>{0.f}, Tolerance{});
  EXPECT_EQ(z.max_rel_error, 0.25);
  // Nothing to compare is right.
  EXPECT_TRUE(compare(std::vector<float>{}, std::vector<float>{}, Tolerance{}).ok());
}

TEST(Validation, DifferentSizesAreAnInternalError) {
  EXPECT_THROW(compare(std::vector<float>{1.f}, std::vector<float>{1.f, 2.f}, Tolerance{}),
               InternalError);
}

} // namespace
} // namespace brickdl::kernels
