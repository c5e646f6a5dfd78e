// The merged executor: hand-counted cases, then property tests over random groups.
#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>

#include "core/error.h"
#include "core/graph_builder.h"
#include "kernels/merged_executor.h"
#include "kernels/reference.h"
#include "kernels/weights.h"
#include "tests/kernels/random_groups.h"

namespace brickdl::kernels {
namespace {

using test_support::random_brick;
using test_support::random_case;
using test_support::RandomCase;

Candidate make_candidate(Group g, Strategy s, BrickShape b = {}) {
  Candidate c;
  c.group = g;
  c.strategy = s;
  c.brick = b;
  return c;
}

// The group layer by layer with the plain reference ops.
Tensor reference_group(const Graph& g, const Group& grp, const std::vector<const Tensor*>& ext,
                       const ModelWeights& w) {
  const std::vector<int> ids = group_external_inputs(g, grp);
  std::vector<Tensor> out(static_cast<size_t>(grp.size()));
  for (int id = grp.first; id <= grp.last; ++id) {
    std::vector<const Tensor*> in;
    for (int p : g.layer(id).inputs) {
      if (grp.contains(p)) {
        in.push_back(&out[static_cast<size_t>(p - grp.first)]);
      } else {
        in.push_back(ext[static_cast<size_t>(std::find(ids.begin(), ids.end(), p) - ids.begin())]);
      }
    }
    out[static_cast<size_t>(id - grp.first)] = run_layer(g.layer(id), in, w.at(id));
  }
  return std::move(out.back());
}

// max |a − b| / max |b|; infinity when a has a NaN (an element never written).
double normwise_error(const Tensor& a, const Tensor& b) {
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

struct Fixture {
  Graph graph;
  Group group;
  std::vector<Tensor> ext;
  std::vector<const Tensor*> inputs;
  ModelWeights weights;

  Fixture(Graph g, Group grp, uint64_t seed = 1) : graph(std::move(g)), group(grp) {
    for (int id : group_external_inputs(graph, group))
      ext.push_back(random_tensor(graph.layer(id).out, seed, static_cast<uint64_t>(id)));
    for (const Tensor& t : ext)
      inputs.push_back(&t);
    weights = make_weights(graph, seed);
  }
  GroupResult run(Strategy s, BrickShape b = {}, int threads = 1) const {
    return execute_group(graph, make_candidate(group, s, b), inputs, weights, ExecOptions{threads});
  }
  Tensor reference() const { return reference_group(graph, group, inputs, weights); }
};

// Two 3x3 pad-1 convs on one 10x10 channel, bricks 4x4: the worked example of the counting
// conventions. Per axis the last layer has bricks [0,4) [4,8) [8,10).
Fixture two_conv_chain() {
  GraphBuilder b("chain", TensorShape{1, 1, 1, 10, 10, 2});
  const int c1 = b.conv2d(b.input(), 1, 3, 1, 1);
  b.conv2d(c1, 1, 3, 1, 1);
  return Fixture(b.build(), Group{1, 2});
}

TEST(MergedExecutor, PaddedCountsByHand) {
  const Fixture f = two_conv_chain();
  const GroupResult r = f.run(Strategy::kPadded, BrickShape{1, 4, 4, 0});
  ASSERT_TRUE(r.supported) << r.reason;
  const ExecCounters& k = r.counters;
  // 9 units. Layer 1 regions per axis for the 3 bricks: [-1,5)->[0,5) = 5, [3,9) = 6,
  // [7,11)->[7,10) = 3: sum 14, so sum of areas 14·14 = 196 (separable).
  // FLOPs: layer 1: 2·196·9 = 3528; layer 2: 2·100·9 = 1800.
  EXPECT_EQ(k.flops, 3528 + 1800);
  EXPECT_EQ(k.useful_flops, 2 * (900 + 900));
  EXPECT_EQ(k.bricks_per_layer, (std::vector<int64_t>{9, 9}));
  // Input regions: [0,5)->[0,6) = 6, [3,9)->[2,10) = 8, [7,10)->[6,10) = 4: 18·18 = 324.
  EXPECT_EQ(k.bytes_loaded_input, 324 * 4);
  EXPECT_EQ(k.bytes_loaded_weight, 9 * (9 + 9) * 4); // both layers' 9 weights, per unit
  EXPECT_EQ(k.bytes_loaded_intermediate, 0);
  EXPECT_EQ(k.bytes_stored_intermediate, 0);
  EXPECT_EQ(k.bytes_stored_output, 100 * 4);
  EXPECT_EQ(k.memo_lookups + k.memo_claims + k.memo_hits + k.memo_conflicts, 0);
}

TEST(MergedExecutor, MemoizedCountsByHand) {
  const Fixture f = two_conv_chain();
  for (int threads : {1, 4}) {
    const GroupResult r = f.run(Strategy::kMemoized, BrickShape{1, 4, 4, 0}, threads);
    const ExecCounters& k = r.counters;
    // Every layer-1 brick is needed and computed once: flops = useful = 2·(900 + 900).
    EXPECT_EQ(k.flops, 3600);
    EXPECT_EQ(k.bricks_per_layer, (std::vector<int64_t>{9, 9}));
    // Each layer-2 brick needs layer-1 regions [0,5) / [3,9) / [7,10) per axis, touching
    // 2 / 3 / 2 layer-1 bricks: 7·7 = 49 lookups; 9 claims; the rest hits or conflicts.
    EXPECT_EQ(k.memo_lookups, 49);
    EXPECT_EQ(k.memo_claims, 9);
    EXPECT_EQ(k.memo_hits + k.memo_conflicts, 40);
    if (threads == 1)
      EXPECT_EQ(k.memo_conflicts, 0);
    // Intermediate re-reads: regions 5/6/3 per axis: 14·14 = 196 elements.
    EXPECT_EQ(k.bytes_loaded_intermediate, 196 * 4);
    EXPECT_EQ(k.bytes_stored_intermediate, 100 * 4);
    // Layer-1 bricks read the input over [0,5) / [3,9) / [7,10): 14·14 = 196 elements.
    EXPECT_EQ(k.bytes_loaded_input, 196 * 4);
    EXPECT_EQ(k.bytes_loaded_weight, 18 * 9 * 4);
    EXPECT_EQ(k.bytes_stored_output, 100 * 4);
  }
}

TEST(MergedExecutor, LayerwiseCountsByHand) {
  const Fixture f = two_conv_chain();
  const ExecCounters k = f.run(Strategy::kLayerwise, {}, 2).counters;
  EXPECT_EQ(k.flops, 3600);
  EXPECT_EQ(k.bytes_loaded_input, 400);
  EXPECT_EQ(k.bytes_loaded_weight, 18 * 4);
  EXPECT_EQ(k.bytes_loaded_intermediate, 400);
  EXPECT_EQ(k.bytes_stored_intermediate, 400);
  EXPECT_EQ(k.bytes_stored_output, 400);
  EXPECT_EQ(k.bricks_computed(), 0);
  const auto m = k.to_map();
  EXPECT_EQ(m.at("bytes_loaded"), 400 + 72 + 400);
  EXPECT_EQ(m.at("bytes_stored"), 800);
  EXPECT_EQ(m.at("bricks_computed.1"), 0);
}

TEST(MergedExecutor, ChannelBlocksShareTheLastLayersWeights) {
  // 2 -> 4 -> 6 channels, 1x1 convs on 3x3, cb = 2: the last layer has 3 channel blocks, so
  // 3 units. Padded units compute layer 1 fully (8 weights) and a third of layer 2 (24 / 3).
  GraphBuilder b("cb", TensorShape{1, 2, 1, 3, 3, 2});
  const int c1 = b.conv2d(b.input(), 4, 1);
  b.conv2d(c1, 6, 1, 1, 0, 1, 1, true); // with bias: 6·4 + 6 = 30 params
  const Fixture f(b.build(), Group{1, 2});
  const ExecCounters p = f.run(Strategy::kPadded, BrickShape{1, 4, 4, 2}).counters;
  EXPECT_EQ(p.bricks_per_layer, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(p.bytes_loaded_weight, 3 * (8 + 10) * 4);
  // Layer 1 over all 4 channels per unit: 3 · 2·9·4·2 FLOPs; layer 2: 2·9·6·4.
  EXPECT_EQ(p.flops, 3 * 2 * 9 * 4 * 2 + 2 * 9 * 6 * 4);
  // Memoized: layer 1 has 2 channel blocks, each computed once; every layer-2 brick (3 of
  // them) reads all 4 input channels: 2 lookups each.
  const ExecCounters m = f.run(Strategy::kMemoized, BrickShape{1, 4, 4, 2}, 3).counters;
  EXPECT_EQ(m.bricks_per_layer, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.memo_claims, 2);
  EXPECT_EQ(m.memo_lookups, 6);
  EXPECT_EQ(m.bytes_loaded_weight, (2 * 4 + 3 * 10) * 4);
  EXPECT_EQ(m.bytes_loaded_intermediate, 3 * 4 * 9 * 4);
  EXPECT_EQ(m.flops, 2 * 9 * 4 * 2 + 2 * 9 * 6 * 4);
}

TEST(MergedExecutor, UnsupportedGroups) {
  GraphBuilder b("u", TensorShape{1, 2, 1, 6, 6, 2});
  const int c = b.conv2d(b.input(), 4, 3, 1, 1);
  const int gap = b.global_avg_pool(c);
  b.linear(b.flatten(gap), 3);
  const Fixture f(b.build(), Group{1, 4});
  EXPECT_FALSE(f.run(Strategy::kPadded).supported);
  const GroupResult m = f.run(Strategy::kMemoized);
  EXPECT_FALSE(m.supported);
  EXPECT_NE(m.reason.find("global_avg_pool"), std::string::npos) << m.reason;
  const GroupResult l = f.run(Strategy::kLayerwise);
  ASSERT_TRUE(l.supported);
  EXPECT_LE(normwise_error(l.output, f.reference()), 1e-6);
  // An intermediate read outside the group breaks the group contract.
  GraphBuilder b2("leak", TensorShape{1, 2, 1, 6, 6, 2});
  const int x = b2.conv2d(b2.input(), 2, 3, 1, 1);
  const int y = b2.conv2d(x, 2, 3, 1, 1);
  b2.add(x, y);
  const Graph g2 = b2.build();
  EXPECT_NE(unsupported_reason(g2, make_candidate(Group{1, 2}, Strategy::kPadded)), "");
  EXPECT_EQ(unsupported_reason(g2, make_candidate(Group{1, 3}, Strategy::kPadded)), "");
}

// ---- random groups -------------------------------------------------------------------------

// Counters that must not depend on the number of threads.
void expect_same_deterministic_counters(const ExecCounters& a, const ExecCounters& b,
                                        const std::string& what) {
  EXPECT_EQ(a.flops, b.flops) << what;
  EXPECT_EQ(a.bricks_per_layer, b.bricks_per_layer) << what;
  EXPECT_EQ(a.memo_claims, b.memo_claims) << what;
  EXPECT_EQ(a.memo_lookups, b.memo_lookups) << what;
  EXPECT_EQ(a.memo_hits + a.memo_conflicts, b.memo_hits + b.memo_conflicts) << what;
  EXPECT_EQ(a.bytes_loaded_input, b.bytes_loaded_input) << what;
  EXPECT_EQ(a.bytes_loaded_weight, b.bytes_loaded_weight) << what;
  EXPECT_EQ(a.bytes_loaded_intermediate, b.bytes_loaded_intermediate) << what;
  EXPECT_EQ(a.bytes_stored_intermediate, b.bytes_stored_intermediate) << what;
  EXPECT_EQ(a.bytes_stored_output, b.bytes_stored_output) << what;
}

void check_random_cases(int dims, int cases, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int i = 0; i < cases; ++i) {
    const RandomCase rc = random_case(rng, dims);
    const Fixture f(rc.graph, rc.group, static_cast<uint64_t>(i) + 1);
    const Tensor ref = f.reference();
    const int64_t out_elems = ref.numel();
    for (Strategy s : {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized}) {
      const BrickShape brick = random_brick(rng, dims);
      const std::string what = "case " + std::to_string(i) + " [" + rc.text + "] group " +
                               std::to_string(rc.group.first) + ".." +
                               std::to_string(rc.group.last) + " " + strategy_name(s) + " " +
                               brick.str();
      const GroupResult one = f.run(s, brick, 1);
      const GroupResult four = f.run(s, brick, 4);
      ASSERT_TRUE(one.supported) << what << ": " << one.reason;
      // The block kernels sum in the reference's order, so the results agree to rounding
      // (in practice exactly); NaN would mark an element no unit wrote.
      EXPECT_LE(normwise_error(one.output, ref), 1e-5) << what;
      EXPECT_LE(normwise_error(four.output, ref), 1e-5) << what;
      expect_same_deterministic_counters(one.counters, four.counters, what);
      const ExecCounters& k = one.counters;
      EXPECT_EQ(k.bytes_stored_output, out_elems * 4) << what;
      EXPECT_EQ(k.memo_lookups, k.memo_claims + k.memo_hits + k.memo_conflicts) << what;
      EXPECT_EQ(one.counters.memo_conflicts, 0) << what; // one worker never conflicts
      if (s == Strategy::kMemoized) {
        int64_t intermediate_bricks = 0;
        for (size_t l = 0; l + 1 < k.bricks_per_layer.size(); ++l)
          intermediate_bricks += k.bricks_per_layer[l];
        EXPECT_EQ(k.memo_claims, intermediate_bricks) << what;
        EXPECT_LE(k.flops, k.useful_flops) << what; // never recomputes
      }
    }
  }
}

TEST(MergedExecutorProperty, Random2dGroupsMatchTheReference) {
  check_random_cases(2, 60, 2024);
}

TEST(MergedExecutorProperty, Random3dGroupsMatchTheReference) {
  check_random_cases(3, 40, 3035);
}

TEST(MergedExecutorProperty, ResidualBlockWithExternalSkipAndPool) {
  // conv-bn-relu, conv-bn, add(skip from outside the group), relu, max pool: the group reads
  // the skip twice (first conv and the add), so it needs the hull of both regions.
  GraphBuilder b("res", TensorShape{2, 4, 1, 17, 15, 2});
  const int stem = b.conv_bn_relu(b.input(), 4, 3, 1, 1, 1, "stem");
  const int a = b.conv_bn_relu(stem, 4, 3, 1, 1, 1, "a");
  const int c = b.batch_norm(b.conv2d(a, 4, 3, 1, 1, 1, 1, false, "c.conv"), "c.bn");
  const int s = b.relu(b.add(c, stem));
  b.max_pool(s, 3, 2, 1);
  const Graph g = fuse_for_inference(b.build());
  const Group grp{g.find("a.conv"), g.size() - 1};
  ASSERT_EQ(grp.size(), 4); // conv(+bn+relu), conv(+bn), add(+relu), max_pool
  const Fixture f(g, grp);
  const Tensor ref = f.reference();
  for (int e : {1, 3, 4, 8, 32})
    for (Strategy st : {Strategy::kPadded, Strategy::kMemoized}) {
      const GroupResult r = f.run(st, BrickShape{1, e, e + 1, 2}, 4);
      EXPECT_LE(normwise_error(r.output, ref), 1e-5) << strategy_name(st) << " " << e;
    }
}

TEST(MergedExecutorProperty, ThreeDBasicBlockWithThinAndTallBricks) {
  // 3D ResNet's basic block (conv-bn-relu, conv-bn, add of the block input from outside the
  // group, relu) on a clip whose depth no brick divides, with the non-cubic bricks that
  // search.brick_depths lets the search choose (issue 32): thin (1 × 4 × 4, 2 × 8 × 8), tall
  // (8 × 4 × 4, deeper than the clip), channel blocks and batch blocks, padded and memoized.
  GraphBuilder b("r3d_block", TensorShape{2, 8, 5, 9, 10, 3});
  const int stem = b.relu(b.batch_norm(b.conv3d(b.input(), 8, 3, 1, 1, 1, 1, false, "stem")));
  const int c1 = b.relu(b.batch_norm(b.conv3d(stem, 8, 3, 1, 1, 1, 1, false, "c1")));
  const int c2 = b.batch_norm(b.conv3d(c1, 8, 3, 1, 1, 1, 1, false, "c2"));
  b.relu(b.add(c2, stem));
  const Graph g = fuse_for_inference(b.build());
  const Group grp{g.find("c1"), g.size() - 1};
  ASSERT_EQ(grp.size(), 3);
  const Fixture f(g, grp);
  const Tensor ref = f.reference();
  const BrickShape bricks[] = {{1, 4, 4, 0}, {2, 8, 8, 0},    {8, 4, 4, 0},
                               {1, 2, 2, 4}, {2, 4, 4, 0, 2}, {4, 8, 8, 4, 2}};
  for (const BrickShape& brick : bricks)
    for (Strategy st : {Strategy::kPadded, Strategy::kMemoized}) {
      const GroupResult r = f.run(st, brick, 3);
      ASSERT_TRUE(r.supported) << strategy_name(st) << " " << brick.str() << ": " << r.reason;
      EXPECT_LE(normwise_error(r.output, ref), 1e-5) << strategy_name(st) << " " << brick.str();
    }
}

TEST(MergedExecutorProperty, MemoizedConflictsHappenWithManyWorkers) {
  // A 16x16 conv output (one 16x16 brick, 64 -> 64 channels) upsampled by 4: all 16 output
  // bricks need that one intermediate brick. The observer holds the claim until another worker
  // has found the brick CLAIMED, so a conflict (and its wait) happens whatever the scheduler
  // does; without the hold, a loaded machine may run the claimer to the end before any other
  // worker starts. The wait is bounded so a broken conflict path fails instead of hanging.
  GraphBuilder b("conflict", TensorShape{1, 64, 1, 16, 16, 2});
  const int c1 = b.conv2d(b.input(), 64, 3, 1, 1);
  b.upsample(c1, 4);
  const Fixture f(b.build(), Group{1, 2});
  std::mutex m;
  std::condition_variable cv;
  int claims_seen = 0, conflicts_seen = 0;
  ExecOptions options{4};
  options.memo_observer = [&](MemoEvent e, int layer, int64_t brick) {
    EXPECT_EQ(layer, 0);
    EXPECT_EQ(brick, 0);
    std::unique_lock<std::mutex> lock(m);
    if (e == MemoEvent::kConflict) {
      conflicts_seen += 1;
      cv.notify_all();
      return;
    }
    claims_seen += 1;
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return conflicts_seen > 0; });
  };
  const GroupResult r =
      execute_group(f.graph, make_candidate(f.group, Strategy::kMemoized, BrickShape{1, 16, 16, 0}),
                    f.inputs, f.weights, options);
  EXPECT_EQ(r.counters.memo_claims, 1);
  EXPECT_EQ(claims_seen, 1);
  EXPECT_EQ(r.counters.memo_lookups, 16);
  EXPECT_EQ(r.counters.memo_hits + r.counters.memo_conflicts, 15);
  EXPECT_GE(r.counters.memo_conflicts, 1);
  EXPECT_EQ(r.counters.memo_conflicts, conflicts_seen);
  EXPECT_LE(normwise_error(r.output, f.reference()), 1e-5);
}

// The default thread count follows the affinity mask (mpirun binds a rank to a core), not
// the machine's CPU count.
TEST(UsableCpus, FollowsTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(usable_cpus(), CPU_COUNT(&saved));
  int first = 0;
  while (!CPU_ISSET(first, &saved))
    ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const int narrowed = usable_cpus();
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(narrowed, 1);
}

} // namespace
} // namespace brickdl::kernels
