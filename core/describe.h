#pragma once
// Human-readable reports of a graph and of an experiment (`brickdl-tune --describe`).
//
// describe_graph prints one row per layer:
//   id, layer name, op with its attributes, input layer ids, output shape, parameters,
//   MACs (conv and linear; see core/graph.h), output activation bytes
// then one totals line: layers (the input not counted), parameters, MACs, GMACs, GFLOPs (2 per
// MAC), the sum of the output activations and the weights, in MB (1e6 bytes) at the graph's
// precision. Byte columns use decimal units (1 KB = 1e3 bytes), as bandwidths are quoted.
//
// Op attributes read like "conv 3x3/2 p1 d1 g1": kernel/stride, padding, dilation, groups;
// a value that differs per dim is written per dim in (D,) H, W order ("p0,3"). Suffixes: "bias"
// (a conv or linear with a bias of its own), "+bn" (a folded batch-norm), "+relu" /
// "+leaky_relu" (a fused epilogue), "ceil" (ceil mode), "excl_pad" (average excluding padding).
#include <ostream>
#include <string>

#include "core/experiment.h"
#include "core/graph.h"

namespace brickdl {

void describe_graph(const Graph& graph, std::ostream& os);

// A header (experiment, model, batch, precision, input, target GPU spec, search space,
// measurement, database, output) followed by describe_graph of the experiment's graph.
void describe_experiment(const ExperimentConfig& experiment, std::ostream& os);

// The op column of describe_graph for one layer, e.g. "conv 3x3/2 p1 d1 g1 +bn +relu".
std::string describe_op(const Layer& layer);

} // namespace brickdl
