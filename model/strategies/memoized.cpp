// Memoized bricks: every needed brick of every layer computed once, intermediates stored in
// global memory and looked up by the bricks that read them.
//
// The set of computed bricks of a layer is kept as a union of boxes: a box is a product of
// per-axis sets of brick indices (bit masks), one per axis (channel block, d, h, w). The last
// layer's set is the full box. A consumer box maps to a producer box (per axis, the bricks
// touched by the needs of the box's bricks), so a layer read by one consumer stays one box and
// every sum over it factors into per-axis sums. Layers read by several consumers may get
// several boxes; when they do not nest, the counts enumerate a bitmap of the union (exact, and
// rare: it takes different consumers skipping different bricks).
#include <algorithm>
#include <bit>
#include <cmath>

#include "model/strategies/strategies.h"

namespace brickdl::model::detail {

namespace {

struct Box {
  int layer = 0;
  bool dead = false;
  int next = -1;                // next box of the same layer
  std::array<int32_t, 4> off{}; // first word of each axis mask in Scratch::words
};

// One stream of loads (a layer reading a tensor) with its reuse split.
struct Stream {
  int tensor = 0;
  ReuseSplit bytes;
  ReuseSplit lookups; // intermediate producers only
};

// Per-edge, per-axis sums over a box.
struct EdgeAxis {
  int64_t need_sum = 0, need_uni = 0, need_max = 0; // elements of the producer
  int64_t touch_sum = 0, touch_uni = 0;             // producer bricks
};

struct Scratch {
  std::vector<uint64_t> words;
  std::vector<Box> boxes;
  std::vector<int> head; // per layer: first box
  std::vector<int> live;
  std::vector<int> images;         // per edge of one layer: the producer box being built
  std::vector<int64_t> js;         // brick indices of a box along one axis
  std::vector<EdgeAxis> edge_axis; // edges of one layer × 4
  std::vector<Stream> streams;
  std::vector<double> first_of_input; // per external input: largest first touch
  std::vector<double> loads, touches; // per edge of one layer: elements, producer bricks
  std::vector<uint8_t> bitmap;
  std::vector<double> table;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

int64_t words_for(int64_t bits) {
  return (bits + 63) / 64;
}

class BoxOps {
public:
  BoxOps(const GroupGeometry& g, Scratch& s) : g_(g), s_(s) {}

  int64_t grid(int layer, int axis) const {
    return g_.tensors[static_cast<size_t>(layer)].grid[static_cast<size_t>(axis)];
  }
  uint64_t* mask(int box, int axis) {
    return &s_.words[static_cast<size_t>(
        s_.boxes[static_cast<size_t>(box)].off[static_cast<size_t>(axis)])];
  }
  const uint64_t* mask(int box, int axis) const {
    return &s_.words[static_cast<size_t>(
        s_.boxes[static_cast<size_t>(box)].off[static_cast<size_t>(axis)])];
  }

  // A new box of `layer`, empty or full, linked at the head of the layer's list.
  int make(int layer, bool full) {
    Box b;
    b.layer = layer;
    for (int a = 0; a < kAxes; ++a) {
      b.off[static_cast<size_t>(a)] = static_cast<int32_t>(s_.words.size());
      const int64_t bits = grid(layer, a);
      const int64_t nw = words_for(bits);
      for (int64_t w = 0; w < nw; ++w) {
        uint64_t v = 0;
        if (full) {
          const int64_t rem = bits - w * 64;
          v = rem >= 64 ? ~uint64_t{0} : (uint64_t{1} << rem) - 1;
        }
        s_.words.push_back(v);
      }
    }
    b.next = s_.head[static_cast<size_t>(layer)];
    s_.boxes.push_back(b);
    const int id = static_cast<int>(s_.boxes.size()) - 1;
    s_.head[static_cast<size_t>(layer)] = id;
    return id;
  }

  bool subset(int a_box, int b_box) const {
    const int layer = s_.boxes[static_cast<size_t>(a_box)].layer;
    for (int a = 0; a < kAxes; ++a) {
      const uint64_t* x = mask(a_box, a);
      const uint64_t* y = mask(b_box, a);
      for (int64_t w = 0; w < words_for(grid(layer, a)); ++w)
        if (x[w] & ~y[w])
          return false;
    }
    return true;
  }

  // Calls f(j) for every brick index j set in the box along `axis`, ascending.
  template <class F> void for_each(int box, int axis, F&& f) const {
    const uint64_t* m = mask(box, axis);
    const int64_t nw = words_for(grid(s_.boxes[static_cast<size_t>(box)].layer, axis));
    for (int64_t w = 0; w < nw; ++w) {
      uint64_t x = m[w];
      while (x) {
        f(w * 64 + std::countr_zero(x));
        x &= x - 1;
      }
    }
  }

  void kill(int box) { s_.boxes[static_cast<size_t>(box)].dead = true; }

  static void set_range(uint64_t* m, int64_t lo, int64_t hi) {
    for (int64_t j = lo; j <= hi; ++j)
      m[j >> 6] |= uint64_t{1} << (j & 63);
  }

private:
  const GroupGeometry& g_;
  Scratch& s_;
};

// Drops boxes contained in another one of the same layer; returns the live ones in s.live.
void normalize(BoxOps& ops, Scratch& s, int layer) {
  s.live.clear();
  for (int b = s.head[static_cast<size_t>(layer)]; b >= 0; b = s.boxes[static_cast<size_t>(b)].next)
    if (!s.boxes[static_cast<size_t>(b)].dead)
      s.live.push_back(b);
  for (size_t x = 0; x < s.live.size(); ++x) {
    for (size_t y = 0; y < s.live.size(); ++y) {
      if (x == y || s.boxes[static_cast<size_t>(s.live[y])].dead)
        continue;
      if (ops.subset(s.live[x], s.live[y])) {
        s.boxes[static_cast<size_t>(s.live[x])].dead = true;
        break;
      }
    }
  }
  s.live.erase(std::remove_if(s.live.begin(), s.live.end(),
                              [&](int b) { return s.boxes[static_cast<size_t>(b)].dead; }),
               s.live.end());
}

// Per axis: bricks in a box and the sum of their (clipped) extents.
struct BoxSums {
  std::array<int64_t, 4> count{}, extent{};
};

// Totals over the computed bricks of one layer (all images); per edge in Scratch::loads
// (elements needed) and Scratch::touches (producer bricks touched).
struct LayerTotals {
  double bricks = 0;
  double volume = 0;         // elements computed (clipped)
  double block_channels = 0; // Σ channels of each brick's block
};

// One memoized prediction's walk over the layers, last first, and what the layers add up to
// for the footprint, DRAM and time that follow.
struct Walk {
  const GroupGeometry& g;
  Scratch& s;
  BoxOps ops;
  std::array<int, kAxes> alias; // spatial axes equal to an earlier one may reuse its sums
  double smem_bytes = 0;        // the most one brick of some layer stages
  double smem_budget = 0;       // the target's shared memory per block, in 4-byte elements
  const StrategyContext* ctx = nullptr;
  int wgmma_n = 0;           // the kernel's wgmma n tile (kernel_wgmma_n), 0: none
  double weights_unique = 0; // bytes of the weights the computed bricks use
  double claims = 0;         // intermediate bricks computed
  double bricks_total = 0;   // bricks computed
  // The layer being counted and its edges, [e0, e0 + ne) in GroupGeometry::edges.
  int layer = 0, e0 = 0, ne = 0;
};

// Axis a of a box takes the sums of axis b (an earlier axis like it, with the same bricks in
// the box), and the producer images along a copy theirs along b.
void copy_axis_sums(Walk& w, const int* images, int a, int b, BoxSums& r) {
  const GroupGeometry& g = w.g;
  const size_t as = static_cast<size_t>(a);
  const int e0 = w.e0, e1 = w.e0 + w.ne;
  r.count[as] = r.count[static_cast<size_t>(b)];
  r.extent[as] = r.extent[static_cast<size_t>(b)];
  for (int e = e0; e < e1; ++e) {
    const size_t k = static_cast<size_t>(e - e0) * 4;
    w.s.edge_axis[k + as] = w.s.edge_axis[k + static_cast<size_t>(b)];
    if (images && images[e - e0] >= 0) {
      const int p = g.edges[static_cast<size_t>(e)].producer;
      const int64_t pw = words_for(g.tensors[static_cast<size_t>(p)].grid[as]);
      std::copy(w.ops.mask(images[e - e0], b), w.ops.mask(images[e - e0], b) + pw,
                w.ops.mask(images[e - e0], a));
    }
  }
}

// One edge's needs along axis a over the consumer bricks js (ascending, brick size bb, last
// element `last`); pb is the producer's brick size. Marks the producer bricks touched in
// `image` when given. Needs grow with j (every map is monotone), so unions are running maxima.
EdgeAxis sum_edge_axis(const Edge& edge, int a, const std::vector<int64_t>& js, int64_t bb,
                       int64_t last, int64_t pb, uint64_t* image) {
  const double inv_pb = 1.0 / static_cast<double>(pb);
  EdgeAxis acc;
  int64_t hi = -1, touch_hi = -1;
  for (int64_t j : js) {
    const Interval need = edge.need(a, {j * bb, std::min(j * bb + bb - 1, last)});
    if (need.empty())
      continue;
    const int64_t len = need.hi - need.lo + 1;
    acc.need_sum += len;
    acc.need_max = std::max(acc.need_max, len);
    acc.need_uni += std::max<int64_t>(0, need.hi - std::max(need.lo, hi + 1) + 1);
    hi = std::max(hi, need.hi);
    const int64_t b0 = div_by(need.lo, pb, inv_pb), b1 = div_by(need.hi, pb, inv_pb);
    acc.touch_sum += b1 - b0 + 1;
    const int64_t t0 = std::max(b0, touch_hi + 1);
    if (b1 >= t0) {
      acc.touch_uni += b1 - t0 + 1;
      if (image)
        BoxOps::set_range(image, t0, b1);
    }
    touch_hi = std::max(touch_hi, b1);
  }
  return acc;
}

// Sums along axis a over the box's bricks: their count and clipped extents, and per edge the
// needs (Scratch::edge_axis), marking the producer bricks touched in `images` when given.
void sum_axis(Walk& w, int box, const int* images, int a, BoxSums& r) {
  const GroupGeometry& g = w.g;
  Scratch& s = w.s;
  const size_t as = static_cast<size_t>(a);
  const TensorGrid& tg = g.tensors[static_cast<size_t>(w.layer)];
  const int e0 = w.e0, e1 = w.e0 + w.ne;
  s.js.clear();
  w.ops.for_each(box, a, [&](int64_t j) { s.js.push_back(j); });
  const int64_t bb = tg.brick[as], last = tg.extent[as] - 1;
  int64_t extent = 0;
  for (int64_t j : s.js)
    extent += std::min(j * bb + bb - 1, last) - j * bb + 1;
  r.count[as] = static_cast<int64_t>(s.js.size());
  r.extent[as] = extent;
  for (int e = e0; e < e1; ++e) {
    const Edge& edge = g.edges[static_cast<size_t>(e)];
    const int64_t pb = g.tensors[static_cast<size_t>(edge.producer)].brick[as];
    uint64_t* image = (images && images[e - e0] >= 0) ? w.ops.mask(images[e - e0], a) : nullptr;
    s.edge_axis[static_cast<size_t>(e - e0) * 4 + as] =
        sum_edge_axis(edge, a, s.js, bb, last, pb, image);
  }
}

// Kills the images of the edges that need nothing along some axis: no brick reads the
// producer.
void kill_unneeded_images(Walk& w, const int* images) {
  for (int k = 0; k < w.ne; ++k) {
    if (images[k] < 0)
      continue;
    for (int a = 0; a < kAxes; ++a)
      if (w.s.edge_axis[static_cast<size_t>(k) * 4 + static_cast<size_t>(a)].touch_sum == 0) {
        w.ops.kill(images[k]);
        break;
      }
  }
}

// Sums over one box of the layer: per axis brick extents, and per edge the needs. When
// `images` is given, images[k] (a box id, or -1 for an external producer) receives the
// producer bricks that edge k's needs touch, and is killed when the box needs nothing.
BoxSums box_sums(Walk& w, int box, const int* images) {
  BoxSums r;
  const TensorGrid& tg = w.g.tensors[static_cast<size_t>(w.layer)];
  w.s.edge_axis.resize(static_cast<size_t>(w.ne) * 4);
  for (int a = 0; a < kAxes; ++a) {
    // An axis like an earlier one, with the same bricks in the box, has the same sums.
    const int b = w.alias[static_cast<size_t>(a)];
    const int64_t nw = words_for(tg.grid[static_cast<size_t>(a)]);
    if (b != a && std::equal(w.ops.mask(box, a), w.ops.mask(box, a) + nw, w.ops.mask(box, b))) {
      copy_axis_sums(w, images, a, b, r);
    } else {
      sum_axis(w, box, images, a, r);
    }
  }
  if (images)
    kill_unneeded_images(w, images);
  return r;
}

// The producer box that a consumer box needs through `edge`; -1 when it needs nothing.
int image(const GroupGeometry& g, BoxOps& ops, int box, const Edge& edge) {
  const TensorGrid& cg = g.tensors[static_cast<size_t>(edge.consumer)];
  const TensorGrid& pg = g.tensors[static_cast<size_t>(edge.producer)];
  const int img = ops.make(edge.producer, false);
  for (int a = 0; a < kAxes; ++a) {
    bool any = false;
    uint64_t* m = ops.mask(img, a);
    const int64_t pb = pg.brick[static_cast<size_t>(a)];
    ops.for_each(box, a, [&](int64_t j) {
      const Interval need = edge.need(a, cg.brick_interval(a, j));
      if (need.empty())
        return;
      any = true;
      BoxOps::set_range(m, div32(need.lo, pb), div32(need.hi, pb));
    });
    if (!any) {
      // Some axis needs nothing: no brick of the box reads the producer.
      ops.kill(img);
      return -1;
    }
  }
  return img;
}

// Empties the scratch space and starts the set of the last layer: the full box.
void start_walk(Walk& w) {
  Scratch& s = w.s;
  s.words.clear();
  s.boxes.clear();
  s.head.assign(static_cast<size_t>(w.g.layer_count), -1);
  s.streams.clear();
  s.first_of_input.assign(static_cast<size_t>(w.g.tensor_count()), 0.0);
  w.ops.make(w.g.layer_count - 1, true);
}

// One live box of the layer: starts an empty image box per intermediate producer
// (Scratch::images, -1 for external ones) for box_sums to fill; returns the live box.
int start_images(Walk& w) {
  const GroupGeometry& g = w.g;
  w.s.images.assign(static_cast<size_t>(w.ne), -1);
  for (int k = 0; k < w.ne; ++k)
    if (g.edges[static_cast<size_t>(w.e0 + k)].producer < g.layer_count)
      w.s.images[static_cast<size_t>(k)] =
          w.ops.make(g.edges[static_cast<size_t>(w.e0 + k)].producer, false);
  return w.s.live[0];
}

// Several live boxes of the layer: adds each one's image to every intermediate producer, and
// returns a box outside the set whose per-axis masks project the union, to sum over.
// (s.boxes grows: hold box ids, never references.)
int project_union(Walk& w) {
  const GroupGeometry& g = w.g;
  Scratch& s = w.s;
  for (int box : s.live)
    for (int e = w.e0; e < w.e0 + w.ne; ++e) {
      const Edge& edge = g.edges[static_cast<size_t>(e)];
      if (edge.producer < g.layer_count)
        image(g, w.ops, box, edge);
    }
  const int proj = w.ops.make(w.layer, false);
  s.boxes[static_cast<size_t>(proj)].dead = true; // not a member of the set
  const TensorGrid& tg = g.tensors[static_cast<size_t>(w.layer)];
  for (int box : s.live)
    for (int a = 0; a < kAxes; ++a) {
      const int64_t nw = words_for(tg.grid[static_cast<size_t>(a)]);
      for (int64_t word = 0; word < nw; ++word)
        w.ops.mask(proj, a)[word] |= w.ops.mask(box, a)[word];
    }
  return proj;
}

// n · Π_a of one edge's per-axis need sums (elements loaded) or touch sums (producer bricks).
double edge_total(double n, const EdgeAxis* x, bool touch) {
  double v = n;
  for (int a = 0; a < kAxes; ++a)
    v *= static_cast<double>(touch ? x[a].touch_sum : x[a].need_sum);
  return v;
}

// Totals over one box of the layer: every sum factors into per-axis sums.
// Elements (volume, loads) count every image; bricks, their weight reads and lookups count
// batch blocks: one brick is computed for the unit's images at once.
LayerTotals box_totals(Walk& w, const BoxSums& bs) {
  const double n = static_cast<double>(w.g.batch);
  const double nu = static_cast<double>(w.g.batch_units);
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  LayerTotals t;
  t.bricks = nu * d(bs.count[0]) * d(bs.count[1]) * d(bs.count[2]) * d(bs.count[3]);
  t.volume = n * d(bs.extent[0]) * d(bs.extent[1]) * d(bs.extent[2]) * d(bs.extent[3]);
  t.block_channels = nu * d(bs.extent[0]) * d(bs.count[1]) * d(bs.count[2]) * d(bs.count[3]);
  const size_t ne = static_cast<size_t>(w.ne);
  w.s.loads.resize(ne);
  w.s.touches.resize(ne);
  for (size_t k = 0; k < ne; ++k) {
    w.s.loads[k] = edge_total(n, &w.s.edge_axis[k * 4], false);
    w.s.touches[k] = edge_total(nu, &w.s.edge_axis[k * 4], true);
  }
  return t;
}

// Scratch::bitmap over the layer's brick grid: 1 for the bricks in some live box.
void mark_union(Walk& w) {
  Scratch& s = w.s;
  const TensorGrid& tg = w.g.tensors[static_cast<size_t>(w.layer)];
  const int64_t gd = tg.grid[1], gh = tg.grid[2], gw = tg.grid[3];
  s.bitmap.assign(static_cast<size_t>(tg.grid[0] * gd * gh * gw), 0);
  for (int box : s.live)
    w.ops.for_each(box, 0, [&](int64_t c) {
      w.ops.for_each(box, 1, [&](int64_t d) {
        w.ops.for_each(box, 2, [&](int64_t h) {
          w.ops.for_each(box, 3, [&](int64_t x) {
            s.bitmap[static_cast<size_t>(((c * gd + d) * gh + h) * gw + x)] = 1;
          });
        });
      });
    });
}

// Per-axis rows over a layer's brick grid, in Scratch::table: the brick's extent, then per
// edge its need length and the producer bricks the need touches.
struct AxisTables {
  std::array<int64_t, 4> base{}; // first row of each axis
  int64_t width = 1;             // doubles per row: 1 + 2 · edges
  const double* row(const Scratch& s, int a, int64_t j) const {
    return &s.table[static_cast<size_t>(base[static_cast<size_t>(a)] + j * width)];
  }
};

// One row of the tables: brick `out` of the layer along axis a.
void fill_row(const Walk& w, int a, Interval out, double* row) {
  const GroupGeometry& g = w.g;
  row[0] = static_cast<double>(out.size());
  for (int k = 0; k < w.ne; ++k) {
    const Edge& edge = g.edges[static_cast<size_t>(w.e0 + k)];
    const Interval need = edge.need(a, out);
    const int64_t pb = g.tensors[static_cast<size_t>(edge.producer)].brick[static_cast<size_t>(a)];
    row[1 + 2 * k] = static_cast<double>(need.size());
    row[2 + 2 * k] =
        need.empty() ? 0.0 : static_cast<double>(div32(need.hi, pb) - div32(need.lo, pb) + 1);
  }
}

// Fills the tables for the layer.
AxisTables fill_axis_tables(Walk& w) {
  const TensorGrid& tg = w.g.tensors[static_cast<size_t>(w.layer)];
  AxisTables tab;
  tab.width = 1 + 2 * w.ne;
  int64_t total = 0;
  for (int a = 0; a < kAxes; ++a) {
    tab.base[static_cast<size_t>(a)] = total;
    total += tg.grid[static_cast<size_t>(a)] * tab.width;
  }
  w.s.table.assign(static_cast<size_t>(total), 0.0);
  for (int a = 0; a < kAxes; ++a)
    for (int64_t j = 0; j < tg.grid[static_cast<size_t>(a)]; ++j)
      fill_row(w, a, tg.brick_interval(a, j),
               &w.s.table[static_cast<size_t>(tab.base[static_cast<size_t>(a)] + j * tab.width)]);
  return tab;
}

// Totals over the union of several boxes of the layer: the products of the table rows summed
// over the bricks in the bitmap (exact, and rare).
LayerTotals union_totals(Walk& w) {
  Scratch& s = w.s;
  mark_union(w);
  const AxisTables tab = fill_axis_tables(w);
  const TensorGrid& tg = w.g.tensors[static_cast<size_t>(w.layer)];
  const int64_t gc = tg.grid[0], gd = tg.grid[1], gh = tg.grid[2], gw = tg.grid[3];
  const int ne = w.ne;
  const double n = static_cast<double>(w.g.batch);
  s.loads.assign(static_cast<size_t>(ne), 0.0);
  s.touches.assign(static_cast<size_t>(ne), 0.0);
  double* ld = s.loads.data();
  double* tc = s.touches.data();
  LayerTotals t;
  for (int64_t c = 0; c < gc; ++c)
    for (int64_t d = 0; d < gd; ++d)
      for (int64_t h = 0; h < gh; ++h)
        for (int64_t x = 0; x < gw; ++x) {
          if (!s.bitmap[static_cast<size_t>(((c * gd + d) * gh + h) * gw + x)])
            continue;
          const double* rc = tab.row(s, 0, c);
          const double* rd = tab.row(s, 1, d);
          const double* rh = tab.row(s, 2, h);
          const double* rw = tab.row(s, 3, x);
          t.bricks += 1;
          t.volume += rc[0] * rd[0] * rh[0] * rw[0];
          t.block_channels += rc[0];
          for (int k = 0; k < ne; ++k) {
            ld[k] += rc[1 + 2 * k] * rd[1 + 2 * k] * rh[1 + 2 * k] * rw[1 + 2 * k];
            tc[k] += rc[2 + 2 * k] * rd[2 + 2 * k] * rh[2 + 2 * k] * rw[2 + 2 * k];
          }
        }
  const double nu = static_cast<double>(w.g.batch_units); // as in box_totals
  t.bricks *= nu;
  t.volume *= n;
  t.block_channels *= nu;
  for (int k = 0; k < ne; ++k) {
    ld[k] *= n;
    tc[k] *= nu;
  }
  return t;
}

// The layer's bricks, FLOPs and weights; for an intermediate layer, its stores and claims.
void add_layer_counts(Walk& w, const BoxSums& bs, const LayerTotals& t, Prediction& p) {
  const GroupGeometry& g = w.g;
  const int i = w.layer;
  const size_t is = static_cast<size_t>(i);
  const double dt = g.dtype_bytes;
  p.bricks_per_layer[is] = to_count(t.bricks);
  w.bricks_total += t.bricks;
  p.flops += t.volume * g.flops_per_point[is];
  if (!merged_conv_on_tensor_cores(g, i, merged_block_channels(g, i, false)))
    p.fma_flops += t.volume * g.flops_per_point[is];
  const double channels = static_cast<double>(g.tensors[is].extent[0]);
  p.bytes_weight += g.params[is] * t.block_channels / channels * dt;
  w.weights_unique += g.params[is] * static_cast<double>(bs.extent[0]) / channels * dt;
  if (i < g.layer_count - 1) {
    p.bytes_intermediate_store += t.volume * dt;
    w.claims += t.bricks;
  }
}

// The reuse split of one edge's needs (touch: producer bricks touched), axes fastest first.
ReuseSplit edge_split(const EdgeAxis* x, bool touch, const std::array<double, 4>& distance,
                      double scale) {
  const auto sum = [&](int a) {
    return static_cast<double>(touch ? x[a].touch_sum : x[a].need_sum);
  };
  const auto uni = [&](int a) {
    return static_cast<double>(touch ? x[a].touch_uni : x[a].need_uni);
  };
  return split_reuse({sum(0), sum(3), sum(2), sum(1)}, {uni(0), uni(3), uni(2), uni(1)}, distance,
                     scale);
}

// Rescales the re-read parts of r to first + re-reads = total.
void rescale_rereads(ReuseSplit& r, double total) {
  double rr = 0;
  for (double v : r.reread)
    rr += v;
  const double want = std::max(0.0, total - r.first);
  if (rr > 0) {
    for (double& v : r.reread)
      v *= want / rr;
  }
}

// One edge's stream: its loads (and lookups, from an intermediate producer) added to p and
// split by reuse. The split uses the box (or the projection of the union), so with several
// boxes its re-read parts are rescaled to the exact totals `loads` and `touches`.
Stream edge_stream(Walk& w, const Edge& edge, const EdgeAxis* x, double loads, double touches,
                   const std::array<double, 4>& distance, bool one_box, Prediction& p) {
  const double n = static_cast<double>(w.g.batch);
  const double dt = w.g.dtype_bytes;
  const bool internal = edge.producer < w.g.layer_count;
  (internal ? p.bytes_intermediate_load : p.bytes_input) += loads * dt;
  Stream st;
  st.tensor = edge.producer;
  st.bytes = edge_split(x, false, distance, n * dt);
  if (internal) {
    p.memo_lookups += touches;
    st.lookups = edge_split(x, true, distance, static_cast<double>(w.g.batch_units));
  }
  if (!one_box) {
    rescale_rereads(st.bytes, loads * dt);
    if (internal)
      rescale_rereads(st.lookups, touches);
  }
  if (!internal) {
    double& f = w.s.first_of_input[static_cast<size_t>(edge.producer)];
    f = std::max(f, st.bytes.first);
  }
  return st;
}

// A window layer stages a brick's whole input region: (e − 1)·s + dil·(k − 1) + 1 per
// axis for a brick of extent e (clamped to the tensor), unclipped, as a kernel sizes
// its buffer for any brick; channels: the most any of its channel blocks reads.
double staged_elements(const TensorGrid& tg, const Edge& edge, const EdgeAxis* x) {
  double region = static_cast<double>(x[0].need_max);
  for (int a = 1; a < kAxes; ++a) {
    const size_t as = static_cast<size_t>(a);
    const AxisMap& m = edge.axis[as];
    region *= static_cast<double>((std::min(tg.brick[as], tg.extent[as]) - 1) * m.a + m.c + 1);
  }
  return region;
}

// A layer's brick positions for the unit's images (codegen: nb × bext), as kernel_wgmma_n's box.
auto memo_box(const GroupGeometry& g) {
  return [&g](int i) {
    const TensorGrid& tg = g.tensors[static_cast<size_t>(i)];
    int64_t v = g.batch_block;
    for (size_t a = 1; a < static_cast<size_t>(kAxes); ++a)
      v *= std::min(tg.brick[a], tg.extent[a]);
    return v;
  };
}

// What a window layer's brick holds in shared memory for the unit's batch block of images:
// its staged input (`staged` elements per image over `channels`), or, streamed (core/group.h
// memoized_stream_chunk, within `budget` elements), the kStreamBuffers chunk buffers plus the
// layer's cb x brick accumulator (`acc_elements`, the unit's); `passes`: the streamed passes
// over the accumulator (ceil of channels / chunk), 1 when staged whole.
double staged_streamed(const GroupGeometry& g, int i, double staged, double channels, double budget,
                       double& passes, double& acc_elements) {
  const size_t is = static_cast<size_t>(i);
  const TensorGrid& tg = g.tensors[is];
  staged *= static_cast<double>(g.batch_block);
  double acc = static_cast<double>(tg.brick[0] * g.batch_block);
  for (size_t a = 1; a < static_cast<size_t>(kAxes); ++a)
    acc *= static_cast<double>(std::min(tg.brick[a], tg.extent[a]));
  const int chunk = memoized_stream_chunk(*g.layers[is], static_cast<int64_t>(channels),
                                          static_cast<int64_t>(staged / channels),
                                          static_cast<int64_t>(acc), static_cast<int64_t>(budget));
  passes = chunk == 0 ? 1.0 : std::ceil(channels / chunk);
  acc_elements = acc;
  if (chunk == 0)
    return staged;
  return staged / channels * chunk * kStreamBuffers + acc;
}

// Loads, lookups and their reuse per edge of the layer (Scratch::streams), and what one
// brick of the layer stages in shared memory (Walk::smem_bytes).
void add_edge_streams(Walk& w, bool one_box, Prediction& p) {
  const GroupGeometry& g = w.g;
  const int i = w.layer;
  const size_t is = static_cast<size_t>(i);
  const int e0 = w.e0, ne = w.ne;
  const std::array<double, 4> distance =
      reuse_distances(g.last(), i == g.layer_count - 1 ? 1.0 : 0.0);
  const OpKind op = g.layers[is]->op;
  const bool window = traits(op).windowed();
  double stage = 0;
  for (int k = 0; k < ne; ++k) {
    const Edge& edge = g.edges[static_cast<size_t>(e0 + k)];
    const EdgeAxis* x = &w.s.edge_axis[static_cast<size_t>(k) * 4];
    const size_t ks = static_cast<size_t>(k);
    w.s.streams.push_back(
        edge_stream(w, edge, x, w.s.loads[ks], w.s.touches[ks], distance, one_box, p));
    if (window) {
      double passes = 1, acc = 0;
      stage += staged_streamed(g, i, staged_elements(g.tensors[is], edge, x),
                               static_cast<double>(x[0].need_max), w.smem_budget, passes, acc);
      add_streamed_pass_costs(
          passes, acc, static_cast<double>(p.bricks_per_layer[is]),
          streamed_acc_in_registers(g, *w.ctx, false, memo_box(g), i, w.wgmma_n), p);
    }
  }
  w.smem_bytes = std::max(w.smem_bytes, stage * kSharedElementBytes);
}

// Counts layer i over its computed bricks (the union of its live boxes) and adds the boxes of
// the producer bricks they need.
void count_layer(Walk& w, int i, Prediction& p) {
  normalize(w.ops, w.s, i);
  if (w.s.live.empty())
    return; // no computed consumer brick needs this layer
  w.layer = i;
  w.e0 = w.g.edge_begin[static_cast<size_t>(i)];
  w.ne = w.g.edge_begin[static_cast<size_t>(i) + 1] - w.e0;
  // One box: its sums and its images in one pass. Several: images box by box, sums over the
  // union.
  const bool one_box = w.s.live.size() == 1;
  const int box = one_box ? start_images(w) : project_union(w);
  const BoxSums bs = box_sums(w, box, one_box ? w.s.images.data() : nullptr);
  const LayerTotals t = one_box ? box_totals(w, bs) : union_totals(w);
  add_layer_counts(w, bs, t, p);
  add_edge_streams(w, one_box, p);
}

// Thread blocks, the output, claims, and the bytes the kernel issues (L1) and L2 serves.
void set_issued_bytes(const Walk& w, double units, Prediction& p) {
  p.thread_blocks = to_count(units);
  p.bytes_output = w.g.numel(w.g.layer_count - 1) * w.g.dtype_bytes;
  p.atomics_compulsory = w.claims;
  p.l1_bytes = p.bytes_input + p.bytes_weight + p.bytes_intermediate_load +
               p.bytes_intermediate_store + p.bytes_output;
  p.l2_bytes = p.l1_bytes + kSectorBytes * (p.memo_lookups + 2 * w.claims);
}

// DRAM reads (first touches, re-reads that fall out of L2), write-backs of evicted bricks,
// and conflicting lookups. Returns the L2 window, which the sync time uses too.
L2Window set_dram_bytes(const StrategyContext& ctx, const Walk& w, const Occupancy& occ,
                        double units, Prediction& p) {
  const int L = w.g.layer_count;
  double input_first = 0;
  for (int t = L; t < w.g.tensor_count(); ++t)
    input_first += w.s.first_of_input[static_cast<size_t>(t)];
  const double footprint =
      input_first + w.weights_unique + p.bytes_intermediate_store + p.bytes_output;
  const L2Window win = merged_l2_window(ctx, occ, units, footprint);
  double reads = input_first + w.weights_unique;
  double conflicts = 0;
  for (const Stream& st : w.s.streams) {
    reads += win.misses(st.bytes);
    if (st.tensor < L)
      conflicts += win.conflicts(st.lookups, w.bricks_total > 0 ? units / w.bricks_total : 0.0);
  }
  add_weight_rereads(win, w.weights_unique, p.bytes_weight, reads);
  const double evicted = footprint > 0 ? std::max(0.0, 1.0 - win.share_bytes / footprint) : 0.0;
  p.dram_read_bytes = std::min(reads, p.bytes_input + p.bytes_weight + p.bytes_intermediate_load);
  p.dram_write_bytes = p.bytes_output + p.bytes_intermediate_store * evicted;
  p.dram_bytes = p.dram_read_bytes + p.dram_write_bytes;
  p.atomics_conflict = std::min(conflicts, std::max(0.0, p.memo_lookups - w.claims));
  return win;
}

// The memo bricks alive at once: the persistent grid (kernels/cuda/templates/memoized.cuh)
// walks units in order, channel block fastest, so the units in flight are a window of the
// resident blocks, and a brick lives from its first consumer unit to its last, about one row
// of units later (one plane in 3-D). Their intermediate stores, at the average per unit.
double live_memo_bytes(const GroupGeometry& g, const Occupancy& occ, double units,
                       double store_bytes) {
  if (store_bytes <= 0 || units <= 0)
    return 0;
  const TensorGrid& last = g.last();
  double row = static_cast<double>(last.grid[0] * last.grid[3]);
  if (last.grid[1] > 1)
    row *= static_cast<double>(last.grid[2]);
  const double live_units = std::min(units, std::max(1.0, occ.concurrent_blocks) + row);
  return store_bytes / units * live_units;
}

// Feasibility: the live memo bricks must fit the target's L2, or their re-reads go to DRAM
// (how many of the re-reads that fit still miss is the L2 window's business: set_dram_bytes).
void check_live_memo(const GroupGeometry& g, const StrategyContext& ctx, const Occupancy& occ,
                     double units, Prediction& p) {
  const double live = live_memo_bytes(g, occ, units, p.bytes_intermediate_store);
  if (!p.feasible || live <= ctx.gpu.l2_bytes)
    return;
  p.feasible = false;
  p.reason = "the live memo bricks need " + std::to_string(static_cast<int64_t>(live / 1048576)) +
             " MiB of L2; " + ctx.gpu.name + " has " +
             std::to_string(static_cast<int64_t>(ctx.gpu.l2_bytes / 1048576)) + " MiB";
}

} // namespace

void predict_memoized(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p) {
  Scratch& s = scratch();
  Walk w{g, s, BoxOps(g, s), axis_aliases(g)};
  w.smem_budget = ctx.gpu.smem_per_block_bytes / kSharedElementBytes;
  w.ctx = &ctx;
  w.wgmma_n = kernel_wgmma_n(g, ctx, false, memo_box(g));
  start_walk(w);
  for (int i = g.layer_count - 1; i >= 0; --i)
    count_layer(w, i, p);

  const double units = merged_units(g);
  set_issued_bytes(w, units, p);
  const Occupancy occ =
      set_block_footprint(g, ctx, w.smem_bytes, "one memoized brick needs", false, p);
  check_live_memo(g, ctx, occ, units, p);
  const L2Window win = set_dram_bytes(ctx, w, occ, units, p);

  // Time: two barriers per brick and one per extra streamed pass, claims, conflicting lookups.
  p.barriers += 2 * w.bricks_total; // the streamed passes' are in already
  add_merged_kernel_time(g, ctx, occ, win, units, p);
  p.t_atomic_compulsory_ms = w.claims * ctx.coef.atomic_ns * 1e-6;
  p.t_atomic_conflict_ms = p.atomics_conflict * ctx.coef.conflict_ns * 1e-6;
  finish_time(p);
}

} // namespace brickdl::model::detail
