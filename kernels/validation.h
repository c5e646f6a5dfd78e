#pragma once
// Validation of a backend's output against the reference: the one comparison the CPU
// measurer, the CUDA measurer and `brickdl-run --check` share.
//
//   output, reference (same length) ──compare(out, ref, tolerance)──► Comparison
//                                                                       ├─ bad elements (count,
//                                                                       │  first flat index)
//                                                                       ├─ max abs / rel error
//                                                                       └─ message (when bad)
//
// Element i is good when
//  - the reference is finite: the output is finite and
//      |out − ref| <= atol + rtol·|ref| + norm_rtol·max|ref|
//    (max over the finite references; a NaN or an infinity where the reference is finite
//    fails);
//  - the reference is NaN: the output is NaN too (NaN at the same place in both agrees: the
//    reference propagates NaN as PyTorch does, so a NaN there is the right answer);
//  - the reference is ±inf: the output is the same infinity.
// Errors are norm-wise, over the finite pairs: max_abs_error = max |out − ref|,
// max_rel_error = max_abs_error / max |ref| (max_abs_error itself when every |ref| is 0). A
// pair whose error is undefined — a NaN or an infinity on one side only, or opposite
// infinities — is never dropped: it is counted in `undefined`, and both maxima become +inf.
// Pairs that match a non-finite reference (NaN and NaN, inf and inf) add no error.
//
// Tolerance per precision (tolerance_for). The reference computes in fp32. Each output of a
// conv / linear layer is a dot product of K terms accumulated in fp32; with tf32, bf16 or fp16
// math its inputs are first rounded to a p-bit mantissa, unit roundoff u_p = 2^-(p+1): fp32
// p = 23 (6.0e-8: no rounding beyond the products' own), tf32 p = 10 (4.9e-4), bf16 p = 7
// (3.9e-3), fp16 p = 10 (4.9e-4). On random data the errors are random walks:
//  - input rounding: each term off by about u_p, independently, so the sum is off by about
//    u_p·sqrt(K)·rms(term), which is u_p relative to the output (zero-mean terms: the sum grows
//    like sqrt(K)·rms(term) as well);
//  - fp32 accumulation in another order than the reference's: each partial sum (about
//    sqrt(j)·rms(term)) rounded with u = 2^-24, about u·sqrt(K) relative to the output.
// An element whose sum cancels to near zero keeps the error of its terms, so the bound is
// norm-wise, relative to the largest reference magnitude, and it adds up over the group's
// reducing layers (each passes its error on):
//   norm_rtol = 8 · L · (u_p + 2^-24 · sqrt(K))
// with K the group's largest reduction (conv: input channels / groups × kernel volume;
// conv_transpose: input channels / groups × the most taps one output meets; linear: input
// features), L its number of conv / conv_transpose / linear layers, 8 a safety factor for the tail
// over millions of outputs. compare() then passes exactly when its norm-wise max_rel_error is at
// most norm_rtol (or the element-wise part holds). The element-wise fp32 defaults (atol 1e-5,
// rtol 1e-4) stay underneath: where the norm-wise term is below the default rtol (fp32 while
// L·(1 + sqrt(K)) < 209, e.g. three 3×3 convs of 512 channels) norm_rtol is 0, today's fp32
// tolerance exactly. (A bound of u_p·sqrt(K) relative to the output would be slack: for bf16
// and K = 4608 it exceeds 1, and an all-zero output would pass.)
#include <cstdint>
#include <span>
#include <string>

#include "core/graph.h"
#include "core/group.h"

namespace brickdl::kernels {

struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-4;
  double norm_rtol = 0; // allowance relative to the largest |ref| (norm-wise; see above)
};

struct Comparison {
  int64_t elements = 0;
  int64_t bad = 0;        // elements outside the tolerance (see above)
  int64_t first_bad = -1; // flat index of the first, -1 when none
  int64_t undefined = 0;  // elements whose error is undefined (NaN / inf on one side only)
  double max_abs_error = 0;
  double max_rel_error = 0;
  // The largest |out − ref| / (atol + rtol·|ref| + norm_rtol·max|ref|) over the finite pairs:
  // how much of its tolerance the worst element used (at most 1 when ok() and every pair is
  // finite; +inf when some allowance is 0 and its error is not).
  double bound_used = 0;
  // Empty when ok(); else "N of M output elements differ from the reference beyond atol A +
  // rtol R [+ norm_rtol X x max|ref|] (first at flat index I: out vs ref); max relative
  // error E".
  std::string message;

  bool ok() const { return bad == 0; }
};

// Compares `out` with `ref` element-wise under `tol`. Throws InternalError when the sizes
// differ.
Comparison compare(std::span<const float> out, std::span<const float> ref, const Tolerance& tol);

// One line for a whole-output check (brickdl-run --check): "check against the layer-by-layer
// reference: passed|FAILED: max relative error E (B of M elements beyond atol A + rtol R
// [+ norm_rtol X x max|ref|]; U with NaN or infinity on one side only)".
std::string check_summary(const Comparison& c, const Tolerance& tol);

// The unit roundoff 2^-(p+1) of the mantissa `precision` rounds a product's inputs to.
double unit_roundoff(DType precision);

// The tolerance for an output of `precision` computed through `layers` chained dot products
// of at most `reduction_length` terms (see above): the fp32 defaults, plus norm_rtol = 8 · L ·
// (u_p + 2^-24 · sqrt(K)) when that exceeds the default rtol. Non-decreasing in K, L and u_p.
Tolerance tolerance_for(DType precision, int64_t reduction_length, int layers = 1);

// The reductions of a group, for tolerance_for.
struct Reduction {
  int64_t length = 1; // K: terms per output of its largest reduction (1 when none)
  int layers = 1;     // L: its conv / linear layers (at least 1)
};
Reduction group_reduction(const Graph& graph, const Group& group);

// The tolerance a measurement of `group` validates with: the experiment's element-wise `atol`
// and `rtol` (MeasureOptions) and the norm-wise allowance of the graph's precision.
Tolerance group_tolerance(const Graph& graph, const Group& group, double atol, double rtol);

// The same for an output computed in fp32 whatever the graph's precision: the CPU executor's
// (its brick kernels and oneDNN compute in fp32 and round nothing to tf32 or 16 bits; the CPU
// measurer, brickdl-run --check, brickdl.run). A tf32 or 16-bit graph's allowance is for
// kernels that round as that precision does; a CPU run held to it would pass errors of several
// percent (three bf16 layers: 9.4% of max|ref|).
Tolerance fp32_group_tolerance(const Graph& graph, const Group& group, double atol = 1e-5,
                               double rtol = 1e-4);

} // namespace brickdl::kernels
