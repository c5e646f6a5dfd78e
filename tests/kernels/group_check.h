#pragma once
// The merged executor against the reference over every group of a graph (tests of new ops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/group.h"
#include "kernels/merged_executor.h"
#include "kernels/reference.h"
#include "kernels/weights.h"

namespace brickdl::kernels::test_support {

// max |a − b| / max |b| (infinite for a NaN in a).
inline double normwise_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    if (std::isnan(a.data()[i]))
      return INFINITY;
    diff = std::max(diff, std::fabs(double{a.data()[i]} - b.data()[i]));
    scale = std::max(scale, std::fabs(double{b.data()[i]}));
  }
  return scale > 0 ? diff / scale : diff;
}

// Every group of the graph (all lengths), each strategy, several bricks (channel blocks too):
// the merged executor's output equals the reference's. Every op in `must_merge` that is in the
// graph, as a layer or as an epilogue (an activation op folded into its producer), runs inside a
// merged group of several layers at least once.
inline void expect_groups_match(const Graph& g, uint64_t seed, const std::set<OpKind>& must_merge) {
  const ModelWeights w = make_weights(g, seed);
  const Tensor input = random_tensor(g.input_shape(), seed, 0);
  std::vector<Tensor> full(static_cast<size_t>(g.size()));
  full[0] = input;
  for (int id = 1; id < g.size(); ++id) {
    std::vector<const Tensor*> in;
    for (int p : g.layer(id).inputs)
      in.push_back(&full[static_cast<size_t>(p)]);
    full[static_cast<size_t>(id)] = run_layer(g.layer(id), in, w.at(id));
  }
  const bool three_d = g.input_shape().spatial_rank == 3;
  const BrickShape bricks[] = {{1, 2, 3, 0, 1, 1}, {1, 4, 4, 2, 1, 1}, {1, 3, 5, 0, 2, 1}};
  int checked = 0;
  std::set<OpKind> merged_ops;      // ops run inside a merged group of several layers
  std::set<Activation> merged_acts; // and epilogues
  for (int first = 1; first < g.size(); ++first)
    for (int last = first; last < g.size(); ++last) {
      const Group grp{first, last};
      if (!is_valid_group(g, grp))
        continue;
      std::vector<const Tensor*> ext;
      for (int id : group_external_inputs(g, grp))
        ext.push_back(&full[static_cast<size_t>(id)]);
      for (Strategy s : {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized})
        for (BrickShape brick : bricks) {
          if (three_d)
            brick.d = 2;
          Candidate c;
          c.group = grp;
          c.strategy = s;
          c.brick = brick;
          const std::string what =
              group_layer_names(g, grp) + " " + strategy_name(s) + " " + brick.str();
          if (!unsupported_reason(g, c).empty())
            continue;
          const GroupResult r = execute_group(g, c, ext, w, ExecOptions{2});
          ASSERT_TRUE(r.supported) << what << ": " << r.reason;
          EXPECT_LE(normwise_error(r.output, full[static_cast<size_t>(last)]), 1e-5) << what;
          ++checked;
          for (int id = first; id <= last && s != Strategy::kLayerwise && last > first; ++id) {
            merged_ops.insert(g.layer(id).op);
            merged_acts.insert(g.layer(id).activation);
          }
        }
    }
  // The whole graph is one valid group, so every strategy runs it at least.
  EXPECT_GT(checked, 3 * g.size());
  for (OpKind op : must_merge) {
    const Activation act = op_activation(op);
    const bool present = std::any_of(g.layers().begin(), g.layers().end(), [&](const Layer& l) {
      return l.op == op || (act != Activation::kNone && l.activation == act);
    });
    if (present)
      EXPECT_TRUE(merged_ops.count(op) || (act != Activation::kNone && merged_acts.count(act)))
          << op_name(op) << " never ran in a merged group";
  }
}

} // namespace brickdl::kernels::test_support
