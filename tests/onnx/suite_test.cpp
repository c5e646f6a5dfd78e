// The export suite (tests/onnx/suite/): small torchvision-style networks exported by both
// PyTorch exporters (TorchScript-based at opset 17, and the default dynamo exporter) with
// ONNX Runtime's outputs, made by tests/onnx/suite/make_suite.py. For each line of
// tests/onnx/suite/expected.txt (`FILE  match`, or `FILE  refused  SUBSTRING`, FILE being the
// model's name without ".onnx"):
//
//   match    import_onnx reads the file (its external data beside it), and the CPU reference
//            layer by layer (unfused, and fused as brickdl-run runs it) and the CPU merged
//            executor running model-only searched plans (the dynamic program's plan under the
//            H200 model, and the best plans using padded groups only and memoized groups only,
//            so that both merged strategies run whatever the model prefers) all match ONNX
//            Runtime's output within kRelTol;
//   refused  import_onnx throws a UserError whose message contains SUBSTRING. A file listed as
//            refused that imports FAILS, so the table stays honest as ops land: make it a
//            `match` line.
//
// The error measure is normwise: max |got − ort| / max |ort| over the whole output. A CNN's
// outputs (logits, segmentation maps) have elements near zero from cancellation, where an
// elementwise relative error measures only rounding noise; scaled by the output's largest
// magnitude the bound is 1e-4 of the output's range for every element, with no absolute
// floor to tune, and fails on any element wrong by more than that. Outputs that are all zero
// (a check that could not fail) are rejected.
//
// Every .onnx file in the folder must have a line, and every line a file. Time: under a second
// for the whole suite (most files are refused today).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.h"
#include "core/gpu_spec.h"
#include "core/graph.h"
#include "core/onnx.h"
#include "kernels/npy.h"
#include "kernels/plan_executor.h"
#include "kernels/reference.h"
#include "kernels/weights.h"
#include "search/evaluation.h"
#include "search/predictor.h"
#include "search/search_space.h"
#include "search/searcher.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

constexpr double kRelTol = 1e-4;

fs::path suite_dir() {
  return fs::path(BRICKDL_SOURCE_DIR) / "tests/onnx/suite";
}
std::string expected_path() {
  return (suite_dir() / "expected.txt").string();
}

struct Entry {
  std::string file; // "resnet.ts": the model is file + ".onnx"
  bool match = false;
  std::string refusal; // refused: a substring of the expected UserError's message
  int line = 0;
};

// gtest prints a failing parameter with this (else as bytes).
void PrintTo(const Entry& e, std::ostream* os) {
  *os << e.file;
}

// expected.txt: '#' comments and blank lines skipped. Throws std::runtime_error on a bad line.
std::vector<Entry> read_expected(const std::string& path) {
  std::ifstream f(path);
  if (!f)
    throw std::runtime_error(path + ": cannot open");
  std::vector<Entry> out;
  std::set<std::string> seen;
  std::string line;
  for (int lineno = 1; std::getline(f, line); ++lineno) {
    std::istringstream words(line);
    Entry e;
    std::string status;
    if (!(words >> e.file) || e.file[0] == '#')
      continue;
    e.line = lineno;
    words >> status;
    e.match = status == "match";
    std::getline(words >> std::ws, e.refusal);
    if (!(e.match && e.refusal.empty()) && !(status == "refused" && e.refusal.size() >= 10))
      throw std::runtime_error(fmt::format(
          "{}:{}: '{}': expected `FILE  match` or `FILE  refused  SUBSTRING` (the substring of "
          "the refusal, 10 characters or more)",
          path, lineno, line));
    if (!seen.insert(e.file).second)
      throw std::runtime_error(fmt::format("{}:{}: '{}' is listed twice", path, lineno, e.file));
    out.push_back(e);
  }
  return out;
}

// The parameters of the suite's tests; empty when expected.txt does not read (the
// ExpectedListsEveryFile test then fails with the reason).
std::vector<Entry> entries() {
  try {
    return read_expected(expected_path());
  } catch (const std::exception&) {
    return {};
  }
}

kernels::Tensor read_input(const OnnxModel& m, const fs::path& npy) {
  const kernels::NpyArray a = kernels::read_npy(npy.string());
  kernels::Tensor x(m.graph.input_shape());
  if (x.numel() != static_cast<int64_t>(a.data.size()))
    throw std::runtime_error(fmt::format("{} has {} values; the graph's input {} has {}",
                                         npy.string(), a.data.size(), m.graph.input_shape().str(),
                                         x.numel()));
  x.values() = a.data;
  return x;
}

// max |got − want| / max |want|, or why it cannot be computed.
std::string relative_error(const kernels::Tensor& got, const std::vector<float>& want,
                           double& error) {
  if (got.numel() != static_cast<int64_t>(want.size()))
    return fmt::format("{} values, ONNX Runtime has {}", got.numel(), want.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.values()[i], w = want[i];
    if (!std::isfinite(g))
      return fmt::format("element {} is {}", i, g);
    diff = std::max(diff, std::fabs(g - w));
    scale = std::max(scale, std::fabs(w));
  }
  if (!(scale > 1e-6))
    return fmt::format("ONNX Runtime's output is all (near) zero (max {}): nothing to compare",
                       scale);
  error = diff / scale;
  return "";
}

// Prints the error (stdout: the test's log) and checks it.
void expect_matches(const std::string& what, const kernels::Tensor& got,
                    const std::vector<float>& want) {
  double error = 0;
  const std::string bad = relative_error(got, want, error);
  EXPECT_EQ(bad, "") << what;
  EXPECT_LE(error, kRelTol) << what << ": max |brickdl − ORT| / max |ORT| = " << error;
  std::cout << fmt::format("{}: relative error {:.2g}\n", what, error);
}

// The dynamic program's plan of `fused` under the H200 model, model only, with the given
// merged strategies (layerwise always in the space); as executable candidates.
std::vector<Candidate> searched_plan(const Graph& fused, std::vector<Strategy> strategies) {
  SearchSpaceConfig config;
  config.batch_blocks = {1, 2};
  config.strategies = std::move(strategies);
  const search::SearchSpace space = search::SearchSpace::build(fused, config);
  const auto predictor = search::make_model_predictor(*find_gpu_spec("H200"));
  const search::Evaluation evaluation = search::evaluate(space, *predictor);
  const search::Plan plan = search::dp_plan(space, evaluation.predicted_costs());
  if (!plan.valid())
    throw std::runtime_error("no usable plan: " + plan.note);
  std::vector<Candidate> out;
  for (const search::PlanStep& s : plan.steps)
    out.push_back(space.candidate(search::CandidateRef{s.group, s.candidate}));
  return out;
}

// "3 padded + 2 memoized groups (11 layers merged)".
std::string plan_text(const std::vector<Candidate>& plan) {
  int padded = 0, memoized = 0, layers = 0;
  for (const Candidate& c : plan)
    if (c.strategy != Strategy::kLayerwise) {
      (c.strategy == Strategy::kPadded ? padded : memoized) += 1;
      layers += c.group.size();
    }
  return fmt::format("{} padded + {} memoized groups ({} layers merged)", padded, memoized, layers);
}

class OnnxSuite : public ::testing::TestWithParam<Entry> {};

TEST_P(OnnxSuite, MatchesOnnxRuntimeOrIsRefusedAsListed) {
  const Entry& e = GetParam();
  const fs::path model = suite_dir() / (e.file + ".onnx");
  const std::string where = fmt::format("{} ({}:{})", model.string(), expected_path(), e.line);
  if (!e.match) {
    try {
      import_onnx(model.string());
      ADD_FAILURE() << where << " is listed as refused (\"" << e.refusal
                    << "\") but imports now: list it as `match` if it matches ONNX Runtime";
    } catch (const UserError& err) {
      EXPECT_NE(std::string(err.what()).find(e.refusal), std::string::npos)
          << where << " is refused for another reason than listed (\"" << e.refusal
          << "\"): " << err.what();
    }
    return;
  }
  OnnxModel m;
  try {
    m = import_onnx(model.string());
  } catch (const UserError& err) {
    FAIL() << where << " is listed as matching but is refused: " << err.what();
  }
  const std::string stem = e.file.substr(0, e.file.find('.'));
  const kernels::Tensor x = read_input(m, suite_dir() / (stem + ".input.npy"));
  // ONNX Runtime's outputs NAME.outK.npy, one per graph output, in the file's order.
  std::vector<std::vector<float>> want;
  for (size_t k = 0; k < m.outputs.size(); ++k) {
    const fs::path file = suite_dir() / fmt::format("{}.out{}.npy", e.file, k);
    ASSERT_TRUE(fs::exists(file)) << where << ": output " << k << " has no " << file;
    const kernels::NpyArray a = kernels::read_npy(file.string());
    ASSERT_EQ(m.outputs[k].dims, a.shape) << where << ": output " << k;
    want.push_back(a.data);
  }
  ASSERT_FALSE(fs::exists(suite_dir() / fmt::format("{}.out{}.npy", e.file, m.outputs.size())))
      << where << " has more ONNX Runtime outputs than the import's " << m.outputs.size();
  // Each output of a run against ONNX Runtime's, labelled by its index when there are several.
  const auto expect_all = [&](const std::string& what, const std::vector<kernels::Tensor>& got) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t k = 0; k < want.size(); ++k)
      expect_matches(want.size() > 1 ? fmt::format("{}, output {}", what, k) : what, got[k],
                     want[k]);
  };

  expect_all(where + ", unfused, layer by layer",
             kernels::run_graph_outputs(m.graph, {x}, kernels::model_weights(m.graph, 0)));
  const Graph fused = fuse_for_inference(m.graph);
  const kernels::ModelWeights w = kernels::model_weights(fused, 0);
  expect_all(where + ", fused, layer by layer", kernels::run_graph_outputs(fused, {x}, w));
  const std::pair<const char*, std::vector<Strategy>> searches[] = {
      {"tuned plan", {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized}},
      {"padded-only plan", {Strategy::kLayerwise, Strategy::kPadded}},
      {"memoized-only plan", {Strategy::kLayerwise, Strategy::kMemoized}}};
  for (const auto& [label, strategies] : searches) {
    const std::vector<Candidate> plan = searched_plan(fused, strategies);
    const std::string what = fmt::format("{}, {}: {}", where, label, plan_text(plan));
    expect_all(what, kernels::execute_plan(fused, plan, {x}, w, kernels::ExecOptions{2}).outputs);
  }
}

INSTANTIATE_TEST_SUITE_P(Suite, OnnxSuite, ::testing::ValuesIn(entries()),
                         [](const ::testing::TestParamInfo<Entry>& info) {
                           std::string name = info.param.file;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OnnxSuite);

// The table and the folder agree: a line per exported file, a file per line, and each file's
// input and ONNX Runtime output beside it.
TEST(OnnxSuiteTable, ExpectedListsEveryFile) {
  const std::vector<Entry> listed = read_expected(expected_path());
  std::set<std::string> files;
  for (const auto& f : fs::directory_iterator(suite_dir()))
    if (f.path().extension() == ".onnx")
      files.insert(f.path().stem().string());
  ASSERT_FALSE(files.empty()) << "no .onnx files in " << suite_dir();
  for (const Entry& e : listed) {
    EXPECT_TRUE(files.erase(e.file))
        << expected_path() << ":" << e.line << ": no file " << e.file << ".onnx in " << suite_dir();
    const std::string stem = e.file.substr(0, e.file.find('.'));
    EXPECT_TRUE(fs::exists(suite_dir() / (stem + ".input.npy"))) << e.file;
    EXPECT_TRUE(fs::exists(suite_dir() / (e.file + ".out0.npy"))) << e.file;
  }
  for (const std::string& f : files)
    ADD_FAILURE() << f << ".onnx has no line in " << expected_path();
}

} // namespace
} // namespace brickdl
