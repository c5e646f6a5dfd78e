#pragma once
// The three strategies' counters and time, behind one signature each.
//
//   CostModel::predict ──build_geometry──► GroupGeometry ──► predict_padded   ─┐
//                                                        ├─► predict_memoized ─┼─► Prediction
//                                                        └─► predict_layerwise ┘
//
// Each fills every field of the Prediction for a valid group (the caller has checked
// GroupGeometry::invalid_reason and, for padded / memoized, brick_reason).
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/candidate.h"
#include "core/gpu_spec.h"
#include "model/cost_model.h"
#include "model/detail/geometry.h"
#include "model/detail/memory.h"

namespace brickdl::model::detail {

struct StrategyContext {
  const GpuSpec& gpu;
  const ResolvedCoefficients& coef;
  const Candidate& candidate;
};

// One layerwise kernel, for per-layer reports.
struct KernelCost {
  int layer = 0; // graph id
  double dram_read_bytes = 0, dram_write_bytes = 0, l1_bytes = 0, flops = 0;
  double blocks = 0;
  double time_ms = 0; // max(DRAM, L2, compute) + launch
};

// What padded and memoized share: both run one merged kernel with one thread block per brick
// of the last layer. The small helpers are inline: they run once per prediction, on the
// search's hot path.

// Counts are integers computed in doubles (exact below 2^53).
inline int64_t to_count(double v) {
  return static_cast<int64_t>(v + 0.5);
}

// Per axis, the axis whose sums it may reuse: itself, or an earlier spatial axis equal to it
// (square images; see same_axis).
inline std::array<int, kAxes> axis_aliases(const GroupGeometry& g) {
  std::array<int, kAxes> alias = {0, 1, 2, 3};
  for (int a = 2; a < kAxes; ++a)
    for (int b = 1; b < a && alias[static_cast<size_t>(a)] == a; ++b)
      if (same_axis(g, b, a))
        alias[static_cast<size_t>(a)] = b;
  return alias;
}

// Reuse distances in thread blocks, fastest axis first (channel block, w, h, d), for blocks
// launched channel block fastest; `channel` is the distance along the channel axis.
inline std::array<double, 4> reuse_distances(const TensorGrid& last, double channel) {
  const double kb = static_cast<double>(last.grid[0]);
  return {channel, kb, kb * static_cast<double>(last.grid[3]),
          kb * static_cast<double>(last.grid[3] * last.grid[2])};
}

// Thread blocks of the merged kernel: batch blocks × channel blocks × spatial bricks of the
// last layer.
inline double merged_units(const GroupGeometry& g) {
  const TensorGrid& last = g.last();
  return static_cast<double>(g.batch_units) * static_cast<double>(last.grid[0]) *
         static_cast<double>(last.spatial_bricks());
}

// Sets smem_bytes_per_block (already in bytes, for all the unit's images, plus the wgmma weight
// tiles when the kernel's tensor-core convs run on wgmma: core/group.h wgmma_tile_floats),
// registers_per_thread (what ptxas gives the generated kernels: memory.h estimate_registers),
// blocks_per_sm, and marks the candidate infeasible when one block's shared memory or occupancy
// does not fit; returns the occupancy for the L2 wave model. `what` names the shared-memory user in
// the reason ("padded regions need"); `padded` says which strategy's channel blocks to ask.
Occupancy set_block_footprint(const GroupGeometry& g, const StrategyContext& ctx, double smem_bytes,
                              const char* what, bool padded, Prediction& p);

// The L2 window of a merged kernel of `units` blocks whose unique traffic is `footprint_bytes`.
inline L2Window merged_l2_window(const StrategyContext& ctx, const Occupancy& occ, double units,
                                 double footprint_bytes) {
  L2Window win;
  win.share_bytes = ctx.coef.l2_share_bytes;
  win.concurrent = std::max(1.0, std::min(occ.concurrent_blocks, units));
  win.bytes_per_block = footprint_bytes / std::max(1.0, units);
  return win;
}

// Every block reads every weight it uses: the re-reads (bytes_weight − weights_unique) miss
// only when the unique weights overflow the L2 share; adds them to `reads` then.
inline void add_weight_rereads(const L2Window& win, double weights_unique, double bytes_weight,
                               double& reads) {
  if (weights_unique > win.share_bytes)
    reads += bytes_weight - weights_unique;
}

// Whether group layer i runs on tensor cores in a merged kernel computing `channels_per_block`
// of its channels per unit (true for layers without FLOPs: nothing to move).
inline bool merged_conv_on_tensor_cores(const GroupGeometry& g, int i, int64_t channels_per_block) {
  const Layer& l = *g.layers[static_cast<size_t>(i)];
  if (l.op != OpKind::kConv || !has_tensor_math(g.graph->dtype()))
    return true;
  return conv_on_tensor_cores(true, g.tensors[static_cast<size_t>(i)].extent[0], l.groups,
                              channels_per_block);
}

// The channels of layer i one merged block computes, as codegen tiles them: padded, a cluster
// CTA's slice, else the unit's channel block of the last layer and all of an intermediate one;
// memoized, the layer's brick channels.
inline int64_t merged_block_channels(const GroupGeometry& g, int i, bool padded) {
  const auto& t = g.tensors[static_cast<size_t>(i)];
  if (!padded)
    return t.brick[0];
  return g.cluster > 1            ? cluster_slice(t.extent[0], g.cluster)
         : i == g.layer_count - 1 ? t.brick[0]
                                  : t.extent[0];
}

// Whether some conv of the merged kernel runs on tensor cores.
inline bool any_merged_tensor_conv(const GroupGeometry& g, bool padded) {
  for (int i = 0; i < g.layer_count; ++i)
    if (g.layers[static_cast<size_t>(i)]->op == OpKind::kConv &&
        has_tensor_math(g.graph->dtype()) &&
        merged_conv_on_tensor_cores(g, i, merged_block_channels(g, i, padded)))
      return true;
  return false;
}

// The share of the tensor rate our merged kernels' tensor-core convs reach on `gpu` with
// `threads` threads per block: wgmma where the target has it and the block is whole warpgroups,
// else mma.sync (core/gpu_spec.h), as resolved (memory.h ResolvedCoefficients: a measured
// share of the peak in the model's terms).
inline double merged_mma_fraction(const GpuSpec& gpu, const ResolvedCoefficients& coef,
                                  int threads) {
  return uses_wgmma(gpu.wgmma_fraction > 0, threads) ? coef.wgmma_fraction : coef.mma_sync_fraction;
}

// What `units` computations of a streamed conv cost beyond one pass (kernels/cuda/templates/
// conv_mma.cuh streamed_conv_passes): a barrier per pass beyond the first, and its accumulator
// of `acc_elements` reloaded by every pass but the first and stored by every one but the last,
// unless it stays in registers (`acc_in_registers`: wgmma_resident_passes).
inline void add_streamed_pass_costs(double passes, double acc_elements, double units,
                                    bool acc_in_registers, Prediction& p) {
  p.barriers += (passes - 1) * units;
  if (!acc_in_registers)
    p.smem_acc_bytes += 2 * (passes - 1) * acc_elements * kSharedElementBytes * units;
}

// Codegen's wgmma tiles, as the model sees them: `box(i)` gives layer i's output positions for
// the unit's images (padded: its region, memoized: its brick). Layer i's tile (core/group.h
// choose_mma_tile) in *t; false when it is no conv on tensor cores.
template <class Box>
bool merged_wgmma_tile(const GroupGeometry& g, const StrategyContext& ctx, bool padded,
                       const Box& box, int i, MmaTile* t) {
  const Layer& l = *g.layers[static_cast<size_t>(i)];
  const int64_t ch = merged_block_channels(g, i, padded);
  if (l.op != OpKind::kConv || !merged_conv_on_tensor_cores(g, i, ch))
    return false;
  const int64_t cout_g =
      g.tensors[static_cast<size_t>(i)].extent[0] / std::max<int64_t>(l.groups, 1);
  *t = choose_mma_tile(box(i), cout_g, ch, ctx.candidate.threads, true);
  return true;
}

// The n tile of the kernel's wgmma convs, the narrowest any chooses, at most core/group.h
// max_kernel_wgmma_n (kernels/cuda/codegen.cpp reserve_wgmma_tiles); 0 when the kernel runs no
// wgmma.
template <class Box>
int kernel_wgmma_n(const GroupGeometry& g, const StrategyContext& ctx, bool padded,
                   const Box& box) {
  if (!uses_wgmma(ctx.gpu.wgmma_fraction > 0, ctx.candidate.threads) ||
      !has_tensor_math(g.graph->dtype()))
    return 0;
  int n = 0;
  MmaTile t;
  for (int i = 0; i < g.layer_count; ++i)
    if (merged_wgmma_tile(g, ctx, padded, box, i, &t))
      n = n == 0 ? t.n : std::min(n, t.n);
  const DType dt = g.graph->dtype();
  return n == 0 ? 0
                : std::min(n, max_kernel_wgmma_n(dt == DType::kBF16 || dt == DType::kF16,
                                                 static_cast<int>(g.batch_block)));
}

// Whether streamed conv i of a kernel whose wgmma n tile is `kernel_n` keeps its accumulators in
// registers across the passes (core/group.h wgmma_acc_in_registers).
template <class Box>
bool streamed_acc_in_registers(const GroupGeometry& g, const StrategyContext& ctx, bool padded,
                               const Box& box, int i, int kernel_n) {
  MmaTile t;
  if (kernel_n == 0 || !merged_wgmma_tile(g, ctx, padded, box, i, &t))
    return false;
  t.n = kernel_n;
  return wgmma_acc_in_registers(box(i), merged_block_channels(g, i, padded), t,
                                ctx.candidate.threads, g.graph->dtype() == DType::kTF32, g.cluster,
                                g.layer_count);
}

// One merged kernel's roofline, launch and barrier terms (p.barriers, the bytes and the FLOPs
// already set); the caller adds its own terms and calls finish_time.
inline void add_merged_kernel_time(const GroupGeometry& g, const StrategyContext& ctx,
                                   const Occupancy& occ, const L2Window& win, double units,
                                   Prediction& p) {
  p.launches = 1;
  // In peak(precision) FLOPs: a FLOP on FP32 FMA units costs peak(precision) / peak(fp32), a
  // tensor-core FLOP of our mma.sync or wgmma 1 / its fraction (merged_mma_fraction).
  const DType dtype = g.graph->dtype();
  const double fma_cost = peak_flops(ctx.gpu, dtype) / peak_flops(ctx.gpu, DType::kF32);
  const double mma_cost =
      has_tensor_math(dtype)
          ? 1.0 / std::max(1e-3, merged_mma_fraction(ctx.gpu, ctx.coef, ctx.candidate.threads))
          : 1.0;
  // Distributed shared memory (cluster kernels) crosses the SM-to-SM network: charged at the
  // L2 bandwidth until a GPU measures it (memory.h).
  add_kernel_roofline(ctx.gpu, ctx.coef, dtype, p.dram_bytes, p.l2_bytes + p.dsmem_bytes,
                      (p.flops - p.fma_flops) * mma_cost + p.fma_flops * fma_cost, units,
                      occ.factor > 0 ? occ.factor : 1.0, p, p.smem_acc_bytes);
  p.t_launch_ms = ctx.coef.launch_us * 1e-3;
  p.t_sync_ms = p.barriers * ctx.coef.barrier_ns * 1e-6 / win.concurrent;
}

void predict_padded(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p);
void predict_memoized(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p);
// `kernels` (optional) receives one entry per layer of the group.
void predict_layerwise(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p,
                       std::vector<KernelCost>* kernels = nullptr);

} // namespace brickdl::model::detail
