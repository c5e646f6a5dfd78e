// The calibration file of brickdl-calibrate (kernels/cuda/calibration_file.h) without a GPU: the
// arithmetic from timings to values, which timings become failures, and the JSON against the
// format brickdl-calibration/1 (every key, its type, fractions in (0, 1.5]).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/gpu_spec.h"
#include "kernels/cuda/calibration_file.h"

namespace brickdl::cuda {
namespace {

using nlohmann::json;

const GpuSpec& h200() {
  const GpuSpec* s = find_gpu_spec("H200");
  EXPECT_NE(s, nullptr);
  return *s;
}

TEST(CalibrationArithmetic, FlopsAndMillisecondsToTflopsAndFraction) {
  // 1e12 FLOPs in 10 ms: 100 TFLOP/s; of a 400 TFLOP/s peak: a quarter.
  EXPECT_DOUBLE_EQ(tflops_per_s(1e12, 10), 100);
  EXPECT_DOUBLE_EQ(fraction_of_peak(1e12, 10, 400), 0.25);
  // The format's example: 306.7 TFLOP/s of H200's 494.7 TF32 peak.
  const double flops = 306.7e12 * 1.234e-3;
  EXPECT_NEAR(fraction_of_peak(flops, 1.234, tensor_peak_tflops(h200(), DType::kTF32)),
              306.7 / 494.7, 1e-12);
  EXPECT_LT(fraction_of_peak(1e12, 0, 400), 0);
  EXPECT_LT(fraction_of_peak(1e12, -1, 400), 0);
  EXPECT_LT(fraction_of_peak(1e12, 10, 0), 0);
  EXPECT_LT(fraction_of_peak(0, 10, 400), 0);
  EXPECT_LT(tflops_per_s(1e12, std::nan("")), 0);
}

TEST(CalibrationArithmetic, BytesAndMillisecondsToGigabytesPerSecond) {
  // 2 GiB in 0.5 ms: 4294.967296 GB/s (GB = 1e9 bytes, not 2^30).
  EXPECT_DOUBLE_EQ(bandwidth_gbs(2.0 * (1 << 30), 0.5), 4294.967296);
  EXPECT_LT(bandwidth_gbs(1e9, 0), 0);
  EXPECT_LT(bandwidth_gbs(0, 1), 0);
}

TEST(CalibrationArithmetic, LaunchGapFromEventTimes) {
  // t_1 = 0.010 ms, t_201 = 0.510 ms: 200 gaps of 2.5 us.
  EXPECT_NEAR(launch_gap_us(0.010, 0.510, 201), 2.5, 1e-12);
  EXPECT_LT(launch_gap_us(0.010, 0.510, 1), 0);   // one kernel has no gap
  EXPECT_LT(launch_gap_us(0.510, 0.010, 201), 0); // N kernels faster than one: no gap
  EXPECT_LT(launch_gap_us(0, 0.5, 201), 0);
}

TEST(CalibrationArithmetic, MedianAndBest) {
  EXPECT_DOUBLE_EQ(median_ms({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median_ms({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(best_ms({3, 1, 2}), 1);
  EXPECT_LT(median_ms({}), 0);
  EXPECT_LT(best_ms({}), 0);
}

TEST(CalibrationArithmetic, SpecValuesAndPeaks) {
  const GpuSpec& s = h200();
  EXPECT_EQ(spec_value(s, wgmma_fraction_key(DType::kTF32)), s.wgmma_fraction);
  EXPECT_EQ(spec_value(s, mma_sync_fraction_key(DType::kBF16)), s.mma_sync_fraction);
  EXPECT_EQ(spec_value(s, kDramBandwidthKey), s.dram_bandwidth_gbs);
  EXPECT_EQ(spec_value(s, kL2BandwidthKey), s.l2_bandwidth_gbs);
  EXPECT_EQ(spec_value(s, kLaunchOverheadKey), s.launch_overhead_us);
  EXPECT_THROW(spec_value(s, "atomic_ns"), std::invalid_argument);
  EXPECT_EQ(tensor_peak_tflops(s, DType::kBF16), s.bf16_tflops);
  EXPECT_THROW(tensor_peak_tflops(s, DType::kF32), std::invalid_argument);
  EXPECT_EQ(wgmma_fraction_key(DType::kTF32), "wgmma_fraction.tf32");
  EXPECT_EQ(mma_sync_fraction_key(DType::kBF16), "mma_sync_fraction.bf16");
  EXPECT_EQ(cudnn_fraction_key(DType::kTF32), "cudnn_fraction.tf32");
}

TEST(CalibrationFile, BadTimingsBecomeFailuresNamingTheNumber) {
  CalibrationFile f;
  record_value(f, "wgmma_fraction.tf32", 0.62, 0.75, "ok");
  record_value(f, "wgmma_fraction.bf16", 2.0, 0.75, "conv");
  record_value(f, kDramBandwidthKey, -1, 4800, "sweep");
  record_value(f, kL2BandwidthKey, std::nan(""), 10000, "sweeps");
  EXPECT_EQ(f.values.size(), 1u);
  ASSERT_EQ(f.failed.size(), 3u);
  EXPECT_NE(f.failed.at("wgmma_fraction.bf16").find("implausible: 2.0"), std::string::npos)
      << f.failed.at("wgmma_fraction.bf16");
  EXPECT_NE(f.failed.at(kDramBandwidthKey).find("sweep"), std::string::npos);
  EXPECT_EQ(calibration_exit_status(f), 1);
  // A bandwidth has no plausibility cap of a fraction; a later success replaces a failure.
  record_value(f, kDramBandwidthKey, 9000, 4800, "sweep");
  record_value(f, "wgmma_fraction.bf16", 0.5, 0.75, "conv");
  record_value(f, kL2BandwidthKey, 8000, 10000, "sweeps");
  EXPECT_TRUE(f.failed.empty());
  EXPECT_EQ(calibration_exit_status(f), 0);
  record_failure(f, kL2BandwidthKey, "timed out");
  EXPECT_EQ(f.values.count(kL2BandwidthKey), 0u);
  EXPECT_EQ(calibration_exit_status(f), 1);
}

TEST(CalibrationFile, UtcTimestamp) {
  EXPECT_EQ(utc_timestamp(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(utc_timestamp(1796227200), "2026-12-02T16:00:00Z");
}

CalibrationFile example() {
  CalibrationFile f;
  f.spec = "H200";
  f.device = {"NVIDIA H200", "9.0", 132, "13000", "13000", "0000:3b:00.0"};
  f.measured_at = "2026-12-02T16:00:00Z";
  f.brickdl = "0123456789ab";
  const GpuSpec& s = h200();
  for (DType t : {DType::kTF32, DType::kBF16}) {
    record_value(f, wgmma_fraction_key(t), 0.62, s.wgmma_fraction, "conv wgmma");
    record_value(f, mma_sync_fraction_key(t), 0.41, s.mma_sync_fraction, "conv mma.sync");
  }
  record_value(f, kDramBandwidthKey, 4100, s.dram_bandwidth_gbs, "read sweep");
  record_value(f, kL2BandwidthKey, 9000, s.l2_bandwidth_gbs, "L2 sweeps");
  record_value(f, kLaunchOverheadKey, 1.9, s.launch_overhead_us, "empty kernels");
  f.reference[cudnn_fraction_key(DType::kTF32)] = {0.8, "cuDNN"};
  f.metrics["wgmma_fraction.tf32/sm__cycles_elapsed.avg"] = 123.0;
  f.unknown_metrics = {"sm__no_such.sum"};
  return f;
}

// Every key of brickdl-calibration/1 with its type; each value an object of value, spec, how;
// the fractions in (0, 1.5].
void check_format(const json& j) {
  ASSERT_TRUE(j.is_object());
  for (const char* k : {"format", "spec", "measured_at", "brickdl"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    EXPECT_TRUE(j[k].is_string()) << k;
  }
  EXPECT_EQ(j["format"], "brickdl-calibration/1");
  const json& d = j.at("device");
  for (const char* k : {"name", "cc", "driver", "runtime", "pci_bus_id"})
    EXPECT_TRUE(d.at(k).is_string()) << k;
  EXPECT_TRUE(d.at("sm_count").is_number_integer());
  for (const auto& [k, v] : j.at("values").items()) {
    SCOPED_TRACE(k);
    ASSERT_EQ(v.size(), 3u);
    EXPECT_TRUE(v.at("value").is_number());
    EXPECT_TRUE(v.at("spec").is_number());
    EXPECT_TRUE(v.at("how").is_string());
    EXPECT_GT(v["value"].get<double>(), 0);
    if (k.find("fraction") != std::string::npos)
      EXPECT_LE(v["value"].get<double>(), 1.5);
  }
  for (const auto& [k, v] : j.at("failed").items())
    EXPECT_TRUE(v.is_string()) << k;
  for (const auto& [k, v] : j.at("reference").items()) {
    EXPECT_TRUE(v.at("value").is_number()) << k;
    EXPECT_TRUE(v.at("how").is_string()) << k;
  }
  for (const auto& [k, v] : j.at("metrics").items())
    EXPECT_TRUE(v.is_number()) << k;
  ASSERT_TRUE(j.at("unknown_metrics").is_array());
  for (const auto& v : j["unknown_metrics"])
    EXPECT_TRUE(v.is_string());
}

TEST(CalibrationFile, JsonHasEveryKeyOfTheFormat) {
  const CalibrationFile f = example();
  const json j = json::parse(calibration_json(f));
  check_format(j);
  EXPECT_EQ(j["spec"], "H200");
  EXPECT_EQ(j["device"]["cc"], "9.0");
  EXPECT_EQ(j["device"]["sm_count"], 132);
  EXPECT_EQ(j["values"].size(), 7u);
  EXPECT_DOUBLE_EQ(j["values"]["wgmma_fraction.tf32"]["value"].get<double>(), 0.62);
  EXPECT_DOUBLE_EQ(j["values"]["wgmma_fraction.tf32"]["spec"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["values"]["dram_bandwidth_gbs"]["spec"].get<double>(), 4800);
  EXPECT_EQ(j["values"]["launch_overhead_us"]["how"], "empty kernels");
  EXPECT_TRUE(j["failed"].empty());
  EXPECT_DOUBLE_EQ(j["reference"]["cudnn_fraction.tf32"]["value"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(j["metrics"]["wgmma_fraction.tf32/sm__cycles_elapsed.avg"].get<double>(), 123);
  EXPECT_EQ(j["unknown_metrics"], json::array({"sm__no_such.sum"}));
}

TEST(CalibrationFile, FailuresAndEmptySectionsKeepTheirTypes) {
  CalibrationFile f = example();
  record_failure(f, "wgmma_fraction.bf16", "compile_error: ptxas");
  f.reference.clear();
  f.metrics.clear();
  f.unknown_metrics.clear();
  const json j = json::parse(calibration_json(f));
  check_format(j);
  EXPECT_FALSE(j["values"].contains("wgmma_fraction.bf16"));
  EXPECT_EQ(j["failed"]["wgmma_fraction.bf16"], "compile_error: ptxas");
  EXPECT_TRUE(j["reference"].is_object());
  EXPECT_TRUE(j["metrics"].is_object());
  EXPECT_TRUE(j["unknown_metrics"].is_array());
}

TEST(CalibrationFile, TableShowsValuesReferencesAndFailures) {
  CalibrationFile f = example();
  record_failure(f, kLaunchOverheadKey, "timed out");
  const std::string t = calibration_table(f);
  EXPECT_NE(t.find("NVIDIA H200"), std::string::npos) << t;
  EXPECT_NE(t.find("wgmma_fraction.tf32"), std::string::npos) << t;
  EXPECT_NE(t.find("0.85"), std::string::npos) << t; // DRAM 4100 / 4800
  // A tensor fraction is of the peak, the spec's of the library's rate: no ratio of the two.
  EXPECT_EQ(t.find("0.83"), std::string::npos) << t; // 0.62 / 0.75 would be meaningless
  EXPECT_NE(t.find("* measured: of the tensor peak"), std::string::npos) << t;
  EXPECT_NE(t.find("cudnn_fraction.tf32"), std::string::npos) << t;
  EXPECT_NE(t.find("launch_overhead_us: FAILED: timed out"), std::string::npos) << t;
}

} // namespace
} // namespace brickdl::cuda
