// The importer on current opsets and files (issue 32): opsets up to kOnnxMaxOpset, weights in
// external data beside the model, shape arithmetic folded where it feeds a size (integer Div,
// Slice of a Shape), ReduceMean / ReduceMax over the spatial axes in both opset forms, and
// opset 18/19's Resize attributes; each with its refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "core/error.h"
#include "core/onnx.h"
#include "kernels/reference.h"
#include "kernels/weights.h"
#include "tests/onnx/onnx_test_model.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;
using onnx_test::Model;

kernels::Tensor run(const OnnxModel& m, const kernels::Tensor& x) {
  return kernels::run_graph(m.graph, x, kernels::model_weights(m.graph, 1));
}

std::string error_of(const Model& m) {
  std::string error;
  m.import(&error);
  return error;
}

TEST(OnnxOpsets, EveryOpsetUpToTheNewestIsRead) {
  for (int64_t opset : {kOnnxMinOpset, int64_t{17}, int64_t{18}, int64_t{20}, kOnnxMaxOpset}) {
    Model m({1, 2, 3, 3}, opset);
    m.node("Relu", {"x"}, {"y"});
    EXPECT_EQ(m.import().opset, opset);
  }
  Model newer({1, 2, 3, 3}, kOnnxMaxOpset + 1);
  newer.node("Relu", {"x"}, {"y"});
  EXPECT_NE(error_of(newer).find(fmt::format("opset {} is not supported; brickdl reads opsets "
                                             "11 to {}",
                                             kOnnxMaxOpset + 1, kOnnxMaxOpset)),
            std::string::npos)
      << error_of(newer);
}

// ---- ReduceMean / ReduceMax -----------------------------------------------------------------

// y = reduce(x) over H and W, keepdims or not, axes as an attribute (opset 13) or an input (18).
Model reduce_model(const std::string& op, int64_t opset, int64_t keepdims,
                   const std::vector<int64_t>& axes) {
  Model m({2, 3, 4, 5}, opset);
  onnx::NodeProto* n =
      opset >= 18 ? m.node(op, {"x", m.ints("axes", axes)}, {"y"}) : m.node(op, {"x"}, {"y"});
  if (opset < 18)
    Model::attr(n, "axes", axes);
  Model::attr(n, "keepdims", keepdims);
  return m;
}

TEST(OnnxOpsets, ReduceOverTheSpatialAxesIsAGlobalPool) {
  for (const std::string op : {"ReduceMean", "ReduceMax"})
    for (int64_t opset : {13, 18})
      for (int64_t keep : {0, 1}) {
        const OnnxModel m = reduce_model(op, opset, keep, {-1, 2}).import();
        EXPECT_EQ(m.output_dims,
                  keep ? (std::vector<int64_t>{2, 3, 1, 1}) : (std::vector<int64_t>{2, 3}))
            << op << " opset " << opset;
        const kernels::Tensor x = kernels::random_tensor(m.graph.input_shape(), 7, 0);
        const kernels::Tensor y = run(m, x);
        for (int n = 0; n < 2; ++n)
          for (int c = 0; c < 3; ++c) {
            double sum = 0, max = -1e30;
            for (int h = 0; h < 4; ++h)
              for (int w = 0; w < 5; ++w) {
                sum += x.at(n, c, 0, h, w);
                max = std::max(max, double{x.at(n, c, 0, h, w)});
              }
            const double want = op == "ReduceMax" ? max : sum / 20;
            EXPECT_NEAR(y.at(n, c, 0, 0, 0), want, 1e-6) << op << " opset " << opset;
          }
      }
}

TEST(OnnxOpsets, ReduceOverOtherAxesIsRefused) {
  const std::string e = error_of(reduce_model("ReduceMean", 18, 1, {1}));
  EXPECT_NE(e.find("node 'y' (ReduceMean): reduces axes [1]; brickdl reduces every spatial axis "
                   "([2, 3])"),
            std::string::npos)
      << e;
  Model all({2, 3, 4, 5}, 18);
  all.node("ReduceMax", {"x"}, {"y"}); // no axes: every axis, N and C too
  EXPECT_NE(error_of(all).find("reduces axes []"), std::string::npos) << error_of(all);
}

TEST(OnnxOpsets, ReduceWithNoAxesAndNoopIsItsInput) {
  Model m({2, 3, 4, 5}, 18);
  Model::attr(m.node("ReduceMean", {"x"}, {"r"}), "noop_with_empty_axes", int64_t{1});
  m.node("Relu", {"r"}, {"y"});
  const OnnxModel out = m.import();
  EXPECT_EQ(out.graph.size(), 2); // the input and the relu
}

// ---- shape arithmetic ----------------------------------------------------------------------

// torch's x.chunk(2, 1) of an odd channel count: split sizes (C + 1) / 2 in int64.
TEST(OnnxOpsets, IntegerDivTruncatesWhereItFeedsASize) {
  Model m({1, 5, 2, 2}, 18);
  m.node("Shape", {"x"}, {"s"});
  m.node("Gather", {"s", m.ints("one", {1})}, {"c"});
  m.node("Add", {"c", m.ints("one_b", {1})}, {"c1"});
  m.node("Div", {"c1", m.ints("two", {2})}, {"half"}); // 6 / 2 = 3
  m.node("Sub", {"c", "half"}, {"rest"});              // 2
  m.node("Concat", {"half", "rest"}, {"sizes"});
  Model::attr(m.node("Concat", {"sizes"}, {"sizes1"}), "axis", int64_t{0});
  onnx::NodeProto* split = m.node("Split", {"x", "sizes1"}, {"a", "b"});
  Model::attr(split, "axis", int64_t{1});
  Model::attr(m.node("Concat", {"b", "a"}, {"y"}), "axis", int64_t{1});
  const OnnxModel out = m.import();
  EXPECT_EQ(out.graph.layer(1).slice_end - out.graph.layer(1).slice_begin, 3);
  EXPECT_EQ(out.graph.layer(2).slice_end - out.graph.layer(2).slice_begin, 2);

  Model odd({1, 5, 2, 2}, 18);
  odd.node("Shape", {"x"}, {"s"});
  odd.node("Gather", {"s", odd.ints("one", {1})}, {"c"});
  odd.node("Div", {"c", odd.ints("two", {2})}, {"half"}); // 5 / 2 = 2 in int64
  odd.node("Concat", {"half", odd.ints("three", {3})}, {"sizes"});
  Model::attr(odd.node("Split", {"x", "sizes"}, {"a", "b"}), "axis", int64_t{1});
  Model::attr(odd.node("Concat", {"b", "a"}, {"y"}), "axis", int64_t{1});
  const OnnxModel o = odd.import();
  EXPECT_EQ(o.graph.layer(1).slice_end - o.graph.layer(1).slice_begin, 2);
}

// F.interpolate(size=x.shape[-2:]) of a smaller map: Shape → Slice → Concat → Resize sizes.
TEST(OnnxOpsets, ASliceOfAShapeFeedsResize) {
  Model m({1, 2, 3, 3}, 18);
  m.node("MaxPool", {"x"}, {"p"});
  Model::attr(m.proto().mutable_graph()->mutable_node(0), "kernel_shape",
              std::vector<int64_t>{1, 1});
  m.node("Shape", {"x"}, {"s"});
  m.node("Slice", {"s", m.ints("b", {-2}), m.ints("e", {INT64_MAX})}, {"hw"});
  m.node("Mul", {"hw", m.ints("two", {2})}, {"hw2"});
  m.node("Concat", {m.ints("nc", {1, 2}), "hw2"}, {"sizes"});
  Model::attr(m.proto().mutable_graph()->mutable_node(4), "axis", int64_t{0});
  m.node("Resize", {"p", "", "", "sizes"}, {"y"});
  const OnnxModel out = m.import();
  EXPECT_EQ(out.output_dims, (std::vector<int64_t>{1, 2, 6, 6}));
}

// ---- Resize at opsets 18 and 19 -------------------------------------------------------------

TEST(OnnxOpsets, ResizeReadsAxesAndTheAspectRatioPolicy) {
  for (const std::string policy : {"stretch", "not_larger", "not_smaller"}) {
    Model m({1, 2, 3, 3}, 19);
    onnx::NodeProto* r = m.node("Resize", {"x", "", "", m.ints("sizes", {6, 6})}, {"y"});
    Model::attr(r, "axes", std::vector<int64_t>{2, 3});
    auto* a = r->add_attribute();
    a->set_name("keep_aspect_ratio_policy");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(policy);
    Model::attr(r, "antialias", int64_t{1}); // filters only when downscaling
    const OnnxModel out = m.import();
    EXPECT_EQ(out.output_dims, (std::vector<int64_t>{1, 2, 6, 6})) << policy;
    EXPECT_EQ(out.graph.layer(1).upsample_scale, 2) << policy;
  }
  // not_larger of sizes 6 x 9 on 3 x 3 is one factor 2 on both axes: ONNX's output is 6 x 6.
  Model m({1, 2, 3, 3}, 18);
  onnx::NodeProto* r = m.node("Resize", {"x", "", "", m.ints("sizes", {6, 9})}, {"y"});
  Model::attr(r, "axes", std::vector<int64_t>{2, 3});
  auto* a = r->add_attribute();
  a->set_name("keep_aspect_ratio_policy");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("not_larger");
  EXPECT_EQ(m.import().output_dims, (std::vector<int64_t>{1, 2, 6, 6}));
}

TEST(OnnxOpsets, HalfPixelSymmetricIsHalfPixelAtAnIntegerFactor) {
  Model sym({1, 2, 3, 3}, 19), half({1, 2, 3, 3}, 19);
  for (auto [m, mode] : {std::pair{&sym, "half_pixel_symmetric"}, std::pair{&half, "half_pixel"}}) {
    onnx::NodeProto* r = m->node("Resize", {"x", "", m->floats("sc", {4}, {1, 1, 2, 2})}, {"y"});
    auto* a = r->add_attribute();
    a->set_name("coordinate_transformation_mode");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(mode);
    auto* b = r->add_attribute();
    b->set_name("mode");
    b->set_type(onnx::AttributeProto::STRING);
    b->set_s("linear");
  }
  const OnnxModel s = sym.import(), h = half.import();
  const kernels::Tensor x = kernels::random_tensor(s.graph.input_shape(), 3, 0);
  EXPECT_EQ(run(s, x).values(), run(h, x).values());
}

// ---- external data -------------------------------------------------------------------------

// A model whose conv weight lives in `data_file` at `offset` (the bytes written there unless
// `write` is false), imported from a folder of its own.
class ExternalData : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("brickdl_external_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Conv 2 → 1 channels, 1×1, weight [1, 2, 1, 1] = {w0, w1} stored externally.
  std::string import(const std::string& location, int64_t offset, int64_t length, bool write_data,
                     std::string* error, OnnxModel* out = nullptr) {
    Model m({1, 2, 2, 2}, 20);
    m.node("Conv", {"x", "w"}, {"y"});
    auto* w = m.proto().mutable_graph()->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 2, 1, 1})
      w->add_dims(d);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    const auto entry = [&](const std::string& k, const std::string& v) {
      auto* e = w->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    entry("location", location);
    if (offset >= 0)
      entry("offset", std::to_string(offset));
    if (length >= 0)
      entry("length", std::to_string(length));
    if (write_data) {
      std::ofstream f(dir_ / "model.onnx.data", std::ios::binary);
      const std::string pad(16, 'x');
      const float v[2] = {0.5f, -2.0f};
      f.write(pad.data(), 16);
      f.write(reinterpret_cast<const char*>(v), sizeof v);
    }
    const fs::path p = dir_ / "model.onnx";
    {
      std::ofstream f(p, std::ios::binary);
      m.proto().SerializeToOstream(&f);
    }
    try {
      const OnnxModel got = import_onnx(p.string());
      if (out)
        *out = got;
    } catch (const UserError& e) {
      *error = e.what();
    }
    return p.string();
  }
  fs::path dir_;
};

TEST_F(ExternalData, WeightsBesideTheModelAreRead) {
  std::string error;
  OnnxModel m;
  import("model.onnx.data", 16, 8, true, &error, &m);
  ASSERT_EQ(error, "");
  kernels::Tensor x(m.graph.input_shape());
  for (int i = 0; i < 8; ++i)
    x.values()[static_cast<size_t>(i)] = static_cast<float>(i);
  const kernels::Tensor y = run(m, x);
  for (int p = 0; p < 4; ++p) // y = 0.5·x[c0] − 2·x[c1]
    EXPECT_FLOAT_EQ(y.values()[static_cast<size_t>(p)], 0.5f * p - 2.0f * (4 + p));
}

TEST_F(ExternalData, BadLocationsAndSizesAreRefusedByName) {
  std::string error;
  const std::string model = import("missing.data", 16, 8, true, &error);
  EXPECT_NE(error.find(model + ": initializer 'w': cannot open its external data file"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("missing.data"), std::string::npos) << error;
  error.clear();
  import("model.onnx.data", 20, 8, true, &error);
  EXPECT_NE(error.find("has 24 bytes; the tensor's are [20, 28)"), std::string::npos) << error;
  error.clear();
  import("../model.onnx.data", 16, 8, true, &error);
  EXPECT_NE(error.find("external data location '../model.onnx.data' must be a path inside the "
                       "model's folder"),
            std::string::npos)
      << error;
  error.clear();
  import("/etc/passwd", 0, 8, true, &error);
  EXPECT_NE(error.find("must be a path inside the model's folder"), std::string::npos) << error;
  error.clear();
  import("model.onnx.data", 16, 4, true, &error); // one float for two
  EXPECT_NE(error.find("initializer 'w'"), std::string::npos) << error;
  EXPECT_NE(error.find("raw data of 4 bytes for 2 values"), std::string::npos) << error;
  error.clear();
  import("model.onnx.data", 16, -1, true, &error); // no length: to the end of the file
  EXPECT_EQ(error, "");
}

} // namespace
} // namespace brickdl
