#include "model/baseline.h"

#include "core/error.h"
#include "model/detail/geometry.h"
#include "model/detail/memory.h"
#include "model/strategies/strategies.h"

namespace brickdl::model {

Baseline layerwise_baseline(const CostModel& model, const Graph& fused) {
  BRICKDL_CHECK(fused.size() >= 2, "graph '" << fused.name() << "' has no layer");
  Baseline b;
  Candidate whole;
  whole.group = {1, fused.size() - 1};
  whole.strategy = Strategy::kLayerwise;

  detail::GroupGeometry g;
  detail::build_geometry(fused, whole, g);
  BRICKDL_CHECK(g.invalid_reason.empty(), "baseline of the whole graph: " << g.invalid_reason);
  const detail::ResolvedCoefficients coef = detail::resolve(model.gpu(), model.coefficients());
  const detail::StrategyContext ctx{model.gpu(), coef, whole};
  std::vector<detail::KernelCost> kernels;
  b.total.bricks_per_layer.assign(static_cast<size_t>(g.layer_count), 0);
  for (const Layer* l : g.layers)
    b.total.useful_flops += 2.0 * static_cast<double>(l->macs);
  detail::predict_layerwise(g, ctx, b.total, &kernels);
  b.total.redundant_flops = b.total.flops - b.total.useful_flops;

  for (const detail::KernelCost& k : kernels) {
    BaselineLayer row;
    row.layer = k.layer;
    row.dram_bytes = k.dram_read_bytes + k.dram_write_bytes;
    row.l1_bytes = k.l1_bytes;
    row.flops = k.flops;
    row.time_ms = k.time_ms;
    row.bound = model.lower_bound(fused, {k.layer, k.layer});
    b.layer_bounds.dram_bytes += row.bound.dram_bytes;
    b.layer_bounds.flops += row.bound.flops;
    b.layer_bounds.time_ms += row.bound.time_ms;
    b.layers.push_back(row);
  }
  b.model_bound = model.lower_bound(fused, whole.group);
  return b;
}

} // namespace brickdl::model
