// The lower bound of a group: what its output depends on, moved once and computed once.
//
// Walks the group backwards at element (not brick) granularity, one axis at a time: the set
// of positions of each tensor the output depends on is kept as a product of per-axis sets.
// For a tensor read by several layers, the largest of their product sets is kept, which is a
// subset of what is truly needed, so the result stays a lower bound of every strategy.
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

  uint8_t* mask(int t, int a) {
    return &masks[static_cast<size_t>(offset[static_cast<size_t>(t) * 4 + static_cast<size_t>(a)])];
  }
};

// Extent of tensor t along axis a.
int64_t extent(const GroupGeometry& g, int t, int a) {
  return g.tensors[static_cast<size_t>(t)].extent[static_cast<size_t>(a)];
}

// Marks in `out` the producer positions that the consumer positions in `in` read on one axis.
void map_positions(const Layer& consumer, const Edge& edge, int axis, const uint8_t* in,
                   int64_t in_extent, std::vector<uint8_t>& out) {
  const int64_t pe =
      axis == 0 ? edge.channel[0].extent : edge.axis[static_cast<size_t>(axis)].extent;
  out.assign(static_cast<size_t>(pe), 0);
  const auto mark = [&](int64_t x) {
    if (x >= 0 && x < pe)
      out[static_cast<size_t>(x)] = 1;
  };
  if (axis == 0) {
    for (int s = 0; s < edge.slots; ++s) {
      const AxisMap& m = edge.channel[static_cast<size_t>(s)];
      for (int64_t o = 0; o < in_extent; ++o) {
        if (!in[o])
          continue;
        switch (m.kind) {
        case MapKind::kAll: std::fill(out.begin(), out.end(), 1); break;
        case MapKind::kConvGroups:
          for (int64_t x = (o / m.a) * m.b; x < (o / m.a + 1) * m.b; ++x)
            mark(x);
          break;
        case MapKind::kShift: mark(o - m.a); break;
        default: mark(o); break;
        }
      }
    }
    return;
  }
  const AxisMap& m = edge.axis[static_cast<size_t>(axis)];
  const size_t w = static_cast<size_t>(axis - 1);
  for (int64_t o = 0; o < in_extent; ++o) {
    if (!in[o])
      continue;
    switch (m.kind) {
    case MapKind::kWindow:
      for (int t = 0; t < consumer.window.kernel[w]; ++t)
        mark(o * m.a - m.b + int64_t{consumer.window.dilation[w]} * t);
      break;
    case MapKind::kUpNearest:
    case MapKind::kUpBilinear:
      mark(o / m.a); // one tap of either mode: a subset of what is read
      break;
    case MapKind::kAll: std::fill(out.begin(), out.end(), 1); break;
    default: mark(o); break;
    }
  }
}

// Empty position sets for every tensor but the last layer's, which is whole.
void start_sets(const GroupGeometry& g, Scratch& s) {
  const int L = g.layer_count;
  const int T = g.tensor_count();
  s.offset.assign(static_cast<size_t>(T) * 4, 0);
  int64_t total = 0;
  for (int t = 0; t < T; ++t)
    for (int a = 0; a < kAxes; ++a) {
      s.offset[static_cast<size_t>(t) * 4 + static_cast<size_t>(a)] = total;
      total += extent(g, t, a);
    }
  s.masks.assign(static_cast<size_t>(total), 0);
  s.volume.assign(static_cast<size_t>(T), -1.0);
  for (int a = 0; a < kAxes; ++a)
    std::fill_n(s.mask(L - 1, a), extent(g, L - 1, a), 1);
  s.volume[static_cast<size_t>(L - 1)] = static_cast<double>(
      extent(g, L - 1, 0) * extent(g, L - 1, 1) * extent(g, L - 1, 2) * extent(g, L - 1, 3));
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
        std::vector<uint8_t>& image = s.image[static_cast<size_t>(a)];
        map_positions(*g.layers[static_cast<size_t>(i)], edge, a, s.mask(i, a), extent(g, i, a),
                      image);
        vol *= static_cast<double>(std::count(image.begin(), image.end(), 1));
      }
      const int p = edge.producer;
      if (vol > s.volume[static_cast<size_t>(p)]) {
        s.volume[static_cast<size_t>(p)] = vol;
        for (int a = 0; a < kAxes; ++a)
          std::copy(s.image[static_cast<size_t>(a)].begin(), s.image[static_cast<size_t>(a)].end(),
                    s.mask(p, a));
      }
    }
  }
}

// FLOPs of the needed positions, and DRAM bytes: the needed parts of the external inputs,
// the weights of the needed channels, the output.
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
            static_cast<double>(std::count(s.mask(t, 0), s.mask(t, 0) + extent(g, t, 0), 1));
        lb.dram_bytes += g.params[i] * needed / static_cast<double>(extent(g, t, 0)) * dt;
      }
    } else {
      lb.dram_bytes += n * v * dt;
    }
  }
  lb.dram_bytes += g.numel(L - 1) * dt;
  return lb;
}

} // namespace

LowerBound CostModel::lower_bound(const Graph& graph, const Group& group) const {
  thread_local GroupGeometry geometry;
  thread_local Scratch s;
  Candidate c;
  c.group = group;
  detail::build_geometry(graph, c, geometry);
  start_sets(geometry, s);
  propagate_sets(geometry, s);
  LowerBound lb = compulsory_work(geometry, s);
  const double t_mem = lb.dram_bytes / (gpu_.dram_bandwidth_gbs * 1e9);
  const double t_flop = lb.flops / detail::peak_flops(gpu_, graph.dtype());
  lb.time_ms = std::max(t_mem, t_flop) * 1e3;
  return lb;
}

} // namespace brickdl::model
