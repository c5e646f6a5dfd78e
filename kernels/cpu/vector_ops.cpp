// The vector loops of the CPU kernels (vector_ops.h), instantiated for 8 and 16 lanes. Every
// loop over `l < L` is one or two vector operations; rows of a channel block are computed into a
// per-thread row buffer and then stored into the lanes the caller owns.
#include "kernels/cpu/vector_ops.h"

#include <immintrin.h>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/detail/op_math.h"

namespace brickdl::kernels::cpu::detail {

namespace om = brickdl::kernels::detail;

ActParams epilogue_of(const Layer& l) {
  return {l.activation, l.leaky_slope, l.clip_min, l.clip_max};
}

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceil_div_signed(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

float* thread_buffer(int slot, int64_t floats) {
  thread_local std::vector<float> buffers[4];
  std::vector<float>& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < floats)
    b.resize(static_cast<size_t>(floats));
  return b.data();
}

// The scalar function of the reference, for the rare non-finite inputs of the exp / erf family.
float scalar_act(float v, const ActParams& a) {
  return om::activate(v, a.act, a.slope, a.lo, a.hi);
}

// The function of a chunk through Eigen, in place (coefficient-wise: no aliasing).
void eigen_act(float* q, int64_t len, Activation act) {
  Eigen::Map<Eigen::ArrayXf> x(q, len);
  if (act == Activation::kSigmoid)
    x = x.logistic();
  else if (act == Activation::kSilu)
    x = x * x.logistic();
  else
    x = 0.5f * x * (1.0f + (x * 0.70710678118654752f).erf());
}

// sigmoid, silu or gelu of p[0, n) through Eigen's vectorized logistic / erf. A chunk with an
// input that is not finite (rare) keeps a copy and gives those inputs the reference's scalar
// function (NaN stays NaN, silu(−inf) is NaN, where Eigen's clamped logistic would not be).
void activate_transcendental(float* p, int64_t n, const ActParams& a) {
  constexpr int64_t kChunk = 512;
  float saved[kChunk];
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t len = std::min(kChunk, n - s);
    float* q = p + s;
    bool finite = true;
#pragma omp simd reduction(&& : finite)
    for (int64_t i = 0; i < len; ++i)
      finite = finite && std::isfinite(q[i]);
    if (finite) {
      eigen_act(q, len, a.act);
      continue;
    }
    std::copy_n(q, len, saved);
    eigen_act(q, len, a.act);
    for (int64_t i = 0; i < len; ++i)
      if (!std::isfinite(saved[i]))
        q[i] = scalar_act(saved[i], a);
  }
}

} // namespace

void activate(float* p, int64_t n, const ActParams& a) {
  // The parameters as locals: `p` could alias `a` for all the compiler knows, which would keep
  // them in memory and the loops scalar.
  const float slope = a.slope, lo = a.lo, hi = a.hi;
  switch (a.act) {
  case Activation::kNone: return;
  case Activation::kRelu:
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] > 0.0f || p[i] != p[i] ? p[i] : 0.0f;
    return;
  case Activation::kLeakyRelu:
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] > 0.0f || p[i] != p[i] ? p[i] : p[i] * slope;
    return;
  case Activation::kClip:
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] != p[i] ? p[i] : std::min(std::max(p[i], lo), hi);
    return;
  case Activation::kHardSigmoid:
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] != p[i] ? p[i] : std::min(std::max(p[i] * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
    return;
  case Activation::kHardSwish:
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float hs =
          p[i] != p[i] ? p[i] : std::min(std::max(p[i] * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
      p[i] = p[i] * hs;
    }
    return;
  case Activation::kSigmoid:
  case Activation::kSilu:
  case Activation::kGelu: activate_transcendental(p, n, a); return;
  }
}

namespace {

// The op of a standalone activation layer as an ActParams.
ActParams op_act(const Layer& l) {
  return {op_activation(l.op), l.leaky_slope, l.clip_min, l.clip_max};
}

template <int L> struct Kernels {
  // Lanes [lo, hi) of block b that channel range [c0, c1) covers.
  static void lane_range(int64_t b, int64_t c0, int64_t c1, int* lo, int* hi) {
    *lo = static_cast<int>(std::max<int64_t>(c0 - b * L, 0));
    *hi = static_cast<int>(std::min<int64_t>(c1 - b * L, L));
  }

  // The padding lanes of a view's last block stay zero (kernels/cpu/blocked.h): the unit that
  // writes the view's last channel also writes zeros into lanes [hi, tail_end).
  static int tail_end(const BlockedView& out, int64_t b, int hi) {
    return hi < L && b * L + hi == out.stored.c1 ? L : hi;
  }

  // out (z, y, x0 + j) of block b <- row[j] (count pixels of L lanes), lanes [lo, hi).
  static void store_lanes(const float* row, const BlockedView& out, int64_t b, int64_t z, int64_t y,
                          int64_t x0, int64_t count, int lo, int hi) {
    float* o = out.at(b, z, y, x0);
    if (lo == 0 && hi == L) {
      std::copy_n(row, count * L, o);
      return;
    }
    const int tail = tail_end(out, b, hi);
    for (int64_t j = 0; j < count; ++j) {
      for (int l = lo; l < hi; ++l)
        o[j * L + l] = row[j * L + l];
      for (int l = hi; l < tail; ++l)
        o[j * L + l] = 0.0f;
    }
  }

  static void bias_act(float* c, int64_t n, int m, int64_t ldc, const float* bias,
                       const ActParams& a) {
    if (bias)
      for (int64_t j = 0; j < n; ++j) {
        float* r = c + j * ldc;
#pragma omp simd
        for (int i = 0; i < m; ++i)
          r[i] += bias[i];
      }
    if (a.act == Activation::kNone)
      return;
    if (ldc == m) {
      activate(c, n * m, a);
      return;
    }
    for (int64_t j = 0; j < n; ++j)
      activate(c + j * ldc, m, a);
  }

  static void store_row(const float* c, int64_t ldc, int64_t ch0, int m, int64_t c0, int64_t c1,
                        const BlockedView& out, int64_t z, int64_t y, int64_t x0, int64_t count) {
    const int64_t lo_c = std::max(c0, ch0), hi_c = std::min(c1, ch0 + m);
    for (int64_t b = lo_c / L; b * L < hi_c; ++b) {
      int lo, hi;
      lane_range(b, lo_c, hi_c, &lo, &hi);
      float* o = out.at(b, z, y, x0);
      const float* s = c + (b * L - ch0);
      if (lo == 0 && hi == L) {
        for (int64_t j = 0; j < count; ++j) {
#pragma omp simd
          for (int l = 0; l < L; ++l)
            o[j * L + l] = s[j * ldc + l];
        }
        continue;
      }
      const int tail = tail_end(out, b, hi);
      for (int64_t j = 0; j < count; ++j) {
        for (int l = lo; l < hi; ++l)
          o[j * L + l] = s[j * ldc + l];
        for (int l = hi; l < tail; ++l)
          o[j * L + l] = 0.0f;
      }
    }
  }

  // ---- windowed ops: depthwise conv, max / avg pool -------------------------------------

  // Output columns [x0, x1) whose tap at offset `off` (x·s + off) lies in [0, extent).
  static void tap_columns(const Region& what, int64_t off, int64_t s, int64_t extent, int64_t* x0,
                          int64_t* x1) {
    *x0 = std::max(what.lo[2], ceil_div_signed(-off, s));
    *x1 = std::min(what.hi[2], floor_div(extent - 1 - off, s) + 1);
  }

  // For each (block, z, y) row of `what`: row <- init; every tap inside the input calls
  // tap(row + (x − what.lo[2])·L, input vector, tap index) for the columns it covers; then
  // finish(row, z, y) and a store of the lanes of `what`.
  template <typename Init, typename Tap, typename Finish>
  static void windowed(const Graph& g, const Layer& l, const ConstBlockedView& in,
                       const BlockedView& out, const Region& what, Init init, Tap tap,
                       Finish finish) {
    const TensorShape& is = g.layer(l.inputs[0]).out;
    const Window& w = l.window;
    const int64_t ex = what.extent(2);
    float* row = thread_buffer(0, ex * L);
    for (int64_t b = what.c0 / L; b * L < what.c1; ++b)
      for (int64_t z = what.lo[0]; z < what.hi[0]; ++z)
        for (int64_t y = what.lo[1]; y < what.hi[1]; ++y) {
          init(row, b);
          int t = 0;
          for (int a = 0; a < w.kernel[0]; ++a)
            for (int bb = 0; bb < w.kernel[1]; ++bb)
              for (int cc = 0; cc < w.kernel[2]; ++cc, ++t) {
                const int64_t iz = z * w.stride[0] - w.pad[0] + int64_t{a} * w.dilation[0];
                const int64_t iy = y * w.stride[1] - w.pad[1] + int64_t{bb} * w.dilation[1];
                if (iz < 0 || iz >= is.d || iy < 0 || iy >= is.h)
                  continue;
                const int64_t off = int64_t{cc} * w.dilation[2] - w.pad[2];
                int64_t x0, x1;
                tap_columns(what, off, w.stride[2], is.w, &x0, &x1);
                if (x0 >= x1)
                  continue;
                const float* src = in.at(b, iz, iy, x0 * w.stride[2] + off);
                tap(row + (x0 - what.lo[2]) * L, src, int64_t{w.stride[2]} * L, x1 - x0, b, t);
              }
          finish(row, b, z, y);
          int lo, hi;
          lane_range(b, what.c0, what.c1, &lo, &hi);
          store_lanes(row, out, b, z, y, what.lo[2], ex, lo, hi);
        }
  }

  // Output pixels [x, x + U) of one row of a depthwise conv into row[0, U·L): U accumulators of
  // one vector each stay in registers across every tap; `rows` are the input rows the taps of
  // the row read (block b, x = 0) with their weight vectors (kw per row). Interior pixels only
  // (every kw tap inside the input) when U > 1.
  // One AVX2 vector; a block of L lanes is V of them.
  using v8 = float __attribute__((vector_size(32)));
  static constexpr int V = L / 8;
  static v8 load(const float* p) {
    v8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(float* p, v8 v) {
    std::memcpy(p, &v, sizeof v);
  }

  // Activations in registers (Eigen's AVX2 logistic and erf packets for sigmoid, silu and gelu),
  // with the reference's results for NaN and infinities.
  static bool in_register(const ActParams&) {
    return true;
  }
  static v8 act_vector(v8 v, const ActParams& a) {
    const v8 zero = v8{}, one = zero + 1.0f, inf = zero + std::numeric_limits<float>::infinity();
    const v8 nan = zero + std::numeric_limits<float>::quiet_NaN();
    const auto logistic = [](v8 x) {
      return reinterpret_cast<v8>(
          Eigen::internal::scalar_logistic_op<float>().packetOp(reinterpret_cast<__m256>(x)));
    };
    v8 r = v;
    switch (a.act) {
    case Activation::kNone: return v;
    case Activation::kRelu: r = v > zero ? v : zero; break;
    case Activation::kLeakyRelu: r = v > zero ? v : v * a.slope; break;
    case Activation::kClip: {
      const v8 lo = zero + a.lo, hi = zero + a.hi;
      r = v > lo ? v : lo;
      r = r < hi ? r : hi;
      break;
    }
    case Activation::kHardSigmoid:
    case Activation::kHardSwish: {
      r = v * (1.0f / 6.0f) + 0.5f;
      r = r > zero ? r : zero;
      r = r < one ? r : one;
      if (a.act == Activation::kHardSwish)
        r = v * r;
      break;
    }
    case Activation::kSigmoid:
      r = logistic(v);
      r = v == -inf ? zero : v == inf ? one : r;
      break;
    case Activation::kSilu:
      r = v * logistic(v);
      r = v == -inf ? nan : v == inf ? inf : r;
      break;
    case Activation::kGelu: {
      const v8 e = reinterpret_cast<v8>(Eigen::internal::scalar_erf_op<float>().packetOp(
          reinterpret_cast<__m256>(v * 0.70710678118654752f)));
      r = 0.5f * v * (1.0f + e);
      r = v == -inf ? nan : v == inf ? inf : r;
      break;
    }
    }
    return v != v ? v : r;
  }

  // The kernel columns [c0, c1) of output column x that lie inside the input: all of them for
  // interior pixels, else the range of c with 0 <= x·s − p + c·d < in_w.
  static void tap_range(const Window& w, int64_t x, int64_t in_w, int* c0, int* c1) {
    const int64_t base = x * w.stride[2] - w.pad[2];
    if (w.dilation[2] == 1) { // no division (tens of cycles each, per border pixel)
      *c0 = static_cast<int>(std::max<int64_t>(0, -base));
      *c1 = static_cast<int>(std::min<int64_t>(w.kernel[2], in_w - base));
      return;
    }
    *c0 = static_cast<int>(std::max<int64_t>(0, ceil_div_signed(-base, w.dilation[2])));
    *c1 = static_cast<int>(
        std::min<int64_t>(w.kernel[2], floor_div(in_w - 1 - base, w.dilation[2]) + 1));
  }

  // The taps [c0, c1) of one input row (`src_row`, weights `w_row`) for output pixels
  // [x, x + U), into one set of accumulators.
  template <int U>
  static void row_taps(v8 (&a)[U][V], const float* src_row, const float* w_row, const Window& w,
                       int64_t x, int c0, int c1) {
    const int64_t step = int64_t{w.stride[2]} * L;
    for (int c = c0; c < c1; ++c) {
      v8 wv[V];
      for (int k = 0; k < V; ++k)
        wv[k] = load(w_row + c * L + 8 * k);
      const int64_t ix = x * w.stride[2] - w.pad[2] + int64_t{c} * w.dilation[2];
      const float* src = src_row + ix * L;
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u)
#pragma GCC unroll 2
        for (int k = 0; k < V; ++k)
          a[u][k] += wv[k] * load(src + u * step + 8 * k);
    }
  }

  template <int U, bool Check>
  static void depthwise_pixels(float* __restrict row, const float* const* rows,
                               const float* const* wrows, int nrows, const Window& w, int64_t x,
                               int64_t in_w, const float* bias, const ActParams& act) {
    v8 acc[U][V] = {};
    int c0 = 0, c1 = w.kernel[2];
    if (Check)
      tap_range(w, x, in_w, &c0, &c1);
    const auto taps = [&](v8(&a)[U][V], int r) { row_taps<U>(a, rows[r], wrows[r], w, x, c0, c1); };
    // U·V accumulators are U·V chains of dependent FMAs; a core keeps about 8 FMAs in flight,
    // so fewer pixels spread the input rows over P sets of them (summed at the end), or one
    // pixel waited on its two chains (a 7-wide row's border pixels took most of its time).
    constexpr int P = U >= 4 ? 1 : 4 / U;
    v8 part[P > 1 ? P - 1 : 1][U][V] = {};
    int r = 0;
    for (; r + P <= nrows; r += P) {
      taps(acc, r);
#pragma GCC unroll 4
      for (int q = 1; q < P; ++q)
        taps(part[q - 1], r + q);
    }
    if (r < nrows)
      taps(acc, r);
#pragma GCC unroll 4
    for (int q = 1; q < P; ++q)
      if (r + q < nrows)
        taps(part[q - 1], r + q);
    if constexpr (P > 1) {
#pragma GCC unroll 4
      for (int q = 0; q < P - 1; ++q)
#pragma GCC unroll 8
        for (int u = 0; u < U; ++u)
#pragma GCC unroll 2
          for (int k = 0; k < V; ++k)
            acc[u][k] += part[q][u][k];
    }
    v8 b[V] = {};
    if (bias)
      for (int k = 0; k < V; ++k)
        b[k] = load(bias + 8 * k);
    const bool fused = in_register(act);
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u)
#pragma GCC unroll 2
      for (int k = 0; k < V; ++k)
        store(row + u * L + 8 * k, fused ? act_vector(acc[u][k] + b[k], act) : acc[u][k] + b[k]);
  }

  // One output row of one lane block, columns [x0, x1): interior pixels four or two at a
  // time, border pixels over their valid taps only.
  static void depthwise_row(float* dst, const float* const* rows, const float* const* wrows, int nr,
                            const Window& w, int64_t x0, int64_t x1, int64_t x_in0, int64_t x_in1,
                            int64_t in_w, const float* bias, const ActParams& act) {
    for (int64_t x = x0; x < x1;) {
      float* r = dst + (x - x0) * L;
      const int64_t inside = x >= x_in0 ? x_in1 - x : 0; // interior pixels from x
      if (inside >= 4) {
        depthwise_pixels<4, false>(r, rows, wrows, nr, w, x, in_w, bias, act);
        x += 4;
      } else if (inside >= 2) {
        depthwise_pixels<2, false>(r, rows, wrows, nr, w, x, in_w, bias, act);
        x += 2;
      } else {
        if (inside == 1)
          depthwise_pixels<1, false>(r, rows, wrows, nr, w, x, in_w, bias, act);
        else
          depthwise_pixels<1, true>(r, rows, wrows, nr, w, x, in_w, bias, act);
        x += 1;
      }
    }
  }

  static void depthwise(const Graph& g, const PackedLayer& p, const ConstBlockedView& in,
                        const BlockedView& out, const Region& what) {
    const Layer& l = *p.layer;
    const TensorShape& is = g.layer(l.inputs[0]).out;
    const Window& w = l.window;
    const int64_t ex = what.extent(2);
    const int64_t taps = int64_t{w.kernel[0]} * w.kernel[1] * w.kernel[2];
    const ActParams act = epilogue_of(l);
    // Columns whose every tap lies inside the input.
    const int64_t x_in0 = std::max(what.lo[2], ceil_div_signed(w.pad[2], w.stride[2]));
    const int64_t x_in1 = std::min(
        what.hi[2],
        floor_div(is.w - 1 + w.pad[2] - int64_t{w.dilation[2]} * (w.kernel[2] - 1), w.stride[2]) +
            1);
    float* row = thread_buffer(0, ex * L);
    // The input rows of one output row's taps (kd·kh of them), per thread.
    thread_local std::vector<const float*> rows, wrows;
    for (int64_t b = what.c0 / L; b * L < what.c1; ++b)
      for (int64_t z = what.lo[0]; z < what.hi[0]; ++z)
        for (int64_t y = what.lo[1]; y < what.hi[1]; ++y) {
          rows.clear();
          wrows.clear();
          for (int a = 0; a < w.kernel[0]; ++a)
            for (int bb = 0; bb < w.kernel[1]; ++bb) {
              const int64_t iz = z * w.stride[0] - w.pad[0] + int64_t{a} * w.dilation[0];
              const int64_t iy = y * w.stride[1] - w.pad[1] + int64_t{bb} * w.dilation[1];
              if (iz < 0 || iz >= is.d || iy < 0 || iy >= is.h)
                continue;
              rows.push_back(in.at(b, iz, iy, 0));
              wrows.push_back(p.weight.get() +
                              (b * taps + (int64_t{a} * w.kernel[1] + bb) * w.kernel[2]) * L);
            }
          const int nr = static_cast<int>(rows.size());
          int lo, hi;
          lane_range(b, what.c0, what.c1, &lo, &hi);
          // Whole blocks straight into the output; partial ones through the row buffer.
          const bool direct = lo == 0 && hi == L;
          float* dst = direct ? out.at(b, z, y, what.lo[2]) : row;
          const float* bias = p.bias.empty() ? nullptr : p.bias.data() + b * L;
          depthwise_row(dst, rows.data(), wrows.data(), nr, w, what.lo[2], what.hi[2], x_in0, x_in1,
                        is.w, bias, act);
          if (!in_register(act))
            activate(dst, ex * L, act);
          if (!direct)
            store_lanes(row, out, b, z, y, what.lo[2], ex, lo, hi);
        }
  }

  static void max_pool(const Graph& g, const Layer& l, const ConstBlockedView& in,
                       const BlockedView& out, const Region& what) {
    const int64_t ex = what.extent(2);
    windowed(
        g, l, in, out, what,
        [&](float* row, int64_t) {
          std::fill_n(row, ex * L, -std::numeric_limits<float>::infinity());
        },
        [&](float* r, const float* s, int64_t step, int64_t count, int64_t, int) {
          for (int64_t j = 0; j < count; ++j) {
#pragma omp simd
            for (int q = 0; q < L; ++q) {
              const float v = s[j * step + q], m = r[j * L + q];
              r[j * L + q] = v > m || v != v ? v : m;
            }
          }
        },
        [](float*, int64_t, int64_t, int64_t) {});
  }

  static void avg_pool(const Graph& g, const Layer& l, const ConstBlockedView& in,
                       const BlockedView& out, const Region& what) {
    const TensorShape& is = g.layer(l.inputs[0]).out;
    const Window& w = l.window;
    const int64_t ex = what.extent(2);
    windowed(
        g, l, in, out, what, [&](float* row, int64_t) { std::fill_n(row, ex * L, 0.0f); },
        [&](float* r, const float* s, int64_t step, int64_t count, int64_t, int) {
          for (int64_t j = 0; j < count; ++j) {
#pragma omp simd
            for (int q = 0; q < L; ++q)
              r[j * L + q] += s[j * step + q];
          }
        },
        [&](float* row, int64_t, int64_t z, int64_t y) {
          const om::PoolSpan sz = om::avg_pool_span(z, w.kernel[0], w.stride[0], w.pad[0], is.d);
          const om::PoolSpan sy = om::avg_pool_span(y, w.kernel[1], w.stride[1], w.pad[1], is.h);
          for (int64_t j = 0; j < ex; ++j) {
            const om::PoolSpan sx =
                om::avg_pool_span(what.lo[2] + j, w.kernel[2], w.stride[2], w.pad[2], is.w);
            const int64_t count =
                l.count_include_pad
                    ? sz.padded_extent * sy.padded_extent * sx.padded_extent
                    : (sz.end - sz.start) * (sy.end - sy.start) * (sx.end - sx.start);
            const float d = static_cast<float>(count);
#pragma omp simd
            for (int q = 0; q < L; ++q)
              row[j * L + q] /= d;
          }
        });
  }

  // ---- elementwise ops ------------------------------------------------------------------

  // The row of operand `in` (broadcast along the axes of `bc`: c, d, h, w) that output row
  // (block b, z, y, columns [x0, x0 + ex)) reads: in place when nothing is broadcast, else
  // expanded into buffer `slot`.
  static const float* operand_row(const ConstBlockedView& in, const std::array<bool, 4>& bc,
                                  int64_t b, int64_t z, int64_t y, int64_t x0, int64_t ex,
                                  int slot) {
    const int64_t zz = bc[1] ? 0 : z, yy = bc[2] ? 0 : y;
    if (!bc[0] && !bc[3])
      return in.at(b, zz, yy, x0);
    float* buf = thread_buffer(slot, ex * L);
    for (int64_t j = 0; j < ex; ++j) {
      const int64_t xx = bc[3] ? 0 : x0 + j;
      if (bc[0]) {
        std::fill_n(buf + j * L, L, *in.element(0, zz, yy, xx));
      } else {
        std::copy_n(in.at(b, zz, yy, xx), L, buf + j * L);
      }
    }
    return buf;
  }

  template <typename F>
  static void elementwise(const Graph& g, const Layer& l, std::span<const ConstBlockedView> in,
                          const BlockedView& out, const Region& what, F f, const ActParams& act) {
    const int64_t ex = what.extent(2), n = ex * L;
    std::array<std::array<bool, 4>, 2> bc{};
    for (size_t k = 0; k < in.size() && k < 2; ++k)
      bc[k] = broadcast_axes(g.layer(l.inputs[k]).out, l.out);
    float* row = thread_buffer(0, n);
    for (int64_t b = what.c0 / L; b * L < what.c1; ++b)
      for (int64_t z = what.lo[0]; z < what.hi[0]; ++z)
        for (int64_t y = what.lo[1]; y < what.hi[1]; ++y) {
          const float* a = operand_row(in[0], bc[0], b, z, y, what.lo[2], ex, 1);
          const float* c =
              in.size() > 1 ? operand_row(in[1], bc[1], b, z, y, what.lo[2], ex, 2) : a;
          f(row, a, c, n, b);
          activate(row, n, act);
          int lo, hi;
          lane_range(b, what.c0, what.c1, &lo, &hi);
          store_lanes(row, out, b, z, y, what.lo[2], ex, lo, hi);
        }
  }

  template <typename Op>
  static void binary(const Graph& g, const Layer& l, std::span<const ConstBlockedView> in,
                     const BlockedView& out, const Region& what, Op op, const ActParams& act) {
    elementwise(
        g, l, in, out, what,
        [&](float* r, const float* a, const float* c, int64_t n, int64_t) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i)
            r[i] = op(a[i], c[i]);
        },
        act);
  }

  static void affine(const Graph& g, const PackedLayer& p, std::span<const ConstBlockedView> in,
                     const BlockedView& out, const Region& what) {
    elementwise(
        g, *p.layer, in, out, what,
        [&](float* r, const float* a, const float*, int64_t n, int64_t b) {
          const float* s = p.scale.data() + b * L;
          const float* t = p.shift.data() + b * L;
          for (int64_t j = 0; j < n / L; ++j) {
#pragma omp simd
            for (int q = 0; q < L; ++q)
              r[j * L + q] = a[j * L + q] * s[q] + t[q];
          }
        },
        ActParams{});
  }

  // ---- channel gathers: concat, slice, channel shuffle ----------------------------------

  // source(c) -> (input, channel).
  template <typename Source>
  static void gather(std::span<const ConstBlockedView> in, const BlockedView& out,
                     const Region& what, Source source) {
    const int64_t ex = what.extent(2);
    for (int64_t b = what.c0 / L; b * L < what.c1; ++b) {
      int lo, hi;
      lane_range(b, what.c0, what.c1, &lo, &hi);
      const auto [k0, s0] = source(b * L + lo);
      bool whole = lo == 0 && hi == L && s0 % L == 0;
      for (int q = 1; q < L && whole; ++q)
        whole = source(b * L + q) == std::pair<size_t, int64_t>{k0, s0 + q};
      for (int64_t z = what.lo[0]; z < what.hi[0]; ++z)
        for (int64_t y = what.lo[1]; y < what.hi[1]; ++y) {
          float* o = out.at(b, z, y, what.lo[2]);
          if (whole) {
            std::copy_n(in[k0].at(s0 / L, z, y, what.lo[2]), ex * L, o);
            continue;
          }
          for (int q = lo; q < hi; ++q) {
            const auto [k, s] = source(b * L + q);
            const float* src = in[k].element(s, z, y, what.lo[2]);
            for (int64_t j = 0; j < ex; ++j)
              o[j * L + q] = src[j * L];
          }
          for (int q = hi; q < tail_end(out, b, hi); ++q)
            for (int64_t j = 0; j < ex; ++j)
              o[j * L + q] = 0.0f;
        }
    }
  }

  // ---- upsample -------------------------------------------------------------------------

  static void upsample(const Graph& g, const Layer& l, const ConstBlockedView& in,
                       const BlockedView& out, const Region& what) {
    const TensorShape& is = g.layer(l.inputs[0]).out;
    const int64_t fd = om::upsample_factor(l, 0), fh = om::upsample_factor(l, 1),
                  fw = om::upsample_factor(l, 2);
    const int64_t ex = what.extent(2);
    float* row = thread_buffer(0, ex * L);
    for (int64_t b = what.c0 / L; b * L < what.c1; ++b)
      for (int64_t z = what.lo[0]; z < what.hi[0]; ++z)
        for (int64_t y = what.lo[1]; y < what.hi[1]; ++y) {
          for (int64_t j = 0; j < ex; ++j) {
            const int64_t x = what.lo[2] + j;
            float* r = row + j * L;
            if (!l.bilinear) {
              std::copy_n(in.at(b, om::nearest_source(z, fd, is.d), om::nearest_source(y, fh, is.h),
                                om::nearest_source(x, fw, is.w)),
                          L, r);
              continue;
            }
            const om::LinearTap tz = om::linear_tap(z, fd, is.d), ty = om::linear_tap(y, fh, is.h),
                                tx = om::linear_tap(x, fw, is.w);
            const auto px = [&](int64_t iz, int64_t iy, int64_t ix) {
              return in.at(b, iz, iy, ix);
            };
            const float *a00 = px(tz.i0, ty.i0, tx.i0), *a01 = px(tz.i0, ty.i0, tx.i1),
                        *a10 = px(tz.i0, ty.i1, tx.i0), *a11 = px(tz.i0, ty.i1, tx.i1),
                        *b00 = px(tz.i1, ty.i0, tx.i0), *b01 = px(tz.i1, ty.i0, tx.i1),
                        *b10 = px(tz.i1, ty.i1, tx.i0), *b11 = px(tz.i1, ty.i1, tx.i1);
#pragma omp simd
            for (int q = 0; q < L; ++q) {
              const float p0 = ty.w0 * (tx.w0 * a00[q] + tx.w1 * a01[q]) +
                               ty.w1 * (tx.w0 * a10[q] + tx.w1 * a11[q]);
              const float p1 = ty.w0 * (tx.w0 * b00[q] + tx.w1 * b01[q]) +
                               ty.w1 * (tx.w0 * b10[q] + tx.w1 * b11[q]);
              r[q] = tz.w0 * p0 + tz.w1 * p1;
            }
          }
          int lo, hi;
          lane_range(b, what.c0, what.c1, &lo, &hi);
          store_lanes(row, out, b, z, y, what.lo[2], ex, lo, hi);
        }
  }

  // ---- layer norm over the channels of each pixel ---------------------------------------

  static void layer_norm(const Graph& g, const PackedLayer& p, const ConstBlockedView& in,
                         const BlockedView& out, const Region& what) {
    const Layer& l = *p.layer;
    const int64_t channels = g.layer(l.inputs[0]).out.c, blocks = ceil_div(channels, L);
    const int64_t ex = what.extent(2);
    float* acc = thread_buffer(1, ex * L);
    float* mean = thread_buffer(2, 2 * ex);
    float* inv = mean + ex;
    std::fill_n(mean, ex, 0.0f);
    float* row = thread_buffer(0, ex * L);
    bool valid[L];
    for (int q = 0; q < L; ++q)
      valid[q] = (blocks - 1) * L + q < channels;
    for (int64_t z = what.lo[0]; z < what.hi[0]; ++z)
      for (int64_t y = what.lo[1]; y < what.hi[1]; ++y) {
        // Two passes as the reference: the mean, then the mean square deviation.
        for (int pass = 0; pass < 2; ++pass) {
          std::fill_n(acc, ex * L, 0.0f);
          for (int64_t b = 0; b < blocks; ++b) {
            const float* v = in.at(b, z, y, what.lo[2]);
            const bool last = b == blocks - 1;
            for (int64_t j = 0; j < ex; ++j) {
              const float m = mean[j];
#pragma omp simd
              for (int q = 0; q < L; ++q) {
                const float d = pass == 0 ? v[j * L + q] : v[j * L + q] - m;
                const float t = pass == 0 ? d : d * d;
                acc[j * L + q] += last && !valid[q] ? 0.0f : t; // padding lanes: no part
              }
            }
          }
          for (int64_t j = 0; j < ex; ++j) {
            double s = 0;
            for (int q = 0; q < L; ++q)
              s += acc[j * L + q];
            const double v = s / static_cast<double>(channels);
            if (pass == 0)
              mean[j] = static_cast<float>(v);
            else
              inv[j] = static_cast<float>(1.0 / std::sqrt(v + static_cast<double>(l.epsilon)));
          }
        }
        for (int64_t b = what.c0 / L; b * L < what.c1; ++b) {
          const float* v = in.at(b, z, y, what.lo[2]);
          const float* gm = p.scale.data() + b * L;
          const float* bt = p.shift.data() + b * L;
          for (int64_t j = 0; j < ex; ++j) {
            const float m = mean[j], s = inv[j];
#pragma omp simd
            for (int q = 0; q < L; ++q)
              row[j * L + q] = (v[j * L + q] - m) * s * gm[q] + bt[q];
          }
          int lo, hi;
          lane_range(b, what.c0, what.c1, &lo, &hi);
          store_lanes(row, out, b, z, y, what.lo[2], ex, lo, hi);
        }
      }
  }

  // ---- dispatch -------------------------------------------------------------------------

  // Long on purpose: one case per brickable op other than the GEMM convs.
  static void compute(const Graph& g, const PackedLayer& p, std::span<const ConstBlockedView> in,
                      const BlockedView& out, const Region& what) {
    const Layer& l = *p.layer;
    const ActParams none{};
    switch (l.op) {
    case OpKind::kConv: depthwise(g, p, in[0], out, what); break;
    case OpKind::kMaxPool: max_pool(g, l, in[0], out, what); break;
    case OpKind::kAvgPool: avg_pool(g, l, in[0], out, what); break;
    case OpKind::kBatchNorm: affine(g, p, in, out, what); break;
    case OpKind::kAdd:
      binary(
          g, l, in, out, what, [](float a, float b) { return a + b; }, epilogue_of(l));
      break;
    case OpKind::kSub:
      binary(
          g, l, in, out, what, [](float a, float b) { return a - b; }, none);
      break;
    case OpKind::kDiv:
      binary(
          g, l, in, out, what, [](float a, float b) { return a / b; }, none);
      break;
    case OpKind::kMul:
    case OpKind::kChannelMul:
      binary(
          g, l, in, out, what, [](float a, float b) { return a * b; }, none);
      break;
    case OpKind::kRelu:
    case OpKind::kLeakyRelu:
    case OpKind::kClip:
    case OpKind::kSigmoid:
    case OpKind::kSilu:
    case OpKind::kHardSwish:
    case OpKind::kHardSigmoid:
    case OpKind::kGelu:
      binary(
          g, l, in, out, what, [](float a, float) { return a; }, op_act(l));
      break;
    case OpKind::kConcat: {
      std::vector<int64_t> offsets{0};
      for (int id : l.inputs)
        offsets.push_back(offsets.back() + g.layer(id).out.c);
      gather(in, out, what, [&](int64_t c) {
        const size_t k = static_cast<size_t>(std::upper_bound(offsets.begin(), offsets.end(), c) -
                                             offsets.begin() - 1);
        return std::pair<size_t, int64_t>{k, c - offsets[k]};
      });
      break;
    }
    case OpKind::kSlice:
      gather(in, out, what, [&](int64_t c) {
        return std::pair<size_t, int64_t>{0, c + l.slice_begin};
      });
      break;
    case OpKind::kChannelShuffle: {
      const int64_t channels = g.layer(l.inputs[0]).out.c;
      gather(in, out, what, [&](int64_t c) {
        return std::pair<size_t, int64_t>{0, om::shuffle_source(c, channels, l.groups)};
      });
      break;
    }
    case OpKind::kUpsample: upsample(g, l, in[0], out, what); break;
    case OpKind::kLayerNorm: layer_norm(g, p, in[0], out, what); break;
    default:
      BRICKDL_CHECK(false, "layer " << l.name << " (" << op_name(l.op) << ") has no vector kernel");
    }
  }

  static void global_avg_pool(const BlockedTensor& in, BlockedTensor& out, int64_t n) {
    const int64_t pix = in.shape().spatial();
    for (int64_t b = 0; b < in.blocks(); ++b) {
      const float* v = in.image_data(n) + b * pix * L;
      double acc[L] = {};
      for (int64_t p = 0; p < pix; ++p) {
#pragma omp simd
        for (int q = 0; q < L; ++q)
          acc[q] += v[p * L + q];
      }
      float* o = out.image_data(n) + b * L;
      for (int q = 0; q < L; ++q)
        o[q] = static_cast<float>(acc[q] / static_cast<double>(pix));
    }
  }

  static VectorKernels table() {
    return {&bias_act, &store_row, &compute, &global_avg_pool};
  }
};

} // namespace

const VectorKernels& vector_kernels(int lanes) {
  static const VectorKernels k8 = Kernels<8>::table(), k16 = Kernels<16>::table();
  BRICKDL_CHECK(lanes == 8 || lanes == 16, "lanes must be 8 or 16, not " << lanes);
  return lanes == 8 ? k8 : k16;
}

} // namespace brickdl::kernels::cpu::detail
