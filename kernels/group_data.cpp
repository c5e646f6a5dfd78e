#include "kernels/group_data.h"

namespace brickdl::kernels {

GroupData::GroupData(const Graph& graph, const Group& group, uint64_t seed)
    : input_ids(group_external_inputs(graph, group)),
      weights(make_weights(graph, seed, group.first, group.last)) {
  for (int id : input_ids)
    inputs.push_back(random_tensor(graph.layer(id).out, seed, static_cast<uint64_t>(id)));
  for (const Tensor& t : inputs)
    input_ptrs.push_back(&t);
}

} // namespace brickdl::kernels
