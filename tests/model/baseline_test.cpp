// The paper's unfused cuDNN baseline (model/baseline.h, PaperUnfusedBaseline): which passes a
// fused layer becomes, and what they cost, derived by hand from the layerwise model's L2
// rules (model/strategies/layerwise.cpp: an LRU of whole tensors over the group's kernels; a
// read misses when the bytes touched since the tensor's last use, itself included, exceed the
// L2 share, l2_resident_fraction · L2: half of the A100-40GB spec's 40 MB).
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
  // The add reads c2's last pass and c1's last pass (the relu).
  EXPECT_EQ(u.layer(7).inputs, (std::vector<int>{6, 4}));
  EXPECT_EQ(paper.unfused_group({1, 1}), (Group{1, 4}));
  EXPECT_EQ(paper.unfused_group({2, 3}), (Group{5, 8}));
  EXPECT_EQ(paper.unfused_group({3, 3}), (Group{7, 8}));
}

// 1x2x10x10 → conv 3x3 (1 → 2 channels) + batch-norm + relu: everything fits L2.
//   fused (cudnn-fused): input 400 B + weights (18 + 2 bias) · 4 B + output 800 B = 1280 B,
//   one launch.
//   paper-unfused: conv reads the input 400 and its weights 72 (no bias); the bias and the
//   batch-norm pass each read the previous output from L2 and their 2 · 2 parameters (16 B)
//   from DRAM; the intermediates stay in L2; the relu's output is written: 400 + 72 + 16 + 16
//   + 800 = 1304 B, four launches.
TEST(PaperUnfusedBaseline, PassesOverATensorThatFitsL2ReadItFromL2) {
  GraphBuilder b("small", TensorShape{1, 1, 1, 10, 10, 2});
  b.relu(b.batch_norm(b.conv2d(0, 2, 3, 1, 1)));
  const Graph g = fuse_for_inference(b.build());
  const CostModel m = a100();
  const Prediction fused = fused_layerwise(m, g, {1, 1});
  const Prediction paper = PaperUnfusedBaseline(g).predict(m, {1, 1});
  EXPECT_DOUBLE_EQ(fused.dram_bytes, 1280);
  EXPECT_EQ(fused.launches, 1);
  EXPECT_DOUBLE_EQ(paper.dram_bytes, 1304);
  EXPECT_EQ(paper.launches, 4);
  EXPECT_GT(paper.time_ms, fused.time_ms);
}

// 1x8x1024x1024 → conv 1x1 (8 → 8) + batch-norm + relu: every tensor, T = 8 · 2^20 · 4 B =
// 32 MiB, is larger than the L2 share, so every pass reads its input from DRAM and writes its
// output back.
//   fused: T + (64 + 8) · 4 + T = 2T + 288.
//   paper: conv T + 256 + T; bias pass T + 16 · 4 + T; batch-norm pass the same; relu T + T:
//   8T + 384, the paper's three extra round trips of the output (6T + 96 more).
TEST(PaperUnfusedBaseline, PassesOverATensorLargerThanL2GoToDram) {
  GraphBuilder b("large", TensorShape{1, 8, 1, 1024, 1024, 2});
  b.relu(b.batch_norm(b.conv2d(0, 8, 1)));
  const Graph g = fuse_for_inference(b.build());
  const CostModel m = a100();
  const double t = 8.0 * 1024 * 1024 * 4;
  EXPECT_DOUBLE_EQ(fused_layerwise(m, g, {1, 1}).dram_bytes, 2 * t + 288);
  EXPECT_DOUBLE_EQ(PaperUnfusedBaseline(g).predict(m, {1, 1}).dram_bytes, 8 * t + 384);
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
