// Padded bricks: one unit per brick of the last layer; every earlier layer recomputed over the
// unit's region with all its channels; nothing but the output leaves the chip.
//
// Counting walks the brick grid of the last layer one axis at a time. The channel axis goes
// first because it decides which layers a unit computes at all (a concat's channel block may
// not need one of its inputs): units sharing that "live" set form a MaskGroup, and within a
// group every count is Σ over units of a product of per-axis terms = product of per-axis sums.
#include <algorithm>
#include <cmath>

#include "model/strategies/strategies.h"

namespace brickdl::model::detail {

namespace {

// Counts are integers computed in doubles (exact below 2^53).
inline int64_t to_count(double v) {
  return static_cast<int64_t>(v + 0.5);
}

struct MaskGroup {
  uint64_t mask = 0;  // layers computed by these units
  int64_t blocks = 0; // channel blocks of the last layer with this live set
};

// Per (group or axis, tensor) running sums along one axis.
struct AxisAccum {
  double sum = 0;   // Σ extents
  double uni = 0;   // length of the union
  double max = 0;   // largest extent
  double count = 0; // units with a non-empty extent
  int64_t hi = -1;  // union bookkeeping: extents arrive sorted by lo
  void add(Interval iv) {
    if (iv.empty())
      return;
    const double s = static_cast<double>(iv.size());
    sum += s;
    max = std::max(max, s);
    count += 1;
    const int64_t lo = std::max(iv.lo, hi + 1);
    if (iv.hi >= lo)
      uni += static_cast<double>(iv.hi - lo + 1);
    hi = std::max(hi, iv.hi);
  }
};

// One edge's map on one spatial axis, in the order regions propagate (consumers descending).
struct FlatEdge {
  int consumer = 0;
  int producer = 0;
  AxisMap map;
};

struct Scratch {
  std::vector<Interval> reg;
  std::vector<MaskGroup> groups;
  std::vector<AxisAccum> chan;    // groups × T
  std::vector<AxisAccum> spatial; // T × 4 (axis 0 unused)
  std::vector<double> max_volume; // T: largest region of the tensor in any unit (elements)
  std::vector<ReuseSplit> input_splits;
  std::vector<FlatEdge> flat; // one spatial axis, one mask group
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Regions of every tensor for one unit along the channel axis, given the last layer's
// channel block `out`: layers needed at all compute every channel (padded's rule).
void propagate_channels(const GroupGeometry& g, Interval out, std::vector<Interval>& reg) {
  const int L = g.layer_count;
  std::fill(reg.begin(), reg.end(), Interval{});
  reg[static_cast<size_t>(L - 1)] = out;
  for (int i = L - 1; i >= 0; --i) {
    Interval& r = reg[static_cast<size_t>(i)];
    if (r.empty())
      continue;
    if (i < L - 1)
      r = {0, g.tensors[static_cast<size_t>(i)].extent[0] - 1};
    for (int e = g.edge_begin[static_cast<size_t>(i)]; e < g.edge_begin[static_cast<size_t>(i) + 1];
         ++e) {
      const Edge& edge = g.edges[static_cast<size_t>(e)];
      Interval& pr = reg[static_cast<size_t>(edge.producer)];
      pr = hull(pr, edge.need(kChannelAxis, r));
    }
  }
}

// Regions of every tensor for one unit along a spatial axis: `edges` are those of the layers
// the unit computes, consumers descending, so a layer's region is complete before it is read.
void propagate_spatial(const FlatEdge* edges, size_t count, int L, int T, Interval out,
                       Interval* reg) {
  for (int t = 0; t < T; ++t)
    reg[t] = Interval{};
  reg[L - 1] = out;
  for (size_t k = 0; k < count; ++k) {
    const FlatEdge& e = edges[k];
    const Interval r = reg[e.consumer];
    if (r.empty())
      continue;
    reg[e.producer] = hull(reg[e.producer], e.map.apply(r));
  }
}

} // namespace

void predict_padded(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p) {
  Scratch& s = scratch();
  const int L = g.layer_count;
  const int T = g.tensor_count();
  const TensorGrid& last = g.last();
  const double n = static_cast<double>(g.batch);
  const double dt = g.dtype_bytes;

  s.reg.resize(static_cast<size_t>(T));
  // Spatial axes equal to an earlier one (square images) reuse its sums.
  std::array<int, kAxes> alias = {0, 1, 2, 3};
  for (int a = 2; a < kAxes; ++a)
    for (int b = 1; b < a && alias[a] == a; ++b)
      if (same_axis(g, b, a))
        alias[a] = b;
  s.groups.clear();
  s.chan.clear();

  // Channel axis: which layers each channel block of the last layer computes, and how many
  // channels of every tensor it touches.
  for (int64_t k = 0; k < last.grid[0]; ++k) {
    propagate_channels(g, last.brick_interval(kChannelAxis, k), s.reg);
    uint64_t mask = 0;
    for (int i = 0; i < L; ++i)
      if (!s.reg[static_cast<size_t>(i)].empty())
        mask |= uint64_t{1} << i;
    size_t gi = 0;
    while (gi < s.groups.size() && s.groups[gi].mask != mask)
      ++gi;
    if (gi == s.groups.size()) {
      s.groups.push_back({mask, 0});
      s.chan.resize(s.chan.size() + static_cast<size_t>(T));
    }
    s.groups[gi].blocks += 1;
    for (int t = 0; t < T; ++t)
      s.chan[gi * static_cast<size_t>(T) + static_cast<size_t>(t)].add(
          s.reg[static_cast<size_t>(t)]);
  }

  const double spatial_units = static_cast<double>(last.spatial_bricks());
  const double kb = static_cast<double>(last.grid[0]);
  // Reuse distances in thread blocks, fastest axis first: channel block, w, h, d.
  const std::array<double, 4> distance = {1.0, kb, kb * static_cast<double>(last.grid[3]),
                                          kb * static_cast<double>(last.grid[3] * last.grid[2])};
  s.max_volume.assign(static_cast<size_t>(T), 0.0);
  s.input_splits.clear();
  std::vector<double>& maxv = s.max_volume;
  double weights_unique = 0;
  uint64_t computed_layers = 0;

  for (size_t gi = 0; gi < s.groups.size(); ++gi) {
    const MaskGroup& grp = s.groups[gi];
    const AxisAccum* ch = &s.chan[gi * static_cast<size_t>(T)];
    s.spatial.assign(static_cast<size_t>(T) * 4, AxisAccum{});
    for (int a = 1; a < kAxes; ++a) {
      if (alias[a] != a) {
        for (int t = 0; t < T; ++t)
          s.spatial[static_cast<size_t>(t) * 4 + static_cast<size_t>(a)] =
              s.spatial[static_cast<size_t>(t) * 4 + static_cast<size_t>(alias[a])];
        continue;
      }
      s.flat.clear();
      for (int e = static_cast<int>(g.edges.size()) - 1; e >= 0; --e) {
        const Edge& edge = g.edges[static_cast<size_t>(e)];
        if ((grp.mask >> edge.consumer) & 1u)
          s.flat.push_back({edge.consumer, edge.producer, edge.axis[static_cast<size_t>(a)]});
      }
      for (int64_t j = 0; j < last.grid[static_cast<size_t>(a)]; ++j) {
        propagate_spatial(s.flat.data(), s.flat.size(), L, T, last.brick_interval(a, j),
                          s.reg.data());
        for (int t = 0; t < T; ++t)
          s.spatial[static_cast<size_t>(t) * 4 + static_cast<size_t>(a)].add(
              s.reg[static_cast<size_t>(t)]);
      }
    }
    for (int t = 0; t < T; ++t) {
      const AxisAccum* sp = &s.spatial[static_cast<size_t>(t) * 4];
      const double volume = sp[1].sum * sp[2].sum * sp[3].sum; // Σ over spatial units
      const double units = sp[1].count * sp[2].count * sp[3].count;
      maxv[static_cast<size_t>(t)] =
          std::max(maxv[static_cast<size_t>(t)], ch[t].max * sp[1].max * sp[2].max * sp[3].max);
      if (t < L) {
        if (((grp.mask >> t) & 1u) == 0)
          continue;
        const size_t i = static_cast<size_t>(t);
        computed_layers |= uint64_t{1} << t;
        p.flops += n * ch[t].sum * volume * g.flops_per_point[i];
        const double unit_count = n * static_cast<double>(grp.blocks) * units;
        p.bricks_per_layer[i] += to_count(unit_count);
        if (t == L - 1) {
          // The last layer's weights are split by channel block.
          p.bytes_weight += n * units * g.params[i] * ch[t].sum /
                            static_cast<double>(g.tensors[i].extent[0]) * dt;
        } else {
          p.bytes_weight += unit_count * g.params[i] * dt;
        }
      } else {
        p.bytes_input += n * ch[t].sum * volume * dt;
        s.input_splits.push_back(split_reuse({ch[t].sum, sp[3].sum, sp[2].sum, sp[1].sum},
                                             {ch[t].uni, sp[3].uni, sp[2].uni, sp[1].uni}, distance,
                                             n * dt));
      }
    }
  }
  for (int i = 0; i < L; ++i)
    if ((computed_layers >> i) & 1u)
      weights_unique += g.params[static_cast<size_t>(i)] * dt;

  const double units = n * kb * spatial_units;
  p.thread_blocks = to_count(units);
  p.bytes_output = g.numel(L - 1) * dt;
  p.l1_bytes = p.bytes_input + p.bytes_weight + p.bytes_output;
  p.l2_bytes = p.l1_bytes;

  // Shared memory: the regions alive while layer i is computed. Intermediates live from
  // their layer to their last reader; external inputs that a window op reads are staged from
  // their first reader to their last. The last layer writes straight to global memory.
  double smem = 0;
  for (int i = 0; i < L; ++i) {
    double live = 0;
    for (int t = 0; t < T; ++t) {
      const size_t ts = static_cast<size_t>(t);
      if (t < L - 1 && t <= i && g.last_use[ts] >= i)
        live += maxv[ts];
      if (t >= L && g.staged[ts] && g.first_use[ts] <= i && g.last_use[ts] >= i)
        live += maxv[ts];
    }
    smem = std::max(smem, live);
  }
  const double brick_volume = static_cast<double>(last.brick[1] * last.brick[2] * last.brick[3]);
  const Occupancy occ = set_block_footprint(ctx, smem * dt, brick_volume, "padded regions need", p);

  // DRAM: first touches of the inputs and weights, re-reads that fall out of L2, the output.
  double input_first = 0;
  for (const ReuseSplit& r : s.input_splits)
    input_first += r.first;
  L2Window win;
  win.share_bytes = ctx.coef.l2_share_bytes;
  win.concurrent = std::max(1.0, std::min(occ.concurrent_blocks, units));
  win.bytes_per_block = (input_first + weights_unique + p.bytes_output) / std::max(1.0, units);
  double reads = input_first + weights_unique;
  for (const ReuseSplit& r : s.input_splits)
    reads += win.misses(r);
  // Every unit reads every weight: re-reads miss only when the weights overflow the L2 share.
  if (weights_unique > win.share_bytes)
    reads += p.bytes_weight - weights_unique;
  p.dram_read_bytes = std::min(reads, p.bytes_input + p.bytes_weight);
  p.dram_write_bytes = p.bytes_output;
  p.dram_bytes = p.dram_read_bytes + p.dram_write_bytes;

  // Time.
  p.launches = 1;
  for (int i = 0; i < L; ++i)
    p.barriers += static_cast<double>(p.bricks_per_layer[static_cast<size_t>(i)]);
  add_kernel_roofline(ctx.gpu, ctx.coef, g.graph->dtype(), false, p.dram_bytes, p.l2_bytes, p.flops,
                      units, occ.factor > 0 ? occ.factor : 1.0, p);
  p.t_launch_ms = ctx.coef.launch_us * 1e-3;
  p.t_sync_ms = p.barriers * ctx.coef.barrier_ns * 1e-6 / win.concurrent;
  finish_time(p);
}

} // namespace brickdl::model::detail
