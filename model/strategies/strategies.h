#pragma once
// The three strategies' counters and time, behind one signature each.
//
//   CostModel::predict ──build_geometry──► GroupGeometry ──► predict_padded   ─┐
//                                                        ├─► predict_memoized ─┼─► Prediction
//                                                        └─► predict_layerwise ┘
//
// Each fills every field of the Prediction for a valid group (the caller has checked
// GroupGeometry::invalid_reason and, for padded / memoized, brick_reason).
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

// Sets smem_bytes_per_block (already in bytes), registers_per_thread, blocks_per_sm, and
// marks the candidate infeasible when one block's shared memory or occupancy does not fit;
// returns the occupancy for the L2 wave model.
// `what` names the shared-memory user in the reason ("padded regions need").
Occupancy set_block_footprint(const StrategyContext& ctx, double smem_bytes, double brick_volume,
                              const char* what, Prediction& p);

void predict_padded(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p);
void predict_memoized(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p);
// `kernels` (optional) receives one entry per layer of the group.
void predict_layerwise(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p,
                       std::vector<KernelCost>* kernels = nullptr);

} // namespace brickdl::model::detail
