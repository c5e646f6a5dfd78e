#include "model/baseline.h"

#include "core/error.h"

namespace brickdl::model {

void accumulate(Prediction& into, const Prediction& p) {
  into.feasible = into.feasible && p.feasible;
  into.flops += p.flops;
  into.useful_flops += p.useful_flops;
  into.redundant_flops += p.redundant_flops;
  into.bricks_per_layer.insert(into.bricks_per_layer.end(), p.bricks_per_layer.begin(),
                               p.bricks_per_layer.end());
  into.thread_blocks += p.thread_blocks;
  into.bytes_input += p.bytes_input;
  into.bytes_weight += p.bytes_weight;
  into.bytes_intermediate_load += p.bytes_intermediate_load;
  into.bytes_intermediate_store += p.bytes_intermediate_store;
  into.bytes_output += p.bytes_output;
  into.l1_bytes += p.l1_bytes;
  into.l2_bytes += p.l2_bytes;
  into.dram_bytes += p.dram_bytes;
  into.dram_read_bytes += p.dram_read_bytes;
  into.dram_write_bytes += p.dram_write_bytes;
  into.memo_lookups += p.memo_lookups;
  into.atomics_compulsory += p.atomics_compulsory;
  into.atomics_conflict += p.atomics_conflict;
  into.time_ms += p.time_ms;
  into.t_dram_ms += p.t_dram_ms;
  into.t_l2_ms += p.t_l2_ms;
  into.t_compute_ms += p.t_compute_ms;
  into.t_atomic_compulsory_ms += p.t_atomic_compulsory_ms;
  into.t_atomic_conflict_ms += p.t_atomic_conflict_ms;
  into.t_launch_ms += p.t_launch_ms;
  into.t_sync_ms += p.t_sync_ms;
  into.bound_dram_ms += p.bound_dram_ms;
  into.bound_l2_ms += p.bound_l2_ms;
  into.bound_compute_ms += p.bound_compute_ms;
  into.launches += p.launches;
  into.barriers += p.barriers;
}

Baseline layerwise_baseline(const CostModel& model, const Graph& fused) {
  BRICKDL_CHECK(fused.size() >= 2, "graph '" << fused.name() << "' has no layer");
  Baseline b;
  Candidate c;
  c.strategy = Strategy::kLayerwise;
  for (int id = 1; id < fused.size(); ++id) {
    c.group = {id, id};
    BaselineLayer row;
    row.layer = id;
    row.predicted = model.predict(fused, c);
    row.bound = model.lower_bound(fused, c.group);
    accumulate(b.total, row.predicted);
    b.layer_bounds.dram_bytes += row.bound.dram_bytes;
    b.layer_bounds.flops += row.bound.flops;
    b.layer_bounds.time_ms += row.bound.time_ms;
    b.layers.push_back(std::move(row));
  }
  c.group = {1, fused.size() - 1};
  b.warm = model.predict(fused, c);
  b.model_bound = model.lower_bound(fused, c.group);
  return b;
}

} // namespace brickdl::model
