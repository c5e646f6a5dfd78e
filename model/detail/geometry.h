#pragma once
// Group geometry: what the strategy counters need to know about a group and a brick shape.
//
//   Graph + Candidate ──build_geometry()──► GroupGeometry
//                                             ├─ tensors: the group's layers (0..L−1), then
//                                             │  its external inputs (L..L+E−1), each with
//                                             │  extent / brick / grid per axis
//                                             └─ edges: (consumer layer, producer tensor) with
//                                                the per-axis need map of the receptive rule
//
// Axes are 0 = channel, 1 = depth, 2 = height, 3 = width. The channel axis is bricked by the
// channel block like a spatial axis, so every count the model makes is a sum over a brick
// grid of a product of per-axis terms: the sum factors into a product of per-axis sums, which
// is what makes the model fast (Σ_grid Π_a f_a(j_a) = Π_a Σ_j f_a(j)).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"
#include "core/group.h"

namespace brickdl::model::detail {

inline constexpr int kAxes = 4;
inline constexpr int kChannelAxis = 0;
// Channel maps per edge: a layer reading one tensor through more inputs than this (a concat
// of the same tensor five times) is declared infeasible for padded / memoized.
inline constexpr int kMaxSlotsPerEdge = 4;
// Groups are bit sets of layers in places; longer groups are infeasible for padded / memoized.
inline constexpr int kMaxGroupLayers = 64;

// Closed integer interval [lo, hi]; empty when hi < lo.
struct Interval {
  int64_t lo = 0;
  int64_t hi = -1;
  bool empty() const { return hi < lo; }
  int64_t size() const { return hi < lo ? 0 : hi - lo + 1; }
};

// Quotient of non-negative values that fit 32 bits: 32-bit division is several times faster
// than 64-bit on x86, and the model divides on its hot path.
inline int64_t div32(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint32_t>(a) / static_cast<uint32_t>(b));
}

// floor(a / b) for 0 <= a < 2^30 and b >= 1, through a reciprocal `inv` = 1.0 / b computed
// once per divisor: a multiply and one correction instead of a division in inner loops.
inline int64_t div_by(int64_t a, int64_t b, double inv) {
  int64_t q = static_cast<int64_t>(static_cast<double>(a) * inv);
  if (q * b > a)
    --q;
  if ((q + 1) * b <= a)
    ++q;
  return q;
}

// Per-axis hull; an empty operand is ignored.
inline Interval hull(Interval a, Interval b) {
  if (a.empty())
    return b;
  if (b.empty())
    return a;
  return {a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
}

enum class MapKind : uint8_t {
  kIdentity,   // elementwise ops and pools on channels
  kWindow,     // [lo·s − p, hi·s − p + span]
  kUpNearest,  // [lo / r, hi / r]
  kUpBilinear, // [lo / r − 1, hi / r + 1]
  kAll,        // the whole producer extent (conv channels with groups = 1; a broadcast operand)
  kConvGroups, // channels of the conv groups the output channels belong to
  kShift,      // concat channels: [lo − offset, hi − offset]; slice: offset −begin
};

// The need map of one input on one axis: the producer interval needed for a consumer output
// interval, clipped to [0, extent − 1].
struct AxisMap {
  MapKind kind = MapKind::kIdentity;
  int64_t a = 0, b = 0, c = 0;      // kWindow: s, p, span; kUp*: r; kConvGroups: cout_g, cin_g;
                                    // kShift: offset
  int64_t extent = 1;               // of the producer on this axis
  Interval apply(Interval o) const; // inline below: the model's innermost operation
  bool operator==(const AxisMap& o) const = default;
};

// A consumer layer of the group reading one producer tensor (through one or more inputs).
struct Edge {
  int consumer = 0;    // layer index in the group
  int producer = 0;    // tensor index: < L a layer of the group, else an external input
  int slots = 1;       // inputs of the consumer reading the producer (hull of their needs)
  bool window = false; // the consumer is a window op (conv, pool): padded stages an external
                       // producer in shared memory for it; any other reader of an external
                       // producer reads it from global memory (an elementwise op: a residual add)
  std::array<AxisMap, kMaxSlotsPerEdge> channel;   // one channel map per slot
  std::array<AxisMap, kAxes> axis;                 // spatial maps (axis[0] unused)
  Interval need(int axis_index, Interval o) const; // inline below
};

inline Interval AxisMap::apply(Interval o) const {
  if (o.empty())
    return o;
  Interval r;
  switch (kind) {
  case MapKind::kIdentity: r = o; break;
  case MapKind::kWindow: r = {o.lo * a - b, o.hi * a - b + c}; break;
  case MapKind::kUpNearest: r = {div32(o.lo, a), div32(o.hi, a)}; break;
  case MapKind::kUpBilinear: r = {div32(o.lo, a) - 1, div32(o.hi, a) + 1}; break;
  case MapKind::kAll: r = {0, extent - 1}; break;
  case MapKind::kConvGroups: r = {div32(o.lo, a) * b, (div32(o.hi, a) + 1) * b - 1}; break;
  case MapKind::kShift: r = {o.lo - a, o.hi - a}; break;
  }
  if (r.lo < 0)
    r.lo = 0;
  if (r.hi > extent - 1)
    r.hi = extent - 1;
  return r;
}

inline Interval Edge::need(int axis_index, Interval o) const {
  if (axis_index != kChannelAxis)
    return axis[static_cast<size_t>(axis_index)].apply(o);
  Interval r = channel[0].apply(o);
  for (int s = 1; s < slots; ++s)
    r = hull(r, channel[static_cast<size_t>(s)].apply(o));
  return r;
}

struct TensorGrid {
  std::array<int64_t, kAxes> extent{1, 1, 1, 1};
  std::array<int64_t, kAxes> brick{1, 1, 1, 1};
  std::array<int64_t, kAxes> grid{1, 1, 1, 1}; // ceil(extent / brick)
  // Brick j along an axis covers [j·brick, min((j + 1)·brick, extent) − 1].
  Interval brick_interval(int axis, int64_t j) const {
    const int64_t lo = j * brick[static_cast<size_t>(axis)];
    const int64_t hi = lo + brick[static_cast<size_t>(axis)] - 1;
    const int64_t e = extent[static_cast<size_t>(axis)] - 1;
    return {lo, hi < e ? hi : e};
  }
  int64_t spatial_bricks() const { return grid[1] * grid[2] * grid[3]; }
};

// Padded: the loads of an external input that a unit issues apart, when they are not one
// region (the input has a window reader and another reader, or several other readers): the
// staged copy, the hull of what its window readers need (`edges`: their edges), or one
// non-window reader's need from global memory (`edges`: its one edge).
struct InputRead {
  int tensor = 0;         // an external input (>= L)
  std::vector<int> edges; // into GroupGeometry::edges
};

// Bytes of one shared-memory element of the generated kernels: fp32 whatever the precision
// (bf16 / fp16 plans store 16-bit tensors in global memory only; templates/group_desc.h).
constexpr double kSharedElementBytes = 4;

struct GroupGeometry {
  const Graph* graph = nullptr;
  Group group;
  int layer_count = 0;    // L
  int external_count = 0; // E
  int64_t batch = 1;
  int64_t batch_block = 1; // images per unit of work (BrickShape::nb clamped to the batch)
  int64_t batch_units = 1; // ceil(batch / batch_block): units along the batch
  int cluster = 1;         // CTAs per unit (BrickShape::cl; padded, sm_90)
  double dtype_bytes = 4;  // of every tensor in global memory (the generated kernels' storage)

  std::vector<const Layer*> layers;    // L
  std::vector<int> tensor_ids;         // L + E graph ids
  std::vector<TensorGrid> tensors;     // L + E
  std::vector<Edge> edges;             // grouped by consumer, ascending
  std::vector<int> edge_begin;         // L + 1 offsets into edges
  std::vector<double> flops_per_point; // L: 2 · (Cin / groups) · kernel volume (conv, linear);
                                       // 2 · MACs / outputs (conv_transpose)
  std::vector<double> params;          // L
  std::vector<int> first_use;          // L + E: first consumer (layer index), L − 1 for the last
  std::vector<int> last_use;           // L + E: last consumer (layer index)
  std::vector<int> last_window_use;    // L + E: last window consumer (-1: none); padded frees a
                                       // staged input's shared memory after it
  std::vector<bool> staged;            // L + E: read by a window op (staged in shared memory)
  std::vector<int> stream_chunk;       // L + E: padded streams it in chunks of this many
                                       // channels (core/group.h stream_chunk_channels); 0: whole
  std::vector<bool> split_reads;       // L + E: padded counts its loads as `reads` (InputRead)
  std::vector<InputRead> reads;        // of the tensors with split_reads, by tensor

  // Empty when the group is a valid group; else why not (an intermediate leaves the group).
  std::string invalid_reason;
  // Empty when padded / memoized can run it; else why not (non-spatial ops, ...).
  std::string brick_reason;

  // Cache of the brick-independent part: everything above but `tensors` (brick, grid) and
  // `brick_reason` is a function of the graph's content (Graph::uid) and the group, so a later
  // call for the same graph and group reuses it (the search asks for many bricks and
  // strategies of one group in a row).
  uint64_t graph_uid = 0;
  Group group_built; // the group the cached structure is of
  bool has_structure = false;
  std::string structure_reason; // the brick-independent part of brick_reason

  int tensor_count() const { return layer_count + external_count; }
  const TensorGrid& last() const { return tensors[static_cast<size_t>(layer_count - 1)]; }
  double numel(int t) const; // elements of tensor t (all images)
};

// True when spatial axes a and b see the same extents, bricks and need maps in every tensor
// and edge of the group (a square image with square kernels and bricks): every per-axis
// quantity is then the same on both, and the counters compute it once.
bool same_axis(const GroupGeometry& g, int a, int b);

// Fills `g` (reusing its storage) for `candidate` on the fused `graph`.
void build_geometry(const Graph& graph, const Candidate& candidate, GroupGeometry& g);

} // namespace brickdl::model::detail
