// brickdl-run end to end: files written, plans accepted, bad flags rejected with exit 2.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/group.h"
#include "core/zoo.h"
#include "kernels/npy.h"
#include "kernels/reference.h"
#include "kernels/weights.h"

namespace brickdl::kernels {
namespace {

namespace fs = std::filesystem;

const std::string kRun = std::string(BRICKDL_BINARY_DIR) + "/apps/brickdl-run";

class RunCli : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("brickdl_run_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Exit status of brickdl-run with `args`; stderr goes to err.txt in the test folder.
  int run(const std::string& args) {
    const std::string cmd = kRun + " " + args + " > " + (dir_ / "out.txt").string() + " 2> " +
                            (dir_ / "err.txt").string();
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

  fs::path dir_;
};

TEST_F(RunCli, WritesInputsWeightsOutputsThatReproduceTheModel) {
  // A 3-D chain: 3 x (3x3x3 conv + relu), 3 channels, 7x8x9, run as a plan of two groups.
  std::ofstream(path("plan.json"))
      << R"([{"first": 1, "last": 2, "strategy": "memoized", "brick": [4, 4, 4], "cb": 0},
             {"first": "conv3", "last": "conv3", "strategy": "padded", "brick": [2, 3, 4]}])";
  ASSERT_EQ(run("--model conv_chain --input-size 7,8,9 --seed 5 --plan " + path("plan.json") +
                " --out " + path("run") + " --check"),
            0)
      << read("err.txt");
  const nlohmann::json m = nlohmann::json::parse(read("run/manifest.json"));
  EXPECT_EQ(m.at("plan").size(), 2u);
  EXPECT_LE(m.at("check").at("max_rel_error").get<double>(), 1e-5);
  // Rebuild the model from the files alone: input, per-layer weight and bias, reference ops.
  ZooOptions zo;
  zo.input_size = {7, 8, 9};
  const Graph g = fuse_for_inference(build_zoo_model("conv_chain", zo));
  Tensor x = read_npy_tensor(path("run/input.npy"), g.input_shape());
  for (int id = 1; id < g.size(); ++id) {
    const nlohmann::json& l = m.at("layers").at(static_cast<size_t>(id));
    ASSERT_EQ(l.at("name"), g.layer(id).name);
    const NpyArray w = read_npy(path("run/" + l.at("weight").get<std::string>()));
    EXPECT_EQ(w.shape, (std::vector<int64_t>{3, 3, 3, 3, 3})); // (Cout, Cin, kd, kh, kw)
    std::vector<float> bias;
    if (l.contains("bias"))
      bias = read_npy(path("run/" + l.at("bias").get<std::string>())).data;
    x = conv(x, w.data, bias, 3, g.layer(id).window, 1, {Activation::kRelu});
  }
  const NpyArray y = read_npy(path("run/output.npy"));
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 3, 7, 8, 9}));
  ASSERT_EQ(y.data.size(), x.values().size());
  for (size_t i = 0; i < y.data.size(); ++i)
    EXPECT_NEAR(y.data[i], x.values()[i], 1e-5);
  // The same seed writes the same input; a given input is used as is.
  ASSERT_EQ(run("--model conv_chain --input-size 7,8,9 --input " + path("run/input.npy") +
                " --seed 9 --out " + path("again")),
            0)
      << read("err.txt");
  EXPECT_EQ(read_npy(path("again/input.npy")).data, read_npy(path("run/input.npy")).data);
}

// Regression: brickdl-run ran zoo names only, so an inline-graph experiment's plan could not
// be run and checked ("unknown model").
TEST_F(RunCli, RunsTheModelOfAnExperimentFile) {
  std::ofstream(path("exp.yaml")) << "model:\n"
                                     "  input: {channels: 2, size: [6, 6]}\n"
                                     "  layers:\n"
                                     "    - {op: conv, name: c1, out_channels: 3, kernel: 3, "
                                     "padding: 1}\n"
                                     "    - {op: sigmoid, name: s1}\n"
                                     "    - {op: conv_transpose, name: up, out_channels: 2, "
                                     "kernel: 3, stride: 2, padding: 1, output_padding: 1}\n"
                                     "batch: 2\n"
                                     "target: H200\n";
  // Fused: c1 with s1 as its epilogue (layer 1), then up (layer 2, layerwise: no brick rule).
  std::ofstream(path("plan.json")) << R"([{"first": 1, "last": 1, "strategy": "padded",
                                           "brick": [1, 4, 4]}])";
  ASSERT_EQ(run("--model " + path("exp.yaml") + " --plan " + path("plan.json") + " --out " +
                path("run") + " --check"),
            0)
      << read("err.txt");
  EXPECT_EQ(read_npy(path("run/output.npy")).shape, (std::vector<int64_t>{2, 2, 12, 12}));
  const nlohmann::json m = nlohmann::json::parse(read("run/manifest.json"));
  EXPECT_EQ(m.at("batch"), 2);
  EXPECT_EQ(m.at("layers").at(1).at("activation"), "sigmoid");
  EXPECT_EQ(m.at("layers").at(2).at("op"), "conv_transpose");
  EXPECT_EQ(read_npy(path("run/" + m.at("layers").at(2).at("weight").get<std::string>())).shape,
            (std::vector<int64_t>{3, 2, 3, 3})); // (Cin, Cout/groups, kh, kw)
  // An experiment sets its own batch and size.
  EXPECT_EQ(run("--model " + path("exp.yaml") + " --batch 4 --out " + path("run2")), 2);
  EXPECT_NE(read("err.txt").find("experiment file"), std::string::npos) << read("err.txt");
}

// Regression: manifest.json had bricks_computed 0 for every plan and no per-group counters.
TEST_F(RunCli, ManifestListsEachPlanGroupWithItsCounters) {
  std::ofstream(path("plan.json"))
      << R"([{"first": 2, "last": 3, "strategy": "padded", "brick": [4, 4, 4]},
             {"first": 1, "last": 1, "strategy": "memoized", "brick": [3, 3, 3]}])";
  ASSERT_EQ(run("--model conv_chain --input-size 7,8,9 --plan " + path("plan.json") + " --out " +
                path("run") + " --check --threads 2"),
            0)
      << read("err.txt");
  const nlohmann::json m = nlohmann::json::parse(read("run/manifest.json"));
  const nlohmann::json& groups = m.at("plan_groups");
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].at("first"), 2);
  EXPECT_EQ(groups[0].at("last"), 3);
  EXPECT_EQ(groups[0].at("strategy"), "padded");
  EXPECT_EQ(groups[1].at("strategy"), "memoized");
  double sum = 0;
  for (const nlohmann::json& grp : groups) {
    EXPECT_GT(grp.at("counters").at("bricks_computed").get<double>(), 0) << grp.dump();
    sum += grp.at("counters").at("bricks_computed").get<double>();
  }
  const nlohmann::json& totals = m.at("counters");
  EXPECT_GT(totals.at("bricks_computed").get<double>(), 0);
  EXPECT_EQ(totals.at("bricks_computed").get<double>(), sum);
  // Per fused layer id: layer 2 is the padded group's first layer.
  EXPECT_EQ(totals.at("bricks_computed.2"), groups[0].at("counters").at("bricks_computed.0"));
  EXPECT_EQ(totals.at("bricks_computed.1"), groups[1].at("counters").at("bricks_computed.0"));
  // --check reports how many elements are beyond the tolerance.
  EXPECT_EQ(m.at("check").at("elements_beyond_tolerance"), 0);
  EXPECT_NE(read("out.txt").find(
                "check against the layer-by-layer reference: passed: max relative error "),
            std::string::npos)
      << read("out.txt");
}

// Issue 13, item 7: NaN in the input reached the output as finite values (relu(NaN) was 0 and
// a max pool skipped NaN). Now a NaN input gives NaN where PyTorch gives NaN, through the
// merged plan and the reference alike, and --check agrees only on NaN at the same places.
TEST_F(RunCli, NaNInputsPropagateThroughAPlanAndTheCheck) {
  // conv_chain (3x3x3 conv + relu per layer): one NaN at the centre of channel 0, 7x8x9.
  ZooOptions zo;
  zo.input_size = {7, 8, 9};
  const Graph g = fuse_for_inference(build_zoo_model("conv_chain", zo));
  Tensor x = random_tensor(g.input_shape(), 3, 0);
  x.at(0, 0, 3, 4, 4) = std::numeric_limits<float>::quiet_NaN();
  write_npy(path("nan.npy"), x);
  std::ofstream(path("plan.json"))
      << R"([{"first": 1, "last": 2, "strategy": "memoized", "brick": [4, 4, 4]},
             {"first": 3, "last": 3, "strategy": "padded", "brick": [2, 3, 4]}])";
  ASSERT_EQ(run("--model conv_chain --input-size 7,8,9 --input " + path("nan.npy") + " --plan " +
                path("plan.json") + " --out " + path("run") + " --check"),
            0)
      << read("err.txt") << read("out.txt");
  const Tensor y = read_npy_tensor(path("run/output.npy"), g.layer(g.output()).out);
  int64_t nans = 0;
  for (float v : y.values())
    nans += std::isnan(v) ? 1 : 0;
  // Three 3x3x3 convs spread the one NaN over a 7x7x7 cube (clipped to 7x8x9) of every
  // output channel.
  EXPECT_EQ(nans, g.layer(g.output()).out.c * 7 * 7 * 7);
  const nlohmann::json m = nlohmann::json::parse(read("run/manifest.json"));
  EXPECT_EQ(m.at("check").at("passed"), true);
  EXPECT_EQ(m.at("check").at("undefined_elements"), 0);
}

TEST_F(RunCli, BadFlagsExitWithTwoAndSayWhy) {
  EXPECT_EQ(run("--out " + path("x")), 2); // no --model
  EXPECT_NE(read("err.txt").find("--model"), std::string::npos) << read("err.txt");
  EXPECT_EQ(run("--model resnet5O --out " + path("x")), 2);
  EXPECT_NE(read("err.txt").find("did you mean 'resnet50'"), std::string::npos) << read("err.txt");
  EXPECT_EQ(run("--model conv_chain --batch 0 --out " + path("x")), 2);
  EXPECT_EQ(run("--model conv_chain --input-size 8,8,8 --bogus 1 --out " + path("x")), 2);
  std::ofstream(path("bad.json")) << R"([{"first": 1, "last": 2, "strategy": "padd"}])";
  EXPECT_EQ(run("--model conv_chain --input-size 8,8,8 --plan " + path("bad.json") + " --out " +
                path("x")),
            2);
  EXPECT_NE(read("err.txt").find("[0].strategy"), std::string::npos) << read("err.txt");
  std::ofstream(path("overlap.json")) << R"([{"first": 1, "last": 2, "strategy": "layerwise"},
             {"first": 2, "last": 3, "strategy": "layerwise"}])";
  EXPECT_EQ(run("--model conv_chain --input-size 8,8,8 --plan " + path("overlap.json") + " --out " +
                path("x")),
            2);
  EXPECT_NE(read("err.txt").find("already in plan entry 0"), std::string::npos) << read("err.txt");
  write_npy(path("wrong.npy"), random_tensor(TensorShape{1, 3, 4, 4, 4, 3}, 1));
  EXPECT_EQ(run("--model conv_chain --input-size 8,8,8 --input " + path("wrong.npy") + " --out " +
                path("x")),
            2);
  EXPECT_NE(read("err.txt").find("1x3x8x8x8"), std::string::npos) << read("err.txt");
}

// "Answers, not tables": brickdl-run printed "in 2297.5 ms" (the plan run alone) for a command
// that took 34.9 s, with no progress. Now the closing line names each time, the manifest has
// them all, and the plan run and the reference report progress on stderr (--quiet: none).
TEST_F(RunCli, TimesSayWhatTheyMeasureAndProgressGoesToStderr) {
  std::ofstream(path("plan.json"))
      << R"([{"first": 1, "last": 2, "strategy": "memoized", "brick": [4, 4, 4]},
             {"first": 3, "last": 3, "strategy": "padded", "brick": [2, 3, 4]}])";
  const std::string args = "--model conv_chain --input-size 7,8,9 --plan " + path("plan.json");
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run(args + " --out " + path("run") + " --check"), 0) << read("err.txt");
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::regex closing(
      "brickdl-run: conv_chain, batch 1, 3 fused layers, 2 plan groups: "
      "plan executed in [0-9]+[.][0-9] ms on [0-9]+ thread[(]s[)], layerwise "
      "layers on onednn; set-up [0-9]+[.][0-9] ms; reference in [0-9]+[.][0-9] "
      "ms; "
      "total [0-9]+[.][0-9] s; wrote .*/run\n");
  const std::string out = read("out.txt");
  EXPECT_TRUE(std::regex_search(out, closing)) << out;
  // Every part of the time, and a total that is the whole command's (no more than the wall
  // time seen from here, no less than its parts).
  const nlohmann::json t = nlohmann::json::parse(read("run/manifest.json")).at("times_ms");
  for (const char* k : {"load", "plan", "reference", "write", "total"})
    EXPECT_GE(t.at(k).get<double>(), 0) << k << " " << t.dump();
  EXPECT_GT(t.at("plan").get<double>(), 0);
  EXPECT_GT(t.at("reference").get<double>(), 0);
  EXPECT_GE(t.at("total").get<double>(), t.at("load").get<double>() + t.at("plan").get<double>() +
                                             t.at("reference").get<double>() +
                                             t.at("write").get<double>());
  EXPECT_LE(t.at("total").get<double>(), wall_ms);
  // stderr is no terminal here: a line per further tenth of the layers, ending at 3/3; the plan
  // run reports per group (layers 1..2, then 3), the reference per layer.
  const std::string err = read("err.txt");
  const std::vector<std::pair<std::string, int>> lines = {
      {"plan", 2}, {"plan", 3}, {"reference", 1}, {"reference", 2}, {"reference", 3}};
  for (const auto& [step, done] : lines)
    EXPECT_NE(err.find("brickdl-run: " + step + " " + std::to_string(done) + "/3 layers, 0:0"),
              std::string::npos)
        << step << " " << done << "\n"
        << err;
  EXPECT_EQ(err.find("brickdl-run: plan 1/3"), std::string::npos) << err;
  // --quiet: nothing on stderr. --check without --out: the check alone, no files.
  ASSERT_EQ(run(args + " --check --quiet"), 0) << read("err.txt");
  EXPECT_EQ(read("err.txt"), "");
  EXPECT_NE(read("out.txt").find("; wrote nothing (no --out)\n"), std::string::npos)
      << read("out.txt");
  EXPECT_EQ(run(args), 2);
  EXPECT_NE(read("err.txt").find("--out is required (or --check"), std::string::npos)
      << read("err.txt");
}

// A plan.json as brickdl-tune writes it for conv_chain at `input_size`, batch 2, fp32: one
// padded group of layers 1..2 with its layer names and workload.
nlohmann::json tuned_plan(const std::vector<int64_t>& input_size) {
  ZooOptions zo;
  zo.input_size = input_size;
  zo.batch = 2;
  const Graph g = fuse_for_inference(build_zoo_model("conv_chain", zo));
  const Group grp{1, 2};
  const nlohmann::json group = {{"first_layer", 1},
                                {"last_layer", 2},
                                {"layers", group_layer_names(g, grp)},
                                {"workload", workload_description(g, grp)},
                                {"strategy", "padded"},
                                {"brick", {{"d", 1}, {"h", 4}, {"w", 4}, {"cb", 0}}},
                                {"threads", 256},
                                {"predicted_ms", 0.01}};
  return {{"model", "conv_chain"},
          {"batch", 2},
          {"precision", "fp32"},
          {"plan", {{"groups", nlohmann::json::array({group})}}}};
}

// "Answers, not tables": a batch-8 plan ran at batch 1 without a word. brickdl-tune's
// plan.json says what it was made for: without --batch the run takes the plan's batch; another
// batch is refused (exit 2) naming both, unless --allow-plan-mismatch, which runs it with a
// warning.
TEST_F(RunCli, APlanRunsAtItsBatchAndAnotherBatchIsRefused) {
  std::ofstream(path("plan.json")) << tuned_plan({8, 8}).dump(2);
  const std::string model = "--model conv_chain --plan " + path("plan.json") + " --input-size 8,8";
  ASSERT_EQ(run(model + " --check --out " + path("run")), 0) << read("err.txt");
  EXPECT_NE(read("out.txt").find("conv_chain, batch 2 (the plan's), 3 fused layers, 1 plan groups"),
            std::string::npos)
      << read("out.txt");
  nlohmann::json m = nlohmann::json::parse(read("run/manifest.json"));
  EXPECT_EQ(m.at("batch"), 2);
  EXPECT_EQ(m.at("plan_made_for").at("batch"), 2);
  EXPECT_FALSE(m.contains("plan_mismatches"));
  EXPECT_EQ(read_npy(path("run/output.npy")).shape, (std::vector<int64_t>{2, 3, 8, 8}));
  // Another batch: refused, both named, nothing written.
  EXPECT_EQ(run(model + " --batch 1 --out " + path("b1")), 2);
  EXPECT_NE(read("err.txt").find("plan.json does not fit this run: it was made for batch 2, this "
                                 "run is batch 1. Drop --batch to run at the plan's batch, or add "
                                 "--allow-plan-mismatch"),
            std::string::npos)
      << read("err.txt");
  EXPECT_FALSE(fs::exists(path("b1")));
  // ... or run with a warning when allowed.
  ASSERT_EQ(run(model + " --batch 1 --allow-plan-mismatch --check --out " + path("b1")), 0)
      << read("err.txt");
  EXPECT_NE(read("err.txt").find("brickdl-run: warning: " + path("plan.json") +
                                 " does not fit this run: it was made for batch 2, this run is "
                                 "batch 1; running it anyway (--allow-plan-mismatch)"),
            std::string::npos)
      << read("err.txt");
  m = nlohmann::json::parse(read("b1/manifest.json"));
  EXPECT_EQ(m.at("batch"), 1);
  EXPECT_EQ(m.at("plan_mismatches").size(), 1u);
}

// Another input size (the group's workload differs) or precision: refused, both named.
TEST_F(RunCli, APlanForAnotherInputSizeOrPrecisionIsRefused) {
  nlohmann::json plan = tuned_plan({8, 8});
  std::ofstream(path("plan.json")) << plan.dump(2);
  const std::string model = "--model conv_chain --plan " + path("plan.json") + " --input-size ";
  EXPECT_EQ(run(model + "9,9 --out " + path("s9")), 2);
  const std::string want = plan["plan"]["groups"][0]["workload"];
  const std::string got = tuned_plan({9, 9})["plan"]["groups"][0]["workload"];
  EXPECT_NE(read("err.txt").find("group 0 (layers 1..2, conv1 .. conv2) was made for '" + want +
                                 "', this run's graph has '" + got +
                                 "' there: another model, input size or channel count"),
            std::string::npos)
      << read("err.txt");
  EXPECT_FALSE(fs::exists(path("s9")));
  plan["precision"] = "bf16";
  std::ofstream(path("plan.json"), std::ios::trunc) << plan.dump(2);
  EXPECT_EQ(run(model + "8,8 --out " + path("bf16")), 2);
  EXPECT_NE(read("err.txt").find("it was made for precision bf16, this run is fp32"),
            std::string::npos)
      << read("err.txt");
  // What it was made for, of the wrong type: one error naming the key.
  plan["batch"] = "two";
  std::ofstream(path("plan.json"), std::ios::trunc) << plan.dump(2);
  EXPECT_EQ(run(model + "8,8 --out " + path("x")), 2);
  EXPECT_NE(read("err.txt").find("key 'batch': expected an integer from 1"), std::string::npos)
      << read("err.txt");
}

// One error policy (apps/run_tool.h): "brickdl-run: error: ..." and exit 2 for bad input.
TEST_F(RunCli, BadInputIsOneErrorLine) {
  EXPECT_EQ(run("--model conv_chain --input-size 8,8,8,8 --out " + path("x")), 2);
  EXPECT_EQ(read("err.txt"), "brickdl-run: error: model 'conv_chain': input_size must be [H, W] "
                             "(a 2-D chain) or [D, H, W] (a 3-D chain), got 4 extents\n");
  EXPECT_FALSE(fs::exists(path("x")));
}

} // namespace
} // namespace brickdl::kernels
