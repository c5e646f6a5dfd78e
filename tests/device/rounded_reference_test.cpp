// The reference with the kernels' roundings (kernels/cuda/rounded_reference.h) and the check
// the emulated-kernel tests make with it (tests/device/emulated_group.h check_emulated): it
// rounds where the kernels round, and the mistakes the fp32 tolerance of a tf32 or bf16 kernel
// lets through (kernels/validation.h tolerance_for: about 9% of max|ref| for three bf16 layers)
// fail it: a swapped activation, a dropped bias, a scaled output, an all-zero output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/graph_builder.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/emulator.h"
#include "kernels/cuda/rounded_reference.h"
#include "tests/device/device_cases.h"
#include "tests/device/emulated_group.h"

namespace brickdl::cuda {
namespace {

constexpr uint64_t kSeed = 11;

enum class Act { kSigmoid, kHardSigmoid };

// conv 3x3 → conv 1x1 → activation → conv 1x1 (all with biases), 16 input channels: every
// conv on the tensor cores in tf32 and bf16. The activation is the 1x1 conv's epilogue.
Graph chain(DType t, Act act) {
  GraphBuilder b("chain", TensorShape{2, 16, 1, 9, 10, 2}, t);
  const int c1 = b.conv2d(b.input(), 16, 3, 1, 1, 1, 1, true, "c1");
  const int c2 = b.conv2d(c1, 16, 1, 1, 0, 1, 1, true, "c2");
  const int y = act == Act::kSigmoid ? b.sigmoid(c2, "act") : b.hard_sigmoid(c2, "act");
  b.conv2d(y, 16, 1, 1, 0, 1, 1, true, "c3");
  return fuse_for_inference(b.build());
}

Candidate candidate(const Graph& g, Strategy s) {
  return test_support::make_candidate({1, g.size() - 1}, s, {1, 4, 4, 0}, 64);
}

std::string label(DType t, Strategy s) {
  return std::string(dtype_name(t)) + " " + strategy_name(s);
}

constexpr DType kLowPrecisions[] = {DType::kTF32, DType::kBF16};
constexpr Strategy kStrategies[] = {Strategy::kPadded, Strategy::kMemoized, Strategy::kLayerwise};

EmulatorOptions options_for(Strategy s) {
  EmulatorOptions eo;
  eo.workers = s == Strategy::kMemoized ? 3 : 1;
  return eo;
}

// Whether every value is one of the 16-bit storage format's (round trip exact).
bool all_representable(const std::vector<float>& v, int storage) {
  const std::vector<float> again = from_storage(to_storage(v.data(), v.size(), storage), storage);
  for (size_t i = 0; i < v.size(); ++i)
    if (again[i] != v[i])
      return false;
  return true;
}

// The two references agree in fp32 (no rounding to make) up to their summation order.
TEST(RoundedReference, IsTheFp32ReferenceInFp32) {
  const Graph g = chain(DType::kF32, Act::kSigmoid);
  for (Strategy s : kStrategies) {
    const test_support::EmulatedGroup r =
        test_support::emulate_group(g, candidate(g, s), options_for(s), kSeed);
    const kernels::Comparison c =
        kernels::compare(r.rounded, r.reference.output.values(), kernels::Tolerance{0, 0, 1e-6});
    EXPECT_TRUE(c.ok()) << label(DType::kF32, s) << ": " << c.message;
  }
}

// bf16: the output of every strategy is bf16 values (stored), and differs from the fp32
// reference (the roundings were made); tf32 stores fp32 and rounds only the tensor cores'
// operands, so its output differs from the fp32 reference but is not all bf16 values.
TEST(RoundedReference, RoundsWhereTheKernelsRound) {
  for (DType t : kLowPrecisions) {
    const Graph g = chain(t, Act::kSigmoid);
    for (Strategy s : kStrategies) {
      SCOPED_TRACE(label(t, s));
      const test_support::EmulatedGroup r =
          test_support::emulate_group(g, candidate(g, s), options_for(s), kSeed);
      EXPECT_EQ(all_representable(r.rounded, dev::kStorageBf16), t == DType::kBF16);
      const kernels::Comparison c =
          kernels::compare(r.rounded, r.reference.output.values(), kernels::Tolerance{0, 1e-6, 0});
      EXPECT_FALSE(c.ok()); // rounded somewhere
      EXPECT_GT(plan_paths(r.plan).convs_mma, 0);
    }
  }
}

// The memoized and layer-by-layer kernels store their intermediates (bf16 values), the padded
// kernel keeps them in fp32 shared memory. Where an intermediate feeds a tensor-core conv that
// makes no difference (its operands are rounded to bf16 either way); where it feeds an add, it
// does: conv 3x3 → conv 1x1 → add(both) → conv 1x1. The padded and the layer-by-layer rounded
// references differ there, and each kernel is nearer its own plan's reference than another's.
TEST(RoundedReference, FollowsWhereEachStrategyStores) {
  GraphBuilder b("residual", TensorShape{2, 16, 1, 9, 10, 2}, DType::kBF16);
  const int c1 = b.conv2d(b.input(), 16, 3, 1, 1, 1, 1, true, "c1");
  const int c2 = b.conv2d(c1, 16, 1, 1, 0, 1, 1, true, "c2");
  b.conv2d(b.add(c2, c1, "add"), 16, 1, 1, 0, 1, 1, true, "c3");
  const Graph g = fuse_for_inference(b.build());
  std::vector<test_support::EmulatedGroup> runs;
  for (Strategy s : kStrategies)
    runs.push_back(test_support::emulate_group(g, candidate(g, s), options_for(s), kSeed));
  const auto err = [](const std::vector<float>& a, const std::vector<float>& b) {
    return kernels::compare(a, b, {}).max_rel_error;
  };
  EXPECT_GT(err(runs[0].rounded, runs[2].rounded), 0); // padded vs layerwise references
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t j = 0; j < runs.size(); ++j)
      if (i != j && runs[i].rounded != runs[j].rounded) {
        SCOPED_TRACE(std::string(strategy_name(kStrategies[i])) + " vs the reference of " +
                     strategy_name(kStrategies[j]));
        EXPECT_LT(err(runs[i].emu.output, runs[i].rounded),
                  err(runs[i].emu.output, runs[j].rounded));
      }
}

// The bound of chain() by hand (rounded_reference.h): c1 (3x3 over 16 channels, K = 144) reads
// the group's input, rounded alike on both sides: only its fp32 sum counts; c2 and c3 (1x1,
// K = 16) read an operand the kernel computed and the tensor cores rounded (bf16: 2^-7, tf32:
// 2^-10), diluted by sqrt(16) = 4; s = 3. The element-wise rtol is one bf16 ulp, 2^-7, for the
// bf16 output; the fp32 default 1e-4 for tf32 (fp32 storage).
TEST(RoundedTolerance, ByHand) {
  const double u24 = std::ldexp(1.0, -24);
  for (DType t : kLowPrecisions) {
    const Graph g = chain(t, Act::kSigmoid);
    const double ulp = std::ldexp(1.0, t == DType::kBF16 ? -7 : -10);
    const double want = 3 * (u24 * 12 + 2 * (u24 * 4 + ulp / 4));
    for (Strategy s : kStrategies) {
      SCOPED_TRACE(label(t, s));
      const kernels::Tolerance tol = rounded_tolerance(g, plan_kernels(g, candidate(g, s)));
      EXPECT_NEAR(tol.norm_rtol, want, 1e-15);
      EXPECT_EQ(tol.rtol, t == DType::kBF16 ? std::ldexp(1.0, -7) : 1e-4);
      EXPECT_EQ(tol.atol, 1e-5);
    }
  }
  // fp32: no rounded operand, only the sums (3 · (12 + 4 + 4) · 2^-24), and the fp32 defaults.
  const Graph g = chain(DType::kF32, Act::kSigmoid);
  const kernels::Tolerance tol =
      rounded_tolerance(g, plan_kernels(g, candidate(g, Strategy::kPadded)));
  EXPECT_NEAR(tol.norm_rtol, 3 * 20 * u24, 1e-15);
  EXPECT_EQ(tol.rtol, 1e-4);
}

// ---- mistakes the check must catch ------------------------------------------------------------
// Each prints whether the fp32 tolerance the measurers use (group_tolerance) would have taken
// it, and asserts that the rounded check does not.

void report_old_bound(const std::string& what, const std::vector<float>& out,
                      const test_support::EmulatedGroup& right, const Graph& g) {
  const kernels::Tolerance def;
  const kernels::Tolerance old =
      kernels::group_tolerance(g, right.plan.candidate.group, def.atol, def.rtol);
  const kernels::Comparison c = kernels::compare(out, right.reference.output.values(), old);
  std::printf("%s: max error %.4f of max|ref|; the fp32 tolerance (norm_rtol %.4f) %s it\n",
              what.c_str(), c.max_rel_error, old.norm_rtol, c.ok() ? "accepts" : "rejects");
}

// `check` on chain(t, kSigmoid) emulated in each low precision t and strategy.
void for_each_case(const std::function<void(const Graph&, const test_support::EmulatedGroup&, DType,
                                            Strategy)>& check) {
  for (DType t : kLowPrecisions) {
    const Graph g = chain(t, Act::kSigmoid);
    for (Strategy s : kStrategies) {
      SCOPED_TRACE(label(t, s));
      check(g, test_support::emulate_group(g, candidate(g, s), options_for(s), kSeed), t, s);
    }
  }
}

// A kernel computing hard_sigmoid where the graph says sigmoid.
TEST(EmulatedChecks, ASwappedActivationFails) {
  for_each_case([](const Graph& right, const test_support::EmulatedGroup& r, DType t, Strategy s) {
    const Graph wrong = chain(t, Act::kHardSigmoid);
    const test_support::EmulatedGroup w =
        test_support::emulate_group(wrong, candidate(wrong, s), options_for(s), kSeed);
    ASSERT_EQ(w.emu.output.size(), r.rounded.size());
    for (int id = 1; id < right.size(); ++id) // the same parameters, the same inputs
      ASSERT_EQ(w.weights.at(id).weight, r.weights.at(id).weight);
    ASSERT_EQ(w.inputs[0].values(), r.inputs[0].values());
    test_support::EmulatedGroup swapped = r;
    swapped.emu.output = w.emu.output;
    EXPECT_FALSE(test_support::check_emulated(right, swapped).rounded.ok());
    report_old_bound("hard_sigmoid for sigmoid, " + label(t, s), w.emu.output, r, right);
  });
}

// A kernel that drops the last conv's bias.
TEST(EmulatedChecks, ADroppedBiasFails) {
  for_each_case([](const Graph& g, const test_support::EmulatedGroup& r, DType t, Strategy s) {
    std::vector<const float*> raw;
    for (const auto& in : r.inputs)
      raw.push_back(in.data());
    std::vector<std::vector<float>> weights, biases;
    for (int id : r.plan.layer_ids) {
      weights.push_back(r.weights.at(id).weight);
      biases.push_back(r.weights.at(id).bias);
    }
    ASSERT_FALSE(biases.back().empty());
    biases.back().assign(biases.back().size(), 0.f);
    test_support::EmulatedGroup dropped = r;
    dropped.emu = emulate_plan(g, r.plan, raw, weights, biases, options_for(s));
    EXPECT_FALSE(test_support::check_emulated(g, dropped).rounded.ok());
    report_old_bound("no bias on c3, " + label(t, s), dropped.emu.output, r, g);
  });
}

// Every output scaled by 1.08 (a wrong scale or folding), and an all-zero output.
TEST(EmulatedChecks, AScaledOrZeroOutputFails) {
  for_each_case([](const Graph& g, const test_support::EmulatedGroup& r, DType t, Strategy s) {
    EXPECT_TRUE(test_support::check_emulated(g, r).rounded.ok()); // the unchanged output
    test_support::EmulatedGroup scaled = r;
    for (float& v : scaled.emu.output)
      v *= 1.08f;
    EXPECT_FALSE(test_support::check_emulated(g, scaled).rounded.ok());
    report_old_bound("output x 1.08, " + label(t, s), scaled.emu.output, r, g);
    test_support::EmulatedGroup zero = r;
    zero.emu.output.assign(r.emu.output.size(), 0.f);
    EXPECT_FALSE(test_support::check_emulated(g, zero).nonzero);
  });
}

} // namespace
} // namespace brickdl::cuda
