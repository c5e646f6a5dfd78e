// The shared output-vs-reference comparison (kernels/validation.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/graph_builder.h"
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

TEST(Validation, NormWiseToleranceIsRelativeToTheLargestReference) {
  const std::vector<float> ref = {0.f, -100.f, kNaN};
  const Tolerance norm{0, 0, 0.01}; // 1 = 0.01 · max|ref| (the NaN is not a magnitude)
  EXPECT_TRUE(compare(std::vector<float>{1.f, -99.f, kNaN}, ref, norm).ok());
  const Comparison c = compare(std::vector<float>{1.5f, -100.f, kNaN}, ref, norm);
  EXPECT_EQ(c.bad, 1);
  EXPECT_NE(c.message.find("norm_rtol 0.010000 x max|ref|"), std::string::npos) << c.message;
}

// A CPU run computes in fp32 whatever the graph's precision: its tolerance is fp32's for the
// same reductions, the graph's precision's is the kernels' that round.
TEST(Validation, Fp32GroupToleranceIgnoresTheGraphsPrecision) {
  for (DType t : {DType::kF32, DType::kTF32, DType::kBF16, DType::kF16}) {
    GraphBuilder b("t", TensorShape{1, 512, 1, 6, 6, 2}, t);
    int x = b.input();
    for (int i = 0; i < 4; ++i)
      x = b.conv2d(x, 512, 3, 1, 1);
    const Graph g = b.build();
    const Tolerance cpu = fp32_group_tolerance(g, Group{1, 4}, 1e-6, 1e-5);
    // 8 · 4 · (2^-24 + 2^-24 · sqrt(4608)) = 1.3e-4 (fp32's own, above the default rtol),
    // whatever t.
    EXPECT_DOUBLE_EQ(cpu.norm_rtol, 32 * std::ldexp(1.0, -24) * (1 + std::sqrt(4608.0)))
        << dtype_name(t);
    EXPECT_EQ(cpu.atol, 1e-6);
    EXPECT_EQ(cpu.rtol, 1e-5);
    EXPECT_EQ(group_tolerance(g, Group{1, 4}, 1e-6, 1e-5).norm_rtol,
              tolerance_for(t, 4608, 4).norm_rtol);
  }
}

// bound_used: the worst element's error over its own allowance. ref {0, 100, 10}, atol 0.5,
// rtol 0.01, norm_rtol 0.001 (0.1 of max|ref| 100): allowances 0.6, 1.6, 0.7; errors 0.3, 0.8,
// 0.7 use 0.5, 0.5 and 1 of them.
TEST(Validation, BoundUsedIsTheWorstErrorOverItsAllowance) {
  const std::vector<float> ref = {0.f, 100.f, 10.f};
  const Tolerance tol{0.5, 0.01, 0.001};
  const Comparison c = compare(std::vector<float>{0.3f, 100.8f, 9.3f}, ref, tol);
  EXPECT_TRUE(c.ok());
  EXPECT_NEAR(c.bound_used, 1.0, 1e-5);
  EXPECT_NEAR(compare(std::vector<float>{0.3f, 100.8f, 10.f}, ref, tol).bound_used, 0.5, 1e-5);
  const Comparison over = compare(std::vector<float>{0.f, 100.f, 11.4f}, ref, tol);
  EXPECT_FALSE(over.ok());
  EXPECT_NEAR(over.bound_used, 2.0, 1e-5);
  // No allowance at all: any error is infinitely over it, none uses nothing.
  EXPECT_EQ(
      compare(std::vector<float>{1.f}, std::vector<float>{1.f}, Tolerance{0, 0, 0}).bound_used,
      0.0);
  EXPECT_EQ(
      compare(std::vector<float>{1.5f}, std::vector<float>{1.f}, Tolerance{0, 0, 0}).bound_used,
      std::numeric_limits<double>::infinity());
}

// 8 · L · (u_p + 2^-24 · sqrt(K)), u_p = 2^-(p+1), over the fp32 defaults (validation.h).
TEST(Validation, ToleranceGrowsWithTheReductionAndACoarserPrecision) {
  EXPECT_DOUBLE_EQ(unit_roundoff(DType::kF32), std::ldexp(1.0, -24));
  EXPECT_DOUBLE_EQ(unit_roundoff(DType::kTF32), std::ldexp(1.0, -11));
  EXPECT_DOUBLE_EQ(unit_roundoff(DType::kBF16), std::ldexp(1.0, -8));
  EXPECT_DOUBLE_EQ(unit_roundoff(DType::kF16), std::ldexp(1.0, -11));
  // fp32 keeps today's values while L·(1 + sqrt(K)) < 209: one layer up to K ≈ 43 000, three
  // 3×3 convs of 512 channels (K = 4608).
  for (auto [k, l] : {std::pair<int64_t, int>{1, 1}, {9, 1}, {4608, 3}, {40000, 1}, {81, 6}}) {
    const Tolerance t = tolerance_for(DType::kF32, k, l);
    EXPECT_EQ(t.atol, Tolerance{}.atol);
    EXPECT_EQ(t.rtol, Tolerance{}.rtol);
    EXPECT_EQ(t.norm_rtol, 0) << k << " " << l;
  }
  const double u32 = std::ldexp(1.0, -24);
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kF32, 1 << 20).norm_rtol, 8 * (u32 + u32 * 1024));
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kF32, 4608, 53).norm_rtol,
                   8 * 53 * (u32 + u32 * std::sqrt(4608.0)));
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kTF32, 64).norm_rtol, 8 * (std::ldexp(1.0, -11) + 8 * u32));
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kBF16, 64, 3).norm_rtol,
                   8 * 3 * (std::ldexp(1.0, -8) + 8 * u32));
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kF16, 64).norm_rtol,
                   tolerance_for(DType::kTF32, 64).norm_rtol);
  for (DType t : {DType::kF32, DType::kTF32, DType::kBF16, DType::kF16}) {
    for (int l : {1, 3}) {
      double last = 0;
      for (int64_t k = 1; k <= (int64_t{1} << 24); k *= 4) {
        const double n = tolerance_for(t, k, l).norm_rtol;
        EXPECT_GE(n, last) << dtype_name(t) << " K " << k;
        EXPECT_GE(tolerance_for(t, k, l + 1).norm_rtol, n) << dtype_name(t) << " K " << k;
        last = n;
      }
      EXPECT_GT(last, 0);
    }
  }
  for (int64_t k : {1, 576, 1 << 20}) {
    EXPECT_LE(tolerance_for(DType::kF32, k).norm_rtol, tolerance_for(DType::kTF32, k).norm_rtol);
    EXPECT_LT(tolerance_for(DType::kTF32, k).norm_rtol, tolerance_for(DType::kBF16, k).norm_rtol);
  }
  // Never so loose that an all-zero output passes a ResNet-50 bottleneck (K = 4608, 3 convs).
  EXPECT_LT(tolerance_for(DType::kBF16, 4608, 3).norm_rtol, 0.1);
}

// The largest reduction of the group's conv / linear layers, and how many there are.
TEST(Validation, ReductionOfAGroup) {
  GraphBuilder b("g", TensorShape{1, 8, 1, 6, 6, 2});
  const int c1 = b.conv2d(0, 16, 3, 1, 1);        // 8 · 9 = 72
  const int c2 = b.conv2d(c1, 16, 3, 1, 1, 1, 4); // 16 / 4 · 9 = 36
  const int r = b.relu(c2);                       // no reduction
  const int c3 = b.conv2d(r, 4, 1);               // 16
  const int l = b.linear(b.flatten(c3), 10);      // 4 · 36 = 144
  const Graph g = b.build();
  auto red = [&](int first, int last) {
    const Reduction x = group_reduction(g, Group{first, last});
    return std::pair{x.length, x.layers};
  };
  EXPECT_EQ(red(c1, c1), (std::pair<int64_t, int>{72, 1}));
  EXPECT_EQ(red(c1, c3), (std::pair<int64_t, int>{72, 3}));
  EXPECT_EQ(red(c2, c3), (std::pair<int64_t, int>{36, 2}));
  EXPECT_EQ(red(r, r), (std::pair<int64_t, int>{1, 1}));
  EXPECT_EQ(red(l, l), (std::pair<int64_t, int>{144, 1}));
  const Tolerance t = group_tolerance(g, Group{c1, c3}, 0, 1e-3); // the experiment's own
  EXPECT_EQ(t.atol, 0);
  EXPECT_EQ(t.rtol, 1e-3);
  EXPECT_EQ(t.norm_rtol, 0); // fp32

  // A transposed conv: the most taps one output meets. Kernel 3, stride 2: outputs of one
  // parity meet taps {0, 2}, the others tap 1, so 2 per axis; 8 / 2 groups · 2 · 2 = 16 (its
  // mean, MACs / outputs, is 8 / 2 · 9 / 4 = 9). Kernel 3, stride 2, dilation 2: k·2 ≡ r
  // (mod 2) holds for every tap or none, so 3 per axis: 8 · 9 = 72.
  Window w;
  w.kernel = {1, 3, 3};
  w.stride = {1, 2, 2};
  w.pad = {0, 1, 1};
  const int t1 = b.conv_transpose(0, 4, w, {0, 1, 1}, 2);
  w.dilation = {1, 2, 2};
  const int t2 = b.conv_transpose(0, 4, w, {0, 1, 1});
  const Graph gt = b.build();
  EXPECT_EQ(group_reduction(gt, Group{t1, t1}).length, 16);
  EXPECT_EQ(group_reduction(gt, Group{t2, t2}).length, 72);

  GraphBuilder b16("g16", TensorShape{1, 8, 1, 6, 6, 2}, DType::kBF16);
  b16.conv2d(b16.conv2d(0, 16, 3, 1, 1), 4, 1);
  const Graph g16 = b16.build();
  EXPECT_DOUBLE_EQ(group_tolerance(g16, Group{1, 2}, 1e-5, 1e-4).norm_rtol,
                   tolerance_for(DType::kBF16, 72, 2).norm_rtol);
}

// `x` rounded to nearest even with a `bits`-bit mantissa (what a tensor core multiplies).
float round_mantissa(float x, int bits) {
  int e = 0;
  const double m = std::frexp(double{x}, &e); // x = m · 2^e, 0.5 <= |m| < 1
  return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(m, bits + 1)), e - bits - 1));
}

// Dot products of K random terms whose inputs are rounded to the precision, accumulated in
// fp32, against the exact sums: inside tolerance_for, and (for tf32 / bf16) outside the fp32
// default, so the allowance is needed and not slack.
TEST(Validation, RoundedInputDotProductsFitTheirPrecisionsTolerance) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  for (auto [t, bits] : {std::pair{DType::kTF32, 10}, std::pair{DType::kBF16, 7}}) {
    for (int64_t k : {9, 576, 4608}) {
      std::vector<float> out, ref;
      for (int i = 0; i < 500; ++i) {
        float acc = 0;
        double exact = 0;
        for (int64_t j = 0; j < k; ++j) {
          const float a = val(rng), w = val(rng);
          acc += round_mantissa(a, bits) * round_mantissa(w, bits);
          exact += double{a} * w;
        }
        out.push_back(acc);
        ref.push_back(static_cast<float>(exact));
      }
      const Comparison c = compare(out, ref, tolerance_for(t, k));
      EXPECT_TRUE(c.ok()) << dtype_name(t) << " K " << k << ": " << c.message;
      EXPECT_FALSE(compare(out, ref, Tolerance{}).ok()) << dtype_name(t) << " K " << k;
    }
  }
}

TEST(Validation, DifferentSizesAreAnInternalError) {
  EXPECT_THROW(compare(std::vector<float>{1.f}, std::vector<float>{1.f, 2.f}, Tolerance{}),
               InternalError);
}

// The --check path (brickdl-run): a NaN-producing mismatch fails and says so.
TEST(Validation, CheckSummaryFailsOnANaNMismatch) {
  const std::vector<float> ref = {1.f, 2.f, kNaN, 4.f};
  const Tolerance tol{};
  const Comparison same = compare(std::vector<float>{1.f, 2.f, kNaN, 4.f}, ref, tol);
  EXPECT_TRUE(same.ok());
  EXPECT_NE(check_summary(same, tol).find("passed: max relative error 0"), std::string::npos)
      << check_summary(same, tol);
  // The output lost the NaN (relu(NaN) = 0) and gained one where the reference is finite.
  const Comparison lost = compare(std::vector<float>{1.f, kNaN, 0.f, 4.f}, ref, tol);
  EXPECT_FALSE(lost.ok());
  EXPECT_EQ(lost.bad, 2);
  EXPECT_EQ(lost.undefined, 2);
  const std::string line = check_summary(lost, tol);
  EXPECT_NE(line.find("FAILED: max relative error undefined (2 of 4 elements"), std::string::npos)
      << line;
  EXPECT_NE(line.find("2 with NaN or infinity on one side only"), std::string::npos) << line;
  // An infinity for a finite value, alone.
  EXPECT_FALSE(compare(std::vector<float>{1.f, kInf, kNaN, 4.f}, ref, tol).ok());
}

} // namespace
} // namespace brickdl::kernels
