#include "core/limits.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/graph.h"

namespace brickdl {

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    return std::numeric_limits<int64_t>::max();
  return r;
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    return std::numeric_limits<int64_t>::max();
  return r;
}

int64_t checked_numel(const TensorShape& s) {
  return saturating_mul(saturating_mul(saturating_mul(s.n, s.c), saturating_mul(s.d, s.h)), s.w);
}

std::string limit_text(const SizeLimit& limit) {
  return fmt::format("{} are limited to {} ({})", limit.what, limit.max, limit.why);
}

namespace {

// "out_channels 1073741824: channels of a tensor are limited to 65536 (...)".
std::string over(const std::string& name, int64_t value, const SizeLimit& limit) {
  return fmt::format("{} {}: {}", name, value, limit_text(limit));
}

} // namespace

std::string shape_limit_problem(const TensorShape& s) {
  const std::string at = s.str() + ": ";
  if (s.n > kMaxBatch.max)
    return at + over("batch", s.n, kMaxBatch);
  if (s.spatial_rank == 0 && s.c > kMaxFeatures.max)
    return at + over("features", s.c, kMaxFeatures);
  if (s.spatial_rank != 0 && s.c > kMaxChannels.max)
    return at + over("channels", s.c, kMaxChannels);
  for (const int64_t e : {s.d, s.h, s.w})
    if (e > kMaxExtent.max)
      return at + over("extent", e, kMaxExtent);
  const int64_t n = checked_numel(s);
  if (n > kMaxTensorElements.max)
    return at +
           (n == std::numeric_limits<int64_t>::max() ? std::string("more than 2^63")
                                                     : std::to_string(n)) +
           " elements: " + limit_text(kMaxTensorElements);
  return "";
}

std::string attribute_limit_problem(const Layer& l) {
  const bool flat = l.op == OpKind::kLinear;
  const SizeLimit& out_limit = flat ? kMaxFeatures : kMaxChannels;
  if (l.out_channels > out_limit.max)
    return over(flat ? "out_features" : "out_channels", l.out_channels, out_limit);
  const Window& w = l.window;
  for (size_t a = 0; a < 3; ++a) {
    if (w.kernel[a] > kMaxKernel.max)
      return over("kernel", w.kernel[a], kMaxKernel);
    for (const int v :
         {w.stride[a], w.dilation[a], w.pad[a], l.output_pad[a], l.pad_begin[a], l.pad_end[a]})
      if (v > kMaxWindowParam.max || v < -kMaxWindowParam.max)
        return over("a stride, dilation or padding of", v, kMaxWindowParam);
  }
  if (l.upsample_scale > kMaxWindowParam.max)
    return over("scale", l.upsample_scale, kMaxWindowParam);
  return "";
}

std::string layer_limit_problem(const Layer& l) {
  const std::string s = shape_limit_problem(l.out);
  if (!s.empty())
    return "output " + s;
  if (l.params > kMaxLayerWeights.max)
    return over("weights", l.params, kMaxLayerWeights);
  if (l.macs > kMaxGraphMacs.max)
    return over("MACs", l.macs, kMaxGraphMacs);
  return "";
}

} // namespace brickdl
