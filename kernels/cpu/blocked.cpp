#include "kernels/cpu/blocked.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "core/error.h"

namespace brickdl::kernels::cpu {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kReuse = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kReuse = false;
#else
constexpr bool kReuse = true;
#endif
#else
constexpr bool kReuse = true;
#endif

// Freed large blocks by size (blocked.h): one lock, taken once per allocation of a layer's
// activation or a unit's buffer, never inside a kernel's loops.
class ReusedBlocks {
public:
  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(bytes);
    if (it == free_.end())
      return nullptr;
    void* p = it->second;
    free_.erase(it);
    held_ -= bytes;
    return p;
  }
  // False when the cap is reached: the caller frees it.
  bool keep(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (held_ + bytes > kReusedBytesCap)
      return false;
    free_.emplace(bytes, p);
    held_ += bytes;
    return true;
  }
  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [bytes, p] : free_)
      std::free(p);
    free_.clear();
    held_ = 0;
  }

private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t held_ = 0;
};

// Never destroyed: blocks of static tensors are freed after static destructors ran.
ReusedBlocks& reused() {
  static ReusedBlocks* blocks = new ReusedBlocks;
  return *blocks;
}

} // namespace

void AlignedFree::operator()(float* p) const {
  if (p && kReuse && bytes >= kReusedBlockBytes && reused().keep(p, bytes))
    return;
  std::free(p);
}

AlignedFloats aligned_floats(int64_t count) {
  if (count <= 0)
    return AlignedFloats(nullptr);
  // Large blocks in whole pages, so that sizes that differ by a little share their blocks.
  const size_t bytes = static_cast<size_t>(
      round_up(count * 4, static_cast<size_t>(count) * 4 >= kReusedBlockBytes ? 4096 : 64));
  void* p = kReuse && bytes >= kReusedBlockBytes ? reused().take(bytes) : nullptr;
  if (!p)
    p = std::aligned_alloc(64, bytes);
  if (!p)
    throw std::bad_alloc();
  return AlignedFloats(static_cast<float*>(p), AlignedFree{bytes});
}

bool blocks_reused() {
  return kReuse;
}

size_t reused_bytes_held() {
  return reused().held();
}

void release_reused_blocks() {
  reused().release();
}

// Floats allocated past the end of every blocked tensor: oneDNN 2.6's jit:uni binary kernels
// store one vector past the end of an 8-lane tensor on an AVX-512 host (seen under
// AddressSanitizer on a 3x3x17x12 add); the slack takes that store.
constexpr int64_t kSlackFloats = 64;

Region blocked_storage_region(const Region& r, int lanes) {
  Region s = r;
  s.c0 = r.c0 / lanes * lanes;
  return s;
}

BlockedTensor::BlockedTensor(const TensorShape& shape, int lanes)
    : shape_(shape), lanes_(lanes),
      data_(aligned_floats(shape.n * blocks() * lanes * shape.spatial() + kSlackFloats)) {
  BRICKDL_CHECK(lanes == 8 || lanes == 16, "lanes must be 8 or 16, not " << lanes);
  if (shape.c % lanes == 0)
    return;
  const int64_t pix = shape.spatial();
  for (int64_t n = 0; n < shape.n; ++n) {
    float* last = image_data(n) + (blocks() - 1) * pix * lanes;
    for (int64_t p = 0; p < pix; ++p)
      std::fill(last + p * lanes + shape.c % lanes, last + (p + 1) * lanes, 0.0f);
  }
}

BlockedTensor to_blocked(const Tensor& t, int lanes) {
  const TensorShape& s = t.shape();
  BlockedTensor b(s, lanes);
  const int64_t pix = s.spatial(), blocks = b.blocks();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      float* dst = b.image_data(n) + blk * pix * lanes;
      const int64_t c0 = blk * lanes, cn = std::min<int64_t>(lanes, s.c - c0);
      for (int64_t l = 0; l < cn; ++l) {
        const float* src = t.image(n) + (c0 + l) * pix;
        for (int64_t p = 0; p < pix; ++p)
          dst[p * lanes + l] = src[p];
      }
    }
  return b;
}

Tensor from_blocked(const BlockedTensor& b) {
  const TensorShape& s = b.shape();
  Tensor t(s);
  const int64_t pix = s.spatial(), lanes = b.lanes();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c) {
      const float* src = b.image_data(n) + (c / lanes) * pix * lanes + c % lanes;
      float* dst = t.image(n) + c * pix;
      for (int64_t p = 0; p < pix; ++p)
        dst[p] = src[p * lanes];
    }
  return t;
}

void copy_region(const ConstBlockedView& src, const BlockedView& dst, const Region& r) {
  if (r.empty())
    return;
  BRICKDL_CHECK(src.lanes == dst.lanes,
                "copy between layouts of " << src.lanes << " and " << dst.lanes << " lanes");
  const int64_t L = src.lanes, row = r.extent(2) * L;
  for (int64_t b = r.c0 / L; b < ceil_div(r.c1, L); ++b)
    for (int64_t z = r.lo[0]; z < r.hi[0]; ++z)
      for (int64_t y = r.lo[1]; y < r.hi[1]; ++y)
        std::memcpy(dst.at(b, z, y, r.lo[2]), src.at(b, z, y, r.lo[2]),
                    static_cast<size_t>(row) * sizeof(float));
}

void copy_channels(const ConstBlockedView& src, const BlockedView& dst, const Region& r) {
  if (r.empty())
    return;
  const int64_t L = src.lanes, ex = r.extent(2);
  for (int64_t b = r.c0 / L; b < ceil_div(r.c1, L); ++b) {
    const int64_t lo = std::max<int64_t>(r.c0 - b * L, 0), hi = std::min<int64_t>(r.c1 - b * L, L);
    for (int64_t z = r.lo[0]; z < r.hi[0]; ++z)
      for (int64_t y = r.lo[1]; y < r.hi[1]; ++y) {
        const float* s = src.at(b, z, y, r.lo[2]);
        float* d = dst.at(b, z, y, r.lo[2]);
        if (lo == 0 && hi == L) {
          std::memcpy(d, s, static_cast<size_t>(ex * L) * sizeof(float));
          continue;
        }
        for (int64_t x = 0; x < ex; ++x)
          for (int64_t l = lo; l < hi; ++l)
            d[x * L + l] = s[x * L + l];
      }
  }
}

} // namespace brickdl::kernels::cpu
