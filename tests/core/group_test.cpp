// Group rules (core/group.h): validity, external inputs, what stops bricking, and workload
// signatures (pinned: the tuning database shares results under them).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/graph_builder.h"
#include "core/group.h"
#include "core/zoo.h"
#include "tests/core/small_graphs.h"

namespace brickdl {
namespace {

using testing::residual_graph;

TEST(Group, OnlyTheLastLayerMayBeReadOutside) {
  const Graph g = residual_graph();
  ASSERT_EQ(g.size(), 6);
  EXPECT_TRUE(is_valid_group(g, Group{2, 4})); // c1 comes from outside: allowed
  EXPECT_TRUE(is_valid_group(g, Group{1, 4}));
  EXPECT_FALSE(is_valid_group(g, Group{1, 3})); // c1 is read by add, outside
  EXPECT_FALSE(is_valid_group(g, Group{1, 2}));
  EXPECT_TRUE(is_valid_group(g, Group{1, 1}));
  EXPECT_FALSE(is_valid_group(g, Group{0, 1})); // the input is never in a group
  EXPECT_FALSE(is_valid_group(g, Group{3, 2}));
  EXPECT_FALSE(is_valid_group(g, Group{5, 6}));

  EXPECT_EQ(group_invalid_reason(g, Group{1, 3}),
            "the output of layer 'c1' is read by 'add' outside the group [c1 .. c3]; only the "
            "last layer's output may leave a group");
  EXPECT_EQ(group_invalid_reason(g, Group{0, 1}), "group [0, 1] is not a range of layers 1..5");
  EXPECT_EQ(group_invalid_reason(g, Group{2, 4}), "");
}

TEST(Group, ReasonAndPredicateAgreeOnEveryRangeOfAZooModel) {
  ZooOptions o;
  o.batch = 1;
  const Graph g = fuse_for_inference(build_zoo_model("inception_v4", o));
  int valid = 0;
  for (int first = 0; first < g.size(); ++first)
    for (int last = first - 1; last < std::min(g.size() + 1, first + 6); ++last) {
      const Group grp{first, last};
      EXPECT_EQ(is_valid_group(g, grp), group_invalid_reason(g, grp).empty())
          << first << ".." << last;
      valid += is_valid_group(g, grp) ? 1 : 0;
    }
  EXPECT_GT(valid, g.size()); // singletons and more
}

TEST(Group, ExternalInputsInOrderOfFirstRead) {
  const Graph g = residual_graph();
  EXPECT_EQ(group_external_inputs(g, Group{2, 4}), (std::vector<int>{1}));
  EXPECT_EQ(group_external_inputs(g, Group{1, 4}), (std::vector<int>{0}));
  EXPECT_EQ(group_external_inputs(g, Group{4, 5}), (std::vector<int>{3, 1}));
}

TEST(Group, BrickBlockerNamesTheLayer) {
  ZooOptions o;
  o.batch = 1;
  const Graph g = fuse_for_inference(build_zoo_model("resnet50", o));
  const int gap = g.size() - 3; // ..., global pool, flatten, linear
  ASSERT_EQ(g.layer(gap).op, OpKind::kGlobalAvgPool);
  EXPECT_EQ(brick_blocker(g, Group{1, 3}), "");
  const std::string why = brick_blocker(g, Group{gap - 1, gap});
  EXPECT_NE(why.find("'" + g.layer(gap).name + "' (global_avg_pool"), std::string::npos) << why;
}

// Workload signatures: equal for the same work wherever it sits, different otherwise.
Graph two_blocks(int64_t channels_second, const std::string& prefix) {
  GraphBuilder b("blocks", TensorShape{2, 16, 1, 14, 14, 2});
  int x = b.input();
  for (int i = 0; i < 2; ++i) {
    const int64_t ch = i == 0 ? 16 : channels_second;
    const std::string p = prefix + std::to_string(i);
    const int y = b.conv_bn_relu(x, ch, 3, 1, 1, 1, p + ".a");
    const int z = b.batch_norm(b.conv2d(y, 16, 3, 1, 1, 1, 1, false, p + ".b.conv"), p + ".b.bn");
    x = b.relu(b.add(z, x, p + ".add"), p + ".relu");
  }
  return fuse_for_inference(b.build());
}

TEST(Workload, RepeatedBlocksShareASignature) {
  const Graph g = two_blocks(16, "layer");
  ASSERT_EQ(g.size(), 7); // input, (conv, conv, add) × 2
  const std::string first = workload_signature(g, Group{1, 3});
  EXPECT_EQ(first, workload_signature(g, Group{4, 6}));
  // Names do not matter; shapes do.
  EXPECT_EQ(first, workload_signature(two_blocks(16, "other"), Group{4, 6}));
  EXPECT_NE(first, workload_signature(two_blocks(32, "layer"), Group{4, 6}));
  EXPECT_NE(first, workload_signature(g, Group{1, 2}));
  EXPECT_NE(workload_signature(g, Group{2, 3}), workload_signature(g, Group{1, 2}));
  // The description is for people.
  EXPECT_EQ(workload_description(g, Group{1, 3}),
            "conv3x3 16->16 14x14 +relu | conv3x3 16->16 14x14 | add 14x14 +relu");
  EXPECT_EQ(group_layer_names(g, Group{1, 3}), "layer0.a.conv .. layer0.add");
}

TEST(Workload, ConvTransposeIsDescribedLikeAConvAndBlocksBricking) {
  GraphBuilder b("deconv", TensorShape{1, 8, 1, 5, 6, 2});
  Window w;
  w.kernel = {1, 3, 3};
  w.stride = {1, 2, 2};
  w.pad = {0, 1, 1};
  b.relu(b.conv_transpose(b.input(), 4, w, {0, 1, 1}, 1, false, "up"));
  const Graph g = fuse_for_inference(b.build());
  ASSERT_EQ(g.size(), 2);
  EXPECT_EQ(workload_description(g, Group{1, 1}), "conv_transpose3x3/2 8->4 10x12 +relu");
  EXPECT_NE(brick_blocker(g, Group{1, 1}).find("'up' (conv_transpose"), std::string::npos)
      << brick_blocker(g, Group{1, 1});
}

TEST(Workload, SignatureIsPinned) {
  // The key of every stored result: this exact text (format v1) must not change.
  EXPECT_EQ(workload_signature(two_blocks(16, "layer"), Group{1, 3}),
            "v1 n2 fp32 | X0=16x14x14 | L0=conv(X0) k1x3x3 s1x1x1 p0x1x1 d1x1x1 g1 c16 b1 relu "
            "-> 16x14x14 | L1=conv(L0) k1x3x3 s1x1x1 p0x1x1 d1x1x1 g1 c16 b1 -> 16x14x14 | "
            "L2=add(L1,X0) relu -> 16x14x14");
}

// Results of one precision never stand for another's: tf32 stores fp32 data like fp32, yet its
// workloads (the key of every stored result) differ.
TEST(Workload, SignatureDistinguishesPrecision) {
  auto one = [](DType t) {
    GraphBuilder b("one", TensorShape{1, 4, 1, 8, 8, 2}, t);
    b.relu(b.conv2d(b.input(), 4, 3, 1, 1));
    return fuse_for_inference(b.build());
  };
  std::set<std::string> signatures;
  for (const std::string& name : dtype_names()) {
    DType t;
    ASSERT_TRUE(parse_dtype(name, &t));
    const std::string s = workload_signature(one(t), Group{1, 1});
    EXPECT_EQ(s.rfind("v1 n1 " + name + " | ", 0), 0u) << s;
    signatures.insert(s);
  }
  EXPECT_EQ(signatures.size(), dtype_names().size());
}

TEST(Workload, SignatureDistinguishesBatchAndEpilogue) {
  auto one = [](int batch, bool relu) {
    GraphBuilder b("one", TensorShape{batch, 4, 1, 8, 8, 2});
    const int c = b.conv2d(b.input(), 4, 3, 1, 1);
    if (relu)
      b.relu(c);
    return fuse_for_inference(b.build());
  };
  const std::string base = workload_signature(one(1, true), Group{1, 1});
  EXPECT_EQ(base, workload_signature(one(1, true), Group{1, 1}));
  EXPECT_NE(base, workload_signature(one(2, true), Group{1, 1}));
  EXPECT_NE(base, workload_signature(one(1, false), Group{1, 1}));
  EXPECT_NE(base.find("relu"), std::string::npos) << base;
}

} // namespace
} // namespace brickdl
