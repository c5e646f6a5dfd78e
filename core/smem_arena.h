#pragma once
// The shared-memory arena of one thread block: first-fit placement of buffers (in floats) with
// explicit lifetimes. The code generator places the generated kernels' buffers with it
// (kernels/cuda/codegen.cpp) and the model replays the same allocations for its footprint
// (model/strategies/padded.cpp), so that both agree to the float, holes included.
#include <algorithm>
#include <cstdint>
#include <map>

namespace brickdl {

class SmemArena {
public:
  static constexpr int64_t kAlignFloats = 4; // 16-byte aligned buffers

  // Places a buffer of `floats` (at least one, rounded up to the alignment) at the lowest
  // offset where it fits between the live ones; returns the offset.
  int64_t alloc(int64_t floats) {
    const int64_t size = round_up(std::max<int64_t>(floats, 1));
    int64_t at = 0;
    for (const auto& [off, sz] : live_) { // sorted by offset
      if (at + size <= off)
        break;
      at = std::max(at, off + sz);
    }
    live_.emplace(at, size);
    peak_ = std::max(peak_, at + size);
    return at;
  }
  void free(int64_t offset) { live_.erase(offset); }
  // The highest offset any buffer reached: the arena's size.
  int64_t peak() const { return peak_; }

  static int64_t round_up(int64_t floats) {
    return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }

private:
  std::map<int64_t, int64_t> live_; // offset -> size
  int64_t peak_ = 0;
};

} // namespace brickdl
