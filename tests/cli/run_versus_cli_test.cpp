// brickdl-run --versus-layerwise: the plan and every layer layerwise, interleaved in one process;
// each round's ratio is the two runs of that round, and the flag needs a plan and rounds.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

const std::string kRun = BRICKDL_RUN_BIN;

class RunVersusCli : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("brickdl_run_versus_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // ResNet-50 at 32x32: conv1 .. maxpool (fused layers 1 and 2) as one padded group.
    std::ofstream(path("plan.json")) << R"([{"first": 1, "last": 2, "strategy": "padded",
                                            "brick": [1, 4, 4]}])";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  int run(const std::string& args) {
    const std::string cmd = kRun + " --model resnet50 --input-size 32,32 --threads 2 --quiet " +
                            args + " > " + path("out.txt") + " 2> " + path("err.txt");
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string text(const std::string& name) const {
    std::ifstream f(dir_ / name);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  fs::path dir_;
};

TEST_F(RunVersusCli, EachRoundIsTheRatioOfItsTwoRuns) {
  ASSERT_EQ(run("--plan " + path("plan.json") + " --repeat 4 --warmup 1 --versus-layerwise --out " +
                path("r")),
            0)
      << text("err.txt");
  EXPECT_NE(text("out.txt").find("versus layerwise (interleaved in this process, 4 rounds)"),
            std::string::npos)
      << text("out.txt");
  const nlohmann::json m = nlohmann::json::parse(std::ifstream(path("r/manifest.json")));
  const nlohmann::json& v = m.at("timing").at("versus_layerwise");
  const nlohmann::json& plan = v.at("plan_ms").at("samples");
  const nlohmann::json& lw = v.at("layerwise_ms").at("samples");
  const nlohmann::json& ratio = v.at("speedup").at("rounds");
  ASSERT_EQ(plan.size(), 4u);
  ASSERT_EQ(lw.size(), 4u);
  ASSERT_EQ(ratio.size(), 4u);
  double lo = 1e300, hi = 0;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_GT(plan[i].get<double>(), 0);
    EXPECT_DOUBLE_EQ(ratio[i].get<double>(), lw[i].get<double>() / plan[i].get<double>()) << i;
    lo = std::min(lo, ratio[i].get<double>());
    hi = std::max(hi, ratio[i].get<double>());
  }
  EXPECT_DOUBLE_EQ(v.at("speedup").at("min").get<double>(), lo);
  EXPECT_DOUBLE_EQ(v.at("speedup").at("max").get<double>(), hi);
  // The plan's own timed runs are still there, apart from the comparison.
  EXPECT_EQ(m.at("timing").at("end_to_end_ms").at("samples").size(), 4u);
}

TEST_F(RunVersusCli, NeedsAPlanAndRounds) {
  EXPECT_EQ(run("--repeat 3 --versus-layerwise --out " + path("a")), 2);
  EXPECT_NE(text("err.txt").find("--versus-layerwise compares a plan with layerwise: it needs "
                                 "--plan FILE and --repeat N"),
            std::string::npos)
      << text("err.txt");
  EXPECT_EQ(run("--plan " + path("plan.json") + " --versus-layerwise --out " + path("b")), 2);
  EXPECT_FALSE(fs::exists(path("a")));
  EXPECT_FALSE(fs::exists(path("b")));
}

} // namespace
