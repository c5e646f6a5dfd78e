// Import of the mobile and modern ops (issue 32): HardSwish, torch's HardSigmoid, Gelu and
// torch's Erf-GELU (one gelu layer), Sub and Div by constants (a batch_norm) and of two
// computed tensors of one shape (sub, div), and the squeeze-excitation Mul of (N, C, H, W) by
// (N, C, 1, 1) either way round (channel_mul); their refusals; and the export of each read back
// to the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/onnx.h"
#include "kernels/reference.h"
#include "kernels/weights.h"
#include "tests/onnx/onnx_test_model.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;
using onnx_test::Model;

std::vector<std::string> ops_of(const Graph& g) {
  std::vector<std::string> v;
  for (const Layer& l : g.layers())
    if (l.op != OpKind::kInput)
      v.emplace_back(op_name(l.op));
  return v;
}

kernels::Tensor run(const OnnxModel& m, const kernels::Tensor& x) {
  return kernels::run_graph(m.graph, x, kernels::model_weights(m.graph, 1));
}

std::string error_of(const Model& m) {
  std::string error;
  m.import(&error);
  return error;
}

void string_attr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

void float_attr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

TEST(OnnxActivations, HardSwishHardSigmoidAndGelu) {
  Model m({1, 2, 3, 3}, 20);
  m.node("HardSwish", {"x"}, {"a"});
  onnx::NodeProto* hs = m.node("HardSigmoid", {"a"}, {"b"});
  float_attr(hs, "alpha", 1.0f / 6.0f);
  float_attr(hs, "beta", 0.5f);
  m.node("Gelu", {"b"}, {"y"});
  const OnnxModel out = m.import();
  EXPECT_EQ(ops_of(out.graph), (std::vector<std::string>{"hard_swish", "hard_sigmoid", "gelu"}));
  const kernels::Tensor x = kernels::random_tensor(out.graph.input_shape(), 1, 0);
  EXPECT_EQ(run(out, x).values(),
            kernels::gelu(kernels::hard_sigmoid(kernels::hard_swish(x))).values());
}

TEST(OnnxActivations, OtherHardSigmoidsAndTanhGeluAreRefused) {
  Model onnx_default({1, 2, 3, 3}, 17); // alpha 0.2
  onnx_default.node("HardSigmoid", {"x"}, {"y"});
  EXPECT_NE(error_of(onnx_default)
                .find("alpha 0.2 and beta 0.5: brickdl's hard_sigmoid is "
                      "torch's (alpha 1/6, beta 0.5)"),
            std::string::npos)
      << error_of(onnx_default);
  Model tanh({1, 2, 3, 3}, 20);
  string_attr(tanh.node("Gelu", {"x"}, {"y"}), "approximate", "tanh");
  EXPECT_NE(error_of(tanh).find("approximate 'tanh' is not supported"), std::string::npos)
      << error_of(tanh);
}

// nn.GELU as torch's TorchScript exporter writes it: (x · (erf(x / √2) + 1)) · 0.5.
TEST(OnnxActivations, ErfGeluIsOneGeluLayer) {
  Model m({1, 2, 3, 3}, 17);
  m.node("Relu", {"x"}, {"r"});
  m.node("Div", {"r", m.floats("sqrt2", {}, {1.4142135f})}, {"d"});
  m.node("Erf", {"d"}, {"e"});
  m.node("Add", {"e", m.floats("one", {}, {1.0f})}, {"p"});
  m.node("Mul", {"r", "p"}, {"q"});
  m.node("Mul", {"q", m.floats("half", {}, {0.5f})}, {"y"});
  const OnnxModel out = m.import();
  EXPECT_EQ(ops_of(out.graph), (std::vector<std::string>{"relu", "gelu"}));
  // Read by something else too, the chain is not GELU's: its Erf is refused.
  Model other({1, 2, 3, 3}, 17);
  other.node("Div", {"x", other.floats("sqrt2", {}, {1.4142135f})}, {"d"});
  other.node("Erf", {"d"}, {"e"});
  other.node("Add", {"e", other.floats("one", {}, {1.0f})}, {"p"});
  other.node("Mul", {"x", "p"}, {"q"});
  other.node("Mul", {"q", other.floats("half", {}, {0.5f})}, {"h"});
  other.node("Add", {"h", "e"}, {"y"});
  EXPECT_NE(error_of(other).find("(Erf): op 'Erf' is not supported"), std::string::npos)
      << error_of(other);
}

TEST(OnnxActivations, SubAndDivByConstantsAreAffine) {
  Model m({1, 2, 2, 2}, 17);
  m.node("Sub", {"x", m.floats("c", {2, 1, 1}, {1, -2})}, {"a"}); // x − c
  m.node("Sub", {m.floats("k", {}, {10}), "a"}, {"b"});           // 10 − a
  m.node("Div", {"b", m.floats("d", {}, {4})}, {"y"});            // b / 4
  const OnnxModel out = m.import();
  const kernels::Tensor x = kernels::random_tensor(out.graph.input_shape(), 2, 0);
  const kernels::Tensor y = run(out, x);
  for (int c = 0; c < 2; ++c)
    for (int p = 0; p < 4; ++p)
      EXPECT_FLOAT_EQ(y.at(0, c, 0, p / 2, p % 2),
                      (10 - (x.at(0, c, 0, p / 2, p % 2) - (c == 0 ? 1.0f : -2.0f))) / 4);
  Model inverse({1, 2, 2, 2}, 17);
  inverse.node("Div", {inverse.floats("k", {}, {1}), "x"}, {"y"});
  EXPECT_NE(error_of(inverse).find("divides a constant by a computed tensor"), std::string::npos)
      << error_of(inverse);
}

// Sub and Div of two computed tensors of one shape: x − relu(x) and x / sigmoid(x), each one
// layer; a pixel-wise operand of another shape is refused naming both shapes.
TEST(OnnxActivations, SubAndDivOfTwoComputedTensors) {
  for (const char* op : {"Sub", "Div"}) {
    Model m({2, 3, 4, 5}, 17);
    m.node(std::string(op) == "Sub" ? "Relu" : "Sigmoid", {"x"}, {"r"});
    m.node(op, {"x", "r"}, {"y"});
    const OnnxModel out = m.import();
    const std::string name = std::string(op) == "Sub" ? "sub" : "div";
    ASSERT_EQ(ops_of(out.graph),
              (std::vector<std::string>{std::string(op) == "Sub" ? "relu" : "sigmoid", name}));
    const kernels::Tensor x = kernels::random_tensor(out.graph.input_shape(), 5, 0);
    const kernels::Tensor y = run(out, x);
    ASSERT_EQ(y.numel(), x.numel());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float v = x.data()[i];
      const float want = name == "sub" ? v - std::max(v, 0.0f) : v / (1.0f / (1.0f + std::exp(-v)));
      EXPECT_NEAR(y.data()[i], want, 1e-6f * (1 + std::fabs(want))) << op << " " << i;
    }
  }
  Model two({2, 3, 4, 4}, 17); // 3 channels against 2: no broadcast
  two.node("Conv", {"x", two.floats("w", {2, 3, 1, 1}, {1, 1, 1, 1, 1, 1})}, {"p"});
  two.node("Sub", {"x", "p"}, {"y"});
  EXPECT_NE(error_of(two).find("inputs of shapes [2, 3, 4, 4] and [2, 2, 4, 4] must be equal, or "
                               "of one rank with extent 1 on the axes where they differ"),
            std::string::npos)
      << error_of(two);
}

// Two computed tensors broadcast as numpy does: a per-pixel map (N, 1, H, W) and a per-channel
// vector (N, C, 1, 1) on either side of Add, Sub, Mul and Div (Mul by the vector is channel_mul).
TEST(OnnxActivations, ComputedOperandsBroadcast) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    for (bool pixel : {true, false})
      for (bool small_first : {false, true}) {
        SCOPED_TRACE(std::string(op) + (pixel ? " pixel" : " vector") +
                     (small_first ? " first" : " second"));
        Model m({2, 3, 4, 4}, 17);
        if (pixel) { // sigmoid(conv 3 -> 1) + 1: in [1, 2], a safe divisor
          m.node("Conv", {"x", m.floats("w", {1, 3, 1, 1}, {0.5f, -1, 1})}, {"c"});
        } else {
          m.node("GlobalAveragePool", {"x"}, {"c"});
        }
        m.node("Sigmoid", {"c"}, {"g"});
        m.node("Add", {"g", m.floats("one", {1}, {1})}, {"s"});
        m.node(op,
               small_first ? std::vector<std::string>{"s", "x"}
                           : std::vector<std::string>{"x", "s"},
               {"y"});
        const OnnxModel out = m.import();
        const kernels::Tensor x = kernels::random_tensor(out.graph.input_shape(), 3, 0);
        const kernels::Tensor y = run(out, x);
        kernels::Tensor c = pixel ? x : kernels::global_avg_pool(x);
        if (pixel) { // the 1-channel conv by hand
          TensorShape ps = x.shape();
          ps.c = 1;
          c = kernels::Tensor(ps);
          for (int64_t n = 0; n < ps.n; ++n)
            for (int64_t h = 0; h < ps.h; ++h)
              for (int64_t w = 0; w < ps.w; ++w)
                c.at(n, 0, 0, h, w) =
                    0.5f * x.at(n, 0, 0, h, w) - x.at(n, 1, 0, h, w) + x.at(n, 2, 0, h, w);
        }
        const kernels::Tensor sv = kernels::sigmoid(c);
        ASSERT_EQ(y.shape(), x.shape());
        for (int64_t n = 0; n < 2; ++n)
          for (int64_t ch = 0; ch < 3; ++ch)
            for (int64_t h = 0; h < 4; ++h)
              for (int64_t w = 0; w < 4; ++w) {
                const double a = x.at(n, ch, 0, h, w);
                const double b = 1.0 + sv.at(n, pixel ? 0 : ch, 0, pixel ? h : 0, pixel ? w : 0);
                const double u = small_first ? b : a, v = small_first ? a : b;
                const std::string o = op;
                const double want = o == "Add"   ? u + v
                                    : o == "Sub" ? u - v
                                    : o == "Mul" ? u * v
                                                 : u / v;
                EXPECT_NEAR(y.at(n, ch, 0, h, w), want, 1e-5 * (1 + std::fabs(want)));
              }
      }
}

// x · sigmoid(fc(pool(x))), the vector on either side of the Mul.
TEST(OnnxActivations, SqueezeExcitationMulIsChannelMul) {
  for (bool vector_first : {false, true}) {
    Model m({2, 3, 4, 4}, 18);
    m.node("GlobalAveragePool", {"x"}, {"p"});
    m.node("Sigmoid", {"p"}, {"s"});
    m.node("Mul",
           vector_first ? std::vector<std::string>{"s", "x"} : std::vector<std::string>{"x", "s"},
           {"y"});
    const OnnxModel out = m.import();
    ASSERT_EQ(ops_of(out.graph),
              (std::vector<std::string>{"global_avg_pool", "sigmoid", "channel_mul"}));
    const kernels::Tensor x = kernels::random_tensor(out.graph.input_shape(), 3, 0);
    const kernels::Tensor y = run(out, x);
    const kernels::Tensor s = kernels::sigmoid(kernels::global_avg_pool(x));
    EXPECT_EQ(y.values(), kernels::channel_mul(x, s).values());
  }
  Model pixel({2, 3, 4, 4}, 18); // one value per pixel, (N, 1, H, W): a broadcasting mul
  pixel.node("Conv", {"x", pixel.floats("w", {1, 3, 1, 1}, {1, 1, 1})}, {"p"});
  pixel.node("Mul", {"x", "p"}, {"y"});
  EXPECT_EQ(ops_of(pixel.import().graph), (std::vector<std::string>{"conv", "mul"}));
}

TEST(OnnxActivations, ExportReadsBackToTheSameValues) {
  GraphBuilder b("acts", TensorShape{2, 4, 1, 5, 5, 2});
  const int hs = b.hard_swish(b.conv2d(b.input(), 4, 3, 1, 1, 1, 1, true));
  const int gate = b.hard_sigmoid(b.conv2d(b.global_avg_pool(hs), 4, 1, 1, 0, 1, 1, true));
  b.gelu(b.channel_mul(hs, gate));
  const Graph g = b.build();
  const fs::path p =
      fs::temp_directory_path() / ("brickdl_acts_" + std::to_string(::getpid()) + ".onnx");
  export_onnx(g, kernels::unfused_params(fuse_for_inference(g), 1), p.string());
  const OnnxModel back = import_onnx(p.string());
  fs::remove(p);
  EXPECT_EQ(ops_of(back.graph), ops_of(g));
  const kernels::Tensor x = kernels::random_tensor(g.input_shape(), 2, 0);
  const kernels::Tensor want = kernels::run_graph(g, x, kernels::make_weights(g, 1));
  const kernels::Tensor got = run(back, x);
  ASSERT_EQ(got.shape(), want.shape());
  // The gelu goes out as torch's Erf chain and comes back as one gelu: the same float ops
  // (x / √2 then erf) but the chain divides where the op multiplies by 1/√2.
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(got.data()[i], want.data()[i], 1e-6f * (1 + std::fabs(want.data()[i]))) << i;
}

} // namespace
} // namespace brickdl
