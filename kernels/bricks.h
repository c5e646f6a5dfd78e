#pragma once
// The brick layout of one activation tensor.
//
//   NC(D)HW tensor ──to_bricks──► [brick 0][brick 1]...   each brick: cb × bd × bh × bw floats,
//                  ◄─from_bricks─                         contiguous, [c][z][y][x] inside
//
// Bricks are numbered n-major, then channel block, then d, h, w brick coordinates. A brick
// grid covers the tensor with ceil(C/cb)·ceil(D/bd)·ceil(H/bh)·ceil(W/bw) bricks per image;
// bricks at the far border are partial: their elements outside the tensor exist in storage
// (every brick has the same size) and hold zeros. Brick extents larger than the tensor are
// clamped to it (one brick along that axis), as are cb = 0 (all channels) and cb > C.
#include <array>
#include <cstdint>
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"
#include "kernels/region.h"
#include "kernels/tensor.h"

namespace brickdl::kernels {

struct BrickCoord {
  int64_t n = 0, cblock = 0;
  std::array<int64_t, 3> pos{0, 0, 0}; // brick coordinates along d, h, w
  bool operator==(const BrickCoord& o) const = default;
};

class BrickLayout {
public:
  BrickLayout() = default;
  BrickLayout(const TensorShape& shape, const BrickShape& brick);

  const TensorShape& shape() const { return shape_; }
  int64_t channel_block() const { return cb_; }
  int64_t extent(int axis) const { return ext_[static_cast<size_t>(axis)]; } // brick extent
  int64_t channel_blocks() const { return nc_; }
  int64_t bricks_along(int axis) const { return nb_[static_cast<size_t>(axis)]; }
  int64_t bricks_per_image() const { return nc_ * nb_[0] * nb_[1] * nb_[2]; }
  int64_t num_bricks() const { return shape_.n * bricks_per_image(); }
  int64_t brick_elems() const { return cb_ * ext_[0] * ext_[1] * ext_[2]; } // storage per brick
  int64_t storage_elems() const { return num_bricks() * brick_elems(); }

  int64_t index(const BrickCoord& b) const;
  BrickCoord coord(int64_t index) const;
  // The brick of element (n, c, z, y, x) of the tensor.
  BrickCoord brick_of(int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) const;
  // Offset of element (n, c, z, y, x) in the bricked storage.
  int64_t offset(int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) const;

  // The brick's full extent (may pass the tensor's far border) and its part inside the tensor.
  Region storage_region(const BrickCoord& b) const;
  Region region(const BrickCoord& b) const { return clip(storage_region(b), shape_); }

  // Index of the brick at offset (dc, dz, dy, dx) brick steps from `index` in the same image,
  // or -1 when that is outside the tensor.
  int64_t neighbour(int64_t index, int dc, int dz, int dy, int dx) const;

  // Bricks of image n whose (clipped) region intersects `r`, in index order.
  std::vector<int64_t> bricks_touching(int64_t n, const Region& r) const;
  void bricks_touching(int64_t n, const Region& r, std::vector<int64_t>* out) const; // reuses *out
  // Their number, without listing them.
  int64_t count_touching(const Region& r) const;

private:
  TensorShape shape_;
  int64_t cb_ = 1, nc_ = 1;
  std::array<int64_t, 3> ext_{1, 1, 1};
  std::array<int64_t, 3> nb_{1, 1, 1};
};

// Bricked copy of `t` (partial bricks zero-filled) and back.
std::vector<float> to_bricks(const Tensor& t, const BrickLayout& layout);
Tensor from_bricks(const std::vector<float>& bricked, const BrickLayout& layout);

// Copies region `r` of image n out of bricked storage into a dense [c][z][y][x] block with the
// region's extents. Positions or channels of `r` outside the tensor read as zero (the zero
// halo at the tensor's borders).
void gather_region(const float* bricked, const BrickLayout& layout, int64_t n, const Region& r,
                   float* out);

} // namespace brickdl::kernels
