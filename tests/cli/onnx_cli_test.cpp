// Bad ONNX input at the command line: brickdl-tune and brickdl-run exit 2 with one error line
// that names the file and the node (or initializer); a dynamic batch is taken from --batch.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

namespace {

namespace fs = std::filesystem;

const std::string kRun = std::string(BRICKDL_BINARY_DIR) + "/apps/brickdl-run";
const std::string kTune = std::string(BRICKDL_BINARY_DIR) + "/apps/brickdl-tune";

// x (1, 2, 6, 6) → Conv "c1" (3x3, 4 outputs, pad 1) → Relu "r1" → y; opset 13.
onnx::ModelProto small_model() {
  onnx::ModelProto m;
  m.set_ir_version(7);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 2, 6, 6})
    t->mutable_shape()->add_dim()->set_dim_value(d);
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {4, 2, 3, 3})
    w->add_dims(d);
  for (int i = 0; i < 4 * 2 * 3 * 3; ++i)
    w->add_float_data(0.01f * static_cast<float>(i % 7));
  onnx::NodeProto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->set_name("c1");
  conv->add_input("x");
  conv->add_input("W");
  conv->add_output("h");
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i)
    pads->add_ints(1);
  onnx::NodeProto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("r1");
  relu->add_input("h");
  relu->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

class OnnxCli : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("brickdl_onnx_cli_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const onnx::ModelProto& m) {
    std::ofstream f(path(name), std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&f));
  }
  int run(const std::string& program, const std::string& args) {
    const std::string cmd =
        program + " " + args + " > " + path("out.txt") + " 2> " + path("err.txt");
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string err() const {
    std::ifstream f(dir_ / "err.txt");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // Both tools exit 2 on `file` with one error line holding every one of `words`.
  void expect_refused(const std::string& file, std::initializer_list<std::string> words) {
    for (const auto& [program, args] :
         {std::pair{kTune, path(file) + " --backend none --quiet --db " + path("t.db") + " --out " +
                               path("out")},
          std::pair{kRun, "--model " + path(file) + " --out " + path("run")}}) {
      EXPECT_EQ(run(program, args), 2) << program << " " << file << ": " << err();
      const std::string e = err();
      EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 1) << e;
      EXPECT_NE(e.find("error: "), std::string::npos) << e;
      EXPECT_NE(e.find(path(file)), std::string::npos) << e;
      // The file once, at the start of the message; no position in a text the user never typed.
      EXPECT_EQ(e.find(path(file), e.find(path(file)) + 1), std::string::npos) << e;
      EXPECT_EQ(e.find("the command line"), std::string::npos) << e;
      EXPECT_EQ(e.find("experiment of"), std::string::npos) << e;
      for (const std::string& w : words)
        EXPECT_NE(e.find(w), std::string::npos) << "'" << w << "' not in: " << e;
    }
  }

  fs::path dir_;
};

TEST_F(OnnxCli, TheSmallModelRuns) {
  write("ok.onnx", small_model());
  EXPECT_EQ(run(kTune, path("ok.onnx") + " --backend none --quiet --db " + path("t.db") +
                           " --out " + path("out")),
            0)
      << err();
  EXPECT_EQ(run(kRun, "--model " + path("ok.onnx") + " --out " + path("run") + " --check"), 0)
      << err();
}

// PyTorch's x.view(x.size(0), -1) exports as Shape → Gather → Unsqueeze → Concat → Reshape:
// shape arithmetic on constants that the importer folds, leaving one flatten.
TEST_F(OnnxCli, ShapeArithmeticFoldsIntoAFlatten) {
  onnx::ModelProto m = small_model();
  onnx::GraphProto* g = m.mutable_graph();
  g->mutable_output(0)->set_name("z");
  const auto node = [&](const std::string& op, std::vector<std::string> in,
                        const std::string& out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (auto& i : in)
      n->add_input(i);
    n->add_output(out);
    return n;
  };
  const auto ints = [&](const std::string& name, std::vector<int64_t> v, bool scalar) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar)
      t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v)
      t->add_int64_data(x);
  };
  ints("zero", {0}, true);
  ints("axes", {0}, false);
  ints("minus_one", {-1}, false);
  node("Shape", {"y"}, "shape");
  node("Gather", {"shape", "zero"}, "batch");
  node("Unsqueeze", {"batch", "axes"}, "batch1");
  node("Concat", {"batch1", "minus_one"}, "target")->add_attribute()->set_name("axis");
  node("Reshape", {"y", "target"}, "flat");
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("fc.w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(144);
  w->add_dims(5);
  for (int i = 0; i < 144 * 5; ++i)
    w->add_float_data(0.001f * static_cast<float>(i % 11));
  node("MatMul", {"flat", "fc.w"}, "z");
  write("view.onnx", m);
  ASSERT_EQ(run(kRun, "--model " + path("view.onnx") + " --out " + path("run") + " --check"), 0)
      << err();
  std::ifstream manifest(path("run/manifest.json"));
  std::stringstream ss;
  ss << manifest.rdbuf();
  EXPECT_NE(ss.str().find("\"op\": \"flatten\""), std::string::npos);
  EXPECT_NE(ss.str().find("\"op\": \"linear\""), std::string::npos);
  EXPECT_EQ(ss.str().find("\"op\": \"concat\""), std::string::npos);
}

// Pads that differ at the two ends: the common part in the conv's window, the rest a pad layer
// named after the conv.
TEST_F(OnnxCli, AsymmetricPadsBecomeANamedPadLayer) {
  onnx::ModelProto m = small_model();
  auto* pads = m.mutable_graph()->mutable_node(0)->mutable_attribute(0);
  pads->set_ints(0, 0); // begin (h, w) = (0, 1), end (h, w) = (1, 1)
  write("asym.onnx", m);
  ASSERT_EQ(run(kRun, "--model " + path("asym.onnx") + " --out " + path("run") + " --check"), 0)
      << err();
  std::ifstream manifest(path("run/manifest.json"));
  std::stringstream ss;
  ss << manifest.rdbuf();
  EXPECT_NE(ss.str().find("\"name\": \"c1.pad\""), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("\"name\": \"c1\""), std::string::npos);
}

TEST_F(OnnxCli, NotOnnxAndTruncatedFiles) {
  std::ofstream(path("text.onnx")) << "model: resnet50\n";
  expect_refused("text.onnx", {"not an ONNX model"});
  std::string bytes;
  small_model().SerializeToString(&bytes);
  std::ofstream(path("cut.onnx"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_refused("cut.onnx", {"not an ONNX model"});
  std::ofstream(path("empty.onnx")).close();
  expect_refused("empty.onnx", {"not an ONNX model"});
}

TEST_F(OnnxCli, UnknownOpset) {
  onnx::ModelProto m = small_model();
  m.mutable_opset_import(0)->set_version(99);
  write("opset.onnx", m);
  expect_refused("opset.onnx", {"opset 99", "opsets 11 to"});
  m.mutable_opset_import(0)->set_version(9);
  write("old.onnx", m);
  expect_refused("old.onnx", {"opset 9"});
}

TEST_F(OnnxCli, UnsupportedOpNamesTheNodeAndTheOp) {
  onnx::ModelProto m = small_model();
  m.mutable_graph()->mutable_node(1)->set_op_type("Softmax");
  write("softmax.onnx", m);
  expect_refused("softmax.onnx", {"node 'r1' (Softmax)", "not supported"});
}

TEST_F(OnnxCli, DynamicBatchNeedsASize) {
  onnx::ModelProto m = small_model();
  m.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("N");
  write("dyn.onnx", m);
  expect_refused("dyn.onnx", {"dynamic batch 'N'", "input 'x'"});
  EXPECT_EQ(run(kTune, path("dyn.onnx") + " --batch 3 --backend none --quiet --db " + path("t.db") +
                           " --out " + path("out")),
            0)
      << err();
  EXPECT_EQ(run(kRun, "--model " + path("dyn.onnx") + " --batch 3 --out " + path("run")), 0)
      << err();
}

TEST_F(OnnxCli, InitializerOfTheWrongSize) {
  onnx::ModelProto m = small_model();
  m.mutable_graph()->mutable_initializer(0)->mutable_float_data()->RemoveLast();
  write("short.onnx", m);
  expect_refused("short.onnx", {"initializer 'W'", "71 values", "72 values"});
  m = small_model();
  m.mutable_graph()->mutable_initializer(0)->set_dims(1, 3); // 4x3x3x3: 3 input channels
  m.mutable_graph()->mutable_initializer(0)->mutable_float_data()->Clear();
  for (int i = 0; i < 4 * 3 * 9; ++i)
    m.mutable_graph()->mutable_initializer(0)->add_float_data(0.0f);
  write("channels.onnx", m);
  expect_refused("channels.onnx", {"node 'c1' (Conv)", "3 input channels", "has 2"});
}

TEST_F(OnnxCli, CycleNamesANode) {
  onnx::ModelProto m = small_model();
  // c1 reads y (the relu's output) instead of x: c1 → r1 → c1.
  m.mutable_graph()->mutable_node(0)->set_input(0, "y");
  write("cycle.onnx", m);
  expect_refused("cycle.onnx", {"cycle", "node '"});
}

} // namespace
