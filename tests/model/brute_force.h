#pragma once
// A brute-force reference for the model's exact counts: it walks every unit (padded) or
// every needed brick (memoized) one by one with explicit regions, the way the conventions in
// model/cost_model.h read, with none of the model's per-axis factoring. Test-only; slow on
// purpose.
#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"

namespace brickdl::model::testing {

// Inclusive box: channels [c0, c1] × [lo, hi] per spatial axis (d, h, w).
struct Box {
  int64_t c0 = 0, c1 = -1;
  std::array<int64_t, 3> lo{0, 0, 0}, hi{-1, -1, -1};
  bool empty() const {
    if (c1 < c0)
      return true;
    for (size_t a = 0; a < 3; ++a)
      if (hi[a] < lo[a])
        return true;
    return false;
  }
  double volume() const {
    if (empty())
      return 0;
    double v = static_cast<double>(c1 - c0 + 1);
    for (size_t a = 0; a < 3; ++a)
      v *= static_cast<double>(hi[a] - lo[a] + 1);
    return v;
  }
};

inline Box hull(const Box& a, const Box& b) {
  if (a.empty())
    return b;
  if (b.empty())
    return a;
  Box r;
  r.c0 = std::min(a.c0, b.c0);
  r.c1 = std::max(a.c1, b.c1);
  for (size_t i = 0; i < 3; ++i) {
    r.lo[i] = std::min(a.lo[i], b.lo[i]);
    r.hi[i] = std::max(a.hi[i], b.hi[i]);
  }
  return r;
}

inline Box clip(Box b, const TensorShape& s) {
  b.c0 = std::max<int64_t>(b.c0, 0);
  b.c1 = std::min<int64_t>(b.c1, s.c - 1);
  const std::array<int64_t, 3> e = {s.d, s.h, s.w};
  for (size_t a = 0; a < 3; ++a) {
    b.lo[a] = std::max<int64_t>(b.lo[a], 0);
    b.hi[a] = std::min<int64_t>(b.hi[a], e[a] - 1);
  }
  return b;
}

inline int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// What `l` reads of input `slot` for output box `out`, clipped.
inline Box need(const Graph& g, const Layer& l, int slot, const Box& out) {
  const TensorShape& in = g.layer(l.inputs[static_cast<size_t>(slot)]).out;
  if (out.empty())
    return Box{};
  Box r = out;
  switch (l.op) {
  case OpKind::kConv:
  case OpKind::kMaxPool:
  case OpKind::kAvgPool:
    for (size_t a = 0; a < 3; ++a) {
      r.lo[a] = out.lo[a] * l.window.stride[a] - l.window.pad[a];
      r.hi[a] = out.hi[a] * l.window.stride[a] - l.window.pad[a] +
                int64_t{l.window.dilation[a]} * (l.window.kernel[a] - 1);
    }
    if (l.op == OpKind::kConv) {
      const int64_t cout_g = l.out_channels / l.groups, cin_g = in.c / l.groups;
      r.c0 = (out.c0 / cout_g) * cin_g;
      r.c1 = (out.c1 / cout_g + 1) * cin_g - 1;
    }
    break;
  case OpKind::kConcat: {
    int64_t off = 0;
    for (int s = 0; s < slot; ++s)
      off += g.layer(l.inputs[static_cast<size_t>(s)]).out.c;
    r.c0 = out.c0 - off;
    r.c1 = out.c1 - off;
    break;
  }
  case OpKind::kUpsample:
    for (size_t a = 0; a < 3; ++a) {
      const int64_t f = (a == 0 && l.out.spatial_rank != 3) ? 1 : l.upsample_scale;
      r.lo[a] = floor_div(out.lo[a], f) - (l.bilinear ? 1 : 0);
      r.hi[a] = floor_div(out.hi[a], f) + (l.bilinear ? 1 : 0);
    }
    break;
  default: break;
  }
  return clip(r, in);
}

struct BruteCounts {
  double flops = 0, bytes_input = 0, bytes_weight = 0, bytes_intermediate_load = 0;
  double bytes_intermediate_store = 0, bytes_output = 0, lookups = 0, claims = 0;
  std::vector<int64_t> bricks;
};

struct BrickGeom {
  std::array<int64_t, 4> b{}; // c, d, h, w
  std::array<int64_t, 4> e{};
  std::array<int64_t, 4> n{};
  BrickGeom(const TensorShape& s, const BrickShape& bs) {
    e = {s.c, s.d, s.h, s.w};
    b = {(bs.cb <= 0 || bs.cb > s.c) ? s.c : bs.cb, s.spatial_rank == 3 ? bs.d : 1, bs.h, bs.w};
    for (size_t a = 0; a < 4; ++a)
      n[a] = (e[a] + b[a] - 1) / b[a];
  }
  Box brick(const std::array<int64_t, 4>& j) const {
    Box r;
    r.c0 = j[0] * b[0];
    r.c1 = std::min(r.c0 + b[0], e[0]) - 1;
    for (size_t a = 0; a < 3; ++a) {
      r.lo[a] = j[a + 1] * b[a + 1];
      r.hi[a] = std::min(r.lo[a] + b[a + 1], e[a + 1]) - 1;
    }
    return r;
  }
};

inline double flops_per_point(const Graph& g, const Layer& l) {
  if (l.op != OpKind::kConv)
    return 0;
  const double kvol = double(l.window.kernel[0]) * l.window.kernel[1] * l.window.kernel[2];
  return 2.0 * double(g.layer(l.inputs[0]).out.c / l.groups) * kvol;
}

// Distinct producers of `l` with the hull of their slots' needs.
inline std::vector<std::pair<int, Box>> needs(const Graph& g, const Layer& l, const Box& out) {
  std::vector<std::pair<int, Box>> r;
  for (size_t s = 0; s < l.inputs.size(); ++s) {
    const Box b = need(g, l, static_cast<int>(s), out);
    auto it =
        std::find_if(r.begin(), r.end(), [&](const auto& x) { return x.first == l.inputs[s]; });
    if (it == r.end()) {
      r.emplace_back(l.inputs[s], b);
    } else {
      it->second = hull(it->second, b);
    }
  }
  return r;
}

// Units along the batch: a unit (and a memoized brick) covers nb images, the last block fewer.
inline double batch_units(int64_t batch, const BrickShape& brick) {
  int64_t units = 0;
  for (int64_t n0 = 0; n0 < batch; n0 += std::max(1, brick.nb))
    ++units;
  return static_cast<double>(units);
}

inline BruteCounts brute_padded(const Graph& g, const Candidate& cand) {
  const Group grp = cand.group;
  const int L = grp.size();
  const Layer& last = g.layer(grp.last);
  const double dt = dtype_bytes(g.dtype());
  const double n = static_cast<double>(last.out.n);
  const double nu = batch_units(last.out.n, cand.brick);
  const BrickGeom bg(last.out, cand.brick);
  BruteCounts c;
  c.bricks.assign(static_cast<size_t>(L), 0);
  std::array<int64_t, 4> j{};
  for (j[0] = 0; j[0] < bg.n[0]; ++j[0])
    for (j[1] = 0; j[1] < bg.n[1]; ++j[1])
      for (j[2] = 0; j[2] < bg.n[2]; ++j[2])
        for (j[3] = 0; j[3] < bg.n[3]; ++j[3]) {
          std::vector<Box> reg(static_cast<size_t>(g.size()));
          reg[static_cast<size_t>(grp.last)] = bg.brick(j);
          for (int id = grp.last; id >= grp.first; --id) {
            Box& r = reg[static_cast<size_t>(id)];
            if (r.empty())
              continue;
            const Layer& l = g.layer(id);
            if (id != grp.last) {
              r.c0 = 0;
              r.c1 = l.out.c - 1;
            }
            c.bricks[static_cast<size_t>(id - grp.first)] += static_cast<int64_t>(nu);
            c.flops += n * r.volume() * flops_per_point(g, l);
            c.bytes_weight += nu * double(l.params) *
                              (id == grp.last ? double(r.c1 - r.c0 + 1) / double(l.out.c) : 1.0) *
                              dt;
            for (const auto& [p, b] : needs(g, l, r)) {
              if (!grp.contains(p) && !traits(l.op).windowed()) { // read from global memory
                c.bytes_input += n * b.volume() * dt;
                continue;
              }
              reg[static_cast<size_t>(p)] = hull(reg[static_cast<size_t>(p)], b); // staged
            }
          }
          for (int id = 0; id < g.size(); ++id)
            if (!grp.contains(id))
              c.bytes_input += n * reg[static_cast<size_t>(id)].volume() * dt;
        }
  c.bytes_output = double(last.out.numel()) * dt;
  return c;
}

inline BruteCounts brute_memoized(const Graph& g, const Candidate& cand) {
  const Group grp = cand.group;
  const int L = grp.size();
  const double dt = dtype_bytes(g.dtype());
  const double n = static_cast<double>(g.layer(grp.last).out.n);
  const double nu = batch_units(g.layer(grp.last).out.n, cand.brick);
  BruteCounts c;
  c.bricks.assign(static_cast<size_t>(L), 0);
  std::vector<std::set<std::array<int64_t, 4>>> sets(static_cast<size_t>(L));
  {
    const BrickGeom bg(g.layer(grp.last).out, cand.brick);
    std::array<int64_t, 4> j{};
    for (j[0] = 0; j[0] < bg.n[0]; ++j[0])
      for (j[1] = 0; j[1] < bg.n[1]; ++j[1])
        for (j[2] = 0; j[2] < bg.n[2]; ++j[2])
          for (j[3] = 0; j[3] < bg.n[3]; ++j[3])
            sets[static_cast<size_t>(L - 1)].insert(j);
  }
  for (int id = grp.last; id >= grp.first; --id) {
    const Layer& l = g.layer(id);
    const BrickGeom bg(l.out, cand.brick);
    for (const auto& j : sets[static_cast<size_t>(id - grp.first)]) {
      const Box r = bg.brick(j);
      c.bricks[static_cast<size_t>(id - grp.first)] += static_cast<int64_t>(nu);
      c.flops += n * r.volume() * flops_per_point(g, l);
      c.bytes_weight += nu * double(l.params) * double(r.c1 - r.c0 + 1) / double(l.out.c) * dt;
      if (id == grp.last) {
        c.bytes_output += n * r.volume() * dt;
      } else {
        c.bytes_intermediate_store += n * r.volume() * dt;
        c.claims += nu;
      }
      for (const auto& [p, b] : needs(g, l, r)) {
        if (b.empty())
          continue;
        if (!grp.contains(p)) {
          c.bytes_input += n * b.volume() * dt;
          continue;
        }
        c.bytes_intermediate_load += n * b.volume() * dt;
        const BrickGeom pg(g.layer(p).out, cand.brick);
        std::array<int64_t, 4> lo = {b.c0 / pg.b[0], b.lo[0] / pg.b[1], b.lo[1] / pg.b[2],
                                     b.lo[2] / pg.b[3]};
        std::array<int64_t, 4> hi = {b.c1 / pg.b[0], b.hi[0] / pg.b[1], b.hi[1] / pg.b[2],
                                     b.hi[2] / pg.b[3]};
        std::array<int64_t, 4> k{};
        for (k[0] = lo[0]; k[0] <= hi[0]; ++k[0])
          for (k[1] = lo[1]; k[1] <= hi[1]; ++k[1])
            for (k[2] = lo[2]; k[2] <= hi[2]; ++k[2])
              for (k[3] = lo[3]; k[3] <= hi[3]; ++k[3]) {
                c.lookups += nu;
                sets[static_cast<size_t>(p - grp.first)].insert(k);
              }
      }
    }
  }
  return c;
}

} // namespace brickdl::model::testing
