// The model, the search space and the CPU executor agree on which candidates can run: all
// three ask the group rules and op traits of core/ (core/group.h, core/op_traits.h), and this
// test keeps it so. A candidate the model ranks but the executor refuses would be measured
// as `unsupported` and silently lose its place in the plan.
#include <gtest/gtest.h>

#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "kernels/merged_executor.h"
#include "model/cost_model.h"
#include "search/search_space.h"

namespace brickdl::search {
namespace {

// Every op, 2-D, small enough for any brick to fit on chip; fused, some layers stay apart
// (a batch-norm after a relu, a leaky relu after a pool), and a flat add after the flatten.
// The transposed conv and the pad run layer by layer only; the sigmoid, silu, clip and mul
// between them are brickable, and so are the slice, channel shuffle and layer norm before.
Graph every_op_graph() {
  GraphBuilder b("every_op", TensorShape{1, 8, 1, 8, 8, 2});
  const int c = b.conv2d(b.input(), 8, 3, 1, 1, 1, 2, false, "conv");
  const int r = b.relu(c, "relu");
  const int n = b.batch_norm(r, "bn");
  const int a = b.add(n, c, "add");
  const int cat = b.concat({a, r}, "cat");
  const int mp = b.max_pool(cat, 3, 1, 1, false, "max");
  const int k = b.leaky_relu(mp, 0.1f, "leaky");
  const int ap = b.avg_pool(k, 3, 1, 1, false, "avg");
  const int up = b.upsample(ap, 2, false, "up");
  Window w;
  w.kernel = {1, 3, 3};
  w.pad = {0, 1, 1};
  const int sc = b.slice(up, 2, 14, "slice");
  const int sh = b.channel_shuffle(sc, 3, "shuffle");
  const int ln = b.layer_norm(sh, 1e-6f, "ln");
  const int ct = b.conv_transpose(ln, 8, w, {0, 0, 0}, 2, true, "deconv");
  const int sg = b.sigmoid(ct, "sigmoid");
  const int sl = b.silu(sg, "silu");
  const int cl = b.clip(sl, 0.0f, 6.0f, "clip");
  const int ml = b.mul(cl, sg, "mul");
  const int pd = b.pad(ml, {0, 1, 0}, {0, 0, 2}, 0.0f, "pad");
  const int gap = b.global_avg_pool(pd, "gap");
  const int fl = b.flatten(gap, "flat");
  const int sum = b.add(fl, fl, "flat_add");
  b.linear(sum, 10, true, "fc");
  return fuse_for_inference(b.build());
}

TEST(Agreement, ModelSearchSpaceAndExecutorAgreeOnWhatCanBeBricked) {
  const Graph g = every_op_graph();
  const model::CostModel model(*find_gpu_spec("A100-40GB"));
  SearchSpaceConfig config;
  config.brick_sizes = {4};
  config.max_group_len = 4;
  const SearchSpace space = SearchSpace::build(g, config);
  int merged = 0, refused = 0;
  for (int first = 1; first < g.size(); ++first)
    for (int last = first; last < std::min(g.size(), first + 4); ++last) {
      const Group grp{first, last};
      if (!is_valid_group(g, grp))
        continue;
      for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
        Candidate c;
        c.group = grp;
        c.strategy = s;
        c.brick = BrickShape{1, 4, 4, 0};
        const std::string what = group_layer_names(g, grp) + " " + strategy_name(s);
        const std::string executor = kernels::unsupported_reason(g, c);
        const model::Prediction p = model.predict(g, c);
        if (executor.empty()) {
          ++merged;
          EXPECT_TRUE(p.feasible) << what << ": " << p.reason;
        } else {
          ++refused;
          EXPECT_FALSE(p.feasible) << what;
          EXPECT_EQ(p.reason, executor) << what;
        }
        // The space leaves out groups of several layers that only layerwise could run.
        const int in_space = space.find(grp);
        if (in_space < 0) {
          EXPECT_FALSE(executor.empty()) << what;
          EXPECT_GT(grp.size(), 1) << what;
        } else {
          EXPECT_EQ(space.group(in_space).mergeable, executor.empty()) << what;
        }
      }
    }
  EXPECT_GT(merged, 10);
  EXPECT_GT(refused, 6); // conv_transpose, pad, global pool, flatten, the flat add, linear
}

} // namespace
} // namespace brickdl::search
