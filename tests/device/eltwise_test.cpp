// The elementwise family of the generated kernels (sigmoid, silu, clip, hard_swish,
// hard_sigmoid, gelu, batch-norm's per-channel scale and shift, mul, sub, div; add and the
// activations were there before), as layers and as conv epilogues, and operands
// broadcast per channel, per image or per plane (channel_mul: squeeze-excitation's multiply),
// under the host emulator, against the reference ops on random inputs of several shapes, in
// fp32, tf32 and bf16, padded, memoized and layer by layer; and EfficientNet-B0's MBConv block
// merged (expand 1x1, depthwise 3x3, project 1x1), without and with its SE.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/graph_builder.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/emulator.h"
#include "kernels/validation.h"
#include "tests/device/device_cases.h"
#include "tests/device/emulated_group.h"
#include "tests/device/test_graphs.h"

namespace brickdl::cuda {
namespace {

constexpr uint64_t kSeed = 11;

// The emulated group against both references (test_support::check_emulated): within about
// an ulp of the reference with the kernels' roundings, within the measurers' tolerance of the
// fp32 reference, and with a non-zero output of its own.
void expect_matches(const Graph& g, const Candidate& c, const EmulatorOptions& eo) {
  const std::string what = std::string(dtype_name(g.dtype())) + " " + c.config_str();
  SCOPED_TRACE(what);
  const test_support::EmulatedGroup r = test_support::emulate_group(g, c, eo, kSeed);
  ASSERT_TRUE(r.reference.supported) << r.reference.reason;
  ASSERT_EQ(r.reference.output.values().size(), r.emu.output.size());
  test_support::expect_emulated_ok(g, r, what);
}

void expect_all_strategies(const Graph& g, Group grp, BrickShape b, int threads) {
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized, Strategy::kLayerwise}) {
    EmulatorOptions eo;
    eo.workers = s == Strategy::kMemoized ? 3 : 1;
    expect_matches(g, test_support::make_candidate(grp, s, b, threads), eo);
  }
}

// conv 3x3 → conv 1x1 → op(the 1x1's output, the 3x3's) → conv 1x1 (all with biases): the op in
// the middle of a merged group, between convs. A unary activation there folds into the 1x1
// conv as its epilogue (fuse_for_inference); `standalone` gives the 1x1's output a second reader
// (an add of it after the op), so that the op stays an elementwise layer of its own.
using OpOnConv = std::function<int(GraphBuilder&, int conv, int other)>;

Graph around(const TensorShape& in, DType t, const OpOnConv& op, bool standalone) {
  GraphBuilder b("eltwise", in, t);
  const int x = b.input();
  const int c1 = b.conv2d(x, 16, 3, 1, 1, 1, 1, true, "c1");
  const int c2 = b.conv2d(c1, 16, 1, 1, 0, 1, 1, true, "c2");
  int y = op(b, c2, c1);
  if (standalone)
    y = b.add(y, c2, "keep");
  b.conv2d(y, 8, 1, 1, 0, 1, 1, true, "c3");
  return fuse_for_inference(b.build());
}

void check_op(const OpOnConv& op) {
  for (bool standalone : {false, true})
    for (DType t : {DType::kF32, DType::kTF32, DType::kBF16})
      for (const TensorShape& in : {TensorShape{2, 8, 1, 9, 10, 2}, TensorShape{1, 16, 1, 13, 7, 2},
                                    TensorShape{3, 8, 1, 6, 6, 2}}) {
        const Graph g = around(in, t, op, standalone);
        const Group all{1, g.size() - 1};
        expect_all_strategies(g, all, {1, 4, 4, 0}, 64);
        expect_all_strategies(g, all, {1, 3, 5, 8}, 128); // ragged bricks, channel blocks
      }
}

TEST(EltwiseKernels, Sigmoid) {
  check_op([](GraphBuilder& b, int c, int) { return b.sigmoid(c, "op"); });
}

TEST(EltwiseKernels, Silu) {
  check_op([](GraphBuilder& b, int c, int) { return b.silu(c, "op"); });
}

TEST(EltwiseKernels, Clip) {
  // ReLU6 as MobileNetV2 exports it, and a clip with one open end (±infinity in the source).
  check_op([](GraphBuilder& b, int c, int) { return b.clip(c, 0.f, 6.f, "op"); });
  check_op([](GraphBuilder& b, int c, int) {
    return b.clip(c, -0.25f, std::numeric_limits<float>::infinity(), "op");
  });
}

TEST(EltwiseKernels, MulOfEqualShapes) {
  check_op([](GraphBuilder& b, int c1, int c2) { return b.mul(c1, c2, "op"); });
  // x · sigmoid(x) spelled out (what the ONNX importer meets before any pattern).
  check_op([](GraphBuilder& b, int c1, int) { return b.mul(c1, b.sigmoid(c1), "op"); });
}

TEST(EltwiseKernels, HardSwish) {
  check_op([](GraphBuilder& b, int c, int) { return b.hard_swish(c, "op"); });
}

TEST(EltwiseKernels, HardSigmoid) {
  check_op([](GraphBuilder& b, int c, int) { return b.hard_sigmoid(c, "op"); });
}

TEST(EltwiseKernels, Gelu) {
  check_op([](GraphBuilder& b, int c, int) { return b.gelu(c, "op"); });
}

// A batch-norm that does not fold (its input has another reader): a per-channel scale and
// shift; folded into the conv before it otherwise.
TEST(EltwiseKernels, PerChannelScaleAndShift) {
  check_op([](GraphBuilder& b, int c, int) { return b.batch_norm(c, "op"); });
}

TEST(EltwiseKernels, SubAndDivOfEqualShapes) {
  check_op([](GraphBuilder& b, int c1, int c2) { return b.sub(c1, c2, "op"); });
  check_op([](GraphBuilder& b, int c1, int c2) { // a divisor in [1, 2]
    const int den = b.add(b.sigmoid(c2), b.clip(c2, 1.f, 1.f), "den");
    return b.div(c1, den, "op");
  });
}

// Operands from before the group, broadcast: x → pool → 1x1 convs give a per-channel vector
// v (N, 16, 1, 1, through a sigmoid), v + 1 (a divisor in [1, 2]) and a per-image scalar s
// (N, 1, 1, 1); then the group conv 3x3 → conv 1x1 → op(the 1x1's output, v, s) → conv 1x1
// reads them at (n, c) / (n).
struct Vectors {
  int v, v1, s;
};
using BroadcastOp = std::function<int(GraphBuilder&, int conv, const Vectors&)>;

void check_broadcast(const BroadcastOp& op) {
  for (DType t : {DType::kF32, DType::kTF32, DType::kBF16})
    for (const TensorShape& in : {TensorShape{2, 8, 1, 9, 10, 2}, TensorShape{3, 8, 1, 6, 6, 2}}) {
      GraphBuilder b("broadcast", in, t);
      const int x = b.input();
      const int pooled = b.global_avg_pool(x, "pool");
      Vectors vs{};
      vs.v = b.sigmoid(b.conv2d(pooled, 16, 1, 1, 0, 1, 1, true, "v"), "v_gate");
      vs.v1 = b.add(vs.v, b.clip(vs.v, 1.f, 1.f), "v1");
      vs.s = b.conv2d(pooled, 1, 1, 1, 0, 1, 1, true, "s");
      const int c1 = b.conv2d(x, 16, 3, 1, 1, 1, 1, true, "c1");
      const int c2 = b.conv2d(c1, 16, 1, 1, 0, 1, 1, true, "c2");
      b.conv2d(op(b, c2, vs), 8, 1, 1, 0, 1, 1, true, "c3");
      const Graph g = fuse_for_inference(b.build());
      const Group grp{g.find("c1"), g.size() - 1};
      expect_all_strategies(g, grp, {1, 4, 4, 0}, 64);
      expect_all_strategies(g, grp, {1, 3, 5, 8}, 128); // ragged bricks, channel blocks
    }
}

TEST(EltwiseKernels, ChannelMulBySqueezeExcitationVector) {
  check_broadcast(
      [](GraphBuilder& b, int c, const Vectors& x) { return b.channel_mul(c, x.v, "op"); });
}

TEST(EltwiseKernels, BroadcastOperandsEitherSide) {
  check_broadcast([](GraphBuilder& b, int c, const Vectors& x) {
    return b.div(b.sub(x.s, b.add(x.v, c, "add"), "sub"), x.v1, "op");
  });
  check_broadcast([](GraphBuilder& b, int c, const Vectors& x) {
    return b.mul(b.mul(x.s, c, "mul_s"), x.v, "op");
  });
}

TEST(EltwiseKernels, CodegenCarriesTheOpAndItsRange) {
  const OpOnConv op = [](GraphBuilder& b, int c, int) {
    return b.clip(c, -1.5f, std::numeric_limits<float>::infinity(), "op");
  };
  for (bool standalone : {false, true}) {
    const Graph g = around(TensorShape{1, 8, 1, 6, 6, 2}, DType::kF32, op, standalone);
    const KernelPlan plan = plan_kernels(
        g, test_support::make_candidate({1, g.size() - 1}, Strategy::kPadded, {1, 4, 4, 0}, 64));
    // The op's own layer, or the 1x1 conv's epilogue.
    const dev::LayerDesc& clip =
        plan.launches[0].desc.layers[(standalone ? g.find("op") : g.find("c2")) - 1];
    EXPECT_EQ(clip.op, standalone ? dev::kOpEltwise : dev::kOpConv);
    if (standalone)
      EXPECT_EQ(clip.ew, dev::kEwClip);
    else
      EXPECT_EQ(clip.act, dev::kActClip);
    EXPECT_EQ(clip.clip_lo, -1.5f);
    EXPECT_NE(plan.source.find("__builtin_huge_valf()"), std::string::npos);
    EXPECT_EQ(g.size(), standalone ? 6 : 4); // input, c1, c2, [op, keep,] c3
  }
}

// ---- EfficientNet-B0's MBConv ----------------------------------------------------------------

// Every layer of the block in one group, the depthwise conv between the two 1x1 convs, in the
// three precisions, padded, memoized and layerwise, plain and with batch blocks.
TEST(EltwiseKernels, MbconvBlockMergedInEveryPrecision) {
  for (DType t : {DType::kF32, DType::kTF32, DType::kBF16})
    for (const TensorShape& in :
         {TensorShape{2, 16, 1, 10, 9, 2}, TensorShape{1, 24, 1, 7, 7, 2}}) {
      const Graph g = test_support::mbconv_block(in, 4, t);
      const Group grp{g.find("expand"), g.find("add")};
      ASSERT_EQ(grp.size(), 4);
      expect_all_strategies(g, grp, {1, 4, 4, 0}, 128);
      expect_all_strategies(g, grp, {1, 4, 5, 8}, 128);
      EmulatorOptions eo;
      expect_matches(g, test_support::make_candidate(grp, Strategy::kPadded, {1, 4, 4, 0, 2}, 128),
                     eo);
    }
}

// The block with its squeeze-excitation: the pool ends the group of expand .. dw, the SE's
// 1x1 convs on (N, C, 1, 1) run between, and the group se .. add multiplies D by s as it reads
// D (docs/kernels.md); both groups in the three precisions, every strategy, with batch blocks.
TEST(EltwiseKernels, MbconvWithSqueezeExcitationInEveryPrecision) {
  for (DType t : {DType::kF32, DType::kTF32, DType::kBF16})
    for (const TensorShape& in :
         {TensorShape{2, 16, 1, 10, 9, 2}, TensorShape{1, 24, 1, 7, 7, 2}}) {
      const Graph g = test_support::mbconv_se_block(in, 4, t);
      for (const Group grp :
           {Group{g.find("expand"), g.find("dw")}, Group{g.find("se"), g.find("add")},
            Group{g.find("se_fc1"), g.find("se_fc2")}}) {
        expect_all_strategies(g, grp, {1, 4, 4, 0}, 128);
        expect_all_strategies(g, grp, {1, 4, 5, 8}, 128);
        EmulatorOptions eo;
        expect_matches(
            g, test_support::make_candidate(grp, Strategy::kPadded, {1, 4, 4, 0, 2}, 128), eo);
      }
      ASSERT_EQ(g.find("add") - g.find("se"), 2);
    }
}

// The SE gate computed inside the group (fc2 .. add): layer by layer runs it, padded and memoized
// refuse it naming the operand (core/group.h brick_blocker).
TEST(EltwiseKernels, BroadcastOperandFromInsideTheGroupRunsLayerByLayer) {
  const Graph g = test_support::mbconv_se_block(TensorShape{2, 16, 1, 10, 9, 2}, 4);
  const Group grp{g.find("se_fc2"), g.find("add")};
  EmulatorOptions eo;
  expect_matches(g, test_support::make_candidate(grp, Strategy::kLayerwise, {1, 4, 4, 0}, 128), eo);
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized})
    try {
      plan_kernels(g, test_support::make_candidate(grp, s, {1, 4, 4, 0}, 128));
      ADD_FAILURE() << strategy_name(s) << " planned a group computing its broadcast operand";
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("broadcasts 'se_fc2'"), std::string::npos) << e.what();
    }
}

// The MBConv cases the GPU tests run (device_cases.h: Device.GeneratedKernelsMatchTheCpuReference
// in fp32, Device.TensorCoreKernelsMatchTheirHostEmulation in tf32 / bf16) plan here and match
// the reference under emulation, so a GPU run compares against a checked twin.
TEST(EltwiseKernels, MbconvDeviceCasesMatchUnderEmulation) {
  int n = 0;
  for (const auto& cases : {test_support::generated_cases(), test_support::tensor_core_cases()})
    for (const test_support::DeviceCase& k : cases)
      if (k.graph.name() == "mbconv" || k.graph.name() == "mbconv_se") {
        EmulatorOptions eo;
        eo.workers = k.candidate.strategy == Strategy::kMemoized ? 3 : 1;
        expect_matches(k.graph, k.candidate, eo);
        ++n;
        if (k.graph.name() == "mbconv_se" && k.candidate.group.first == 6) { // se .. add
          EXPECT_EQ(k.graph.layer(6).op, OpKind::kChannelMul);
          EXPECT_EQ(k.graph.layer(8).name, "add");
        }
      }
  EXPECT_EQ(n, 6 + 7);
}

} // namespace
} // namespace brickdl::cuda
