// The paper's unfused cuDNN baseline (model/baseline.h, PaperUnfusedBaseline): which passes a
// fused layer becomes, and what they cost.
//
// CHECKED, derived from the artifact's calls (benchmarks/baseline_GraphSize.cpp of the paper's
// artifact: cudnnConvolutionForward, cudnnAddTensor, cudnnActivationForward on one buffer)
// and from what each cuDNN call reads and writes, independently of the model's code:
//  - a conv with a bias, a folded batch-norm and an activation becomes four kernels: conv,
//    bias, batch-norm, activation;
//  - the bias pass, cudnnAddTensor(A = bias, C = y): C ← A + C reads the C values of its bias
//    and the tensor and writes the tensor, in place (C is its input and its output);
//  - the batch-norm pass, cudnnBatchNormalizationForwardInference, reads the tensor and
//    4 · C values (bnScale, bnBias, estimatedMean, estimatedVariance) and writes the tensor;
//  - the activation pass, cudnnActivationForward with x == y, reads and writes the tensor;
//  - the L2 writes back: a dirty line costs one DRAM write, when it is evicted; a line
//    overwritten while resident is written once, with its last value. So a pass over a tensor
//    that stays in L2 rewrites it there and costs no DRAM write; a pass over a tensor larger
//    than L2 finds the previous pass's writes evicted (written back) and reads them again.
//
// PINNED, choices of the model (model/strategies/layerwise.cpp, model/detail/memory.h) that
// these figures hold in place rather than derive:
//  - a kernel can count on an L2 share of l2_resident_fraction · L2 (half of the A100-40GB's
//    40 MiB: 20 MiB), managed as an LRU of whole buffers: a read hits when the bytes touched
//    since the buffer's last use, itself included, fit the share;
//  - a group starts with a cold L2 (inputs and parameters from DRAM) and its output is written
//    back once;
//  - an intermediate buffer still resident when the group ends is not written back (dead
//    scratch that the next kernel overwrites in L2, as for every layerwise group), though a
//    write-back L2 would write it eventually if nothing overwrote it;
//  - the batch-norm pass runs in place like the others (the artifact's batch-norm call is cut
//    off in its published source; the cuDNN backend's stand-in is an in-place cudnnAddTensor).
#include <gtest/gtest.h>

#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "core/zoo.h"
#include "model/baseline.h"

namespace brickdl::model {
namespace {

CostModel a100() {
  return CostModel(*find_gpu_spec("A100-40GB"));
}

Prediction fused_layerwise(const CostModel& m, const Graph& g, Group group) {
  Candidate c;
  c.strategy = Strategy::kLayerwise;
  c.group = group;
  return m.predict(g, c);
}

// c1: conv + batch-norm + relu; c2: conv with its own bias; a: add + relu.
Graph block() {
  GraphBuilder b("block", TensorShape{1, 4, 1, 8, 8, 2});
  const int c1 = b.conv2d(0, 4, 3, 1, 1, 1, 1, false, "c1");
  const int r1 = b.relu(b.batch_norm(c1, "bn1"), "r1");
  const int c2 = b.conv2d(r1, 4, 3, 1, 1, 1, 1, true, "c2");
  b.relu(b.add(c2, r1, "a"), "ra");
  return fuse_for_inference(b.build());
}

TEST(PaperUnfusedBaseline, EveryEpilogueIsAPassOfItsOwn) {
  const Graph fused = block();
  ASSERT_EQ(fused.size(), 4); // input, c1 (bn, relu), c2 (bias), a (relu)
  const PaperUnfusedBaseline paper(fused);
  const Graph& u = paper.graph();
  std::vector<std::string> names;
  std::vector<OpKind> ops;
  for (int id = 1; id < u.size(); ++id) {
    names.push_back(u.layer(id).name);
    ops.push_back(u.layer(id).op);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"c1", "c1.bias", "c1.bn", "c1.act", "c2", "c2.bias",
                                             "a", "a.act"}));
  EXPECT_EQ(ops, (std::vector<OpKind>{OpKind::kConv, OpKind::kBatchNorm, OpKind::kBatchNorm,
                                      OpKind::kRelu, OpKind::kConv, OpKind::kBatchNorm,
                                      OpKind::kAdd, OpKind::kRelu}));
  for (int id = 1; id < u.size(); ++id) // the passes carry no epilogue of their own
    EXPECT_EQ(u.layer(id).activation, Activation::kNone) << u.layer(id).name;
  EXPECT_FALSE(u.layer(1).bias);
  // The passes read what their calls read (4 channels: the bias 4 values, the batch-norm's
  // scale, bias, mean and variance 16) and rewrite their input; the ops write a buffer of
  // their own.
  std::vector<int64_t> params;
  std::vector<bool> in_place;
  for (int id = 1; id < u.size(); ++id) {
    params.push_back(u.layer(id).params);
    in_place.push_back(u.layer(id).in_place);
  }
  EXPECT_EQ(params, (std::vector<int64_t>{144, 4, 16, 0, 144, 4, 0, 0}));
  EXPECT_EQ(in_place, (std::vector<bool>{false, true, true, true, false, true, false, true}));
  // The add reads c2's last pass and c1's last pass (the relu).
  EXPECT_EQ(u.layer(7).inputs, (std::vector<int>{6, 4}));
  EXPECT_EQ(paper.unfused_group({1, 1}), (Group{1, 4}));
  EXPECT_EQ(paper.unfused_group({2, 3}), (Group{5, 8}));
  EXPECT_EQ(paper.unfused_group({3, 3}), (Group{7, 8}));
}

// 1x1x10x10 → conv 3x3 (1 → 2 channels) + batch-norm + relu: everything fits L2.
//   fused (cudnn-fused): input 400 B + weights (18 + 2 bias) · 4 B + output 800 B = 1280 B,
//   one launch.
//   paper-unfused, from the artifact's calls: the conv reads the input 400 and its weights
//   72 (no bias) and writes y (800, dirty in L2); cudnnAddTensor reads its bias, C = 2 values
//   (8 B), and y from L2 and rewrites y there; the batch-norm reads 4 · 2 values (32 B) and y
//   from L2 and rewrites it; the relu reads and rewrites it; y is written back once:
//   400 + 72 + 8 + 32 + 800 = 1312 B, four launches: in DRAM the passes cost only the
//   vectors beyond the folded bias (32 B), their round trips of y are L2 traffic:
//   conv 400 + 72 + 800 (one CTA tile: the tensors once), bias 800 + 8 + 800,
//   batch-norm 800 + 32 + 800, relu 800 + 800: 6112 B.
TEST(PaperUnfusedBaseline, PassesOverATensorThatFitsL2RewriteItThere) {
  GraphBuilder b("small", TensorShape{1, 1, 1, 10, 10, 2});
  b.relu(b.batch_norm(b.conv2d(0, 2, 3, 1, 1)));
  const Graph g = fuse_for_inference(b.build());
  const CostModel m = a100();
  const Prediction fused = fused_layerwise(m, g, {1, 1});
  const Prediction paper = PaperUnfusedBaseline(g).predict(m, {1, 1});
  EXPECT_DOUBLE_EQ(fused.dram_bytes, 1280);
  EXPECT_EQ(fused.launches, 1);
  EXPECT_DOUBLE_EQ(paper.dram_bytes, 1312);
  EXPECT_DOUBLE_EQ(paper.dram_write_bytes, 800);
  EXPECT_DOUBLE_EQ(paper.l2_bytes, 6112);
  EXPECT_EQ(paper.launches, 4);
  EXPECT_GT(paper.time_ms, fused.time_ms);
}

// 1x8xSxS → conv 1x1 (8 → 8) + batch-norm + relu, T its output's bytes: fused 2T + 288 B
// (input, weights and bias (64 + 8) · 4 B, output); the paper's passes n_rw · T + 416 B
// (weights 256, bias vector 32, batch-norm vectors 128), n_w · T of them written.
void expect_conv_bn_relu_traffic(int side, double n_rw, double n_w) {
  GraphBuilder b("conv_bn_relu", TensorShape{1, 8, 1, side, side, 2});
  b.relu(b.batch_norm(b.conv2d(0, 8, 1)));
  const Graph g = fuse_for_inference(b.build());
  const CostModel m = a100();
  const double t = 8.0 * side * side * 4;
  EXPECT_DOUBLE_EQ(fused_layerwise(m, g, {1, 1}).dram_bytes, 2 * t + 288);
  const Prediction paper = PaperUnfusedBaseline(g).predict(m, {1, 1});
  EXPECT_DOUBLE_EQ(paper.dram_bytes, n_rw * t + 416);
  EXPECT_DOUBLE_EQ(paper.dram_write_bytes, n_w * t);
}

// 1x8x512x512 → conv 1x1 (8 → 8) + batch-norm + relu: T = 8 · 2^18 · 4 B = 8 MiB, within the
// 20 MiB L2 share once, not four times over.
//   fused: T + (64 + 8) · 4 + T = 2T + 288.
//   paper: the passes rewrite the conv's output in place, one 8 MiB buffer that stays in L2
//   from the conv to the relu; only the relu's result is written back: input T, weights 256,
//   bias vector 8 · 4 = 32, batch-norm vectors 32 · 4 = 128, output T: 2T + 416. (Four
//   buffers of their own, 32 MiB, would have evicted the first two versions of the output
//   before the group's end: 4T + 416.)
TEST(PaperUnfusedBaseline, PassesRewriteOneBufferInPlace) {
  expect_conv_bn_relu_traffic(512, /*n_rw=*/2, /*n_w=*/1);
}

// 1x8x1024x1024 → conv 1x1 (8 → 8) + batch-norm + relu: T = 8 · 2^20 · 4 B = 32 MiB, larger
// than the L2 share: each pass finds the previous kernel's writes evicted (written back) and
// reads them from DRAM.
//   fused: T + (64 + 8) · 4 + T = 2T + 288.
//   paper: conv T + 256 + T; bias pass T + 8 · 4 + T; batch-norm pass T + 32 · 4 + T; relu
//   T + T: 8T + 416, the paper's three extra round trips of the output (6T + 128 more).
TEST(PaperUnfusedBaseline, PassesOverATensorLargerThanL2GoToDram) {
  expect_conv_bn_relu_traffic(1024, /*n_rw=*/8, /*n_w=*/4);
}

// The whole block as one group (every tensor 1 KiB: all fit). Its unfused kernels: c1, c1.bias,
// c1.bn, c1.act (one buffer), c2, c2.bias (another), a, a.act (the output's).
//   paper: input 1024 + c1's weights 144 · 4 + its bias 4 · 4 + its batch-norm 16 · 4 + c2's
//   weights 144 · 4 + its bias 4 · 4 + output 1024 = 3296 B, eight launches;
//   fused: 1024 + (144 + 4) · 4 · 2 + 1024 = 3232 B: the paper reads 64 B more, c1's
//   batch-norm vectors. c1's and c2's buffers are still resident at the end: not written back
//   (the pinned rule; charged, they would add 2 · 1024 B).
TEST(PaperUnfusedBaseline, AGroupOfLayersKeepsItsResidentIntermediates) {
  const Graph fused = block();
  const CostModel m = a100();
  const Prediction paper = PaperUnfusedBaseline(fused).predict(m, {1, 3});
  EXPECT_DOUBLE_EQ(fused_layerwise(m, fused, {1, 3}).dram_bytes, 3232);
  EXPECT_DOUBLE_EQ(paper.dram_bytes, 3296);
  EXPECT_DOUBLE_EQ(paper.dram_write_bytes, 1024);
  EXPECT_EQ(paper.launches, 8);
}

// On every group of ResNet-50's search space the paper's baseline moves at least the bytes of
// the honest one and takes at least its time.
TEST(PaperUnfusedBaseline, NeverCheaperThanTheFusedBaselineOnResNet50) {
  ZooOptions o;
  o.batch = 8;
  const Graph g = fuse_for_inference(build_zoo_model("resnet50", o));
  const CostModel m = a100();
  const PaperUnfusedBaseline paper(g);
  int groups = 0;
  for (int first = 1; first < g.size(); ++first) {
    for (int last = first; last < g.size() && last < first + 4; ++last) {
      const Prediction f = fused_layerwise(m, g, {first, last});
      if (!f.feasible)
        continue; // not a group (an output besides its last layer's leaves it)
      const Prediction p = paper.predict(m, {first, last});
      ASSERT_TRUE(p.feasible) << p.reason;
      EXPECT_GE(p.dram_bytes, f.dram_bytes) << first << ".." << last;
      EXPECT_GE(p.time_ms, f.time_ms) << first << ".." << last;
      EXPECT_GE(p.launches, f.launches);
      ++groups;
    }
  }
  EXPECT_GT(groups, 150);
}

TEST(PaperUnfusedBaseline, NamesOfTheBaselines) {
  EXPECT_EQ(baseline_names(), (std::vector<std::string>{"cudnn-fused", "paper-unfused"}));
  BaselineKind k = BaselineKind::kCudnnFused;
  EXPECT_TRUE(parse_baseline("paper-unfused", &k));
  EXPECT_EQ(k, BaselineKind::kPaperUnfused);
  EXPECT_FALSE(parse_baseline("paper", &k));
  EXPECT_STREQ(baseline_name(BaselineKind::kCudnnFused), "cudnn-fused");
}

} // namespace
} // namespace brickdl::model
