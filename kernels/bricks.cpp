#include "kernels/bricks.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace brickdl::kernels {

namespace {
int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
} // namespace

BrickLayout::BrickLayout(const TensorShape& shape, const BrickShape& brick) : shape_(shape) {
  BRICKDL_CHECK(brick.d >= 1 && brick.h >= 1 && brick.w >= 1 && brick.cb >= 0,
                "brick " << brick.str());
  cb_ = brick.cb == 0 ? shape.c : std::min<int64_t>(brick.cb, shape.c);
  nc_ = ceil_div(shape.c, cb_);
  for (int a = 0; a < 3; ++a) {
    ext_[static_cast<size_t>(a)] = std::min<int64_t>(brick.dim(a), shape.dim(a));
    nb_[static_cast<size_t>(a)] = ceil_div(shape.dim(a), ext_[static_cast<size_t>(a)]);
  }
}

int64_t BrickLayout::index(const BrickCoord& b) const {
  return (((b.n * nc_ + b.cblock) * nb_[0] + b.pos[0]) * nb_[1] + b.pos[1]) * nb_[2] + b.pos[2];
}

BrickCoord BrickLayout::coord(int64_t i) const {
  BrickCoord b;
  b.pos[2] = i % nb_[2];
  i /= nb_[2];
  b.pos[1] = i % nb_[1];
  i /= nb_[1];
  b.pos[0] = i % nb_[0];
  i /= nb_[0];
  b.cblock = i % nc_;
  b.n = i / nc_;
  return b;
}

BrickCoord BrickLayout::brick_of(int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) const {
  return BrickCoord{n, c / cb_, {z / ext_[0], y / ext_[1], x / ext_[2]}};
}

int64_t BrickLayout::offset(int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) const {
  const BrickCoord b = brick_of(n, c, z, y, x);
  const int64_t local =
      (((c % cb_) * ext_[0] + z % ext_[0]) * ext_[1] + y % ext_[1]) * ext_[2] + x % ext_[2];
  return index(b) * brick_elems() + local;
}

Region BrickLayout::storage_region(const BrickCoord& b) const {
  Region r;
  r.c0 = b.cblock * cb_;
  r.c1 = r.c0 + cb_;
  for (size_t a = 0; a < 3; ++a) {
    r.lo[a] = b.pos[a] * ext_[a];
    r.hi[a] = r.lo[a] + ext_[a];
  }
  return r;
}

int64_t BrickLayout::neighbour(int64_t i, int dc, int dz, int dy, int dx) const {
  BrickCoord b = coord(i);
  b.cblock += dc;
  b.pos[0] += dz;
  b.pos[1] += dy;
  b.pos[2] += dx;
  if (b.cblock < 0 || b.cblock >= nc_)
    return -1;
  for (size_t a = 0; a < 3; ++a)
    if (b.pos[a] < 0 || b.pos[a] >= nb_[a])
      return -1;
  return index(b);
}

std::vector<int64_t> BrickLayout::bricks_touching(int64_t n, const Region& r) const {
  std::vector<int64_t> out;
  bricks_touching(n, r, &out);
  return out;
}

void BrickLayout::bricks_touching(int64_t n, const Region& r0, std::vector<int64_t>* out) const {
  out->clear();
  const Region r = clip(r0, shape_);
  if (r.empty())
    return;
  for (int64_t cbk = r.c0 / cb_; cbk <= (r.c1 - 1) / cb_; ++cbk)
    for (int64_t z = r.lo[0] / ext_[0]; z <= (r.hi[0] - 1) / ext_[0]; ++z)
      for (int64_t y = r.lo[1] / ext_[1]; y <= (r.hi[1] - 1) / ext_[1]; ++y)
        for (int64_t x = r.lo[2] / ext_[2]; x <= (r.hi[2] - 1) / ext_[2]; ++x)
          out->push_back(index(BrickCoord{n, cbk, {z, y, x}}));
}

int64_t BrickLayout::count_touching(const Region& r0) const {
  const Region r = clip(r0, shape_);
  if (r.empty())
    return 0;
  int64_t count = (r.c1 - 1) / cb_ - r.c0 / cb_ + 1;
  for (size_t a = 0; a < 3; ++a)
    count *= (r.hi[a] - 1) / ext_[a] - r.lo[a] / ext_[a] + 1;
  return count;
}

std::vector<float> to_bricks(const Tensor& t, const BrickLayout& layout) {
  const TensorShape& s = t.shape();
  BRICKDL_CHECK(s == layout.shape(), "tensor " << s.str() << " vs layout " << layout.shape().str());
  std::vector<float> out(static_cast<size_t>(layout.storage_elems()), 0.0f);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t z = 0; z < s.d; ++z)
        for (int64_t y = 0; y < s.h; ++y)
          for (int64_t x = 0; x < s.w; ++x)
            out[static_cast<size_t>(layout.offset(n, c, z, y, x))] = t.at(n, c, z, y, x);
  return out;
}

Tensor from_bricks(const std::vector<float>& bricked, const BrickLayout& layout) {
  BRICKDL_CHECK(static_cast<int64_t>(bricked.size()) == layout.storage_elems(),
                "bricked storage of " << bricked.size() << " values");
  const TensorShape& s = layout.shape();
  Tensor t(s);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t z = 0; z < s.d; ++z)
        for (int64_t y = 0; y < s.h; ++y)
          for (int64_t x = 0; x < s.w; ++x)
            t.at(n, c, z, y, x) = bricked[static_cast<size_t>(layout.offset(n, c, z, y, x))];
  return t;
}

void gather_region(const float* bricked, const BrickLayout& layout, int64_t n, const Region& r,
                   float* out) {
  if (r.empty())
    return;
  const int64_t ex = r.extent(2);
  const int64_t plane = r.extent(1) * ex;
  const int64_t vol = r.extent(0) * plane;
  std::fill(out, out + r.channels() * vol, 0.0f);
  const Region in = clip(r, layout.shape());
  if (in.empty())
    return;
  const int64_t bw = layout.extent(2);
  // Copy row segments: a row of the region crosses ceil-many bricks along w; each piece is a
  // contiguous run inside one brick.
  for (int64_t c = in.c0; c < in.c1; ++c)
    for (int64_t z = in.lo[0]; z < in.hi[0]; ++z)
      for (int64_t y = in.lo[1]; y < in.hi[1]; ++y) {
        float* row = out + (c - r.c0) * vol + (z - r.lo[0]) * plane + (y - r.lo[1]) * ex;
        for (int64_t x = in.lo[2]; x < in.hi[2];) {
          const int64_t run = std::min(in.hi[2], (x / bw + 1) * bw) - x;
          std::memcpy(row + (x - r.lo[2]), bricked + layout.offset(n, c, z, y, x),
                      static_cast<size_t>(run) * sizeof(float));
          x += run;
        }
      }
}

} // namespace brickdl::kernels
