#include "model/detail/geometry.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace brickdl::model::detail {

namespace {

AxisMap spatial_map(const Layer& l, int axis, int64_t producer_extent) {
  AxisMap m;
  m.extent = producer_extent;
  const size_t w = static_cast<size_t>(axis - 1); // Window slots are (d, h, w)
  switch (traits(l.op).spatial) {
  case SpatialRule::kWindow:
    m.kind = MapKind::kWindow;
    m.a = l.window.stride[w];
    m.b = l.window.pad[w];
    m.c = int64_t{l.window.dilation[w]} * (l.window.kernel[w] - 1);
    break;
  case SpatialRule::kUpsample:
    // A 2-D tensor is not scaled in depth.
    m.a = (axis == 1 && l.out.spatial_rank != 3) ? 1 : l.upsample_scale;
    m.kind = l.bilinear ? MapKind::kUpBilinear : MapKind::kUpNearest;
    break;
  case SpatialRule::kSame:
    // A broadcast operand (core/graph.h): its one element along the axis, for every brick.
    m.kind = producer_extent == 1 && l.out.dim(axis - 1) != 1 ? MapKind::kAll : MapKind::kIdentity;
    break;
  case SpatialRule::kWhole:
  case SpatialRule::kNone: m.kind = MapKind::kAll; break;
  }
  return m;
}

AxisMap channel_map(const Graph& graph, const Layer& l, int slot, int64_t producer_channels) {
  AxisMap m;
  m.extent = producer_channels;
  switch (traits(l.op).channels) {
  case ChannelRule::kConvGroups:
    if (l.groups == 1) {
      m.kind = MapKind::kAll;
    } else {
      m.kind = MapKind::kConvGroups;
      m.a = l.out_channels / l.groups;
      m.b = producer_channels / l.groups;
    }
    break;
  case ChannelRule::kConcatSlice:
    m.kind = MapKind::kShift;
    for (int s = 0; s < slot; ++s)
      m.a += graph.layer(l.inputs[static_cast<size_t>(s)]).out.c;
    break;
  case ChannelRule::kSlice: // [lo + begin, hi + begin]: a shift back by the begin
    m.kind = MapKind::kShift;
    m.a = -l.slice_begin;
    break;
  case ChannelRule::kSame: // broadcast over channels (core/graph.h): channel 0 for every block
    m.kind = producer_channels == 1 && l.out.c != 1 ? MapKind::kAll : MapKind::kIdentity;
    break;
  case ChannelRule::kWhole:
  case ChannelRule::kNone: m.kind = MapKind::kAll; break;
  }
  return m;
}

} // namespace

bool same_axis(const GroupGeometry& g, int a, int b) {
  const size_t x = static_cast<size_t>(a), y = static_cast<size_t>(b);
  for (const TensorGrid& t : g.tensors)
    if (t.extent[x] != t.extent[y] || t.brick[x] != t.brick[y])
      return false;
  for (const Edge& e : g.edges)
    if (!(e.axis[x] == e.axis[y]))
      return false;
  return true;
}

double GroupGeometry::numel(int t) const {
  const TensorGrid& g = tensors[static_cast<size_t>(t)];
  return static_cast<double>(batch) * static_cast<double>(g.extent[0]) *
         static_cast<double>(g.extent[1]) * static_cast<double>(g.extent[2]) *
         static_cast<double>(g.extent[3]);
}

namespace {

// The group's layers, then its external inputs (core/group.h), each with its extents.
void collect_tensors(const Graph& graph, const Group& grp, GroupGeometry& g) {
  const int L = g.layer_count;
  g.tensor_ids.clear();
  for (int id = grp.first; id <= grp.last; ++id)
    g.tensor_ids.push_back(id);
  for (int id : group_external_inputs(graph, grp))
    g.tensor_ids.push_back(id);
  g.external_count = static_cast<int>(g.tensor_ids.size()) - L;
  const int T = g.tensor_count();
  // Extents now (maps need the producers'); bricks come in build_geometry().
  g.tensors.resize(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) {
    const TensorShape& s = graph.layer(g.tensor_ids[static_cast<size_t>(t)]).out;
    BRICKDL_CHECK(std::max({s.c, s.d, s.h, s.w}) < (int64_t{1} << 30),
                  "tensor " << s.str() << " has an extent beyond the model's 32-bit arithmetic");
    g.tensors[static_cast<size_t>(t)].extent = {s.c, s.d, s.h, s.w};
  }
  g.first_use.assign(static_cast<size_t>(T), -1);
  g.last_use.assign(static_cast<size_t>(T), -1);
  g.last_window_use.assign(static_cast<size_t>(T), -1);
  g.staged.assign(static_cast<size_t>(T), false);
}

// FLOPs per output point and parameters of group layer i. A transposed conv gives its output
// points different tap counts (stride > 1): its FLOPs per point are the mean, 2 · MACs over its
// outputs, so that the whole output costs 2 · MACs (it runs only layer by layer: kWhole).
void layer_costs(const Graph& graph, const Layer& l, int i, GroupGeometry& g) {
  g.params[static_cast<size_t>(i)] = static_cast<double>(l.params);
  double& per_point = g.flops_per_point[static_cast<size_t>(i)];
  if (l.op == OpKind::kConv) {
    const int64_t cin = graph.layer(l.inputs[0]).out.c;
    const int64_t kvol = int64_t{l.window.kernel[0]} * l.window.kernel[1] * l.window.kernel[2];
    per_point = 2.0 * static_cast<double>(cin / l.groups * kvol);
  } else if (l.op == OpKind::kLinear) {
    per_point = 2.0 * static_cast<double>(graph.layer(l.inputs[0]).out.c);
  } else if (l.op == OpKind::kConvTranspose && l.out.numel() > 0) {
    per_point = 2.0 * static_cast<double>(l.macs) / static_cast<double>(l.out.numel());
  }
}

// The edges of group layer i: one per distinct tensor it reads, with one channel map per
// input slot reading it; records first / last use and staging of the producers.
void add_edges(const Graph& graph, const Group& grp, const Layer& l, int i, GroupGeometry& g) {
  const int L = g.layer_count;
  g.edge_begin[static_cast<size_t>(i)] = static_cast<int>(g.edges.size());
  for (size_t s = 0; s < l.inputs.size(); ++s) {
    const int in = l.inputs[s];
    const int p =
        grp.contains(in)
            ? in - grp.first
            : static_cast<int>(std::find(g.tensor_ids.begin() + L, g.tensor_ids.end(), in) -
                               g.tensor_ids.begin());
    Edge* e = nullptr;
    for (int k = g.edge_begin[static_cast<size_t>(i)]; k < static_cast<int>(g.edges.size()); ++k)
      if (g.edges[static_cast<size_t>(k)].producer == p)
        e = &g.edges[static_cast<size_t>(k)];
    const TensorGrid& pg = g.tensors[static_cast<size_t>(p)];
    const AxisMap cm = channel_map(graph, l, static_cast<int>(s), pg.extent[0]);
    if (e == nullptr) {
      e = &g.edges.emplace_back();
      e->consumer = i;
      e->producer = p;
      e->slots = 1;
      e->window = traits(l.op).windowed();
      e->channel[0] = cm;
      for (int a = 1; a < kAxes; ++a)
        e->axis[static_cast<size_t>(a)] = spatial_map(l, a, pg.extent[static_cast<size_t>(a)]);
    } else if (e->slots < kMaxSlotsPerEdge) {
      e->channel[static_cast<size_t>(e->slots++)] = cm;
    } else if (g.structure_reason.empty()) {
      g.structure_reason = "layer '" + l.name + "' reads one tensor through more than " +
                           std::to_string(kMaxSlotsPerEdge) + " inputs";
    }
    if (g.first_use[static_cast<size_t>(p)] < 0)
      g.first_use[static_cast<size_t>(p)] = i;
    g.last_use[static_cast<size_t>(p)] = i;
    if (traits(l.op).windowed()) {
      g.staged[static_cast<size_t>(p)] = true;
      g.last_window_use[static_cast<size_t>(p)] = i;
    }
  }
}

// The external inputs whose padded loads are not one region (InputRead): a staged input that
// another op reads too, or an input that several non-window ops read.
void split_input_reads(GroupGeometry& g) {
  const int L = g.layer_count;
  g.split_reads.assign(static_cast<size_t>(g.tensor_count()), false);
  g.reads.clear();
  for (int t = L; t < g.tensor_count(); ++t) {
    InputRead staged{t, {}};
    std::vector<InputRead> direct;
    for (int e = 0; e < static_cast<int>(g.edges.size()); ++e) {
      const Edge& edge = g.edges[static_cast<size_t>(e)];
      if (edge.producer != t)
        continue;
      if (edge.window)
        staged.edges.push_back(e);
      else
        direct.push_back({t, {e}});
    }
    if (direct.size() + (staged.edges.empty() ? 0 : 1) < 2)
      continue;
    g.split_reads[static_cast<size_t>(t)] = true;
    if (!staged.edges.empty())
      g.reads.push_back(std::move(staged));
    g.reads.insert(g.reads.end(), direct.begin(), direct.end());
  }
}

// Everything but the brick-dependent tensors grid and brick_reason.
void build_structure(const Graph& graph, const Group& grp, GroupGeometry& g) {
  g.invalid_reason = group_invalid_reason(graph, grp);
  g.structure_reason = brick_blocker(graph, grp);
  const int L = g.layer_count;
  collect_tensors(graph, grp, g);
  g.flops_per_point.assign(static_cast<size_t>(L), 0.0);
  g.params.assign(static_cast<size_t>(L), 0.0);
  g.edges.clear();
  g.edge_begin.assign(static_cast<size_t>(L + 1), 0);
  for (int i = 0; i < L; ++i) {
    const Layer& l = *g.layers[static_cast<size_t>(i)];
    layer_costs(graph, l, i, g);
    add_edges(graph, grp, l, i, g);
  }
  g.edge_begin[static_cast<size_t>(L)] = static_cast<int>(g.edges.size());
  split_input_reads(g);
  g.stream_chunk.assign(static_cast<size_t>(g.tensor_count()), 0);
  if (g.invalid_reason.empty())
    for (int t = L; t < g.tensor_count(); ++t)
      g.stream_chunk[static_cast<size_t>(t)] =
          stream_chunk_channels(graph, grp, g.tensor_ids[static_cast<size_t>(t)]);
  g.first_use[static_cast<size_t>(L - 1)] = L - 1;
  g.last_use[static_cast<size_t>(L - 1)] = L - 1;
  if (L > kMaxGroupLayers && g.structure_reason.empty())
    g.structure_reason =
        "groups longer than " + std::to_string(kMaxGroupLayers) + " layers run layerwise only";
}

} // namespace

void build_geometry(const Graph& graph, const Candidate& candidate, GroupGeometry& g) {
  const Group& grp = candidate.group;
  BRICKDL_CHECK(grp.first >= std::max(graph.num_inputs(), 1) && grp.first <= grp.last &&
                    grp.last < graph.size(),
                "group [" << grp.first << ", " << grp.last << "] is not inside the graph's layers "
                          << graph.num_inputs() << ".." << graph.size() - 1);
  g.graph = &graph;
  g.group = grp;
  g.layer_count = grp.size();
  g.batch = graph.layer(grp.last).out.n;
  g.dtype_bytes = dtype_bytes(graph.dtype());
  g.layers.clear();
  for (int id = grp.first; id <= grp.last; ++id)
    g.layers.push_back(&graph.layer(id));
  // The group before was this one of this graph (an invalid one is rebuilt: it is rare).
  const bool reuse = g.has_structure && graph.uid() == g.graph_uid && grp == g.group_built &&
                     g.invalid_reason.empty() && g.structure_reason.empty();
  if (!reuse) {
    build_structure(graph, grp, g);
    g.graph_uid = graph.uid();
    g.group_built = grp;
    g.has_structure = true;
  }
  // The brick.
  const BrickShape& b = candidate.brick;
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    TensorGrid& tg = g.tensors[t];
    const TensorShape& s = graph.layer(g.tensor_ids[t]).out;
    const int64_t c = tg.extent[0];
    const int64_t cb = (b.cb <= 0 || b.cb > c) ? c : b.cb;
    if (s.spatial_rank == 0) {
      tg.brick = {cb, 1, 1, 1};
    } else {
      tg.brick = {cb, s.spatial_rank == 3 ? int64_t{b.d} : 1, int64_t{b.h}, int64_t{b.w}};
    }
    for (size_t a = 0; a < kAxes; ++a) {
      tg.brick[a] = std::max<int64_t>(1, tg.brick[a]);
      tg.grid[a] = div32(tg.extent[a] + tg.brick[a] - 1, tg.brick[a]);
    }
  }
  g.batch_block = b.images_per_unit(g.batch);
  g.batch_units = (g.batch + g.batch_block - 1) / g.batch_block;
  g.cluster = std::max(1, b.cl);
  g.brick_reason = g.structure_reason;
  if (g.brick_reason.empty() && (b.d < 1 || b.h < 1 || b.w < 1 || b.cb < 0 || b.nb < 1))
    g.brick_reason = "brick " + b.str() + ": extents and nb must be >= 1 and cb >= 0";
}

} // namespace brickdl::model::detail
