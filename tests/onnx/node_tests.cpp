// Conformance: ONNX's own node tests (Debian's libonnx-testdata: one folder per test, a
// model.onnx and test_data_set_0/{input,output}_K.pb) through import_onnx and the CPU
// reference executor.
//
// Every test whose nodes (Constant aside) are all ops the importer maps is imported with
// input_0 as the runtime input and inputs 1.. bound as constants (by the model's graph input
// names, in order), run unfused and fused (fuse_for_inference) and compared with output_0:
// |got − want| <= kAtol + kRtol·|want| per element (fp32 math in a different summation order
// than ONNX's numpy reference; infinities must match exactly, NaN matches NaN). Each test
// passes, is refused (UserError from the importer: one line naming the model file, and a
// node of the model with its op when it names one), or FAILS (wrong numbers or shape, any
// other exception). Refusals of supported ops must be listed, with the reason, in
// expected_refusals.txt; a listed test that passes is a stale entry. Every test of another op
// must be refused cleanly (neither accepted nor failing otherwise).
//
// BRICKDL_ONNX_NODE_TESTS overrides the data folder (default: Debian's); without it the test
// skips. BRICKDL_ONNX_EXPECTED_REFUSALS names the refusals file of that data (default:
// expected_refusals.txt, Debian's 1.12): ctest onnx_node_tests_current runs the node tests of a
// current ONNX release (tests/onnx/make_node_tests.py) against expected_refusals_current.txt.
// The summary table (per op: the opsets its tests declare, tests, passed, refused, failed) goes
// to stdout;
// BRICKDL_ONNX_TABLE=path also writes it to that file, BRICKDL_ONNX_VERBOSE=1 prints every
// test's outcome and message, BRICKDL_ONNX_WRITE_REFUSALS=path drafts a refusals file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "core/graph.h"
#include "core/onnx.h"
#include "kernels/reference.h"
#include "kernels/weights.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

constexpr float kRtol = 1e-4f;
constexpr float kAtol = 1e-5f;
constexpr const char* kDefaultDataDir = "/usr/share/libonnx-testdata/data/node";

// The ops the importer maps (core/onnx.h); Constant nodes are read up front and not counted.
const std::set<std::string>& supported_ops() {
  // clang-format off
  static const std::set<std::string> ops = {
      "Conv",   "ConvTranspose", "MaxPool", "AveragePool",        "BatchNormalization",
      "Relu",   "LeakyRelu",     "Sigmoid", "Clip",               "Add",
      "Mul",    "Concat",        "Gemm",    "MatMul",             "GlobalAveragePool",
      "Resize", "Flatten",       "Reshape", "Identity",           "Dropout",
      "Pad",    "Slice",         "Split",   "LayerNormalization", "Transpose",
      "ReduceMean", "ReduceMax",   "Sub",     "Div",                "HardSwish",
      "HardSigmoid", "Gelu"};
  // clang-format on
  return ops;
}

std::string data_dir() {
  const char* env = std::getenv("BRICKDL_ONNX_NODE_TESTS");
  return env && *env ? env : kDefaultDataDir;
}

enum class Outcome { kPassed, kRefused, kFailed };

// What the harness reads of a test's model itself: its ops (node order, distinct, Constant
// left out), its graph inputs in order, and each node's label as the importer names it.
struct TestModel {
  std::vector<std::string> ops;
  int64_t opset = 0; // of the default domain
  std::vector<std::string> inputs;
  std::set<std::string> node_labels; // "node 'name' (Op)"
  bool parsed = false;
  std::string label() const {
    return ops.empty() ? "(no op)" : fmt::format("{}", fmt::join(ops, "+"));
  }
  bool supported() const {
    if (!parsed || ops.empty())
      return false;
    for (const auto& op : ops)
      if (!supported_ops().count(op))
        return false;
    return true;
  }
};

TestModel read_test_model(const std::string& path) {
  TestModel m;
  std::ifstream f(path, std::ios::binary);
  onnx::ModelProto model;
  if (!f || !model.ParseFromIstream(&f))
    return m;
  m.parsed = true;
  for (const auto& n : model.graph().node()) {
    const std::string name = n.name().empty() ? (n.output_size() ? n.output(0) : "?") : n.name();
    m.node_labels.insert("node '" + name + "' (" + n.op_type() + ")");
    if (n.op_type() != "Constant" &&
        std::find(m.ops.begin(), m.ops.end(), n.op_type()) == m.ops.end())
      m.ops.push_back(n.op_type());
  }
  for (const auto& in : model.graph().input())
    m.inputs.push_back(in.name());
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      m.opset = o.version();
  return m;
}

struct Result {
  std::string test, op;
  int64_t opset = 0;
  bool supported = false;
  Outcome outcome = Outcome::kFailed;
  std::string detail; // the refusal's message or what failed
};

// "" when `got` matches `want` within the tolerance, else the first mismatch.
std::string compare(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return fmt::format("{} values, expected {}", got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = got[i], w = want[i];
    if (std::isnan(w)   ? std::isnan(g)
        : std::isinf(w) ? g == w
                        : std::fabs(g - w) <= kAtol + kRtol * std::fabs(w))
      continue;
    return fmt::format("element {} is {}, expected {}", i, g, w);
  }
  return "";
}

// Runs the imported model on input_0 and compares each output k with output_k, unfused and
// fused; "" when all match.
std::string run_and_compare(const OnnxModel& m, const fs::path& data) {
  const OnnxTensor in = read_onnx_tensor((data / "input_0.pb").string());
  std::vector<OnnxTensor> want;
  for (size_t k = 0; k < m.outputs.size(); ++k) {
    want.push_back(read_onnx_tensor((data / fmt::format("output_{}.pb", k)).string()));
    if (m.outputs[k].dims != want[k].dims)
      return fmt::format("output {} dims [{}], expected [{}]", k,
                         fmt::join(m.outputs[k].dims, ", "), fmt::join(want[k].dims, ", "));
  }
  kernels::Tensor x(m.graph.input_shape());
  if (x.numel() != static_cast<int64_t>(in.values.size()))
    return fmt::format("the input has {} values, the graph's input shape {} has {}",
                       in.values.size(), m.graph.input_shape().str(), x.numel());
  x.values() = in.values;
  const Graph fused = fuse_for_inference(m.graph);
  for (const Graph* g : {&m.graph, &fused}) {
    const std::vector<kernels::Tensor> ys =
        kernels::run_graph_outputs(*g, {x}, kernels::model_weights(*g, 0));
    for (size_t k = 0; k < want.size(); ++k)
      if (std::string e = compare(ys[k].values(), want[k].values); !e.empty())
        return fmt::format("{}: output {}: {}", g == &fused ? "fused" : "unfused", k, e);
  }
  return "";
}

// A refusal's message must be one line starting with the model's path, and name a node of
// the model (with its op) whenever it names a node; "" when it does.
std::string check_refusal_message(const std::string& msg, const std::string& model_path,
                                  const TestModel& tm) {
  if (msg.rfind(model_path + ": ", 0) != 0)
    return "the message does not start with the model's path";
  if (msg.find('\n') != std::string::npos)
    return "the message spans several lines";
  const size_t at = msg.find("node '");
  if (at == std::string::npos)
    return "";
  for (const auto& label : tm.node_labels)
    if (msg.compare(at, label.size(), label) == 0)
      return "";
  return "the message names a node the model does not have (or without its op)";
}

// One test's whole life: its inputs, the import, the classification and the run; each
// exception kind is caught where it means something different.
Result run_test(const fs::path& dir) {
  Result r;
  r.test = dir.filename().string();
  const std::string model_path = (dir / "model.onnx").string();
  const TestModel tm = read_test_model(model_path);
  r.op = tm.parsed ? tm.label() : "(unreadable)";
  r.opset = tm.opset;
  r.supported = tm.supported();
  const fs::path data = dir / "test_data_set_0";
  OnnxImportOptions options;
  for (size_t k = 1; k < tm.inputs.size(); ++k) {
    const fs::path pb = data / fmt::format("input_{}.pb", k);
    if (!fs::exists(pb))
      continue;
    try {
      options.constants[tm.inputs[k]] = read_onnx_tensor(pb.string());
    } catch (const UserError&) {
      // Not a float-convertible TensorProto (a bool, string, sequence...): left a runtime
      // input, which the importer refuses (one runtime input).
    }
  }
  std::optional<OnnxModel> m;
  try {
    m = import_onnx(model_path, options);
  } catch (const UserError& e) {
    r.outcome = Outcome::kRefused;
    r.detail = e.what();
    if (const std::string bad = check_refusal_message(r.detail, model_path, tm); !bad.empty()) {
      r.outcome = Outcome::kFailed;
      r.detail = bad + ": " + r.detail;
    }
    return r;
  } catch (const std::exception& e) {
    r.detail = std::string("import threw a non-UserError: ") + e.what();
    return r;
  }
  if (!r.supported) {
    r.detail = "accepted a test of an op brickdl does not support";
    return r;
  }
  try {
    r.detail = run_and_compare(*m, data);
    r.outcome = r.detail.empty() ? Outcome::kPassed : Outcome::kFailed;
  } catch (const std::exception& e) {
    r.detail = std::string("running threw: ") + e.what();
  }
  return r;
}

// expected_refusals.txt: `test_name  reason` per line; '#' comments and blank lines skipped.
std::map<std::string, std::string> read_expected_refusals(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream f(path);
  if (!f)
    throw std::runtime_error(path + ": cannot open");
  std::string line;
  for (int lineno = 1; std::getline(f, line); ++lineno) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#')
      continue;
    const size_t end = line.find_first_of(" \t", start);
    const std::string name = line.substr(start, end - start);
    const size_t reason = end == std::string::npos ? end : line.find_first_not_of(" \t", end);
    if (reason == std::string::npos)
      throw std::runtime_error(fmt::format("{}:{}: '{}' has no reason", path, lineno, name));
    if (!out.emplace(name, line.substr(reason)).second)
      throw std::runtime_error(fmt::format("{}:{}: '{}' is listed twice", path, lineno, name));
  }
  return out;
}

std::string expected_refusals_path() {
  const char* env = std::getenv("BRICKDL_ONNX_EXPECTED_REFUSALS");
  return env && *env ? env : std::string(BRICKDL_SOURCE_DIR) + "/tests/onnx/expected_refusals.txt";
}

// The summary: one row per op of the supported tests and their subtotal, one row for every
// other op together, and the totals.
std::string table(const std::vector<Result>& results) {
  struct Row {
    int tests = 0, passed = 0, refused = 0, failed = 0;
    std::set<int64_t> opsets;
    void add(Outcome o, int64_t opset) {
      opsets.insert(opset);
      ++tests;
      passed += o == Outcome::kPassed;
      refused += o == Outcome::kRefused;
      failed += o == Outcome::kFailed;
    }
  };
  std::map<std::string, Row> rows;
  Row mapped, other, total;
  std::set<std::string> other_ops;
  for (const Result& r : results) {
    (r.supported ? rows[r.op] : other).add(r.outcome, r.opset);
    if (r.supported)
      mapped.add(r.outcome, r.opset);
    else
      other_ops.insert(r.op);
    total.add(r.outcome, r.opset);
  }
  std::ostringstream os;
  const auto line = [&](const std::string& op, const std::string& opsets, const auto& tests,
                        const auto& passed, const auto& refused, const auto& failed) {
    os << fmt::format("{:<34} {:<9} {:>6} {:>7} {:>8} {:>7}\n", op, opsets, tests, passed, refused,
                      failed);
  };
  const auto row = [&](const std::string& op, const Row& x) {
    const std::string opsets = x.opsets.empty() ? "-"
                               : x.opsets.size() == 1
                                   ? std::to_string(*x.opsets.begin())
                                   : fmt::format("{}-{}", *x.opsets.begin(), *x.opsets.rbegin());
    line(op, opsets, x.tests, x.passed, x.refused, x.failed);
  };
  line("op", "opsets", "tests", "passed", "refused", "failed");
  for (const auto& [op, x] : rows)
    row(op, x);
  row(fmt::format("mapped ops ({})", rows.size()), mapped);
  row(fmt::format("other ops ({} kinds)", other_ops.size()), other);
  row("total", total);
  return os.str();
}

// One test's result against the expected refusals: a test failure when it breaks a rule.
void check(const Result& r, const std::map<std::string, std::string>& expected) {
  const bool listed = expected.count(r.test) > 0;
  if (!r.supported) {
    EXPECT_EQ(r.outcome, Outcome::kRefused)
        << r.test << " (" << r.op << ", not supported) is not refused cleanly: " << r.detail;
    EXPECT_FALSE(listed) << r.test << " (" << r.op
                         << ") is not a test of a supported op; remove it from the file";
  } else if (r.outcome == Outcome::kFailed) {
    ADD_FAILURE() << r.test << " (" << r.op << ") FAILED: " << r.detail;
  } else if (r.outcome == Outcome::kRefused && !listed) {
    ADD_FAILURE() << r.test << " (" << r.op << ") is refused but not in "
                  << expected_refusals_path() << ": " << r.detail;
  } else if (r.outcome == Outcome::kPassed && listed) {
    ADD_FAILURE() << r.test << " (" << r.op << ") passes but is listed as refused ("
                  << expected.at(r.test) << "): remove the stale entry";
  }
}

// BRICKDL_ONNX_WRITE_REFUSALS=path: every refused test of a mapped op, `test_name  message`
// (the importer's message without the model's path), as a draft of the expected refusals file
// when the data moves to a new ONNX release: each line still wants reading before it is kept.
void write_refusals(const std::string& path, const std::vector<Result>& results) {
  std::ofstream f(path);
  for (const Result& r : results) {
    if (!r.supported || r.outcome != Outcome::kRefused)
      continue;
    const size_t at = r.detail.find(".onnx: ");
    const std::string why = at == std::string::npos ? r.detail : r.detail.substr(at + 7);
    f << fmt::format("{:<64} {}\n", r.test, why);
  }
  EXPECT_TRUE(f.good()) << "cannot write the refusals to " << path;
}

void report(const std::string& root, const std::vector<Result>& results) {
  const std::string t = table(results);
  std::cout << "ONNX node tests in " << root << "\n" << t;
  if (const char* out = std::getenv("BRICKDL_ONNX_TABLE"); out && *out) {
    std::ofstream f(out);
    f << t;
    EXPECT_TRUE(f.good()) << "cannot write the table to " << out;
  }
  if (const char* v = std::getenv("BRICKDL_ONNX_VERBOSE"); v && *v)
    for (const Result& r : results)
      std::cout << r.test << " [" << r.op << "] "
                << (r.outcome == Outcome::kPassed    ? "passed"
                    : r.outcome == Outcome::kRefused ? "refused"
                                                     : "FAILED")
                << (r.detail.empty() ? "" : ": " + r.detail) << "\n";
  if (const char* out = std::getenv("BRICKDL_ONNX_WRITE_REFUSALS"); out && *out)
    write_refusals(out, results);
}

// Every test of the data folder: the four checks, then the table.
TEST(OnnxNodeTests, ImportAndReferenceMatchOnnx) {
  const std::string root = data_dir();
  if (!fs::is_directory(root))
    GTEST_SKIP() << "no ONNX node tests at " << root
                 << " (install Debian's libonnx-testdata or set BRICKDL_ONNX_NODE_TESTS)";
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && e.path().filename().string().rfind("test_", 0) == 0 &&
        fs::exists(e.path() / "model.onnx"))
      dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  ASSERT_FALSE(dirs.empty()) << "no test_* folders with a model.onnx in " << root;
  const auto expected = read_expected_refusals(expected_refusals_path());
  std::vector<Result> results;
  std::set<std::string> seen;
  for (const fs::path& d : dirs) {
    results.push_back(run_test(d));
    seen.insert(results.back().test);
    check(results.back(), expected);
  }
  for (const auto& [name, reason] : expected)
    EXPECT_TRUE(seen.count(name)) << name << " is listed as refused but " << root
                                  << " has no such test";
  report(root, results);
}

TEST(OnnxNodeTests, ExpectedRefusalsGiveReasons) {
  const auto expected = read_expected_refusals(expected_refusals_path());
  for (const auto& [name, reason] : expected) {
    EXPECT_EQ(name.rfind("test_", 0), 0u) << name << " is not a node test's name";
    EXPECT_GE(reason.size(), 10u) << name << ": the reason '" << reason << "' says too little";
  }
}

} // namespace
} // namespace brickdl
