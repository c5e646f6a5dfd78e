// ONNX round trip for every zoo model: brickdl-run --export-onnx writes the model with the
// weights a run uses; importing the file gives the same layers (names, ops, attributes,
// shapes, parameters, MACs), the same fused graph and weights bit for bit, the same output of
// brickdl-run bit for bit, and brickdl-tune plans it as it plans the zoo model (model only).
// Small input sizes keep the reference runs short; the plans are compared at those sizes.
//
// And every file the export writes is valid ONNX that ONNX Runtime (the pinned onnxruntime of
// scripts/requirements.txt, in .venv) loads and runs to brickdl-run's output within kOrtTol
// (tests/cli/ort_compare.py): each zoo model's, each re-export of the export suite's torchvision
// files (tests/onnx/suite/), and small graphs whose head is a global mean then a linear layer,
// with and without a flatten between (MNASNet's and ShuffleNetV2's x.mean([2, 3]) has none).
// Without ORT those tests are skipped.
//
// Each test runs in a folder of its own; a test that failed keeps it (its path printed), with
// every program's output and steps.log, the programs run and how each ended.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/experiment.h"
#include "core/graph.h"
#include "core/group.h"
#include "core/onnx.h"
#include "core/zoo.h"
#include "kernels/weights.h"
#include "tests/onnx/onnx_test_model.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

const std::string kRun = std::string(BRICKDL_BINARY_DIR) + "/apps/brickdl-run";
const std::string kTune = std::string(BRICKDL_BINARY_DIR) + "/apps/brickdl-tune";
// The interpreter of the virtual environment scripts/install-deps.sh fills (BRICKDL_VENV, else
// .venv), where the pinned onnxruntime is.
std::string venv_python() {
  const char* venv = std::getenv("BRICKDL_VENV");
  return (venv && *venv ? std::string(venv) : std::string(BRICKDL_SOURCE_DIR) + "/.venv") +
         "/bin/python";
}
const std::string kOrtCompare = std::string(BRICKDL_SOURCE_DIR) + "/tests/cli/ort_compare.py";
// ORT against brickdl-run, normwise: max |ORT − brickdl| / max |brickdl| (the export suite's
// measure and bound, tests/onnx/suite_test.cpp); both run the same float32 math in other orders
// (about 1e-6 here).
constexpr double kOrtTol = 1e-4;
constexpr int kSkipped = 77; // ort_compare.py's exit status without onnxruntime

// A size every zoo model builds at and runs quickly on the CPU reference.
std::vector<int64_t> small_size(const std::string& model) {
  if (model == "resnet3d_34")
    return {16, 32, 32};
  if (model.rfind("micro_", 0) == 0 || model == "conv_chain")
    return {12, 12, 12};
  if (model == "inception_v4")
    return {96, 96};
  if (model == "deepcam")
    return {96, 144};
  if (model == "vgg16_bn") // its adaptive pool to 7x7 needs a multiple of 224
    return {224, 224};
  return {64, 64};
}

// The same layers one for one, the same fused workloads (what the model and the database key
// on) and the same weights bit for bit.
void expect_same_graph(const Graph& g, const Graph& zoo_graph) {
  ASSERT_EQ(g.size(), zoo_graph.size());
  for (const Layer& l : zoo_graph.layers()) {
    const Layer& r = g.layer(l.id);
    EXPECT_EQ(r.name, l.name);
    EXPECT_EQ(r.op, l.op) << l.name;
    EXPECT_EQ(r.inputs, l.inputs) << l.name;
    EXPECT_EQ(attribute_text(r), attribute_text(l)) << l.name;
    EXPECT_EQ(r.out, l.out) << l.name;
    EXPECT_EQ(r.params, l.params) << l.name;
    EXPECT_EQ(r.macs, l.macs) << l.name;
  }
  EXPECT_EQ(g.total_macs(), zoo_graph.total_macs());
  const Graph zf = fuse_for_inference(zoo_graph), rf = fuse_for_inference(g);
  ASSERT_EQ(rf.size(), zf.size());
  for (int i = 1; i < zf.size(); ++i)
    EXPECT_EQ(workload_signature(rf, Group{i, i}), workload_signature(zf, Group{i, i}));
  const kernels::ModelWeights zw = kernels::make_weights(zf, 9), rw = kernels::model_weights(rf, 9);
  for (int i = 1; i < zf.size(); ++i) {
    EXPECT_EQ(rw.at(i).weight, zw.at(i).weight) << zf.layer(i).name;
    EXPECT_EQ(rw.at(i).bias, zw.at(i).bias) << zf.layer(i).name;
  }
}

// "exited 0", "killed by signal 9 (SIGKILL)": how a std::system() command ended.
std::string describe_status(int status) {
  if (status == -1)
    return fmt::format("not started ({})", std::strerror(errno));
  if (WIFEXITED(status))
    return fmt::format("exited {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return fmt::format("killed by signal {} (SIG{})", WTERMSIG(status), name ? name : "?");
  }
  return fmt::format("ended with wait status {}", status);
}

// A test in a temporary folder of its own that runs the built programs, each a named step:
// its output in STEP.log, its command and how it ended in steps.log. A test that failed keeps
// the folder and prints its path and steps.log; one that passed or was skipped removes it. (A
// test ended by ctest's timeout keeps it too: its path is printed at the start, and steps.log
// names the step it was in.)
class CliTest : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("brickdl_onnx_rt_{}_{}", ::getpid(), GetParam());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::cout << "folder " << dir_.string() << std::endl;
  }
  void TearDown() override {
    if (!HasFailure()) {
      fs::remove_all(dir_);
      return;
    }
    std::cout << "kept the failed test's folder " << dir_.string() << "\nsteps.log:\n"
              << read("steps.log");
  }

  // Exit status of `program args` (-1 when a signal ended it or it did not start), run as step
  // `step`: stdout and stderr into STEP.log, the command before it starts and how it ended into
  // steps.log.
  int run(const std::string& step, const std::string& program, const std::string& args) {
    log_step(fmt::format("step {}: {} {}", step, program, args));
    const auto t0 = std::chrono::steady_clock::now();
    // exec: the program replaces the shell, so that a signal ending it is the wait status.
    const int status = std::system(
        fmt::format("exec {} {} > {} 2>&1", program, args, path(step + ".log")).c_str());
    log_step(
        fmt::format("step {}: {} after {:.1f} s", step, describe_status(status),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void log_step(const std::string& line) const {
    std::ofstream(dir_ / "steps.log", std::ios::app) << line << '\n';
  }
  std::string read(const std::string& name) const {
    std::ifstream f(dir_ / name, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // brickdl-run `model_args` exports its model to export.onnx and runs it into run/.
  void export_and_run(const std::string& model_args) {
    ASSERT_EQ(run("export", kRun,
                  fmt::format("{} --seed 9 --export-onnx {} --out {}", model_args,
                              path("export.onnx"), path("run"))),
              0)
        << read("export.log");
  }
  // ONNX Runtime loads export.onnx and runs it to run/'s outputs within kOrtTol. Skipped
  // without ORT; call it last (a skip returns from here only).
  void expect_ort_matches() {
    const std::string python = venv_python();
    if (!fs::exists(python))
      GTEST_SKIP() << "no " << python << " (scripts/install-deps.sh makes it, with onnxruntime)";
    const int rc =
        run("ort", python,
            fmt::format("{} {} {} {}", kOrtCompare, path("export.onnx"), path("run"), kOrtTol));
    if (rc == kSkipped)
      GTEST_SKIP() << read("ort.log");
    std::cout << read("ort.log"); // the error measured, for ctest -V
    EXPECT_EQ(rc, 0);
  }

  fs::path dir_;
};

class OnnxRoundTrip : public CliTest {
protected:
  // Two images (batch blocks of 2 in the plans), one for the largest model.
  int batch() const { return GetParam() == "vgg16_bn" ? 1 : 2; }
  std::string size_arg() const { return fmt::format("{}", fmt::join(small_size(GetParam()), ",")); }
};

TEST_P(OnnxRoundTrip, SameLayersWeightsOutputsAndPlan) {
  const std::string model = GetParam();
  ZooOptions zo;
  zo.batch = batch();
  zo.input_size = small_size(model);
  const Graph zoo_graph = build_zoo_model(model, zo);
  ASSERT_EQ(run("export", kRun,
                fmt::format("--model {} --batch {} --input-size {} --seed 9 --export-onnx {}",
                            model, batch(), size_arg(), path("m.onnx"))),
            0)
      << read("export.log");

  const OnnxModel imported = import_onnx(path("m.onnx"));
  expect_same_graph(imported.graph, zoo_graph);

  // brickdl-run: the same output, bit for bit (the same seeded input).
  ASSERT_EQ(run("run-zoo", kRun,
                fmt::format("--model {} --batch {} --input-size {} --seed 9 --out {}", model,
                            batch(), size_arg(), path("zoo"))),
            0)
      << read("run-zoo.log");
  ASSERT_EQ(run("run-onnx", kRun,
                fmt::format("--model {} --seed 9 --out {}", path("m.onnx"), path("onnx"))),
            0)
      << read("run-onnx.log");
  EXPECT_EQ(read("onnx/output.npy"), read("zoo/output.npy"));
  EXPECT_EQ(read("onnx/input.npy"), read("zoo/input.npy"));

  // brickdl-tune, model only: the same plan.
  const std::string common = fmt::format("batch: {}\ninput_size: [{}]\ntarget: H200\n"
                                         "search: {{batch_blocks: [1, 2]}}\n",
                                         batch(), size_arg());
  std::ofstream(path("zoo.yaml")) << "name: rt\nmodel: " << model << "\n" << common;
  std::ofstream(path("onnx.yaml")) << "name: rt\nmodel: m.onnx\n" << common;
  for (const std::string e : {"zoo", "onnx"})
    ASSERT_EQ(run("tune-" + e, kTune,
                  fmt::format("{} --backend none --quiet --db {} --out {}", path(e + ".yaml"),
                              path(e + ".db"), path(e + "-out"))),
              0)
        << read("tune-" + e + ".log");
  const auto plan = [&](const std::string& e) {
    return nlohmann::json::parse(read(e + "-out/plan.json")).at("plan");
  };
  EXPECT_EQ(plan("onnx"), plan("zoo"));
}

// ONNX Runtime runs the export of the zoo model to brickdl-run's output.
TEST_P(OnnxRoundTrip, OrtRunsTheExport) {
  ASSERT_NO_FATAL_FAILURE(export_and_run(
      fmt::format("--model {} --batch {} --input-size {}", GetParam(), batch(), size_arg())));
  expect_ort_matches();
}

INSTANTIATE_TEST_SUITE_P(Zoo, OnnxRoundTrip, ::testing::ValuesIn(zoo_names()),
                         [](const auto& info) { return info.param; });

// ---- ONNX Runtime on the export of other graphs ---------------------------------------------

std::string test_name(std::string s) {
  std::replace_if(
      s.begin(), s.end(), [](char c) { return !std::isalnum(c); }, '_');
  return s;
}

// The export suite's files that import (`FILE  match` lines of tests/onnx/suite/expected.txt):
// torchvision networks as both PyTorch exporters write them, MNASNet's and ShuffleNetV2's
// x.mean([2, 3]) heads among them.
std::vector<std::string> suite_matches() {
  std::ifstream f(std::string(BRICKDL_SOURCE_DIR) + "/tests/onnx/suite/expected.txt");
  std::vector<std::string> out;
  std::string line, file, status;
  while (std::getline(f, line)) {
    std::istringstream words(line);
    if (words >> file >> status && file[0] != '#' && status == "match")
      out.push_back(file);
  }
  return out;
}

class OnnxSuiteReexport : public CliTest {};

TEST_P(OnnxSuiteReexport, OrtRunsTheExport) {
  ASSERT_NO_FATAL_FAILURE(export_and_run(
      fmt::format("--model {}/tests/onnx/suite/{}.onnx", BRICKDL_SOURCE_DIR, GetParam())));
  expect_ort_matches();
}

INSTANTIATE_TEST_SUITE_P(Suite, OnnxSuiteReexport, ::testing::ValuesIn(suite_matches()),
                         [](const auto& info) { return test_name(info.param); });

// A small graph whose head is a global pool then a linear layer, as an experiment's inline graph
// (`yaml`) or an ONNX file made here (`onnx`, a conv on a [2, 3, 8, 8] input "x" then `head`).
struct Head {
  std::string name;
  std::string yaml;                          // the experiment's model: an inline graph
  void (*onnx)(onnx_test::Model&) = nullptr; // the head, on the conv's output "c"
  int extra_layers = 0; // a re-import's layers past the graph's own (the export's Flatten)
};

// An inline graph: a conv on a [2, 3, 8, 8] input ([2, 3, 4, 6, 6] for `three_d`), then `head`.
std::string head_yaml(const std::string& head, const std::string& outputs = "",
                      bool three_d = false) {
  return fmt::format(
      "name: head\ntarget: H200\nbatch: 2\nmodel:\n  input: {{channels: 3, size: {}}}\n"
      "  layers:\n    - {{op: conv, name: conv, out_channels: 4, kernel: 3, "
      "padding: 1, bias: true}}\n{}{}",
      three_d ? "[4, 6, 6]" : "[8, 8]", head,
      outputs.empty() ? "" : "  outputs: " + outputs + "\n");
}

// Deterministic weights of `n` values in [-0.5, 0.5).
std::vector<float> weights(int64_t n, int salt) {
  std::vector<float> w(static_cast<size_t>(n));
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>((i * 37 + static_cast<size_t>(salt) * 11) % 101) / 101.0f - 0.5f;
  return w;
}

// Gemm (transB 1) of tensor `x` (4 features) to 5 outputs, into "y".
void gemm(onnx_test::Model& m, const std::string& x) {
  auto* n = m.node(
      "Gemm",
      {x, m.floats("fc.weight", {5, 4}, weights(20, 2)), m.floats("fc.bias", {5}, weights(5, 3))},
      {"y"});
  onnx_test::Model::attr(n, "transB", int64_t{1});
}

// ReduceMean or ReduceMax of "c" over H, W (an attribute at opset 17), into "r".
void reduce(onnx_test::Model& m, const std::string& op, int64_t keepdims) {
  auto* n = m.node(op, {"c"}, {"r"});
  onnx_test::Model::attr(n, "axes", std::vector<int64_t>{2, 3});
  onnx_test::Model::attr(n, "keepdims", keepdims);
}

const std::vector<Head>& heads() {
  static const std::vector<Head> h = {
      // brickdl's own form of x.mean([2, 3]) then a linear layer: no flatten.
      {"mean_linear", head_yaml("    - {op: relu}\n    - {op: global_avg_pool, name: gap}\n"
                                "    - {op: linear, name: fc, out_features: 5}\n")},
      {"mean_flatten_linear",
       head_yaml("    - {op: global_avg_pool, name: gap}\n    - {op: flatten}\n"
                 "    - {op: linear, name: fc, out_features: 5}\n")},
      {"mean_linear_3d", head_yaml("    - {op: global_avg_pool, name: gap}\n"
                                   "    - {op: linear, name: fc, out_features: 5}\n",
                                   "", true)},
      // Read by two linear layers: still one flat pool.
      {"mean_two_linears",
       head_yaml("    - {op: global_avg_pool, name: gap}\n"
                 "    - {op: linear, name: fc1, out_features: 5, inputs: gap}\n"
                 "    - {op: linear, name: fc2, out_features: 3, inputs: gap}\n",
                 "[fc1, fc2]")},
      // The pool is also an output, or something else comes between: a Flatten before the Gemm.
      {"mean_output_and_linear",
       head_yaml("    - {op: global_avg_pool, name: gap}\n"
                 "    - {op: linear, name: fc, out_features: 5}\n",
                 "[fc, gap]"),
       nullptr, 1},
      {"mean_relu_linear",
       head_yaml("    - {op: global_avg_pool, name: gap}\n    - {op: relu}\n"
                 "    - {op: linear, name: fc, out_features: 5}\n"),
       nullptr, 1},
      // As torchvision's MNASNet and ShuffleNetV2 export: ReduceMean, keepdims 0, then Gemm.
      {"onnx_reduce_mean_gemm", "",
       [](onnx_test::Model& m) {
         reduce(m, "ReduceMean", 0);
         gemm(m, "r");
       }},
      {"onnx_reduce_mean_flatten_gemm", "",
       [](onnx_test::Model& m) {
         reduce(m, "ReduceMean", 1);
         onnx_test::Model::attr(m.node("Flatten", {"r"}, {"f"}), "axis", int64_t{1});
         gemm(m, "f");
       }},
      // A global max pool (a max pool over the whole input) then Gemm.
      {"onnx_reduce_max_gemm", "",
       [](onnx_test::Model& m) {
         reduce(m, "ReduceMax", 0);
         gemm(m, "r");
       },
       1},
  };
  return h;
}

class OnnxHeadExport : public CliTest {
protected:
  const Head& head() const {
    const auto& h = heads();
    return *std::find_if(h.begin(), h.end(), [&](const Head& x) { return x.name == GetParam(); });
  }
  // The graph written to a file: head.yaml, or head.onnx; its path.
  std::string write_model() const {
    const Head& h = head();
    if (h.onnx == nullptr) {
      std::ofstream(path("head.yaml")) << h.yaml;
      return path("head.yaml");
    }
    onnx_test::Model m({2, 3, 8, 8});
    auto* conv = m.node("Conv",
                        {"x", m.floats("conv.weight", {4, 3, 3, 3}, weights(108, 0)),
                         m.floats("conv.bias", {4}, weights(4, 1))},
                        {"c"});
    onnx_test::Model::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
    h.onnx(m);
    std::ofstream f(path("head.onnx"), std::ios::binary);
    m.proto().SerializeToOstream(&f);
    return path("head.onnx");
  }
};

// The export imports back to the graph's layers (and the export's Flatten where it needs one)
// and brickdl-run's output, bit for bit; ONNX Runtime runs it to that output.
TEST_P(OnnxHeadExport, ReimportsAndOrtRunsIt) {
  const std::string model = write_model();
  const Graph g = head().onnx ? import_onnx(model).graph : load_experiment(model).graph;
  ASSERT_NO_FATAL_FAILURE(export_and_run("--model " + model));
  const Graph back = import_onnx(path("export.onnx")).graph;
  EXPECT_EQ(back.size(), g.size() + head().extra_layers);
  EXPECT_EQ(back.total_macs(), g.total_macs());
  ASSERT_EQ(run("run-back", kRun,
                fmt::format("--model {} --seed 9 --out {}", path("export.onnx"), path("back"))),
            0)
      << read("run-back.log");
  for (const GraphOutput& o : g.output_refs()) {
    const std::string file = g.outputs().size() == 1 ? "output.npy" : "output." + o.name + ".npy";
    EXPECT_FALSE(read("run/" + file).empty()) << file;
    EXPECT_EQ(read("back/" + file), read("run/" + file)) << file;
  }
  expect_ort_matches();
}

INSTANTIATE_TEST_SUITE_P(Heads, OnnxHeadExport, ::testing::ValuesIn([] {
                           std::vector<std::string> names;
                           for (const Head& h : heads())
                             names.push_back(h.name);
                           return names;
                         }()),
                         [](const auto& info) { return info.param; });

} // namespace
} // namespace brickdl
