// The lower bound of a group: what its output depends on, moved once and computed once.
//
// Walks the group backwards at element (not brick) granularity, one axis at a time: the set
// of positions of each tensor the output depends on is kept as a product of per-axis sets.
// For a tensor read by several layers, the largest of their product sets is kept, which is a
// subset of what is truly needed, so the result stays a lower bound of every strategy.
//
// Bounded work: an axis on which every edge maps identically (same extent) or reads the whole
// producer is needed whole wherever a tensor is needed at all, so it keeps no set; the other
// axes cost O(extents) per edge. A group whose sets would exceed kMaxPositions (only a whole
// graph of huge tensors, as --describe's whole-model bound asks) falls back to a weaker
// bound: its output and its last layer's weights moved once, that layer's FLOPs.
#include <algorithm>
#include <cmath>

#include "model/cost_model.h"
#include "model/detail/geometry.h"
#include "model/detail/memory.h"

namespace brickdl::model {

namespace {

using detail::AxisMap;
using detail::Edge;
using detail::GroupGeometry;
using detail::kAxes;
using detail::MapKind;

// Per tensor and axis, the positions the output depends on (a product set per tensor).
struct Scratch {
  std::vector<uint8_t> masks;                // all tensors × axes, flattened
  std::vector<int64_t> offset;               // (T × 4) start in masks
  std::vector<double> volume;                // per tensor: positions per image (< 0: not needed)
  std::array<std::vector<uint8_t>, 4> image; // per axis: one edge's producer set, being built
  std::array<bool, 4> full{};                // per axis: needed whole (no set kept)

  uint8_t* mask(int t, int a) {
    return &masks[static_cast<size_t>(offset[static_cast<size_t>(t) * 4 + static_cast<size_t>(a)])];
  }
};

// Extent of tensor t along axis a.
int64_t extent(const GroupGeometry& g, int t, int a) {
  return g.tensors[static_cast<size_t>(t)].extent[static_cast<size_t>(a)];
}

// Marks in `out` the channels of the producer that the consumer channels in `in` read, in
// O(in_extent + producer extent) per slot (a dense conv reads every channel: marking them once
// per output channel would be quadratic in the channel count).
void map_channels(const Edge& edge, const uint8_t* in, int64_t in_extent,
                  std::vector<uint8_t>& out) {
  const int64_t pe = edge.channel[0].extent;
  out.assign(static_cast<size_t>(pe), 0);
  const auto mark_range = [&](int64_t lo, int64_t hi) { // [lo, hi), clipped
    lo = std::max<int64_t>(lo, 0);
    hi = std::min(hi, pe);
    if (lo < hi)
      std::fill(out.begin() + lo, out.begin() + hi, 1);
  };
  const bool any = std::find(in, in + in_extent, 1) != in + in_extent;
  for (int s = 0; s < edge.slots && any; ++s) {
    const AxisMap& m = edge.channel[static_cast<size_t>(s)];
    int64_t last_group = -1;
    for (int64_t o = 0; o < in_extent; ++o) {
      if (!in[o])
        continue;
      switch (m.kind) {
      case MapKind::kAll:
        mark_range(0, pe);
        o = in_extent;
        break;
      case MapKind::kConvGroups:
        if (o / m.a != last_group) {
          last_group = o / m.a;
          mark_range(last_group * m.b, (last_group + 1) * m.b);
        }
        break;
      case MapKind::kShift: mark_range(o - m.a, o - m.a + 1); break;
      default: mark_range(o, o + 1); break;
      }
    }
  }
}

// Marks in `out` the producer positions that the consumer positions in `in` read on spatial
// axis `axis`, in O(in_extent + producer extent): a window's taps o·s − p + dil·t (t < k) are
// counted in a difference array along steps of dil, whatever the kernel extent.
void map_spatial(const Layer& consumer, const Edge& edge, int axis, const uint8_t* in,
                 int64_t in_extent, std::vector<uint8_t>& out) {
  const AxisMap& m = edge.axis[static_cast<size_t>(axis)];
  const int64_t pe = m.extent;
  out.assign(static_cast<size_t>(pe), 0);
  const size_t w = static_cast<size_t>(axis - 1);
  if (m.kind == MapKind::kWindow) {
    const int64_t dil = consumer.window.dilation[w];
    const int64_t k = consumer.window.kernel[w];
    std::vector<int64_t> diff(static_cast<size_t>(pe), 0);
    for (int64_t o = 0; o < in_extent; ++o) {
      if (!in[o])
        continue;
      // The taps inside [0, pe): t from t0 to t1 - 1.
      const int64_t base = o * m.a - m.b;
      const int64_t t0 = base >= 0 ? 0 : (-base + dil - 1) / dil;
      const int64_t t1 = base >= pe ? 0 : std::min(k, (pe - 1 - base) / dil + 1);
      if (t0 >= t1)
        continue;
      ++diff[static_cast<size_t>(base + t0 * dil)];
      if (base + t1 * dil < pe)
        --diff[static_cast<size_t>(base + t1 * dil)];
    }
    for (int64_t x = 0; x < pe; ++x) {
      if (x >= dil)
        diff[static_cast<size_t>(x)] += diff[static_cast<size_t>(x - dil)];
      out[static_cast<size_t>(x)] = diff[static_cast<size_t>(x)] > 0 ? 1 : 0;
    }
    return;
  }
  for (int64_t o = 0; o < in_extent; ++o) {
    if (!in[o])
      continue;
    int64_t x = o;
    if (m.kind == MapKind::kAll) {
      std::fill(out.begin(), out.end(), 1);
      return;
    }
    if (m.kind == MapKind::kUpNearest || m.kind == MapKind::kUpBilinear)
      x = o / m.a; // one tap of either mode: a subset of what is read
    if (x >= 0 && x < pe)
      out[static_cast<size_t>(x)] = 1;
  }
}

void map_positions(const Layer& consumer, const Edge& edge, int axis, const uint8_t* in,
                   int64_t in_extent, std::vector<uint8_t>& out) {
  if (axis == 0)
    map_channels(edge, in, in_extent, out);
  else
    map_spatial(consumer, edge, axis, in, in_extent, out);
}

// Positions kept in sets beyond which lower_bound falls back to its weaker bound: 16 MiB of
// sets, tens of milliseconds.
constexpr int64_t kMaxPositions = int64_t{1} << 24;

// Whether every edge maps axis a identically or wholly (the axis is then needed whole).
bool axis_is_full(const GroupGeometry& g, int a) {
  for (const Edge& e : g.edges) {
    const int64_t consumer_extent = extent(g, e.consumer, a);
    for (int k = 0; k < (a == 0 ? e.slots : 1); ++k) {
      const AxisMap& m =
          a == 0 ? e.channel[static_cast<size_t>(k)] : e.axis[static_cast<size_t>(a)];
      const bool same = m.kind == MapKind::kIdentity && m.extent == consumer_extent;
      if (!same && m.kind != MapKind::kAll)
        return false;
    }
  }
  return true;
}

// Whether layer i of the group (not its last) is a graph output: stored whole, as the last
// layer's output is (only layerwise runs such groups: core/group.h brick_blocker).
bool inner_output(const GroupGeometry& g, int i) {
  return i < g.layer_count - 1 && g.graph->is_output(g.layers[static_cast<size_t>(i)]->id);
}

// Empty position sets for every tensor but the outputs (the last layer's and any graph output
// of the group), which are whole; false (and no sets) when they would hold more than
// kMaxPositions.
bool start_sets(const GroupGeometry& g, Scratch& s) {
  const int L = g.layer_count;
  const int T = g.tensor_count();
  for (int a = 0; a < kAxes; ++a)
    s.full[static_cast<size_t>(a)] = axis_is_full(g, a);
  s.offset.assign(static_cast<size_t>(T) * 4, 0);
  int64_t total = 0;
  for (int t = 0; t < T; ++t)
    for (int a = 0; a < kAxes; ++a) {
      s.offset[static_cast<size_t>(t) * 4 + static_cast<size_t>(a)] = total;
      total += s.full[static_cast<size_t>(a)] ? 0 : extent(g, t, a);
    }
  if (total > kMaxPositions)
    return false;
  s.masks.assign(static_cast<size_t>(total), 0);
  s.volume.assign(static_cast<size_t>(T), -1.0);
  for (int i = 0; i < L; ++i) {
    if (i != L - 1 && !inner_output(g, i))
      continue;
    for (int a = 0; a < kAxes; ++a)
      if (!s.full[static_cast<size_t>(a)])
        std::fill_n(s.mask(i, a), extent(g, i, a), 1);
    s.volume[static_cast<size_t>(i)] =
        static_cast<double>(extent(g, i, 0) * extent(g, i, 1) * extent(g, i, 2) * extent(g, i, 3));
  }
  return true;
}

// Walks the layers backwards: each needed layer maps its set through its edges, and a
// producer keeps the largest of the sets its readers map to it.
void propagate_sets(const GroupGeometry& g, Scratch& s) {
  for (int i = g.layer_count - 1; i >= 0; --i) {
    if (s.volume[static_cast<size_t>(i)] <= 0)
      continue;
    for (int e = g.edge_begin[static_cast<size_t>(i)]; e < g.edge_begin[static_cast<size_t>(i) + 1];
         ++e) {
      const Edge& edge = g.edges[static_cast<size_t>(e)];
      double vol = 1;
      for (int a = 0; a < kAxes; ++a) {
        if (s.full[static_cast<size_t>(a)]) {
          vol *= static_cast<double>(extent(g, edge.producer, a));
          continue;
        }
        std::vector<uint8_t>& image = s.image[static_cast<size_t>(a)];
        map_positions(*g.layers[static_cast<size_t>(i)], edge, a, s.mask(i, a), extent(g, i, a),
                      image);
        vol *= static_cast<double>(std::count(image.begin(), image.end(), 1));
      }
      const int p = edge.producer;
      if (vol > s.volume[static_cast<size_t>(p)]) {
        s.volume[static_cast<size_t>(p)] = vol;
        for (int a = 0; a < kAxes; ++a)
          if (!s.full[static_cast<size_t>(a)])
            std::copy(s.image[static_cast<size_t>(a)].begin(),
                      s.image[static_cast<size_t>(a)].end(), s.mask(p, a));
      }
    }
  }
}

// FLOPs of the needed positions, and DRAM bytes: the needed parts of the external inputs,
// the weights of the needed channels, the outputs.
LowerBound compulsory_work(const GroupGeometry& g, Scratch& s) {
  const int L = g.layer_count;
  const double n = static_cast<double>(g.batch);
  const double dt = g.dtype_bytes;
  LowerBound lb;
  for (int t = 0; t < g.tensor_count(); ++t) {
    const double v = std::max(0.0, s.volume[static_cast<size_t>(t)]);
    if (t < L) {
      const size_t i = static_cast<size_t>(t);
      lb.flops += n * v * g.flops_per_point[i];
      if (v > 0) {
        const double needed =
            s.full[0]
                ? static_cast<double>(extent(g, t, 0))
                : static_cast<double>(std::count(s.mask(t, 0), s.mask(t, 0) + extent(g, t, 0), 1));
        lb.dram_bytes += g.params[i] * needed / static_cast<double>(extent(g, t, 0)) * dt;
      }
    } else {
      lb.dram_bytes += n * v * dt;
    }
  }
  for (int i = 0; i < L; ++i)
    if (i == L - 1 || inner_output(g, i))
      lb.dram_bytes += g.numel(i) * dt;
  return lb;
}

// The weaker bound of a group too large for sets: every output element is needed, so the
// outputs, their layers' weights (each output channel's own) and their FLOPs are.
LowerBound fallback_bound(const GroupGeometry& g) {
  LowerBound lb;
  for (int i = 0; i < g.layer_count; ++i) {
    if (i != g.layer_count - 1 && !inner_output(g, i))
      continue;
    lb.flops += g.numel(i) * g.flops_per_point[static_cast<size_t>(i)];
    lb.dram_bytes += (g.numel(i) + g.params[static_cast<size_t>(i)]) * g.dtype_bytes;
  }
  return lb;
}

} // namespace

LowerBound CostModel::lower_bound(const Graph& graph, const Group& group) const {
  thread_local GroupGeometry geometry;
  thread_local Scratch s;
  Candidate c;
  c.group = group;
  detail::build_geometry(graph, c, geometry);
  LowerBound lb = fallback_bound(geometry);
  if (start_sets(geometry, s)) {
    propagate_sets(geometry, s);
    lb = compulsory_work(geometry, s);
  }
  // The spec's DRAM bandwidth: the peak, or on a calibrated spec the achieved bandwidth it
  // measured, which no prediction exceeds either (memory.cpp resolve takes it as it is).
  const double t_mem = lb.dram_bytes / (gpu_.dram_bandwidth_gbs * 1e9);
  const double t_flop = lb.flops / detail::peak_flops(gpu_, graph.dtype());
  lb.time_ms = std::max(t_mem, t_flop) * 1e3;
  return lb;
}

} // namespace brickdl::model
