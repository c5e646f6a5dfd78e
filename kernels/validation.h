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
//  - the reference is finite: the output is finite and |out − ref| <= atol + rtol·|ref|
//    (a NaN or an infinity where the reference is finite fails);
//  - the reference is NaN: the output is NaN too;
//  - the reference is ±inf: the output is the same infinity.
// Errors are norm-wise, over the finite pairs: max_abs_error = max |out − ref|,
// max_rel_error = max_abs_error / max |ref| (max_abs_error itself when every |ref| is 0). A
// pair whose error is undefined — a NaN or an infinity on one side only, or opposite
// infinities — is never dropped: it is counted in `undefined`, and both maxima become +inf.
// Pairs that match a non-finite reference (NaN and NaN, inf and inf) add no error.
#include <cstdint>
#include <span>
#include <string>

namespace brickdl::kernels {

struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-4;
};

struct Comparison {
  int64_t elements = 0;
  int64_t bad = 0;        // elements outside the tolerance (see above)
  int64_t first_bad = -1; // flat index of the first, -1 when none
  int64_t undefined = 0;  // elements whose error is undefined (NaN / inf on one side only)
  double max_abs_error = 0;
  double max_rel_error = 0;
  // Empty when ok(); else "N of M output elements differ from the reference beyond atol A +
  // rtol R (first at flat index I: out vs ref); max relative error E".
  std::string message;

  bool ok() const { return bad == 0; }
};

// Compares `out` with `ref` element-wise under `tol`. Throws InternalError when the sizes
// differ.
Comparison compare(std::span<const float> out, std::span<const float> ref, const Tolerance& tol);

} // namespace brickdl::kernels
