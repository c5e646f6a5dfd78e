// The tensor-core path of the generated kernels on the host (never skipped): the rounding of
// each precision, the warp-level MMA step against a plain matrix product of rounded inputs,
// and whole generated kernels (padded, memoized, layer by layer) in tf32, bf16 and fp16
// against the fp32 reference ops on random shapes, strides, dilations, groups, 2-D and 3-D.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "core/graph_builder.h"
#include "core/group.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/emulator.h"
#include "kernels/merged_executor.h"
#include "kernels/validation.h"
#include "kernels/weights.h"
#include "tests/device/emulated_group.h"
#include "tests/device/test_graphs.h"

#define BRICKDL_EMULATE 1
#include "kernels/cuda/templates/mma.cuh"

namespace brickdl::cuda {
namespace {

constexpr uint64_t kSeed = 5;

TEST(TensorCoreRounding, Tf32RoundsToNearestTiesAway) {
  const float one = 1.f, ulp10 = std::ldexp(1.f, -10);
  EXPECT_EQ(dev::round_tf32(one + std::ldexp(1.f, -12)), one);         // below half: down
  EXPECT_EQ(dev::round_tf32(one + std::ldexp(1.f, -11)), one + ulp10); // tie: away from zero
  EXPECT_EQ(dev::round_tf32(-(one + std::ldexp(1.f, -11))), -(one + ulp10));
  EXPECT_EQ(dev::round_tf32(one + ulp10), one + ulp10); // representable: unchanged
  EXPECT_TRUE(std::isnan(dev::round_tf32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(dev::round_tf32(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
}

TEST(TensorCoreRounding, Bf16RoundsToNearestEven) {
  const float one = 1.f, ulp7 = std::ldexp(1.f, -7);
  EXPECT_EQ(dev::round_bf16(one + std::ldexp(1.f, -8)), one); // tie, 1 is even: down
  EXPECT_EQ(dev::round_bf16(one + ulp7 + std::ldexp(1.f, -8)), one + 2 * ulp7); // tie: up
  EXPECT_EQ(dev::round_bf16(one + std::ldexp(1.f, -8) + std::ldexp(1.f, -20)), one + ulp7);
}

TEST(TensorCoreRounding, Fp16RangeSubnormalsAndTies) {
  const float one = 1.f, ulp10 = std::ldexp(1.f, -10);
  EXPECT_EQ(dev::round_fp16(one + std::ldexp(1.f, -11)), one); // tie to even
  EXPECT_EQ(dev::round_fp16(one + 3 * std::ldexp(1.f, -11)), one + 2 * ulp10);
  EXPECT_EQ(dev::round_fp16(65504.f), 65504.f); // the largest half
  EXPECT_EQ(dev::round_fp16(65519.f), 65504.f);
  EXPECT_EQ(dev::round_fp16(65520.f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(dev::round_fp16(-7e4f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(dev::round_fp16(std::ldexp(1.f, -24)), std::ldexp(1.f, -24)); // smallest subnormal
  EXPECT_EQ(dev::round_fp16(std::ldexp(1.f, -26)), 0.f);
  EXPECT_EQ(dev::round_fp16(std::ldexp(3.f, -25)), std::ldexp(2.f, -24)); // tie to even
}

// The step against D = C + round(A)·round(B) in double, with A, B, C scattered into lane
// fragments by the layout documented in mma.cuh.
template <int MATH> void check_step(uint32_t seed) {
  using S = dev::MmaShape<MATH>;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  float A[16][S::k], B[S::k][8], C[16][8];
  for (auto& row : A)
    for (float& v : row)
      v = u(rng);
  for (auto& row : B)
    for (float& v : row)
      v = u(rng);
  for (auto& row : C)
    for (float& v : row)
      v = u(rng);
  dev::Lanes<float, 4> acc;
  dev::Lanes<float, S::a> fa;
  dev::Lanes<float, S::b> fb;
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int j = 0; j < S::a; ++j) {
      const int r = j / S::w;
      fa(lane)[j] = A[g + 8 * (r % 2)][(t + 4 * (r / 2)) * S::w + j % S::w];
    }
    for (int j = 0; j < S::b; ++j)
      fb(lane)[j] = B[(t + 4 * (j / S::w)) * S::w + j % S::w][g];
    for (int r = 0; r < 4; ++r)
      acc(lane)[r] = C[g + 8 * (r / 2)][2 * t + r % 2];
  }
  dev::mma_step<MATH>(acc, 0, fa, 0, fb, 0);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r / 2), col = 2 * t + r % 2;
      double want = C[row][col];
      double mag = std::fabs(want);
      for (int k = 0; k < S::k; ++k) {
        const double p =
            double{dev::round_input<MATH>(A[row][k])} * double{dev::round_input<MATH>(B[k][col])};
        want += p;
        mag += std::fabs(p);
      }
      // Only the fp32 additions round: at most S::k of them, each within 2^-24 of the sum.
      EXPECT_NEAR(acc(lane)[r], want, mag * S::k * std::ldexp(1.0, -24))
          << "lane " << lane << " value " << r;
      // Unrounded inputs would be further away: the step did round them.
    }
  }
}

TEST(TensorCoreStep, HostStepIsTheRoundedProduct) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    check_step<dev::kMathTf32>(seed);
    check_step<dev::kMathBf16>(seed);
    check_step<dev::kMathFp16>(seed);
  }
}

TEST(TensorCoreStep, InputsAreRoundedToThePrecision) {
  // A = 1 + 2^-12 in every entry, B = 1: TF32 drops the 2^-12 (nearest), FP32 would keep it.
  dev::Lanes<float, 4> acc{};
  dev::Lanes<float, 4> fa;
  dev::Lanes<float, 2> fb;
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j)
      fa(lane)[j] = 1.f + std::ldexp(1.f, -12);
    fb(lane)[0] = fb(lane)[1] = 1.f;
  }
  dev::mma_step<dev::kMathTf32>(acc, 0, fa, 0, fb, 0);
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(acc(lane)[r], 8.f);
}

// ---- warpgroup MMA (wgmma) ------------------------------------------------------------------

TEST(WgmmaLayout, DescriptorAndTileOffsetsAreThePtxLayout) {
  // Hand-derived from the PTX ISA's matrix descriptor (start >> 4 in bits 0-13, LBO >> 4 in
  // 16-29, SBO >> 4 in 32-45, swizzle 0 in 62-63) and the no-swizzle K-major core matrices.
  EXPECT_EQ(dev::wgmma_desc(0x1230u), 0x123ull | (8ull << 16) | (16ull << 32));
  EXPECT_EQ(dev::wgmma_desc(0x41230u), 0x123ull | (8ull << 16) | (16ull << 32)); // 18-bit window
  EXPECT_EQ(dev::wgmma_b_offset(0, 0, 4), 0);
  EXPECT_EQ(dev::wgmma_b_offset(3, 2, 4), 3 * 16 + 2 * 4);     // row 3 of core matrix (0, 0)
  EXPECT_EQ(dev::wgmma_b_offset(9, 5, 4), 16 + 256 + 128 + 4); // core matrix (n 1, k 1)
  EXPECT_EQ(dev::wgmma_b_offset(31, 15, 2), 7 * 16 + 3 * 256 + 128 + 14);
  EXPECT_EQ(dev::wgmma_b_offset(31, 7, 4) + 4, dev::kWgmmaTileFloats * 4); // the tile's last byte
  EXPECT_EQ(dev::wgmma_b_offset(31, 15, 2) + 2, dev::kWgmmaTileFloats * 4);
}

// The host wgmma against D = C + round(A)·round(B) in double: A scattered over the warpgroup's
// 128 lanes by the layout in mma.cuh, B staged in an emulated shared memory at an offset and
// read back through the descriptor.
template <int MATH, int NT> void check_wgmma_step(uint32_t seed) {
  using S = dev::MmaShape<MATH>;
  constexpr int N = 8 * NT, esize = MATH == dev::kMathTf32 ? 4 : 2;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> A(64 * S::k), B(S::k * N), C(64 * N);
  for (auto* v : {&A, &B, &C})
    for (float& x : *v)
      x = u(rng);
  std::vector<float> smem(4 * dev::kWgmmaTileFloats, -1.f);
  float* const saved = dev::emu::block_smem;
  dev::emu::block_smem = smem.data();
  float* tile = smem.data() + 2 * dev::kWgmmaTileFloats;
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < S::k; ++k)
      dev::wgmma_store_b<MATH>(tile, dev::wgmma_b_offset(n, k, esize), B[k * N + n]);
  dev::Lanes<float, 4 * NT, 128> acc;
  dev::Lanes<float, S::a, 128> fa;
  dev::Lanes<unsigned, 4, 128> ra; // A as the words the step reads (converted before the fence)
  for (int l = 0; l < 128; ++l) {
    const int w = l / 32, g = (l % 32) / 4, t = l % 4;
    for (int j = 0; j < S::a; ++j) {
      const int r = j / S::w;
      fa(l)[j] = A[(16 * w + g + 8 * (r % 2)) * S::k + (t + 4 * (r / 2)) * S::w + j % S::w];
    }
    for (int i = 0; i < 4 * NT; ++i)
      acc(l)[i] = C[(16 * w + g + 8 * ((i / 2) % 2)) * N + 8 * (i / 4) + 2 * t + i % 2];
    dev::wgmma_pack_a<MATH>(ra(l), fa(l), 1);
  }
  dev::wgmma_step<MATH, NT>(acc, 0, ra, 0, dev::wgmma_desc(dev::smem_address(tile)));
  dev::emu::block_smem = saved;
  for (int l = 0; l < 128; ++l) {
    const int w = l / 32, g = (l % 32) / 4, t = l % 4;
    for (int i = 0; i < 4 * NT; ++i) {
      const int row = 16 * w + g + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * t + i % 2;
      double want = C[row * N + col], mag = std::fabs(want);
      for (int k = 0; k < S::k; ++k) {
        const double p = double{dev::round_input<MATH>(A[row * S::k + k])} *
                         double{dev::round_input<MATH>(B[k * N + col])};
        want += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(acc(l)[i], want, mag * S::k * std::ldexp(1.0, -24))
          << "NT " << NT << " lane " << l << " value " << i;
    }
  }
}

TEST(WgmmaStep, HostStepIsTheRoundedProductThroughTheDescriptor) {
  for (uint32_t seed = 1; seed <= 2; ++seed) {
    check_wgmma_step<dev::kMathTf32, 1>(seed);
    check_wgmma_step<dev::kMathTf32, 2>(seed);
    check_wgmma_step<dev::kMathTf32, 4>(seed);
    check_wgmma_step<dev::kMathBf16, 4>(seed);
    check_wgmma_step<dev::kMathFp16, 2>(seed);
  }
}

// The A words wgmma_pack_a makes before the fence are the registers cvt writes (TF32: the fp32
// pattern rounded ties away; 16-bit: x[0] in the low half), and the host step reads back from
// them exactly round_input: the conversion moved, the numbers did not (bit for bit, NaN a NaN).
TEST(WgmmaStep, PackedAIsTheRegisterCvtWritesAndReadsBackAsRoundInput) {
  const float tf32_in[1] = {1.f + 3 * std::ldexp(1.f, -12)};
  EXPECT_EQ(dev::a_word<dev::kMathTf32>(tf32_in), 0x3f802000u); // 1 + 2^-10
  const float pair[2] = {1.f, -2.f};
  EXPECT_EQ(dev::a_word<dev::kMathBf16>(pair), 0xc0003f80u);
  EXPECT_EQ(dev::a_word<dev::kMathFp16>(pair), 0xc0003c00u);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values = {0.f,
                               -0.f,
                               nan,
                               -nan,
                               std::numeric_limits<float>::infinity(),
                               7e4f,
                               1e-30f,
                               std::ldexp(3.f, -25),
                               65519.f,
                               1.f + std::ldexp(1.f, -8)};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  while (values.size() < 4000)
    values.push_back(std::ldexp(u(rng), static_cast<int>(rng() % 60) - 30));
  const auto same = [](float got, float want) {
    return std::isnan(want) ? std::isnan(got) : dev::float_bits(got) == dev::float_bits(want);
  };
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const float* x = &values[i];
    ASSERT_TRUE(same(dev::a_value<dev::kMathTf32>(dev::a_word<dev::kMathTf32>(x), 0),
                     dev::round_input<dev::kMathTf32>(x[0])))
        << x[0];
    for (int e = 0; e < 2; ++e) {
      ASSERT_TRUE(same(dev::a_value<dev::kMathBf16>(dev::a_word<dev::kMathBf16>(x), e),
                       dev::round_input<dev::kMathBf16>(x[e])))
          << x[e];
      ASSERT_TRUE(same(dev::a_value<dev::kMathFp16>(dev::a_word<dev::kMathFp16>(x), e),
                       dev::round_input<dev::kMathFp16>(x[e])))
          << x[e];
    }
  }
}

TEST(WgmmaStep, StagedTf32IsRoundedNotTruncated) {
  // The hardware drops the low 13 bits of a TF32 operand in shared memory; the stager rounds
  // first (cvt.rna), so 1 + 3·2^-12 is read as 1 + 2^-10, not 1.
  std::vector<float> smem(dev::kWgmmaTileFloats);
  float* const saved = dev::emu::block_smem;
  dev::emu::block_smem = smem.data();
  dev::wgmma_store_b<dev::kMathTf32>(smem.data(), 0, 1.f + 3 * std::ldexp(1.f, -12));
  EXPECT_EQ(dev::wgmma_load_b<dev::kMathTf32>(0), 1.f + std::ldexp(1.f, -10));
  dev::emu::block_smem = saved;
}

// ---- whole kernels ---------------------------------------------------------------------------
// Validated twice (test_support::check_emulated): within about an ulp of the reference with the
// kernels' roundings, and within the measurers' tolerance of the fp32 reference
// (kernels/validation.h group_tolerance), with a non-zero output of the kernel's own.

struct Checked {
  double rel_error = 0;         // max |emu − ref| / max |ref|, against the fp32 reference
  kernels::Comparison validity; // both checks: bad elements of either, their messages
  int mma_layers = 0;           // conv layers of the generated kernels on the tensor-core path
};

Checked check(const Graph& g, const Candidate& c, const EmulatorOptions& eo,
              const CodegenOptions& co = {}) {
  const test_support::EmulatedGroup r = test_support::emulate_group(g, c, eo, kSeed, co);
  Checked out;
  const PlanPaths paths = plan_paths(r.plan);
  // On wgmma where the block is whole warpgroups (core/group.h uses_wgmma), else mma.sync.
  out.mma_layers = uses_wgmma(co.wgmma, c.threads) ? paths.convs_wgmma : paths.convs_mma;
  EXPECT_EQ(r.reference.output.values().size(), r.emu.output.size());
  const test_support::EmulatedCheck ec = test_support::check_emulated(g, r);
  out.rel_error = ec.fp32.max_rel_error;
  out.validity = ec.rounded;
  out.validity.bad += ec.fp32.bad + (ec.nonzero ? 0 : 1);
  if (!ec.rounded.ok())
    out.validity.message = "against the rounded reference: " + ec.rounded.message;
  if (!ec.fp32.ok())
    out.validity.message += " against the fp32 reference: " + ec.fp32.message;
  if (!ec.nonzero)
    out.validity.message += " the kernel's output is all zeros (or not finite)";
  test_support::record_errors(
      std::string(dtype_name(g.dtype())) + " " + c.config_str() + (co.wgmma ? " wgmma" : ""), ec);
  EXPECT_FALSE(r.emu.timed_out);
  return out;
}

// Every strategy of one group in `dtype`: within the precision's tolerance of the fp32
// reference, and (fp32 excepted) on the tensor-core path for at least `min_mma` conv layers.
// With co.wgmma, the conv layers counted are those on wgmma (blocks of whole warpgroups).
void check_all(const Graph& g, Group grp, BrickShape b, int threads, int min_mma,
               const CodegenOptions& co = {}) {
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized, Strategy::kLayerwise}) {
    const Candidate c{grp, b, s, threads};
    SCOPED_TRACE(std::string(dtype_name(g.dtype())) + " " + c.config_str());
    EmulatorOptions eo;
    if (s == Strategy::kMemoized)
      eo.workers = 3;
    const Checked r = check(g, c, eo, co);
    EXPECT_TRUE(r.validity.ok()) << r.validity.message;
    EXPECT_GE(r.mma_layers, min_mma);
  }
}

Graph bottleneck(DType t) {
  return test_support::bottleneck_block(TensorShape{2, 16, 1, 9, 10, 2}, 16, t);
}

TEST(TensorCoreKernels, BottleneckInEveryPrecision) {
  for (DType t : {DType::kTF32, DType::kBF16, DType::kF16}) {
    const Graph g = bottleneck(t);
    const Group grp{g.find("conv1"), g.find("add")};
    check_all(g, grp, {1, 4, 4, 0}, 64, 3);
    check_all(g, grp, {1, 3, 5, 8}, 128, 3); // ragged bricks, channel blocks of 8
  }
}

// Batch blocks on tensor cores: two images per unit, with an input streamed in channel chunks
// (partial sums and the last layer's accumulator per image), padded and memoized; blocks of
// `threads` x 1, 1.5 and 1 (co.wgmma: the layers counted are those on wgmma).
void check_batch_blocks(const CodegenOptions& co, int threads) {
  for (DType t : {DType::kTF32, DType::kBF16}) {
    GraphBuilder b("wide3", TensorShape{3, 80, 1, 9, 10, 2}, t);
    int y = b.relu(b.conv2d(b.input(), 16, 1, 1, 0, 1, 1, true, "reduce"));
    b.conv2d(y, 48, 3, 2, 1, 1, 1, true, "expand");
    const Graph g = fuse_for_inference(b.build());
    for (const Candidate& c :
         {Candidate{{1, 2}, {1, 4, 4, 0, 2}, Strategy::kPadded, threads},
          Candidate{{1, 1}, {1, 3, 5, 8, 2}, Strategy::kPadded, threads * 3 / 2},
          Candidate{{1, 2}, {1, 4, 4, 16, 2}, Strategy::kMemoized, threads}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + c.config_str());
      if (c.strategy == Strategy::kPadded)
        ASSERT_EQ(plan_kernels(g, c, co).launches[0].desc.layers[0].stream_c, kStreamChunkChannels);
      EmulatorOptions eo;
      eo.workers = c.strategy == Strategy::kMemoized ? 3 : 1;
      const Checked r = check(g, c, eo, co);
      EXPECT_TRUE(r.validity.ok()) << r.validity.message;
      EXPECT_GE(r.mma_layers, c.group.size());
    }
  }
}

TEST(TensorCoreKernels, BatchBlocks) {
  check_batch_blocks({}, 64);
}

TEST(TensorCoreKernels, TensorCoresChangeTheNumbers) {
  // The same group in fp32 (FMA) and tf32 (MMA) gives different outputs: the rounding runs.
  const Graph f32 = bottleneck(DType::kF32), t32 = bottleneck(DType::kTF32);
  const Candidate c =
      Candidate{{f32.find("conv1"), f32.find("add")}, {1, 4, 4, 0}, Strategy::kPadded, 64};
  const Checked a = check(f32, c, {}), b = check(t32, c, {});
  EXPECT_EQ(a.mma_layers, 0);
  EXPECT_EQ(b.mma_layers, 3);
  EXPECT_LT(a.rel_error, 1e-6);
  EXPECT_GT(b.rel_error, 1e-5);
}

// A chain of 2 or 3 random convs (2-D, or 3-D one time in three; groups, strides, dilations;
// a relu after some) of 16 or 32 output channels each (n tiles of 16 and 32; of 8 in channel
// blocks of 8) on 8 or 16 input channels, images of 5 to `max_3d` / `max_2d`.
template <class Pick>
Graph random_chain(Pick& pick, DType t, int max_3d, int max_2d, int* dims, int* depth) {
  *dims = pick(0, 2) == 0 ? 3 : 2;
  const int64_t image = pick(5, *dims == 3 ? max_3d : max_2d);
  TensorShape in{pick(1, 3), 8 * pick(1, 2),     *dims == 3 ? image : 1,
                 image,      image + pick(0, 3), *dims};
  GraphBuilder b("random", in, t);
  int x = b.input();
  *depth = pick(2, 3);
  for (int l = 0; l < *depth; ++l) {
    const test_support::RandomConv conv = test_support::random_conv(pick, *dims, true, 3);
    const int64_t ch = 16 * pick(1, 2);
    x = test_support::add_conv(b, x, *dims, conv, ch, "l" + std::to_string(l));
    if (pick(0, 1))
      x = b.relu(x);
  }
  return fuse_for_inference(b.build());
}

// Random chain `trial` (tf32, bf16, fp16 in turn) and a random brick for it: 1 to 5 positions
// per spatial axis, channel blocks of all or 8, batch blocks of 1 or 2 (a conv's box spans the
// unit's images: m tiles across two images, a ragged last block when nb does not divide the
// batch).
struct RandomCase {
  Graph graph;
  BrickShape brick;
  int depth = 0;
  Group group() const { return Group{1, graph.size() - 1}; }
};
template <class Pick> RandomCase random_case(Pick& pick, int trial, int max_3d, int max_2d) {
  const DType types[] = {DType::kTF32, DType::kBF16, DType::kF16};
  int dims = 0, depth = 0;
  Graph g = random_chain(pick, types[trial % 3], max_3d, max_2d, &dims, &depth);
  const int bs = pick(1, 5);
  const BrickShape brick{dims == 3 ? bs : 1, bs, pick(1, 6), pick(0, 1) ? 0 : 8, pick(1, 2)};
  return RandomCase{std::move(g), brick, depth};
}

// Random conv chains with 8k channels (the tensor-core path), groups, strides, dilations,
// batch blocks.
TEST(TensorCoreKernels, RandomChains) {
  std::mt19937 rng(99);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 9; ++trial) {
    const RandomCase rc = random_case(pick, trial, 7, 12);
    SCOPED_TRACE("trial " + std::to_string(trial) + " brick " + rc.brick.str());
    check_all(rc.graph, rc.group(), rc.brick, 32 * pick(1, 4), rc.depth);
  }
}

TEST(TensorCoreKernels, StreamedInputsInChannelChunks) {
  // 80 input channels stream in chunks of 32, 32, 16: partial sums across MMA passes.
  for (DType t : {DType::kTF32, DType::kBF16}) {
    GraphBuilder b("wide", TensorShape{2, 80, 1, 9, 10, 2}, t);
    int y = b.relu(b.conv2d(b.input(), 16, 1, 1, 0, 1, 1, true, "reduce"));
    y = b.relu(b.conv2d(y, 16, 3, 1, 1, 1, 1, true, "mid"));
    b.conv2d(y, 48, 3, 2, 1, 1, 1, true, "expand");
    const Graph g = fuse_for_inference(b.build());
    const Candidate c{{1, 3}, {1, 4, 4, 0}, Strategy::kPadded, 64};
    ASSERT_EQ(plan_kernels(g, c).launches[0].desc.layers[0].stream_c, kStreamChunkChannels);
    check_all(g, Group{1, 3}, {1, 4, 4, 0}, 64, 3);
    check_all(g, Group{1, 1}, {1, 3, 5, 8}, 96, 1); // single layer: the accumulator
  }
  // Memoized: 128 channels x 10 x 10 staged per 8x8 brick streams (kStageWholeElements).
  GraphBuilder b("wide_memo", TensorShape{1, 128, 1, 12, 11, 2}, DType::kTF32);
  b.conv2d(b.relu(b.conv2d(b.input(), 16, 3, 1, 1, 1, 1, true, "wide")), 8, 3, 1, 1);
  const Graph g = fuse_for_inference(b.build());
  const Candidate c{{1, 2}, {1, 8, 8, 0}, Strategy::kMemoized, 64};
  ASSERT_EQ(plan_kernels(g, c).launches[0].desc.layers[0].stream_c, kStreamChunkChannels);
  check_all(g, Group{1, 2}, {1, 8, 8, 0}, 64, 2);
}

// The sm_90a path: the same kernels with wgmma (warpgroup tiles of 64 positions, staged weight
// tiles) against the fp32 reference in every precision, padded, memoized and layer by layer;
// ragged boxes, channel blocks, streamed inputs, batch blocks and random conv chains. Blocks
// that are not whole warpgroups keep mma.sync.
TEST(WgmmaKernels, BottleneckInEveryPrecision) {
  CodegenOptions co;
  co.wgmma = true;
  for (DType t : {DType::kTF32, DType::kBF16, DType::kF16}) {
    const Graph g = bottleneck(t);
    const Group grp{g.find("conv1"), g.find("add")};
    check_all(g, grp, {1, 4, 4, 0}, 128, 3, co);
    check_all(g, grp, {1, 3, 5, 8}, 256, 3, co); // ragged bricks, channel blocks of 8
  }
  const Graph g = bottleneck(DType::kTF32);
  const KernelPlan mma_sync = plan_kernels(
      g, Candidate{{g.find("conv1"), g.find("add")}, {1, 4, 4, 0}, Strategy::kPadded, 96}, co);
  EXPECT_EQ(plan_paths(mma_sync).convs_wgmma, 0);
  EXPECT_EQ(plan_paths(mma_sync).convs_mma, 3);
}

TEST(WgmmaKernels, StreamedInputsAndBatchBlocks) {
  CodegenOptions co;
  co.wgmma = true;
  check_batch_blocks(co, 128); // 128 and 128 x 1.5: the 192-thread block keeps mma.sync
}

// A streamed input whose reader has at most one tile per warpgroup: in tf32 the accumulators
// stay in registers across the chunks (LayerDesc::acc_regs), padded (80 channels in chunks of
// 32, 32, 16) and memoized (128 channels staged in chunks), against the reference; bf16 and
// fp16 keep the partial sums in shared memory (core/group.h wgmma_acc_in_registers).
TEST(WgmmaKernels, AccumulatorsStayInRegistersAcrossStreamedPasses) {
  CodegenOptions co;
  co.wgmma = true;
  for (DType t : {DType::kTF32, DType::kBF16, DType::kF16}) {
    GraphBuilder b("wide", TensorShape{2, 80, 1, 9, 10, 2}, t);
    int y = b.relu(b.conv2d(b.input(), 16, 1, 1, 0, 1, 1, true, "reduce"));
    b.conv2d(y, 16, 3, 1, 1, 1, 1, true, "mid");
    const Graph g = fuse_for_inference(b.build());
    GraphBuilder m("wide_memo", TensorShape{1, 128, 1, 12, 11, 2}, t);
    m.conv2d(m.relu(m.conv2d(m.input(), 16, 3, 1, 1, 1, 1, true, "wide")), 16, 3, 1, 1);
    const Graph gm = fuse_for_inference(m.build());
    for (const auto& [graph, c] :
         {std::pair{&g, Candidate{{1, 2}, {1, 4, 4, 0}, Strategy::kPadded, 256}},
          std::pair{&gm, Candidate{{1, 2}, {1, 8, 8, 0}, Strategy::kMemoized, 128}}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + c.config_str());
      const KernelPlan plan = plan_kernels(*graph, c, co);
      const dev::LayerDesc& first = plan.launches[0].desc.layers[0];
      ASSERT_GT(first.stream_c, 0);
      ASSERT_EQ(first.acc_regs, t == DType::kTF32 ? 1 : 0);
      EmulatorOptions eo;
      eo.workers = c.strategy == Strategy::kMemoized ? 3 : 1;
      const Checked r = check(*graph, c, eo, co);
      EXPECT_TRUE(r.validity.ok()) << r.validity.message;
      EXPECT_EQ(r.mma_layers, c.group.size());
    }
  }
}

// The wgmma n tile a kernel's convs share (core/group.h max_kernel_wgmma_n): 16-bit tensors
// with batch blocks take n = 2, since n = 4 spills under ptxas (the device bundle's ResNet-50
// layer1.1 block in bf16: 464 / 992-byte stack frames and serialized wgmma; ctest
// bundle_kernels_compile_clean); tf32 with batch blocks and bf16 without keep n = 4. The narrow
// tiles compute what the reference does.
TEST(WgmmaKernels, SixteenBitBatchBlocksShareNarrowerTiles) {
  CodegenOptions co;
  co.wgmma = true;
  const auto widest = [](const KernelPlan& plan) {
    int n = 0;
    const dev::GroupDesc& d = plan.launches[0].desc;
    for (int l = 0; l < d.num_layers; ++l)
      if (d.layers[l].wgmma)
        n = std::max(n, d.layers[l].mma_n);
    return n;
  };
  for (DType t : {DType::kTF32, DType::kBF16, DType::kF16})
    for (Strategy s : {Strategy::kPadded, Strategy::kMemoized})
      for (int nb : {1, 2}) {
        const Graph g = test_support::bottleneck_block(TensorShape{2, 64, 1, 16, 16, 2}, 64, t);
        const Candidate c{{g.find("conv1"), g.find("add")}, {1, 8, 8, 0, nb}, s, 256};
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + c.config_str());
        const KernelPlan plan = plan_kernels(g, c, co);
        const bool narrow = t != DType::kTF32 && nb > 1;
        EXPECT_EQ(widest(plan), narrow ? kMaxWgmmaNSixteenBitBatched : kMmaMaxN);
        EXPECT_EQ(max_kernel_wgmma_n(t != DType::kTF32, nb), widest(plan));
        if (!narrow)
          continue;
        EmulatorOptions eo;
        eo.workers = s == Strategy::kMemoized ? 3 : 1;
        const Checked r = check(g, c, eo, co);
        EXPECT_TRUE(r.validity.ok()) << r.validity.message;
        EXPECT_EQ(r.mma_layers, 3);
      }
}

TEST(WgmmaKernels, RandomChains) {
  CodegenOptions co;
  co.wgmma = true;
  std::mt19937 rng(123);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int too_large = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const RandomCase rc = random_case(pick, trial, 6, 10);
    SCOPED_TRACE("trial " + std::to_string(trial) + " brick " + rc.brick.str());
    const int threads = 128 * pick(1, 2);
    // Only shapes whose padded regions fit the H200's 227 KiB: the descriptor's addresses wrap
    // at 256 KiB, on the device and in its emulation.
    try {
      plan_kernels(rc.graph, Candidate{rc.group(), rc.brick, Strategy::kPadded, threads}, co);
    } catch (const Unsupported&) {
      ++too_large;
      continue;
    }
    check_all(rc.graph, rc.group(), rc.brick, threads, rc.depth, co);
  }
  EXPECT_LE(too_large, 2);
}

TEST(TensorCoreKernels, NarrowAndDepthwiseConvsFallBackToFma) {
  // 3 output channels or a depthwise conv cannot fill an n8 tile: FMA, still correct.
  GraphBuilder b("narrow", TensorShape{1, 8, 1, 9, 9, 2}, DType::kTF32);
  int x = b.conv2d(b.input(), 8, 3, 1, 1, 1, 8, true, "dw");
  x = b.conv2d(x, 3, 3, 1, 1, 1, 1, true, "narrow");
  const Graph g = fuse_for_inference(b.build());
  check_all(g, Group{1, 2}, {1, 4, 4, 0}, 64, 0);
  const KernelPlan plan = plan_kernels(g, Candidate{{1, 2}, {1, 4, 4, 0}, Strategy::kPadded, 64});
  EXPECT_EQ(plan.launches[0].desc.layers[0].mma_m, 0);
  EXPECT_EQ(plan.launches[0].desc.layers[1].mma_m, 0);
}

} // namespace
} // namespace brickdl::cuda
