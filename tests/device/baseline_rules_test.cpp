// The pure rules of the cuDNN baseline and of cold timing (no GPU, no cuDNN needed; never
// skipped): which cuDNN math a baseline asks for and which algorithms it refuses, and how long
// the spin before a timed run is.
#include <gtest/gtest.h>

#include "kernels/cuda/cudnn_layerwise.h"
#include "kernels/cuda/detail/launch_spin.h"

namespace brickdl::cuda {
namespace {

using Math = CudnnLayerwise::Math;
using LibraryMath = CudnnLayerwise::LibraryMath;

// TF32 asks for cuDNN's default math (TF32 tensor cores for fp32 data on Ampere and later), not
// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (which permits FP32 -> FP16); strict FP32 stays on FMA.
TEST(CudnnRules, DescriptorMathPerPrecision) {
  EXPECT_EQ(CudnnLayerwise::descriptor_math(Math::kStrictFp32), LibraryMath::kFma);
  EXPECT_EQ(CudnnLayerwise::descriptor_math(Math::kTf32), LibraryMath::kDefault);
  EXPECT_EQ(CudnnLayerwise::descriptor_math(Math::kBf16), LibraryMath::kTensorOp);
  EXPECT_EQ(CudnnLayerwise::descriptor_math(Math::kFp16), LibraryMath::kTensorOp);
  for (Math m : {Math::kStrictFp32, Math::kTf32, Math::kBf16, Math::kFp16})
    EXPECT_NE(CudnnLayerwise::descriptor_math(m), LibraryMath::kTensorOpAllowConversion);
}

// No math takes an algorithm that down-converts its inputs; strict FP32 takes no tensor-op
// entry; TF32 and the 16-bit maths take every other entry (the fastest honest one wins).
TEST(CudnnRules, NoMathAcceptsADownConvertingAlgorithm) {
  for (Math m : {Math::kStrictFp32, Math::kTf32, Math::kBf16, Math::kFp16}) {
    EXPECT_FALSE(CudnnLayerwise::accepts(m, LibraryMath::kTensorOpAllowConversion));
    EXPECT_TRUE(CudnnLayerwise::accepts(m, LibraryMath::kDefault));
    EXPECT_TRUE(CudnnLayerwise::accepts(m, LibraryMath::kFma));
  }
  EXPECT_FALSE(CudnnLayerwise::accepts(Math::kStrictFp32, LibraryMath::kTensorOp));
  EXPECT_TRUE(CudnnLayerwise::accepts(Math::kTf32, LibraryMath::kTensorOp));
  EXPECT_TRUE(CudnnLayerwise::accepts(Math::kBf16, LibraryMath::kTensorOp));
}

TEST(CudnnRules, Tf32OverrideIsExactlyZero) {
  EXPECT_TRUE(CudnnLayerwise::tf32_disabled_by_environment("0"));
  EXPECT_FALSE(CudnnLayerwise::tf32_disabled_by_environment(nullptr));
  EXPECT_FALSE(CudnnLayerwise::tf32_disabled_by_environment("1"));
  EXPECT_FALSE(CudnnLayerwise::tf32_disabled_by_environment("00"));
  EXPECT_FALSE(CudnnLayerwise::tf32_disabled_by_environment(""));
}

// The spin outlasts the host's queuing of a run with a margin: 4 x the slowest warm-up enqueue
// after the first (which loads modules), never under the floor nor over the ceiling.
TEST(ColdTimingRules, SpinCoversTheSlowestWarmupEnqueue) {
  using namespace detail;
  EXPECT_EQ(spin_us_for({}), kSpinUnmeasuredUs);
  EXPECT_EQ(spin_us_for({1.0, 2.0, 3.0}), kSpinFloorUs);               // 12 us: the floor
  EXPECT_EQ(spin_us_for({900.0, 30.0, 50.0}), kSpinMarginFactor * 50); // the first left out
  EXPECT_EQ(spin_us_for({40.0}), kSpinMarginFactor * 40);              // only one: taken
  EXPECT_EQ(spin_us_for({1.0, 1e5}), kSpinCeilingUs);
  for (double us : {1.0, 10.0, 100.0, 1000.0})
    EXPECT_GE(spin_us_for({us, us, us}), std::min(us, kSpinCeilingUs)) << us;
}

} // namespace
} // namespace brickdl::cuda
