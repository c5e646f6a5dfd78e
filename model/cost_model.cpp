#include "model/cost_model.h"

#include "model/detail/geometry.h"
#include "model/detail/memory.h"
#include "model/strategies/strategies.h"

namespace brickdl::model {

CostModel::CostModel(GpuSpec gpu, Coefficients c) : gpu_(std::move(gpu)), coef_(c) {}

// A change that changes predictions bumps the number: a database compares the predictions of
// one version only (core/store/queries.cpp), and keeps the older ones apart.
//   1: cold-group L2.
//   2: layerwise L1 / L2 with the library's tile re-reads; streamed passes' barriers and
//      accumulator traffic; memoized chunks sized to the target's shared memory.
//   3: Hopper's merged tensor-core convs on wgmma (GpuSpec::wgmma_fraction) in blocks of whole
//      warpgroups, with its weight tiles in shared memory; streamed wgmma convs of one tile per
//      warpgroup keep their accumulators in registers (no shared-memory passes).
//   4: the paper's unfused baseline follows the artifact's passes: a bias pass reads C
//      parameters (cudnnAddTensor), a batch-norm pass 4C, and each pass rewrites its layer's
//      buffer in place.
const char* CostModel::version() {
  return "brickdl-model/4 (paper passes)";
}

Prediction CostModel::predict(const Graph& graph, const Candidate& candidate) const {
  thread_local detail::GroupGeometry geometry;
  detail::build_geometry(graph, candidate, geometry);
  const detail::GroupGeometry& g = geometry;

  Prediction p;
  p.bricks_per_layer.assign(static_cast<size_t>(g.layer_count), 0);
  for (const Layer* l : g.layers)
    p.useful_flops += 2.0 * static_cast<double>(l->macs);

  if (!g.invalid_reason.empty()) {
    p.feasible = false;
    p.reason = g.invalid_reason;
    return p;
  }
  const detail::ResolvedCoefficients coef = detail::resolve(gpu_, coef_);
  const detail::StrategyContext ctx{gpu_, coef, candidate};
  switch (candidate.strategy) {
  case Strategy::kLayerwise:
    if (candidate.brick.cl > 1) {
      p.feasible = false;
      p.reason = cluster_problem(candidate.strategy, candidate.brick.cl, 0, 0, 0);
      return p;
    }
    detail::predict_layerwise(g, ctx, p);
    break;
  case Strategy::kPadded:
  case Strategy::kMemoized:
    if (!g.brick_reason.empty()) {
      p.feasible = false;
      p.reason = g.brick_reason;
      return p;
    }
    if (const std::string why = cluster_problem(candidate.strategy, g.cluster, gpu_.max_cluster,
                                                g.last().brick[0], g.last().extent[0]);
        !why.empty()) {
      p.feasible = false;
      p.reason = why;
      return p;
    }
    if (candidate.strategy == Strategy::kPadded) {
      detail::predict_padded(g, ctx, p);
    } else {
      detail::predict_memoized(g, ctx, p);
    }
    break;
  }
  p.redundant_flops = p.flops - p.useful_flops;
  return p;
}

} // namespace brickdl::model
