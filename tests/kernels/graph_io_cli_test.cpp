// brickdl-run on a model of two runtime inputs and two outputs: --input NAME=FILE per input
// (or positional), one .npy per output that the reference reproduces, and the refusals.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/experiment.h"
#include "kernels/npy.h"
#include "kernels/reference.h"
#include "kernels/weights.h"

namespace brickdl::kernels {
namespace {

namespace fs = std::filesystem;

const std::string kRun = std::string(BRICKDL_BINARY_DIR) + "/apps/brickdl-run";

class RunGraphIo : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("brickdl_run_io_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::ofstream(path("exp.yaml")) << R"(model:
  name: neck
  inputs:
    - {name: a, channels: 2, size: [6, 6]}
    - {name: b, channels: 3, size: [3, 3]}
  layers:
    - {op: conv, name: c, out_channels: 4, kernel: 3, padding: 1, inputs: a}
    - {op: relu, name: r}
    - {op: upsample, name: up, inputs: b, scale: 2}
    - {op: concat, name: cat, inputs: [r, up]}
    - {op: conv, name: head, out_channels: 2, kernel: 1}
    - {op: conv, name: hb, out_channels: 5, kernel: 1, inputs: b}
  outputs: [head, hb]
batch: 2
target: H200
)";
    a_ = random_tensor(TensorShape{2, 2, 1, 6, 6, 2}, 11, 0);
    b_ = random_tensor(TensorShape{2, 3, 1, 3, 3, 2}, 11, 1);
    write_npy(path("a.npy"), a_);
    write_npy(path("b.npy"), b_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int run(const std::string& args) {
    const std::string cmd = kRun + " --model " + path("exp.yaml") + " " + args + " > " +
                            (dir_ / "out.txt").string() + " 2> " + (dir_ / "err.txt").string();
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string read(const std::string& name) const {
    std::ifstream f(dir_ / name);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void expect_error(const std::string& args, const std::string& fragment) {
    EXPECT_EQ(run(args + " --out " + path("refused")), 2) << args;
    EXPECT_FALSE(fs::exists(path("refused")));
    EXPECT_NE(read("err.txt").find(fragment), std::string::npos)
        << "'" << fragment << "' not in: " << read("err.txt");
  }

  fs::path dir_;
  Tensor a_, b_;
};

TEST_F(RunGraphIo, NamedInputsGiveOneNpyPerOutputThatTheReferenceReproduces) {
  const std::string plan = path("plan.json");
  std::ofstream(plan) << R"([{"first": "c", "last": "head", "strategy": "padded",
                              "brick": [1, 3, 2]}])";
  ASSERT_EQ(run("--input b=" + path("b.npy") + " --input a=" + path("a.npy") + " --plan " + plan +
                " --seed 4 --out " + path("run") + " --check"),
            0)
      << read("err.txt");
  const nlohmann::json m = nlohmann::json::parse(read("run/manifest.json"));
  ASSERT_EQ(m.at("inputs").size(), 2u);
  EXPECT_EQ(m.at("inputs").at(0).at("name"), "a");
  EXPECT_EQ(m.at("inputs").at(0).at("source"), path("a.npy"));
  EXPECT_EQ(m.at("inputs").at(1).at("source"), path("b.npy"));
  ASSERT_EQ(m.at("outputs").size(), 2u);
  EXPECT_EQ(m.at("outputs").at(0).at("file"), "output.head.npy");
  EXPECT_EQ(m.at("outputs").at(1).at("file"), "output.hb.npy");
  EXPECT_EQ(m.at("check").at("outputs").size(), 2u);
  EXPECT_EQ(read_npy(path("run/input.a.npy")).data, a_.values());
  EXPECT_EQ(read_npy(path("run/input.b.npy")).data, b_.values());
  // The reference from the files alone reproduces both outputs.
  const Graph g = fuse_for_inference(load_experiment(path("exp.yaml")).graph);
  const std::vector<Tensor> want = run_graph_outputs(g, {a_, b_}, model_weights(g, 4));
  const NpyArray head = read_npy(path("run/output.head.npy"));
  const NpyArray hb = read_npy(path("run/output.hb.npy"));
  EXPECT_EQ(head.shape, (std::vector<int64_t>{2, 2, 6, 6}));
  EXPECT_EQ(hb.shape, (std::vector<int64_t>{2, 5, 3, 3}));
  ASSERT_EQ(want.size(), 2u);
  // Both through the fast CPU kernels (hb: one layer, layerwise on oneDNN), which sum in
  // another order than the reference: equal within fp32 rounding, not bit for bit.
  for (const auto& [got, ref] : {std::pair{&head, &want[0]}, std::pair{&hb, &want[1]}}) {
    ASSERT_EQ(got->data.size(), ref->values().size());
    for (size_t i = 0; i < got->data.size(); ++i)
      ASSERT_NEAR(got->data[i], ref->values()[i], 1e-5 * (1 + std::abs(ref->values()[i]))) << i;
  }
  // The same files in the model's order, without names: the same outputs.
  ASSERT_EQ(run("--input " + path("a.npy") + " --input " + path("b.npy") + " --seed 4 --out " +
                path("pos")),
            0)
      << read("err.txt");
  EXPECT_EQ(read_npy(path("pos/output.hb.npy")).data, hb.data);
}

TEST_F(RunGraphIo, BadInputsAreRefusedNamingTheModelsInputs) {
  expect_error("--input zz=" + path("a.npy") + " --input b=" + path("b.npy"),
               "the model has no input 'zz'; the model's inputs: 'a' 2x2x6x6, 'b'");
  expect_error("--input a=" + path("b.npy") + " --input b=" + path("b.npy"), "input 'a'");
  expect_error("--input a=" + path("nope.npy") + " --input b=" + path("b.npy"), "is not a file");
  expect_error("--input a=" + path("a.npy") + " --input a=" + path("a.npy"), "already given");
  expect_error("--input " + path("a.npy"), "1 file(s) without a name for 2 input(s)");
  // Some inputs given and others not: refused (a forgotten input is not silently random).
  expect_error("--input a=" + path("a.npy"), "no --input for 'b'");
  // No --input at all: every input seeded random.
  EXPECT_EQ(run("--out " + path("random")), 0) << read("err.txt");
  EXPECT_EQ(nlohmann::json::parse(read("random/manifest.json")).at("inputs").at(1).at("source"),
            "random uniform [-1, 1)");
}

} // namespace
} // namespace brickdl::kernels
