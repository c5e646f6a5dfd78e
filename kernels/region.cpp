#include "kernels/region.h"

#include <algorithm>

#include "core/error.h"

namespace brickdl::kernels {

namespace {

// Floor division for possibly negative numerators (positive divisor).
int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Scale of an upsample along `axis`: 2-D tensors are not scaled in depth.
int64_t upsample_factor(const Layer& l, int axis) {
  return (axis == 0 && l.out.spatial_rank != 3) ? 1 : l.upsample_scale;
}

} // namespace

bool Region::contains(const Region& o) const {
  if (o.empty())
    return true;
  if (empty())
    return false;
  if (o.c0 < c0 || o.c1 > c1)
    return false;
  for (size_t a = 0; a < 3; ++a)
    if (o.lo[a] < lo[a] || o.hi[a] > hi[a])
      return false;
  return true;
}

std::string Region::str() const {
  std::string s = "c[" + std::to_string(c0) + "," + std::to_string(c1) + ")";
  const char* names[] = {" d[", " h[", " w["};
  for (size_t a = 0; a < 3; ++a)
    s += names[a] + std::to_string(lo[a]) + "," + std::to_string(hi[a]) + ")";
  return s;
}

Region Region::whole(const TensorShape& shape) {
  Region r;
  r.c0 = 0;
  r.c1 = shape.c;
  r.hi = {shape.d, shape.h, shape.w};
  return r;
}

Region hull(const Region& a, const Region& b) {
  if (a.empty())
    return b;
  if (b.empty())
    return a;
  Region r;
  r.c0 = std::min(a.c0, b.c0);
  r.c1 = std::max(a.c1, b.c1);
  for (size_t i = 0; i < 3; ++i) {
    r.lo[i] = std::min(a.lo[i], b.lo[i]);
    r.hi[i] = std::max(a.hi[i], b.hi[i]);
  }
  return r;
}

Region intersect(const Region& a, const Region& b) {
  Region r;
  r.c0 = std::max(a.c0, b.c0);
  r.c1 = std::min(a.c1, b.c1);
  for (size_t i = 0; i < 3; ++i) {
    r.lo[i] = std::max(a.lo[i], b.lo[i]);
    r.hi[i] = std::min(a.hi[i], b.hi[i]);
  }
  return r;
}

Region clip(const Region& r, const TensorShape& shape) {
  return intersect(r, Region::whole(shape));
}

namespace {

// An operand broadcast along an axis (elementwise ops only: core/graph.h) is read at index 0.
void read_at_zero(const std::array<bool, 4>& axes, Region& r) {
  if (axes[0])
    r.c0 = 0, r.c1 = 1;
  for (size_t a = 0; a < 3; ++a)
    if (axes[a + 1])
      r.lo[a] = 0, r.hi[a] = 1;
}

} // namespace

Region input_need(const Graph& graph, const Layer& l, int slot, const Region& out) {
  BRICKDL_CHECK(slot >= 0 && slot < static_cast<int>(l.inputs.size()),
                "layer " << l.name << " has no input " << slot);
  const TensorShape& in = graph.layer(l.inputs[static_cast<size_t>(slot)]).out;
  if (out.empty())
    return Region{};
  Region r = out;
  const OpTraits& t = traits(l.op);
  switch (t.spatial) {
  case SpatialRule::kWindow: {
    const Window& w = l.window;
    for (size_t a = 0; a < 3; ++a) {
      r.lo[a] = out.lo[a] * w.stride[a] - w.pad[a];
      r.hi[a] =
          (out.hi[a] - 1) * w.stride[a] - w.pad[a] + int64_t{w.dilation[a]} * (w.kernel[a] - 1) + 1;
    }
    break;
  }
  case SpatialRule::kUpsample:
    for (size_t a = 0; a < 3; ++a) {
      const int64_t f = upsample_factor(l, static_cast<int>(a));
      r.lo[a] = floor_div(out.lo[a], f) - (l.bilinear ? 1 : 0);
      r.hi[a] = floor_div(out.hi[a] - 1, f) + 1 + (l.bilinear ? 1 : 0);
    }
    break;
  case SpatialRule::kSame: break;
  case SpatialRule::kWhole: return Region::whole(in);
  case SpatialRule::kNone: BRICKDL_CHECK(false, "the input layer reads nothing");
  }
  switch (t.channels) {
  case ChannelRule::kConvGroups: {
    const int64_t cout_g = l.out_channels / l.groups;
    const int64_t cin_g = in.c / l.groups;
    r.c0 = (out.c0 / cout_g) * cin_g;
    r.c1 = ((out.c1 - 1) / cout_g + 1) * cin_g;
    break;
  }
  case ChannelRule::kConcatSlice: {
    int64_t offset = 0;
    for (int i = 0; i < slot; ++i)
      offset += graph.layer(l.inputs[static_cast<size_t>(i)]).out.c;
    r.c0 = std::max<int64_t>(out.c0 - offset, 0);
    r.c1 = std::min<int64_t>(out.c1 - offset, in.c);
    break;
  }
  case ChannelRule::kSame: break;
  case ChannelRule::kWhole: r.c0 = 0, r.c1 = in.c; break;
  case ChannelRule::kSlice:
    r.c0 = out.c0 + l.slice_begin;
    r.c1 = out.c1 + l.slice_begin;
    break;
  case ChannelRule::kNone: BRICKDL_CHECK(false, "the input layer reads nothing");
  }
  if (broadcasts(l, in))
    read_at_zero(broadcast_axes(in, l.out), r);
  return clip(r, in);
}

} // namespace brickdl::kernels
