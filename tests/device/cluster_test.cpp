// Thread block cluster kernels on the host (never skipped): padded units computed by a cluster
// of CTAs, each a channel slice of every tensor, reading the other slices from the other CTAs'
// shared memory (kernels/cuda/templates/padded.cuh). The emulator runs a cluster's CTAs as host
// threads at once with a real barrier and separate shared memory, so a slice read from the wrong
// rank, before it is written or after it is overwritten shows in the output. Outputs are
// compared with the fp32 reference ops on random chains (convs with groups, strides,
// dilations, pools, residual adds; 2-D and 3-D; FMA and tensor-core precisions; batch blocks);
// the plans split shared memory and blocks as documented; unsupported clusters say why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "core/group.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/emulator.h"
#include "kernels/cuda/statuses.h"
#include "kernels/validation.h"
#include "model/cost_model.h"
#include "tests/device/emulated_group.h"
#include "tests/device/test_graphs.h"

namespace brickdl::cuda {
namespace {

constexpr uint64_t kSeed = 11;

// The emulated cluster candidate's output against both references (test_support::check_emulated).
void expect_matches_reference(const Graph& g, const Candidate& c) {
  SCOPED_TRACE(std::string(dtype_name(g.dtype())) + " " + c.config_str());
  EmulatorOptions eo;
  for (bool reverse : {false, true}) {
    eo.reverse_order = reverse;
    const test_support::EmulatedGroup r = test_support::emulate_group(g, c, eo, kSeed);
    ASSERT_TRUE(r.reference.supported) << r.reference.reason;
    ASSERT_EQ(r.plan.launches.size(), 1u);
    EXPECT_EQ(r.plan.launches[0].desc.cluster, c.brick.cl);
    test_support::expect_emulated_ok(g, r,
                                     std::string(dtype_name(g.dtype())) + " " + c.config_str());
  }
}

Candidate padded(Group grp, BrickShape b, int threads = 64) {
  return Candidate{grp, b, Strategy::kPadded, threads};
}

TEST(ClusterKernels, BottleneckInEveryPrecision) {
  for (DType t : {DType::kF32, DType::kTF32, DType::kBF16}) {
    const Graph g = test_support::bottleneck_block(TensorShape{2, 32, 1, 9, 10, 2}, 16, t);
    const Group grp{g.find("conv1"), g.find("add")};
    expect_matches_reference(g, padded(grp, {1, 4, 4, 0, 1, 2}));
    expect_matches_reference(g, padded(grp, {1, 9, 10, 0, 2, 4}, 96)); // whole images, nb 2
    // 32 channels over 8 ranks: slices of 8 (16 intermediate channels: ranks 2-7 hold none).
    expect_matches_reference(g, padded(grp, {1, 5, 3, 0, 1, 8}, 32));
    // 16 ranks (non-portable): ranks 4-15 hold no channel of the input, 2-15 none of conv1's.
    expect_matches_reference(g, padded(grp, {1, 4, 5, 0, 1, 16}, 32));
  }
}

// Every rank reads every other rank's slice: a 1x1 conv whose output channel 0 is the sum of
// all input channels shows a slice read from the wrong rank or not read at all.
TEST(ClusterKernels, EveryOutputChannelSeesEveryRanksSlice) {
  GraphBuilder b("wide", TensorShape{1, 24, 1, 6, 7, 2});
  int x = b.relu(b.conv2d(b.input(), 24, 3, 1, 1, 1, 1, true, "c1"));
  b.conv2d(x, 5, 1, 1, 0, 1, 1, true, "c2");
  const Graph g = fuse_for_inference(b.build());
  for (int cl : {2, 3, 4})
    expect_matches_reference(g, padded({1, 2}, {1, 4, 4, 0, 1, cl}));
  // 16 ranks, each holding 8 of 128 channels: every output reads all 16 slices.
  GraphBuilder w("wide16", TensorShape{1, 128, 1, 5, 6, 2});
  int y = w.relu(w.conv2d(w.input(), 128, 3, 1, 1, 1, 1, true, "c1"));
  w.conv2d(y, 5, 1, 1, 0, 1, 1, true, "c2");
  const Graph g16 = fuse_for_inference(w.build());
  const Candidate c16 = padded({1, 2}, {1, 5, 6, 0, 1, 16}, 32);
  const KernelPlan plan16 = plan_kernels(g16, c16);
  const dev::GroupDesc& d = plan16.launches[0].desc;
  EXPECT_EQ(d.cluster, 16);
  EXPECT_EQ(d.layers[0].cslice, 8);
  expect_matches_reference(g16, c16);
}

// Random chains of convs (groups, strides, dilations), pools and residual adds, 2-D and 3-D,
// fp32 (FMA) and tf32 / bf16 (tensor cores where the slices hold whole n8 tiles), bricks,
// batch blocks and cluster sizes.
TEST(ClusterKernels, RandomChains) {
  std::mt19937 rng(321);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const DType types[] = {DType::kF32, DType::kTF32, DType::kBF16};
  for (int trial = 0; trial < 9; ++trial) {
    const DType t = types[trial % 3];
    const int dims = pick(0, 2) == 0 ? 3 : 2;
    const int64_t image = pick(5, dims == 3 ? 7 : 12);
    TensorShape in{pick(1, 3), 8 * pick(1, 3),     dims == 3 ? image : 1,
                   image,      image + pick(0, 3), dims};
    GraphBuilder b("random", in, t);
    int x = b.input();
    const int depth = pick(2, 3);
    for (int l = 0; l < depth; ++l) {
      const test_support::RandomConv conv = test_support::random_conv(pick, dims, true, 4);
      const int64_t ch = 8 * pick(1, 4);
      const int y = test_support::add_conv(b, x, dims, conv, ch, "l" + std::to_string(l));
      // A residual add of the layer's input when the shapes allow, else maybe a relu.
      x = conv.stride == 1 && ch == b.shape(x).c && conv.pad * 2 == conv.dil * (conv.k - 1) &&
                  pick(0, 1)
              ? b.relu(b.add(y, x))
              : (pick(0, 1) ? b.relu(y) : y);
      if (dims == 2 && pick(0, 3) == 0)
        x = b.max_pool(x, 3, 1, 1);
    }
    const Graph g = fuse_for_inference(b.build());
    const int bs = pick(1, 6);
    const BrickShape brick{
        dims == 3 ? bs : 1, bs, pick(1, 7), 0, pick(1, 3), pick(0, 4) == 0 ? 16 : pick(2, 8)};
    SCOPED_TRACE("trial " + std::to_string(trial) + " brick " + brick.str());
    expect_matches_reference(g, padded(Group{1, g.size() - 1}, brick, 32 * pick(1, 4)));
  }
}

// The plan: one block per rank of every unit, each holding its slices of the intermediates
// (core/group.h cluster_slice) and its part of every chunk of the streamed input
// (cluster_stream_slice); the cluster dims are set at launch (none in the source).
TEST(ClusterKernels, PlanSplitsSharedMemoryAndBlocks) {
  const Graph g =
      test_support::bottleneck_block(TensorShape{2, 256, 1, 14, 14, 2}, 64, DType::kTF32);
  const Group grp{g.find("conv1"), g.find("add")};
  CodegenOptions o;
  o.max_smem_bytes = 1 << 30; // compare sizes, not feasibility
  const KernelPlan one = plan_kernels(g, padded(grp, {1, 14, 14, 0, 1, 1}, 256), o);
  for (int cl : {2, 4, 8}) {
    SCOPED_TRACE(cl);
    const KernelPlan p = plan_kernels(g, padded(grp, {1, 14, 14, 0, 1, cl}, 256), o);
    const KernelLaunch& k = p.launches[0];
    EXPECT_EQ(k.blocks, one.launches[0].blocks * cl);
    EXPECT_EQ(k.desc.cluster, cl);
    for (int l = 0; l < k.desc.num_layers; ++l)
      EXPECT_EQ(k.desc.layers[l].cslice, cluster_slice(k.desc.layers[l].out.c, cl));
    // conv1 streams the 256 input channels, each rank a part of every chunk.
    const int s = cluster_stream_slice(cl);
    EXPECT_EQ(k.desc.ext[0].cslice, s);
    EXPECT_EQ(k.desc.layers[0].stream_c, s * cl);
    EXPECT_GE(s * cl, kStreamChunkChannels);
    // At most every buffer once: two chunk buffers of s channels over 16x16, the slices of
    // conv1 (16x16), conv2 and conv3 (14x14).
    const int mid = 64 / cl, area = 16 * 16, box = 14 * 14;
    EXPECT_LE(k.smem_bytes, 4 * (2 * s * area + mid * area + mid * box + 256 / cl * box) + 64);
    EXPECT_LT(k.smem_bytes * cl, one.launches[0].smem_bytes * 3 / 2);
    EXPECT_EQ(p.source.find("__cluster_dims__"), std::string::npos);
    EXPECT_NE(p.source.find("#define BRICKDL_CLUSTER 1"), std::string::npos);
  }
  EXPECT_NE(one.source.find("#define BRICKDL_CLUSTER 0"), std::string::npos);
  EXPECT_EQ(one.source.find("__cluster_dims__"), std::string::npos);
}

// A streamed input in a cluster kernel: every chunk split over the ranks, partial sums in the
// layer's slice (or the last layer's accumulator), cluster barriers between passes; 2 ranks
// take 16 channels of a 32-channel chunk, 8 ranks 8 of 64 (80 channels: a ragged last chunk).
TEST(ClusterKernels, StreamedInputsSplitOverTheRanks) {
  for (DType t : {DType::kF32, DType::kTF32, DType::kBF16}) {
    GraphBuilder b("wide", TensorShape{2, 80, 1, 9, 10, 2}, t);
    int y = b.relu(b.conv2d(b.input(), 16, 1, 1, 0, 1, 1, true, "reduce"));
    b.conv2d(y, 48, 3, 2, 1, 1, 1, true, "expand");
    const Graph g = fuse_for_inference(b.build());
    for (int cl : {2, 8, 16}) {
      const Candidate c = padded({1, 2}, {1, 4, 4, 0, 2, cl});
      ASSERT_EQ(plan_kernels(g, c).launches[0].desc.layers[0].stream_c,
                cluster_stream_slice(cl) * cl);
      expect_matches_reference(g, c);
      const Candidate single = padded({1, 1}, {1, 3, 5, 0, 1, cl}, 96); // the accumulator
      ASSERT_GT(plan_kernels(g, single).launches[0].desc.layers[0].acc_smem, -1);
      expect_matches_reference(g, single);
    }
  }
}

TEST(ClusterKernels, UnsupportedClustersSayWhy) {
  const Graph g = test_support::bottleneck_block(TensorShape{1, 32, 1, 8, 8, 2}, 16);
  const Group grp{g.find("conv1"), g.find("add")};
  auto why = [&](const Candidate& c, const CodegenOptions& o = {}) -> std::string {
    try {
      plan_kernels(g, c, o);
    } catch (const Unsupported& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(why(Candidate{grp, {1, 4, 4, 0, 1, 2}, Strategy::kMemoized, 64}).find("padded"),
            std::string::npos);
  EXPECT_NE(why(Candidate{grp, {1, 4, 4, 0, 1, 2}, Strategy::kLayerwise, 64}).find("without"),
            std::string::npos);
  EXPECT_NE(why(padded(grp, {1, 4, 4, 16, 1, 2})).find("channel block 0"), std::string::npos);
  CodegenOptions sm80;
  sm80.max_cluster = 1;
  EXPECT_NE(why(padded(grp, {1, 4, 4, 0, 1, 2}), sm80).find("sm_90"), std::string::npos);
  CodegenOptions portable; // a target that runs only the portable cluster sizes
  portable.max_cluster = kMaxPortableCluster;
  EXPECT_NE(why(padded(grp, {1, 4, 4, 0, 1, 16}), portable).find("allows 8"), std::string::npos);
  EXPECT_EQ(why(padded(grp, {1, 4, 4, 0, 1, 16})), ""); // sm_90's default: up to 16
  EXPECT_EQ(why(padded(grp, {1, 4, 4, 0, 1, 2})), "");
}

// The model's shared memory per CTA and its thread blocks are what the code generator plans
// for a cluster unit (slices on the same first-fit arena, streamed chunk parts, the
// accumulator's slice); both refuse the same candidates. Random chains, 2-D and 3-D, narrow and
// streamed inputs, bricks, batch blocks, cluster sizes.
TEST(ClusterModel, SharedMemoryAndBlocksMatchTheCodeGenerator) {
  std::mt19937 rng(5150);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const model::CostModel m(*find_gpu_spec("H200"));
  CodegenOptions o;
  o.max_smem_bytes = 1 << 30; // compare sizes, not feasibility
  o.wgmma = true;             // as on the H200: the wgmma weight tiles count on both sides
  int compared = 0, streamed = 0;
  auto channels = [&] { return pick(0, 2) == 0 ? 8 * pick(9, 20) : pick(1, 40); };
  for (int trial = 0; trial < 60; ++trial) {
    const int dims = pick(0, 3) == 0 ? 3 : 2;
    const int64_t image = pick(5, dims == 3 ? 12 : 30);
    const DType types[] = {DType::kF32, DType::kTF32, DType::kBF16, DType::kF16};
    GraphBuilder b(
        "random",
        TensorShape{pick(1, 4), channels(), dims == 3 ? image : 1, image, image + pick(0, 3), dims},
        types[trial % 4]);
    const int depth = pick(1, 4);
    test_support::add_conv_pool_layers(b, b.input(), dims, depth, pick, channels);
    const Graph g = fuse_for_inference(b.build());
    const int bs = pick(1, 9);
    const Candidate c{
        {1, g.size() - 1},
        {dims == 3 ? bs : 1, bs, pick(1, 9), 0, pick(1, 3), pick(0, 4) == 0 ? 16 : pick(2, 8)},
        Strategy::kPadded,
        128};
    SCOPED_TRACE("trial " + std::to_string(trial) + " " + c.config_str());
    const model::Prediction p = m.predict(g, c);
    const KernelPlan plan = plan_kernels(g, c, o);
    const KernelLaunch& k = plan.launches[0];
    EXPECT_EQ(k.smem_bytes, p.smem_bytes_per_block);
    EXPECT_EQ(k.blocks, p.thread_blocks);
    EXPECT_GT(p.dsmem_bytes, 0);
    ++compared;
    streamed += k.desc.layers[0].stream_c > 0 ? 1 : 0;
  }
  EXPECT_EQ(compared, 60);
  EXPECT_GE(streamed, 10);
}

// The model's distributed shared memory by hand: x (16 channels, 8x8) -> conv1 1x1 -> conv2
// 3x3 pad 1, one 8x8 brick (the whole image), a cluster of 2: each CTA reads the other's 8
// channels of x (conv1's input) and of conv1's output (conv2's input), 8x8 positions each
// (regions clipped to the image): 2 CTAs x 2 tensors x 8 channels x 64 positions x 4 bytes.
// Clusters need sm_90: the A100 refuses them, and memoized units and channel blocks too.
TEST(ClusterModel, DistributedSharedMemoryAndRefusals) {
  GraphBuilder b("two", TensorShape{1, 16, 1, 8, 8, 2});
  b.conv2d(b.conv2d(b.input(), 16, 1, 1, 0, 1, 1, true, "c1"), 16, 3, 1, 1, 1, 1, true, "c2");
  const Graph g = fuse_for_inference(b.build());
  const model::CostModel h200(*find_gpu_spec("H200")), a100(*find_gpu_spec("A100-40GB"));
  const model::Prediction p = h200.predict(g, padded({1, 2}, {1, 8, 8, 0, 1, 2}));
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_DOUBLE_EQ(p.dsmem_bytes, 2.0 * 2 * 8 * 64 * 4);
  EXPECT_EQ(p.thread_blocks, 2);
  const model::Prediction one = h200.predict(g, padded({1, 2}, {1, 8, 8, 0, 1, 1}));
  EXPECT_DOUBLE_EQ(one.dsmem_bytes, 0);
  EXPECT_DOUBLE_EQ(one.l2_bytes, p.l2_bytes); // the unit's loads, once
  EXPECT_DOUBLE_EQ(one.flops, p.flops);
  auto reason = [&](const model::CostModel& m, const Candidate& c) {
    const model::Prediction q = m.predict(g, c);
    EXPECT_FALSE(q.feasible);
    return q.reason;
  };
  EXPECT_NE(reason(a100, padded({1, 2}, {1, 8, 8, 0, 1, 2})).find("sm_90"), std::string::npos);
  EXPECT_NE(reason(h200, padded({1, 2}, {1, 8, 8, 8, 1, 2})).find("channel block 0"),
            std::string::npos);
  EXPECT_NE(
      reason(h200, Candidate{{1, 2}, {1, 8, 8, 0, 1, 2}, Strategy::kMemoized, 64}).find("padded"),
      std::string::npos);
}

TEST(ClusterKernels, SliceRule) {
  EXPECT_EQ(cluster_slice(64, 1), 64);
  EXPECT_EQ(cluster_slice(64, 8), 8);
  EXPECT_EQ(cluster_slice(24, 4), 8); // rounded to whole tiles of 8: rank 3 holds none
  EXPECT_EQ(cluster_slice(100, 8), 13);
  EXPECT_EQ(cluster_slice(3, 4), 1);
  EXPECT_EQ(cluster_slice(256, 3), 88);
}

} // namespace
} // namespace brickdl::cuda
