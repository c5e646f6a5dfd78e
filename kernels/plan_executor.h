#pragma once
// Whole-model execution of a plan: the plan's groups in topological order, every layer
// outside a group layerwise (a one-layer layerwise group of the merged executor),
// activations freed after their last reader.
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"
#include "kernels/merged_executor.h"
#include "kernels/tensor.h"
#include "kernels/weights.h"

namespace brickdl::kernels {

struct PlanResult {
  Tensor output;                            // the graph's output (last layer)
  ExecCounters counters;                    // summed over the groups and the layers between them
                                            // (per-layer brick counts not kept)
  std::vector<ExecCounters> group_counters; // one per plan entry, in plan order
};

// Throws UserError when the plan's groups overlap, are out of range, or cannot run
// (unsupported_reason). An empty plan runs every layer layerwise.
void validate_plan(const Graph& graph, const std::vector<Candidate>& plan);

// `graph` is the graph the plan partitions (usually fused); `input` is the output of layer 0.
PlanResult execute_plan(const Graph& graph, const std::vector<Candidate>& plan, const Tensor& input,
                        const ModelWeights& weights, const ExecOptions& options = {});

} // namespace brickdl::kernels
