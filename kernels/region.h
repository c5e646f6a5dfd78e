#pragma once
// Regions of one image of a tensor, and the receptive-field rule that links them.
//
//   output Region of a layer ──input_need(graph, layer, slot, region)──► Region of its input
//
// A Region is a channel range [c0, c1) times a box [lo, hi) per spatial axis (d, h, w), in
// tensor coordinates; all bounds are half-open. Which rule a layer follows is its op's
// SpatialRule and ChannelRule (core/op_traits.h); the arithmetic of the rules is the one
// documented at the top of model/cost_model.h, so that the executor and the analytic model
// count the same regions. It is written twice on purpose, here over regions and in
// model/detail/geometry.h over per-axis maps, and the agreement tests compare the two:
//  - kWindow, output [a, b] (inclusive) on an axis:
//      input [a·s − p, b·s − p + dil·(k − 1)], clipped to [0, extent − 1];
//  - kSame: the same box; an operand broadcast along an axis (extent 1 where the output has
//    more, core/graph.h broadcast_axes), [0, 1) there, channels included;
//  - kUpsample by r: nearest [floor(a/r), floor(b/r)]; bilinear one more on each side, clipped;
//  - kWhole: the whole input.
// Channels: kConvGroups, the input channels of the conv groups that the output channels
// belong to; kSame, the same channels; kConcatSlice, the slice of each input that overlaps.
// kSlice, the output range shifted by the slice's begin; kWhole, all channels.
#include <array>
#include <cstdint>
#include <string>

#include "core/graph.h"

namespace brickdl::kernels {

struct Region {
  int64_t c0 = 0, c1 = 0;
  std::array<int64_t, 3> lo{0, 0, 0};
  std::array<int64_t, 3> hi{0, 0, 0};

  bool empty() const { return c1 <= c0 || hi[0] <= lo[0] || hi[1] <= lo[1] || hi[2] <= lo[2]; }
  int64_t channels() const { return c1 - c0; }
  int64_t extent(int axis) const {
    return hi[static_cast<size_t>(axis)] - lo[static_cast<size_t>(axis)];
  }
  int64_t box_volume() const { return empty() ? 0 : extent(0) * extent(1) * extent(2); }
  int64_t volume() const { return box_volume() * (empty() ? 0 : channels()); }
  bool contains(const Region& o) const; // an empty region is contained in any region
  std::string str() const;              // "c[0,3) d[0,4) h[2,9) w[2,9)"
  bool operator==(const Region& o) const = default;

  // All channels and positions of one image of `shape`.
  static Region whole(const TensorShape& shape);
};

// Smallest region holding both (per-axis hull); an empty operand is ignored.
Region hull(const Region& a, const Region& b);
Region intersect(const Region& a, const Region& b);
// `r` clipped to the extents of `shape`.
Region clip(const Region& r, const TensorShape& shape);

// What `layer` reads of its input number `slot` to produce `out` (a region of its output),
// clipped to that input. Empty when it reads nothing of it (a concat slice outside `out`).
Region input_need(const Graph& graph, const Layer& layer, int slot, const Region& out);

} // namespace brickdl::kernels
