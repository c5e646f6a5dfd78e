#include "core/onnx/channel_ops.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace brickdl::onnx_detail {

IndexRange slice_range(int64_t start, int64_t end, int64_t extent) {
  const auto clamp = [extent](int64_t i) {
    if (i < 0)
      i = i < -extent ? 0 : i + extent; // no overflow for INT64_MIN
    return std::min(i, extent);
  };
  return {clamp(start), clamp(end)};
}

std::vector<int64_t> split_sizes(int64_t extent, int outputs, const std::vector<int64_t>* split,
                                 int64_t num_outputs, std::string* why) {
  if (split) {
    const bool positive =
        std::all_of(split->begin(), split->end(), [](int64_t s) { return s > 0; });
    const int64_t sum = std::accumulate(split->begin(), split->end(), int64_t{0});
    if (static_cast<int>(split->size()) != outputs || !positive || sum != extent) {
      *why = fmt::format("split [{}] must give {} positive sizes that add up to the extent {}",
                         fmt::join(*split, ", "), outputs, extent);
      return {};
    }
    return *split;
  }
  if (num_outputs != 0 && num_outputs != outputs) {
    *why = fmt::format("num_outputs {} but {} outputs", num_outputs, outputs);
    return {};
  }
  if (outputs < 1 || extent < outputs || (num_outputs == 0 && extent % outputs != 0)) {
    *why = fmt::format("an extent of {} does not split into {} equal parts", extent, outputs);
    return {};
  }
  const int64_t part = (extent + outputs - 1) / outputs;
  std::vector<int64_t> sizes(static_cast<size_t>(outputs), part);
  sizes.back() = extent - part * (outputs - 1);
  if (sizes.back() < 1) {
    *why = fmt::format("an extent of {} leaves nothing for the last of {} parts", extent, outputs);
    return {};
  }
  return sizes;
}

bool is_to_channels_last(const std::vector<int64_t>& perm) {
  const auto r = static_cast<int64_t>(perm.size());
  if (r < 3 || perm[0] != 0 || perm.back() != 1)
    return false;
  for (int64_t i = 1; i + 1 < r; ++i)
    if (perm[static_cast<size_t>(i)] != i + 1)
      return false;
  return true;
}

bool is_to_channels_first(const std::vector<int64_t>& perm) {
  const auto r = static_cast<int64_t>(perm.size());
  if (r < 3 || perm[0] != 0 || perm[1] != r - 1)
    return false;
  for (int64_t i = 2; i < r; ++i)
    if (perm[static_cast<size_t>(i)] != i - 1)
      return false;
  return true;
}

int64_t channel_shuffle_groups(const std::vector<int64_t>& in, const std::vector<int64_t>& split,
                               const std::vector<int64_t>& perm, const std::vector<int64_t>& out) {
  const size_t r = in.size();
  if (r < 2 || split.size() != r + 1 || perm.size() != r + 1 || out != in)
    return 0;
  const int64_t g = split[1];
  if (split[0] != in[0] || g < 1 || split[2] < 1 || g * split[2] != in[1])
    return 0;
  if (!std::equal(in.begin() + 2, in.end(), split.begin() + 3))
    return 0;
  if (perm[0] != 0 || perm[1] != 2 || perm[2] != 1)
    return 0;
  for (size_t i = 3; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return 0;
  return g;
}

} // namespace brickdl::onnx_detail
