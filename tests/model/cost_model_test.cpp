// Hand-derived counts of the analytic model for single layers and short chains.
//
// Every expected number is worked out in the comment above it from the conventions at the top
// of model/cost_model.h: per axis, brick j of the last layer covers [4j, min(4j + 3, E − 1)];
// a window layer needs [a·s − p, b·s − p + dil·(k − 1)] of its input, clipped; the sum over a
// grid of products of per-axis extents is the product of the per-axis sums.
#include <gtest/gtest.h>

#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "core/group.h"
#include "model/cost_model.h"

namespace brickdl::model {
namespace {

CostModel a100() {
  return CostModel(*find_gpu_spec("A100-40GB"));
}

Candidate candidate(int first, int last, Strategy s, BrickShape b) {
  Candidate c;
  c.group = {first, last};
  c.strategy = s;
  c.brick = b;
  return c;
}

BrickShape brick2d(int e, int cb = 0) {
  return BrickShape{1, e, e, cb};
}

// input 1x1x10x10 → conv 3x3 pad 1 (1 → 2 channels).
Graph one_conv() {
  GraphBuilder b("one_conv", TensorShape{1, 1, 1, 10, 10, 2});
  b.conv2d(0, 2, 3, 1, 1);
  return fuse_for_inference(b.build());
}

TEST(CostModelHand, SingleConvPadded) {
  const Graph g = one_conv();
  const Prediction p = a100().predict(g, candidate(1, 1, Strategy::kPadded, brick2d(4)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // Bricks per axis: [0,3] [4,7] [8,9] → 3 × 3 = 9 units, one channel block (cb = C = 2).
  EXPECT_EQ(p.thread_blocks, 9);
  ASSERT_EQ(p.bricks_per_layer.size(), 1u);
  EXPECT_EQ(p.bricks_per_layer[0], 9);
  // FLOPs = 2 · (2 · 10 · 10 outputs) · (1 input channel · 9 taps) = 3600, nothing redundant.
  EXPECT_DOUBLE_EQ(p.flops, 3600);
  EXPECT_DOUBLE_EQ(p.useful_flops, 3600);
  EXPECT_DOUBLE_EQ(p.redundant_flops, 0);
  // Input regions per axis: [0,3] → [-1,4] → [0,4] (5); [4,7] → [3,8] (6); [8,9] → [7,10] →
  // [7,9] (3): Σ = 14. bytes = 14 · 14 · 1 channel · 4 B = 784.
  EXPECT_DOUBLE_EQ(p.bytes_input, 784);
  // Weights: 2 · 1 · 9 = 18 parameters read by each of the 9 units: 18 · 9 · 4 B = 648.
  EXPECT_DOUBLE_EQ(p.bytes_weight, 648);
  EXPECT_DOUBLE_EQ(p.bytes_output, 2 * 100 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_load, 0);
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_store, 0);
  EXPECT_DOUBLE_EQ(p.l1_bytes, 784 + 648 + 800);
  EXPECT_DOUBLE_EQ(p.atomics_compulsory, 0);
}

TEST(CostModelHand, SingleConvLayerwiseAndLowerBound) {
  const Graph g = one_conv();
  const CostModel m = a100();
  const Prediction p = m.predict(g, candidate(1, 1, Strategy::kLayerwise, brick2d(4)));
  ASSERT_TRUE(p.feasible);
  // Input 100 · 4 B, weights 18 · 4 B, output 200 · 4 B, all cold: DRAM = the same 1272 B.
  EXPECT_DOUBLE_EQ(p.bytes_input, 400);
  EXPECT_DOUBLE_EQ(p.bytes_weight, 72);
  EXPECT_DOUBLE_EQ(p.bytes_output, 800);
  EXPECT_DOUBLE_EQ(p.dram_bytes, 1272);
  EXPECT_EQ(p.launches, 1);
  const LowerBound lb = m.lower_bound(g, {1, 1});
  EXPECT_DOUBLE_EQ(lb.dram_bytes, 1272);
  EXPECT_DOUBLE_EQ(lb.flops, 3600);
}

// Layerwise L1 / L2 bytes are what a library GEMM's tiles issue (model/strategies/
// layerwise.cpp library_tiles): the input once per channel tile, the weights once per
// position tile, the least over tiles of 64-256 a side and at most 256 × 128 accumulators.
// The bytes by kind stay the tensors once (the CPU executor's counts), and so does the time.
TEST(CostModelHand, LayerwiseL2CountsTheLibraryTiles) {
  const GpuSpec& gpu = *find_gpu_spec("A100-40GB");
  const double mib = 1 << 20;
  {
    // The 10 × 10 conv above: 100 positions, 2 channels, one tile of any shape.
    const Prediction p = a100().predict(one_conv(), candidate(1, 1, Strategy::kLayerwise, {}));
    EXPECT_DOUBLE_EQ(p.l1_bytes, 400 + 72 + 800);
    EXPECT_DOUBLE_EQ(p.l2_bytes, p.l1_bytes);
  }
  // 1x1 conv 256 → 512 over 32 × 32: input 1 MiB, weights 0.5 MiB, output 2 MiB. 1024
  // positions, 512 channels. Tiles (m × n): 128 × 256 reads the input twice and the weights 8
  // times (2 + 4 MiB); 256 × 128 four times each (4 + 2 MiB); every other shape more (64 × 256:
  // 2 + 8; 128 × 128: 4 + 4). L1 = 6 MiB + the output 2 MiB.
  GraphBuilder b("pointwise", TensorShape{1, 256, 1, 32, 32, 2});
  b.conv2d(0, 512, 1);
  const Graph pw = fuse_for_inference(b.build());
  const Prediction p = a100().predict(pw, candidate(1, 1, Strategy::kLayerwise, {}));
  ASSERT_TRUE(p.feasible);
  EXPECT_DOUBLE_EQ(p.bytes_input, 1 * mib);
  EXPECT_DOUBLE_EQ(p.bytes_weight, 0.5 * mib);
  EXPECT_DOUBLE_EQ(p.bytes_output, 2 * mib);
  EXPECT_DOUBLE_EQ(p.l1_bytes, 8 * mib);
  EXPECT_DOUBLE_EQ(p.l2_bytes, 8 * mib);
  // The L2 time is the operands once, 3.5 MiB, at the spec's L2 bandwidth (efficiency 0.7).
  EXPECT_NEAR(p.t_l2_ms, 3.5 * mib / (gpu.l2_bandwidth_gbs * 1e9 * 0.7) * 1e3, 1e-12);
  // Depthwise 3x3 over 256 channels: one channel per group, so the input is read once; the
  // weights (256 · 9 · 4 B = 9216 B) once per 256 positions: 4 times.
  GraphBuilder d("depthwise", TensorShape{1, 256, 1, 32, 32, 2});
  d.conv2d(0, 256, 3, 1, 1, 1, 256);
  const Prediction q =
      a100().predict(fuse_for_inference(d.build()), candidate(1, 1, Strategy::kLayerwise, {}));
  EXPECT_DOUBLE_EQ(q.l1_bytes, 1 * mib + 4 * 9216 + 1 * mib);
  // Ops other than conv, conv_transpose and linear stream their tensors once: a relu after
  // the pointwise conv adds 2 MiB in and 2 MiB out.
  GraphBuilder r("pointwise_relu", TensorShape{1, 256, 1, 32, 32, 2});
  r.relu(r.conv2d(0, 512, 1));
  const Graph pr = r.build(); // unfused: the relu is a layer of its own
  EXPECT_DOUBLE_EQ(a100().predict(pr, candidate(1, 2, Strategy::kLayerwise, {})).l1_bytes,
                   12 * mib);
}

// A streamed conv (core/group.h memoized_stream_chunk) pays per pass: a barrier beyond the
// first, and its accumulator reloaded by every pass but the first and stored by every one but
// the last, at the spec's shared-memory bandwidth, in the compute term. 3x3 conv 128 -> 16
// over 12 x 11, two images, memoized 8x8 bricks: a brick stages 128 channels x 10 x 10 =
// 12,800 elements (over kStageWholeElements), so it streams 32-channel chunks: 4 passes into
// a 16 x 8 x 8 = 1,024-element accumulator. 2 x 2 bricks per image, 8 in all: barriers
// 2 x 8 + 3 x 8 = 40; accumulator bytes 2 x 3 x 1,024 x 4 B x 8 = 196,608.
TEST(CostModelHand, StreamedPassesPayBarriersAndAccumulatorTraffic) {
  GraphBuilder b("wide", TensorShape{2, 128, 1, 12, 11, 2});
  b.conv2d(0, 16, 3, 1, 1);
  const Graph g = fuse_for_inference(b.build());
  const Candidate c = candidate(1, 1, Strategy::kMemoized, brick2d(8));
  const GpuSpec& gpu = *find_gpu_spec("A100-40GB");
  const Prediction p = CostModel(gpu).predict(g, c);
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(p.thread_blocks, 8);
  EXPECT_DOUBLE_EQ(p.barriers, 40);
  EXPECT_DOUBLE_EQ(p.smem_acc_bytes, 196608);
  // 8 blocks on 108 SMs: the traffic at 8 / 108 of the aggregate bandwidth.
  EXPECT_NEAR(p.t_smem_ms, 196608 / (gpu.smem_bandwidth_gbs * 1e9 * 8 / 108) * 1e3, 1e-15);
  GpuSpec free_smem = gpu;
  free_smem.smem_bandwidth_gbs = 0; // not charged
  const Prediction q = CostModel(free_smem).predict(g, c);
  EXPECT_EQ(q.t_smem_ms, 0);
  EXPECT_NEAR(p.t_compute_ms - q.t_compute_ms, p.t_smem_ms, 1e-15);
  // The same conv staged whole (64 channels: 6,400 elements) pays nothing of the kind.
  GraphBuilder n("narrow", TensorShape{2, 64, 1, 12, 11, 2});
  n.conv2d(0, 16, 3, 1, 1);
  const Prediction r = CostModel(gpu).predict(fuse_for_inference(n.build()), c);
  EXPECT_EQ(r.smem_acc_bytes, 0);
  EXPECT_DOUBLE_EQ(r.barriers, 16);
  // Padded streams the same input in the same chunks into the same accumulator (the last
  // layer's cb x brick): one barrier per layer per unit (8) plus 3 x 8, the same bytes.
  const Prediction pd = CostModel(gpu).predict(g, candidate(1, 1, Strategy::kPadded, brick2d(8)));
  ASSERT_TRUE(pd.feasible) << pd.reason;
  EXPECT_DOUBLE_EQ(pd.barriers, 32);
  EXPECT_DOUBLE_EQ(pd.smem_acc_bytes, 196608);
}

// The compute time follows the precision's peak, for merged and library (layerwise) kernels
// alike: fp32 the FP32 FMA peak, tf32 the TF32 tensor peak, bf16 / fp16 their tensor peaks.
TEST(CostModelHand, ComputeTimeScalesWithThePrecisionsPeak) {
  const GpuSpec& gpu = *find_gpu_spec("A100-40GB");
  auto conv = [](DType t) { // 8 output channels: one tensor-core tile (generated kernels)
    GraphBuilder b("one_conv", TensorShape{1, 1, 1, 10, 10, 2}, t);
    b.conv2d(0, 8, 3, 1, 1);
    return fuse_for_inference(b.build());
  };
  for (Strategy s : {Strategy::kPadded, Strategy::kLayerwise}) {
    SCOPED_TRACE(strategy_name(s));
    const Candidate c = candidate(1, 1, s, brick2d(4));
    const Prediction f32 = a100().predict(conv(DType::kF32), c);
    const Prediction t32 = a100().predict(conv(DType::kTF32), c);
    const Prediction b16 = a100().predict(conv(DType::kBF16), c);
    const Prediction f16 = a100().predict(conv(DType::kF16), c);
    ASSERT_TRUE(f32.feasible && t32.feasible && b16.feasible && f16.feasible);
    ASSERT_GT(f32.t_compute_ms, 0);
    EXPECT_DOUBLE_EQ(f32.t_compute_ms / t32.t_compute_ms, gpu.tf32_tflops / gpu.fp32_tflops);
    EXPECT_DOUBLE_EQ(f32.t_compute_ms / b16.t_compute_ms, gpu.bf16_tflops / gpu.fp32_tflops);
    EXPECT_DOUBLE_EQ(f32.t_compute_ms / f16.t_compute_ms, gpu.fp16_tflops / gpu.fp32_tflops);
    EXPECT_DOUBLE_EQ(f32.flops, b16.flops); // the same work, only the rate differs
  }
  // A spec whose BF16 rate differs from its FP16 rate: bf16 follows its own field.
  GpuSpec custom = gpu;
  custom.bf16_tflops = gpu.fp16_tflops / 2;
  const Candidate c = candidate(1, 1, Strategy::kLayerwise, brick2d(4));
  EXPECT_DOUBLE_EQ(CostModel(custom).predict(conv(DType::kBF16), c).t_compute_ms,
                   2 * CostModel(custom).predict(conv(DType::kF16), c).t_compute_ms);
}

// The merged kernels' tensor-core FLOPs are charged at the fraction of the peak their
// instruction reaches: on Hopper wgmma (wgmma_fraction) in blocks of whole warpgroups, else
// mma.sync (mma_sync_fraction, about half of wgmma's); the A100 has no wgmma. The library's
// layerwise kernels and fp32 (FMA) are not charged.
TEST(CostModelHand, MergedTensorFlopsAtTheirInstructionsFraction) {
  const GpuSpec& h200 = *find_gpu_spec("H200");
  EXPECT_DOUBLE_EQ(h200.mma_sync_fraction, 0.5);
  EXPECT_DOUBLE_EQ(h200.wgmma_fraction, 0.75);
  EXPECT_DOUBLE_EQ(find_gpu_spec("A100-40GB")->mma_sync_fraction, 1.0);
  EXPECT_DOUBLE_EQ(find_gpu_spec("A100-40GB")->wgmma_fraction, 0.0);
  GpuSpec whole = h200;
  whole.mma_sync_fraction = 1.0;
  whole.wgmma_fraction = 1.0;
  for (DType t : {DType::kTF32, DType::kF32}) {
    GraphBuilder bt("conv", TensorShape{1, 16, 1, 32, 32, 2}, t);
    bt.conv2d(0, 16, 3, 1, 1);
    const Graph g = fuse_for_inference(bt.build());
    for (Strategy s : {Strategy::kPadded, Strategy::kLayerwise})
      for (int threads : {96, 128, 256}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + strategy_name(s) + " t" +
                     std::to_string(threads));
        Candidate c = candidate(1, 1, s, brick2d(8));
        c.threads = threads;
        const Prediction part = CostModel(h200).predict(g, c);
        const Prediction full = CostModel(whole).predict(g, c);
        ASSERT_TRUE(part.feasible && full.feasible);
        const bool charged = t == DType::kTF32 && s == Strategy::kPadded;
        const double cost = !charged ? 1.0 : threads % 128 == 0 ? 1 / 0.75 : 2.0;
        EXPECT_DOUBLE_EQ(part.t_compute_ms, cost * full.t_compute_ms);
        EXPECT_DOUBLE_EQ(part.flops, full.flops);
      }
  }
}

// A merged kernel whose convs run on wgmma holds two 1 KiB weight tiles per warpgroup in shared
// memory (core/group.h wgmma_tile_floats); mma.sync blocks, fp32 (FMA) and targets without wgmma
// do not.
TEST(CostModelHand, WgmmaWeightTilesCountInSharedMemory) {
  GpuSpec none = *find_gpu_spec("H200");
  none.wgmma_fraction = 0;
  for (DType t : {DType::kTF32, DType::kF32}) {
    GraphBuilder bt("conv", TensorShape{1, 16, 1, 32, 32, 2}, t);
    bt.conv2d(0, 16, 3, 1, 1);
    const Graph g = fuse_for_inference(bt.build());
    for (int threads : {96, 128, 512}) {
      Candidate c = candidate(1, 1, Strategy::kPadded, brick2d(8));
      c.threads = threads;
      const double with = CostModel(*find_gpu_spec("H200")).predict(g, c).smem_bytes_per_block;
      const double without = CostModel(none).predict(g, c).smem_bytes_per_block;
      const double tiles = t == DType::kTF32 && threads % 128 == 0 ? 2048.0 * threads / 128 : 0;
      EXPECT_DOUBLE_EQ(with - without, tiles) << dtype_name(t) << " t" << threads;
    }
  }
}

// Merged kernels run a conv whose output channels do not fill tiles of 8 (here 2, or a
// depthwise conv) on FP32 FMA units whatever the precision (core/group.h
// conv_on_tensor_cores): its compute time stays at the FP32 peak in tf32, while cuDNN's
// (layerwise) follows the tensor peak.
TEST(CostModelHand, ConvsOffTensorCoresKeepTheFp32Peak) {
  auto graph = [](DType t, int64_t cout, int groups) {
    GraphBuilder b("conv", TensorShape{1, 8, 1, 10, 10, 2}, t);
    b.conv2d(0, cout, 3, 1, 1, 1, groups);
    return fuse_for_inference(b.build());
  };
  const GpuSpec& gpu = *find_gpu_spec("A100-40GB");
  for (const auto& [cout, groups] : {std::pair<int64_t, int>{2, 1}, {8, 8}}) {
    SCOPED_TRACE(std::to_string(cout) + " channels, " + std::to_string(groups) + " groups");
    for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
      const Candidate c = candidate(1, 1, s, brick2d(4));
      const Prediction f32 = a100().predict(graph(DType::kF32, cout, groups), c);
      const Prediction t32 = a100().predict(graph(DType::kTF32, cout, groups), c);
      ASSERT_GT(f32.t_compute_ms, 0);
      EXPECT_DOUBLE_EQ(t32.t_compute_ms, f32.t_compute_ms) << strategy_name(s);
      EXPECT_DOUBLE_EQ(t32.fma_flops, t32.flops);
    }
    const Candidate lw = candidate(1, 1, Strategy::kLayerwise, brick2d(4));
    EXPECT_DOUBLE_EQ(a100().predict(graph(DType::kF32, cout, groups), lw).t_compute_ms /
                         a100().predict(graph(DType::kTF32, cout, groups), lw).t_compute_ms,
                     gpu.tf32_tflops / gpu.fp32_tflops);
  }
  // A channel block of 4 (memoized bricks every layer by it) leaves an 8-channel conv off the
  // tensor cores too; blocks of 8 put it on.
  const Graph g8 = graph(DType::kTF32, 16, 1);
  Candidate c4 = candidate(1, 1, Strategy::kMemoized, brick2d(4));
  c4.brick.cb = 4;
  EXPECT_DOUBLE_EQ(a100().predict(g8, c4).fma_flops, a100().predict(g8, c4).flops);
  c4.brick.cb = 8;
  EXPECT_DOUBLE_EQ(a100().predict(g8, c4).fma_flops, 0);
}

// input 1x1x10x10 → conv1 3x3 pad 1 (1 → 2) → conv2 3x3 pad 1 (2 → 1).
Graph two_convs() {
  GraphBuilder b("two_convs", TensorShape{1, 1, 1, 10, 10, 2});
  const int c1 = b.conv2d(0, 2, 3, 1, 1);
  b.conv2d(c1, 1, 3, 1, 1);
  return fuse_for_inference(b.build());
}

TEST(CostModelHand, TwoConvPadded) {
  const Prediction p = a100().predict(two_convs(), candidate(1, 2, Strategy::kPadded, brick2d(4)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // conv1 regions per axis (from conv2 bricks [0,3] [4,7] [8,9]): [0,4] [3,8] [7,9], Σ = 14.
  // input regions (from those): [0,5] [2,9] [6,9], Σ = 6 + 8 + 4 = 18.
  // conv1: 14 · 14 positions · 2 channels · (2 · 1 · 9) = 7056; conv2: 100 · 1 · (2 · 2 · 9)
  // = 3600. Executed 10656; useful 3600 + 3600 = 7200; redundant 3456.
  EXPECT_DOUBLE_EQ(p.flops, 10656);
  EXPECT_DOUBLE_EQ(p.useful_flops, 7200);
  EXPECT_DOUBLE_EQ(p.redundant_flops, 3456);
  EXPECT_DOUBLE_EQ(p.bytes_input, 18 * 18 * 4);
  // Weights: (18 + 18) per unit · 9 units · 4 B.
  EXPECT_DOUBLE_EQ(p.bytes_weight, 36 * 9 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_output, 400);
  EXPECT_EQ(p.bricks_per_layer, (std::vector<int64_t>{9, 9}));
}

TEST(CostModelHand, TwoConvMemoized) {
  const CostModel m = a100();
  const Graph g = two_convs();
  const Prediction p = m.predict(g, candidate(1, 2, Strategy::kMemoized, brick2d(4)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // Every conv1 brick is touched: 3 × 3 = 9 claims. No redundancy.
  EXPECT_EQ(p.bricks_per_layer, (std::vector<int64_t>{9, 9}));
  EXPECT_DOUBLE_EQ(p.atomics_compulsory, 9);
  EXPECT_DOUBLE_EQ(p.flops, 7200);
  EXPECT_DOUBLE_EQ(p.redundant_flops, 0);
  // conv1 stored once: 2 · 100 · 4 B.
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_store, 800);
  // conv2 bricks read conv1 regions [0,4] [3,8] [7,9] per axis (Σ 14), 2 channels:
  // 14 · 14 · 2 · 4 B = 1568.
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_load, 1568);
  // Those regions touch conv1 bricks {0,1}, {0,1,2}, {1,2}: 2 + 3 + 2 = 7 per axis → 49.
  EXPECT_DOUBLE_EQ(p.memo_lookups, 49);
  // conv1 bricks read the input over [0,4] [3,8] [7,9]: 14 · 14 · 4 B = 784.
  EXPECT_DOUBLE_EQ(p.bytes_input, 784);
  // Weights: each of 9 + 9 bricks reads its layer's 18 parameters: 324 · 4 B.
  EXPECT_DOUBLE_EQ(p.bytes_weight, 1296);
  EXPECT_DOUBLE_EQ(p.bytes_output, 400);
  // Lower bound: input 400 B + weights 36 · 4 B + output 400 B; FLOPs 7200.
  const LowerBound lb = m.lower_bound(g, {1, 2});
  EXPECT_DOUBLE_EQ(lb.dram_bytes, 944);
  EXPECT_DOUBLE_EQ(lb.flops, 7200);
}

// input 1x1x10x10 → conv1 3x3 stride 2 pad 1 (5x5) → conv2 3x3 dilation 2 pad 2 (5x5), bricks 2x2.
Graph strided_dilated() {
  GraphBuilder b("strided_dilated", TensorShape{1, 1, 1, 10, 10, 2});
  const int c1 = b.conv2d(0, 1, 3, /*stride=*/2, /*pad=*/1);
  b.conv2d(c1, 1, 3, /*stride=*/1, /*pad=*/2, /*dilation=*/2);
  return fuse_for_inference(b.build());
}

TEST(CostModelHand, StridedDilatedPadded) {
  const Prediction p =
      a100().predict(strided_dilated(), candidate(1, 2, Strategy::kPadded, brick2d(2)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // conv2 bricks per axis: [0,1] [2,3] [4,4] → 9 units.
  // conv1 regions (s 1, p 2, span 4): [-2,3]→[0,3] (4), [0,5]→[0,4] (5), [2,6]→[2,4] (3): Σ 12.
  // input regions (s 2, p 1, span 2): [0,3]→[-1,7]→[0,7] (8), [0,4]→[-1,9]→[0,9] (10),
  // [2,4]→[3,9] (7): Σ 25.
  // FLOPs: conv1 12·12·(2·9) = 2592, conv2 25·18 = 450 → 3042; useful 450 + 450 = 900.
  EXPECT_EQ(p.thread_blocks, 9);
  EXPECT_DOUBLE_EQ(p.flops, 3042);
  EXPECT_DOUBLE_EQ(p.useful_flops, 900);
  EXPECT_DOUBLE_EQ(p.redundant_flops, 2142);
  EXPECT_DOUBLE_EQ(p.bytes_input, 25 * 25 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_weight, (9 + 9) * 9 * 4); // 9 params per layer, 9 units
  EXPECT_DOUBLE_EQ(p.bytes_output, 25 * 4);
}

TEST(CostModelHand, StridedDilatedMemoized) {
  const Prediction p =
      a100().predict(strided_dilated(), candidate(1, 2, Strategy::kMemoized, brick2d(2)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // conv1 bricks per axis [0,1] [2,3] [4,4]; conv2's needs [0,3] [0,4] [2,4] touch
  // {0,1}, {0,1,2}, {1,2}: all 3 computed (9 claims), 2 + 3 + 2 = 7 lookups per axis → 49.
  EXPECT_DOUBLE_EQ(p.atomics_compulsory, 9);
  EXPECT_DOUBLE_EQ(p.memo_lookups, 49);
  EXPECT_DOUBLE_EQ(p.flops, 900);
  EXPECT_DOUBLE_EQ(p.redundant_flops, 0);
  // Intermediate loads: Σ 12 per axis → 144 elements; store: 25 elements.
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_load, 144 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_store, 25 * 4);
  // conv1 bricks read the input over [0,3] (4), [3,7] (5), [7,9] (3): 12 · 12 elements.
  EXPECT_DOUBLE_EQ(p.bytes_input, 144 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_weight, (9 + 9) * 9 * 4);
}

// input 1x1x6x6x6 → two conv3d 3x3x3 pad 1 (1 → 1), bricks 4x4x4.
Graph conv3d_chain() {
  GraphBuilder b("conv3d_chain", TensorShape{1, 1, 6, 6, 6, 3});
  const int c1 = b.conv3d(0, 1, 3, 1, 1);
  b.conv3d(c1, 1, 3, 1, 1);
  return fuse_for_inference(b.build());
}

TEST(CostModelHand, Conv3dPaddedAndMemoized) {
  const CostModel m = a100();
  const Graph g = conv3d_chain();
  const BrickShape b{4, 4, 4, 0};
  // Bricks per axis [0,3] [4,5]: 8 units. conv1 regions [0,4] (5), [3,5] (3): Σ 8.
  // Input regions [0,5] (6), [2,5] (4): Σ 10.
  const Prediction pad = m.predict(g, candidate(1, 2, Strategy::kPadded, b));
  ASSERT_TRUE(pad.feasible) << pad.reason;
  // conv1: 8³ · 54 = 27648; conv2: 216 · 54 = 11664 → 39312; useful 2 · 216 · 54 = 23328.
  EXPECT_DOUBLE_EQ(pad.flops, 39312);
  EXPECT_DOUBLE_EQ(pad.redundant_flops, 39312 - 23328);
  EXPECT_DOUBLE_EQ(pad.bytes_input, 1000 * 4); // 10³
  EXPECT_DOUBLE_EQ(pad.bytes_weight, 54 * 8 * 4);
  EXPECT_DOUBLE_EQ(pad.bytes_output, 216 * 4);

  const Prediction memo = m.predict(g, candidate(1, 2, Strategy::kMemoized, b));
  ASSERT_TRUE(memo.feasible) << memo.reason;
  // All 8 conv1 bricks; each conv2 region ([0,4] or [3,5]) touches 2 bricks per axis → 64.
  EXPECT_DOUBLE_EQ(memo.atomics_compulsory, 8);
  EXPECT_DOUBLE_EQ(memo.memo_lookups, 64);
  EXPECT_DOUBLE_EQ(memo.flops, 23328);
  EXPECT_DOUBLE_EQ(memo.bytes_intermediate_load, 512 * 4); // 8³
  EXPECT_DOUBLE_EQ(memo.bytes_intermediate_store, 216 * 4);
  EXPECT_DOUBLE_EQ(memo.bytes_input, 512 * 4); // conv1 bricks: [0,4] (5) + [3,5] (3) per axis
}

// x: 1x4x8x8 → conv1 3x3 pad 1 (4 → 4) → add(conv1, x); bricks 4x4, channel block 2.
Graph conv_add() {
  GraphBuilder b("conv_add", TensorShape{1, 4, 1, 8, 8, 2});
  const int c1 = b.conv2d(0, 4, 3, 1, 1);
  b.add(c1, 0);
  return fuse_for_inference(b.build());
}

TEST(CostModelHand, ResidualWithChannelBlocksPadded) {
  const Prediction p =
      a100().predict(conv_add(), candidate(1, 2, Strategy::kPadded, brick2d(4, 2)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // Units: 2 channel blocks × 2 × 2 bricks = 8. Each computes conv1 over the brick (the add
  // needs the same box) with all 4 channels: 8 · 16 · 4 · (2 · 4 · 9) = 36864; useful 18432.
  EXPECT_EQ(p.thread_blocks, 8);
  EXPECT_DOUBLE_EQ(p.flops, 36864);
  EXPECT_DOUBLE_EQ(p.redundant_flops, 18432);
  // x per unit: conv1's need, staged in shared memory (4 channels, [0,4] or [3,7]: 5 per
  // axis) = 4 · 5 · 5 = 100 elements, and the add's, which it reads again from global memory
  // (2 channels, the brick) = 2 · 4 · 4 = 32; 8 units → 1056 · 4 B. (Were the add to read the
  // staged copy, that copy would stay in shared memory until the add: issue 15.)
  EXPECT_DOUBLE_EQ(p.bytes_input, 1056 * 4);
  // The add's second read is an L2 hit: DRAM reads at most x once and the weights.
  EXPECT_LE(p.dram_read_bytes, (256 + 144) * 4);
  // conv1's 144 parameters in every unit; the add has none.
  EXPECT_DOUBLE_EQ(p.bytes_weight, 8 * 144 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_output, 256 * 4);
  EXPECT_EQ(p.bricks_per_layer, (std::vector<int64_t>{8, 8}));
}

TEST(CostModelHand, ResidualWithChannelBlocksMemoized) {
  const Prediction p =
      a100().predict(conv_add(), candidate(1, 2, Strategy::kMemoized, brick2d(4, 2)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // Each add brick (channel block k) needs conv1's block k at the same spatial brick: 8 conv1
  // bricks, one lookup each.
  EXPECT_EQ(p.bricks_per_layer, (std::vector<int64_t>{8, 8}));
  EXPECT_DOUBLE_EQ(p.atomics_compulsory, 8);
  EXPECT_DOUBLE_EQ(p.memo_lookups, 8);
  EXPECT_DOUBLE_EQ(p.flops, 18432);
  EXPECT_DOUBLE_EQ(p.redundant_flops, 0);
  // Loads of conv1 by the add: 8 bricks · 2 channels · 16 = 256 elements; stored: 256.
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_load, 256 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_store, 256 * 4);
  // x: conv1 bricks read 4 channels × 5 × 5 (8 bricks: 800) and add bricks 2 × 4 × 4
  // (8 bricks: 256): 1056 elements.
  EXPECT_DOUBLE_EQ(p.bytes_input, 1056 * 4);
  // conv1 bricks read their channel block's share of 144 parameters: 72 · 8.
  EXPECT_DOUBLE_EQ(p.bytes_weight, 72 * 8 * 4);
}

// input 1x1x8x8 → conv 3x3 pad 1 → max_pool 2 stride 2 (4x4) → conv 3x3 pad 1 →
// upsample ×2 nearest (8x8); bricks 4x4.
Graph four_layers() {
  GraphBuilder b("four_layers", TensorShape{1, 1, 1, 8, 8, 2});
  const int c1 = b.conv2d(0, 1, 3, 1, 1);
  const int p = b.max_pool(c1, 2, 2);
  const int c3 = b.conv2d(p, 1, 3, 1, 1);
  b.upsample(c3, 2);
  return fuse_for_inference(b.build());
}

TEST(CostModelHand, FourLayerChainPadded) {
  const Prediction p =
      a100().predict(four_layers(), candidate(1, 4, Strategy::kPadded, brick2d(4)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // Upsample bricks [0,3] [4,7] (4 units). conv3 regions [0,1] [2,3] (Σ 4); pool regions
  // [0,2] [1,3] (Σ 6); conv1 regions [0,5] [2,7] (Σ 12); input [0,6] [1,7] (Σ 14).
  // FLOPs: conv1 12 · 12 · 18 = 2592, conv3 4 · 4 · 18 = 288 (the pool has none) → 2880;
  // useful 64 · 18 + 16 · 18 = 1440.
  EXPECT_DOUBLE_EQ(p.flops, 2880);
  EXPECT_DOUBLE_EQ(p.useful_flops, 1440);
  EXPECT_DOUBLE_EQ(p.bytes_input, 14 * 14 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_weight, (9 + 9) * 4 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_output, 64 * 4);
  EXPECT_EQ(p.bricks_per_layer, (std::vector<int64_t>{4, 4, 4, 4}));
}

TEST(CostModelHand, FourLayerChainMemoized) {
  const CostModel m = a100();
  const Graph g = four_layers();
  const Prediction p = m.predict(g, candidate(1, 4, Strategy::kMemoized, brick2d(4)));
  ASSERT_TRUE(p.feasible) << p.reason;
  // conv3 and pool are 4x4: one brick each; conv1 (8x8) 2 × 2 bricks; upsample 4 bricks.
  EXPECT_EQ(p.bricks_per_layer, (std::vector<int64_t>{4, 1, 1, 4}));
  EXPECT_DOUBLE_EQ(p.atomics_compulsory, 6);
  // Lookups: 4 upsample bricks × 1 conv3 brick; conv3 → 1 pool brick; pool → 4 conv1 bricks.
  EXPECT_DOUBLE_EQ(p.memo_lookups, 9);
  EXPECT_DOUBLE_EQ(p.flops, 1440);
  // Loads of intermediates: upsample reads conv3 [0,1] [2,3] (16 elements), conv3 reads the
  // pool [0,3] (16), the pool reads conv1 [0,7] (64): 96. Stored: 64 + 16 + 16 = 96.
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_load, 96 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_intermediate_store, 96 * 4);
  // conv1 bricks read the input over [0,4] [3,7] (Σ 10 per axis).
  EXPECT_DOUBLE_EQ(p.bytes_input, 100 * 4);
  EXPECT_DOUBLE_EQ(p.bytes_weight, (4 * 9 + 1 * 9) * 4);
  const LowerBound lb = m.lower_bound(g, {1, 4});
  EXPECT_DOUBLE_EQ(lb.flops, 1440);
  EXPECT_DOUBLE_EQ(lb.dram_bytes, (64 + 18 + 64) * 4);
}

// input 1x1x8x8 → conv1 1x1 → conv2 1x1 stride 2 (4x4), bricks 1x1: conv2 reads only the
// even rows and columns of conv1, so memoized skips 3/4 of conv1's bricks.
Graph strided_skip() {
  GraphBuilder b("strided_skip", TensorShape{1, 1, 1, 8, 8, 2});
  const int c1 = b.conv2d(0, 1, 1);
  b.conv2d(c1, 1, 1, /*stride=*/2);
  return fuse_for_inference(b.build());
}

TEST(CostModelHand, SkippedBricksGiveNegativeRedundancy) {
  const CostModel m = a100();
  const Graph g = strided_skip();
  const Prediction memo = m.predict(g, candidate(1, 2, Strategy::kMemoized, brick2d(1)));
  ASSERT_TRUE(memo.feasible) << memo.reason;
  // conv1 bricks {0,2,4,6}²: 16 claims and 16 lookups; FLOPs 16 · 2 + 16 · 2 = 64, while
  // 2 · MACs = 2 · 64 + 2 · 16 = 160.
  EXPECT_EQ(memo.bricks_per_layer, (std::vector<int64_t>{16, 16}));
  EXPECT_DOUBLE_EQ(memo.atomics_compulsory, 16);
  EXPECT_DOUBLE_EQ(memo.memo_lookups, 16);
  EXPECT_DOUBLE_EQ(memo.flops, 64);
  EXPECT_DOUBLE_EQ(memo.redundant_flops, -96);
  const Prediction pad = m.predict(g, candidate(1, 2, Strategy::kPadded, brick2d(1)));
  EXPECT_DOUBLE_EQ(pad.flops, 64);
  EXPECT_DOUBLE_EQ(pad.bytes_input, 16 * 4);
  // The lower bound needs the same 16 input positions and 64 FLOPs.
  const LowerBound lb = m.lower_bound(g, {1, 2});
  EXPECT_DOUBLE_EQ(lb.flops, 64);
  EXPECT_DOUBLE_EQ(lb.dram_bytes, (16 + 2 + 16) * 4);
}

// A tensor read by two layers that need different, non-nested brick sets:
// A = conv 1x1 (8x8); C1 = conv (3,1) pad (1,0) stride 2 reads all rows, even columns of A;
// C2 = conv (1,3) pad (0,1) stride 2 reads even rows, all columns; out = add(C1, C2), 4x4.
Graph two_readers() {
  GraphBuilder b("two_readers", TensorShape{1, 1, 1, 8, 8, 2});
  const int a = b.conv2d(0, 1, 1);
  Window w1;
  w1.kernel = {1, 3, 1};
  w1.stride = {1, 2, 2};
  w1.pad = {0, 1, 0};
  Window w2;
  w2.kernel = {1, 1, 3};
  w2.stride = {1, 2, 2};
  w2.pad = {0, 0, 1};
  const int c1 = b.conv(a, 1, w1);
  const int c2 = b.conv(a, 1, w2);
  b.add(c1, c2);
  return fuse_for_inference(b.build());
}

TEST(CostModelHand, UnionOfTwoBrickSetsIsExact) {
  const CostModel m = a100();
  const Graph g = two_readers();
  const Prediction memo = m.predict(g, candidate(1, 4, Strategy::kMemoized, brick2d(1)));
  ASSERT_TRUE(memo.feasible) << memo.reason;
  // A's bricks: (all rows × even columns) ∪ (even rows × all columns) = 32 + 32 − 16 = 48.
  EXPECT_EQ(memo.bricks_per_layer, (std::vector<int64_t>{48, 16, 16, 16}));
  EXPECT_DOUBLE_EQ(memo.atomics_compulsory, 48 + 16 + 16);
  // C1 brick (r, c) reads rows [2r−1, 2r+1] ∩ [0,7] (2 + 3 + 3 + 3 = 11 over r) × column 2c:
  // 44 lookups; C2 likewise 44; the add 16 + 16.
  EXPECT_DOUBLE_EQ(memo.memo_lookups, 44 + 44 + 32);
  EXPECT_DOUBLE_EQ(memo.flops, 2 * 48 + 16 * 6 + 16 * 6);
  EXPECT_DOUBLE_EQ(memo.bytes_input, 48 * 4);
  // padded: A's region per unit is the hull of both needs, [2r−1, 2r+1] × [2c−1, 2c+1]:
  // Σ 11 per axis → 121 positions.
  const Prediction pad = m.predict(g, candidate(1, 4, Strategy::kPadded, brick2d(1)));
  EXPECT_DOUBLE_EQ(pad.flops, 2 * 121 + 16 * 6 + 16 * 6);
  EXPECT_DOUBLE_EQ(pad.bytes_input, 121 * 4);
}

TEST(CostModelFeasibility, NonSpatialOpsAreLayerwiseOnly) {
  GraphBuilder b("head", TensorShape{2, 8, 1, 4, 4, 2});
  const int c = b.conv2d(0, 8, 3, 1, 1);
  const int gp = b.global_avg_pool(c);
  const int f = b.flatten(gp);
  b.linear(f, 10);
  const Graph g = fuse_for_inference(b.build());
  const CostModel m = a100();
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
    const Prediction p = m.predict(g, candidate(1, 4, s, brick2d(4)));
    EXPECT_FALSE(p.feasible);
    EXPECT_NE(p.reason.find("global_avg_pool"), std::string::npos) << p.reason;
  }
  const Prediction lw = m.predict(g, candidate(1, 4, Strategy::kLayerwise, brick2d(4)));
  EXPECT_TRUE(lw.feasible) << lw.reason;
  // linear: 2 · 2 images · 8 · 10 = 320 FLOPs; conv: 2 · 2 · 8 · 16 · 8 · 9 = 36864.
  EXPECT_DOUBLE_EQ(lw.flops, 36864 + 320);
  EXPECT_EQ(lw.launches, 4);
}

TEST(CostModelFeasibility, ConvTransposeIsLayerwiseOnlyAndCountsTwiceItsMacs) {
  // conv 3x3 (4 -> 4) → conv_transpose (k 3, stride 2, pad 1, output_padding 1, 4 -> 3, bias)
  // → relu on 2x4x6x6; the relu folds into the transposed conv as its epilogue.
  GraphBuilder b("deconv", TensorShape{2, 4, 1, 6, 6, 2});
  const int c = b.conv2d(0, 4, 3, 1, 1);
  Window w;
  w.kernel = {1, 3, 3};
  w.stride = {1, 2, 2};
  w.pad = {0, 1, 1};
  b.relu(b.conv_transpose(c, 3, w, {0, 1, 1}, 1, true, "deconv"));
  const Graph g = fuse_for_inference(b.build());
  ASSERT_EQ(g.size(), 3);
  const Layer& t = g.layer(2);
  ASSERT_EQ(t.op, OpKind::kConvTranspose);
  ASSERT_EQ(t.activation, Activation::kRelu);
  ASSERT_EQ(t.out, (TensorShape{2, 3, 1, 12, 12, 2}));
  // MACs: 2 images · 4 inputs · 36 pixels · 3 outputs · 9 taps = 7776; params 4·3·9 + 3 = 111.
  ASSERT_EQ(t.macs, 7776);
  ASSERT_EQ(t.params, 111);
  const CostModel m = a100();
  for (const Group grp : {Group{1, 2}, Group{2, 2}}) {
    const std::string blocker = brick_blocker(g, grp);
    EXPECT_NE(blocker.find("conv_transpose"), std::string::npos) << blocker;
    for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
      const Prediction p = m.predict(g, candidate(grp.first, grp.last, s, brick2d(4)));
      EXPECT_FALSE(p.feasible);
      EXPECT_EQ(p.reason, blocker);
    }
  }
  EXPECT_EQ(brick_blocker(g, {1, 1}), "");
  const Prediction lw = m.predict(g, candidate(2, 2, Strategy::kLayerwise, brick2d(4)));
  ASSERT_TRUE(lw.feasible) << lw.reason;
  EXPECT_DOUBLE_EQ(lw.flops, 2 * 7776);
  EXPECT_DOUBLE_EQ(lw.useful_flops, 2 * 7776);
  EXPECT_DOUBLE_EQ(lw.redundant_flops, 0);
  // Input 2·4·36, weights 111, output 2·3·144 elements of 4 B, all cold.
  EXPECT_DOUBLE_EQ(lw.bytes_input, 288 * 4);
  EXPECT_DOUBLE_EQ(lw.bytes_weight, 111 * 4);
  EXPECT_DOUBLE_EQ(lw.bytes_output, 864 * 4);
  EXPECT_DOUBLE_EQ(lw.dram_bytes, (288 + 111 + 864) * 4);
  EXPECT_EQ(lw.launches, 1);
  // The lower bound needs the whole output, so all of its FLOPs, and reads what layerwise reads.
  const LowerBound lb = m.lower_bound(g, {2, 2});
  EXPECT_DOUBLE_EQ(lb.flops, 2 * 7776);
  EXPECT_DOUBLE_EQ(lb.dram_bytes, (288 + 111 + 864) * 4);
  // Both layers in one layerwise group: the conv's 2 · 2·4·36·4·9 FLOPs added.
  const Prediction both = m.predict(g, candidate(1, 2, Strategy::kLayerwise, brick2d(4)));
  EXPECT_DOUBLE_EQ(both.flops, 2 * 7776 + 2 * 10368);
  EXPECT_DOUBLE_EQ(m.lower_bound(g, {1, 2}).flops, 2 * 7776 + 2 * 10368);
}

TEST(CostModelFeasibility, IntermediateLeavingTheGroupIsInvalid) {
  GraphBuilder b("leak", TensorShape{1, 4, 1, 8, 8, 2});
  const int c1 = b.conv2d(0, 4, 3, 1, 1);
  const int c2 = b.conv2d(c1, 4, 3, 1, 1);
  b.add(c2, c1);
  const Graph g = fuse_for_inference(b.build());
  const Prediction p = a100().predict(g, candidate(1, 2, Strategy::kMemoized, brick2d(4)));
  EXPECT_FALSE(p.feasible);
  EXPECT_NE(p.reason.find("outside the group"), std::string::npos) << p.reason;
}

TEST(CostModelFeasibility, SharedMemoryLimit) {
  // 256 channels, 32x32 bricks: a padded conv region of 34 · 34 · 256 · 4 B ≈ 1.1 MiB.
  GraphBuilder b("wide", TensorShape{1, 256, 1, 64, 64, 2});
  const int c1 = b.conv2d(0, 256, 3, 1, 1);
  b.conv2d(c1, 256, 3, 1, 1);
  const Graph g = fuse_for_inference(b.build());
  const Prediction p = a100().predict(g, candidate(1, 2, Strategy::kPadded, brick2d(32)));
  EXPECT_FALSE(p.feasible);
  EXPECT_NE(p.reason.find("shared memory"), std::string::npos) << p.reason;
  EXPECT_GT(p.smem_bytes_per_block, 163 * 1024);
  const Prediction small = a100().predict(g, candidate(1, 2, Strategy::kPadded, brick2d(2)));
  // 2x2 bricks: conv1 is the input's only reader, so the input streams in chunks of 32
  // channels (core/group.h), double buffered: two 6 · 6 · 32 chunks + conv1's 4 · 4 · 256
  // region = 6400 elements · 4 B = 25 KiB (staged whole, the input alone would take
  // 6 · 6 · 256).
  EXPECT_TRUE(small.feasible) << small.reason;
  EXPECT_DOUBLE_EQ(small.smem_bytes_per_block, (2 * 36 * 32 + 16 * 256) * 4);
  // memoized stages one brick's input region: (2 − 1) · 1 + 2 + 1 = 4 per axis, 256 channels:
  // 16 · 256 · 4 B = 16 KiB (under core/group.h kStageWholeElements: staged whole). 32x32
  // bricks stage 34 · 34 · 256 · 4 B ≈ 1.1 MiB: streaming would not shrink it (a 34 · 34 · 32
  // chunk plus a 32 · 32 · 256 accumulator is more), so it is staged whole: infeasible.
  const Prediction memo = a100().predict(g, candidate(1, 2, Strategy::kMemoized, brick2d(2)));
  EXPECT_TRUE(memo.feasible) << memo.reason;
  EXPECT_DOUBLE_EQ(memo.smem_bytes_per_block, 16 * 256 * 4);
  const Prediction big = a100().predict(g, candidate(1, 2, Strategy::kMemoized, brick2d(32)));
  EXPECT_FALSE(big.feasible);
  EXPECT_DOUBLE_EQ(big.smem_bytes_per_block, 34 * 34 * 256 * 4);
}

// 3D ResNet-34's layer1 basic block (issue 32): 64 channels on 8 x 28 x 28, conv3d 3x3x3 pad 1
// (+bn +relu) → conv3d (+bn) → add(block input) (+relu).
Graph r3d_layer1_block() {
  GraphBuilder b("r3d_layer1", TensorShape{1, 64, 8, 28, 28, 3});
  const int c1 = b.relu(b.batch_norm(b.conv3d(0, 64, 3, 1, 1)));
  const int c2 = b.batch_norm(b.conv3d(c1, 64, 3, 1, 1));
  b.relu(b.add(c2, 0));
  return fuse_for_inference(b.build());
}

TEST(CostModelFeasibility, ThreeDBlocksFitWithBricksThinOrTallAlongDepth) {
  const Graph g = r3d_layer1_block();
  ASSERT_EQ(g.size(), 4);     // input, conv(+bn+relu), conv(+bn), add(+relu)
  const CostModel m = a100(); // 163 KiB of shared memory per block
  const auto smem = [&](Strategy s, BrickShape b) { return m.predict(g, candidate(1, 3, s, b)); };
  // Cubes, the only 3-D bricks the search tried before brick_depths: padded 4³ stages the input
  // whole (64 channels are no more than the two 32-channel chunks in flight: core/group.h) over
  // conv1's need 8³, and conv1's region 6³, all 64 channels: (512 + 216) · 64 · 4 B = 182 KiB.
  const Prediction pad4 = smem(Strategy::kPadded, BrickShape{4, 4, 4, 0});
  EXPECT_FALSE(pad4.feasible);
  EXPECT_DOUBLE_EQ(pad4.smem_bytes_per_block, (512 + 216) * 64 * 4);
  EXPECT_NE(pad4.reason.find("182 KiB"), std::string::npos) << pad4.reason;
  // Memoized 8³ stages one brick's conv input, 10³ · 64 · 4 B = 250 KiB (over the H200's 227
  // KiB as well); memoized 4³ fits, but its bricks are small (more claims, lookups and halo).
  const Prediction memo8 = smem(Strategy::kMemoized, BrickShape{8, 8, 8, 0});
  EXPECT_FALSE(memo8.feasible);
  EXPECT_DOUBLE_EQ(memo8.smem_bytes_per_block, 1000 * 64 * 4);
  // Thin along depth: padded 1 × 4 × 4 needs 5 × 8 × 8 of the input and 3 × 6 × 6 of conv1:
  // (320 + 108) · 64 · 4 B = 107 KiB; 2 × 4 × 4: (384 + 144) · 64 · 4 B = 132 KiB.
  const Prediction pad1 = smem(Strategy::kPadded, BrickShape{1, 4, 4, 0});
  EXPECT_TRUE(pad1.feasible) << pad1.reason;
  EXPECT_DOUBLE_EQ(pad1.smem_bytes_per_block, (320 + 108) * 64 * 4);
  const Prediction pad2 = smem(Strategy::kPadded, BrickShape{2, 4, 4, 0});
  EXPECT_TRUE(pad2.feasible) << pad2.reason;
  EXPECT_DOUBLE_EQ(pad2.smem_bytes_per_block, (384 + 144) * 64 * 4);
  // Memoized 4 × 8 × 8 (the brick the H200 plan picks): 6 × 10 × 10 · 64 · 4 B = 150 KiB; and
  // tall, 8 × 4 × 4 (the A100's): 10 × 6 × 6 · 64 · 4 B = 90 KiB.
  const Prediction memo48 = smem(Strategy::kMemoized, BrickShape{4, 8, 8, 0});
  EXPECT_TRUE(memo48.feasible) << memo48.reason;
  EXPECT_DOUBLE_EQ(memo48.smem_bytes_per_block, 600 * 64 * 4);
  const Prediction memo84 = smem(Strategy::kMemoized, BrickShape{8, 4, 4, 0});
  EXPECT_TRUE(memo84.feasible) << memo84.reason;
  EXPECT_DOUBLE_EQ(memo84.smem_bytes_per_block, 360 * 64 * 4);
  // What thin bricks trade for it: padded recomputes more of conv1 per output point, 3 · 6 · 6
  // / 16 = 6.75 against the cube's 6³ / 64 = 3.375 (the depth halo on every thin brick).
  EXPECT_DOUBLE_EQ(pad1.useful_flops, pad4.useful_flops);
  EXPECT_GT(pad1.redundant_flops, pad4.redundant_flops);
}

TEST(CostModelFeasibility, ThreadsPerBlock) {
  const Graph g = two_convs();
  Candidate c = candidate(1, 2, Strategy::kMemoized, brick2d(4));
  c.threads = 2048; // A100 allows 1024 per block
  const Prediction p = a100().predict(g, c);
  EXPECT_FALSE(p.feasible);
  EXPECT_NE(p.reason.find("2048 threads"), std::string::npos) << p.reason;
  c.threads = 128;
  const Prediction ok = a100().predict(g, c);
  EXPECT_TRUE(ok.feasible) << ok.reason;
  // Threads allow 2048 / 128 = 16 blocks per SM; registers fewer: 120 per thread (what ptxas
  // gives the FP32 kernels, model/detail/memory.h) · 32 = 3840 per warp (a multiple of 256);
  // 4 warps → 15360 per block; 65536 / 15360 = 4.
  EXPECT_EQ(ok.blocks_per_sm, 4);
  EXPECT_EQ(ok.registers_per_thread, 120);
  // 1024 threads: __launch_bounds__ caps the registers at 65536 / 1024 = 64, one block per SM.
  c.threads = 1024;
  const Prediction wide = a100().predict(g, c);
  EXPECT_TRUE(wide.feasible) << wide.reason;
  EXPECT_EQ(wide.registers_per_thread, 64);
  EXPECT_EQ(wide.blocks_per_sm, 1);
}

} // namespace
} // namespace brickdl::model
