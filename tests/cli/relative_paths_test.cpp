// Relative paths with folders, as most users name files, given to every program that takes a
// model, an experiment or a database, run from the folder above them:
//
//   work/models/m.onnx       an ONNX model
//   work/models/exp.yaml     model: m.onnx                 (relative to the experiment's folder)
//   work/experiments/up.yaml model: ../models/m.onnx, target.calibration: ../cal/h200.json
//   work/cal/h200.json       a calibration (tests/data/calibration/h200_synthetic.json)
//   work/db/                 the tuning databases (brickdl-tune makes no folder for one)
//
// A path on the command line is relative to the working directory; a path inside an experiment
// file is relative to that file's folder (core/experiment.h). `brickdl-tune models/m.onnx` once
// looked for "models/models/m.onnx": the bare experiment's name in messages ("the experiment of
// models/m.onnx") was taken for a file whose folder the model is relative to.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

namespace {

namespace fs = std::filesystem;

const std::string kBin = std::string(BRICKDL_BINARY_DIR) + "/apps/";

class RelativePaths : public ::testing::Test {
protected:
  // The folders and files above, made once (brickdl-run exports the model).
  static void SetUpTestSuite() {
    work_ = fs::temp_directory_path() / fmt::format("brickdl_relative_paths_{}", ::getpid());
    fs::remove_all(work_);
    for (const char* d : {"models", "experiments", "cal", "db"})
      fs::create_directories(work_ / d);
    fs::copy_file(fs::path(BRICKDL_SOURCE_DIR) / "tests/data/calibration/h200_synthetic.json",
                  work_ / "cal/h200.json");
    std::ofstream(work_ / "models/exp.yaml") << "model: m.onnx\ntarget: H200\n";
    std::ofstream(work_ / "experiments/up.yaml")
        << "model: ../models/m.onnx\ntarget: {gpu: H200, calibration: ../cal/h200.json}\n";
    // m.onnx is in models/, not beside this experiment.
    std::ofstream(work_ / "experiments/missing.yaml") << "model: m.onnx\ntarget: H200\n";
    export_status_ = std::system(
        fmt::format("{}brickdl-run --model micro_graphsize --batch 1 --input-size "
                    "12,12,12 --export-onnx {} > {} 2>&1",
                    kBin, (work_ / "models/m.onnx").string(), (work_ / "export.log").string())
            .c_str());
  }
  static void TearDownTestSuite() { fs::remove_all(work_); }

  void SetUp() override { ASSERT_EQ(export_status_, 0) << read("export.log"); }

  // Exit status of `program args` run in work/; its stdout and stderr in log.txt.
  int run(const std::string& program, const std::string& args) const {
    const std::string cmd =
        fmt::format("cd '{}' && {}{} {} > log.txt 2>&1", work_.string(), kBin, program, args);
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  static std::string read(const std::string& name) {
    std::ifstream f(work_ / name, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  static bool exists(const std::string& name) { return fs::exists(work_ / name); }

  static fs::path work_;
  static int export_status_;
};

fs::path RelativePaths::work_;
int RelativePaths::export_status_ = -1;

TEST_F(RelativePaths, TuneTakesAnOnnxFileInAFolder) {
  ASSERT_EQ(run("brickdl-tune", "models/m.onnx --backend none --db db/onnx.db --out out/onnx"), 0)
      << read("log.txt");
  EXPECT_TRUE(exists("out/onnx/plan.json"));
  EXPECT_TRUE(exists("db/onnx.db"));
  // Without --backend (auto: only loaded here) and in other spellings of the same path.
  for (const char* model : {"models/m.onnx", "./models/m.onnx", "models/../models/m.onnx"})
    EXPECT_EQ(run("brickdl-tune", fmt::format("{} --describe", model)), 0) << read("log.txt");
  EXPECT_EQ(run("brickdl-tune", fmt::format("{}/models/m.onnx --describe", work_.string())), 0)
      << read("log.txt");
}

TEST_F(RelativePaths, TuneResolvesAnExperimentsPathsFromItsFolder) {
  ASSERT_EQ(run("brickdl-tune", "models/exp.yaml --backend none --db db/exp.db --out out/exp"), 0)
      << read("log.txt");
  EXPECT_TRUE(exists("out/exp/plan.json"));
  ASSERT_EQ(run("brickdl-tune", "experiments/up.yaml --backend none --db db/up.db --out out/up"), 0)
      << read("log.txt");
  EXPECT_NE(read("out/up/report.txt").find("H200 calibrated by h200.json"), std::string::npos)
      << read("out/up/report.txt");
}

TEST_F(RelativePaths, AMissingModelSaysWhereItWasLookedFor) {
  EXPECT_EQ(run("brickdl-tune", "experiments/missing.yaml --backend none --db db/x.db"), 2);
  EXPECT_NE(read("log.txt").find("experiments/missing.yaml:1:8: key 'model': experiments/m.onnx: "
                                 "cannot open the file ('m.onnx' is relative to the experiment "
                                 "file's folder, experiments)"),
            std::string::npos)
      << read("log.txt");
  EXPECT_EQ(run("brickdl-tune", "models/absent.onnx --backend none --db db/x.db"), 2);
  EXPECT_NE(read("log.txt").find("error: models/absent.onnx: cannot open the file\n"),
            std::string::npos)
      << read("log.txt");
}

TEST_F(RelativePaths, RunTakesModelsAndPlansInFolders) {
  ASSERT_EQ(run("brickdl-run", "--model models/m.onnx --seed 3 --out runs/onnx"), 0)
      << read("log.txt");
  ASSERT_EQ(run("brickdl-run", "--model models/exp.yaml --seed 3 --out runs/yaml"), 0)
      << read("log.txt");
  EXPECT_EQ(read("runs/yaml/output.npy"), read("runs/onnx/output.npy"));
  EXPECT_FALSE(read("runs/onnx/output.npy").empty());
  ASSERT_EQ(run("brickdl-tune", "models/m.onnx --backend none --db db/run.db --out out/run"), 0)
      << read("log.txt");
  EXPECT_EQ(run("brickdl-run", "--model models/m.onnx --plan out/run/plan.json --out runs/plan"), 0)
      << read("log.txt");
}

TEST_F(RelativePaths, QueryAndCalibrationDiffTakeFilesInFolders) {
  ASSERT_EQ(run("brickdl-tune", "models/m.onnx --backend none --db db/query.db --out out/q"), 0)
      << read("log.txt");
  EXPECT_EQ(run("brickdl-query", "--db db/query.db runs"), 0) << read("log.txt");
  EXPECT_NE(read("log.txt").find("models/m.onnx"), std::string::npos) << read("log.txt");
  EXPECT_EQ(run("brickdl-calibration-diff", "cal/h200.json models/exp.yaml experiments/up.yaml"), 0)
      << read("log.txt");
}

} // namespace
