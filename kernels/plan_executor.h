#pragma once
// Whole-model execution of a plan: the plan's groups in topological order, every layer
// outside a group layerwise (a one-layer layerwise group of the merged executor),
// activations freed after their last reader.
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"
#include "kernels/merged_executor.h"
#include "kernels/reference.h" // LayerProgress
#include "kernels/tensor.h"
#include "kernels/weights.h"

namespace brickdl::kernels {

struct PlanResult {
  std::vector<Tensor> outputs; // the graph's outputs, graph.outputs() order
  // The only output of a graph that has one (an internal error otherwise).
  const Tensor& output() const;
  // Summed over the plan's groups and the layers run layerwise between them. The per-layer
  // brick counts are indexed by the graph's layer id (bricks_per_layer has graph.size()
  // entries, 0 for the input and for layers run layerwise), so "bricks_computed.<i>" of
  // to_map() is layer i of the graph and bricks_computed() the plan's total.
  ExecCounters counters;
  // One per plan entry, in plan order; per-layer brick counts indexed from the entry's first
  // layer (as execute_group reports them).
  std::vector<ExecCounters> group_counters;
};

// Throws UserError when the plan's groups overlap, are out of range, or cannot run
// (unsupported_reason). An empty plan runs every layer layerwise.
void validate_plan(const Graph& graph, const std::vector<Candidate>& plan);

// `graph` is the graph the plan partitions (usually fused); `inputs` are its runtime inputs
// (graph.inputs() order). `progress`, when set, is called after each plan group and each layer
// run between them.
PlanResult execute_plan(const Graph& graph, const std::vector<Candidate>& plan,
                        std::vector<Tensor> inputs, const ModelWeights& weights,
                        const ExecOptions& options = {}, const LayerProgress& progress = {});
// The same for a graph of one input: `input` is the output of layer 0.
PlanResult execute_plan(const Graph& graph, const std::vector<Candidate>& plan, const Tensor& input,
                        const ModelWeights& weights, const ExecOptions& options = {},
                        const LayerProgress& progress = {});

} // namespace brickdl::kernels
