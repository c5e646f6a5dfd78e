// The CPU kernels (kernels/cpu/) against the reference ops: the blocked layout, every layer kind
// over whole tensors (odd extents, strides, groups, dilation, 3-D, every epilogue), regions that
// write only their own lanes, and oneDNN's layerwise baseline with and without its fusions, in
// both lane counts (8: AVX2's nChw8c, 16: AVX-512's nChw16c) and on 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#ifdef BRICKDL_OPENMP
#include <omp.h>
#endif

#include "core/graph_builder.h"
#include "kernels/cpu/blocked.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/region_ops.h"
#include "kernels/merged_executor.h"
#include "kernels/reference.h"
#include "kernels/weights.h"
#include "tests/kernels/random_groups.h"

namespace brickdl::kernels {
namespace {

using cpu::BlockedTensor;

// The lane counts this host runs (16 needs AVX-512).
std::vector<int> host_lanes() {
  std::vector<int> l{8};
  if (cpu::host_supports_lanes(16))
    l.push_back(16);
  return l;
}

double normwise_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    if (std::isnan(a.data()[i]) != std::isnan(b.data()[i]))
      return INFINITY;
    if (std::isnan(b.data()[i]))
      continue;
    diff = std::max(diff, std::fabs(double{a.data()[i]} - b.data()[i]));
    scale = std::max(scale, std::fabs(double{b.data()[i]}));
  }
  return scale > 0 ? diff / scale : diff;
}

// Every layer of `g` after the input, run alone through run_whole_layer on the reference's own
// inputs, against run_layer.
void expect_layers_match(const Graph& g, uint64_t seed, const std::string& what) {
  const ModelWeights w = make_weights(g, seed);
  std::vector<Tensor> ref(static_cast<size_t>(g.size()));
  ref[0] = random_tensor(g.input_shape(), seed, 0);
  for (int id = 1; id < g.size(); ++id) {
    std::vector<const Tensor*> in;
    for (int p : g.layer(id).inputs)
      in.push_back(&ref[static_cast<size_t>(p)]);
    ref[static_cast<size_t>(id)] = run_layer(g.layer(id), in, w.at(id));
  }
  for (int lanes : host_lanes()) {
    const cpu::PackedModel packed(g, w, lanes);
    for (int threads : {1, 2})
      for (int id = 1; id < g.size(); ++id) {
        const Layer& l = g.layer(id);
        std::vector<BlockedTensor> in;
        for (int p : l.inputs)
          in.push_back(cpu::to_blocked(ref[static_cast<size_t>(p)], lanes));
        std::vector<const BlockedTensor*> ptrs;
        for (const BlockedTensor& t : in)
          ptrs.push_back(&t);
        std::string fallback;
        const Tensor out =
            cpu::from_blocked(cpu::run_whole_layer(g, packed.at(id), ptrs, threads, &fallback));
        EXPECT_LE(normwise_error(out, ref[static_cast<size_t>(id)]), 2e-6)
            << what << " layer " << l.name << " (" << op_name(l.op) << ") lanes " << lanes
            << " threads " << threads;
        if (traits(l.op).brickable)
          EXPECT_EQ(fallback, "") << l.name;
        // The layer alone through oneDNN (or its fallback), from the same blocked inputs.
        const cpu::OnednnGroup dnn(g, Group{id, id}, packed);
        std::vector<const BlockedTensor*> ext;
        for (int p : group_external_inputs(g, Group{id, id}))
          ext.push_back(&in[static_cast<size_t>(std::find(l.inputs.begin(), l.inputs.end(), p) -
                                                l.inputs.begin())]);
        EXPECT_LE(normwise_error(cpu::from_blocked(dnn.run(ext, threads).output),
                                 ref[static_cast<size_t>(id)]),
                  2e-6)
            << what << " oneDNN " << testing::PrintToString(dnn.steps()) << " lanes " << lanes;
      }
  }
}

TEST(CpuKernels, BlockedLayoutRoundTripsAndPadsWithZeros) {
  for (int lanes : {8, 16})
    for (int64_t c : {1, 3, 8, 13, 16, 17}) {
      const TensorShape s{2, c, 1, 3, 5, 2};
      const Tensor t = random_tensor(s, 7, 1);
      const BlockedTensor b = cpu::to_blocked(t, lanes);
      EXPECT_EQ(b.blocks(), (c + lanes - 1) / lanes);
      EXPECT_EQ(cpu::from_blocked(b).values(), t.values());
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t p = 0; p < 15; ++p)
          for (int64_t l = c % lanes; l < lanes && c % lanes; ++l)
            EXPECT_EQ(b.image_data(n)[((b.blocks() - 1) * 15 + p) * lanes + l], 0.0f);
      EXPECT_EQ(b.at(1, c - 1, 0, 2, 4), t.at(1, c - 1, 0, 2, 4));
    }
}

// Large blocks come back for the same size once freed; small ones, and every block under
// AddressSanitizer, go back to the allocator.
TEST(CpuKernels, LargeFreedBlocksAreReusedForTheSameSize) {
  if (!cpu::blocks_reused())
    GTEST_SKIP() << "freed blocks are not reused under AddressSanitizer";
  cpu::release_reused_blocks();
  const int64_t big = cpu::kReusedBlockBytes / 4 + 1000; // floats: just over the threshold
  const size_t big_bytes = cpu::round_up(big * 4, 4096);
  const float* first = nullptr;
  {
    cpu::AlignedFloats a = cpu::aligned_floats(big);
    first = a.get();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    EXPECT_EQ(cpu::reused_bytes_held(), 0u);
  }
  EXPECT_EQ(cpu::reused_bytes_held(), big_bytes);
  {
    cpu::AlignedFloats b = cpu::aligned_floats(big + 10); // the same whole pages
    EXPECT_EQ(b.get(), first);
    EXPECT_EQ(cpu::reused_bytes_held(), 0u);
    cpu::AlignedFloats c = cpu::aligned_floats(2 * big); // another size: a new block
    EXPECT_NE(c.get(), first);
    std::fill_n(c.get(), 2 * big, 1.0f); // all of it is usable
  }
  EXPECT_EQ(cpu::reused_bytes_held(), big_bytes + cpu::round_up(2 * big * 4, 4096));
  { cpu::AlignedFloats small = cpu::aligned_floats(100); }
  EXPECT_EQ(cpu::reused_bytes_held(), big_bytes + cpu::round_up(2 * big * 4, 4096));
  // A blocked tensor draws on them too.
  { BlockedTensor t(TensorShape{1, 16, 1, 128, 128, 2}, 16); }
  EXPECT_GT(cpu::reused_bytes_held(), big_bytes + cpu::round_up(2 * big * 4, 4096));
  cpu::release_reused_blocks();
  EXPECT_EQ(cpu::reused_bytes_held(), 0u);
}

TEST(CpuKernels, ConvsOfEveryKindMatchTheReference) {
  GraphBuilder b("convs", TensorShape{2, 3, 1, 13, 11, 2});
  int x = b.conv2d(b.input(), 24, 7, 2, 3, 1, 1, true); // a stem: 3 input channels, stride 2
  x = b.relu(x);
  const int y = b.conv2d(x, 20, 3, 1, 2, 2, 1, false); // dilated
  const int g = b.conv2d(y, 20, 3, 1, 1, 1, 4, true);  // grouped, 5 channels per group
  const int d = b.conv2d(g, 20, 3, 2, 1, 1, 20, true); // depthwise, stride 2
  int p = b.conv2d(d, 36, 1, 1, 0, 1, 1, true);        // 1x1
  p = b.batch_norm(p);
  b.silu(p);
  b.conv2d_rect(g, 9, 1, 5, 0, 2, 1, true); // 1x5
  b.conv2d(x, 17, 5, 3, 0, 1, 1, true);     // stride 3, no padding
  // More output channels than one panel of packed weights (64), and a group of several.
  const int wide = b.conv2d(x, 150, 1, 1, 0, 1, 1, true);
  b.conv2d(wide, 130, 3, 1, 1, 1, 1, false);
  b.conv2d(wide, 150, 3, 2, 1, 1, 2, true);
  expect_layers_match(fuse_for_inference(b.build()), 3, "2-D convs");

  GraphBuilder b3("convs3d", TensorShape{1, 5, 7, 6, 9, 3});
  const int c3 = b3.conv3d(b3.input(), 12, 3, 1, 1, 1, 1, true);
  b3.conv3d(c3, 8, 3, 2, 1, 1, 4, false);
  b3.conv3d(c3, 12, 3, 1, 2, 2, 12, true);
  b3.upsample(c3, 2, false);
  b3.upsample(c3, 2, true);
  b3.max_pool(c3, 3, 2, 1, true);
  b3.avg_pool(c3, 2, 2, 0, false);
  expect_layers_match(fuse_for_inference(b3.build()), 4, "3-D convs");
}

TEST(CpuKernels, EveryEpilogueAndElementwiseOpMatchesTheReference) {
  GraphBuilder b("eltwise", TensorShape{2, 19, 1, 5, 7, 2});
  const int x = b.input();
  const int c = b.conv2d(x, 19, 3, 1, 1, 1, 1, true);
  b.relu(b.conv2d(x, 19, 1, 1, 0, 1, 1, true));
  b.leaky_relu(b.conv2d(x, 19, 1, 1, 0, 1, 1, true), 0.2f);
  b.clip(b.conv2d(x, 19, 1, 1, 0, 1, 1, true), -0.5f, 0.7f);
  b.sigmoid(b.conv2d(x, 19, 1, 1, 0, 1, 1, true));
  b.hard_swish(b.conv2d(x, 19, 1, 1, 0, 1, 1, true));
  b.hard_sigmoid(b.conv2d(x, 19, 1, 1, 0, 1, 1, true));
  b.gelu(b.conv2d(x, 19, 1, 1, 0, 1, 1, true));
  b.relu(b.add(c, x));
  b.sub(c, x);
  b.div(c, b.clip(x, 1.0f, 2.0f));
  b.mul(c, x);
  const int gap = b.global_avg_pool(c);
  b.channel_mul(c, b.sigmoid(gap));
  // A squeeze-excitation branch: 1x1 convs on 1x1 images (one GEMM over the batch), more
  // outputs than a panel.
  b.sigmoid(b.conv2d(b.silu(b.conv2d(gap, 7, 1, 1, 0, 1, 1, true)), 70, 1, 1, 0, 1, 1, true));
  b.batch_norm(x);
  b.concat({c, x, c});
  b.upsample(c, 2, true);
  b.upsample(c, 3, false);
  b.max_pool(c, 3, 2, 1, true);
  b.avg_pool(c, 3, 2, 1, false);
  b.avg_pool(c, 2, 2, 0, true);
  b.linear(b.flatten(gap), 10, true);
  expect_layers_match(fuse_for_inference(b.build()), 5, "epilogues and elementwise ops");
}

// A region computed into a view filled with a sentinel writes exactly its own elements (units
// that share a channel block must not write each other's lanes): layer 1 of `g`, random regions.
void expect_regions_write_only_their_own(const Graph& g, uint64_t seed) {
  const ModelWeights w = make_weights(g, seed);
  const Tensor x = random_tensor(g.input_shape(), seed, 0);
  const Tensor ref = run_layer(g.layer(1), {&x}, w.at(1));
  const TensorShape& os = g.layer(1).out;
  std::mt19937 rng(static_cast<unsigned>(seed));
  const auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int lanes : host_lanes()) {
    const cpu::PackedModel packed(g, w, lanes);
    const BlockedTensor in = cpu::to_blocked(x, lanes);
    for (int trial = 0; trial < 20; ++trial) {
      BlockedTensor out(os, lanes);
      std::fill_n(out.data(), out.floats(), 1234.5f);
      Region what = Region::whole(os);
      what.c0 = pick(0, os.c - 1);
      what.c1 = pick(what.c0 + 1, os.c);
      what.lo[1] = pick(0, os.h - 1);
      what.hi[1] = pick(what.lo[1] + 1, os.h);
      what.lo[2] = pick(0, os.w - 1);
      what.hi[2] = pick(what.lo[2] + 1, os.w);
      const cpu::ConstBlockedView view = in.image(0);
      cpu::compute_region(g, packed.at(1), {&view, 1}, out.image(0), what);
      for (int64_t c = 0; c < os.c; ++c)
        for (int64_t y = 0; y < os.h; ++y)
          for (int64_t xx = 0; xx < os.w; ++xx) {
            const bool inside = c >= what.c0 && c < what.c1 && y >= what.lo[1] && y < what.hi[1] &&
                                xx >= what.lo[2] && xx < what.hi[2];
            const float v = out.at(0, c, 0, y, xx);
            if (inside)
              ASSERT_NEAR(v, ref.at(0, c, 0, y, xx), 1e-5)
                  << g.name() << " " << what.str() << " lanes " << lanes;
            else
              ASSERT_EQ(v, 1234.5f) << "written outside " << what.str() << " at c" << c;
          }
    }
  }
}

TEST(CpuKernels, RegionsWriteOnlyTheirOwnElements) {
  GraphBuilder b("region", TensorShape{1, 12, 1, 9, 10, 2});
  b.conv2d(b.input(), 21, 3, 1, 1, 1, 1, true);
  expect_regions_write_only_their_own(fuse_for_inference(b.build()), 9);
  // Depthwise convs: regions with and without border columns, of partial channel blocks.
  GraphBuilder d("depthwise", TensorShape{1, 21, 1, 9, 45, 2});
  d.silu(d.conv2d(d.input(), 21, 5, 1, 2, 1, 21, true));
  expect_regions_write_only_their_own(fuse_for_inference(d.build()), 10);
  GraphBuilder s("depthwise_strided", TensorShape{1, 19, 1, 11, 75, 2});
  s.clip(s.conv2d(s.input(), 19, 3, 2, 2, 2, 19, false), 0.0f, 6.0f);
  expect_regions_write_only_their_own(fuse_for_inference(s.build()), 11);
}

// Depthwise convs of narrow rows (a 7x7 layer: few interior pixels) and wide ones, every stride,
// dilation and padding the models use, through whole layers on 1 and 2 threads.
TEST(CpuKernels, DepthwiseConvsOfNarrowAndWideRowsMatchTheReference) {
  for (int64_t width : {1, 2, 3, 5, 7, 14, 31, 33, 40, 67}) {
    GraphBuilder b("depthwise_w" + std::to_string(width), TensorShape{2, 37, 1, 7, width, 2});
    const int x = b.input();
    b.silu(b.conv2d(x, 37, 3, 1, 1, 1, 37, true));
    b.clip(b.conv2d(x, 37, 3, 2, 1, 1, 37, true), 0.0f, 6.0f);
    b.conv2d(x, 37, 5, 1, 2, 1, 37, false);
    b.sigmoid(b.conv2d(x, 37, 5, 2, 2, 1, 37, true));
    b.relu(b.conv2d(x, 37, 3, 1, 2, 2, 37, true));
    Window w1x5;
    w1x5.kernel = {1, 1, 5};
    w1x5.pad = {0, 0, 2};
    b.conv(x, 37, w1x5, 37, true); // 1x5
    expect_layers_match(fuse_for_inference(b.build()), 6 + static_cast<uint64_t>(width),
                        "depthwise width " + std::to_string(width));
  }
}

// The oneDNN baseline on random groups, with and without its post-op fusions, against the
// reference, group by group (layerwise through ExecOptions::onednn).
TEST(OnednnBaseline, RandomGroupsMatchTheReference) {
  std::mt19937 rng(11);
  int cases = 0, fused = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const test_support::RandomCase rc = test_support::random_case(rng, trial % 4 == 3 ? 3 : 2);
    const Graph& g = rc.graph;
    const ModelWeights w = make_weights(g, 3);
    std::vector<Tensor> ext;
    for (int id : group_external_inputs(g, rc.group))
      ext.push_back(random_tensor(g.layer(id).out, 3, static_cast<uint64_t>(id)));
    std::vector<const Tensor*> ext_ptrs;
    for (const Tensor& t : ext)
      ext_ptrs.push_back(&t);
    Candidate c;
    c.group = rc.group;
    c.strategy = Strategy::kLayerwise;
    const Tensor ref = execute_group(g, c, ext_ptrs, w).output;
    for (int lanes : host_lanes()) {
      const cpu::PackedModel packed(g, w, lanes);
      std::vector<BlockedTensor> in;
      for (const Tensor& t : ext)
        in.push_back(cpu::to_blocked(t, lanes));
      std::vector<const BlockedTensor*> ptrs;
      for (const BlockedTensor& t : in)
        ptrs.push_back(&t);
      for (bool post_ops : {false, true}) {
        const cpu::OnednnGroup dnn(g, rc.group, packed, {post_ops, true});
        ExecOptions o{2};
        o.onednn = &dnn;
        const BlockedGroupResult r = execute_group(g, c, ptrs, packed, o);
        EXPECT_LE(normwise_error(cpu::from_blocked(r.output), ref), 2e-6)
            << rc.text << " lanes " << lanes << " post-ops " << post_ops;
        for (const std::string& s : dnn.steps())
          fused += s.find("post-op") != std::string::npos;
        ++cases;
      }
    }
  }
  EXPECT_GE(cases, 80);
  EXPECT_GT(fused, 0) << "no group fused a residual add or a depthwise conv";
}

// An inverted-residual block (1x1 expand, relu6, 3x3 depthwise, relu6, 1x1 project, add): with
// the fusions on, oneDNN runs expand + depthwise as one primitive and the add as a post-op.
TEST(OnednnBaseline, InvertedResidualBlockUsesBothFusions) {
  GraphBuilder b("mbv2", TensorShape{2, 24, 1, 14, 14, 2});
  const int x = b.input();
  int e = b.clip(b.conv2d(x, 144, 1, 1, 0, 1, 1, true), 0.f, 6.f);
  e = b.clip(b.conv2d(e, 144, 3, 1, 1, 1, 144, true), 0.f, 6.f);
  b.add(b.conv2d(e, 24, 1, 1, 0, 1, 1, true), x);
  const Graph g = fuse_for_inference(b.build());
  const Group grp{1, g.size() - 1};
  const ModelWeights w = make_weights(g, 2);
  const Tensor in = random_tensor(g.input_shape(), 2, 0);
  Candidate c;
  c.group = grp;
  c.strategy = Strategy::kLayerwise;
  const Tensor ref = execute_group(g, c, {&in}, w).output;
  for (int lanes : host_lanes()) {
    const cpu::PackedModel packed(g, w, lanes);
    const cpu::OnednnGroup dnn(g, grp, packed, {true, true});
    if (lanes == cpu::lanes()) { // oneDNN's JIT kernels take only its own ISA's block
      ASSERT_EQ(dnn.steps().size(), 2u) << testing::PrintToString(dnn.steps());
      EXPECT_NE(dnn.steps()[0].find("depthwise post-op"), std::string::npos) << dnn.steps()[0];
      EXPECT_NE(dnn.steps()[1].find("binary post-op"), std::string::npos) << dnn.steps()[1];
      EXPECT_TRUE(dnn.fallbacks().empty());
    }
    const BlockedTensor bin = cpu::to_blocked(in, lanes);
    const BlockedGroupResult r = dnn.run({&bin}, 2);
    EXPECT_LE(normwise_error(cpu::from_blocked(r.output), ref), 2e-6) << "lanes " << lanes;
  }
}

TEST(OnednnBaseline, LayersWithoutAPrimitiveFallBackAndSaySo) {
  GraphBuilder b("fallback", TensorShape{1, 8, 1, 6, 6, 2});
  const int n = b.batch_norm(b.input()); // not after a conv: not folded
  b.conv2d(b.hard_sigmoid(n), 8, 3, 1, 1, 1, 1, true);
  const Graph g = fuse_for_inference(b.build());
  const ModelWeights w = make_weights(g, 2);
  const cpu::PackedModel packed(g, w, 8);
  const cpu::OnednnGroup dnn(g, Group{1, g.size() - 1}, packed);
  ASSERT_EQ(dnn.fallbacks().size(), 2u) << testing::PrintToString(dnn.steps());
  EXPECT_NE(dnn.fallbacks()[0].find("batch_norm"), std::string::npos) << dnn.fallbacks()[0];
  const Tensor in = random_tensor(g.input_shape(), 2, 0);
  Candidate cand;
  cand.group = Group{1, g.size() - 1};
  cand.strategy = Strategy::kLayerwise;
  const Tensor ref = execute_group(g, cand, {&in}, w).output;
  const BlockedTensor bin = cpu::to_blocked(in, 8);
  EXPECT_LE(normwise_error(cpu::from_blocked(dnn.run({&bin}, 1).output), ref), 2e-6);
#ifdef BRICKDL_OPENMP
  // The run set OpenMP's count for oneDNN and gave the caller's back.
  omp_set_num_threads(3);
  EXPECT_LE(normwise_error(cpu::from_blocked(dnn.run({&bin}, 1).output), ref), 2e-6);
  EXPECT_EQ(omp_get_max_threads(), 3);
  omp_set_num_threads(omp_get_num_procs());
#endif
}

} // namespace
} // namespace brickdl::kernels
