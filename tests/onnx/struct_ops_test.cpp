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
#include "core/onnx/opset.h"
#include "core/onnx/patterns.h"
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

// ---- the importer's plan of each channel-structure node ------------------------------------

onnx::NodeProto make_node(const std::string& op, int inputs, int outputs,
                          const std::string& domain = "") {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_domain(domain);
  for (int i = 0; i < inputs; ++i)
    n.add_input("in" + std::to_string(i));
  for (int i = 0; i < outputs; ++i)
    n.add_output("out" + std::to_string(i));
  return n;
}

void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v)
    a->add_ints(x);
}

void set_attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

OnnxTensor ints(const std::vector<int64_t>& v) {
  return OnnxTensor{{static_cast<int64_t>(v.size())}, std::vector<float>(v.begin(), v.end())};
}

// The plan's slices as [begin, end) pairs, an alias as {-1, -1}.
std::vector<std::pair<int64_t, int64_t>> slices(const onnx_detail::ChannelOpPlan& p) {
  std::vector<std::pair<int64_t, int64_t>> v;
  for (const auto& o : p.outputs)
    v.emplace_back(o.alias ? std::pair<int64_t, int64_t>{-1, -1}
                           : std::pair{o.layer.slice_begin, o.layer.slice_end});
  return v;
}

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

TEST(OnnxChannelPlan, SliceOnChannels) {
  const std::vector<int64_t> dims{1, 8, 4, 4};
  onnx_detail::ChannelOpPlan plan;
  const OnnxTensor s = ints({-3}), e = ints({INT64_MAX}), a = ints({1}), one = ints({1});
  onnx::NodeProto n = make_node("Slice", 5, 1);
  ASSERT_TRUE(onnx_detail::is_channel_op(n));
  EXPECT_EQ(onnx_detail::plan_channel_op(n, 13, dims, {nullptr, &s, &e, &a, &one}, &plan), "");
  EXPECT_EQ(slices(plan), (Ranges{{5, 8}}));
  EXPECT_EQ(plan.outputs[0].layer.op, OpKind::kSlice);
  // Every channel, the full H range on axis 2 alongside: the input itself.
  const OnnxTensor s2 = ints({0, 0}), e2 = ints({8, 100}), a2 = ints({1, -2});
  const onnx::NodeProto n4 = make_node("Slice", 4, 1); // no steps
  EXPECT_EQ(onnx_detail::plan_channel_op(n4, 13, dims, {nullptr, &s2, &e2, &a2}, &plan), "");
  EXPECT_EQ(slices(plan), (Ranges{{-1, -1}}));
}

TEST(OnnxChannelPlan, SliceRefusals) {
  const std::vector<int64_t> dims{1, 8, 4, 4};
  onnx_detail::ChannelOpPlan plan;
  const onnx::NodeProto n = make_node("Slice", 5, 1), n4 = make_node("Slice", 4, 1);
  const OnnxTensor s = ints({0}), e = ints({2}), h = ints({2}), c = ints({1}), two = ints({2});
  EXPECT_NE(onnx_detail::plan_channel_op(n4, 13, dims, {nullptr, &s, &e, &h}, &plan)
                .find("slices axis 2 ([0, 2) of 4); brickdl slices channels (axis 1) only"),
            std::string::npos);
  EXPECT_NE(
      onnx_detail::plan_channel_op(n, 13, dims, {nullptr, &s, &e, &c, &two}, &plan).find("step 2"),
      std::string::npos);
  EXPECT_NE(onnx_detail::plan_channel_op(n, 13, dims, {nullptr, nullptr, &e, &c, nullptr}, &plan)
                .find("constant"),
            std::string::npos);
  const OnnxTensor late = ints({9});
  EXPECT_NE(onnx_detail::plan_channel_op(n4, 13, dims, {nullptr, &late, &e, &c}, &plan)
                .find("keeps no channel"),
            std::string::npos);
}

TEST(OnnxChannelPlan, SplitInEveryOpsetForm) {
  const std::vector<int64_t> dims{1, 8, 4, 4};
  onnx_detail::ChannelOpPlan plan;
  onnx::NodeProto v13 = make_node("Split", 2, 2); // opset 13: sizes as an input
  set_attr(v13, "axis", int64_t{1});
  const OnnxTensor sizes = ints({3, 5});
  EXPECT_EQ(onnx_detail::plan_channel_op(v13, 13, dims, {nullptr, &sizes}, &plan), "");
  EXPECT_EQ(slices(plan), (Ranges{{0, 3}, {3, 8}}));
  onnx::NodeProto v11 = make_node("Split", 1, 2); // opset 11: an attribute
  set_attr(v11, "axis", int64_t{-3});
  set_attr(v11, "split", std::vector<int64_t>{6, 2});
  EXPECT_EQ(onnx_detail::plan_channel_op(v11, 11, dims, {nullptr}, &plan), "");
  EXPECT_EQ(slices(plan), (Ranges{{0, 6}, {6, 8}}));
  onnx::NodeProto v18 = make_node("Split", 1, 3); // opset 18: num_outputs
  set_attr(v18, "axis", int64_t{1});
  set_attr(v18, "num_outputs", int64_t{3});
  EXPECT_EQ(onnx_detail::plan_channel_op(v18, 18, dims, {nullptr}, &plan), "");
  EXPECT_EQ(slices(plan), (Ranges{{0, 3}, {3, 6}, {6, 8}}));
  onnx::NodeProto equal = make_node("Split", 1, 2);
  set_attr(equal, "axis", int64_t{1});
  EXPECT_EQ(onnx_detail::plan_channel_op(equal, 13, dims, {nullptr}, &plan), "");
  EXPECT_EQ(slices(plan), (Ranges{{0, 4}, {4, 8}}));
  onnx::NodeProto h = make_node("Split", 1, 2); // axis 0 by default: the batch
  EXPECT_NE(onnx_detail::plan_channel_op(h, 13, dims, {nullptr}, &plan)
                .find("splits axis 0; brickdl splits channels (axis 1) only"),
            std::string::npos);
}

TEST(OnnxChannelPlan, TransposesLeftByThePatternsAreRefused) {
  onnx::NodeProto t = make_node("Transpose", 1, 1);
  set_attr(t, "perm", std::vector<int64_t>{0, 1, 3, 2});
  ASSERT_TRUE(onnx_detail::is_channel_op(t));
  onnx_detail::ChannelOpPlan plan;
  const std::string why = onnx_detail::plan_channel_op(t, 13, {1, 3, 4, 4}, {nullptr}, &plan);
  EXPECT_NE(why.find("transposes (perm [0, 1, 3, 2]); brickdl keeps channels on axis 1"),
            std::string::npos)
      << why;
  EXPECT_TRUE(plan.outputs.empty());
}

TEST(OnnxChannelPlan, ConcatShuffleAndLayerNorm) {
  const std::vector<int64_t> dims{1, 4, 3, 3};
  onnx_detail::ChannelOpPlan plan;
  const onnx::NodeProto cat = make_node("Concat", 1, 1);
  ASSERT_TRUE(onnx_detail::is_channel_op(cat));
  EXPECT_FALSE(onnx_detail::is_channel_op(make_node("Concat", 2, 1)));
  EXPECT_EQ(onnx_detail::plan_channel_op(cat, 13, dims, {nullptr}, &plan), "");
  EXPECT_EQ(slices(plan), (Ranges{{-1, -1}}));

  onnx::NodeProto sh = make_node("ChannelShuffle", 1, 1, onnx_detail::kBrickdlDomain);
  set_attr(sh, "groups", int64_t{2});
  set_attr(sh, "shape", dims);
  EXPECT_EQ(onnx_detail::plan_channel_op(sh, 13, dims, {nullptr}, &plan), "");
  EXPECT_EQ(plan.outputs[0].layer.op, OpKind::kChannelShuffle);
  EXPECT_EQ(plan.outputs[0].layer.groups, 2);
  EXPECT_NE(onnx_detail::plan_channel_op(sh, 13, {1, 2, 6, 3}, {nullptr}, &plan)
                .find("do not keep the input's dims"),
            std::string::npos);

  onnx::NodeProto ln = make_node("ChannelLayerNorm", 3, 1, onnx_detail::kBrickdlDomain);
  auto* eps = ln.add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(1e-6f);
  const OnnxTensor g{{4}, {1, 2, 3, 4}}, b{{4}, {0, 1, 0, 1}}, bad{{3}, {1, 2, 3}};
  EXPECT_EQ(onnx_detail::plan_channel_op(ln, 17, dims, {nullptr, &g, &b}, &plan), "");
  EXPECT_EQ(plan.outputs[0].layer.op, OpKind::kLayerNorm);
  EXPECT_EQ(plan.outputs[0].layer.epsilon, 1e-6f);
  EXPECT_EQ(plan.params.weight, g.values);
  EXPECT_EQ(plan.params.bias, b.values);
  EXPECT_NE(onnx_detail::plan_channel_op(ln, 17, dims, {nullptr, &bad, &b}, &plan)
                .find("one value per channel (4 channels)"),
            std::string::npos);
}

} // namespace
} // namespace brickdl
