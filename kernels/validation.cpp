#include "kernels/validation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace brickdl::kernels {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Whether `a` (output) matches `b` (reference) under the rules of validation.h.
bool matches(double a, double b, const Tolerance& tol) {
  if (std::isnan(b))
    return std::isnan(a);
  if (std::isinf(b))
    return a == b;
  return std::isfinite(a) && std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b);
}

std::string wrong_message(const Comparison& c, std::span<const float> out,
                          std::span<const float> ref, const Tolerance& tol) {
  const size_t i = static_cast<size_t>(c.first_bad);
  return std::to_string(c.bad) + " of " + std::to_string(c.elements) +
         " output elements differ from the reference beyond atol " + std::to_string(tol.atol) +
         " + rtol " + std::to_string(tol.rtol) + " (first at flat index " +
         std::to_string(c.first_bad) + ": " + std::to_string(out[i]) + " vs " +
         std::to_string(ref[i]) + "); max relative error " + std::to_string(c.max_rel_error);
}

} // namespace

Comparison compare(std::span<const float> out, std::span<const float> ref, const Tolerance& tol) {
  BRICKDL_CHECK(out.size() == ref.size(), "comparing " << out.size() << " output elements with "
                                                       << ref.size() << " reference elements");
  Comparison c;
  c.elements = static_cast<int64_t>(ref.size());
  double max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double a = out[i], b = ref[i];
    if (!matches(a, b, tol) && c.bad++ == 0)
      c.first_bad = static_cast<int64_t>(i);
    if (std::isfinite(a) && std::isfinite(b)) {
      c.max_abs_error = std::max(c.max_abs_error, std::fabs(a - b));
      max_ref = std::max(max_ref, std::fabs(b));
    } else if (!(std::isnan(a) && std::isnan(b)) && !(std::isinf(b) && a == b)) {
      ++c.undefined;
    }
  }
  if (c.undefined > 0)
    c.max_abs_error = kInf;
  c.max_rel_error = c.undefined > 0 ? kInf
                    : max_ref > 0   ? c.max_abs_error / max_ref
                                    : c.max_abs_error;
  if (!c.ok())
    c.message = wrong_message(c, out, ref, tol);
  return c;
}

} // namespace brickdl::kernels
