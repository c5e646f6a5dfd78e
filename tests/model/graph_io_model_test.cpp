// The model on a group with a graph output before its last layer: the lower bound counts the
// output whole (its FLOPs and its DRAM bytes), and padded / memoized are infeasible there.
#include <gtest/gtest.h>

#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "core/group.h"
#include "model/cost_model.h"

namespace brickdl::model {
namespace {

// x (4 channels, 8x8) -> c1 = conv3x3 pad 1 -> c2 = conv1x1 stride 2 (reads a quarter of c1).
Graph chain(bool c1_is_output) {
  GraphBuilder b("chain", TensorShape{1, 4, 1, 8, 8, 2});
  const int c1 = b.conv2d(b.input(), 4, 3, 1, 1, 1, 1, false, "c1");
  const int c2 = b.conv2d(c1, 4, 1, 2, 0, 1, 1, false, "c2");
  b.mark_output(c2);
  if (c1_is_output)
    b.mark_output(c1);
  return fuse_for_inference(b.build());
}

Candidate merged(Strategy s) {
  Candidate c;
  c.group = {1, 2};
  c.strategy = s;
  c.brick.h = c.brick.w = 4;
  return c;
}

TEST(GraphIoModel, LowerBoundCountsAnInnerOutputWhole) {
  const CostModel m(*find_gpu_spec("A100-40GB"));
  const Graph plain = chain(false), two = chain(true);
  const LowerBound without = m.lower_bound(plain, {1, 2});
  const LowerBound with = m.lower_bound(two, {1, 2});
  // Every position of c1 is needed once it leaves the graph: c1 alone plus c2 alone.
  EXPECT_DOUBLE_EQ(with.flops, m.lower_bound(two, {1, 1}).flops + m.lower_bound(two, {2, 2}).flops);
  EXPECT_GT(with.flops, without.flops);
  // And c1 is written: 4 · 8 · 8 floats more, at least.
  EXPECT_GE(with.dram_bytes, without.dram_bytes + 4 * 64 * 4);
  EXPECT_GE(with.time_ms, without.time_ms);
}

TEST(GraphIoModel, PaddedAndMemoizedAreInfeasibleWithAnInnerOutput) {
  const CostModel m(*find_gpu_spec("A100-40GB"));
  const Graph two = chain(true);
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
    EXPECT_TRUE(m.predict(chain(false), merged(s)).feasible) << strategy_name(s);
    const Prediction p = m.predict(two, merged(s));
    EXPECT_FALSE(p.feasible) << strategy_name(s);
    EXPECT_NE(p.reason.find("graph output inside the group"), std::string::npos) << p.reason;
  }
  const Prediction lw = m.predict(two, merged(Strategy::kLayerwise));
  ASSERT_TRUE(lw.feasible) << lw.reason;
  EXPECT_GE(lw.time_ms, m.lower_bound(two, {1, 2}).time_ms);
}

} // namespace
} // namespace brickdl::model
