// ONNX export of a graph of two runtime inputs and two outputs: the file declares both inputs
// (by their names, shapes in order) and both outputs (under their own names), and passes ONNX's
// checker with full shape inference.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "core/graph_builder.h"
#include "core/onnx.h"
#include "kernels/weights.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

Graph neck() {
  GraphBuilder b("neck", TensorShape{2, 3, 1, 8, 8, 2}, DType::kF32, "p3");
  const int p4 = b.add_input(TensorShape{2, 5, 1, 4, 4, 2}, "p4");
  const int c3 = b.conv2d(b.input(), 4, 3, 1, 1, 1, 1, true, "c3");
  const int r3 = b.relu(c3, "r3");
  const int cat = b.concat({r3, b.upsample(p4, 2, false, "up")}, "cat");
  const int head3 = b.conv2d(cat, 2, 1, 1, 0, 1, 1, true, "head3");
  const int head4 = b.conv2d(p4, 6, 1, 1, 0, 1, 1, true, "head4");
  b.mark_output(head3, "boxes");
  b.mark_output(r3); // read by the concat too
  b.mark_output(head4);
  return b.build();
}

std::vector<int64_t> dims_of(const onnx::ValueInfoProto& v) {
  std::vector<int64_t> d;
  for (const auto& x : v.type().tensor_type().shape().dim())
    d.push_back(x.dim_value());
  return d;
}

TEST(GraphIoExport, TwoInputsAndThreeOutputsAreDeclaredInOrder) {
  const Graph g = neck();
  const std::string file = (fs::temp_directory_path() /
                            ("brickdl_graph_io_export_" + std::to_string(::getpid()) + ".onnx"))
                               .string();
  export_onnx(g, kernels::unfused_params(fuse_for_inference(g), 5), file);
  onnx::ModelProto m;
  {
    std::ifstream f(file, std::ios::binary);
    ASSERT_TRUE(m.ParseFromIstream(&f));
  }
  fs::remove(file);
  const onnx::GraphProto& gp = m.graph();
  ASSERT_EQ(gp.input_size(), 2);
  EXPECT_EQ(gp.input(0).name(), "p3");
  EXPECT_EQ(gp.input(1).name(), "p4");
  EXPECT_EQ(dims_of(gp.input(1)), (std::vector<int64_t>{2, 5, 4, 4}));
  ASSERT_EQ(gp.output_size(), 3);
  EXPECT_EQ(gp.output(0).name(), "boxes");
  EXPECT_EQ(dims_of(gp.output(0)), (std::vector<int64_t>{2, 2, 8, 8}));
  EXPECT_EQ(gp.output(1).name(), "r3");
  EXPECT_EQ(gp.output(2).name(), "head4");
  EXPECT_EQ(dims_of(gp.output(2)), (std::vector<int64_t>{2, 6, 4, 4}));
  EXPECT_NO_THROW(onnx::checker::check_model(m));
  onnx::shape_inference::InferShapes(m);
  EXPECT_NO_THROW(onnx::checker::check_model(m));
}

} // namespace
} // namespace brickdl
