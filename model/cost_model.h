#pragma once
// The analytic memory-traffic and time model.
//
//   Graph (fused) + Candidate ──► CostModel::predict ──► Prediction
//        │                              │                  (FLOPs, bytes per level, DRAM,
//        │                              │                   atomics, footprint, time split)
//        └──► lower_bound(group) ───────┴──► ratios to the physical limit
//   measured rows ──► calibrate() ──► Coefficients (effective bandwidths, atomic cost, ...)
//
// Counting conventions (shared with the CPU merged executor, whose counts must equal these):
//  - FLOPs = 2 · MACs of conv and linear layers; other ops count 0 FLOPs.
//  - A tensor of shape (N, C, D, H, W) is bricked into N · ceil(C/cb) · ceil(D/bd) ·
//    ceil(H/bh) · ceil(W/bw) bricks (cb = 0 means cb = C; bd = 1 for 2-D).
//  - The region a layer must produce is the per-axis hull of what its in-group consumers
//    need; a window layer needs [a·s − p, b·s − p + d·(k − 1)] of its input for output
//    [a, b], clipped to the tensor.
//  - padded: one unit of work per brick of the last layer; it computes every intermediate
//    layer over its region, all channels, and the last layer over the brick's channel block.
//  - memoized: every brick of an intermediate layer that some needed consumer brick touches
//    is computed once (one claim = one compulsory atomic); lookups = Σ over computed consumer
//    bricks of the producer bricks their region touches.
//  - bytes (L1/L2 level) are what the kernel issues: regions loaded × channels × element size.
#include <cstdint>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/gpu_spec.h"
#include "core/graph.h"

namespace brickdl::model {

struct Prediction {
  bool feasible = true;
  std::string reason;  // why infeasible

  // Work.
  double flops = 0;            // executed (useful + redundant)
  double useful_flops = 0;     // the layers' own: 2 · MACs
  double redundant_flops = 0;  // padded halo recomputation
  std::vector<int64_t> bricks_per_layer;  // bricks computed, per layer of the group
  int64_t thread_blocks = 0;

  // Bytes the kernel(s) issue (L1/L2 level), by tensor kind.
  double bytes_input = 0;         // external inputs of the group (incl. residual skips)
  double bytes_weight = 0;
  double bytes_intermediate_load = 0;   // memoized: bricks re-read; layerwise: inputs of layers 2..L
  double bytes_intermediate_store = 0;  // memoized: bricks stored; layerwise: outputs of 1..L-1
  double bytes_output = 0;
  double l1_bytes = 0;   // sum of the above
  double l2_bytes = 0;   // reaching L2 (after L1 hits)
  double dram_bytes = 0; // reaching DRAM (after L2 hits)
  double dram_read_bytes = 0, dram_write_bytes = 0;

  // Memoized bricks.
  double memo_lookups = 0;
  double atomics_compulsory = 0;
  double atomics_conflict = 0;

  // On-chip footprint per thread block.
  double smem_bytes_per_block = 0;
  int registers_per_thread = 0;

  // Time, milliseconds, and its components (the paper's split).
  double time_ms = 0;
  double t_dram_ms = 0, t_l2_ms = 0, t_compute_ms = 0;
  double t_atomic_compulsory_ms = 0, t_atomic_conflict_ms = 0;
  double t_launch_ms = 0, t_sync_ms = 0;
};

// Compulsory traffic and the FLOP floor of a group: each external input, weight and output
// moved once, every useful FLOP at peak.
struct LowerBound {
  double dram_bytes = 0;
  double flops = 0;
  double time_ms = 0;  // max(dram_bytes / peak bandwidth, flops / peak FLOP rate)
};

// Fitted per target; the defaults reproduce the spec sheet.
struct Coefficients {
  double dram_efficiency = 0.85;    // achieved / peak DRAM bandwidth
  double l2_efficiency = 0.7;
  double compute_efficiency = 0.6;  // achieved / peak FP32
  double atomic_ns = -1;            // < 0: take the spec's
  double launch_us = -1;            // < 0: take the spec's
};

class CostModel {
 public:
  explicit CostModel(GpuSpec gpu, Coefficients c = {});
  // `graph` is fused (fuse_for_inference). Cheap: no allocation on the hot path beyond
  // bricks_per_layer.
  Prediction predict(const Graph& graph, const Candidate& candidate) const;
  LowerBound lower_bound(const Graph& graph, const Group& group) const;
  const GpuSpec& gpu() const { return gpu_; }
  const Coefficients& coefficients() const { return coef_; }
  static const char* version();  // stored with every prediction

 private:
  GpuSpec gpu_;
  Coefficients coef_;
};

}  // namespace brickdl::model
