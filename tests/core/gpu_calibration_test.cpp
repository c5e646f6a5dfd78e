// Device calibrations (core/gpu_calibration.h): reading, every bad-file case with its error,
// applying over the named spec per precision, and the experiment's ways to give one. The files
// under tests/data/calibration/ are synthetic (their "how" fields say so).
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/experiment.h"
#include "core/gpu_calibration.h"

namespace brickdl {
namespace {

const std::string kDataDir = std::string(BRICKDL_SOURCE_DIR) + "/tests/data/calibration";
const std::string kSynthetic = kDataDir + "/h200_synthetic.json";

// A calibration file with `values` (the JSON text of its "values" object) and `extra` top-level
// members ("" for none).
std::string file_text(const std::string& values, const std::string& extra = "",
                      const std::string& spec = "H200") {
  return R"({"format": "brickdl-calibration/1", "spec": ")" + spec + R"(", "values": )" + values +
         (extra.empty() ? "" : ", " + extra) + "}";
}

// The message of the UserError that parsing `text` throws ("" when none).
std::string parse_error(const std::string& text) {
  try {
    parse_gpu_calibration(text, "cal.json");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(GpuCalibration, ReadsTheSyntheticFile) {
  const GpuCalibration cal = read_gpu_calibration(kSynthetic, {});
  EXPECT_EQ(cal.spec, "H200");
  EXPECT_EQ(cal.device_name(), "SYNTHETIC (no device)");
  EXPECT_EQ(cal.measured_at, "2026-12-02T16:00:00Z");
  ASSERT_EQ(cal.values.size(), 5u);
  ASSERT_NE(cal.find("wgmma_fraction.tf32"), nullptr);
  EXPECT_DOUBLE_EQ(cal.find("wgmma_fraction.tf32")->value, 0.3);
  EXPECT_DOUBLE_EQ(*cal.find("dram_bandwidth_gbs")->spec, 4800);
  EXPECT_EQ(cal.failed.count("wgmma_fraction.bf16"), 1u);
  ASSERT_EQ(cal.reference.size(), 1u);
  EXPECT_EQ(cal.reference[0].key, "cudnn_fraction.tf32");
  EXPECT_EQ(cal.metrics.size(), 1u);
  EXPECT_EQ(cal.unknown_metrics.size(), 1u);
}

TEST(GpuCalibration, EveryBadFileNamesTheFileAndTheKey) {
  struct Case {
    std::string text, expected;
  };
  const Case cases[] = {
      {"{not json", "cal.json: not a JSON calibration file: parse error"},
      {"[1, 2]", "cal.json: expected a JSON object"},
      {R"({"spec": "H200", "values": {}})", "key 'format': missing 'format'"},
      {R"({"format": "brickdl-calibration/2", "spec": "H200", "values": {}})",
       "key 'format': 'brickdl-calibration/2' is not a format this brickdl reads; valid: "
       "brickdl-calibration/1"},
      {file_text("{}", "", "H300"), "key 'spec': unknown GPU spec 'H300'"},
      {R"({"format": "brickdl-calibration/1", "spec": "H200"})", "key 'values': missing 'values'"},
      {file_text(R"({"wgmma_fraction.tf32": {"value": 2.0}})"),
       "key 'values.wgmma_fraction.tf32.value': 2 is out of range: a share of the tensor peak is "
       "in (0, 1.5]"},
      {file_text(R"({"mma_sync_fraction.bf16": {"value": 0}})"),
       "key 'values.mma_sync_fraction.bf16.value': 0 is out of range"},
      {file_text(R"({"dram_bandwidth_gbs": {"value": -1}})"),
       "key 'values.dram_bandwidth_gbs.value': -1 is out of range: it must be > 0"},
      {file_text(R"({"launch_overhead_us": {"value": 0}})"),
       "key 'values.launch_overhead_us.value': 0 is out of range: it must be > 0 (microseconds)"},
      {file_text(R"({"dram_bandwith_gbs": {"value": 4000}})"),
       "key 'values.dram_bandwith_gbs': unknown key 'dram_bandwith_gbs' in 'values' (did you "
       "mean 'dram_bandwidth_gbs'?)"},
      {file_text(R"({"wgmma_fraction.fp32": {"value": 0.5}})"),
       "key 'values.wgmma_fraction.fp32': unknown key"},
      {file_text(R"({"l2_bandwidth_gbs": {"how": "x"}})"),
       "key 'values.l2_bandwidth_gbs': missing 'value'"},
      {file_text(R"({"l2_bandwidth_gbs": {"value": "fast"}})"),
       "key 'values.l2_bandwidth_gbs.value': expected a number, got a string"},
      {file_text(R"({"l2_bandwidth_gbs": {"value": 1, "unit": "GB/s"}})"),
       "key 'values.l2_bandwidth_gbs.unit': unknown key 'unit'"},
      {file_text("{}", R"("metric": {})"), "key 'metric': unknown key 'metric' in the calibration "
                                           "(did you mean 'metrics'?)"},
      {file_text("{}", R"("unknown_metrics": "x")"),
       "key 'unknown_metrics': expected a list of metric names, got a string"},
  };
  for (const Case& c : cases) {
    const std::string message = parse_error(c.text);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << "file: " << c.text << "\nerror: " << message << "\nexpected: " << c.expected;
  }
}

TEST(GpuCalibration, AMissingFileSaysWhereItWasNamed) {
  try {
    read_gpu_calibration("no/such/calibration.json",
                         SourceLocation{"the command line", 0, 0, "--calibration"});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("key '--calibration': cannot read the calibration file "
                                         "'no/such/calibration.json'"),
              std::string::npos)
        << e.what();
  }
}

TEST(GpuCalibration, AppliesTheExperimentsPrecisionAndNamesTheSpec) {
  const GpuCalibration cal = read_gpu_calibration(kSynthetic, {});
  const GpuSpec& h200 = *find_gpu_spec("H200");
  GpuSpec tf32 = h200;
  const AppliedCalibration a = apply_gpu_calibration(cal, DType::kTF32, {}, &tf32);
  EXPECT_DOUBLE_EQ(tf32.wgmma_fraction, 0.3);
  EXPECT_DOUBLE_EQ(tf32.mma_sync_fraction, 0.2);
  EXPECT_DOUBLE_EQ(tf32.dram_bandwidth_gbs, 4000);
  EXPECT_DOUBLE_EQ(tf32.l2_bandwidth_gbs, 6500);
  EXPECT_DOUBLE_EQ(tf32.launch_overhead_us, 3);
  EXPECT_TRUE(tf32.measured.wgmma_fraction && tf32.measured.mma_sync_fraction &&
              tf32.measured.dram_bandwidth && tf32.measured.l2_bandwidth);
  EXPECT_EQ(tf32.name.rfind("H200+cal-", 0), 0u) << tf32.name;
  EXPECT_EQ(tf32.name.size(), std::string("H200+cal-").size() + 8);
  EXPECT_EQ(a.spec_name, tf32.name);
  EXPECT_NE(a.summary().find(
                "wgmma_fraction 0.3 (measured of the peak, tf32; spec 0.75 of the library's rate)"),
            std::string::npos)
      << a.summary();
  EXPECT_NE(a.summary().find("dram_bandwidth_gbs 4000 (measured; spec 4800)"), std::string::npos);
  EXPECT_NE(a.summary().find("the rest are the spec's"), std::string::npos);

  // fp32 takes no tensor fraction: another spec name, the fractions the spec's, said so.
  GpuSpec fp32 = h200;
  const AppliedCalibration b = apply_gpu_calibration(cal, DType::kF32, {}, &fp32);
  EXPECT_DOUBLE_EQ(fp32.wgmma_fraction, h200.wgmma_fraction);
  EXPECT_FALSE(fp32.measured.wgmma_fraction);
  EXPECT_DOUBLE_EQ(fp32.dram_bandwidth_gbs, 4000);
  EXPECT_NE(fp32.name, tf32.name);
  ASSERT_FALSE(b.notes.empty());
  EXPECT_NE(b.notes[0].find("fp32 runs no tensor cores"), std::string::npos);

  // bf16 and fp16: the bf16 entries, which failed here: the spec's, with the failure noted.
  GpuSpec fp16 = h200;
  const AppliedCalibration c = apply_gpu_calibration(cal, DType::kF16, {}, &fp16);
  EXPECT_DOUBLE_EQ(fp16.wgmma_fraction, h200.wgmma_fraction);
  EXPECT_NE(c.notes.at(0).find("fp16 takes the bf16 tensor fractions"), std::string::npos);
  EXPECT_NE(c.notes.at(1).find("wgmma_fraction.bf16 could not be measured"), std::string::npos);
}

TEST(GpuCalibration, TheExperimentsOwnFieldWins) {
  const GpuCalibration cal = read_gpu_calibration(kSynthetic, {});
  GpuSpec spec = *find_gpu_spec("H200");
  spec.dram_bandwidth_gbs = 3000; // as `target: {gpu: H200, dram_bandwidth_gbs: 3000}` sets it
  const AppliedCalibration a =
      apply_gpu_calibration(cal, DType::kTF32, {"dram_bandwidth_gbs"}, &spec);
  EXPECT_DOUBLE_EQ(spec.dram_bandwidth_gbs, 3000);
  EXPECT_FALSE(spec.measured.dram_bandwidth); // the experiment's is a peak, derated as ever
  EXPECT_NE(a.summary().find("dram_bandwidth_gbs 3000 (the experiment's; measured 4000 not "
                             "applied)"),
            std::string::npos)
      << a.summary();
}

TEST(GpuCalibration, AnotherSpecIsRefused) {
  const GpuCalibration cal = parse_gpu_calibration(
      file_text(R"({"dram_bandwidth_gbs": {"value": 3000}})", "", "H100-SXM"), "calibration.json");
  GpuSpec spec = *find_gpu_spec("H200");
  try {
    apply_gpu_calibration(cal, DType::kTF32, {}, &spec);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "calibration.json was measured against H100-SXM; the target is H200"),
              std::string::npos)
        << e.what();
  }
}

TEST(GpuCalibration, NothingAppliedKeepsTheSpecsName) {
  const GpuCalibration cal =
      parse_gpu_calibration(file_text(R"({"wgmma_fraction.tf32": {"value": 0.5}})"), "c.json");
  GpuSpec spec = *find_gpu_spec("H200");
  const AppliedCalibration a = apply_gpu_calibration(cal, DType::kF32, {}, &spec);
  EXPECT_EQ(spec.name, "H200"); // the plain spec's predictions are the same: shared
  EXPECT_TRUE(a.fields.empty());
  EXPECT_NE(a.summary().find("nothing it measured applies"), std::string::npos);
}

TEST(GpuCalibration, TheExperimentNamesItRelativeToItsFile) {
  const std::string dir = ::testing::TempDir() + "/calibration_exp";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kSynthetic, dir + "/cal.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir + "/exp.yaml") << "model: resnet50\nprecision: tf32\n"
                                      "target: {gpu: H200, calibration: cal.json}\n";
  const ExperimentConfig e = load_experiment(dir + "/exp.yaml");
  ASSERT_TRUE(e.calibration);
  EXPECT_EQ(e.calibration->given_by, "target.calibration");
  EXPECT_EQ(e.calibration->file, "cal.json");
  EXPECT_DOUBLE_EQ(e.gpu.wgmma_fraction, 0.3);
  EXPECT_EQ(e.gpu.name, e.calibration->spec_name);

  // --calibration over it, relative to the working directory; --target drops the file's.
  ExperimentOverrides o;
  o.calibration = kSynthetic;
  o.precision = "bf16";
  const ExperimentConfig f = load_experiment(dir + "/exp.yaml", o);
  ASSERT_TRUE(f.calibration);
  EXPECT_EQ(f.calibration->given_by, "--calibration");
  EXPECT_DOUBLE_EQ(f.gpu.wgmma_fraction, find_gpu_spec("H200")->wgmma_fraction); // bf16 failed
  EXPECT_NE(f.output_dir.find("calibration-h200-synthetic"), std::string::npos) << f.output_dir;
  ExperimentOverrides t;
  t.gpu = "H200";
  EXPECT_FALSE(load_experiment(dir + "/exp.yaml", t).calibration);

  std::ofstream(dir + "/bad.yaml") << "model: resnet50\ntarget: {gpu: A100-40GB, calibration: "
                                      "cal.json}\n";
  EXPECT_THROW(load_experiment(dir + "/bad.yaml"), UserError);
  std::ofstream(dir + "/missing.yaml") << "model: resnet50\ntarget: {gpu: H200, calibration: "
                                          "none.json}\n";
  try {
    load_experiment(dir + "/missing.yaml");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'target.calibration': cannot read the calibration "
                                         "file"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace brickdl
