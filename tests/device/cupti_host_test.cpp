// CUPTI's profiler host API needs no GPU: the default metrics must exist on the chips the
// project targets (A100 = GA100, H100 / H200 = GH100). Skipped only without CUPTI.
#include <gtest/gtest.h>

#include "kernels/cuda/cupti_profiler.h"
#include "kernels/cuda/statuses.h"

namespace brickdl::cuda {
namespace {

TEST(CuptiHost, DefaultMetricsExistOnA100AndH100Chips) {
  if (!CuptiProfiler::is_supported())
    GTEST_SKIP() << "built without CUPTI";
  const auto metrics = CuptiProfiler::default_metrics();
  ASSERT_GE(metrics.size(), 10u);
  for (const char* chip : {"GA100", "GH100"}) {
    SCOPED_TRACE(chip);
    EXPECT_TRUE(CuptiProfiler::unknown_metrics(chip, metrics).empty());
    const int passes = CuptiProfiler::passes(chip, metrics);
    EXPECT_GE(passes, 1);
    EXPECT_LE(passes, 64);
  }
}

TEST(CuptiHost, UnknownMetricsAreReported) {
  if (!CuptiProfiler::is_supported())
    GTEST_SKIP() << "built without CUPTI";
  const auto unknown =
      CuptiProfiler::unknown_metrics("GH100", {"dram__bytes_read.sum", "brickdl__no_such.sum"});
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0], "brickdl__no_such.sum");
  EXPECT_THROW(CuptiProfiler::unknown_metrics("NOCHIP", {"dram__bytes_read.sum"}), CudaError);
}

} // namespace
} // namespace brickdl::cuda
