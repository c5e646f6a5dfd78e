// ONNX export of a graph of two runtime inputs and three outputs: the file declares the inputs
// (by their names, shapes in order) and the outputs (under their own names), passes ONNX's
// checker with full shape inference, and the importer reads it back to the same outputs.
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
#include "kernels/reference.h"
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

TEST(GraphIoExport, TheImporterReadsTheInputsAndOutputsBack) {
  const Graph g = neck();
  const Graph fused = fuse_for_inference(g);
  const std::string file = (fs::temp_directory_path() /
                            ("brickdl_graph_io_import_" + std::to_string(::getpid()) + ".onnx"))
                               .string();
  export_onnx(g, kernels::unfused_params(fused, 5), file);
  const OnnxModel m = import_onnx(file);
  fs::remove(file);
  const Graph& h = m.graph;
  ASSERT_EQ(h.num_inputs(), 2);
  EXPECT_EQ(h.layer(0).name, "p3");
  EXPECT_EQ(h.layer(1).name, "p4");
  EXPECT_EQ(h.layer(1).out, g.layer(1).out);
  ASSERT_EQ(m.outputs.size(), 3u);
  EXPECT_EQ(m.outputs[0].name, "boxes");
  EXPECT_EQ(m.outputs[0].dims, (std::vector<int64_t>{2, 2, 8, 8}));
  EXPECT_EQ(m.outputs[1].name, "r3");
  EXPECT_EQ(m.outputs[2].name, "head4");
  ASSERT_EQ(h.output_refs().size(), 3u);
  for (size_t k = 0; k < 3; ++k)
    EXPECT_EQ(h.output_refs()[k].name, m.outputs[k].name);
  // The same values, from the same inputs, as the graph that was exported.
  const std::vector<kernels::Tensor> x = {kernels::random_tensor(g.layer(0).out, 9, 0),
                                          kernels::random_tensor(g.layer(1).out, 9, 1)};
  const std::vector<kernels::Tensor> want =
      kernels::run_graph_outputs(fused, x, kernels::model_weights(fused, 5));
  const Graph hf = fuse_for_inference(h);
  const std::vector<kernels::Tensor> got =
      kernels::run_graph_outputs(hf, x, kernels::model_weights(hf, 0));
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_EQ(got[k].values(), want[k].values()) << "output " << k;
}

TEST(GraphIoExport, AnOutputThatIsAnotherOutputsTensorGetsALayer) {
  // y = relu(conv(x)); outputs y and an Identity of y: the importer copies the second.
  GraphBuilder b("id", TensorShape{1, 2, 1, 4, 4, 2});
  b.relu(b.conv2d(b.input(), 3, 1), "y");
  const Graph g = b.build();
  const std::string file = (fs::temp_directory_path() /
                            ("brickdl_graph_io_identity_" + std::to_string(::getpid()) + ".onnx"))
                               .string();
  export_onnx(g, kernels::unfused_params(fuse_for_inference(g), 1), file);
  onnx::ModelProto m;
  {
    std::ifstream f(file, std::ios::binary);
    ASSERT_TRUE(m.ParseFromIstream(&f));
  }
  onnx::NodeProto* id = m.mutable_graph()->add_node();
  id->set_op_type("Identity");
  id->set_name("copy");
  id->add_input("y");
  id->add_output("y2");
  m.mutable_graph()->add_output()->set_name("y2");
  {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    ASSERT_TRUE(m.SerializeToOstream(&f));
  }
  const OnnxModel om = import_onnx(file);
  fs::remove(file);
  ASSERT_EQ(om.graph.outputs().size(), 2u);
  EXPECT_NE(om.graph.outputs()[0], om.graph.outputs()[1]);
  const kernels::Tensor x = kernels::random_tensor(g.layer(0).out, 2, 0);
  const std::vector<kernels::Tensor> y =
      kernels::run_graph_outputs(om.graph, {x}, kernels::model_weights(om.graph, 0));
  EXPECT_EQ(y[0].values(), y[1].values());
}

} // namespace
} // namespace brickdl
