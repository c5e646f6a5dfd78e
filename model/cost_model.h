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
//    With a thread block cluster (brick.cl > 1) the unit's CTAs compute a channel slice of
//    every layer each (core/group.h cluster_slice) and together issue the unit's loads once;
//    each reads the other slices of a groups-1 conv's input from the others' shared memory:
//    dsmem_bytes = Σ units of (cl − 1) × that input's region × its channels.
//  - memoized: every brick of an intermediate layer that some needed consumer brick touches
//    is computed once (one claim = one compulsory atomic); lookups = Σ over computed consumer
//    bricks of the producer bricks their region touches.
//  - bytes (L1/L2 level) are what the kernel issues: regions loaded × channels × element size.
//
// The same conventions, made precise (kernels/merged_executor.h states them for the executor):
//  - Channels needed: a conv reads the input channels of the groups its output channels
//    belong to (all of them when groups = 1); elementwise ops and pools read the same
//    channels; a concat reads the slice of each input that overlaps its output channels
//    (possibly none). Upsample by r needs [floor(a/r), floor(b/r)] (nearest), one more on
//    each side for bilinear, clipped. A layer reading one tensor through several inputs needs
//    the hull of them. A region empty on any axis is needed nowhere and ignored in hulls.
//  - padded: bricks_per_layer[i] = units in which layer i is computed (non-empty region),
//    normally every unit. bytes_input = Σ units of each external input's needed region: the
//    hull of what its window readers need (staged once in shared memory) plus what each other
//    reader needs (an elementwise op reads its operand from global memory: a residual add
//    of a staged input reads it twice, the second time from L2, not DRAM);
//    bytes_weight = Σ units of the parameters of every layer computed, the last layer's
//    scaled to the unit's channel block (params · channels in block / channels).
//  - memoized: bricks_per_layer[i] = bricks computed; bytes_intermediate_load = Σ computed
//    bricks of their needed region of each intermediate input; bytes_input likewise for
//    external inputs; bytes_weight = Σ computed bricks of params · block channels / channels;
//    bytes_intermediate_store = Σ computed intermediate bricks of clipped volume × block
//    channels; memo_lookups counts channel blocks too; atomics_compulsory = claims =
//    intermediate bricks computed.
//  - layerwise: each layer reads each distinct input tensor whole once, its parameters once,
//    writes its output once (the bytes by kind); bricks_per_layer is all zeros (library
//    kernels have no bricks). Its l1 / l2 bytes add what the library's GEMM tiles re-read, an
//    estimate (model/detail/memory.h, Layerwise L1 / L2 bytes).
//  - useful_flops = 2 · MACs of the group's layers; redundant_flops = flops − useful_flops,
//    which is negative when the group's output does not depend on all of an intermediate
//    (stride > brick: whole bricks skipped).
//  - Known approximation: the model hulls needs one axis at a time, so a reader whose need is
//    empty along one spatial axis only (padding > dilation · (kernel − 1)) still widens the
//    hull along the other axes when the tensor has several readers in a padded unit.
// Where the model estimates rather than counts (L2 and DRAM bytes, conflicts, time), the
// assumptions are documented in model/detail/memory.h.
#include <cstdint>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/gpu_spec.h"
#include "core/graph.h"

namespace brickdl::model {

struct Prediction {
  bool feasible = true;
  std::string reason; // why infeasible
  // An infeasible candidate still carries the counts that could be made (over the shared
  // memory limit: all of them; ops padded / memoized cannot run: none); do not rank it.

  // Work.
  double flops = 0;           // executed (useful + redundant)
  double useful_flops = 0;    // the layers' own: 2 · MACs
  double redundant_flops = 0; // padded halo recomputation
  double fma_flops = 0; // of `flops`, those on FP32 FMA units in a merged kernel of a tensor-core
                        // precision (convs off tensor cores: core/group.h conv_on_tensor_cores)
  std::vector<int64_t> bricks_per_layer; // bricks computed, per layer of the group
  int64_t thread_blocks = 0;

  // Bytes the kernel(s) issue (L1/L2 level), by tensor kind.
  double bytes_input = 0; // external inputs of the group (incl. residual skips)
  double bytes_weight = 0;
  double bytes_intermediate_load = 0;  // memoized: bricks re-read; layerwise: inputs of layers 2..L
  double bytes_intermediate_store = 0; // memoized: bricks stored; layerwise: outputs of 1..L-1
  double bytes_output = 0;
  // Thread block clusters (padded, BrickShape::cl > 1): what the CTAs read from each other's
  // shared memory (distributed shared memory), not part of l1 / l2 / dram bytes.
  double dsmem_bytes = 0;
  // Shared-memory traffic the FLOPs do not imply: a streamed conv's passes reload and store its
  // accumulator, 2 · (passes − 1) · accumulator bytes per brick (core/group.h kStreamBuffers).
  double smem_acc_bytes = 0;
  double l1_bytes = 0;   // sum of the above but dsmem_bytes (layerwise: with tile re-reads)
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
  int blocks_per_sm = 0; // resident blocks per SM (occupancy); 0 for layerwise

  // Time, milliseconds, and its components (the paper's split).
  double time_ms = 0;
  double t_dram_ms = 0, t_l2_ms = 0, t_compute_ms = 0;
  double t_smem_ms = 0; // smem_acc_bytes at the shared-memory bandwidth; part of t_compute_ms
  double t_atomic_compulsory_ms = 0, t_atomic_conflict_ms = 0;
  double t_launch_ms = 0, t_sync_ms = 0;
  // The part of time_ms bounded by each roofline term: per kernel, the largest of its DRAM,
  // L2 and compute times is charged to that term. time_ms = bound_dram_ms + bound_l2_ms +
  // bound_compute_ms + atomics + launch + sync. Calibration fits against these.
  double bound_dram_ms = 0, bound_l2_ms = 0, bound_compute_ms = 0;
  int launches = 0;    // kernel launches
  double barriers = 0; // block-wide barriers, summed over thread blocks
};

// Compulsory traffic and the FLOP floor of a group: each external input, weight and output
// moved once, every useful FLOP at peak. Exactly: the parts of the external inputs and the
// weights that the group's output depends on (a stride-2 1×1 conv needs half the rows), so
// that no candidate moves or computes less.
struct LowerBound {
  double dram_bytes = 0;
  double flops = 0;
  double time_ms = 0; // max(dram_bytes / peak bandwidth, flops / peak FLOP rate)
};

// Fitted per target; the defaults reproduce the spec sheet.
struct Coefficients {
  double dram_efficiency = 0.85; // achieved / peak DRAM bandwidth
  double l2_efficiency = 0.7;
  double compute_efficiency = 0.6; // achieved / peak FP32
  double atomic_ns = -1;           // < 0: take the spec's
  double launch_us = -1;           // < 0: take the spec's
  // Added by the model (see model/detail/memory.h for their role):
  double conflict_ns = -1;           // per conflicting lookup (re-polls until DONE); < 0: atomic_ns
  double barrier_ns = 40;            // one block-wide barrier (__syncthreads + skew)
  double l2_resident_fraction = 0.5; // share of L2 a kernel's reused data can count on
};

class CostModel {
public:
  explicit CostModel(GpuSpec gpu, Coefficients c = {});
  // `graph` is fused (fuse_for_inference). Cheap: no allocation on the hot path beyond
  // bricks_per_layer (and the reason of an infeasible candidate). Thread-safe; scratch
  // space and the last group's structure are kept per thread.
  Prediction predict(const Graph& graph, const Candidate& candidate) const;
  LowerBound lower_bound(const Graph& graph, const Group& group) const;
  const GpuSpec& gpu() const { return gpu_; }
  const Coefficients& coefficients() const { return coef_; }
  static const char* version(); // stored with every prediction

private:
  GpuSpec gpu_;
  Coefficients coef_;
};

} // namespace brickdl::model
