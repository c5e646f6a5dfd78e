#pragma once
// Per-element arithmetic shared by the reference ops and the block kernels, so that both
// evaluate every output element with the same operations in the same order.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/graph.h"

namespace brickdl::kernels::detail {

// Logistic sigmoid, 1 / (1 + e^−v), and SiLU, v · sigmoid(v) (ONNX Sigmoid; Sigmoid → Mul).
inline float sigmoid(float v) {
  return 1.0f / (1.0f + std::exp(-v));
}
inline float silu(float v) {
  return v * sigmoid(v);
}
// torch's hardsigmoid / hardswish (ONNX HardSigmoid with alpha 1/6, beta 1/2; HardSwish), and
// the exact GELU (ONNX Gelu; torch's default), x / 2 · (1 + erf(x / √2)).
inline float hard_sigmoid(float v) {
  if (std::isnan(v))
    return v;
  return std::min(std::max(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
}
inline float hard_swish(float v) {
  return v * hard_sigmoid(v);
}
inline float gelu(float v) {
  return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
}
// ONNX Clip: min(max(v, lo), hi); NaN stays NaN.
inline float clip(float v, float lo, float hi) {
  if (std::isnan(v))
    return v;
  return std::min(std::max(v, lo), hi);
}

// An activation (a layer's epilogue or its own op), with its parameters: the leaky relu's slope,
// the clip's range. NaN in, NaN out, as in PyTorch (relu(NaN) = NaN, clamp(NaN) = NaN, max_pool
// over a window holding a NaN = NaN): a comparison with a NaN is false, so each op tests for it
// first.
inline float activate(float v, Activation a, float slope, float lo = 0.0f, float hi = 0.0f) {
  switch (a) {
  case Activation::kNone: return v;
  case Activation::kRelu: return v > 0.0f || std::isnan(v) ? v : 0.0f;
  case Activation::kLeakyRelu: return v > 0.0f || std::isnan(v) ? v : v * slope;
  case Activation::kClip: return clip(v, lo, hi);
  case Activation::kSigmoid: return sigmoid(v);
  case Activation::kSilu: return silu(v);
  case Activation::kHardSwish: return hard_swish(v);
  case Activation::kHardSigmoid: return hard_sigmoid(v);
  case Activation::kGelu: return gelu(v);
  }
  return v;
}

// One step of a max pool: the larger of the running maximum `m` and `v`, NaN as soon as either
// is NaN (PyTorch: `val > maxval || isnan(val)`).
inline float max_step(float m, float v) {
  return v > m || std::isnan(v) ? v : m;
}

// Source taps of one output coordinate of a linear (bilinear / trilinear) upsample with
// align_corners = False, as PyTorch computes them: src = max((dst + 0.5) / r − 0.5, 0),
// i0 = floor(src), i1 = min(i0 + 1, extent − 1), weights 1 − λ and λ with λ = src − i0.
struct LinearTap {
  int64_t i0 = 0, i1 = 0;
  float w0 = 1.0f, w1 = 0.0f;
};

inline LinearTap linear_tap(int64_t dst, int64_t scale, int64_t in_extent) {
  LinearTap t;
  if (scale == 1) {
    t.i0 = t.i1 = dst;
    return t;
  }
  const float ratio = 1.0f / static_cast<float>(scale);
  float src = ratio * (static_cast<float>(dst) + 0.5f) - 0.5f;
  if (src < 0.0f)
    src = 0.0f;
  t.i0 = static_cast<int64_t>(src);
  t.i1 = t.i0 < in_extent - 1 ? t.i0 + 1 : t.i0;
  t.w1 = src - static_cast<float>(t.i0);
  t.w0 = 1.0f - t.w1;
  return t;
}

inline int64_t nearest_source(int64_t dst, int64_t scale, int64_t in_extent) {
  return std::min(dst / scale, in_extent - 1);
}

// Upsample factor of `l` along `axis` (0 = d): 2-D tensors are not scaled in depth.
inline int64_t upsample_factor(const Layer& l, int axis) {
  return (axis == 0 && l.out.spatial_rank != 3) ? 1 : l.upsample_scale;
}

// The window of a pool along one axis for output index o: [start, end) clipped to the input,
// and the extent PyTorch divides by when count_include_pad is true (the window clipped to the
// padded input, which can be shorter than the kernel in ceil mode).
struct PoolSpan {
  int64_t start = 0, end = 0; // clipped to [0, in_extent)
  int64_t padded_extent = 0;
};

inline PoolSpan avg_pool_span(int64_t o, int kernel, int stride, int pad, int64_t in_extent) {
  PoolSpan s;
  const int64_t start = o * stride - pad;
  const int64_t end = std::min<int64_t>(start + kernel, in_extent + pad);
  s.padded_extent = end - start;
  s.start = std::max<int64_t>(start, 0);
  s.end = std::min<int64_t>(end, in_extent);
  return s;
}

// The input channel that output channel `o` of a channel shuffle with `groups` groups reads
// (torch: view [N, g, C/g, ...] → transpose(1, 2) → view [N, C, ...]): output o = j·g + i holds
// input i·(C/g) + j.
inline int64_t shuffle_source(int64_t o, int64_t channels, int64_t groups) {
  return (o % groups) * (channels / groups) + o / groups;
}

// Layer norm of one pixel over its channels (PyTorch's LayerNorm: biased variance): the mean
// and 1 / sqrt(var + eps) of the `channels` values v[c · stride], summed in channel order in
// Acc, two passes; then each value is (v − mean) · inv_std · gamma + beta.
struct NormStats {
  float mean = 0.0f, inv_std = 1.0f;
};

template <typename Acc>
NormStats layer_norm_stats(const float* v, int64_t stride, int64_t channels, float eps) {
  Acc sum = 0;
  for (int64_t c = 0; c < channels; ++c)
    sum += v[c * stride];
  const Acc mean = sum / static_cast<Acc>(channels);
  Acc sq = 0;
  for (int64_t c = 0; c < channels; ++c) {
    const Acc d = static_cast<Acc>(v[c * stride]) - mean;
    sq += d * d;
  }
  const Acc var = sq / static_cast<Acc>(channels);
  return {static_cast<float>(mean),
          static_cast<float>(Acc{1} / std::sqrt(var + static_cast<Acc>(eps)))};
}

inline float layer_norm_value(float v, NormStats s, float gamma, float beta) {
  return (v - s.mean) * s.inv_std * gamma + beta;
}

} // namespace brickdl::kernels::detail
