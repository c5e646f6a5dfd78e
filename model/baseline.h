#pragma once
// The layerwise baseline of a whole model and its lower bounds.
//
//   fused Graph ──layerwise_baseline(model)──► one KernelRow per layer (DRAM bytes, time,
//                                              the layer's own lower bound), totals,
//                                              and the whole-model compulsory bound
//
// The baseline runs every layer as one library kernel, back to back (as cuDNN runs a model):
// a kernel reads its input from L2 when the previous kernels left it there (the LRU of
// model/detail/memory.h over the whole graph; the graph input starts cold). Merged plans
// are predicted group by group with cold group inputs, so speedups over this baseline are
// conservative.
#include <vector>

#include "core/graph.h"
#include "model/cost_model.h"

namespace brickdl::model {

struct BaselineLayer {
  int layer = 0; // graph id
  double dram_bytes = 0;
  double l1_bytes = 0;
  double flops = 0;
  double time_ms = 0; // max(DRAM, L2, compute) + one launch
  LowerBound bound;   // the layer alone as a group
};

struct Baseline {
  std::vector<BaselineLayer> layers; // graph ids 1 .. size − 1
  Prediction total;                  // the whole graph, layerwise
  LowerBound layer_bounds;           // Σ of the per-layer bounds
  LowerBound model_bound;            // the whole graph as one group: input, weights, output
};

Baseline layerwise_baseline(const CostModel& model, const Graph& fused);

} // namespace brickdl::model
