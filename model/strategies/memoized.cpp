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

// Counts are integers computed in doubles (exact below 2^53).
inline int64_t to_count(double v) {
  return static_cast<int64_t>(v + 0.5);
}

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

// Sums over one box of layer i: per axis brick extents, and per edge the needs. When
// `images` is given, images[k] (a box id, or -1 for an external producer) receives the
// producer bricks that edge k's needs touch, and is killed when the box needs nothing.
// Needs grow with j on every axis (every map is monotone), so unions are running maxima.
BoxSums box_sums(const GroupGeometry& g, BoxOps& ops, Scratch& s, int layer, int box,
                 const int* images, const std::array<int, kAxes>& alias) {
  BoxSums r;
  const TensorGrid& tg = g.tensors[static_cast<size_t>(layer)];
  const int e0 = g.edge_begin[static_cast<size_t>(layer)];
  const int e1 = g.edge_begin[static_cast<size_t>(layer) + 1];
  s.edge_axis.resize(static_cast<size_t>(e1 - e0) * 4);
  for (int a = 0; a < kAxes; ++a) {
    const size_t as = static_cast<size_t>(a);
    // An axis like an earlier one, with the same bricks in the box, has the same sums.
    const int b = alias[as];
    const int64_t nw = words_for(tg.grid[as]);
    if (b != a && std::equal(ops.mask(box, a), ops.mask(box, a) + nw, ops.mask(box, b))) {
      r.count[as] = r.count[static_cast<size_t>(b)];
      r.extent[as] = r.extent[static_cast<size_t>(b)];
      for (int e = e0; e < e1; ++e) {
        const size_t k = static_cast<size_t>(e - e0) * 4;
        s.edge_axis[k + as] = s.edge_axis[k + static_cast<size_t>(b)];
        if (images && images[e - e0] >= 0) {
          const int p = g.edges[static_cast<size_t>(e)].producer;
          const int64_t pw = words_for(g.tensors[static_cast<size_t>(p)].grid[as]);
          std::copy(ops.mask(images[e - e0], b), ops.mask(images[e - e0], b) + pw,
                    ops.mask(images[e - e0], a));
        }
      }
      continue;
    }
    s.js.clear();
    ops.for_each(box, a, [&](int64_t j) { s.js.push_back(j); });
    const int64_t bb = tg.brick[as], last = tg.extent[as] - 1;
    int64_t extent = 0;
    for (int64_t j : s.js)
      extent += std::min(j * bb + bb - 1, last) - j * bb + 1;
    r.count[as] = static_cast<int64_t>(s.js.size());
    r.extent[as] = extent;
    for (int e = e0; e < e1; ++e) {
      const Edge& edge = g.edges[static_cast<size_t>(e)];
      const int64_t pb = g.tensors[static_cast<size_t>(edge.producer)].brick[as];
      const double inv_pb = 1.0 / static_cast<double>(pb);
      uint64_t* image = (images && images[e - e0] >= 0) ? ops.mask(images[e - e0], a) : nullptr;
      EdgeAxis acc;
      int64_t hi = -1, touch_hi = -1;
      for (int64_t j : s.js) {
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
      s.edge_axis[static_cast<size_t>(e - e0) * 4 + as] = acc;
    }
  }
  if (images)
    for (int e = e0; e < e1; ++e) {
      if (images[e - e0] < 0)
        continue;
      for (int a = 0; a < kAxes; ++a)
        if (s.edge_axis[static_cast<size_t>(e - e0) * 4 + static_cast<size_t>(a)].touch_sum == 0) {
          ops.kill(images[e - e0]); // some axis needs nothing: no brick reads the producer
          break;
        }
    }
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

} // namespace

void predict_memoized(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p) {
  Scratch& s = scratch();
  const int L = g.layer_count;
  const int T = g.tensor_count();
  const TensorGrid& last = g.last();
  const double n = static_cast<double>(g.batch);
  const double dt = g.dtype_bytes;

  s.words.clear();
  s.boxes.clear();
  s.head.assign(static_cast<size_t>(L), -1);
  s.streams.clear();
  s.first_of_input.assign(static_cast<size_t>(T), 0.0);
  BoxOps ops(g, s);
  ops.make(L - 1, true);
  // Spatial axes equal to an earlier one (square images) may reuse its sums.
  std::array<int, kAxes> alias = {0, 1, 2, 3};
  for (int a = 2; a < kAxes; ++a)
    for (int b = 1; b < a && alias[static_cast<size_t>(a)] == a; ++b)
      if (same_axis(g, b, a))
        alias[static_cast<size_t>(a)] = b;

  const double kb = static_cast<double>(last.grid[0]);
  double smem = 0, weights_unique = 0, claims = 0, bricks_total = 0;

  for (int i = L - 1; i >= 0; --i) {
    const size_t is = static_cast<size_t>(i);
    normalize(ops, s, i);
    if (s.live.empty())
      continue; // no computed consumer brick needs this layer
    const TensorGrid& tg = g.tensors[is];
    const int e0 = g.edge_begin[is];
    const int e1 = g.edge_begin[is + 1];
    // The producers' boxes (s.boxes grows: hold box ids, never references). One box: its
    // sums and its images in one pass. Several: images box by box, sums over the union.
    const std::vector<int>& live = s.live;
    const int ne = e1 - e0;
    s.images.assign(static_cast<size_t>(ne), -1);
    int proj = live[0];
    if (live.size() == 1) {
      for (int k = 0; k < ne; ++k)
        if (g.edges[static_cast<size_t>(e0 + k)].producer < L)
          s.images[static_cast<size_t>(k)] =
              ops.make(g.edges[static_cast<size_t>(e0 + k)].producer, false);
    } else {
      for (int box : live)
        for (int e = e0; e < e1; ++e) {
          const Edge& edge = g.edges[static_cast<size_t>(e)];
          if (edge.producer < L)
            image(g, ops, box, edge);
        }
      proj = ops.make(i, false);
      s.boxes[static_cast<size_t>(proj)].dead = true; // not a member of the set
      for (int box : live)
        for (int a = 0; a < kAxes; ++a) {
          const int64_t nw = words_for(tg.grid[static_cast<size_t>(a)]);
          for (int64_t w = 0; w < nw; ++w)
            ops.mask(proj, a)[w] |= ops.mask(box, a)[w];
        }
    }
    const BoxSums bs =
        box_sums(g, ops, s, i, proj, live.size() == 1 ? s.images.data() : nullptr, alias);
    const std::vector<EdgeAxis>& ea = s.edge_axis;

    const auto d = [](int64_t v) { return static_cast<double>(v); };
    double bricks = n * d(bs.count[0]) * d(bs.count[1]) * d(bs.count[2]) * d(bs.count[3]);
    double volume = n * d(bs.extent[0]) * d(bs.extent[1]) * d(bs.extent[2]) * d(bs.extent[3]);
    double block_channels = n * d(bs.extent[0]) * d(bs.count[1]) * d(bs.count[2]) * d(bs.count[3]);
    std::array<double, 8> loads{}, touches{}; // per edge (up to 8 fast; more → vector below)
    std::vector<double> loads_v, touches_v;
    const auto edge_total = [&](int k, bool touch) {
      double v = n;
      for (int a = 0; a < kAxes; ++a) {
        const EdgeAxis& x = ea[static_cast<size_t>(k) * 4 + static_cast<size_t>(a)];
        v *= static_cast<double>(touch ? x.touch_sum : x.need_sum);
      }
      return v;
    };
    if (ne > 8) {
      loads_v.resize(static_cast<size_t>(ne));
      touches_v.resize(static_cast<size_t>(ne));
    }
    double* ld = ne > 8 ? loads_v.data() : loads.data();
    double* tc = ne > 8 ? touches_v.data() : touches.data();
    if (live.size() == 1) {
      for (int k = 0; k < ne; ++k) {
        ld[k] = edge_total(k, false);
        tc[k] = edge_total(k, true);
      }
    } else {
      // Enumerate the union of the boxes (bitmap over the layer's brick grid).
      const int64_t gc = tg.grid[0], gd = tg.grid[1], gh = tg.grid[2], gw = tg.grid[3];
      s.bitmap.assign(static_cast<size_t>(gc * gd * gh * gw), 0);
      for (int box : live)
        ops.for_each(box, 0, [&](int64_t c) {
          ops.for_each(box, 1, [&](int64_t d) {
            ops.for_each(box, 2, [&](int64_t h) {
              ops.for_each(box, 3, [&](int64_t w) {
                s.bitmap[static_cast<size_t>(((c * gd + d) * gh + h) * gw + w)] = 1;
              });
            });
          });
        });
      // Per-axis tables: extent, then per edge need length and producer bricks touched.
      const std::array<int64_t, 4> gsz = {gc, gd, gh, gw};
      std::array<int64_t, 4> base{};
      int64_t total = 0;
      for (int a = 0; a < kAxes; ++a) {
        base[static_cast<size_t>(a)] = total;
        total += gsz[static_cast<size_t>(a)] * (1 + 2 * ne);
      }
      s.table.assign(static_cast<size_t>(total), 0.0);
      for (int a = 0; a < kAxes; ++a)
        for (int64_t j = 0; j < gsz[static_cast<size_t>(a)]; ++j) {
          const Interval out = tg.brick_interval(a, j);
          double* row =
              &s.table[static_cast<size_t>(base[static_cast<size_t>(a)] + j * (1 + 2 * ne))];
          row[0] = static_cast<double>(out.size());
          for (int k = 0; k < ne; ++k) {
            const Edge& edge = g.edges[static_cast<size_t>(e0 + k)];
            const Interval need = edge.need(a, out);
            const int64_t pb =
                g.tensors[static_cast<size_t>(edge.producer)].brick[static_cast<size_t>(a)];
            row[1 + 2 * k] = static_cast<double>(need.size());
            row[2 + 2 * k] = need.empty()
                                 ? 0.0
                                 : static_cast<double>(div32(need.hi, pb) - div32(need.lo, pb) + 1);
          }
        }
      bricks = volume = block_channels = 0;
      for (int k = 0; k < ne; ++k)
        ld[k] = tc[k] = 0;
      const auto row = [&](int a, int64_t j) {
        return &s.table[static_cast<size_t>(base[static_cast<size_t>(a)] + j * (1 + 2 * ne))];
      };
      for (int64_t c = 0; c < gc; ++c)
        for (int64_t d = 0; d < gd; ++d)
          for (int64_t h = 0; h < gh; ++h)
            for (int64_t w = 0; w < gw; ++w) {
              if (!s.bitmap[static_cast<size_t>(((c * gd + d) * gh + h) * gw + w)])
                continue;
              const double* rc = row(0, c);
              const double* rd = row(1, d);
              const double* rh = row(2, h);
              const double* rw = row(3, w);
              bricks += 1;
              volume += rc[0] * rd[0] * rh[0] * rw[0];
              block_channels += rc[0];
              for (int k = 0; k < ne; ++k) {
                ld[k] += rc[1 + 2 * k] * rd[1 + 2 * k] * rh[1 + 2 * k] * rw[1 + 2 * k];
                tc[k] += rc[2 + 2 * k] * rd[2 + 2 * k] * rh[2 + 2 * k] * rw[2 + 2 * k];
              }
            }
      bricks *= n;
      volume *= n;
      block_channels *= n;
      for (int k = 0; k < ne; ++k) {
        ld[k] *= n;
        tc[k] *= n;
      }
    }

    p.bricks_per_layer[is] = to_count(bricks);
    bricks_total += bricks;
    p.flops += volume * g.flops_per_point[is];
    const double channels = static_cast<double>(tg.extent[0]);
    p.bytes_weight += g.params[is] * block_channels / channels * dt;
    weights_unique += g.params[is] * d(bs.extent[0]) / channels * dt;
    if (i < L - 1) {
      p.bytes_intermediate_store += volume * dt;
      claims += bricks;
    }

    // Loads, lookups and their reuse, per edge. The reuse split uses the box (or the
    // projection of the union) and is rescaled to the exact totals.
    const double dist_c = (i == L - 1) ? 1.0 : 0.0;
    const std::array<double, 4> distance = {dist_c, kb, kb * static_cast<double>(last.grid[3]),
                                            kb * static_cast<double>(last.grid[3] * last.grid[2])};
    double stage = 0;
    for (int k = 0; k < ne; ++k) {
      const Edge& edge = g.edges[static_cast<size_t>(e0 + k)];
      const EdgeAxis* x = &ea[static_cast<size_t>(k) * 4];
      const bool internal = edge.producer < L;
      (internal ? p.bytes_intermediate_load : p.bytes_input) += ld[k] * dt;
      Stream st;
      st.tensor = edge.producer;
      st.bytes =
          split_reuse({d(x[0].need_sum), d(x[3].need_sum), d(x[2].need_sum), d(x[1].need_sum)},
                      {d(x[0].need_uni), d(x[3].need_uni), d(x[2].need_uni), d(x[1].need_uni)},
                      distance, n * dt);
      if (internal) {
        p.memo_lookups += tc[k];
        st.lookups = split_reuse(
            {d(x[0].touch_sum), d(x[3].touch_sum), d(x[2].touch_sum), d(x[1].touch_sum)},
            {d(x[0].touch_uni), d(x[3].touch_uni), d(x[2].touch_uni), d(x[1].touch_uni)}, distance,
            n);
      }
      // Rescale the re-read parts to the exact totals (a no-op for a single box).
      const auto rescale = [](ReuseSplit& r, double total) {
        double rr = 0;
        for (double v : r.reread)
          rr += v;
        const double want = std::max(0.0, total - r.first);
        if (rr > 0) {
          for (double& v : r.reread)
            v *= want / rr;
        }
      };
      if (live.size() > 1) {
        rescale(st.bytes, ld[k] * dt);
        if (internal)
          rescale(st.lookups, tc[k]);
      }
      if (!internal) {
        double& f = s.first_of_input[static_cast<size_t>(edge.producer)];
        f = std::max(f, st.bytes.first);
      }
      s.streams.push_back(st);
      // A window layer stages a brick's whole input region: (e − 1)·s + dil·(k − 1) + 1 per
      // axis for a brick of extent e (clamped to the tensor), unclipped, as a kernel sizes
      // its buffer for any brick; channels: the most any of its channel blocks reads.
      const Layer& l = *g.layers[is];
      if (l.op == OpKind::kConv || l.op == OpKind::kMaxPool || l.op == OpKind::kAvgPool) {
        double region = d(x[0].need_max);
        for (int a = 1; a < kAxes; ++a) {
          const size_t as = static_cast<size_t>(a);
          const AxisMap& m = edge.axis[as];
          region *= d((std::min(tg.brick[as], tg.extent[as]) - 1) * m.a + m.c + 1);
        }
        stage += region;
      }
    }
    smem = std::max(smem, stage * dt);
  }

  const double units = n * kb * static_cast<double>(last.spatial_bricks());
  p.thread_blocks = to_count(units);
  p.bytes_output = g.numel(L - 1) * dt;
  p.atomics_compulsory = claims;
  p.l1_bytes = p.bytes_input + p.bytes_weight + p.bytes_intermediate_load +
               p.bytes_intermediate_store + p.bytes_output;
  p.l2_bytes = p.l1_bytes + kSectorBytes * (p.memo_lookups + 2 * claims);

  const double brick_volume = static_cast<double>(last.brick[1] * last.brick[2] * last.brick[3]);
  const Occupancy occ = set_block_footprint(ctx, smem, brick_volume, "one memoized brick needs", p);

  // DRAM.
  double input_first = 0;
  for (int t = L; t < T; ++t)
    input_first += s.first_of_input[static_cast<size_t>(t)];
  const double footprint =
      input_first + weights_unique + p.bytes_intermediate_store + p.bytes_output;
  L2Window win;
  win.share_bytes = ctx.coef.l2_share_bytes;
  win.concurrent = std::max(1.0, std::min(occ.concurrent_blocks, units));
  win.bytes_per_block = footprint / std::max(1.0, units);
  double reads = input_first + weights_unique;
  double conflicts = 0;
  for (const Stream& st : s.streams) {
    reads += win.misses(st.bytes);
    if (st.tensor < L)
      conflicts += win.conflicts(st.lookups, bricks_total > 0 ? units / bricks_total : 0.0);
  }
  if (weights_unique > win.share_bytes)
    reads += p.bytes_weight - weights_unique;
  const double evicted = footprint > 0 ? std::max(0.0, 1.0 - win.share_bytes / footprint) : 0.0;
  p.dram_read_bytes = std::min(reads, p.bytes_input + p.bytes_weight + p.bytes_intermediate_load);
  p.dram_write_bytes = p.bytes_output + p.bytes_intermediate_store * evicted;
  p.dram_bytes = p.dram_read_bytes + p.dram_write_bytes;
  p.atomics_conflict = std::min(conflicts, std::max(0.0, p.memo_lookups - claims));

  // Time.
  p.launches = 1;
  p.barriers = 2 * bricks_total;
  add_kernel_roofline(ctx.gpu, ctx.coef, g.graph->dtype(), false, p.dram_bytes, p.l2_bytes, p.flops,
                      units, occ.factor > 0 ? occ.factor : 1.0, p);
  p.t_atomic_compulsory_ms = claims * ctx.coef.atomic_ns * 1e-6;
  p.t_atomic_conflict_ms = p.atomics_conflict * ctx.coef.conflict_ns * 1e-6;
  p.t_launch_ms = ctx.coef.launch_us * 1e-3;
  p.t_sync_ms = p.barriers * ctx.coef.barrier_ns * 1e-6 / win.concurrent;
  finish_time(p);
}

} // namespace brickdl::model::detail
