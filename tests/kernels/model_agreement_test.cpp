// The CPU executor's counts equal the analytic model's predictions for the same candidates
// (the shared counting conventions of model/cost_model.h and kernels/merged_executor.h).
#include <gtest/gtest.h>

#include <random>

#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "kernels/merged_executor.h"
#include "kernels/weights.h"
#include "model/cost_model.h"
#include "tests/kernels/random_groups.h"

namespace brickdl::kernels {
namespace {

struct Compared {
  int candidates = 0;
  int skipped = 0; // the model calls the candidate infeasible (so predicts no counts)
};

void expect_agreement(const Graph& g, const Candidate& c, const model::CostModel& m,
                      const std::string& what, Compared* n) {
  const model::Prediction p = m.predict(g, c);
  if (!p.feasible) {
    ++n->skipped;
    return;
  }
  ++n->candidates;
  std::vector<Tensor> ext;
  std::vector<const Tensor*> in;
  for (int id : group_external_inputs(g, c.group))
    ext.push_back(random_tensor(g.layer(id).out, 1, id));
  for (const Tensor& t : ext)
    in.push_back(&t);
  const GroupResult r =
      execute_group(g, c, in, make_weights(g, 1, c.group.first, c.group.last), ExecOptions{2});
  ASSERT_TRUE(r.supported) << what << ": " << r.reason;
  const ExecCounters& k = r.counters;
  EXPECT_EQ(k.flops, p.flops) << what;
  EXPECT_EQ(k.useful_flops, p.useful_flops) << what;
  EXPECT_EQ(k.bricks_per_layer, p.bricks_per_layer) << what;
  EXPECT_EQ(k.bytes_loaded_input, p.bytes_input) << what;
  EXPECT_EQ(k.bytes_loaded_weight, p.bytes_weight) << what;
  EXPECT_EQ(k.bytes_loaded_intermediate, p.bytes_intermediate_load) << what;
  EXPECT_EQ(k.bytes_stored_intermediate, p.bytes_intermediate_store) << what;
  EXPECT_EQ(k.bytes_stored_output, p.bytes_output) << what;
  EXPECT_EQ(k.memo_lookups, p.memo_lookups) << what;
  EXPECT_EQ(k.memo_claims, p.atomics_compulsory) << what;
}

void check(int dims, int cases, uint32_t seed) {
  const GpuSpec* gpu = find_gpu_spec("A100-40GB");
  ASSERT_NE(gpu, nullptr);
  const model::CostModel m(*gpu);
  std::mt19937 rng(seed);
  Compared n;
  for (int i = 0; i < cases; ++i) {
    const test_support::RandomCase rc = test_support::random_case(rng, dims);
    for (Strategy s : {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized}) {
      Candidate c;
      c.group = rc.group;
      c.strategy = s;
      c.brick = test_support::random_brick(rng, dims);
      const std::string what = "case " + std::to_string(i) + " [" + rc.text + "] " + c.config_str();
      expect_agreement(rc.graph, c, m, what, &n);
    }
  }
  // Nearly every random candidate is feasible; a model that rejected them all would make this
  // test vacuous.
  EXPECT_GE(n.candidates, 3 * cases * 9 / 10) << n.skipped << " skipped";
}

TEST(ModelAgreement, Random2dCandidates) {
  check(2, 50, 77);
}

TEST(ModelAgreement, Random3dCandidates) {
  check(3, 30, 78);
}

// The structural ops' receptive rules (slice: a channel shift; channel shuffle and layer norm:
// all channels) in both implementations: a ShuffleNet unit and a ConvNeXt block, every valid
// group, each strategy, with and without channel blocks.
TEST(ModelAgreement, ThreeDBlockWithThinAndTallBricks) {
  // The bricks search.brick_depths adds (d != h): the executor counts what the model predicts.
  GraphBuilder b("r3d_block", TensorShape{1, 8, 6, 9, 10, 3});
  const int c1 = b.relu(b.batch_norm(b.conv3d(b.input(), 8, 3, 1, 1)));
  const int c2 = b.batch_norm(b.conv3d(c1, 8, 3, 1, 1));
  b.relu(b.add(c2, b.input()));
  const Graph g = fuse_for_inference(b.build());
  const model::CostModel m(*find_gpu_spec("A100-40GB"));
  Compared n;
  for (const BrickShape& brick :
       {BrickShape{1, 4, 4, 0}, BrickShape{2, 8, 8, 4}, BrickShape{8, 2, 2, 0}})
    for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
      Candidate c;
      c.group = Group{1, 3};
      c.strategy = s;
      c.brick = brick;
      expect_agreement(g, c, m, c.config_str(), &n);
    }
  EXPECT_EQ(n.candidates, 6) << n.skipped << " skipped";
}

TEST(ModelAgreement, StructuralOps) {
  GraphBuilder b("struct_ops", TensorShape{2, 8, 1, 11, 9, 2});
  const int x = b.relu(b.conv2d(b.input(), 8, 1, 1, 0));
  const int left = b.slice(x, 0, 4), right = b.slice(x, 4, 8);
  const int dw = b.conv2d(b.conv2d(right, 4, 1, 1, 0), 4, 3, 1, 1, 1, 4, true);
  const int sh = b.channel_shuffle(b.concat({left, dw}), 2);
  const int dw7 = b.conv2d(sh, 8, 7, 1, 3, 1, 8, true);
  const int ln = b.layer_norm(dw7, 1e-6f);
  const int pw = b.conv2d(b.relu(b.conv2d(ln, 16, 1, 1, 0, 1, 1, true)), 8, 1, 1, 0, 1, 1, true);
  b.add(pw, sh);
  const Graph g = fuse_for_inference(b.build());
  const model::CostModel m(*find_gpu_spec("A100-40GB"));
  Compared n;
  for (int first = 1; first < g.size(); ++first)
    for (int last = first; last < std::min(g.size(), first + 5); ++last) {
      if (!is_valid_group(g, Group{first, last}))
        continue;
      for (Strategy s : {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized})
        for (const BrickShape& brick : {BrickShape{1, 4, 3, 0}, BrickShape{1, 3, 5, 4}}) {
          Candidate c;
          c.group = Group{first, last};
          c.strategy = s;
          c.brick = brick;
          expect_agreement(g, c, m, group_layer_names(g, c.group) + " " + c.config_str(), &n);
        }
    }
  EXPECT_GE(n.candidates, 60) << n.skipped << " skipped";
}

// sub and div (kSame on both axes, two inputs made in the group) in every valid group.
TEST(ModelAgreement, SubAndDiv) {
  GraphBuilder b("sub_div", TensorShape{2, 8, 1, 11, 9, 2});
  const int x = b.relu(b.conv2d(b.input(), 8, 1, 1, 0));
  const int dw = b.conv2d(x, 8, 3, 1, 1, 1, 8, true);
  const int q = b.div(b.sub(dw, x), b.sigmoid(dw));
  b.conv2d(q, 8, 3, 1, 1, 1, 1, true);
  const Graph gr = fuse_for_inference(b.build());
  const model::CostModel m(*find_gpu_spec("A100-40GB"));
  Compared n;
  for (int first = 1; first < gr.size(); ++first)
    for (int last = first; last < std::min(gr.size(), first + 5); ++last) {
      if (!is_valid_group(gr, Group{first, last}))
        continue;
      for (Strategy s : {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized})
        for (const BrickShape& brick : {BrickShape{1, 4, 3, 0}, BrickShape{1, 3, 5, 4}}) {
          Candidate c;
          c.group = Group{first, last};
          c.strategy = s;
          c.brick = brick;
          expect_agreement(gr, c, m, group_layer_names(gr, c.group) + " " + c.config_str(), &n);
        }
    }
  EXPECT_GE(n.candidates, 40) << n.skipped << " skipped";
}

} // namespace
} // namespace brickdl::kernels
