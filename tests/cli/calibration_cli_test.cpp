// A device calibration at the command line (docs/calibration.md), with the synthetic file of
// tests/data/calibration/: brickdl-tune --calibration says it in the report header, plan.json
// and the run's configuration, and brickdl-query show prints it; brickdl-calibration-diff
// prints the plans before and after and writes no database where it runs; a bad file exits 2
// with one line naming it.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/golden.h"
#include "tests/cli/spawn.h"

namespace {

namespace fs = std::filesystem;
using brickdl::testing::read_file;

const std::string kSource = BRICKDL_SOURCE_DIR;
const std::string kSynthetic = kSource + "/tests/data/calibration/h200_synthetic.json";

class CalibrationCli : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("brickdl_calibration_cli_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `argv` in dir_; its exit status, stdout in *out and stderr in *err.
  int run(const std::vector<std::string>& argv, std::string* out, std::string* err) {
    const fs::path o = dir_ / "stdout", e = dir_ / "stderr";
    const fs::path here = fs::current_path();
    fs::current_path(dir_); // a tool that wrote brickdl.db by default would write it here
    const pid_t pid = brickdl::testing::spawn_logged(argv, o.string(), e.string());
    fs::current_path(here);
    EXPECT_GT(pid, 0);
    const int status = brickdl::testing::wait_for(pid);
    *out = read_file(o);
    *err = read_file(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  fs::path dir_;
};

TEST_F(CalibrationCli, TheTunerSaysItInTheReportThePlanAndTheRun) {
  std::string out, err;
  const std::string db = (dir_ / "t.db").string();
  ASSERT_EQ(run({BRICKDL_TUNE_BIN, kSource + "/experiments/vgg16_bn.yaml", "--target", "H200",
                 "--precision", "tf32", "--backend", "none", "--quiet", "--db", db, "--out",
                 (dir_ / "out").string(), "--calibration", kSynthetic},
                &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("for H200+cal-"), std::string::npos) << out;
  EXPECT_NE(out.find(": H200 calibrated by h200_synthetic.json (measured 2026-12-02T16:00:00Z "
                     "on SYNTHETIC (no device)): wgmma_fraction 0.3 (measured of the peak, tf32; "
                     "spec 0.75 of the library's rate)"),
            std::string::npos)
      << out;
  const nlohmann::json plan = nlohmann::json::parse(read_file(dir_ / "out" / "plan.json"));
  EXPECT_NE(plan.at("calibration")
                .get<std::string>()
                .find("dram_bandwidth_gbs 4000 (measured; "
                      "spec 4800)"),
            std::string::npos);

  ASSERT_EQ(run({BRICKDL_QUERY_BIN, "--db", db, "show", "1"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("gpu spec   H200+cal-"), std::string::npos) << out;
  EXPECT_NE(out.find("H200 calibrated by h200_synthetic.json"), std::string::npos) << out;
  EXPECT_NE(out.find("\"applied_as\": \"H200+cal-"), std::string::npos) << out; // config_json
}

TEST_F(CalibrationCli, TheDiffToolComparesPlansAndWritesNothing) {
  std::string out, err;
  ASSERT_EQ(run({BRICKDL_CALIBRATION_DIFF_BIN, kSynthetic, kSource + "/experiments/resnet50.yaml",
                 kSource + "/experiments/vgg16_bn.yaml"},
                &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("model predictions (backend none: nothing measured), tf32 for H200 before"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  resnet50 "), std::string::npos) << out;
  EXPECT_NE(out.find("  vgg16_bn "), std::string::npos) << out;
  EXPECT_NE(out.find("resnet50: groups that changed"), std::string::npos) << out;
  EXPECT_NE(err.find("2 experiment(s) tuned twice, model only"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ / "brickdl.db"));
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(CalibrationCli, ABadFileExitsTwoNamingIt) {
  const fs::path bad = dir_ / "calibration.json";
  std::ofstream(bad) << R"({"format": "brickdl-calibration/1", "spec": "H100-SXM", "values": {}})";
  std::string out, err;
  EXPECT_EQ(run({BRICKDL_TUNE_BIN, kSource + "/experiments/resnet50.yaml", "--target", "H200",
                 "--describe", "--calibration", bad.string()},
                &out, &err),
            2);
  EXPECT_NE(err.find("calibration.json was measured against H100-SXM; the target is H200"),
            std::string::npos)
      << err;
  EXPECT_EQ(run({BRICKDL_CALIBRATION_DIFF_BIN, (dir_ / "none.json").string(),
                 kSource + "/experiments/resnet50.yaml"},
                &out, &err),
            2);
  EXPECT_NE(err.find("cannot read the calibration file"), std::string::npos) << err;
}

} // namespace
