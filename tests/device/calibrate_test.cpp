// brickdl-calibrate as a program: its exit statuses and messages without a GPU, the convs it
// plans (the model's choice, compute-bound on the H200), and on a GPU a --quick calibration
// whose file holds plausible numbers (skipped without one).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/gpu_spec.h"
#include "kernels/cuda/cuda_measurer.h"
#include "tests/cli/spawn.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

struct Ran {
  int status = -1; // exit status, or -1 when it did not exit normally
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream is(p);
  std::stringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

class Calibrate : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("brickdl_calibrate_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Ran run(std::vector<std::string> args) const {
    args.insert(args.begin(), BRICKDL_CALIBRATE_BIN);
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const pid_t pid = testing::spawn_logged(args, out, err);
    EXPECT_GT(pid, 0);
    const int ws = testing::wait_for(pid);
    return {WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, slurp(out), slurp(err)};
  }

  fs::path dir_;
};

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST_F(Calibrate, WithoutAGpuExits4WithOneLineAndWritesNothing) {
  if (cuda::cuda_device_available())
    GTEST_SKIP() << "a GPU is present: the no-GPU path cannot be reached here";
  const fs::path file = dir_ / "x.json";
  const Ran r = run({"--out", file.string()});
  EXPECT_EQ(r.status, 4);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("brickdl-calibrate: no GPU: ", 0), 0u) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(Calibrate, BadFlagsExit2) {
  const Ran unknown_flag = run({"--bogus"});
  EXPECT_EQ(unknown_flag.status, 2);
  EXPECT_NE(unknown_flag.err.find("--bogus"), std::string::npos) << unknown_flag.err;

  const Ran unknown_spec = run({"--spec", "V100", "--out", (dir_ / "x.json").string()});
  EXPECT_EQ(unknown_spec.status, 2);
  EXPECT_NE(unknown_spec.err.find("unknown GPU spec 'V100'"), std::string::npos)
      << unknown_spec.err;
  EXPECT_NE(unknown_spec.err.find("H200"), std::string::npos) << unknown_spec.err;

  const Ran no_out = run({});
  EXPECT_EQ(no_out.status, 2);
  EXPECT_NE(no_out.err.find("--out: required"), std::string::npos) << no_out.err;

  const Ran bad_dir = run({"--out", (dir_ / "no" / "such" / "x.json").string()});
  EXPECT_EQ(bad_dir.status, 2);
  EXPECT_NE(bad_dir.err.find("--out: no such directory"), std::string::npos) << bad_dir.err;

  const Ran not_a_number = run({"--device", "one", "--out", (dir_ / "x.json").string()});
  EXPECT_EQ(not_a_number.status, 2);
  EXPECT_FALSE(fs::exists(dir_ / "x.json"));
}

// The four convs of the H200 (wgmma and mma.sync, tf32 and bf16), each compute-bound under the
// model's own roofline; on the A100 (no wgmma) only the two mma.sync ones.
TEST_F(Calibrate, PlanIsComputeBoundOnH200) {
  const Ran h200 = run({"--plan", "--spec", "H200"});
  ASSERT_EQ(h200.status, 0) << h200.err;
  for (const char* key : {"wgmma_fraction.tf32", "wgmma_fraction.bf16", "mma_sync_fraction.tf32",
                          "mma_sync_fraction.bf16"})
    EXPECT_NE(h200.out.find(key), std::string::npos) << key << "\n" << h200.out;
  size_t bound = 0;
  for (size_t at = h200.out.find("model: compute-bound"); at != std::string::npos;
       at = h200.out.find("model: compute-bound", at + 1))
    ++bound;
  EXPECT_EQ(bound, 4u) << h200.out;
  EXPECT_EQ(h200.out.find("NOT compute-bound"), std::string::npos) << h200.out;
  EXPECT_NE(h200.out.find("conv 3x3 256->256 56x56"), std::string::npos) << h200.out;

  const Ran a100 = run({"--plan", "--spec", "A100-40GB"});
  ASSERT_EQ(a100.status, 0) << a100.err;
  EXPECT_EQ(a100.out.find("wgmma_fraction"), std::string::npos) << a100.out;
  EXPECT_NE(a100.out.find("mma_sync_fraction.tf32"), std::string::npos) << a100.out;
}

double value_of(const nlohmann::json& j, const std::string& key) {
  return j.at("values").at(key).at("value").get<double>();
}

TEST_F(Calibrate, QuickRunOnAGpuWritesPlausibleNumbers) {
  if (!cuda::cuda_device_available())
    GTEST_SKIP() << "no GPU: " << cuda::cuda_unavailable_reason();
  const fs::path file = dir_ / "calibration.json";
  const Ran r = run({"--quick", "--out", file.string()});
  ASSERT_TRUE(fs::exists(file)) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(slurp(file));
  EXPECT_EQ(r.status, 0) << r.out << r.err << j["failed"].dump(2);
  const GpuSpec* spec = find_gpu_spec(j.at("spec").get<std::string>());
  ASSERT_NE(spec, nullptr);
  for (const auto& [key, v] : j.at("values").items()) {
    if (key.find("fraction") == std::string::npos)
      continue;
    EXPECT_GT(v.at("value").get<double>(), 0) << key;
    EXPECT_LT(v.at("value").get<double>(), 1.2) << key << ": " << v.at("how");
  }
  EXPECT_TRUE(j["values"].contains("mma_sync_fraction.tf32")) << j.dump(2);
  const double dram = value_of(j, "dram_bandwidth_gbs"), l2 = value_of(j, "l2_bandwidth_gbs");
  EXPECT_GT(dram, 0.1 * spec->dram_bandwidth_gbs);
  EXPECT_LT(dram, 1.1 * spec->dram_bandwidth_gbs);
  EXPECT_GT(l2, 0.1 * spec->l2_bandwidth_gbs);
  EXPECT_LT(l2, 1.1 * spec->l2_bandwidth_gbs);
  EXPECT_GT(value_of(j, "launch_overhead_us"), 0);
}

} // namespace
} // namespace brickdl
