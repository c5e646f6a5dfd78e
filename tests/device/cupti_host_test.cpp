// CUPTI's profiler host API needs no GPU: the default metrics must exist on the chips the
// project targets (A100 = GA100, H100 / H200 = GH100). Skipped only without CUPTI. Also the
// backend's pure decision rules (device recovery, shared-memory opt-in), which never skip.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/cuda/calibration_file.h"
#include "kernels/cuda/cupti_profiler.h"
#include "kernels/cuda/detail/shared_memory.h"
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

// CUPTI refuses every name added after an unknown one to the same host object; each name is
// checked on its own, so a known metric after an unknown one stays known.
TEST(CuptiHost, AKnownMetricAfterAnUnknownOneStaysKnown) {
  if (!CuptiProfiler::is_supported())
    GTEST_SKIP() << "built without CUPTI";
  const auto unknown = CuptiProfiler::unknown_metrics(
      "GH100", {"brickdl__no_such.sum", "dram__bytes_read.sum", "sm__cycles_elapsed.avg"});
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0], "brickdl__no_such.sum");
}

// brickdl-calibrate's tensor-pipe metrics: all known on Hopper. On the A100 the wgmma ones
// (gmma) and the per-instruction tensor-path operations are unknown, the tensor pipe's activity
// and mma.sync instructions known; the calibration file lists the unknown, never fails on them.
TEST(CuptiHost, CalibrationMetricsExistWhereTheirInstructionsDo) {
  if (!CuptiProfiler::is_supported())
    GTEST_SKIP() << "built without CUPTI";
  const auto metrics = calibration_metrics();
  EXPECT_TRUE(CuptiProfiler::unknown_metrics("GH100", metrics).empty());
  const auto on_a100 = CuptiProfiler::unknown_metrics("GA100", metrics);
  const auto unknown_on_a100 = [&](const std::string& m) {
    return std::find(on_a100.begin(), on_a100.end(), m) != on_a100.end();
  };
  int gmma = 0;
  for (const auto& m : metrics) {
    SCOPED_TRACE(m);
    if (m.find("gmma") != std::string::npos) {
      ++gmma;
      EXPECT_TRUE(unknown_on_a100(m));
    } else if (m.find("ops_path") == std::string::npos) {
      EXPECT_FALSE(unknown_on_a100(m));
    }
  }
  EXPECT_EQ(gmma, 3);
  const int passes = CuptiProfiler::passes("GH100", metrics);
  EXPECT_GE(passes, 1);
  EXPECT_LE(passes, 16); // each pass replays the conv once: a few, not dozens
}

// The recovery rule of statuses.h: a reset only for a sticky error or work still running.
TEST(DeviceRecovery, ResetOnlyAfterStickyErrorsOrWorkStillRunning) {
  // A cooperative memoized time-out or a cleared (non-sticky) error: nothing persists.
  EXPECT_EQ(classify(true, 0), DeviceState::kHealthy);
  EXPECT_FALSE(needs_reset(classify(true, 0)));
  // cudaErrorIllegalAddress (700) still returned after clearing: sticky.
  EXPECT_EQ(classify(true, 700), DeviceState::kStickyError);
  EXPECT_TRUE(needs_reset(classify(true, 700)));
  // A time-out whose kernel outlived its grace period: only a reset stops it.
  EXPECT_EQ(classify(false, 0), DeviceState::kStillRunning);
  EXPECT_TRUE(needs_reset(classify(false, 0)));
  // Which failures are checked at all: those that ran something on the device.
  EXPECT_TRUE(TimedOut("t").touches_device());
  EXPECT_TRUE(CudaError("e").touches_device());
  EXPECT_FALSE(WrongResult("w").touches_device());
  EXPECT_FALSE(Unsupported("u").touches_device());
  EXPECT_FALSE(CompileError("c", "log").touches_device());
}

// The opt-in counts static shared memory too: 40 KiB static + 10 KiB dynamic is over 48 KiB.
TEST(SharedMemoryOptIn, CountsStaticAndDynamicTogether) {
  constexpr int64_t kKiB = 1024, kOptin = 227 * kKiB;
  EXPECT_FALSE(detail::needs_shared_opt_in("k", 0, 48 * kKiB, kOptin));
  EXPECT_FALSE(detail::needs_shared_opt_in("k", 8 * kKiB, 40 * kKiB, kOptin));
  EXPECT_TRUE(detail::needs_shared_opt_in("k", 40 * kKiB, 10 * kKiB, kOptin));
  EXPECT_TRUE(detail::needs_shared_opt_in("k", 0, 48 * kKiB + 1, kOptin));
  EXPECT_TRUE(detail::needs_shared_opt_in("k", 2 * kKiB, 225 * kKiB, kOptin)); // exactly the max
}

TEST(SharedMemoryOptIn, OverTheDeviceMaximumIsUnsupportedWithBothNumbers) {
  try {
    detail::needs_shared_opt_in("brickdl_group", 4096, 229376, 232448);
    FAIL() << "expected Unsupported";
  } catch (const Unsupported& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("brickdl_group"), std::string::npos) << m;
    EXPECT_NE(m.find("4096 bytes of static"), std::string::npos) << m;
    EXPECT_NE(m.find("229376 bytes of dynamic"), std::string::npos) << m;
    EXPECT_NE(m.find("allows 232448"), std::string::npos) << m;
    EXPECT_EQ(e.status(), MeasureStatus::kUnsupported);
  }
}

} // namespace
} // namespace brickdl::cuda
