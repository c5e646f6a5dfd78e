#include "kernels/validation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "core/error.h"

namespace brickdl::kernels {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// tolerance_for (validation.h): the safety factor, and the unit roundoff of fp32 accumulation.
constexpr double kSafety = 8;
const double kAccumulationRoundoff = std::ldexp(1.0, -24);

// Whether `a` (output) matches `b` (reference) under the rules of validation.h; `norm_atol`
// is norm_rtol · max|ref|.
bool matches(double a, double b, const Tolerance& tol, double norm_atol) {
  if (std::isnan(b))
    return std::isnan(a);
  if (std::isinf(b))
    return a == b;
  return std::isfinite(a) && std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b) + norm_atol;
}

double max_finite_magnitude(std::span<const float> v) {
  double m = 0;
  for (const float x : v)
    if (std::isfinite(x))
      m = std::max(m, std::fabs(double{x}));
  return m;
}

// Mantissa bits (without the implicit one) a kernel rounds its multiply inputs to.
int mantissa_bits(DType t) {
  switch (t) {
  case DType::kF32: return 23;
  case DType::kTF32: return 10;
  case DType::kBF16: return 7;
  case DType::kF16: return 10;
  }
  BRICKDL_CHECK(false, "unknown dtype");
  return 0;
}

// Multiply-adds per output of `l` (0 when it reduces nothing): the graph builder's MACs per
// output element (set for conv, conv_transpose and linear only). A transposed conv's outputs
// meet different numbers of taps; its largest count: per axis, the taps k with
// k·d ≡ o + p (mod s) recur every s / gcd(s, d), so at most ceil(k / (s / gcd(s, d))) of them,
// times the input channels of a group.
int64_t reduction_of(const Graph& graph, const Layer& l) {
  const int64_t outputs = l.out.numel();
  if (l.op != OpKind::kConvTranspose || outputs == 0)
    return outputs > 0 ? l.macs / outputs : 0;
  int64_t taps = 1;
  for (size_t a = 0; a < 3; ++a) {
    const int period = l.window.stride[a] / std::gcd(l.window.stride[a], l.window.dilation[a]);
    taps *= (l.window.kernel[a] + period - 1) / period;
  }
  return graph.layer(l.inputs.at(0)).out.c / l.groups * taps;
}

std::string wrong_message(const Comparison& c, std::span<const float> out,
                          std::span<const float> ref, const Tolerance& tol) {
  const size_t i = static_cast<size_t>(c.first_bad);
  return std::to_string(c.bad) + " of " + std::to_string(c.elements) +
         " output elements differ from the reference beyond atol " + std::to_string(tol.atol) +
         " + rtol " + std::to_string(tol.rtol) +
         (tol.norm_rtol > 0 ? " + norm_rtol " + std::to_string(tol.norm_rtol) + " x max|ref|"
                            : std::string()) +
         " (first at flat index " + std::to_string(c.first_bad) + ": " + std::to_string(out[i]) +
         " vs " + std::to_string(ref[i]) + "); max relative error " +
         std::to_string(c.max_rel_error);
}

} // namespace

Comparison compare(std::span<const float> out, std::span<const float> ref, const Tolerance& tol) {
  BRICKDL_CHECK(out.size() == ref.size(), "comparing " << out.size() << " output elements with "
                                                       << ref.size() << " reference elements");
  Comparison c;
  c.elements = static_cast<int64_t>(ref.size());
  const double norm_atol = tol.norm_rtol > 0 ? tol.norm_rtol * max_finite_magnitude(ref) : 0;
  double max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double a = out[i], b = ref[i];
    if (!matches(a, b, tol, norm_atol) && c.bad++ == 0)
      c.first_bad = static_cast<int64_t>(i);
    if (std::isfinite(a) && std::isfinite(b)) {
      const double err = std::fabs(a - b);
      const double allowed = tol.atol + tol.rtol * std::fabs(b) + norm_atol;
      c.bound_used = std::max(c.bound_used, allowed > 0 ? err / allowed : err > 0 ? kInf : 0.0);
      c.max_abs_error = std::max(c.max_abs_error, err);
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

std::string check_summary(const Comparison& c, const Tolerance& tol) {
  std::ostringstream s;
  s << "check against the layer-by-layer reference: " << (c.ok() ? "passed" : "FAILED")
    << ": max relative error ";
  if (c.undefined > 0)
    s << "undefined";
  else
    s << c.max_rel_error;
  s << " (" << c.bad << " of " << c.elements << " elements beyond atol " << tol.atol << " + rtol "
    << tol.rtol;
  if (tol.norm_rtol > 0)
    s << " + norm_rtol " << tol.norm_rtol << " x max|ref|";
  if (c.undefined > 0)
    s << "; " << c.undefined << " with NaN or infinity on one side only";
  s << ")";
  return s.str();
}

double unit_roundoff(DType precision) {
  return std::ldexp(1.0, -(mantissa_bits(precision) + 1));
}

Tolerance tolerance_for(DType precision, int64_t reduction_length, int layers) {
  Tolerance t;
  const double k = static_cast<double>(std::max<int64_t>(1, reduction_length));
  const double per_layer = unit_roundoff(precision) + kAccumulationRoundoff * std::sqrt(k);
  const double norm = kSafety * std::max(1, layers) * per_layer;
  if (norm > t.rtol)
    t.norm_rtol = norm;
  return t;
}

Reduction group_reduction(const Graph& graph, const Group& group) {
  Reduction r{1, 0};
  for (int id = group.first; id <= group.last; ++id) {
    const int64_t k = reduction_of(graph, graph.layer(id));
    if (k > 0) {
      r.length = std::max(r.length, k);
      ++r.layers;
    }
  }
  r.layers = std::max(r.layers, 1);
  return r;
}

namespace {

Tolerance reduction_tolerance(DType precision, const Graph& graph, const Group& group, double atol,
                              double rtol) {
  const Reduction r = group_reduction(graph, group);
  Tolerance t = tolerance_for(precision, r.length, r.layers);
  t.atol = atol;
  t.rtol = rtol;
  return t;
}

} // namespace

Tolerance group_tolerance(const Graph& graph, const Group& group, double atol, double rtol) {
  return reduction_tolerance(graph.dtype(), graph, group, atol, rtol);
}

Tolerance fp32_group_tolerance(const Graph& graph, const Group& group, double atol, double rtol) {
  return reduction_tolerance(DType::kF32, graph, group, atol, rtol);
}

} // namespace brickdl::kernels
