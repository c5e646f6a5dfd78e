#pragma once
// The model report of `brickdl-tune --describe`: per layer and in total, the layerwise
// baseline's predicted DRAM bytes and time next to the layer's lower bound (compulsory
// traffic at peak bandwidth, FLOPs at peak rate) and their ratios, for one GPU; then the
// whole-model bound (graph input, all weights and the output moved once).
//
// Units: MB = 1e6 bytes (as bandwidths are quoted), times in microseconds.
#include <ostream>

#include "core/gpu_spec.h"
#include "core/graph.h"
#include "model/cost_model.h"

namespace brickdl::model {

// `fused` is the graph after fuse_for_inference. Default coefficients.
void describe_model(const Graph& fused, const GpuSpec& gpu, std::ostream& os);
// The same with given coefficients (e.g. calibrated ones).
void describe_model(const Graph& fused, const CostModel& model, std::ostream& os);

} // namespace brickdl::model
