#pragma once
// The channel-blocked activation layout of the CPU kernels (oneDNN's nChw8c / nChw16c, and
// nCdhw8c / nCdhw16c in 3-D):
//
//   image n: [channel block b][z][y][x][lane]      channel c = b·lanes + lane
//
// One vector of `lanes` channels (kernels/cpu/isa.h: 8 on AVX2, 16 on AVX-512) per pixel, so
// every per-channel op is a vector op and a conv's input channels are a GEMM's k. The last block
// of a channel count that is not a multiple of `lanes` is padded with zeros (oneDNN's padded
// dimensions, the same bytes). Flat tensors (after flatten / linear) are one pixel per image.
//
// A BlockedView is a region of one image in this layout: the region `stored` (its channel
// range starting at a multiple of lanes), [block][z][y][x][lane] with the region's extents;
// the whole image of a BlockedTensor is the view over Region::whole(shape). The CPU strategies
// keep unit buffers and memoized bricks as views of their own storage.
#include <cstdint>
#include <memory>

#include "core/graph.h"
#include "kernels/region.h"
#include "kernels/tensor.h"

namespace brickdl::kernels::cpu {

// 64-byte aligned floats (a cache line; whole vectors of either ISA).
//
// Blocks of kReusedBlockBytes or more are kept when freed (up to kReusedBytesCap in all, by
// size) and handed out again for the same size: a plan allocates the same activations on every
// run, and glibc serves blocks this large from fresh mmap'd pages, so without the cache every
// run paid the page faults of its activations again (ResNet-50 at batch 8 on 2 cores: 318 and
// 324 ms a run without the reuse, 296 and 295 with it, in separate processes), and how much
// depended on the process's allocation history (two plans of the same kernels differed by 4% in one
// process, 8-37% across processes). Not under AddressSanitizer, which must see every block freed.
struct AlignedFree {
  size_t bytes = 0; // the block's size (the cache's key)
  void operator()(float* p) const;
};
using AlignedFloats = std::unique_ptr<float[], AlignedFree>;
AlignedFloats aligned_floats(int64_t count); // uninitialised; count 0 gives null
inline constexpr size_t kReusedBlockBytes = size_t{256} << 10;
inline constexpr size_t kReusedBytesCap = size_t{2} << 30;
// Whether freed blocks are reused in this build (not under AddressSanitizer); the bytes of
// freed blocks held for reuse now (tests), and freeing them all.
bool blocks_reused();
size_t reused_bytes_held();
void release_reused_blocks();

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
inline int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

// Element addressing of a blocked region.
struct BlockedStrides {
  int64_t x = 0, y = 0, z = 0, block = 0;
  BlockedStrides() = default;
  BlockedStrides(const Region& stored, int lanes)
      : x(lanes), y(lanes * stored.extent(2)), z(y * stored.extent(1)),
        block(z * stored.extent(0)) {}
};

template <typename T> struct BlockedViewOf {
  T* data = nullptr;
  Region stored;
  int lanes = 8;

  int64_t blocks() const { return ceil_div(stored.c1 - stored.c0, lanes); }
  int64_t floats() const { return blocks() * BlockedStrides(stored, lanes).block; }
  // The vector of channel block `b` (a global block index: channel b·lanes) at (z, y, x).
  T* at(int64_t b, int64_t z, int64_t y, int64_t x) const {
    const BlockedStrides s(stored, lanes);
    return data + (b - stored.c0 / lanes) * s.block + (z - stored.lo[0]) * s.z +
           (y - stored.lo[1]) * s.y + (x - stored.lo[2]) * s.x;
  }
  // Element (c, z, y, x).
  T* element(int64_t c, int64_t z, int64_t y, int64_t x) const {
    return at(c / lanes, z, y, x) + c % lanes;
  }
};
using BlockedView = BlockedViewOf<float>;
using ConstBlockedView = BlockedViewOf<const float>;

inline ConstBlockedView as_const(const BlockedView& v) {
  return {v.data, v.stored, v.lanes};
}

// The storage region of a view that must hold `r`: `r` with its channel range widened to whole
// blocks on the low side (the high side is padded by the block count).
Region blocked_storage_region(const Region& r, int lanes);

// An owning activation of shape `shape` in the blocked layout, 64-byte aligned, padding lanes
// zero.
class BlockedTensor {
public:
  BlockedTensor() = default;
  // Uninitialised, except the padding lanes of the last channel block, which are zero.
  BlockedTensor(const TensorShape& shape, int lanes);

  const TensorShape& shape() const { return shape_; }
  int lanes() const { return lanes_; }
  bool empty() const { return !data_; }
  int64_t blocks() const { return ceil_div(shape_.c, lanes_); }
  int64_t image_floats() const { return blocks() * lanes_ * shape_.spatial(); }
  int64_t floats() const { return shape_.n * image_floats(); }
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  float* image_data(int64_t n) { return data_.get() + n * image_floats(); }
  const float* image_data(int64_t n) const { return data_.get() + n * image_floats(); }
  BlockedView image(int64_t n) { return {image_data(n), Region::whole(shape_), lanes_}; }
  ConstBlockedView image(int64_t n) const { return {image_data(n), Region::whole(shape_), lanes_}; }
  // Element (n, c, z, y, x).
  float at(int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) const {
    return *image(n).element(c, z, y, x);
  }

private:
  TensorShape shape_;
  int lanes_ = 8;
  AlignedFloats data_;
};

// `t` in the blocked layout of `lanes` lanes, and back (threads: OpenMP's, when built with it).
BlockedTensor to_blocked(const Tensor& t, int lanes);
Tensor from_blocked(const BlockedTensor& t);

// Copies the channel / box range `r` of view `src` (which must contain it) into `dst` (which
// must contain it too), lanes as they are. Both views share the lane count; r.c0 is a multiple
// of lanes or the copy is of whole blocks around it (every lane of the blocks r touches).
void copy_region(const ConstBlockedView& src, const BlockedView& dst, const Region& r);

// The same, but exactly the channels [r.c0, r.c1): lanes of the blocks r touches that lie outside
// it are left as they are in `dst` (memoized bricks of a channel block that is not a multiple
// of lanes share a vector).
void copy_channels(const ConstBlockedView& src, const BlockedView& dst, const Region& r);

} // namespace brickdl::kernels::cpu
