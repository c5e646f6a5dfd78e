#pragma once
// The shared-memory arena of one thread block: first-fit placement of buffers (in floats) with
// explicit lifetimes. The code generator places the generated kernels' buffers with it
// (kernels/cuda/codegen.cpp) and the model replays the same allocations for its footprint
// (model/strategies/padded.cpp), so that both agree to the float, holes included.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace brickdl {

class SmemArena {
public:
  static constexpr int64_t kAlignFloats = 4; // 16-byte aligned buffers

  // Places a buffer of `floats` (at least one, rounded up to the alignment) at the lowest
  // offset where it fits between the live ones; returns the offset.
  int64_t alloc(int64_t floats) {
    const int64_t size = round_up(std::max<int64_t>(floats, 1));
    int64_t at = 0;
    auto it = live_.begin();
    for (; it != live_.end(); ++it) { // sorted by offset
      if (at + size <= it->first)
        break;
      at = std::max(at, it->first + it->second);
    }
    live_.insert(it, {at, size});
    peak_ = std::max(peak_, at + size);
    return at;
  }
  void free(int64_t offset) {
    const auto it =
        std::find_if(live_.begin(), live_.end(), [&](const auto& b) { return b.first == offset; });
    if (it != live_.end())
      live_.erase(it);
  }
  // Empty again, keeping the storage (the model reuses one arena per thread).
  void clear() {
    live_.clear();
    peak_ = 0;
  }
  // The highest offset any buffer reached: the arena's size.
  int64_t peak() const { return peak_; }

  static int64_t round_up(int64_t floats) {
    return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }

private:
  std::vector<std::pair<int64_t, int64_t>> live_; // (offset, size), sorted by offset
  int64_t peak_ = 0;
};

} // namespace brickdl
