// ONNX round trip for every zoo model: brickdl-run --export-onnx writes the model with the
// weights a run uses; importing the file gives the same layers (names, ops, attributes,
// shapes, parameters, MACs), the same fused graph and weights bit for bit, the same output of
// brickdl-run bit for bit, and brickdl-tune plans it as it plans the zoo model (model only).
// Small input sizes keep the reference runs short; the plans are compared at those sizes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/graph.h"
#include "core/group.h"
#include "core/onnx.h"
#include "core/zoo.h"
#include "kernels/weights.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

const std::string kRun = std::string(BRICKDL_BINARY_DIR) + "/apps/brickdl-run";
const std::string kTune = std::string(BRICKDL_BINARY_DIR) + "/apps/brickdl-tune";

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

class OnnxRoundTrip : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("brickdl_onnx_rt_{}_{}", ::getpid(), GetParam());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Exit status of `program args`; stdout and stderr go to log.txt.
  int run(const std::string& program, const std::string& args) {
    const std::string cmd = program + " " + args + " > " + path("log.txt") + " 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string read(const std::string& name) const {
    std::ifstream f(dir_ / name, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Two images (batch blocks of 2 in the plans), one for the largest model.
  int batch() const { return GetParam() == "vgg16_bn" ? 1 : 2; }
  std::string size_arg() const { return fmt::format("{}", fmt::join(small_size(GetParam()), ",")); }

  fs::path dir_;
};

TEST_P(OnnxRoundTrip, SameLayersWeightsOutputsAndPlan) {
  const std::string model = GetParam();
  ZooOptions zo;
  zo.batch = batch();
  zo.input_size = small_size(model);
  const Graph zoo_graph = build_zoo_model(model, zo);
  ASSERT_EQ(run(kRun, fmt::format("--model {} --batch {} --input-size {} --seed 9 --export-onnx {}",
                                  model, batch(), size_arg(), path("m.onnx"))),
            0)
      << read("log.txt");

  const OnnxModel imported = import_onnx(path("m.onnx"));
  expect_same_graph(imported.graph, zoo_graph);

  // brickdl-run: the same output, bit for bit (the same seeded input).
  ASSERT_EQ(run(kRun, fmt::format("--model {} --batch {} --input-size {} --seed 9 --out {}", model,
                                  batch(), size_arg(), path("zoo"))),
            0)
      << read("log.txt");
  ASSERT_EQ(run(kRun, fmt::format("--model {} --seed 9 --out {}", path("m.onnx"), path("onnx"))), 0)
      << read("log.txt");
  EXPECT_EQ(read("onnx/output.npy"), read("zoo/output.npy"));
  EXPECT_EQ(read("onnx/input.npy"), read("zoo/input.npy"));

  // brickdl-tune, model only: the same plan.
  const std::string common = fmt::format("batch: {}\ninput_size: [{}]\ntarget: H200\n"
                                         "search: {{batch_blocks: [1, 2]}}\n",
                                         batch(), size_arg());
  std::ofstream(path("zoo.yaml")) << "name: rt\nmodel: " << model << "\n" << common;
  std::ofstream(path("onnx.yaml")) << "name: rt\nmodel: m.onnx\n" << common;
  for (const char* e : {"zoo", "onnx"})
    ASSERT_EQ(run(kTune, fmt::format("{} --backend none --quiet --db {} --out {}",
                                     path(std::string(e) + ".yaml"), path(std::string(e) + ".db"),
                                     path(std::string(e) + "-out"))),
              0)
        << read("log.txt");
  const auto plan = [&](const std::string& e) {
    return nlohmann::json::parse(read(e + "-out/plan.json")).at("plan");
  };
  EXPECT_EQ(plan("onnx"), plan("zoo"));
}

INSTANTIATE_TEST_SUITE_P(Zoo, OnnxRoundTrip, ::testing::ValuesIn(zoo_names()),
                         [](const auto& info) { return info.param; });

} // namespace
} // namespace brickdl
