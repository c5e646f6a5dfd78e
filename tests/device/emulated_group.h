#pragma once
// What the host-emulation tests share: one group's random inputs and weights (seeded), its
// generated plan run under the emulator, and the reference ops' output for the same data.
#include <cstdint>
#include <vector>

#include "kernels/cuda/codegen.h"
#include "kernels/cuda/emulator.h"
#include "kernels/merged_executor.h"
#include "kernels/weights.h"

namespace brickdl::cuda::test_support {

struct EmulatedGroup {
  KernelPlan plan;
  std::vector<kernels::Tensor> inputs; // one per external input (KernelPlan::input_ids)
  kernels::ModelWeights weights;
  EmulatorResult emu;
  kernels::GroupResult reference; // the reference ops, layer by layer

  std::vector<const kernels::Tensor*> input_ptrs() const {
    std::vector<const kernels::Tensor*> p;
    for (const auto& t : inputs)
      p.push_back(&t);
    return p;
  }
};

inline EmulatedGroup emulate_group(const Graph& g, const Candidate& c, const EmulatorOptions& eo,
                                   uint64_t seed, const CodegenOptions& co = {}) {
  EmulatedGroup r;
  r.plan = plan_kernels(g, c, co);
  std::vector<const float*> raw;
  for (int id : r.plan.input_ids)
    r.inputs.push_back(kernels::random_tensor(g.layer(id).out, seed, static_cast<uint64_t>(id)));
  for (const auto& t : r.inputs)
    raw.push_back(t.data());
  r.weights = kernels::make_weights(g, seed, c.group.first, c.group.last);
  std::vector<std::vector<float>> weights, biases;
  for (int id : r.plan.layer_ids) {
    weights.push_back(r.weights.at(id).weight);
    biases.push_back(r.weights.at(id).bias);
  }
  r.emu = emulate_plan(g, r.plan, raw, weights, biases, eo);
  Candidate lw = c;
  lw.strategy = Strategy::kLayerwise;
  lw.brick.cl = 1;
  r.reference = kernels::execute_group(g, lw, r.input_ptrs(), r.weights);
  return r;
}

} // namespace brickdl::cuda::test_support
