// Padded bricks: one unit per brick of the last layer; every earlier layer recomputed over the
// unit's region with all its channels; nothing but the output leaves the chip. With a thread
// block cluster (GroupGeometry::cluster > 1) a unit's CTAs each hold and compute a channel slice
// of every tensor (core/group.h cluster_slice): the unit's counts are unchanged, its shared
// memory per CTA is the slices', and the CTAs read each other's slices (dsmem_bytes).
//
// Counting walks the brick grid of the last layer one axis at a time. The channel axis goes
// first because it decides which layers a unit computes at all (a concat's channel block may
// not need one of its inputs): units sharing that "live" set form a MaskGroup, and within a
// group every count is Σ over units of a product of per-axis terms = product of per-axis sums.
#include <algorithm>
#include <cmath>

#include "core/smem_arena.h"
#include "model/strategies/strategies.h"

namespace brickdl::model::detail {

namespace {

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
  std::vector<AxisAccum> chan;          // groups × T
  std::vector<AxisAccum> spatial;       // T × 4 (axis 0 unused)
  std::vector<AxisAccum> chan_reads;    // groups × R (R: GroupGeometry::reads)
  std::vector<AxisAccum> spatial_reads; // R × 4 (axis 0 unused)
  std::vector<double> alloc_spatial;    // T: the spatial volume a kernel allocates per region
  SmemArena arena;                      // padded_smem_elements' replay, storage reused
  std::vector<int64_t> smem_at;         // T: each buffer's offset in it (-1: none)
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

// Read r's interval along one axis for one unit: the hull of what its edges' consumers need,
// given their regions `reg`; only consumers in `mask` (the layers the unit computes) read.
Interval read_interval(const GroupGeometry& g, const InputRead& r, int axis, const Interval* reg,
                       uint64_t mask) {
  Interval out;
  for (int e : r.edges) {
    const Edge& edge = g.edges[static_cast<size_t>(e)];
    if ((mask >> edge.consumer) & 1u)
      out = hull(out, edge.need(axis, reg[edge.consumer]));
  }
  return out;
}

// The layers whose region is non-empty, as a bit set.
uint64_t live_layers(const std::vector<Interval>& reg, int L) {
  uint64_t mask = 0;
  for (int i = 0; i < L; ++i)
    if (!reg[static_cast<size_t>(i)].empty())
      mask |= uint64_t{1} << i;
  return mask;
}

// Index of the mask group of `mask`, appended (with T tensor and R read channel sums) when new.
size_t find_or_add_group(Scratch& s, uint64_t mask, int T, size_t R) {
  size_t gi = 0;
  while (gi < s.groups.size() && s.groups[gi].mask != mask)
    ++gi;
  if (gi == s.groups.size()) {
    s.groups.push_back({mask, 0});
    s.chan.resize(s.chan.size() + static_cast<size_t>(T));
    s.chan_reads.resize(s.chan_reads.size() + R);
  }
  return gi;
}

// Channel axis: which layers each channel block of the last layer computes (one MaskGroup per
// distinct set), and how many channels of every tensor and read its units touch (Scratch::chan,
// Scratch::chan_reads).
void group_channel_blocks(const GroupGeometry& g, Scratch& s) {
  const int T = g.tensor_count();
  const size_t R = g.reads.size();
  const TensorGrid& last = g.last();
  s.groups.clear();
  s.chan.clear();
  s.chan_reads.clear();
  for (int64_t k = 0; k < last.grid[0]; ++k) {
    propagate_channels(g, last.brick_interval(kChannelAxis, k), s.reg);
    const uint64_t mask = live_layers(s.reg, g.layer_count);
    const size_t gi = find_or_add_group(s, mask, T, R);
    s.groups[gi].blocks += 1;
    for (int t = 0; t < T; ++t)
      s.chan[gi * static_cast<size_t>(T) + static_cast<size_t>(t)].add(
          s.reg[static_cast<size_t>(t)]);
    for (size_t r = 0; r < R; ++r)
      s.chan_reads[gi * R + r].add(read_interval(g, g.reads[r], kChannelAxis, s.reg.data(), mask));
  }
}

// The edges of the layers in `mask` on spatial axis a, consumers descending.
void flatten_edges(const GroupGeometry& g, uint64_t mask, int a, std::vector<FlatEdge>& flat) {
  flat.clear();
  for (int e = static_cast<int>(g.edges.size()) - 1; e >= 0; --e) {
    const Edge& edge = g.edges[static_cast<size_t>(e)];
    if ((mask >> edge.consumer) & 1u)
      flat.push_back({edge.consumer, edge.producer, edge.axis[static_cast<size_t>(a)]});
  }
}

// Spatial axes for the units computing the layers in `mask`: per tensor (and read) and axis,
// the sums of its regions over the last layer's bricks along the axis (Scratch::spatial, T × 4;
// Scratch::spatial_reads, R × 4).
void sum_spatial_axes(const GroupGeometry& g, Scratch& s, uint64_t mask,
                      const std::array<int, kAxes>& alias) {
  const int L = g.layer_count;
  const int T = g.tensor_count();
  const size_t R = g.reads.size();
  const TensorGrid& last = g.last();
  s.spatial.assign(static_cast<size_t>(T) * 4, AxisAccum{});
  s.spatial_reads.assign(R * 4, AxisAccum{});
  for (int a = 1; a < kAxes; ++a) {
    const size_t as = static_cast<size_t>(a);
    if (alias[a] != a) {
      for (int t = 0; t < T; ++t)
        s.spatial[static_cast<size_t>(t) * 4 + as] =
            s.spatial[static_cast<size_t>(t) * 4 + static_cast<size_t>(alias[a])];
      for (size_t r = 0; r < R; ++r)
        s.spatial_reads[r * 4 + as] = s.spatial_reads[r * 4 + static_cast<size_t>(alias[a])];
      continue;
    }
    flatten_edges(g, mask, a, s.flat);
    for (int64_t j = 0; j < last.grid[as]; ++j) {
      propagate_spatial(s.flat.data(), s.flat.size(), L, T, last.brick_interval(a, j),
                        s.reg.data());
      for (int t = 0; t < T; ++t)
        s.spatial[static_cast<size_t>(t) * 4 + as].add(s.reg[static_cast<size_t>(t)]);
      for (size_t r = 0; r < R; ++r)
        s.spatial_reads[r * 4 + as].add(read_interval(g, g.reads[r], a, s.reg.data(), mask));
    }
  }
}

// Layer t's FLOPs, units and weights over `blocks` channel blocks whose units compute it;
// `volume` and `units` are the spatial sums (Σ extents, units with a non-empty region). A unit
// computes a batch block of images and reads the weights once for all of them.
void add_layer_work(const GroupGeometry& g, int t, const AxisAccum& ch, double volume, double units,
                    int64_t blocks, Prediction& p) {
  const size_t i = static_cast<size_t>(t);
  const double n = static_cast<double>(g.batch);
  const double dt = g.dtype_bytes;
  const double flops = n * ch.sum * volume * g.flops_per_point[i];
  p.flops += flops;
  // The channels one block computes: the unit's, or a cluster CTA's slice.
  if (!merged_conv_on_tensor_cores(g, t, merged_block_channels(g, t, true)))
    p.fma_flops += flops;
  const double nu = static_cast<double>(g.batch_units);
  const double unit_count = nu * static_cast<double>(blocks) * units;
  p.bricks_per_layer[i] += to_count(unit_count);
  if (t == g.layer_count - 1) {
    // The last layer's weights are split by channel block.
    p.bytes_weight +=
        nu * units * g.params[i] * ch.sum / static_cast<double>(g.tensors[i].extent[0]) * dt;
  } else {
    p.bytes_weight += unit_count * g.params[i] * dt;
  }
}

// Elements (per image, Σ over units) external input t's loads issue in mask group gi: its
// region (channel sums `ch`, spatial product `volume`), or when its reads are split
// (InputRead) the staged copy plus each non-window reader's need, read again from global
// memory.
double input_load_elements(const GroupGeometry& g, const Scratch& s, size_t gi, int t,
                           const AxisAccum& ch, double volume) {
  if (!g.split_reads[static_cast<size_t>(t)])
    return ch.sum * volume;
  const size_t R = g.reads.size();
  double elements = 0;
  for (size_t r = 0; r < R; ++r) {
    if (g.reads[r].tensor != t)
      continue;
    const AxisAccum* sp = &s.spatial_reads[r * 4];
    elements += s.chan_reads[gi * R + r].sum * sp[1].sum * sp[2].sum * sp[3].sum;
  }
  return elements;
}

// One external input's loads (`elements`: input_load_elements) and their reuse split over its
// region (`ch`, `sp`: its channel and 4 axis sums): the union of what a unit touches, so a
// non-window reader's second read of the staged positions is an L2 hit, not DRAM traffic.
void add_input_loads(const GroupGeometry& g, const AxisAccum& ch, const AxisAccum* sp,
                     double elements, const std::array<double, 4>& distance, Scratch& s,
                     Prediction& p) {
  const double n = static_cast<double>(g.batch);
  const double dt = g.dtype_bytes;
  p.bytes_input += n * elements * dt;
  s.input_splits.push_back(split_reuse({ch.sum, sp[3].sum, sp[2].sum, sp[1].sum},
                                       {ch.uni, sp[3].uni, sp[2].uni, sp[1].uni}, distance,
                                       n * dt));
}

// Adds the counts of mask group gi (Scratch::spatial filled for it) and marks the layers it
// computes in `computed_layers`.
void add_group_counts(const GroupGeometry& g, Scratch& s, size_t gi,
                      const std::array<double, 4>& distance, uint64_t& computed_layers,
                      Prediction& p) {
  const int L = g.layer_count;
  const int T = g.tensor_count();
  const MaskGroup& grp = s.groups[gi];
  const AxisAccum* ch = &s.chan[gi * static_cast<size_t>(T)];
  for (int t = 0; t < T; ++t) {
    const AxisAccum* sp = &s.spatial[static_cast<size_t>(t) * 4];
    const double volume = sp[1].sum * sp[2].sum * sp[3].sum; // Σ over spatial units
    const double units = sp[1].count * sp[2].count * sp[3].count;
    if (t >= L) {
      add_input_loads(g, ch[t], sp, input_load_elements(g, s, gi, t, ch[t], volume), distance, s,
                      p);
    } else if ((grp.mask >> t) & 1u) {
      computed_layers |= uint64_t{1} << t;
      add_layer_work(g, t, ch[t], volume, units, grp.blocks, p);
    }
  }
}

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// One spatial need map without clipping at the tensor's borders.
Interval apply_unclipped(const AxisMap& m, Interval o) {
  switch (m.kind) {
  case MapKind::kWindow: return {o.lo * m.a - m.b, o.hi * m.a - m.b + m.c};
  case MapKind::kUpNearest: return {floor_div(o.lo, m.a), floor_div(o.hi, m.a)};
  case MapKind::kUpBilinear: return {floor_div(o.lo, m.a) - 1, floor_div(o.hi, m.a) + 1};
  default: return o;
  }
}

// Per tensor, the spatial volume of the region buffer a kernel allocates (Scratch::
// alloc_spatial): the last layer's brick, clamped to the tensor, grown backwards through the
// need maps without clipping at the borders, the hull of what the consumers read; as
// kernels/cuda/codegen.cpp propagate_regions sizes the buffers, for any brick.
void allocated_spatial(const GroupGeometry& g, Scratch& s) {
  const int L = g.layer_count;
  const int T = g.tensor_count();
  s.alloc_spatial.assign(static_cast<size_t>(T), 1.0);
  for (int a = 1; a < kAxes; ++a) {
    const size_t as = static_cast<size_t>(a);
    std::fill(s.reg.begin(), s.reg.end(), Interval{});
    s.reg[static_cast<size_t>(L - 1)] = {0, std::min(g.last().brick[as], g.last().extent[as]) - 1};
    for (int e = static_cast<int>(g.edges.size()) - 1; e >= 0; --e) {
      const Edge& edge = g.edges[static_cast<size_t>(e)];
      const Interval r = s.reg[static_cast<size_t>(edge.consumer)];
      // Only window readers read an external input's staged copy.
      if (!r.empty() && (edge.producer < L || edge.window))
        s.reg[static_cast<size_t>(edge.producer)] =
            hull(s.reg[static_cast<size_t>(edge.producer)], apply_unclipped(edge.axis[as], r));
    }
    for (int t = 0; t < T; ++t)
      s.alloc_spatial[static_cast<size_t>(t)] *=
          static_cast<double>(s.reg[static_cast<size_t>(t)].size());
  }
}

// Counts the units of every mask group; returns the bytes of the weights of the layers that
// some unit computes (each read from DRAM once).
double count_units(const GroupGeometry& g, Scratch& s, Prediction& p) {
  const std::array<int, kAxes> alias = axis_aliases(g);
  const std::array<double, 4> distance = reuse_distances(g.last(), 1.0);
  s.input_splits.clear();
  uint64_t computed_layers = 0;
  for (size_t gi = 0; gi < s.groups.size(); ++gi) {
    sum_spatial_axes(g, s, s.groups[gi].mask, alias);
    add_group_counts(g, s, gi, distance, computed_layers, p);
  }
  double weights_unique = 0;
  for (int i = 0; i < g.layer_count; ++i)
    if ((computed_layers >> i) & 1u)
      weights_unique += g.params[static_cast<size_t>(i)] * g.dtype_bytes;
  return weights_unique;
}

// Shared memory (elements) of one image of a unit: the code generator's allocations replayed in
// its order on the same first-fit arena (core/smem_arena.h; kernels/cuda/codegen.cpp
// allocate_padded_smem), each buffer sized for any brick (Scratch::alloc_spatial) with all the
// tensor's channels: staged external inputs from the start to their last window reader (an
// elementwise reader reads them from global memory); each
// layer's region (the last layer writes global memory) until its last reader; a streamed
// input's two chunk buffers (GroupGeometry::stream_chunk; double buffered), and for the last
// layer its accumulator, while their reader runs.
double padded_smem_elements(const GroupGeometry& g, Scratch& s) {
  const int L = g.layer_count;
  const int T = g.tensor_count();
  const auto floats = [&](int t, double channels) {
    return static_cast<int64_t>(channels * s.alloc_spatial[static_cast<size_t>(t)]);
  };
  // The channels of tensor t one block holds: all, or a cluster CTA's slice.
  const auto channels = [&](int t) {
    const int64_t c = g.tensors[static_cast<size_t>(t)].extent[0];
    return static_cast<double>(g.cluster > 1 ? cluster_slice(c, g.cluster) : c);
  };
  SmemArena& arena = s.arena;
  arena.clear();
  std::vector<int64_t>& at = s.smem_at;
  at.assign(static_cast<size_t>(T), -1);
  for (int t = L; t < T; ++t)
    if (g.staged[static_cast<size_t>(t)] && g.stream_chunk[static_cast<size_t>(t)] == 0)
      at[static_cast<size_t>(t)] = arena.alloc(floats(t, channels(t)));
  for (int i = 0; i < L; ++i) {
    if (i < L - 1)
      at[static_cast<size_t>(i)] = arena.alloc(floats(i, channels(i)));
    for (int t = L; t < T; ++t) {
      const int chunk = g.stream_chunk[static_cast<size_t>(t)];
      if (chunk == 0 || g.first_use[static_cast<size_t>(t)] != i)
        continue;
      // A cluster CTA stages its part of each chunk, and accumulates its slice.
      const double held = g.cluster > 1 ? cluster_stream_slice(g.cluster) : chunk;
      const int64_t buffer =
          arena.alloc(kStreamBuffers * SmemArena::round_up(floats(t, held))); // double buffered
      const double acc_channels =
          g.cluster > 1 ? channels(L - 1) : static_cast<double>(g.last().brick[0]);
      const int64_t acc = i == L - 1 ? arena.alloc(floats(L - 1, acc_channels)) : -1;
      arena.free(buffer);
      if (acc >= 0)
        arena.free(acc);
    }
    for (int t = 0; t < T; ++t) {
      const size_t ts = static_cast<size_t>(t);
      const int last = t < L ? g.last_use[ts] : g.last_window_use[ts];
      if (at[ts] >= 0 && last == i && (t < i || t >= L)) {
        arena.free(at[ts]);
        at[ts] = -1;
      }
    }
  }
  return static_cast<double>(arena.peak());
}

// The passes of each streamed input, per unit that computes its reader (add_streamed_pass_costs),
// into the reader's accumulator: the last layer's cb x brick, else the reader's region in
// shared memory, for the unit's images.
void add_streamed_passes(const GroupGeometry& g, const StrategyContext& ctx, const Scratch& s,
                         Prediction& p) {
  const int L = g.layer_count;
  const auto box = [&](int i) {
    return static_cast<int64_t>(s.alloc_spatial[static_cast<size_t>(i)]) * g.batch_block;
  };
  int kernel_n = -1; // asked at the first streamed input only
  for (int t = L; t < g.tensor_count(); ++t) {
    const size_t ts = static_cast<size_t>(t);
    const int chunk = g.stream_chunk[ts];
    if (chunk == 0)
      continue;
    const int i = g.first_use[ts];
    const size_t is = static_cast<size_t>(i);
    if (kernel_n < 0)
      kernel_n = kernel_wgmma_n(g, ctx, true, box);
    const double per_pass = g.cluster > 1 ? cluster_stream_slice(g.cluster) * g.cluster : chunk;
    const double passes =
        std::ceil(static_cast<double>(g.tensors[ts].extent[0]) / std::max(per_pass, 1.0));
    const double channels = i == L - 1 ? static_cast<double>(g.last().brick[0])
                                       : static_cast<double>(g.tensors[is].extent[0]);
    const double acc = channels * s.alloc_spatial[is] * static_cast<double>(g.batch_block);
    add_streamed_pass_costs(passes, acc, static_cast<double>(p.bricks_per_layer[is]),
                            streamed_acc_in_registers(g, ctx, true, box, i, kernel_n), p);
  }
}

// A cluster unit's reads of other CTAs' shared memory: every CTA reads the channels of a
// groups-1 conv's input it does not hold, (cl − 1) × the region × its channels per unit
// (count_units left the one mask group's sums in Scratch: cluster units hold every channel).
double cluster_dsmem_bytes(const GroupGeometry& g, const Scratch& s) {
  double elements = 0;
  for (int i = 0; i < g.layer_count; ++i) {
    const Layer& l = *g.layers[static_cast<size_t>(i)];
    if (l.op != OpKind::kConv || l.groups != 1)
      continue;
    for (int e = g.edge_begin[static_cast<size_t>(i)]; e < g.edge_begin[static_cast<size_t>(i) + 1];
         ++e) {
      const int t = g.edges[static_cast<size_t>(e)].producer;
      const AxisAccum* sp = &s.spatial[static_cast<size_t>(t) * 4];
      elements += s.chan[static_cast<size_t>(t)].sum * sp[1].sum * sp[2].sum * sp[3].sum;
    }
  }
  return static_cast<double>(g.batch) * elements * kSharedElementBytes * (g.cluster - 1);
}

// DRAM: first touches of the inputs and weights, re-reads that fall out of L2, the output.
// Returns the L2 window, which the sync time uses too.
L2Window set_dram_bytes(const StrategyContext& ctx, const std::vector<ReuseSplit>& input_splits,
                        double weights_unique, const Occupancy& occ, double units, Prediction& p) {
  double input_first = 0;
  for (const ReuseSplit& r : input_splits)
    input_first += r.first;
  const L2Window win =
      merged_l2_window(ctx, occ, units, input_first + weights_unique + p.bytes_output);
  double reads = input_first + weights_unique;
  for (const ReuseSplit& r : input_splits)
    reads += win.misses(r);
  add_weight_rereads(win, weights_unique, p.bytes_weight, reads);
  p.dram_read_bytes = std::min(reads, p.bytes_input + p.bytes_weight);
  p.dram_write_bytes = p.bytes_output;
  p.dram_bytes = p.dram_read_bytes + p.dram_write_bytes;
  return win;
}

} // namespace

void predict_padded(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p) {
  Scratch& s = scratch();
  const int L = g.layer_count;
  const double dt = g.dtype_bytes;
  s.reg.resize(static_cast<size_t>(g.tensor_count()));
  allocated_spatial(g, s);
  group_channel_blocks(g, s);
  const double weights_unique = count_units(g, s, p);

  const double units = merged_units(g);
  const double cl = g.cluster;
  p.thread_blocks = to_count(units * cl);
  p.bytes_output = g.numel(L - 1) * dt;
  p.l1_bytes = p.bytes_input + p.bytes_weight + p.bytes_output;
  p.l2_bytes = p.l1_bytes;
  p.dsmem_bytes = cl > 1 ? cluster_dsmem_bytes(g, s) : 0;
  const Occupancy occ = set_block_footprint(
      g, ctx, padded_smem_elements(g, s) * static_cast<double>(g.batch_block) * kSharedElementBytes,
      "padded regions need", true, p);
  // The L2 window and the barriers count units: a cluster's CTAs run at once, in step.
  Occupancy occ_units = occ;
  occ_units.concurrent_blocks = occ.concurrent_blocks / cl;
  const L2Window win = set_dram_bytes(ctx, s.input_splits, weights_unique, occ_units, units, p);

  // Time: one barrier per layer per unit (a cluster's barrier for a cluster unit), one more
  // per extra pass of a streamed input.
  for (int i = 0; i < L; ++i)
    p.barriers += static_cast<double>(p.bricks_per_layer[static_cast<size_t>(i)]);
  add_streamed_passes(g, ctx, s, p);
  add_merged_kernel_time(g, ctx, occ, win, units * cl, p);
  finish_time(p);
}

} // namespace brickdl::model::detail
