#pragma once
// Workload keys: the canonical signature of a group, the key under which the tuning database
// shares predictions and measurements across positions, runs and models (ResNet's repeated
// blocks are one workload).
//
// The signature names every layer by its position in the group (L0, L1, ...) and every
// tensor read from outside the group by the order in which the group first reads it (X0,
// X1, ...), so it does not depend on layer names or on where the group sits in the graph.
// It holds what determines the work: ops, attributes (window, groups, channels, bias,
// epilogue, pool and upsample modes), the shapes of the external inputs and of every
// layer's output (without the batch), the batch and the precision.
#include <string>

#include "core/candidate.h"
#include "core/graph.h"

namespace brickdl::search {

// The canonical signature, e.g.
//   "v1 n8 fp32 | X0=64x56x56 | L0=conv(X0) k1x3x3 s1x1x1 p0x1x1 d1x1x1 g1 c64 b1 relu
//    -> 64x56x56 | ..."
std::string workload_signature(const Graph& graph, const Group& group);

// Human-readable summary: "conv3x3 64->64 56x56 +relu | add +relu".
std::string workload_description(const Graph& graph, const Group& group);

// "layer1.0.conv1 .. layer1.0.conv3", or the single layer's name.
std::string group_layer_names(const Graph& graph, const Group& group);

} // namespace brickdl::search
