// brickdl-run on an ONNX file of dynamic batch (a dim_param) without --batch: the batch is
// the --input arrays'; arrays of different batches are refused naming both files.
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
#include <onnx/onnx_pb.h>

#include "kernels/npy.h"
#include "kernels/weights.h"

namespace brickdl::kernels {
namespace {

namespace fs = std::filesystem;

const std::string kRun = std::string(BRICKDL_BINARY_DIR) + "/apps/brickdl-run";

void add_input(onnx::GraphProto* g, const std::string& name, int64_t channels, bool dynamic) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  if (dynamic)
    t->mutable_shape()->add_dim()->set_dim_param("N");
  else
    t->mutable_shape()->add_dim()->set_dim_value(1);
  for (int64_t d : {channels, int64_t{6}, int64_t{6}})
    t->mutable_shape()->add_dim()->set_dim_value(d);
}

// x (N, 2, 6, 6) → Conv "c1" (1x1, 4 outputs) → y; with `z`, a second input (N, 4, 6, 6)
// added to it: y = c1(x) + z. Opset 13.
onnx::ModelProto model(bool dynamic, bool with_z) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  add_input(g, "x", 2, dynamic);
  if (with_z)
    add_input(g, "z", 4, dynamic);
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {4, 2, 1, 1})
    w->add_dims(d);
  for (int i = 0; i < 8; ++i)
    w->add_float_data(0.25f * static_cast<float>(i % 5) - 0.5f);
  onnx::NodeProto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->set_name("c1");
  conv->add_input("x");
  conv->add_input("W");
  conv->add_output(with_z ? "h" : "y");
  if (with_z) {
    onnx::NodeProto* add = g->add_node();
    add->set_op_type("Add");
    add->set_name("a1");
    add->add_input("h");
    add->add_input("z");
    add->add_output("y");
  }
  g->add_output()->set_name("y");
  return m;
}

class OnnxBatchCli : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("brickdl_onnx_batch_{}_{}", ::getpid(),
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
  // A random (n, c, 6, 6) array.
  std::string array(const std::string& name, int64_t n, int64_t c) {
    write_npy(path(name), random_tensor(TensorShape{n, c, 1, 6, 6, 2}, 3, 0));
    return path(name);
  }
  int run(const std::string& args) {
    const std::string cmd = kRun + " " + args + " > " + path("out.txt") + " 2> " + path("err.txt");
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string err() const {
    std::ifstream f(dir_ / "err.txt");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  void expect_refused(const std::string& args, std::initializer_list<std::string> words) {
    EXPECT_EQ(run(args + " --out " + path("refused")), 2) << args << ": " << err();
    for (const std::string& w : words)
      EXPECT_NE(err().find(w), std::string::npos) << "'" << w << "' not in: " << err();
  }

  fs::path dir_;
};

TEST_F(OnnxBatchCli, ADynamicBatchIsTakenFromTheInputArray) {
  write("dyn.onnx", model(true, false));
  const std::string x = array("x3.npy", 3, 2);
  for (const std::string& spec : {x, "x=" + x}) { // by position, and by the file's name for it
    ASSERT_EQ(run("--model " + path("dyn.onnx") + " --input " + spec + " --out " + path("run") +
                  " --check"),
              0)
        << err();
    const nlohmann::json m = nlohmann::json::parse(std::ifstream(path("run/manifest.json")));
    EXPECT_EQ(m.at("batch"), 3);
    EXPECT_EQ(m.at("inputs").at(0).at("name"), "x");
    EXPECT_EQ(read_npy(path("run/output.npy")).shape, (std::vector<int64_t>{3, 4, 6, 6}));
    fs::remove_all(path("run"));
  }
  // Without --input the batch is still needed.
  expect_refused("--model " + path("dyn.onnx"), {"dynamic batch 'N'"});
  // --batch wins; an array of another batch is then refused by its shape.
  expect_refused("--model " + path("dyn.onnx") + " --batch 2 --input " + x, {x, "2x2x6x6"});
}

TEST_F(OnnxBatchCli, AFixedBatchStaysTheFiles) {
  write("fixed.onnx", model(false, false));
  const std::string x = array("x3.npy", 3, 2);
  expect_refused("--model " + path("fixed.onnx") + " --input " + x, {x, "1x2x6x6"});
  ASSERT_EQ(run("--model " + path("fixed.onnx") + " --input " + array("x1.npy", 1, 2) + " --out " +
                path("run")),
            0)
      << err();
}

TEST_F(OnnxBatchCli, InputsOfDifferentBatchesAreRefusedNamingBoth) {
  write("two.onnx", model(true, true));
  const std::string x = array("x3.npy", 3, 2), z = array("z2.npy", 2, 4);
  ASSERT_EQ(run("--model " + path("two.onnx") + " --input z=" + array("z3.npy", 3, 4) +
                " --input x=" + x + " --out " + path("run") + " --check"),
            0)
      << err();
  const nlohmann::json m = nlohmann::json::parse(std::ifstream(path("run/manifest.json")));
  EXPECT_EQ(m.at("batch"), 3);
  EXPECT_EQ(m.at("inputs").at(1).at("name"), "z");
  EXPECT_EQ(read_npy(path("run/output.npy")).shape, (std::vector<int64_t>{3, 4, 6, 6}));
  expect_refused("--model " + path("two.onnx") + " --input x=" + x + " --input z=" + z,
                 {"--input x=" + x + " has batch 3", "--input z=" + z + " has batch 2"});
}

} // namespace
} // namespace brickdl::kernels
