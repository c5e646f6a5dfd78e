// Host checks of the generated kernels (no GPU needed, never skipped): the kernel templates run
// under the emulator (kernels/cuda/emulator.h) for small graphs and random shapes, and their
// output is compared with the reference ops; the memoized kernel's own counters are compared
// with the CPU merged executor's counts for the same candidate.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "core/zoo.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/emulator.h"
#include "kernels/merged_executor.h"
#include "kernels/validation.h"
#include "kernels/weights.h"
#include "model/cost_model.h"
#include "tests/device/device_cases.h"
#include "tests/device/emulated_group.h"
#include "tests/device/test_graphs.h"

namespace brickdl::cuda {
namespace {

constexpr uint64_t kSeed = 7;

struct Setup {
  Graph graph; // fused
  Group group;
};

Group named_group(const Graph& g, const std::string& first, const std::string& last) {
  const int a = g.find(first), b = g.find(last);
  EXPECT_GE(a, 1) << first;
  EXPECT_GE(b, a) << last;
  return {a, b};
}

struct Outcome {
  EmulatorResult emu;
  kernels::GroupResult reference; // the reference ops, layer by layer
  kernels::GroupResult cpu;       // the CPU merged executor, same strategy
  double worst = 0;               // max |emu - ref| / (atol + rtol·|ref|)
};

Outcome run(const Graph& g, const Candidate& c, const EmulatorOptions& eo = {},
            const CodegenOptions& co = {}) {
  const test_support::EmulatedGroup r = test_support::emulate_group(g, c, eo, kSeed, co);
  Outcome o;
  o.emu = r.emu;
  o.reference = r.reference;
  o.cpu = kernels::execute_group(g, c, r.input_ptrs(), r.weights);
  EXPECT_TRUE(o.reference.supported) << o.reference.reason;
  const auto& ref = o.reference.output.values();
  EXPECT_EQ(ref.size(), o.emu.output.size());
  for (size_t i = 0; i < ref.size() && i < o.emu.output.size(); ++i) {
    const double d = std::fabs(double{o.emu.output[i]} - ref[i]);
    const double r = std::isfinite(d) ? d / (1e-5 + 1e-4 * std::fabs(double{ref[i]})) : 1e30;
    o.worst = std::max(o.worst, r);
  }
  return o;
}

Candidate candidate(Group g, Strategy s, BrickShape b, int threads = 64) {
  return test_support::make_candidate(g, s, b, threads);
}

// Checks one candidate in all three strategies; memoized with concurrent workers, twice in a
// row (the second launch reuses the flags of the first through its epoch).
void check_all(const Graph& g, Group grp, BrickShape b, int threads = 64) {
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized, Strategy::kLayerwise}) {
    const Candidate c = candidate(grp, s, b, threads);
    SCOPED_TRACE(c.config_str());
    EmulatorOptions eo;
    if (s == Strategy::kMemoized) {
      eo.workers = 3;
      eo.runs = 2;
    }
    const Outcome o = run(g, c, eo);
    EXPECT_LE(o.worst, 1.0);
    EXPECT_FALSE(o.emu.timed_out);
    if (s == Strategy::kMemoized) {
      ASSERT_TRUE(o.cpu.supported) << o.cpu.reason;
      const auto& st = o.emu.stats;
      // Same bricks as the CPU executor: each needed intermediate brick claimed once.
      EXPECT_EQ(static_cast<int64_t>(st[dev::kStatClaims]), o.cpu.counters.memo_claims);
      EXPECT_EQ(
          static_cast<int64_t>(st[dev::kStatClaims] + st[dev::kStatHits] + st[dev::kStatConflicts]),
          o.cpu.counters.memo_lookups);
      EXPECT_EQ(static_cast<int64_t>(st[dev::kStatBricks]), o.cpu.counters.bricks_computed());
    }
  }
}

Graph chain_2d() {
  GraphBuilder b("chain2d", TensorShape{2, 3, 1, 13, 11, 2});
  int x = b.conv2d(b.input(), 5, 3, 1, 1, 1, 1, false, "c1");
  x = b.relu(x, "r1");
  x = b.conv2d(x, 6, 3, 2, 1, 1, 1, true, "c2");
  x = b.leaky_relu(x, 0.2f, "r2");
  x = b.conv2d(x, 4, 1, 1, 0, 1, 1, true, "c3");
  return fuse_for_inference(b.build());
}

TEST(Emulation, ConvChain2dAllStrategies) {
  const Graph g = chain_2d();
  const Group grp = named_group(g, "c1", "c3");
  check_all(g, grp, {1, 4, 4, 0});
  check_all(g, grp, {1, 3, 5, 2});       // ragged bricks, channel blocks
  check_all(g, grp, {1, 16, 16, 0}, 32); // brick larger than the tensor
}

TEST(Emulation, ConvChain3d) {
  GraphBuilder b("chain3d", TensorShape{1, 3, 7, 6, 9, 3});
  int x = b.input();
  for (int i = 1; i <= 3; ++i)
    x = b.relu(b.conv3d(x, 3, 3, 1, 1, 1, 1, true, "c" + std::to_string(i)));
  const Graph g = fuse_for_inference(b.build());
  check_all(g, named_group(g, "c1", "c3"), {4, 4, 4, 0});
  check_all(g, named_group(g, "c2", "c3"), {2, 3, 4, 0}, 96);
}

// 3D ResNet's basic block with the bricks search.brick_depths adds (issue 32): thin along depth,
// tall (deeper than the clip), with channel blocks.
TEST(Emulation, ThreeDBasicBlockWithThinAndTallBricks) {
  GraphBuilder b("r3d_block", TensorShape{1, 8, 5, 9, 10, 3});
  const int c1 = b.relu(b.batch_norm(b.conv3d(b.input(), 8, 3, 1, 1, 1, 1, false, "c1")));
  const int c2 = b.batch_norm(b.conv3d(c1, 8, 3, 1, 1, 1, 1, false, "c2"));
  b.relu(b.add(c2, b.input(), "add"));
  const Graph g = fuse_for_inference(b.build());
  const Group grp = named_group(g, "c1", "add");
  check_all(g, grp, {1, 4, 4, 0});
  check_all(g, grp, {8, 2, 2, 4});
  check_all(g, grp, {2, 8, 8, 0}, 96);
}

// The code generator allocates what the model counts for them at 3D ResNet-34's layer1 block
// (64 channels on 8 x 28 x 28): padded 1 x 4 x 4 on the same arena, memoized 4 x 8 x 8 and 8 x 4
// x 4 to 16-byte rounding (tests/model/cost_model_test.cpp works the sizes out by hand).
TEST(Codegen, ThinAndTallThreeDBricksAllocateWhatTheModelCounts) {
  GraphBuilder b("r3d_layer1", TensorShape{1, 64, 8, 28, 28, 3});
  const int c1 = b.relu(b.batch_norm(b.conv3d(b.input(), 64, 3, 1, 1, 1, 1, false, "c1")));
  const int c2 = b.batch_norm(b.conv3d(c1, 64, 3, 1, 1, 1, 1, false, "c2"));
  b.relu(b.add(c2, b.input(), "add"));
  const Graph g = fuse_for_inference(b.build());
  const GpuSpec& spec = *find_gpu_spec("A100-40GB");
  CodegenOptions o;
  o.max_smem_bytes = static_cast<int>(spec.smem_per_block_bytes);
  for (const auto& [s, brick] : {std::pair{Strategy::kPadded, BrickShape{1, 4, 4, 0}},
                                 std::pair{Strategy::kMemoized, BrickShape{4, 8, 8, 0}},
                                 std::pair{Strategy::kMemoized, BrickShape{8, 4, 4, 0}}}) {
    const Candidate c{named_group(g, "c1", "add"), brick, s, 256};
    SCOPED_TRACE(c.config_str());
    const model::Prediction p = model::CostModel(spec).predict(g, c);
    ASSERT_TRUE(p.feasible) << p.reason;
    const auto plan = plan_kernels(g, c, o); // (a reference into a temporary would dangle)
    const KernelLaunch& k = plan.launches[0];
    if (s == Strategy::kPadded) {
      EXPECT_EQ(k.smem_bytes, p.smem_bytes_per_block);
    } else {
      EXPECT_GE(k.smem_bytes, p.smem_bytes_per_block);
      EXPECT_LT(k.smem_bytes, p.smem_bytes_per_block + 48.0);
    }
  }
}

TEST(Emulation, BottleneckWithSkipAndDownsample) {
  // torchvision-style bottleneck: 1x1 -> 3x3 (stride 2) -> 1x1, downsample 1x1 stride 2, add.
  GraphBuilder b("bottleneck", TensorShape{2, 4, 1, 10, 10, 2});
  const int x = b.relu(b.conv2d(b.input(), 8, 3, 1, 1, 1, 1, false, "stem"), "stem_relu");
  int y = b.relu(b.batch_norm(b.conv2d(x, 4, 1, 1, 0, 1, 1, false, "conv1")));
  y = b.relu(b.batch_norm(b.conv2d(y, 4, 3, 2, 1, 1, 1, false, "conv2")));
  y = b.batch_norm(b.conv2d(y, 12, 1, 1, 0, 1, 1, false, "conv3"));
  const int d = b.batch_norm(b.conv2d(x, 12, 1, 2, 0, 1, 1, false, "downsample"));
  b.relu(b.add(y, d, "add"));
  const Graph g = fuse_for_inference(b.build());
  check_all(g, named_group(g, "conv1", "add"), {1, 2, 2, 0});
  check_all(g, named_group(g, "conv1", "add"), {1, 4, 4, 4});
}

TEST(Emulation, ResidualAddOfExternalSkip) {
  GraphBuilder b("basic", TensorShape{1, 6, 1, 9, 9, 2});
  const int x = b.relu(b.conv2d(b.input(), 6, 3, 1, 1, 1, 1, true, "stem"));
  int y = b.relu(b.conv2d(x, 6, 3, 1, 1, 1, 1, true, "conv1"));
  y = b.conv2d(y, 6, 3, 1, 1, 1, 1, true, "conv2");
  b.relu(b.add(y, x, "add"));
  const Graph g = fuse_for_inference(b.build());
  check_all(g, named_group(g, "conv1", "add"), {1, 4, 4, 0});
}

TEST(Emulation, PoolsGroupsAndDilation) {
  GraphBuilder b("mixed", TensorShape{2, 4, 1, 15, 14, 2});
  int x = b.conv2d(b.input(), 8, 3, 1, 2, 2, 2, true, "dil"); // dilation 2, 2 groups
  x = b.max_pool(x, 3, 2, 1, false, "max");
  x = b.conv2d(x, 8, 3, 1, 1, 1, 8, true, "dw"); // depthwise
  x = b.avg_pool(x, 2, 2, 0, false, "avg");      // excludes padding
  x = b.avg_pool(x, 3, 1, 1, true, "avg_pad");   // counts padding
  const Graph g = fuse_for_inference(b.build());
  check_all(g, named_group(g, "dil", "avg_pad"), {1, 2, 2, 0});
  check_all(g, named_group(g, "dil", "dw"), {1, 3, 3, 4}, 32);
}

TEST(Emulation, CeilModePool) {
  GraphBuilder b("ceil", TensorShape{1, 3, 1, 10, 10, 2});
  int x = b.relu(b.conv2d(b.input(), 4, 3, 1, 1, 1, 1, true, "c1"));
  x = b.max_pool(x, 3, 2, 0, true, "max");
  x = b.conv2d(x, 4, 3, 1, 1, 1, 1, true, "c2");
  const Graph g = fuse_for_inference(b.build());
  check_all(g, named_group(g, "c1", "c2"), {1, 2, 2, 0});
}

// Issue 13, item 7: the kernel templates propagate NaN like the reference (relu(NaN) = NaN, a
// max pool window holding a NaN gives NaN), on the host emulator; the same code runs on the GPU.
TEST(Emulation, NaNInTheInputLandsWhereTheReferencePutsIt) {
  GraphBuilder b("nan", TensorShape{1, 3, 1, 12, 12, 2});
  int x = b.relu(b.conv2d(b.input(), 4, 3, 1, 1, 1, 1, true, "c1"));
  x = b.max_pool(x, 3, 2, 1, false, "max");
  x = b.leaky_relu(b.conv2d(x, 4, 3, 1, 1, 1, 1, true, "c2"), 0.2f);
  const Graph g = fuse_for_inference(b.build());
  const Group grp = named_group(g, "c1", g.layer(g.output()).name);
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized, Strategy::kLayerwise}) {
    const Candidate c = candidate(grp, s, {1, 4, 4, 0});
    SCOPED_TRACE(c.config_str());
    const KernelPlan plan = plan_kernels(g, c);
    ASSERT_EQ(plan.input_ids.size(), 1u);
    kernels::Tensor in = kernels::random_tensor(g.layer(plan.input_ids[0]).out, kSeed, 0);
    in.at(0, 1, 0, 5, 6) = std::numeric_limits<float>::quiet_NaN();
    in.at(0, 0, 0, 0, 11) = std::numeric_limits<float>::quiet_NaN();
    const kernels::ModelWeights w = kernels::make_weights(g, kSeed, grp.first, grp.last);
    std::vector<std::vector<float>> weights, biases;
    for (int id : plan.layer_ids) {
      weights.push_back(w.at(id).weight);
      biases.push_back(w.at(id).bias);
    }
    const EmulatorResult emu = emulate_plan(g, plan, {in.data()}, weights, biases, {});
    Candidate lw = c;
    lw.strategy = Strategy::kLayerwise;
    const kernels::GroupResult ref = kernels::execute_group(g, lw, {&in}, w);
    const kernels::Comparison cmp = kernels::compare(emu.output, ref.output.values(), {});
    EXPECT_TRUE(cmp.ok()) << cmp.message;
    int64_t nans = 0;
    for (float v : emu.output)
      nans += std::isnan(v) ? 1 : 0;
    EXPECT_GT(nans, 0); // relu and the max pool kept them
  }
}

// Random chains: kernel, stride, padding, dilation, channels, image, brick and batch block sizes.
TEST(Emulation, RandomChains) {
  std::mt19937 rng(2024);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 8; ++trial) {
    const int dims = pick(0, 3) == 0 ? 3 : 2;
    const int64_t image = pick(6, dims == 3 ? 8 : 14);
    TensorShape in{pick(1, 3), pick(1, 4), dims == 3 ? image : 1, image, image + pick(0, 3), dims};
    GraphBuilder b("random", in);
    int x = b.input();
    const int depth = pick(2, 3);
    for (int l = 0; l < depth; ++l) {
      const test_support::RandomConv conv = test_support::random_conv(pick, dims, false);
      const int64_t ch = pick(1, 6);
      x = test_support::add_conv(b, x, dims, conv, ch, "l" + std::to_string(l));
      if (pick(0, 1))
        x = b.relu(x);
    }
    const Graph g = fuse_for_inference(b.build());
    const int bs = pick(1, 5);
    BrickShape brick{dims == 3 ? bs : 1, bs, pick(1, 6), pick(0, 1) ? 0 : 2, pick(1, 3)};
    const int threads = 32 * pick(1, 4);
    SCOPED_TRACE("trial " + std::to_string(trial) + " brick " + brick.str());
    check_all(g, Group{1, g.size() - 1}, brick, threads);
  }
}

// Batch blocks: a unit (padded) or a memoized brick covers nb images (the last block
// ragged), every image's regions or staging side by side in shared memory. Outputs match the
// reference; the launch has one block per batch block and brick of the last layer; the
// memoized claims, lookups and bricks equal the CPU executor's, which counts per batch block.
Graph chain_batch3() {
  GraphBuilder b("chain3", TensorShape{3, 3, 1, 13, 11, 2});
  int x = b.relu(b.conv2d(b.input(), 5, 3, 1, 1, 1, 1, false, "c1"));
  x = b.conv2d(x, 6, 3, 2, 1, 1, 1, true, "c2");
  b.conv2d(b.leaky_relu(x, 0.2f), 4, 1, 1, 0, 1, 1, true, "c3");
  return fuse_for_inference(b.build());
}

TEST(Emulation, BatchBlocks) {
  const Graph g = chain_batch3();
  const Group grp = named_group(g, "c1", "c3");
  for (int nb : {2, 3, 8}) {
    for (BrickShape brick : {BrickShape{1, 4, 4, 0, nb}, BrickShape{1, 3, 5, 2, nb}}) {
      const int images = std::min(nb, 3);
      for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
        const Candidate c = candidate(grp, s, brick);
        SCOPED_TRACE(c.config_str());
        const KernelLaunch k = plan_kernels(g, c).launches[0];
        EXPECT_EQ(k.desc.nb, images);
        EXPECT_EQ(k.desc.smem_floats, images * k.desc.smem_image);
        BrickShape one = brick;
        one.nb = 1;
        const KernelLaunch k1 = plan_kernels(g, candidate(grp, s, one)).launches[0];
        EXPECT_EQ(k.blocks, k1.blocks / 3 * ((3 + images - 1) / images));
      }
      check_all(g, grp, brick); // outputs, and the memoized counts against the CPU executor
      const Outcome o = run(g, candidate(grp, Strategy::kPadded, brick));
      ASSERT_TRUE(o.cpu.supported) << o.cpu.reason;
      EXPECT_EQ(o.cpu.counters.bricks_per_layer[2],
                plan_kernels(g, candidate(grp, Strategy::kPadded, brick)).launches[0].blocks);
    }
  }
}

// The model's shared memory per block is what the code generator allocates: padded, the same
// buffers placed on the same first-fit arena (core/smem_arena.h, holes included), regions
// sized for any brick (unclipped at the tensor's borders), streamed chunks and accumulators;
// memoized, the staging of one brick, up to 16-byte rounding; both per image of a batch
// block; fp32 elements in every precision (bf16 / fp16 store 16 bits in global memory only).
// Random chains of convs and pools in 2-D and 3-D, bricks, channel and batch blocks.
struct SmemAgreement {
  int compared = 0, streamed = 0, halved = 0; // candidates; streamed layers; of them, chunk < 32
};

// The model's and the code generator's shared memory for random chains, both given
// `budget_bytes` per block (it sizes memoized chunks: core/group.h memoized_stream_chunk);
// candidates the code generator refuses (no template, over the budget) are skipped.
SmemAgreement compare_smem(uint32_t seed, int budget_bytes) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  GpuSpec spec = *find_gpu_spec("H200");
  spec.smem_per_block_bytes = budget_bytes;
  const model::CostModel m(spec);
  CodegenOptions o;
  o.max_smem_bytes = budget_bytes;
  o.wgmma = true; // as on the H200: the weight tiles of the wgmma convs count on both sides
  SmemAgreement n;
  // Channels: narrow, or wider than the two chunk buffers, so that inputs stream.
  auto channels = [&] { return pick(0, 2) == 0 ? pick(65, 160) : pick(1, 40); };
  for (int trial = 0; trial < 80; ++trial) {
    const int dims = pick(0, 3) == 0 ? 3 : 2;
    const int64_t image = pick(5, dims == 3 ? 12 : 30);
    const TensorShape in{pick(1, 4), channels(),         dims == 3 ? image : 1,
                         image,      image + pick(0, 3), dims};
    const DType types[] = {DType::kF32, DType::kTF32, DType::kBF16, DType::kF16};
    GraphBuilder b("random", in, types[trial % 4]);
    const int depth = pick(1, 4);
    test_support::add_conv_pool_layers(b, b.input(), dims, depth, pick, channels);
    const Graph g = fuse_for_inference(b.build());
    const int bs = pick(1, 9);
    const BrickShape brick{dims == 3 ? bs : 1, bs, pick(1, 9), pick(0, 1) ? 0 : 8, pick(1, 3)};
    for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
      const Candidate c{{1, g.size() - 1}, brick, s, 128 << (trial % 3)}; // 1, 2, 4 warpgroups
      SCOPED_TRACE("trial " + std::to_string(trial) + " " + c.config_str());
      const model::Prediction p = m.predict(g, c);
      KernelPlan plan;
      try {
        plan = plan_kernels(g, c, o);
      } catch (const Unsupported& e) {
        continue; // an op without a template, or over the budget
      }
      const KernelLaunch& k = plan.launches[0];
      if (s == Strategy::kPadded) { // the same allocations on the same arena
        EXPECT_EQ(k.smem_bytes, p.smem_bytes_per_block);
      } else { // the staging of one image: its chunk buffers and total rounded to 16 bytes
        EXPECT_GE(k.smem_bytes, p.smem_bytes_per_block);
        EXPECT_LT(k.smem_bytes, p.smem_bytes_per_block + 48.0 * k.desc.nb);
      }
      ++n.compared;
      bool through_smem = false; // a streamed layer's partial sums pass through shared memory
      for (int l = 0; l < k.desc.num_layers; ++l) {
        const int chunk = k.desc.layers[l].stream_c;
        n.streamed += chunk > 0 ? 1 : 0;
        n.halved += chunk > 0 && chunk < kStreamChunkChannels ? 1 : 0;
        through_smem = through_smem || (chunk > 0 && !k.desc.layers[l].acc_regs);
      }
      // The model charges the accumulator traffic exactly when codegen keeps it in shared memory.
      EXPECT_EQ(p.smem_acc_bytes > 0, through_smem);
    }
  }
  return n;
}

TEST(Codegen, SharedMemoryMatchesTheModel) {
  // Sizes, not feasibility: a budget nothing reaches.
  const SmemAgreement all = compare_smem(77, 1 << 30);
  EXPECT_GE(all.compared, 120);
  EXPECT_GE(all.streamed, 20); // streamed buffers are part of what agrees
  EXPECT_EQ(all.halved, 0);
  // A 24 KiB budget: memoized chunks halve to fit, on both sides alike.
  const SmemAgreement tight = compare_smem(78, 24 * 1024);
  EXPECT_GE(tight.halved, 3);
  EXPECT_GE(tight.compared, 40);
}

// ResNet-50's second bottleneck block (layer1.1, identity shortcut), padded 8x8 bricks, batch
// 8, fp32: the block's input x (256 channels, 56x56) is read by conv1 (1x1, 256 -> 64) over
// the brick plus the one-position halo conv2 (3x3) needs, 10x10 positions, and by the
// residual add, which reads it from global memory; conv1 is x's only window reader, so x
// streams through two 32-channel chunk buffers (core/group.h stream_chunk_channels) instead of
// being staged whole. On the first-fit arena (floats): conv1's region 64 x 100 at 0 and the
// chunks 2 x 32 x 100 at 6,400 while conv1 runs; conv2's region 64 x 64 at 6,400 (the chunks'
// hole) while conv1's is read; conv3's 256 x 64 does not fit the 6,400 floats conv1 leaves, so
// it goes to 10,496: a peak of 26,880 floats = 107,520 bytes. Staged whole, x's copy and
// conv1's region took 128,000 bytes; held through conv3 for the add, 209,920 (issue 15).
// Where a streamed conv's accumulators live, on both sides: ResNet-50's layer4.1 conv2 .. add
// memoized 8x8/c64/n2 at 256 threads (conv2 and conv3 read 512 channels in chunks; 98 positions
// by 64 channels: one 128 x 32 wgmma tile per warpgroup) keeps them in registers on the H200 in
// tf32, so the model charges no accumulator traffic; bf16 and the A100 (mma.sync) pass the
// partial sums through shared memory, and the model charges them.
TEST(Codegen, AccumulatorsInRegistersAsTheModelCounts) {
  for (const auto& [gpu, t, in_registers] :
       {std::tuple{"H200", DType::kTF32, true}, std::tuple{"H200", DType::kBF16, false},
        std::tuple{"A100-40GB", DType::kTF32, false}}) {
    SCOPED_TRACE(std::string(gpu) + " " + dtype_name(t));
    ZooOptions zo;
    zo.batch = 8;
    zo.dtype = t;
    const Graph g = fuse_for_inference(build_zoo_model("resnet50", zo));
    const Candidate c{named_group(g, "layer4.1.conv2", "layer4.1.add"), BrickShape{1, 8, 8, 64, 2},
                      Strategy::kMemoized, 256};
    const GpuSpec& spec = *find_gpu_spec(gpu);
    CodegenOptions o;
    o.max_smem_bytes = static_cast<int>(spec.smem_per_block_bytes);
    o.wgmma = spec.wgmma_fraction > 0;
    const KernelPlan plan = plan_kernels(g, c, o);
    const dev::GroupDesc& d = plan.launches[0].desc;
    ASSERT_GT(d.layers[0].stream_c, 0);
    ASSERT_GT(d.layers[1].stream_c, 0);
    EXPECT_EQ(d.layers[0].acc_regs, in_registers ? 1 : 0);
    EXPECT_EQ(d.layers[1].acc_regs, in_registers ? 1 : 0);
    const model::Prediction p = model::CostModel(spec).predict(g, c);
    ASSERT_TRUE(p.feasible) << p.reason;
    EXPECT_EQ(p.smem_acc_bytes > 0, !in_registers);
  }
}

TEST(Codegen, ResNet50Block2StagesItsInputForConv1Only) {
  ZooOptions zo;
  zo.batch = 8;
  const Graph g = fuse_for_inference(build_zoo_model("resnet50", zo));
  const Candidate c{named_group(g, "layer1.1.conv1", "layer1.1.add"), BrickShape{1, 8, 8, 0, 1},
                    Strategy::kPadded, 256};
  const KernelPlan plan = plan_kernels(g, c);
  ASSERT_EQ(plan.launches.size(), 1u);
  const KernelLaunch& k = plan.launches[0];
  EXPECT_EQ(k.smem_bytes, (10496 + 256 * 64) * 4); // conv3's region ends the peak
  EXPECT_EQ(k.desc.layers[2].smem_out, 10496);
  EXPECT_EQ(k.desc.layers[0].stream_c, kStreamChunkChannels);
  // The add (the last layer) reads x, the group's only external input, from global memory.
  ASSERT_EQ(k.desc.num_external, 1);
  EXPECT_EQ(k.desc.ext[0].staged, 1);
  const dev::LayerDesc& add = k.desc.layers[k.desc.num_layers - 1];
  EXPECT_EQ(add.op, dev::kOpEltwise);
  EXPECT_EQ(add.src_kind[1], dev::kSrcExternal);
  const model::Prediction p = model::CostModel(*find_gpu_spec("H200")).predict(g, c);
  EXPECT_EQ(k.smem_bytes, p.smem_bytes_per_block);
  EXPECT_TRUE(p.feasible) << p.reason;
  // The model's loads of x: the staged copies (7 bricks per axis; conv1's region is the brick
  // and conv2's halo, clipped: 9 + 5 · 10 + 9 = 68 positions per axis) and the add's second
  // read of the brick from global memory (all of x once): 8 images · 256 channels · 4 bytes ·
  // (68 · 68 + 56 · 56).
  EXPECT_DOUBLE_EQ(p.bytes_input, 8.0 * 256 * 4 * (68 * 68 + 56 * 56));
}

// A chain of 2-3 convs with "same" padding (the add reads the chain's output shape), each with
// a relu, from x, ending in relu(add(chain, skip)); x and z (the same shape, x narrow enough
// to be staged whole: core/group.h stream_chunk_channels) are made before the group.
struct ResidualChain {
  struct Conv {
    int k, dil;
    int64_t ch;
  };
  TensorShape in;
  int64_t c = 1; // channels of x and z
  std::vector<Conv> convs;

  Graph build(bool skip_is_x) const {
    GraphBuilder b("residual", in);
    auto conv = [&](int t, int64_t ch, int k, int dil, const std::string& name) {
      const int pad = dil * (k - 1) / 2;
      return in.spatial_rank == 3 ? b.conv3d(t, ch, k, 1, pad, dil, 1, true, name)
                                  : b.conv2d(t, ch, k, 1, pad, dil, 1, true, name);
    };
    const int x = conv(b.input(), c, 3, 1, "x");
    const int z = conv(b.input(), c, 1, 1, "z");
    int y = x;
    for (size_t l = 0; l < convs.size(); ++l)
      y = b.relu(conv(y, convs[l].ch, convs[l].k, convs[l].dil, "c" + std::to_string(l)));
    b.relu(b.add(y, skip_is_x ? x : z, "add"));
    return fuse_for_inference(b.build());
  }
};

ResidualChain random_residual_chain(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  ResidualChain r;
  const int dims = pick(0, 3) == 0 ? 3 : 2;
  const int64_t image = pick(5, dims == 3 ? 8 : 14);
  r.in = {pick(1, 3), pick(1, 4), dims == 3 ? image : 1, image, image + pick(0, 3), dims};
  r.c = pick(1, 8);
  r.convs.resize(static_cast<size_t>(pick(2, 3)));
  for (ResidualChain::Conv& v : r.convs)
    v = {pick(0, 1) * 2 + 1, pick(0, 3) == 0 ? 2 : 1, pick(1, 12)};
  r.convs.back().ch = r.c;
  return r;
}

// Whether a region of a layer after the first (not the last: it writes global memory) takes
// part of external input 0's staged copy.
bool staged_copy_reused(const dev::GroupDesc& d) {
  const dev::ExternalDesc& x = d.ext[0];
  const int64_t lo = x.smem;
  const int64_t hi = lo + int64_t{x.dims.c} * x.region.ext[0] * x.region.ext[1] * x.region.ext[2];
  for (int l = 1; l < d.num_layers - 1; ++l) {
    const dev::LayerDesc& L = d.layers[l];
    const int64_t size = int64_t{L.out.c} * L.region.ext[0] * L.region.ext[1] * L.region.ext[2];
    if (L.smem_out < hi && lo < L.smem_out + size)
      return true;
  }
  return false;
}

// A residual add of the group's staged input x (the chain's own input, read again by the add
// at its end: an identity shortcut) reads x from global memory and does not keep x's staged
// copy alive: the kernel reserves the same shared memory as for the same chain whose add reads
// another tensor z of x's shape (never staged: only the add reads it), the model replays the
// same, and later regions reuse x's place in most cases; the outputs still match the reference
// (a read of the reused copy would not). Random 2-D / 3-D shapes, convs, bricks, channel and
// batch blocks.
TEST(Emulation, ResidualAddOfAStagedInputDoesNotExtendItsLife) {
  std::mt19937 rng(15);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const model::CostModel m(*find_gpu_spec("H200"));
  CodegenOptions o;
  o.max_smem_bytes = 1 << 30; // compare sizes, not feasibility
  int reused = 0;
  constexpr int kTrials = 16;
  for (int trial = 0; trial < kTrials; ++trial) {
    const ResidualChain chain = random_residual_chain(rng);
    const Graph gx = chain.build(true), gz = chain.build(false);
    const int bs = pick(1, 5);
    const BrickShape brick{chain.in.spatial_rank == 3 ? bs : 1, bs, pick(1, 6), pick(0, 1) ? 0 : 2,
                           pick(1, 2)};
    const Candidate cx{named_group(gx, "c0", "add"), brick, Strategy::kPadded, 64};
    const Candidate cz{named_group(gz, "c0", "add"), brick, Strategy::kPadded, 64};
    SCOPED_TRACE("trial " + std::to_string(trial) + " " + cx.config_str());
    const KernelLaunch kx = plan_kernels(gx, cx, o).launches[0];
    const KernelLaunch kz = plan_kernels(gz, cz, o).launches[0];
    EXPECT_EQ(kx.smem_bytes, kz.smem_bytes);
    EXPECT_EQ(kx.smem_bytes, m.predict(gx, cx).smem_bytes_per_block);
    EXPECT_EQ(kz.smem_bytes, m.predict(gz, cz).smem_bytes_per_block);
    ASSERT_EQ(kx.desc.ext[0].staged, 1);
    reused += staged_copy_reused(kx.desc) ? 1 : 0;
    EXPECT_LE(run(gx, cx).worst, 1.0);
  }
  EXPECT_GE(reused, kTrials / 2); // x's place is taken again, and the add is still right
}

// Inputs wider than the two chunk buffers (core/group.h kStreamChunkChannels, kStreamBuffers)
// that one conv reads stream through shared memory in channel chunks, double buffered (three
// passes with a ragged last chunk here, so both buffers are reused): intermediate and last
// layers, single-layer kernels included; outputs match the reference and the staging is two
// chunks, not the whole input. (tensor_core_test.cpp: the same on tensor cores.)
Graph wide_chain(DType t) {
  GraphBuilder b("wide", TensorShape{2, 80, 1, 9, 10, 2}, t);
  int y = b.relu(b.conv2d(b.input(), 16, 1, 1, 0, 1, 1, true, "reduce"));
  y = b.relu(b.conv2d(y, 16, 3, 1, 1, 1, 1, true, "mid"));
  y = b.conv2d(y, 72, 1, 1, 0, 1, 1, true, "expand");
  b.conv2d(y, 40, 3, 1, 1, 1, 1, true, "last"); // reads 72 channels: streamed when alone
  return fuse_for_inference(b.build());
}

TEST(Emulation, StreamedInputsInChannelChunks) {
  const Graph g = wide_chain(DType::kF32);
  const Group chain = named_group(g, "reduce", "expand");
  const KernelPlan plan = plan_kernels(g, candidate(chain, Strategy::kPadded, {1, 4, 4, 0}));
  const dev::GroupDesc& d = plan.launches[0].desc;
  EXPECT_EQ(d.layers[0].stream_c, kStreamChunkChannels);
  EXPECT_TRUE(d.ext[0].streamed);
  // Staged whole, the 80-channel 6x6 input region (4x4 brick, 3x3 halo of "mid") alone would
  // take 80 * 36 floats; streamed: "reduce"'s 16 x 36 region plus two 32 x 36 chunk buffers.
  EXPECT_EQ(d.smem_floats, 16 * 36 + 2 * 32 * 36);
  EXPECT_EQ(d.layers[0].stream_next, 32 * 36);
  check_all(g, chain, {1, 4, 4, 0});
  check_all(g, chain, {1, 3, 5, 8});
  const Group last = named_group(g, "last", "last"); // the last layer streams: accumulator
  const KernelPlan single = plan_kernels(g, candidate(last, Strategy::kPadded, {1, 4, 4, 0}));
  EXPECT_EQ(single.launches[0].desc.layers[0].stream_c, kStreamChunkChannels);
  check_all(g, last, {1, 4, 3, 16});
}

// The device test's batch-block cases (device_test.cpp), here under the emulator: ragged batch
// blocks, the persistent memoized grid, 512-thread blocks, and a 96-channel input streamed
// through the two chunk buffers, padded (its only reader is conv1) and memoized (conv1 alone,
// 20x20 bricks of 16 channels).
TEST(Emulation, BatchBlocksWithStreamedInputs) {
  const Graph g = test_support::bottleneck_block(TensorShape{3, 96, 1, 20, 20, 2}, 32);
  const Candidate streamed_padded = candidate({1, 3}, Strategy::kPadded, {1, 4, 4, 16, 2});
  const Candidate streamed_memo = candidate({1, 1}, Strategy::kMemoized, {1, 20, 20, 16});
  EXPECT_EQ(plan_kernels(g, streamed_padded).launches[0].desc.layers[0].stream_c,
            kStreamChunkChannels);
  EXPECT_EQ(plan_kernels(g, streamed_memo).launches[0].desc.layers[0].stream_c,
            kStreamChunkChannels);
  EmulatorOptions eo;
  eo.workers = 3;
  for (const Candidate& c :
       {candidate({1, 4}, Strategy::kPadded, {1, 8, 8, 0, 2}), streamed_padded,
        candidate({1, 4}, Strategy::kMemoized, {1, 8, 8, 16, 2}, 256),
        candidate({1, 4}, Strategy::kPadded, {1, 4, 4, 0, 3}, 512),
        candidate({1, 4}, Strategy::kMemoized, {1, 8, 8, 32, 3}, 512), streamed_memo}) {
    SCOPED_TRACE(c.config_str());
    const Outcome o = run(g, c, eo);
    EXPECT_LE(o.worst, 1.0);
    EXPECT_FALSE(o.emu.timed_out);
  }
}

// 128 channels, 12 x 11: "wide" (3x3 conv to 16 channels, relu), then "next" (3x3 to 8).
Graph wide_memo(int batch) {
  GraphBuilder b("wide_memo", TensorShape{batch, 128, 1, 12, 11, 2});
  const int y = b.relu(b.conv2d(b.input(), 16, 3, 1, 1, 1, 1, true, "wide"));
  b.conv2d(y, 8, 3, 1, 1, 1, 1, true, "next");
  return fuse_for_inference(b.build());
}

// Memoized: a conv whose brick stages more than core/group.h kStageWholeElements (here 128
// channels x 10 x 10) streams its input in chunks into a cb x brick accumulator; with a batch
// block of 2, each image streams through its own chunk buffer and accumulator.
TEST(Emulation, MemoizedStreamsWideStaging) {
  const Graph g = wide_memo(2);
  const Group grp = named_group(g, "wide", "next");
  const KernelPlan plan = plan_kernels(g, candidate(grp, Strategy::kMemoized, {1, 8, 8, 0}));
  EXPECT_EQ(plan.launches[0].desc.layers[0].stream_c, kStreamChunkChannels);
  EXPECT_EQ(plan.launches[0].desc.layers[1].stream_c, 0); // 16 channels: staged whole
  check_all(g, grp, {1, 8, 8, 0});
  check_all(g, grp, {1, 8, 8, 8});
  const KernelPlan two = plan_kernels(g, candidate(grp, Strategy::kMemoized, {1, 8, 8, 0, 2}));
  EXPECT_EQ(two.launches[0].desc.layers[0].stream_c, kStreamChunkChannels);
  EXPECT_EQ(two.launches[0].desc.smem_floats, 2 * plan.launches[0].desc.smem_floats);
  check_all(g, grp, {1, 8, 8, 0, 2});
}

// Memoized: when two 32-channel chunk buffers and the accumulator exceed the target's shared
// memory, the chunk halves (16, then 8) until they fit (core/group.h memoized_stream_chunk):
// more passes over the accumulator, the same outputs. 128 channels over a 10 x 10 region
// (8x8 brick, 3x3 conv) and a 16 x 64 accumulator, batch block 2: chunks of 32 take
// 2 · 2 · 32 · 100 + 2 · 1024 = 14,848 floats (58 KiB), of 16 6,400 + 2,048 = 8,448
// (33 KiB), of 8 5,248 (20.5 KiB). The model, given the same budget, sizes the same staging.
TEST(Emulation, MemoizedChunkHalvesToFitTheTarget) {
  const Graph g = wide_memo(3);
  const Group grp = named_group(g, "wide", "next");
  const Candidate c = candidate(grp, Strategy::kMemoized, {1, 8, 8, 0, 2});
  for (const auto& [kib, chunk] : std::vector<std::pair<int, int>>{{64, 32}, {40, 16}, {24, 8}}) {
    SCOPED_TRACE(std::to_string(kib) + " KiB");
    CodegenOptions co;
    co.max_smem_bytes = kib * 1024;
    const KernelPlan plan = plan_kernels(g, c, co);
    EXPECT_EQ(plan.launches[0].desc.layers[0].stream_c, chunk);
    GpuSpec spec = *find_gpu_spec("A100-40GB");
    spec.smem_per_block_bytes = co.max_smem_bytes;
    const model::Prediction p = model::CostModel(spec).predict(g, c);
    EXPECT_TRUE(p.feasible) << p.reason;
    EXPECT_GE(plan.launches[0].smem_bytes, p.smem_bytes_per_block);
    EXPECT_LT(plan.launches[0].smem_bytes, p.smem_bytes_per_block + 48.0 * 2);
    EXPECT_LE(run(g, c, {}, co).worst, 1.0);
    EmulatorOptions four;
    four.workers = 4;
    EXPECT_LE(run(g, c, four, co).worst, 1.0);
  }
}

TEST(Emulation, MemoizedCountsMatchTheory) {
  // Stride-1 chain: every brick of every intermediate layer is needed exactly once.
  GraphBuilder b("chain", TensorShape{1, 2, 1, 12, 12, 2});
  int x = b.input();
  for (int i = 1; i <= 3; ++i)
    x = b.conv2d(x, 2, 3, 1, 1, 1, 1, true, "c" + std::to_string(i));
  const Graph g = fuse_for_inference(b.build());
  const Candidate c = candidate({1, 3}, Strategy::kMemoized, {1, 4, 4, 0});
  const Outcome o = run(g, c); // one worker: no conflicts possible
  EXPECT_LE(o.worst, 1.0);
  EXPECT_EQ(o.emu.stats[dev::kStatClaims], 2u * 9u); // 2 intermediate layers x 3x3 bricks
  EXPECT_EQ(o.emu.stats[dev::kStatBricks], 3u * 9u);
  EXPECT_EQ(o.emu.stats[dev::kStatConflicts], 0u);
  // Each consumer brick looks at its 3x3 neighbourhood (clipped): 4 corners x 4, 4 edges x 6,
  // 1 centre x 9 = 49 lookups per consumer layer.
  EXPECT_EQ(o.emu.stats[dev::kStatClaims] + o.emu.stats[dev::kStatHits], 2u * 49u);
}

TEST(Codegen, DescriptorFieldListsCoverTheStructs) {
  dev::GroupDesc g;
  std::memset(&g, 0xff, sizeof g);
#define BRICKDL_ZERO(f) std::memset(&g.f, 0, sizeof g.f);
  BRICKDL_GROUP_DESC_FIELDS(BRICKDL_ZERO)
  for (auto& x : g.ext) {
#undef BRICKDL_ZERO
#define BRICKDL_ZERO(f) std::memset(&x.f, 0, sizeof x.f);
    BRICKDL_EXTERNAL_DESC_FIELDS(BRICKDL_ZERO)
  }
  for (auto& x : g.layers) {
    BRICKDL_LAYER_DESC_FIELDS(BRICKDL_ZERO)
  }
#undef BRICKDL_ZERO
  const auto* bytes = reinterpret_cast<const unsigned char*>(&g);
  for (size_t i = 0; i < sizeof g; ++i)
    ASSERT_EQ(bytes[i], 0) << "byte " << i << " not listed";
}

TEST(Codegen, SourceCarriesTheDescriptor) {
  const Graph g = chain_2d();
  const KernelPlan p =
      plan_kernels(g, candidate(named_group(g, "c1", "c3"), Strategy::kPadded, {1, 4, 4, 0}, 128));
  ASSERT_EQ(p.launches.size(), 1u);
  // At most 128 registers per thread: 64 K / (128 threads · 128) = 4 blocks per SM.
  EXPECT_NE(p.source.find("__launch_bounds__(128, 4) brickdl_group"), std::string::npos);
  EXPECT_NE(p.source.find("g.layers[1].s[1] = 2;"), std::string::npos); // c2: stride 2
  EXPECT_NE(p.source.find("g.layers[1].slope = 0x1.99999ap-3f;"), std::string::npos); // 0.2
  EXPECT_EQ(p.launches[0].blocks, 2 * 1 * 2 * 2); // batch 2, 7x6 output in 4x4 bricks
  const KernelPlan lw =
      plan_kernels(g, candidate(named_group(g, "c1", "c3"), Strategy::kLayerwise, {1, 4, 4, 0}));
  ASSERT_EQ(lw.launches.size(), 3u);
  EXPECT_EQ(lw.launches[1].inputs[0], (TensorSlot{false, 0})); // c2 reads c1's output
}

TEST(Codegen, UnsupportedCandidatesSayWhy) {
  GraphBuilder b("cat", TensorShape{1, 3, 1, 8, 8, 2});
  const int a = b.conv2d(b.input(), 4, 3, 1, 1, 1, 1, true, "a");
  b.concat({a, b.input()}, "cat");
  const Graph g = fuse_for_inference(b.build());
  try {
    plan_kernels(g, candidate({1, 2}, Strategy::kPadded, {1, 4, 4, 0}));
    FAIL() << "concat accepted";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("concat"), std::string::npos) << e.what();
  }
  GraphBuilder big("big", TensorShape{1, 512, 1, 64, 64, 2});
  big.conv2d(big.conv2d(big.input(), 512, 3, 1, 1), 512, 3, 1, 1);
  const Graph gb = fuse_for_inference(big.build());
  try {
    plan_kernels(gb, candidate({1, 2}, Strategy::kPadded, {1, 32, 32, 0}));
    FAIL() << "oversized shared memory accepted";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("KiB of shared memory"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace brickdl::cuda
