#pragma once
// The seeded data every backend measures a group on, so that all candidates of a group, on
// every backend, see the same inputs and weights:
//  - inputs: one random tensor per external input of the group (core/group.h
//    group_external_inputs order), uniform in [−1, 1) from (seed, stream = producer layer id);
//  - weights: make_weights(graph, seed) over the group's layers (kernels/weights.h).
#include <cstdint>
#include <vector>

#include "core/graph.h"
#include "core/group.h"
#include "kernels/tensor.h"
#include "kernels/weights.h"

namespace brickdl::kernels {

struct GroupData {
  std::vector<int> input_ids;            // graph ids of the external inputs
  std::vector<Tensor> inputs;            // [k]: the output of layer input_ids[k]
  std::vector<const Tensor*> input_ptrs; // [k]: &inputs[k] (what execute_group takes)
  ModelWeights weights;                  // the group's layers; others empty

  GroupData(const Graph& graph, const Group& group, uint64_t seed);
  // input_ptrs point into inputs: not copyable, not movable.
  GroupData(const GroupData&) = delete;
  GroupData& operator=(const GroupData&) = delete;
};

} // namespace brickdl::kernels
