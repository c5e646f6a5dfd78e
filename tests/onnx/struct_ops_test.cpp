// ONNX export of the structural ops (slice, channel_shuffle, layer_norm): the nodes torch's
// exporter writes for them, with their attributes, initializers and opset.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "core/graph_builder.h"
#include "core/onnx.h"
#include "core/onnx/channel_ops.h"
#include "kernels/weights.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

onnx::ModelProto export_and_read(const Graph& g, const std::string& stem) {
  const fs::path path =
      fs::temp_directory_path() / (stem + "_" + std::to_string(::getpid()) + ".onnx");
  export_onnx(g, kernels::unfused_params(fuse_for_inference(g), 1), path.string());
  onnx::ModelProto m;
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(m.ParseFromIstream(&f));
  fs::remove(path);
  return m;
}

const onnx::TensorProto* initializer(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name)
      return &t;
  return nullptr;
}

std::vector<int64_t> ints_of(const onnx::TensorProto* t) {
  EXPECT_NE(t, nullptr);
  return t ? std::vector<int64_t>(t->int64_data().begin(), t->int64_data().end())
           : std::vector<int64_t>{};
}

std::vector<int64_t> perm_of(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute())
    if (a.name() == "perm")
      return {a.ints().begin(), a.ints().end()};
  return {};
}

TEST(OnnxStructOps, ExportWritesSliceShuffleAndLayerNorm) {
  GraphBuilder b("struct", TensorShape{2, 12, 1, 5, 6, 2});
  const int s = b.slice(b.input(), 2, 10, "s");
  const int sh = b.channel_shuffle(s, 4, "sh");
  b.layer_norm(sh, 1e-6f, "ln");
  const onnx::ModelProto m = export_and_read(b.build(), "struct");
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).version(), 17); // LayerNormalization
  std::vector<std::string> ops;
  for (const auto& n : m.graph().node())
    ops.push_back(n.op_type());
  EXPECT_EQ(ops, (std::vector<std::string>{"Slice", "Reshape", "Transpose", "Reshape", "Transpose",
                                           "LayerNormalization", "Transpose"}));
  const auto& nodes = m.graph().node();
  EXPECT_EQ(ints_of(initializer(m, "s.starts")), (std::vector<int64_t>{2}));
  EXPECT_EQ(ints_of(initializer(m, "s.ends")), (std::vector<int64_t>{10}));
  EXPECT_EQ(ints_of(initializer(m, "s.axes")), (std::vector<int64_t>{1}));
  EXPECT_EQ(ints_of(initializer(m, "sh.split_shape")), (std::vector<int64_t>{2, 4, 2, 5, 6}));
  EXPECT_EQ(perm_of(nodes[2]), (std::vector<int64_t>{0, 2, 1, 3, 4}));
  EXPECT_EQ(ints_of(initializer(m, "sh.shape")), (std::vector<int64_t>{2, 8, 5, 6}));
  EXPECT_EQ(perm_of(nodes[4]), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(perm_of(nodes[6]), (std::vector<int64_t>{0, 3, 1, 2}));
  const onnx::TensorProto* gamma = initializer(m, "ln.gamma");
  ASSERT_NE(gamma, nullptr);
  EXPECT_EQ(gamma->dims_size(), 1);
  EXPECT_EQ(gamma->dims(0), 8);
  EXPECT_EQ(nodes[6].output(0), "ln");
}

TEST(OnnxStructOps, GraphsWithoutLayerNormKeepOpset13) {
  GraphBuilder b("plain", TensorShape{1, 4, 1, 3, 3, 2});
  b.slice(b.input(), 0, 2);
  const onnx::ModelProto m = export_and_read(b.build(), "plain");
  EXPECT_EQ(m.opset_import(0).version(), 13);
}

TEST(OnnxChannelOps, SliceRangesFollowOnnxRules) {
  using onnx_detail::slice_range;
  const auto range = [](int64_t s, int64_t e, int64_t n) {
    const onnx_detail::IndexRange r = slice_range(s, e, n);
    return std::pair{r.begin, r.end};
  };
  EXPECT_EQ(range(2, 5, 8), (std::pair<int64_t, int64_t>{2, 5}));
  EXPECT_EQ(range(-3, -1, 8), (std::pair<int64_t, int64_t>{5, 7}));       // from the end
  EXPECT_EQ(range(0, 1000, 8), (std::pair<int64_t, int64_t>{0, 8}));      // clamped
  EXPECT_EQ(range(-100, 3, 8), (std::pair<int64_t, int64_t>{0, 3}));      // clamped at 0
  EXPECT_EQ(range(4, INT64_MAX, 8), (std::pair<int64_t, int64_t>{4, 8})); // torch's open end
  EXPECT_EQ(range(INT64_MIN, 2, 8), (std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_TRUE(slice_range(5, 5, 8).empty());
  EXPECT_TRUE(slice_range(9, 12, 8).empty());
}

TEST(OnnxChannelOps, SplitSizesOfEveryOpsetForm) {
  using onnx_detail::split_sizes;
  std::string why;
  const std::vector<int64_t> given{2, 6};
  EXPECT_EQ(split_sizes(8, 2, &given, 0, &why), given);
  EXPECT_EQ(split_sizes(8, 2, nullptr, 0, &why), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(split_sizes(8, 3, nullptr, 3, &why), (std::vector<int64_t>{3, 3, 2})); // opset 18
  EXPECT_TRUE(split_sizes(8, 3, nullptr, 0, &why).empty());
  EXPECT_NE(why.find("equal parts"), std::string::npos);
  const std::vector<int64_t> bad{3, 3};
  EXPECT_TRUE(split_sizes(8, 2, &bad, 0, &why).empty());
  EXPECT_NE(why.find("add up to the extent 8"), std::string::npos);
  EXPECT_TRUE(split_sizes(8, 2, nullptr, 4, &why).empty());
  EXPECT_TRUE(split_sizes(2, 3, nullptr, 3, &why).empty());
}

TEST(OnnxChannelOps, PermsAndTheShufflePattern) {
  using onnx_detail::channel_shuffle_groups;
  EXPECT_TRUE(onnx_detail::is_to_channels_last({0, 2, 3, 1}));
  EXPECT_TRUE(onnx_detail::is_to_channels_last({0, 2, 3, 4, 1}));
  EXPECT_TRUE(onnx_detail::is_to_channels_first({0, 3, 1, 2}));
  EXPECT_TRUE(onnx_detail::is_to_channels_first({0, 4, 1, 2, 3}));
  EXPECT_FALSE(onnx_detail::is_to_channels_last({0, 3, 1, 2}));
  EXPECT_FALSE(onnx_detail::is_to_channels_first({0, 2, 3, 1}));
  EXPECT_FALSE(onnx_detail::is_to_channels_last({0, 1, 3, 2}));
  const std::vector<int64_t> in{1, 12, 5, 6};
  EXPECT_EQ(channel_shuffle_groups(in, {1, 3, 4, 5, 6}, {0, 2, 1, 3, 4}, in), 3);
  EXPECT_EQ(channel_shuffle_groups(in, {1, 2, 6, 5, 6}, {0, 2, 1, 3, 4}, in), 2);
  EXPECT_EQ(channel_shuffle_groups(in, {1, 3, 4, 5, 6}, {0, 1, 2, 3, 4}, in), 0); // no swap
  EXPECT_EQ(channel_shuffle_groups(in, {1, 3, 4, 5, 6}, {0, 2, 1, 4, 3}, in), 0);
  EXPECT_EQ(channel_shuffle_groups(in, {1, 3, 5, 5, 6}, {0, 2, 1, 3, 4}, in), 0); // 15 != 12
  EXPECT_EQ(channel_shuffle_groups(in, {1, 3, 4, 6, 5}, {0, 2, 1, 3, 4}, in), 0);
  EXPECT_EQ(channel_shuffle_groups(in, {1, 3, 4, 5, 6}, {0, 2, 1, 3, 4}, {1, 4, 3, 5, 6}), 0);
}

} // namespace
} // namespace brickdl
