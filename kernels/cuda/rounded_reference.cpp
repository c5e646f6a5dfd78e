#include "kernels/cuda/rounded_reference.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "kernels/cuda/emulator.h"
#include "kernels/reference.h"

namespace brickdl::cuda {

namespace {

// rounded_tolerance's factor over the errors one flip per layer makes (rounded_reference.h).
constexpr double kSafety = 3;

// What the kernels do to one group layer (index into plan.layer_ids).
struct LayerRounding {
  const dev::LayerDesc* desc = nullptr;
  bool stored = false; // its output is a global tensor or memoized bricks: storage values
};

std::vector<LayerRounding> roundings_of(const KernelPlan& plan) {
  std::vector<LayerRounding> r(plan.layer_ids.size());
  for (const KernelLaunch& k : plan.launches) {
    for (size_t i = 0; i < k.layers.size(); ++i) {
      LayerRounding& lr = r.at(static_cast<size_t>(k.layers[i]));
      lr.desc = &k.desc.layers[i];
      // A memoized kernel keeps every layer's bricks in the memo buffer (codegen layout_bricks).
      lr.stored = lr.stored || k.desc.mode == dev::kModeMemoized;
    }
    r.at(static_cast<size_t>(k.output)).stored = true;
  }
  for (size_t i = 0; i < r.size(); ++i)
    BRICKDL_CHECK(r[i].desc != nullptr, "group layer " << i << " is in no launch of the plan");
  return r;
}

void round_all(std::vector<float>& v, int storage) {
  if (storage == dev::kStorageF32 || v.empty())
    return;
  v = from_storage(to_storage(v.data(), v.size(), storage), storage);
}

kernels::Tensor round_math(const kernels::Tensor& t, int math) {
  kernels::Tensor r = t;
  for (float& v : r.values())
    v = round_to_math(v, math);
  return r;
}

bool on_tensor_cores(const dev::LayerDesc& d) {
  return d.op == dev::kOpConv && d.mma_m > 0 && d.math != dev::kMathFp32;
}

} // namespace

std::vector<float> rounded_reference(const Graph& graph, const KernelPlan& plan,
                                     const std::vector<const kernels::Tensor*>& inputs,
                                     const kernels::ModelWeights& weights) {
  BRICKDL_CHECK(inputs.size() == plan.input_ids.size(), "one input per external tensor");
  BRICKDL_CHECK(!plan.launches.empty(), "a plan without launches");
  const int storage = plan.launches.front().desc.storage;
  const std::vector<LayerRounding> rounding = roundings_of(plan);
  std::map<int, kernels::Tensor> values; // by graph id
  for (size_t s = 0; s < inputs.size(); ++s) {
    kernels::Tensor t = *inputs[s];
    round_all(t.values(), storage);
    values[plan.input_ids[s]] = std::move(t);
  }
  for (size_t i = 0; i < plan.layer_ids.size(); ++i) {
    const Layer& layer = graph.layer(plan.layer_ids[i]);
    const dev::LayerDesc& d = *rounding[i].desc;
    kernels::LayerWeights w = weights.at(layer.id);
    std::vector<kernels::Tensor> rounded_inputs; // the operands a tensor-core conv multiplies
    std::vector<const kernels::Tensor*> in;
    for (int src : layer.inputs)
      in.push_back(&values.at(src));
    if (d.op == dev::kOpConv) {
      round_all(w.weight, storage); // conv weights are global tensors; biases stay fp32
      if (on_tensor_cores(d)) {
        for (float& v : w.weight)
          v = round_to_math(v, d.math);
        rounded_inputs.push_back(round_math(*in.at(0), d.math));
        in.at(0) = &rounded_inputs.back();
      }
    }
    kernels::Tensor y = kernels::run_layer(layer, in, w, kernels::Accumulation::kF64);
    if (rounding[i].stored)
      round_all(y.values(), storage);
    values[layer.id] = std::move(y);
  }
  return values.at(plan.layer_ids.back()).values();
}

kernels::Tolerance rounded_tolerance(const Graph& graph, const KernelPlan& plan) {
  BRICKDL_CHECK(!plan.launches.empty(), "a plan without launches");
  const int storage = plan.launches.front().desc.storage;
  const std::vector<LayerRounding> rounding = roundings_of(plan);
  std::map<int, size_t> index; // group layer index by graph id
  for (size_t i = 0; i < plan.layer_ids.size(); ++i)
    index[plan.layer_ids[i]] = i;
  // One ulp of a format relative to a value at the bottom of its binade: 2^-p, p mantissa bits.
  const auto ulp_of_storage = [](int st) {
    return st == dev::kStorageBf16  ? std::ldexp(1.0, -7)
           : st == dev::kStorageF16 ? std::ldexp(1.0, -10)
                                    : 0.0;
  };
  const auto ulp_of_math = [](int math) {
    return math == dev::kMathBf16   ? std::ldexp(1.0, -7)
           : math == dev::kMathFp32 ? 0.0
                                    : std::ldexp(1.0, -10);
  };
  // A layer that reduces nothing passes a flipped operand on undiluted, to that element only;
  // flips are rare (a sum within an fp32 rounding of the boundary), so one flip per element
  // along a chain of such layers is counted, not one per layer.
  double norm = 0, elementwise_flip = 0;
  for (size_t i = 0; i < plan.layer_ids.size(); ++i) {
    const Layer& layer = graph.layer(plan.layer_ids[i]);
    const dev::LayerDesc& d = *rounding[i].desc;
    const int id = layer.id;
    const double k = static_cast<double>(
        kernels::group_reduction(graph, Group{id, id}).length); // 1 when it reduces nothing
    // An operand this kernel computed itself and then rounded (stored, or for the tensor
    // cores) may have gone to the other neighbour; the group's inputs are rounded alike.
    double ulp = 0;
    for (int src : layer.inputs) {
      const auto p = index.find(src);
      if (p == index.end())
        continue;
      if (rounding[p->second].stored)
        ulp = std::max(ulp, ulp_of_storage(storage));
      if (on_tensor_cores(d))
        ulp = std::max(ulp, ulp_of_math(d.math));
    }
    if (k > 1)
      norm += std::ldexp(1.0, -24) * std::sqrt(k) + ulp / std::sqrt(k);
    else
      elementwise_flip = std::max(elementwise_flip, ulp);
  }
  norm += elementwise_flip;
  kernels::Tolerance t;
  t.rtol = std::max(t.rtol, ulp_of_storage(storage));
  t.norm_rtol = kSafety * norm;
  return t;
}

} // namespace brickdl::cuda
