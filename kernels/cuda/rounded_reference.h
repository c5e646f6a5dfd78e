#pragma once
// The reference ops with the roundings of a plan's generated kernels: what a KernelPlan
// computes, up to the order of its fp32 sums.
//
//   fused Graph + KernelPlan + inputs + weights ──rounded_reference()──► output (NCDHW)
//                                     KernelPlan ──rounded_tolerance()──► Tolerance
//
// The fp32 reference (kernels/reference.h) is the ground truth of a model, and
// kernels/validation.h tolerance_for bounds how far ANY correct kernel of a precision may fall
// from it. That bound has to cover every rounding a tf32 or 16-bit kernel may make, so it is
// loose: for bf16 several percent of max|ref|, wide enough for a wrong activation or a scaled
// output to pass. This reference makes the roundings the plan's kernels make, at the same
// places (kernels/cuda/templates: prelude.cuh gload / gstore, mma.cuh round_input), so a kernel
// can be held to a bound of about one unit in the last place of what it stores:
//  - global tensors (the group's inputs, conv weights, every launch's output, memoized bricks)
//    hold the plan's storage (GroupDesc::storage): bf16 / fp16 values, nearest even; fp32
//    otherwise;
//  - a tensor-core conv (LayerDesc::mma_m > 0) rounds both operands to its math (tf32 nearest
//    with ties away from zero; bf16 / fp16 nearest even) and sums their exact products;
//  - shared memory (padded regions), biases, batch-norm parameters and all other arithmetic
//    stay fp32.
// Its sums accumulate in fp64 (kernels::Accumulation::kF64), so what is left between a correct
// kernel and this reference is the kernel's own fp32 summation order, and a stored value that
// lands on the other side of a rounding boundary because of it (one ulp of the storage type
// there, carried on through the layers after it).
#include <vector>

#include "core/graph.h"
#include "kernels/cuda/codegen.h"
#include "kernels/tensor.h"
#include "kernels/validation.h"
#include "kernels/weights.h"

namespace brickdl::cuda {

// `plan` was made from `graph`; inputs[k] is the NCDHW tensor of plan.input_ids[k]; `weights`
// holds the parameters of the group's layers (as kernels::make_weights makes them). Returns the
// group's last layer's output, NCDHW.
std::vector<float> rounded_reference(const Graph& graph, const KernelPlan& plan,
                                     const std::vector<const kernels::Tensor*>& inputs,
                                     const kernels::ModelWeights& weights);

// The tolerance of a kernel of `plan` against rounded_reference:
//  - element-wise, one ulp of the storage type at the reference value (rtol 2^-7 for bf16,
//    2^-10 for fp16: the output's own rounding may go the other way), and the fp32 defaults
//    (atol 1e-5, rtol 1e-4) underneath;
//  - norm-wise, relative to max|ref|:
//      norm_rtol = s · (Σ over reducing layers l of (2^-24 · sqrt(K_l) + u_l / sqrt(K_l))
//                       + max over the other layers of u_l):
//    a reducing layer's fp32 sum of K_l terms in another order (as kernels/validation.h), and
//    one operand that the kernel computed, then rounded (stored, or for the tensor cores), and
//    that went to the other neighbour: one ulp u_l of that format (2^-7 bf16, 2^-10 tf32 and
//    fp16; 0 where the layer reads no such operand), diluted among the K_l terms it is summed
//    with. A layer that reduces nothing (elementwise, pools of stored values) passes such a flip
//    on undiluted but to one element only, and flips are rare, so one is counted for all of
//    them. s = 3: measured against the errors the emulated kernels make (the tests of
//    tests/device record them; results/kernels/rounding.md), the largest used about half the
//    bound.
kernels::Tolerance rounded_tolerance(const Graph& graph, const KernelPlan& plan);

} // namespace brickdl::cuda
