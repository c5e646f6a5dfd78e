#include "kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/graph_builder.h"
#include "kernels/detail/op_math.h"

namespace brickdl::kernels {

namespace {

using detail::activate;

TensorShape windowed_shape(const TensorShape& in, const Window& w, bool ceil_mode) {
  TensorShape out = in;
  out.d = window_out_extent(in.d, w.kernel[0], w.stride[0], w.pad[0], w.dilation[0], ceil_mode);
  out.h = window_out_extent(in.h, w.kernel[1], w.stride[1], w.pad[1], w.dilation[1], ceil_mode);
  out.w = window_out_extent(in.w, w.kernel[2], w.stride[2], w.pad[2], w.dilation[2], ceil_mode);
  BRICKDL_CHECK(out.d > 0 && out.h > 0 && out.w > 0, "window does not fit " << in.str());
  return out;
}

bool inside(int64_t i, int64_t extent) {
  return i >= 0 && i < extent;
}

// Long on purpose: the one loop nest of conv and conv_transpose. Output element by element:
// over the input channels of its group, then kd, kh, kw, the taps that reach it
// (`source(o, k, axis, extent)`: the input index tap k of output o reads, or −1) times the
// weight at ((row · kd + a) · kh + b) · kw + c, `row(co, ci)` giving the (co, ci) weight row;
// then bias and epilogue.
template <typename Acc, typename Source, typename Row>
Tensor gather_conv(const Tensor& x, const std::vector<float>& weight,
                   const std::vector<float>& bias, const TensorShape& os, int groups,
                   const Window& win, Source source, Row row, Epilogue ep) {
  const TensorShape& is = x.shape();
  const int64_t cin_g = is.c / groups, cout_g = os.c / groups;
  const int kd = win.kernel[0], kh = win.kernel[1], kw = win.kernel[2];
  Tensor y(os);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < os.n; ++n)
    for (int64_t co = 0; co < os.c; ++co) {
      const int64_t g = co / cout_g;
      for (int64_t oz = 0; oz < os.d; ++oz)
        for (int64_t oy = 0; oy < os.h; ++oy)
          for (int64_t ox = 0; ox < os.w; ++ox) {
            Acc acc = 0;
            for (int64_t cl = 0; cl < cin_g; ++cl) {
              const int64_t ci = g * cin_g + cl;
              const int64_t r = row(co, ci);
              for (int a = 0; a < kd; ++a) {
                const int64_t iz = source(oz, a, 0, is.d);
                if (iz < 0)
                  continue;
                for (int b = 0; b < kh; ++b) {
                  const int64_t iy = source(oy, b, 1, is.h);
                  if (iy < 0)
                    continue;
                  for (int c = 0; c < kw; ++c) {
                    const int64_t ix = source(ox, c, 2, is.w);
                    if (ix < 0)
                      continue;
                    const float wv = weight[static_cast<size_t>(((r * kd + a) * kh + b) * kw + c)];
                    acc += static_cast<Acc>(wv) * static_cast<Acc>(x.at(n, ci, iz, iy, ix));
                  }
                }
              }
            }
            if (!bias.empty())
              acc += static_cast<Acc>(bias[static_cast<size_t>(co)]);
            y.at(n, co, oz, oy, ox) =
                activate(static_cast<float>(acc), ep.activation, ep.slope, ep.clip_lo, ep.clip_hi);
          }
    }
  return y;
}

template <typename Acc>
Tensor conv_impl(const Tensor& x, const std::vector<float>& weight, const std::vector<float>& bias,
                 int64_t out_channels, const Window& win, int groups, Epilogue ep) {
  const TensorShape& is = x.shape();
  TensorShape os = windowed_shape(is, win, false);
  os.c = out_channels;
  const int64_t cin_g = is.c / groups;
  BRICKDL_CHECK(static_cast<int64_t>(weight.size()) ==
                    out_channels * cin_g * win.kernel[0] * win.kernel[1] * win.kernel[2],
                "conv weight has " << weight.size() << " values");
  BRICKDL_CHECK(bias.empty() || static_cast<int64_t>(bias.size()) == out_channels, "conv bias");
  const auto source = [&](int64_t o, int k, int a, int64_t extent) -> int64_t {
    const int64_t i = o * win.stride[a] - win.pad[a] + int64_t{k} * win.dilation[a];
    return inside(i, extent) ? i : -1;
  };
  // [Cout][Cin/groups][k...]
  const auto row = [&](int64_t co, int64_t ci) { return co * cin_g + ci % cin_g; };
  return gather_conv<Acc>(x, weight, bias, os, groups, win, source, row, ep);
}

template <typename Acc>
Tensor avg_pool_impl(const Tensor& x, const Window& win, bool ceil_mode, bool count_include_pad) {
  const TensorShape& is = x.shape();
  const TensorShape os = windowed_shape(is, win, ceil_mode);
  Tensor y(os);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < os.n; ++n)
    for (int64_t c = 0; c < os.c; ++c)
      for (int64_t oz = 0; oz < os.d; ++oz)
        for (int64_t oy = 0; oy < os.h; ++oy)
          for (int64_t ox = 0; ox < os.w; ++ox) {
            const auto sz =
                detail::avg_pool_span(oz, win.kernel[0], win.stride[0], win.pad[0], is.d);
            const auto sy =
                detail::avg_pool_span(oy, win.kernel[1], win.stride[1], win.pad[1], is.h);
            const auto sx =
                detail::avg_pool_span(ox, win.kernel[2], win.stride[2], win.pad[2], is.w);
            Acc sum = 0;
            for (int64_t iz = sz.start; iz < sz.end; ++iz)
              for (int64_t iy = sy.start; iy < sy.end; ++iy)
                for (int64_t ix = sx.start; ix < sx.end; ++ix)
                  sum += static_cast<Acc>(x.at(n, c, iz, iy, ix));
            const int64_t count =
                count_include_pad ? sz.padded_extent * sy.padded_extent * sx.padded_extent
                                  : (sz.end - sz.start) * (sy.end - sy.start) * (sx.end - sx.start);
            y.at(n, c, oz, oy, ox) = static_cast<float>(sum / static_cast<Acc>(count));
          }
  return y;
}

template <typename Acc> Tensor global_avg_pool_impl(const Tensor& x) {
  TensorShape os = x.shape();
  os.d = os.h = os.w = 1;
  Tensor y(os);
  const int64_t sp = x.shape().spatial();
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < os.n; ++n)
    for (int64_t c = 0; c < os.c; ++c) {
      Acc sum = 0;
      const float* p = x.data() + (n * os.c + c) * sp;
      for (int64_t i = 0; i < sp; ++i)
        sum += static_cast<Acc>(p[i]);
      y.at(n, c, 0, 0, 0) = static_cast<float>(sum / static_cast<Acc>(sp));
    }
  return y;
}

template <typename Acc>
Tensor linear_impl(const Tensor& x, const std::vector<float>& weight,
                   const std::vector<float>& bias, int64_t out_features, Epilogue ep) {
  const int64_t in = x.shape().c * x.shape().spatial();
  BRICKDL_CHECK(static_cast<int64_t>(weight.size()) == out_features * in, "linear weight size");
  const int64_t batch = x.shape().n;
  Tensor y(TensorShape{batch, out_features, 1, 1, 1, 0});
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t o = 0; o < out_features; ++o) {
      Acc acc = 0;
      for (int64_t i = 0; i < in; ++i)
        acc += static_cast<Acc>(weight[static_cast<size_t>(o * in + i)]) *
               static_cast<Acc>(x.data()[n * in + i]);
      if (!bias.empty())
        acc += static_cast<Acc>(bias[static_cast<size_t>(o)]);
      y.at(n, o, 0, 0, 0) =
          activate(static_cast<float>(acc), ep.activation, ep.slope, ep.clip_lo, ep.clip_hi);
    }
  return y;
}

template <typename Acc>
Tensor conv_transpose_impl(const Tensor& x, const std::vector<float>& weight,
                           const std::vector<float>& bias, const Layer& l, Epilogue ep) {
  const TensorShape& is = x.shape();
  TensorShape os = l.out;
  os.n = is.n;
  const Window& win = l.window;
  const int64_t cout_g = l.out_channels / l.groups;
  BRICKDL_CHECK(static_cast<int64_t>(weight.size()) ==
                    is.c * cout_g * win.kernel[0] * win.kernel[1] * win.kernel[2],
                "conv_transpose weight has " << weight.size() << " values");
  BRICKDL_CHECK(bias.empty() || static_cast<int64_t>(bias.size()) == l.out_channels,
                "conv_transpose bias");
  // Output o meets tap k of input i when i·s − p + k·d = o.
  const auto source = [&](int64_t o, int k, int a, int64_t extent) -> int64_t {
    const int64_t t = o + win.pad[a] - int64_t{k} * win.dilation[a];
    if (t < 0 || t % win.stride[a] != 0)
      return -1;
    const int64_t i = t / win.stride[a];
    return i < extent ? i : -1;
  };
  // [Cin][Cout/groups][k...]
  const auto row = [&](int64_t co, int64_t ci) { return ci * cout_g + co % cout_g; };
  return gather_conv<Acc>(x, weight, bias, os, l.groups, win, source, row, ep);
}

// f(a, b) elementwise, numpy-broadcast (core/graph.h broadcast_axes): an operand with extent
// 1 on an axis where the other has more is read at 0 there; the batch must agree.
template <typename F>
Tensor broadcast_binary(const Tensor& a, const Tensor& b, const char* what, F f) {
  const TensorShape& as = a.shape();
  const TensorShape& bs = b.shape();
  if (as == bs) { // the common case, one flat loop
    Tensor y(as);
    const int64_t count = a.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i)
      y.data()[i] = f(a.data()[i], b.data()[i]);
    return y;
  }
  TensorShape os;
  BRICKDL_CHECK(broadcast_shape(as, bs, &os),
                "" << what << " of " << as.str() << " and " << bs.str());
  const auto get = [](const Tensor& t, int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) {
    const TensorShape& s = t.shape();
    return t.at(n, s.c == 1 ? 0 : c, s.d == 1 ? 0 : z, s.h == 1 ? 0 : y, s.w == 1 ? 0 : x);
  };
  Tensor y(os);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < os.n; ++n)
    for (int64_t c = 0; c < os.c; ++c)
      for (int64_t z = 0; z < os.d; ++z)
        for (int64_t r = 0; r < os.h; ++r)
          for (int64_t x = 0; x < os.w; ++x)
            y.at(n, c, z, r, x) = f(get(a, n, c, z, r, x), get(b, n, c, z, r, x));
  return y;
}

template <typename F> Tensor map(const Tensor& x, F f) {
  Tensor y(x.shape());
  const int64_t count = x.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i)
    y.data()[i] = f(x.data()[i]);
  return y;
}

} // namespace

Tensor conv_transpose(const Tensor& x, const std::vector<float>& weight,
                      const std::vector<float>& bias, const Layer& layer, Epilogue epilogue,
                      Accumulation acc) {
  BRICKDL_CHECK(layer.groups >= 1 && x.shape().c % layer.groups == 0, "conv_transpose groups");
  return acc == Accumulation::kF64 ? conv_transpose_impl<double>(x, weight, bias, layer, epilogue)
                                   : conv_transpose_impl<float>(x, weight, bias, layer, epilogue);
}

Tensor sigmoid(const Tensor& x) {
  return map(x, [](float v) { return detail::sigmoid(v); });
}

Tensor silu(const Tensor& x) {
  return map(x, [](float v) { return detail::silu(v); });
}

Tensor hard_swish(const Tensor& x) {
  return map(x, [](float v) { return detail::hard_swish(v); });
}

Tensor hard_sigmoid(const Tensor& x) {
  return map(x, [](float v) { return detail::hard_sigmoid(v); });
}

Tensor gelu(const Tensor& x) {
  return map(x, [](float v) { return detail::gelu(v); });
}

Tensor channel_mul(const Tensor& x, const Tensor& s) {
  const TensorShape& xs = x.shape();
  BRICKDL_CHECK(s.shape().n == xs.n && s.shape().c == xs.c && s.shape().spatial() == 1,
                "channel_mul of " << xs.str() << " by " << s.shape().str());
  return mul(x, s);
}

Tensor clip(const Tensor& x, float lo, float hi) {
  return map(x, [=](float v) { return detail::clip(v, lo, hi); });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return broadcast_binary(a, b, "mul", [](float u, float v) { return u * v; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return broadcast_binary(a, b, "sub", [](float u, float v) { return u - v; });
}

Tensor div(const Tensor& a, const Tensor& b) {
  return broadcast_binary(a, b, "div", [](float u, float v) { return u / v; });
}

Tensor pad(const Tensor& x, const std::array<int, 3>& begin, const std::array<int, 3>& end,
           float value) {
  const TensorShape& is = x.shape();
  TensorShape os = is;
  os.d += begin[0] + end[0];
  os.h += begin[1] + end[1];
  os.w += begin[2] + end[2];
  BRICKDL_CHECK(os.d > 0 && os.h > 0 && os.w > 0, "pad leaves nothing of " << is.str());
  Tensor y(os);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < os.n; ++n)
    for (int64_t c = 0; c < os.c; ++c)
      for (int64_t z = 0; z < os.d; ++z)
        for (int64_t yy = 0; yy < os.h; ++yy)
          for (int64_t xx = 0; xx < os.w; ++xx) {
            const int64_t iz = z - begin[0], iy = yy - begin[1], ix = xx - begin[2];
            y.at(n, c, z, yy, xx) = inside(iz, is.d) && inside(iy, is.h) && inside(ix, is.w)
                                        ? x.at(n, c, iz, iy, ix)
                                        : value;
          }
  return y;
}

Tensor slice(const Tensor& x, int64_t begin, int64_t end) {
  const TensorShape& is = x.shape();
  BRICKDL_CHECK(0 <= begin && begin < end && end <= is.c,
                "slice [" << begin << ", " << end << ") of " << is.str());
  TensorShape os = is;
  os.c = end - begin;
  Tensor y(os);
  const int64_t plane = is.spatial();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < os.n; ++n)
    std::copy_n(x.image(n) + begin * plane, os.c * plane, y.image(n));
  return y;
}

Tensor channel_shuffle(const Tensor& x, int groups) {
  const TensorShape& s = x.shape();
  BRICKDL_CHECK(groups >= 1 && s.c % groups == 0,
                "channel_shuffle of " << s.str() << " by " << groups);
  Tensor y(s);
  const int64_t plane = s.spatial();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.c; ++o)
      std::copy_n(x.image(n) + detail::shuffle_source(o, s.c, groups) * plane, plane,
                  y.image(n) + o * plane);
  return y;
}

Tensor layer_norm(const Tensor& x, const std::vector<float>& gamma, const std::vector<float>& beta,
                  float epsilon, Accumulation acc) {
  const TensorShape& s = x.shape();
  BRICKDL_CHECK(static_cast<int64_t>(gamma.size()) == s.c &&
                    static_cast<int64_t>(beta.size()) == s.c,
                "layer_norm of " << s.c << " channels with " << gamma.size() << " / " << beta.size()
                                 << " parameters");
  Tensor y(s);
  const int64_t plane = s.spatial();
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t p = 0; p < plane; ++p) {
      const float* v = x.image(n) + p;
      const detail::NormStats st = acc == Accumulation::kF64
                                       ? detail::layer_norm_stats<double>(v, plane, s.c, epsilon)
                                       : detail::layer_norm_stats<float>(v, plane, s.c, epsilon);
      float* o = y.image(n) + p;
      for (int64_t c = 0; c < s.c; ++c)
        o[c * plane] = detail::layer_norm_value(v[c * plane], st, gamma[static_cast<size_t>(c)],
                                                beta[static_cast<size_t>(c)]);
    }
  return y;
}

Tensor conv(const Tensor& x, const std::vector<float>& weight, const std::vector<float>& bias,
            int64_t out_channels, const Window& window, int groups, Epilogue epilogue,
            Accumulation acc) {
  BRICKDL_CHECK(groups >= 1 && x.shape().c % groups == 0 && out_channels % groups == 0,
                "conv groups " << groups);
  return acc == Accumulation::kF64
             ? conv_impl<double>(x, weight, bias, out_channels, window, groups, epilogue)
             : conv_impl<float>(x, weight, bias, out_channels, window, groups, epilogue);
}

Tensor batch_norm(const Tensor& x, const std::vector<float>& scale,
                  const std::vector<float>& shift) {
  const TensorShape& s = x.shape();
  BRICKDL_CHECK(static_cast<int64_t>(scale.size()) == s.c &&
                    static_cast<int64_t>(shift.size()) == s.c,
                "batch_norm parameters");
  Tensor y(s);
  const int64_t sp = s.spatial();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t i = 0; i < sp; ++i) {
        const int64_t k = (n * s.c + c) * sp + i;
        y.data()[k] = x.data()[k] * scale[static_cast<size_t>(c)] + shift[static_cast<size_t>(c)];
      }
  return y;
}

Tensor relu(const Tensor& x) {
  Tensor y(x.shape());
  const int64_t count = x.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i)
    y.data()[i] = activate(x.data()[i], Activation::kRelu, 0);
  return y;
}

Tensor leaky_relu(const Tensor& x, float slope) {
  Tensor y(x.shape());
  const int64_t count = x.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i)
    y.data()[i] = activate(x.data()[i], Activation::kLeakyRelu, slope);
  return y;
}

Tensor add(const Tensor& a, const Tensor& b, Epilogue ep) {
  return broadcast_binary(a, b, "add", [&](float u, float v) {
    return activate(u + v, ep.activation, ep.slope, ep.clip_lo, ep.clip_hi);
  });
}

Tensor concat(const std::vector<const Tensor*>& xs) {
  BRICKDL_CHECK(!xs.empty(), "concat of nothing");
  TensorShape os = xs[0]->shape();
  os.c = 0;
  for (const Tensor* t : xs) {
    BRICKDL_CHECK(t->shape().n == os.n && t->shape().spatial() == os.spatial(), "concat shapes");
    os.c += t->shape().c;
  }
  Tensor y(os);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < os.n; ++n) {
    int64_t c_out = 0;
    for (const Tensor* t : xs) {
      const TensorShape& s = t->shape();
      for (int64_t c = 0; c < s.c; ++c, ++c_out)
        for (int64_t z = 0; z < s.d; ++z)
          for (int64_t yy = 0; yy < s.h; ++yy)
            for (int64_t x = 0; x < s.w; ++x)
              y.at(n, c_out, z, yy, x) = t->at(n, c, z, yy, x);
    }
  }
  return y;
}

Tensor max_pool(const Tensor& x, const Window& win, bool ceil_mode) {
  const TensorShape& is = x.shape();
  const TensorShape os = windowed_shape(is, win, ceil_mode);
  Tensor y(os);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < os.n; ++n)
    for (int64_t c = 0; c < os.c; ++c)
      for (int64_t oz = 0; oz < os.d; ++oz)
        for (int64_t oy = 0; oy < os.h; ++oy)
          for (int64_t ox = 0; ox < os.w; ++ox) {
            float m = -std::numeric_limits<float>::infinity();
            for (int a = 0; a < win.kernel[0]; ++a) {
              const int64_t iz = oz * win.stride[0] - win.pad[0] + a * win.dilation[0];
              if (!inside(iz, is.d))
                continue;
              for (int b = 0; b < win.kernel[1]; ++b) {
                const int64_t iy = oy * win.stride[1] - win.pad[1] + b * win.dilation[1];
                if (!inside(iy, is.h))
                  continue;
                for (int c2 = 0; c2 < win.kernel[2]; ++c2) {
                  const int64_t ix = ox * win.stride[2] - win.pad[2] + c2 * win.dilation[2];
                  if (!inside(ix, is.w))
                    continue;
                  m = detail::max_step(m, x.at(n, c, iz, iy, ix));
                }
              }
            }
            y.at(n, c, oz, oy, ox) = m;
          }
  return y;
}

Tensor avg_pool(const Tensor& x, const Window& window, bool ceil_mode, bool count_include_pad,
                Accumulation acc) {
  BRICKDL_CHECK(window.dilation == (std::array<int, 3>{1, 1, 1}), "avg_pool has no dilation");
  return acc == Accumulation::kF64 ? avg_pool_impl<double>(x, window, ceil_mode, count_include_pad)
                                   : avg_pool_impl<float>(x, window, ceil_mode, count_include_pad);
}

Tensor global_avg_pool(const Tensor& x, Accumulation acc) {
  return acc == Accumulation::kF64 ? global_avg_pool_impl<double>(x)
                                   : global_avg_pool_impl<float>(x);
}

Tensor upsample(const Tensor& x, int scale, bool bilinear) {
  const TensorShape& is = x.shape();
  TensorShape os = is;
  const int64_t fd = is.spatial_rank == 3 ? scale : 1;
  os.d *= fd;
  os.h *= scale;
  os.w *= scale;
  Tensor y(os);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < os.n; ++n)
    for (int64_t c = 0; c < os.c; ++c)
      for (int64_t oz = 0; oz < os.d; ++oz)
        for (int64_t oy = 0; oy < os.h; ++oy)
          for (int64_t ox = 0; ox < os.w; ++ox) {
            if (!bilinear) {
              y.at(n, c, oz, oy, ox) = x.at(n, c, detail::nearest_source(oz, fd, is.d),
                                            detail::nearest_source(oy, scale, is.h),
                                            detail::nearest_source(ox, scale, is.w));
              continue;
            }
            const auto tz = detail::linear_tap(oz, fd, is.d);
            const auto ty = detail::linear_tap(oy, scale, is.h);
            const auto tx = detail::linear_tap(ox, scale, is.w);
            const auto row = [&](int64_t iz, int64_t iy) {
              return tx.w0 * x.at(n, c, iz, iy, tx.i0) + tx.w1 * x.at(n, c, iz, iy, tx.i1);
            };
            const auto plane = [&](int64_t iz) {
              return ty.w0 * row(iz, ty.i0) + ty.w1 * row(iz, ty.i1);
            };
            y.at(n, c, oz, oy, ox) = tz.w0 * plane(tz.i0) + tz.w1 * plane(tz.i1);
          }
  return y;
}

Tensor flatten(const Tensor& x) {
  const TensorShape& s = x.shape();
  Tensor y(TensorShape{s.n, s.c * s.spatial(), 1, 1, 1, 0});
  y.values() = x.values();
  return y;
}

Tensor linear(const Tensor& x, const std::vector<float>& weight, const std::vector<float>& bias,
              int64_t out_features, Epilogue epilogue, Accumulation acc) {
  return acc == Accumulation::kF64 ? linear_impl<double>(x, weight, bias, out_features, epilogue)
                                   : linear_impl<float>(x, weight, bias, out_features, epilogue);
}

Tensor run_layer(const Layer& l, const std::vector<const Tensor*>& in, const LayerWeights& w,
                 Accumulation acc) {
  BRICKDL_CHECK(in.size() == l.inputs.size(),
                "layer " << l.name << " got " << in.size() << " inputs, wants " << l.inputs.size());
  const Epilogue ep{l.activation, l.leaky_slope, l.clip_min, l.clip_max};
  Tensor y;
  switch (l.op) {
  case OpKind::kInput: BRICKDL_CHECK(false, "the input layer is not run"); break;
  case OpKind::kConv:
    y = conv(*in[0], w.weight, w.bias, l.out_channels, l.window, l.groups, ep, acc);
    break;
  case OpKind::kBatchNorm: y = batch_norm(*in[0], w.weight, w.bias); break;
  case OpKind::kRelu: y = relu(*in[0]); break;
  case OpKind::kLeakyRelu: y = leaky_relu(*in[0], l.leaky_slope); break;
  case OpKind::kAdd: y = add(*in[0], *in[1], ep); break;
  case OpKind::kConcat: y = concat(in); break;
  case OpKind::kMaxPool: y = max_pool(*in[0], l.window, l.ceil_mode); break;
  case OpKind::kAvgPool:
    y = avg_pool(*in[0], l.window, l.ceil_mode, l.count_include_pad, acc);
    break;
  case OpKind::kGlobalAvgPool: y = global_avg_pool(*in[0], acc); break;
  case OpKind::kUpsample: y = upsample(*in[0], l.upsample_scale, l.bilinear); break;
  case OpKind::kFlatten: y = flatten(*in[0]); break;
  case OpKind::kLinear: y = linear(*in[0], w.weight, w.bias, l.out_channels, ep, acc); break;
  case OpKind::kConvTranspose: y = conv_transpose(*in[0], w.weight, w.bias, l, ep, acc); break;
  case OpKind::kSigmoid: y = sigmoid(*in[0]); break;
  case OpKind::kSilu: y = silu(*in[0]); break;
  case OpKind::kClip: y = clip(*in[0], l.clip_min, l.clip_max); break;
  case OpKind::kMul: y = mul(*in[0], *in[1]); break;
  case OpKind::kPad: y = pad(*in[0], l.pad_begin, l.pad_end, l.pad_value); break;
  case OpKind::kSlice: y = slice(*in[0], l.slice_begin, l.slice_end); break;
  case OpKind::kChannelShuffle: y = channel_shuffle(*in[0], l.groups); break;
  case OpKind::kLayerNorm: y = layer_norm(*in[0], w.weight, w.bias, l.epsilon, acc); break;
  case OpKind::kHardSwish: y = hard_swish(*in[0]); break;
  case OpKind::kHardSigmoid: y = hard_sigmoid(*in[0]); break;
  case OpKind::kGelu: y = gelu(*in[0]); break;
  case OpKind::kChannelMul: y = channel_mul(*in[0], *in[1]); break;
  case OpKind::kSub: y = sub(*in[0], *in[1]); break;
  case OpKind::kDiv: y = div(*in[0], *in[1]); break;
  }
  BRICKDL_CHECK(y.shape() == l.out, "layer " << l.name << " produced " << y.shape().str()
                                             << ", the graph says " << l.out.str());
  return y;
}

std::vector<Tensor> run_graph_outputs(const Graph& g, std::vector<Tensor> inputs,
                                      const ModelWeights& weights, Accumulation acc,
                                      const LayerProgress& progress) {
  BRICKDL_CHECK(static_cast<int>(inputs.size()) == g.num_inputs(),
                "got " << inputs.size() << " inputs for a graph of " << g.num_inputs());
  std::vector<Tensor> out(static_cast<size_t>(g.size()));
  std::vector<int> last_reader(static_cast<size_t>(g.size()), -1);
  for (const Layer& l : g.layers())
    for (int p : l.inputs)
      last_reader[static_cast<size_t>(p)] = l.id;
  for (int id = 0; id < g.num_inputs(); ++id) {
    Tensor& x = inputs[static_cast<size_t>(id)];
    BRICKDL_CHECK(x.shape() == g.layer(id).out, "input " << x.shape().str() << " for graph input "
                                                         << g.layer(id).name << " "
                                                         << g.layer(id).out.str());
    out[static_cast<size_t>(id)] = std::move(x);
  }
  for (int id = g.num_inputs(); id < g.size(); ++id) {
    const Layer& l = g.layer(id);
    std::vector<const Tensor*> in;
    for (int p : l.inputs)
      in.push_back(&out[static_cast<size_t>(p)]);
    out[static_cast<size_t>(id)] = run_layer(l, in, weights.at(id), acc);
    for (int p : l.inputs)
      if (last_reader[static_cast<size_t>(p)] == id && !g.is_output(p))
        out[static_cast<size_t>(p)] = Tensor();
    if (progress)
      progress(id);
  }
  std::vector<Tensor> outputs;
  for (int id : g.outputs())
    outputs.push_back(std::move(out[static_cast<size_t>(id)]));
  return outputs;
}

Tensor run_graph(const Graph& g, const Tensor& input, const ModelWeights& weights, Accumulation acc,
                 const LayerProgress& progress) {
  BRICKDL_CHECK(input.shape() == g.input_shape(),
                "input " << input.shape().str() << " for graph input " << g.input_shape().str());
  BRICKDL_CHECK(g.outputs().size() == 1, "graph " << g.name() << " has " << g.outputs().size()
                                                  << " outputs; run_graph_outputs returns them");
  return std::move(run_graph_outputs(g, std::vector<Tensor>{input}, weights, acc, progress)[0]);
}

} // namespace brickdl::kernels
