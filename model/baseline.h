#pragma once
// The layerwise baseline of a whole model and its lower bounds.
//
//   fused Graph ──layerwise_baseline(model)──► one BaselineLayer per layer (the layer alone
//                                              as a layerwise group: DRAM bytes, time, its
//                                              lower bound), their sum, the same kernels
//                                              run back to back, and the whole-model bound
//
// Each layer is predicted as the search predicts a single-layer layerwise group: its inputs
// and weights come cold from DRAM (model/detail/memory.h), so the sum is exactly what the
// search's all-layerwise plan costs, every row is at least its bound, and speedups of a plan
// over the baseline compare like with like. `warm` runs the same kernels back to back with
// L2 kept between them (the LRU of model/detail/memory.h over the whole graph), closer to
// what cuDNN gets end to end; it is reported for reference.
#include <vector>

#include "core/graph.h"
#include "model/cost_model.h"

namespace brickdl::model {

struct BaselineLayer {
  int layer = 0;        // graph id
  Prediction predicted; // the layer alone, layerwise
  LowerBound bound;     // the layer alone as a group
};

struct Baseline {
  std::vector<BaselineLayer> layers; // graph ids 1 .. size − 1
  Prediction total;                  // Σ of the layers (counts, bytes and times added)
  Prediction warm;                   // the whole graph back to back, L2 kept between kernels
  LowerBound layer_bounds;           // Σ of the per-layer bounds
  LowerBound model_bound;            // the whole graph as one group: input, weights, output
};

Baseline layerwise_baseline(const CostModel& model, const Graph& fused);

// Adds the counts, bytes and times of `p` to `into` (feasible stays true only if both are).
void accumulate(Prediction& into, const Prediction& p);

} // namespace brickdl::model
