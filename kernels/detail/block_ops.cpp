#include "kernels/detail/block_ops.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/detail/op_math.h"

namespace brickdl::kernels::detail {

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

// Element addressing of a block.
struct Strides {
  int64_t y, z, c;
  explicit Strides(const Region& r)
      : y(r.extent(2)), z(r.extent(1) * r.extent(2)), c(r.extent(0) * r.extent(1) * r.extent(2)) {}
};

template <typename T>
T* at(T* base, const Region& r, const Strides& s, int64_t c, int64_t z, int64_t y, int64_t x) {
  return base + (c - r.c0) * s.c + (z - r.lo[0]) * s.z + (y - r.lo[1]) * s.y + (x - r.lo[2]);
}

// The box [lo, lo + span) of all channels of `is`, clipped to the tensor.
Region box_inside(const std::array<int64_t, 3>& lo, const std::array<int64_t, 3>& span,
                  const TensorShape& is) {
  Region r;
  r.lo = lo;
  for (size_t a = 0; a < 3; ++a)
    r.hi[a] = lo[a] + span[a];
  r.c0 = 0;
  r.c1 = is.c;
  return clip(r, is);
}

// Strides of the zero-padded copy of conv_block_stride1 (its box starts at `lo`).
struct PaddedStrides {
  int64_t row, plane, vol;
};

// padded <- input channels [c0, c0 + channels) over the padded box, zero outside `inside`.
void stage_padded(const ConstBlock& in, const Strides& si, const Region& inside, int64_t c0,
                  int64_t channels, const std::array<int64_t, 3>& lo, const PaddedStrides& ps,
                  float* padded) {
  std::fill_n(padded, channels * ps.vol, 0.0f);
  if (inside.empty())
    return;
  for (int64_t cl = 0; cl < channels; ++cl)
    for (int64_t z = inside.lo[0]; z < inside.hi[0]; ++z)
      for (int64_t y = inside.lo[1]; y < inside.hi[1]; ++y)
        std::copy_n(at(in.data, in.stored, si, c0 + cl, z, y, inside.lo[2]), inside.extent(2),
                    padded + cl * ps.vol + (z - lo[0]) * ps.plane + (y - lo[1]) * ps.row +
                        (inside.lo[2] - lo[2]));
}

// Output channel co over `what` <- the accumulator `a` (row and plane strides of the padded
// box) plus bias, activated; the accumulator's margin columns are skipped.
void store_channel(const Layer& l, const LayerWeights& wts, const float* a, int64_t row,
                   int64_t plane, int64_t co, const Block& out, const Strides& so,
                   const Region& what) {
  const bool has_bias = !wts.bias.empty();
  const float bias = has_bias ? wts.bias[static_cast<size_t>(co)] : 0.0f;
  for (int64_t oz = 0; oz < what.extent(0); ++oz)
    for (int64_t oy = 0; oy < what.extent(1); ++oy) {
      const float* src = a + oz * plane + oy * row;
      float* o = at(out.data, out.stored, so, co, what.lo[0] + oz, what.lo[1] + oy, what.lo[2]);
      for (int64_t i = 0; i < what.extent(2); ++i)
        o[i] = activate(has_bias ? src[i] + bias : src[i], l.activation, l.leaky_slope, l.clip_min,
                        l.clip_max);
    }
}

// Stride-1 conv over a zero-padded copy of the input: with the copy's row and plane strides
// shared by an accumulator, every tap (a, b, c) becomes one shift of the whole flattened box,
// so each (input channel, tap) is a single long loop instead of one short loop per output row.
// Positions in the accumulator's margin columns are computed and discarded. Per output element
// the taps are still added in the reference's order (input channel, kd, kh, kw); padding taps
// add w·0, which leaves the sum unchanged.
void conv_block_stride1(const Graph& g, const Layer& l, const LayerWeights& wts,
                        const ConstBlock& in, const Block& out, const Region& what) {
  const TensorShape& is = g.layer(l.inputs[0]).out;
  const Window& win = l.window;
  const int64_t cin_g = is.c / l.groups, cout_g = l.out_channels / l.groups;
  const int kd = win.kernel[0], kh = win.kernel[1], kw = win.kernel[2];
  std::array<int64_t, 3> span{}, lo{};
  for (size_t a = 0; a < 3; ++a) {
    span[a] = what.extent(static_cast<int>(a)) + int64_t{win.dilation[a]} * (win.kernel[a] - 1);
    lo[a] = what.lo[a] - win.pad[a];
  }
  const int64_t row = span[2], plane = span[1] * span[2], vol = span[0] * plane;
  // Keep the padded copy and the accumulator cache-resident: split large boxes (whole-tensor
  // layerwise calls) along their outermost non-trivial axis.
  constexpr int64_t kMaxPaddedFloats = 32 * 1024;
  const int split_axis = what.extent(0) > 1 ? 0 : what.extent(1) > 1 ? 1 : -1;
  if (cin_g * vol > kMaxPaddedFloats && split_axis >= 0) {
    const size_t ax = static_cast<size_t>(split_axis);
    Region first = what, second = what;
    first.hi[ax] = second.lo[ax] = what.lo[ax] + what.extent(split_axis) / 2;
    conv_block_stride1(g, l, wts, in, out, first);
    conv_block_stride1(g, l, wts, in, out, second);
    return;
  }
  // Last accumulator position that holds an output element, plus one.
  const int64_t len = (what.extent(0) - 1) * plane + (what.extent(1) - 1) * row + what.extent(2);
  thread_local std::vector<float> padded, acc;
  if (static_cast<int64_t>(padded.size()) < cin_g * vol)
    padded.resize(static_cast<size_t>(cin_g * vol));
  if (static_cast<int64_t>(acc.size()) < len)
    acc.resize(static_cast<size_t>(len));
  const Strides si(in.stored), so(out.stored);
  // The part of the padded box inside the tensor (the rest stays zero).
  const Region inside = box_inside(lo, span, is);
  int64_t loaded_group = -1;
  for (int64_t co = what.c0; co < what.c1; ++co) {
    const int64_t grp = co / cout_g;
    if (grp != loaded_group) {
      stage_padded(in, si, inside, grp * cin_g, cin_g, lo, {row, plane, vol}, padded.data());
      loaded_group = grp;
    }
    float* a = acc.data();
    std::fill_n(a, len, 0.0f);
    const float* wco = wts.weight.data() + co * cin_g * kd * kh * kw;
    for (int64_t cl = 0; cl < cin_g; ++cl)
      for (int z = 0; z < kd; ++z)
        for (int y = 0; y < kh; ++y)
          for (int x = 0; x < kw; ++x) {
            const float wv = *wco++;
            const float* p = padded.data() + cl * vol + int64_t{z} * win.dilation[0] * plane +
                             int64_t{y} * win.dilation[1] * row + int64_t{x} * win.dilation[2];
            for (int64_t q = 0; q < len; ++q)
              a[q] += wv * p[q];
          }
    store_channel(l, wts, a, row, plane, co, out, so, what);
  }
}

void conv_block(const Graph& g, const Layer& l, const LayerWeights& wts, const ConstBlock& in,
                const Block& out, const Region& what) {
  const TensorShape& is = g.layer(l.inputs[0]).out;
  const Window& win = l.window;
  const int64_t cin_g = is.c / l.groups, cout_g = l.out_channels / l.groups;
  const int kd = win.kernel[0], kh = win.kernel[1], kw = win.kernel[2];
  const int64_t sx = win.stride[2];
  const Strides si(in.stored), so(out.stored);
  const int64_t nx = what.extent(2);
  for (int64_t co = what.c0; co < what.c1; ++co) {
    const int64_t grp = co / cout_g;
    for (int64_t oz = what.lo[0]; oz < what.hi[0]; ++oz)
      for (int64_t oy = what.lo[1]; oy < what.hi[1]; ++oy)
        std::fill_n(at(out.data, out.stored, so, co, oz, oy, what.lo[2]), nx, 0.0f);
    for (int64_t cl = 0; cl < cin_g; ++cl) {
      const int64_t ci = grp * cin_g + cl;
      for (int a = 0; a < kd; ++a)
        for (int b = 0; b < kh; ++b)
          for (int c = 0; c < kw; ++c) {
            const float wv =
                wts.weight[static_cast<size_t>((((co * cin_g + cl) * kd + a) * kh + b) * kw + c)];
            // Output columns whose tap falls inside the input (the rest read zero padding).
            const int64_t off = int64_t{c} * win.dilation[2] - win.pad[2];
            const int64_t x0 = std::max(what.lo[2], ceil_div(-off, sx));
            const int64_t x1 = std::min(what.hi[2], floor_div(is.w - 1 - off, sx) + 1);
            if (x0 >= x1)
              continue;
            for (int64_t oz = what.lo[0]; oz < what.hi[0]; ++oz) {
              const int64_t iz = oz * win.stride[0] - win.pad[0] + int64_t{a} * win.dilation[0];
              if (iz < 0 || iz >= is.d)
                continue;
              for (int64_t oy = what.lo[1]; oy < what.hi[1]; ++oy) {
                const int64_t iy = oy * win.stride[1] - win.pad[1] + int64_t{b} * win.dilation[1];
                if (iy < 0 || iy >= is.h)
                  continue;
                float* o = at(out.data, out.stored, so, co, oz, oy, x0);
                const float* ip = at(in.data, in.stored, si, ci, iz, iy, x0 * sx + off);
                const int64_t count = x1 - x0;
                if (sx == 1) {
                  for (int64_t i = 0; i < count; ++i)
                    o[i] += wv * ip[i];
                } else {
                  for (int64_t i = 0; i < count; ++i)
                    o[i] += wv * ip[i * sx];
                }
              }
            }
          }
    }
    const float bias = wts.bias.empty() ? 0.0f : wts.bias[static_cast<size_t>(co)];
    for (int64_t oz = what.lo[0]; oz < what.hi[0]; ++oz)
      for (int64_t oy = what.lo[1]; oy < what.hi[1]; ++oy) {
        float* o = at(out.data, out.stored, so, co, oz, oy, what.lo[2]);
        for (int64_t i = 0; i < nx; ++i) {
          const float v = wts.bias.empty() ? o[i] : o[i] + bias;
          o[i] = activate(v, l.activation, l.leaky_slope, l.clip_min, l.clip_max);
        }
      }
  }
}

// Which axes (c, d, h, w) each operand of an elementwise layer broadcasts (core/graph.h).
using Broadcast = std::array<std::array<bool, 4>, 2>;

Broadcast broadcast_of(const Graph& g, const Layer& l) {
  Broadcast b{};
  for (size_t k = 0; k < l.inputs.size() && k < b.size(); ++k)
    b[k] = broadcast_axes(g.layer(l.inputs[k]).out, l.out);
  return b;
}

// Elementwise ops over the same coordinates of one or two inputs; an operand broadcast along
// an axis (`bc`) is read at 0 there (its block holds [0, 1) on it: kernels/region.h).
template <typename F>
void elementwise_block(std::span<const ConstBlock> in, const Block& out, const Region& what, F f,
                       const Broadcast& bc = {}) {
  const Strides so(out.stored), s0(in[0].stored);
  const Strides s1(in.size() > 1 ? in[1].stored : in[0].stored);
  const int64_t nx = what.extent(2);
  const auto pick = [](bool b, int64_t v) { return b ? int64_t{0} : v; };
  const auto row = [&](size_t k, const Strides& s, int64_t c, int64_t z, int64_t y) {
    const auto& b = bc[k];
    return at(in[k].data, in[k].stored, s, pick(b[0], c), pick(b[1], z), pick(b[2], y),
              pick(b[3], what.lo[2]));
  };
  const int64_t step0 = bc[0][3] ? 0 : 1, step1 = bc[1][3] ? 0 : 1;
  for (int64_t c = what.c0; c < what.c1; ++c)
    for (int64_t z = what.lo[0]; z < what.hi[0]; ++z)
      for (int64_t y = what.lo[1]; y < what.hi[1]; ++y) {
        float* o = at(out.data, out.stored, so, c, z, y, what.lo[2]);
        const float* a = row(0, s0, c, z, y);
        const float* b = in.size() > 1 ? row(1, s1, c, z, y) : a;
        for (int64_t i = 0; i < nx; ++i)
          o[i] = f(c, a[i * step0], b[i * step1]);
      }
}

void concat_block(const Graph& g, const Layer& l, std::span<const ConstBlock> in, const Block& out,
                  const Region& what) {
  const Strides so(out.stored);
  const int64_t nx = what.extent(2);
  int64_t offset = 0;
  for (size_t k = 0; k < l.inputs.size(); ++k) {
    const int64_t ck = g.layer(l.inputs[k]).out.c;
    const int64_t c0 = std::max(what.c0, offset), c1 = std::min(what.c1, offset + ck);
    if (c0 < c1) {
      const Strides si(in[k].stored);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t z = what.lo[0]; z < what.hi[0]; ++z)
          for (int64_t y = what.lo[1]; y < what.hi[1]; ++y)
            std::copy_n(at(in[k].data, in[k].stored, si, c - offset, z, y, what.lo[2]), nx,
                        at(out.data, out.stored, so, c, z, y, what.lo[2]));
    }
    offset += ck;
  }
}

void max_pool_block(const Graph& g, const Layer& l, const ConstBlock& in, const Block& out,
                    const Region& what) {
  const TensorShape& is = g.layer(l.inputs[0]).out;
  const Window& win = l.window;
  const Strides si(in.stored), so(out.stored);
  for (int64_t c = what.c0; c < what.c1; ++c)
    for (int64_t oz = what.lo[0]; oz < what.hi[0]; ++oz)
      for (int64_t oy = what.lo[1]; oy < what.hi[1]; ++oy)
        for (int64_t ox = what.lo[2]; ox < what.hi[2]; ++ox) {
          float m = -std::numeric_limits<float>::infinity();
          for (int a = 0; a < win.kernel[0]; ++a) {
            const int64_t iz = oz * win.stride[0] - win.pad[0] + int64_t{a} * win.dilation[0];
            if (iz < 0 || iz >= is.d)
              continue;
            for (int b = 0; b < win.kernel[1]; ++b) {
              const int64_t iy = oy * win.stride[1] - win.pad[1] + int64_t{b} * win.dilation[1];
              if (iy < 0 || iy >= is.h)
                continue;
              for (int k = 0; k < win.kernel[2]; ++k) {
                const int64_t ix = ox * win.stride[2] - win.pad[2] + int64_t{k} * win.dilation[2];
                if (ix < 0 || ix >= is.w)
                  continue;
                m = max_step(m, *at(in.data, in.stored, si, c, iz, iy, ix));
              }
            }
          }
          *at(out.data, out.stored, so, c, oz, oy, ox) = m;
        }
}

void avg_pool_block(const Graph& g, const Layer& l, const ConstBlock& in, const Block& out,
                    const Region& what) {
  const TensorShape& is = g.layer(l.inputs[0]).out;
  const Window& win = l.window;
  const Strides si(in.stored), so(out.stored);
  for (int64_t c = what.c0; c < what.c1; ++c)
    for (int64_t oz = what.lo[0]; oz < what.hi[0]; ++oz)
      for (int64_t oy = what.lo[1]; oy < what.hi[1]; ++oy)
        for (int64_t ox = what.lo[2]; ox < what.hi[2]; ++ox) {
          const auto sz = avg_pool_span(oz, win.kernel[0], win.stride[0], win.pad[0], is.d);
          const auto sy = avg_pool_span(oy, win.kernel[1], win.stride[1], win.pad[1], is.h);
          const auto sx = avg_pool_span(ox, win.kernel[2], win.stride[2], win.pad[2], is.w);
          float sum = 0;
          for (int64_t iz = sz.start; iz < sz.end; ++iz)
            for (int64_t iy = sy.start; iy < sy.end; ++iy)
              for (int64_t ix = sx.start; ix < sx.end; ++ix)
                sum += *at(in.data, in.stored, si, c, iz, iy, ix);
          const int64_t count =
              l.count_include_pad ? sz.padded_extent * sy.padded_extent * sx.padded_extent
                                  : (sz.end - sz.start) * (sy.end - sy.start) * (sx.end - sx.start);
          *at(out.data, out.stored, so, c, oz, oy, ox) = sum / static_cast<float>(count);
        }
}

void upsample_block(const Graph& g, const Layer& l, const ConstBlock& in, const Block& out,
                    const Region& what) {
  const TensorShape& is = g.layer(l.inputs[0]).out;
  const int64_t fd = upsample_factor(l, 0), fh = upsample_factor(l, 1), fw = upsample_factor(l, 2);
  const Strides si(in.stored), so(out.stored);
  for (int64_t c = what.c0; c < what.c1; ++c)
    for (int64_t oz = what.lo[0]; oz < what.hi[0]; ++oz)
      for (int64_t oy = what.lo[1]; oy < what.hi[1]; ++oy)
        for (int64_t ox = what.lo[2]; ox < what.hi[2]; ++ox) {
          float* o = at(out.data, out.stored, so, c, oz, oy, ox);
          if (!l.bilinear) {
            *o = *at(in.data, in.stored, si, c, nearest_source(oz, fd, is.d),
                     nearest_source(oy, fh, is.h), nearest_source(ox, fw, is.w));
            continue;
          }
          const LinearTap tz = linear_tap(oz, fd, is.d), ty = linear_tap(oy, fh, is.h),
                          tx = linear_tap(ox, fw, is.w);
          const auto row = [&](int64_t iz, int64_t iy) {
            return tx.w0 * *at(in.data, in.stored, si, c, iz, iy, tx.i0) +
                   tx.w1 * *at(in.data, in.stored, si, c, iz, iy, tx.i1);
          };
          const auto plane = [&](int64_t iz) {
            return ty.w0 * row(iz, ty.i0) + ty.w1 * row(iz, ty.i1);
          };
          *o = tz.w0 * plane(tz.i0) + tz.w1 * plane(tz.i1);
        }
}

// Output channel c <- input channel source(c), position for position (slice, channel shuffle).
template <typename Source>
void channel_gather_block(const ConstBlock& in, const Block& out, const Region& what,
                          Source source) {
  const Strides si(in.stored), so(out.stored);
  const int64_t nx = what.extent(2);
  for (int64_t c = what.c0; c < what.c1; ++c)
    for (int64_t z = what.lo[0]; z < what.hi[0]; ++z)
      for (int64_t y = what.lo[1]; y < what.hi[1]; ++y)
        std::copy_n(at(in.data, in.stored, si, source(c), z, y, what.lo[2]), nx,
                    at(out.data, out.stored, so, c, z, y, what.lo[2]));
}

// Statistics over every channel of each pixel (the input block holds them all: the channel
// rule is kWhole), then the output channels of `what`.
void layer_norm_block(const Graph& g, const Layer& l, const LayerWeights& w, const ConstBlock& in,
                      const Block& out, const Region& what) {
  const int64_t channels = g.layer(l.inputs[0]).out.c;
  const Strides si(in.stored), so(out.stored);
  for (int64_t z = what.lo[0]; z < what.hi[0]; ++z)
    for (int64_t y = what.lo[1]; y < what.hi[1]; ++y)
      for (int64_t x = what.lo[2]; x < what.hi[2]; ++x) {
        const float* v = at(in.data, in.stored, si, 0, z, y, x);
        const NormStats st = layer_norm_stats<float>(v, si.c, channels, l.epsilon);
        for (int64_t c = what.c0; c < what.c1; ++c)
          *at(out.data, out.stored, so, c, z, y, x) = layer_norm_value(
              v[c * si.c], st, w.weight[static_cast<size_t>(c)], w.bias[static_cast<size_t>(c)]);
      }
}

} // namespace

// Long on purpose: one case per brickable op.
void compute_block(const Graph& g, const Layer& l, const LayerWeights& w,
                   std::span<const ConstBlock> inputs, const Block& out, const Region& what) {
  if (what.empty())
    return;
  BRICKDL_CHECK(traits(l.op).brickable,
                "layer " << l.name << " (" << op_name(l.op) << ") has no block kernel");
  BRICKDL_CHECK(inputs.size() == l.inputs.size(), "layer " << l.name << ": inputs");
  BRICKDL_CHECK(out.stored.contains(what), "layer " << l.name << ": output block "
                                                    << out.stored.str() << " lacks " << what.str());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Region need = input_need(g, l, static_cast<int>(i), what);
    BRICKDL_CHECK(need.empty() || (inputs[i].data && inputs[i].stored.contains(need)),
                  "layer " << l.name << ": input " << i << " block " << inputs[i].stored.str()
                           << " lacks " << need.str());
  }
  switch (l.op) {
  case OpKind::kConv:
    if (l.window.stride == std::array<int, 3>{1, 1, 1}) {
      conv_block_stride1(g, l, w, inputs[0], out, what);
    } else {
      conv_block(g, l, w, inputs[0], out, what);
    }
    break;
  case OpKind::kBatchNorm:
    elementwise_block(inputs, out, what, [&](int64_t c, float a, float) {
      return a * w.weight[static_cast<size_t>(c)] + w.bias[static_cast<size_t>(c)];
    });
    break;
  case OpKind::kRelu:
    elementwise_block(inputs, out, what,
                      [](int64_t, float a, float) { return activate(a, Activation::kRelu, 0); });
    break;
  case OpKind::kLeakyRelu:
    elementwise_block(inputs, out, what, [&](int64_t, float a, float) {
      return activate(a, Activation::kLeakyRelu, l.leaky_slope);
    });
    break;
  case OpKind::kAdd:
    elementwise_block(
        inputs, out, what,
        [&](int64_t, float a, float b) {
          return activate(a + b, l.activation, l.leaky_slope, l.clip_min, l.clip_max);
        },
        broadcast_of(g, l));
    break;
  case OpKind::kSigmoid:
    elementwise_block(inputs, out, what, [](int64_t, float a, float) { return sigmoid(a); });
    break;
  case OpKind::kSilu:
    elementwise_block(inputs, out, what, [](int64_t, float a, float) { return silu(a); });
    break;
  case OpKind::kClip:
    elementwise_block(inputs, out, what,
                      [&](int64_t, float a, float) { return clip(a, l.clip_min, l.clip_max); });
    break;
  case OpKind::kHardSwish:
    elementwise_block(inputs, out, what, [](int64_t, float a, float) { return hard_swish(a); });
    break;
  case OpKind::kHardSigmoid:
    elementwise_block(inputs, out, what, [](int64_t, float a, float) { return hard_sigmoid(a); });
    break;
  case OpKind::kGelu:
    elementwise_block(inputs, out, what, [](int64_t, float a, float) { return gelu(a); });
    break;
  case OpKind::kMul:
  case OpKind::kChannelMul:
    elementwise_block(
        inputs, out, what, [](int64_t, float a, float b) { return a * b; }, broadcast_of(g, l));
    break;
  case OpKind::kConcat: concat_block(g, l, inputs, out, what); break;
  case OpKind::kMaxPool: max_pool_block(g, l, inputs[0], out, what); break;
  case OpKind::kAvgPool: avg_pool_block(g, l, inputs[0], out, what); break;
  case OpKind::kUpsample: upsample_block(g, l, inputs[0], out, what); break;
  case OpKind::kSlice:
    channel_gather_block(inputs[0], out, what, [&](int64_t c) { return c + l.slice_begin; });
    break;
  case OpKind::kChannelShuffle: {
    const int64_t channels = g.layer(l.inputs[0]).out.c;
    channel_gather_block(inputs[0], out, what,
                         [&](int64_t c) { return shuffle_source(c, channels, l.groups); });
    break;
  }
  case OpKind::kLayerNorm: layer_norm_block(g, l, w, inputs[0], out, what); break;
  case OpKind::kSub:
    elementwise_block(
        inputs, out, what, [](int64_t, float a, float b) { return a - b; }, broadcast_of(g, l));
    break;
  case OpKind::kDiv:
    elementwise_block(
        inputs, out, what, [](int64_t, float a, float b) { return a / b; }, broadcast_of(g, l));
    break;
  default: break;
  }
}

} // namespace brickdl::kernels::detail
