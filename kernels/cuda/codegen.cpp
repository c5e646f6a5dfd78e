#include "kernels/cuda/codegen.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/smem_arena.h"

namespace brickdl::cuda {

namespace {

using dev::GroupDesc;
using dev::LayerDesc;
using dev::RegionMap;

constexpr int kSmemAlignFloats = SmemArena::kAlignFloats; // 16-byte aligned buffers
constexpr int kBrickAlignFloats = 32;                     // memoized bricks start on 128-byte lines
constexpr int kStaticSmemReserve = 512; // bytes of the memoized kernel's static state

int to_int(int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw Unsupported(std::string(what) + " does not fit in 32 bits (" + std::to_string(v) + ")");
  return static_cast<int>(v);
}

dev::Dims dims_of(const TensorShape& s) {
  return {to_int(s.c, "channels"), to_int(s.d, "depth"), to_int(s.h, "height"),
          to_int(s.w, "width")};
}

int dim_of(const dev::Dims& d, int axis) {
  return axis == 0 ? d.d : axis == 1 ? d.h : d.w;
}

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

int clamp_cb(int cb, int channels) {
  return cb <= 0 || cb >= channels ? channels : cb;
}

std::string op_label(const Layer& l) {
  return l.name + " (" + op_name(l.op) + ")";
}

// The group's layers and external inputs, validated for the templates.
struct GroupInfo {
  std::vector<int> ids;    // graph ids
  std::vector<int> inputs; // external producers, in order of first read
  int rank = 2;
};

// Throws Unsupported when a layer of the group is outside what the templates implement.
void check_template_layer(const Graph& g, const Layer& l, int rank) {
  if (!traits(l.op).generated)
    throw Unsupported("no kernel template for " + op_label(l));
  if (l.out.spatial_rank != rank)
    throw Unsupported("mixed 2-D and 3-D tensors in one group at " + l.name);
  if (l.inputs.size() > static_cast<size_t>(dev::kMaxSources))
    throw Unsupported(op_label(l) + " has more than " + std::to_string(dev::kMaxSources) +
                      " inputs");
  for (int in : l.inputs) {
    if (g.layer(in).out.spatial_rank != rank)
      throw Unsupported("mixed 2-D and 3-D tensors in one group at " + l.name);
    // The elementwise template reads every operand at the output's coordinates, a broadcast
    // one at 0 along its axes of extent 1 (padded and memoized: from outside the group only,
    // group_launch).
    if (traits(l.op).spatial == SpatialRule::kSame && !(g.layer(in).out == l.out) &&
        !broadcasts(l, g.layer(in).out))
      throw Unsupported(op_label(l) + " reads a tensor of another shape");
  }
}

GroupInfo inspect_group(const Graph& g, const Group& group) {
  const std::string invalid = group_invalid_reason(g, group);
  if (!invalid.empty())
    throw Unsupported(invalid);
  if (group.size() > dev::kMaxLayers)
    throw Unsupported("groups of at most " + std::to_string(dev::kMaxLayers) + " layers");
  GroupInfo info;
  info.rank = g.layer(group.last).out.spatial_rank;
  for (int id = group.first; id <= group.last; ++id) {
    check_template_layer(g, g.layer(id), info.rank);
    info.ids.push_back(id);
  }
  info.inputs = group_external_inputs(g, group);
  if (static_cast<int>(info.inputs.size()) > dev::kMaxExternal)
    throw Unsupported("groups read at most " + std::to_string(dev::kMaxExternal) +
                      " external tensors");
  return info;
}

// How the graph's precision multiplies (and what global memory holds: storage_of).
int math_of(DType t) {
  switch (t) {
  case DType::kF32: return dev::kMathFp32;
  case DType::kTF32: return dev::kMathTf32;
  case DType::kBF16: return dev::kMathBf16;
  case DType::kF16: return dev::kMathFp16;
  }
  return dev::kMathFp32;
}

} // namespace

int storage_of(DType t) {
  return t == DType::kBF16  ? dev::kStorageBf16
         : t == DType::kF16 ? dev::kStorageF16
                            : dev::kStorageF32;
}

namespace {

// What an elementwise layer computes before its activation (brick_ops.cuh eltwise_value).
int eltwise_kind(OpKind op) {
  switch (op) {
  case OpKind::kMul:
  case OpKind::kChannelMul: return dev::kEwMul;
  case OpKind::kSub: return dev::kEwSub;
  case OpKind::kDiv: return dev::kEwDiv;
  case OpKind::kSigmoid: return dev::kEwSigmoid;
  case OpKind::kSilu: return dev::kEwSilu;
  case OpKind::kClip: return dev::kEwClip;
  case OpKind::kHardSwish: return dev::kEwHardSwish;
  case OpKind::kHardSigmoid: return dev::kEwHardSigmoid;
  case OpKind::kGelu: return dev::kEwGelu;
  case OpKind::kBatchNorm: return dev::kEwAffine;
  default: return dev::kEwSum; // add, relu, leaky relu
  }
}

int act_of(Activation a) {
  switch (a) {
  case Activation::kNone: return dev::kActNone;
  case Activation::kRelu: return dev::kActRelu;
  case Activation::kLeakyRelu: return dev::kActLeaky;
  case Activation::kClip: return dev::kActClip;
  case Activation::kSigmoid: return dev::kActSigmoid;
  case Activation::kSilu: return dev::kActSilu;
  case Activation::kHardSwish: return dev::kActHardSwish;
  case Activation::kHardSigmoid: return dev::kActHardSigmoid;
  case Activation::kGelu: return dev::kActGelu;
  }
  return dev::kActNone;
}

// Fills the fields of a layer that do not depend on the strategy.
LayerDesc describe_layer(const Graph& g, const Layer& l, const std::vector<int>& group_ids,
                         const std::vector<int>& inputs) {
  LayerDesc d{};
  d.slope = l.leaky_slope;
  switch (l.op) {
  case OpKind::kConv: d.op = dev::kOpConv; break;
  case OpKind::kMaxPool: d.op = dev::kOpMaxPool; break;
  case OpKind::kAvgPool: d.op = dev::kOpAvgPool; break;
  default: d.op = dev::kOpEltwise; break;
  }
  d.ew = eltwise_kind(l.op);
  d.clip_lo = l.clip_min;
  d.clip_hi = l.clip_max;
  d.act = act_of(applied_activation(l));
  d.num_src = static_cast<int>(l.inputs.size());
  for (int s = 0; s < d.num_src; ++s) {
    const int in = l.inputs[static_cast<size_t>(s)];
    const auto it = std::find(group_ids.begin(), group_ids.end(), in);
    if (it != group_ids.end()) {
      d.src_kind[s] = dev::kSrcLayer;
      d.src_index[s] = static_cast<int>(it - group_ids.begin());
    } else {
      d.src_kind[s] = dev::kSrcExternal;
      d.src_index[s] =
          static_cast<int>(std::find(inputs.begin(), inputs.end(), in) - inputs.begin());
    }
  }
  d.in = dims_of(g.layer(l.inputs.at(0)).out);
  d.out = dims_of(l.out);
  d.groups = l.op == OpKind::kConv ? l.groups : 1;
  for (int a = 0; a < 3; ++a) {
    const bool window = d.op != dev::kOpEltwise;
    d.k[a] = window ? l.window.kernel[static_cast<size_t>(a)] : 1;
    d.s[a] = window ? l.window.stride[static_cast<size_t>(a)] : 1;
    d.p[a] = window ? l.window.pad[static_cast<size_t>(a)] : 0;
    d.dl[a] = window ? l.window.dilation[static_cast<size_t>(a)] : 1;
  }
  d.count_include_pad = l.count_include_pad ? 1 : 0;
  d.has_bias = l.op == OpKind::kConv && l.bias ? 1 : 0;
  d.tile_co = 1;
  d.tile_px = 1;
  d.math = math_of(g.dtype());
  d.mma_m = 0;
  d.mma_n = 0;
  d.wgmma = 0;
  d.wgmma_smem = -1;
  d.acc_regs = 0;
  d.smem_out = -1;
  d.stream_c = 0;
  d.stream_smem = -1;
  d.stream_next = 0;
  d.acc_smem = -1;
  d.stage_smem = 0;
  return d;
}

// Region of the source a window (or elementwise) layer reads for output region `m`.
RegionMap input_map(const LayerDesc& d, const RegionMap& m) {
  RegionMap r{};
  for (int a = 0; a < 3; ++a) {
    r.scale[a] = m.scale[a] * d.s[a];
    r.offset[a] = m.offset[a] * d.s[a] - d.p[a];
    r.ext[a] = (m.ext[a] - 1) * d.s[a] + d.dl[a] * (d.k[a] - 1) + 1;
  }
  return r;
}

// Per-axis hull of two maps with the same scale (origins differ by constants).
void hull_into(RegionMap& acc, bool& set, const RegionMap& m, const std::string& where) {
  if (!set) {
    acc = m;
    set = true;
    return;
  }
  for (int a = 0; a < 3; ++a) {
    if (acc.scale[a] != m.scale[a])
      throw Unsupported(where + " is read at two resolutions within the group");
    const int lo = std::min(acc.offset[a], m.offset[a]);
    const int hi = std::max(acc.offset[a] + acc.ext[a], m.offset[a] + m.ext[a]);
    acc.offset[a] = lo;
    acc.ext[a] = hi - lo;
  }
}

int64_t map_volume(const RegionMap& m) {
  return int64_t{m.ext[0]} * m.ext[1] * m.ext[2];
}

// Tensor cores when core/group.h conv_on_tensor_cores says so (else false: the FMA path), in
// core/group.h choose_mma_tile's tile; wgmma (uses_wgmma) in blocks of whole warpgroups.
static_assert(dev::kMaxMmaM == kMmaMaxM && dev::kMaxMmaN == kMmaMaxN, "core/group.h tiles");

bool choose_mma_tile(LayerDesc& d, int64_t box_points, int channels_per_unit, int threads,
                     bool wgmma) {
  if (!conv_on_tensor_cores(d.math != dev::kMathFp32, d.out.c, d.groups, channels_per_unit))
    return false;
  d.wgmma = uses_wgmma(wgmma, threads) ? 1 : 0;
  const MmaTile t =
      brickdl::choose_mma_tile(box_points, d.out.c / d.groups, channels_per_unit, threads, d.wgmma);
  d.mma_m = t.m;
  d.mma_n = t.n;
  d.tile_co = 8; // the packed weights: [cout / 8][K][8]
  d.tile_px = 1;
  return true;
}

// Chooses the conv register tile: as large as possible (reuse) while every thread of the
// block still has work; tiles never straddle conv groups or channel blocks.
void choose_tile(LayerDesc& d, int64_t box_points_d_h, int box_w, int channels_per_unit,
                 int threads, bool wgmma) {
  if (d.op != dev::kOpConv ||
      choose_mma_tile(d, box_points_d_h * box_w, channels_per_unit, threads, wgmma))
    return;
  const int cout_g = d.out.c / d.groups;
  int tco = dev::kMaxTileCo;
  while (tco > 1 && (cout_g % tco != 0 || channels_per_unit % tco != 0))
    tco /= 2;
  int tpx = std::min(dev::kMaxTilePx, box_w);
  auto items = [&](int c, int p) {
    return int64_t{(channels_per_unit + c - 1) / c} * box_points_d_h * ((box_w + p - 1) / p);
  };
  while (items(tco, tpx) < threads && (tco > 1 || tpx > 1)) {
    if (tco >= tpx && tco > 1) {
      tco /= 2;
    } else {
      tpx = std::max(1, tpx / 2);
    }
  }
  d.tile_co = tco;
  d.tile_px = tpx;
}

static_assert(dev::kWgmmaTileFloats * 4 == kWgmmaTileBytes, "core/group.h sizes the wgmma tiles");

// A conv's box for the unit: output positions of all its images by the channels it computes.
struct ConvBox {
  int64_t points = 0;
  int channels = 0;
};
using ConvBoxes = std::array<ConvBox, dev::kMaxLayers>;

// When layers run on wgmma: one n tile for all of them, the narrowest any chose (each wgmma N is
// a copy of the inner loop; two in one kernel cost ptxas 56 more registers and a 288-byte stack
// frame in ResNet-50's layer3 bottleneck on 16-CTA clusters, and serialized its wgmma) and at
// most core/group.h max_kernel_wgmma_n (16-bit tensors with batch blocks: 2), the
// weight tiles after the unit's images (core/group.h wgmma_tile_floats), and which streamed wgmma
// convs keep their accumulators in registers across the passes (core/group.h
// wgmma_acc_in_registers, in the kernel's n tile).
void reserve_wgmma_tiles(GroupDesc& gd, int threads, const ConvBoxes& boxes) {
  int nt = 0;
  bool sixteen_bit = false; // the layers' math is the graph's: bf16 / fp16 store 16-bit tensors
  for (int l = 0; l < gd.num_layers; ++l)
    if (gd.layers[l].wgmma) {
      nt = nt == 0 ? gd.layers[l].mma_n : std::min(nt, gd.layers[l].mma_n);
      sixteen_bit = gd.layers[l].math == dev::kMathBf16 || gd.layers[l].math == dev::kMathFp16;
    }
  if (nt == 0)
    return;
  nt = std::min(nt, max_kernel_wgmma_n(sixteen_bit, gd.nb));
  for (int l = 0; l < gd.num_layers; ++l) {
    LayerDesc& d = gd.layers[l];
    if (d.wgmma)
      d.mma_n = nt; // nt divides theirs (powers of two): the tiles still tile
    d.wgmma_smem = d.wgmma ? gd.smem_floats : -1;
    d.acc_regs =
        d.wgmma && d.stream_c > 0 &&
        wgmma_acc_in_registers(boxes[static_cast<size_t>(l)].points,
                               boxes[static_cast<size_t>(l)].channels, MmaTile{d.mma_m, d.mma_n},
                               threads, d.math == dev::kMathTf32, gd.cluster, gd.num_layers);
  }
  gd.smem_floats = to_int(gd.smem_floats + wgmma_tile_floats(threads), "shared memory");
}

void check_smem(int64_t floats, int extra_bytes, const CodegenOptions& o, const std::string& what) {
  const int64_t bytes = floats * 4 + extra_bytes;
  if (bytes > o.max_smem_bytes)
    throw Unsupported(what + " needs " + std::to_string((bytes + 1023) / 1024) +
                      " KiB of shared memory per block; the target allows " +
                      std::to_string(o.max_smem_bytes / 1024) + " KiB");
}

BrickShape clamp_brick(const BrickShape& b, const TensorShape& out, int rank) {
  BrickShape r = b;
  r.d = rank == 3 ? static_cast<int>(std::min<int64_t>(std::max(b.d, 1), out.d)) : 1;
  r.h = static_cast<int>(std::min<int64_t>(std::max(b.h, 1), out.h));
  r.w = static_cast<int>(std::min<int64_t>(std::max(b.w, 1), out.w));
  return r;
}

void set_units(GroupDesc& gd, const BrickShape& brick, int cb_last, const dev::Dims& out,
               int batch) {
  gd.batch = batch;
  gd.nb = static_cast<int>(brick.images_per_unit(batch));
  gd.cluster = 1;
  gd.brick[0] = brick.d;
  gd.brick[1] = brick.h;
  gd.brick[2] = brick.w;
  gd.cb_last = cb_last;
  gd.nblk_last[0] = (out.c + cb_last - 1) / cb_last;
  gd.nblk_last[1] = (out.d + brick.d - 1) / brick.d;
  gd.nblk_last[2] = (out.h + brick.h - 1) / brick.h;
  gd.nblk_last[3] = (out.w + brick.w - 1) / brick.w;
}

int64_t unit_count(const GroupDesc& gd) {
  const int64_t batch_blocks = (int64_t{gd.batch} + gd.nb - 1) / gd.nb;
  return batch_blocks * gd.nblk_last[0] * gd.nblk_last[1] * gd.nblk_last[2] * gd.nblk_last[3];
}

// Padded regions, backwards from the last layer's brick: each producer's region (per
// axis, a map of the unit's origin) is the hull of what its readers need; external inputs
// read by window layers are staged in shared memory over the hull of their readers' needs.
void propagate_regions(GroupDesc& gd, const BrickShape& brick, const std::string& what) {
  const int L = gd.num_layers;
  std::vector<bool> set(static_cast<size_t>(L), false);
  std::vector<bool> ext_set(static_cast<size_t>(gd.num_external), false);
  gd.layers[L - 1].region = RegionMap{{1, 1, 1}, {0, 0, 0}, {brick.d, brick.h, brick.w}};
  set[static_cast<size_t>(L - 1)] = true;
  for (int l = L - 1; l >= 0; --l) {
    const LayerDesc& d = gd.layers[l];
    const RegionMap need = input_map(d, d.region);
    for (int s = 0; s < d.num_src; ++s) {
      if (d.src_kind[s] == dev::kSrcLayer) {
        const int p = d.src_index[s];
        bool was = set[static_cast<size_t>(p)];
        hull_into(gd.layers[p].region, was, need, what);
        set[static_cast<size_t>(p)] = was;
      } else if (d.op != dev::kOpEltwise) {
        const int e = d.src_index[s];
        bool was = ext_set[static_cast<size_t>(e)];
        hull_into(gd.ext[e].region, was, need, what);
        ext_set[static_cast<size_t>(e)] = was;
        gd.ext[e].staged = 1;
      }
    }
  }
  for (int l = 0; l < L; ++l)
    if (!set[static_cast<size_t>(l)])
      throw Unsupported(what + ": a layer's output is read by no layer of the group");
}

// The last layer reading each intermediate layer's region / each staged external input's
// copy in shared memory (-1: none). An elementwise layer reads an external operand from global
// memory at the output's own coordinates (padded.cuh padded_layer; the data sits in L2, read
// moments ago by the staging), so it does not keep the staged copy alive: a residual add
// would otherwise hold the block's input, all its channels, through the whole group.
struct LastReaders {
  std::vector<int> layer, ext;
  explicit LastReaders(const GroupDesc& gd)
      : layer(static_cast<size_t>(gd.num_layers), -1),
        ext(static_cast<size_t>(gd.num_external), -1) {
    for (int l = 0; l < gd.num_layers; ++l) {
      const LayerDesc& d = gd.layers[l];
      for (int s = 0; s < d.num_src; ++s) {
        const size_t i = static_cast<size_t>(d.src_index[s]);
        if (d.src_kind[s] == dev::kSrcLayer)
          layer[i] = l;
        else if (d.op != dev::kOpEltwise)
          ext[i] = l;
      }
    }
  }
};

// Marks the external inputs that their one conv reader streams in channel chunks
// (stream_chunk_channels, core/group.h; in a cluster kernel a chunk is every rank's
// cluster_stream_slice); `ids`: the graph ids of the external slots.
void mark_streamed(GroupDesc& gd, const Graph& g, const Group& group, const std::vector<int>& ids) {
  for (int e = 0; e < gd.num_external; ++e) {
    int chunk = stream_chunk_channels(g, group, ids[static_cast<size_t>(e)]);
    if (chunk == 0)
      continue;
    if (gd.cluster > 1) {
      gd.ext[e].cslice = cluster_stream_slice(gd.cluster);
      chunk = gd.ext[e].cslice * gd.cluster;
    }
    for (int l = 0; l < gd.num_layers; ++l) {
      LayerDesc& d = gd.layers[l];
      if (d.num_src == 1 && d.src_kind[0] == dev::kSrcExternal && d.src_index[0] == e) {
        d.stream_c = chunk;
        gd.ext[e].streamed = 1;
      }
    }
  }
}

// Shared memory of a padded unit: staged inputs live until their last window reader (not an
// elementwise one: LastReaders), intermediates until their last reader; a streamed input's chunk
// buffer (and a last layer's accumulator) only while its reader runs. Returns the peak (floats).
int64_t allocate_padded_smem(GroupDesc& gd) {
  const int L = gd.num_layers;
  const LastReaders last(gd);
  SmemArena smem;
  // The channels of a tensor one block holds: its slice in a cluster kernel.
  auto held = [&](int channels, int cslice) { return int64_t{gd.cluster > 1 ? cslice : channels}; };
  for (int e = 0; e < gd.num_external; ++e) {
    if (!gd.ext[e].staged || gd.ext[e].streamed)
      continue;
    gd.ext[e].smem =
        to_int(smem.alloc(held(gd.ext[e].dims.c, gd.ext[e].cslice) * map_volume(gd.ext[e].region)),
               "shared memory offset");
  }
  for (int l = 0; l < L; ++l) {
    LayerDesc& d = gd.layers[l];
    if (l < L - 1)
      d.smem_out = to_int(smem.alloc(held(d.out.c, d.cslice) * map_volume(d.region)),
                          "shared memory offset");
    if (d.stream_c > 0) { // live during this layer only; a last layer adds its accumulator
      const dev::ExternalDesc& x = gd.ext[d.src_index[0]];
      const int64_t chunk = SmemArena::round_up(held(d.stream_c, x.cslice) * map_volume(x.region));
      d.stream_next = to_int(chunk, "shared memory offset");
      d.stream_smem = to_int(smem.alloc(kStreamBuffers * chunk), "shared memory offset");
      const bool acc = l == L - 1;
      if (acc)
        d.acc_smem =
            to_int(smem.alloc(held(gd.cb_last, d.cslice) * gd.brick[0] * gd.brick[1] * gd.brick[2]),
                   "shared memory offset");
      smem.free(d.stream_smem);
      if (acc)
        smem.free(d.acc_smem);
    }
    for (int e = 0; e < gd.num_external; ++e)
      if (gd.ext[e].staged && !gd.ext[e].streamed && last.ext[static_cast<size_t>(e)] == l)
        smem.free(gd.ext[e].smem);
    for (int p = 0; p < l; ++p)
      if (last.layer[static_cast<size_t>(p)] == l)
        smem.free(gd.layers[p].smem_out);
  }
  return smem.peak();
}

// Padded (also the single-layer kernels of the layer-by-layer baseline).
void plan_padded(GroupDesc& gd, const BrickShape& brick, int threads, const CodegenOptions& o,
                 const std::string& what) {
  propagate_regions(gd, brick, what);
  if (gd.cluster > 1) { // every tensor split by channels over the ranks (core/group.h)
    for (int l = 0; l < gd.num_layers; ++l)
      gd.layers[l].cslice = cluster_slice(gd.layers[l].out.c, gd.cluster);
    for (int e = 0; e < gd.num_external; ++e)
      if (gd.ext[e].staged && !gd.ext[e].streamed) // streamed: mark_streamed
        gd.ext[e].cslice = cluster_slice(gd.ext[e].dims.c, gd.cluster);
  }
  const int64_t peak = allocate_padded_smem(gd);
  ConvBoxes boxes{};
  for (int l = 0; l < gd.num_layers; ++l) {
    LayerDesc& d = gd.layers[l];
    const int chans = gd.cluster > 1 ? d.cslice : l == gd.num_layers - 1 ? gd.cb_last : d.out.c;
    // The conv's box holds every image of the unit (the templates' `images`).
    choose_tile(d, int64_t{gd.nb} * d.region.ext[0] * d.region.ext[1], d.region.ext[2], chans,
                threads, o.wgmma);
    boxes[static_cast<size_t>(l)] = {map_volume(d.region) * gd.nb, chans};
  }
  // The unit's images side by side: every image's regions live at once (a layer runs for all
  // of them between two barriers).
  gd.smem_image = to_int(round_up(peak, kSmemAlignFloats), "shared memory");
  gd.smem_floats = to_int(int64_t{gd.smem_image} * gd.nb, "shared memory");
  reserve_wgmma_tiles(gd, threads, boxes);
  check_smem(gd.smem_floats, 0, o, what);
}

// Memoized bricking of layer d (the candidate's extents clamped to its tensor, channel
// blocks of cb; the last layer's are the units'); intermediates get their place in the memo
// buffer and their flags. `memo` and `flags` are the running totals.
void layout_bricks(const GroupDesc& gd, LayerDesc& d, bool is_last, const BrickShape& brick, int cb,
                   int64_t& memo, int64_t& flags) {
  const int ext[3] = {std::min(brick.d, d.out.d), std::min(brick.h, d.out.h),
                      std::min(brick.w, d.out.w)};
  for (int a = 0; a < 3; ++a)
    d.bext[a] = ext[a];
  if (is_last) {
    d.cb = gd.cb_last;
    for (int a = 0; a < 4; ++a)
      d.nblk[a] = gd.nblk_last[a];
    return;
  }
  d.cb = clamp_cb(cb, d.out.c);
  d.nblk[0] = (d.out.c + d.cb - 1) / d.cb;
  for (int a = 0; a < 3; ++a)
    d.nblk[a + 1] = (dim_of(d.out, a) + ext[a] - 1) / ext[a];
  const int64_t bricks = int64_t{gd.batch} * d.nblk[0] * d.nblk[1] * d.nblk[2] * d.nblk[3];
  const int64_t bvol = int64_t{ext[0]} * ext[1] * ext[2];
  d.brick_stride = to_int(round_up(d.cb * bvol, kBrickAlignFloats), "brick size");
  d.memo_offset = to_int(memo, "memoized buffer offset");
  d.flag_offset = to_int(flags, "flag offset");
  memo += bricks * d.brick_stride;
  flags += bricks;
  to_int(memo, "memoized buffer size");
}

// The widest input channel range any channel block of window layer d reads.
int staged_channels(const LayerDesc& d) {
  int chans = 0;
  for (int cbk = 0; cbk < d.nblk[0]; ++cbk) {
    const int c0 = cbk * d.cb, c1 = std::min(c0 + d.cb, d.out.c);
    int lo = c0, hi = c1;
    if (d.op == dev::kOpConv) {
      const int cout_g = d.out.c / d.groups, cin_g = d.in.c / d.groups;
      lo = (c0 / cout_g) * cin_g;
      hi = ((c1 - 1) / cout_g + 1) * cin_g;
    }
    chans = std::max(chans, hi - lo);
  }
  return chans;
}

// Positions of the input region a window layer stages for one brick (halo included).
int64_t staged_points(const LayerDesc& d) {
  int64_t vol = 1;
  for (int a = 0; a < 3; ++a)
    vol *= int64_t{d.bext[a] - 1} * d.s[a] + int64_t{d.dl[a]} * (d.k[a] - 1) + 1;
  return vol;
}

// Floats of one memoized brick of layer d: cb channels over its extents (a streamed conv's
// accumulator).
int64_t brick_floats(const LayerDesc& d) {
  return int64_t{d.cb} * d.bext[0] * d.bext[1] * d.bext[2];
}

// Floats a window layer stages per brick: the whole brick's input region, times the widest
// channel range any of its channel blocks reads, or (streamed: stream_c > 0) two chunk buffers
// of stream_c channels (double buffered, stream_next apart) plus the accumulator after them
// (acc_smem).
int64_t staging_floats(LayerDesc& d) {
  const int64_t vol = staged_points(d);
  if (d.stream_c == 0)
    return vol * staged_channels(d);
  const int64_t chunk = round_up(vol * d.stream_c, kSmemAlignFloats);
  d.stream_next = to_int(chunk, "shared memory offset");
  d.acc_smem = to_int(kStreamBuffers * chunk, "shared memory offset");
  return kStreamBuffers * chunk + brick_floats(d);
}

void plan_memoized(GroupDesc& gd, const Graph& g, const std::vector<int>& ids,
                   const BrickShape& brick, int cb, int threads, const CodegenOptions& o,
                   const std::string& what, int64_t* memo_elements, int64_t* flag_count) {
  int64_t memo = 0, flags = 0, stage = 0;
  ConvBoxes boxes{};
  for (int l = 0; l < gd.num_layers; ++l) {
    LayerDesc& d = gd.layers[l];
    layout_bricks(gd, d, l == gd.num_layers - 1, brick, cb, memo, flags);
    if (d.op != dev::kOpEltwise) {
      // As the model decides it: for the unit's images together (core/group.h).
      d.stream_c = memoized_stream_chunk(g.layer(ids[static_cast<size_t>(l)]), staged_channels(d),
                                         staged_points(d) * gd.nb, brick_floats(d) * gd.nb,
                                         o.max_smem_bytes / 4);
      stage = std::max(stage, staging_floats(d));
    }
    for (int s = 0; s < d.num_src; ++s)
      if (d.op == dev::kOpEltwise && d.src_kind[s] == dev::kSrcLayer &&
          gd.layers[d.src_index[s]].cb != d.cb)
        throw Unsupported(what + ": elementwise operands bricked differently");
    d.stage_smem = 0;
    choose_tile(d, int64_t{gd.nb} * d.bext[0] * d.bext[1], d.bext[2], d.cb, threads, o.wgmma);
    boxes[static_cast<size_t>(l)] = {int64_t{gd.nb} * d.bext[0] * d.bext[1] * d.bext[2], d.cb};
  }
  // Each image of the unit stages at its own place (memoized.cuh).
  gd.smem_image = to_int(round_up(stage, kSmemAlignFloats), "shared memory");
  gd.smem_floats = to_int(int64_t{gd.smem_image} * gd.nb, "shared memory");
  reserve_wgmma_tiles(gd, threads, boxes);
  check_smem(gd.smem_floats, kStaticSmemReserve, o, what);
  *memo_elements = memo;
  *flag_count = flags;
}

std::string float_literal(float v) {
  // A clip without a bound (ONNX Clip's missing min / max) is ±infinity, which %a would write
  // as "inff": no literal spells it, the builtin is a constant expression.
  if (std::isinf(v))
    return v > 0 ? "__builtin_huge_valf()" : "(-__builtin_huge_valf())";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", static_cast<double>(v));
  return buf;
}
std::string literal(int v) {
  return std::to_string(v);
}
std::string literal(float v) {
  return float_literal(v);
}

// The minimum resident blocks per SM the kernel asks ptxas for: what caps its registers at
// kRegisterBudget per thread (64 K registers per SM on sm_80 and sm_90). Left to itself,
// ptxas also stops at 128 for 256-thread blocks but spills to get there: the memoized
// tensor-core kernels once the conv's tiles ran positions fastest (tf32 4x4/n2, sm_90:
// 128 registers, 12 bytes spilled; with the explicit hint 128 and none).
int launch_min_blocks(int threads) {
  constexpr int kRegistersPerSm = 64 * 1024;
  constexpr int kRegisterBudget = 128;
  return std::max(1, kRegistersPerSm / (threads * kRegisterBudget));
}

std::string kernel_text(const KernelLaunch& k, int index) {
  std::ostringstream os;
  const std::string fn = "desc_" + std::to_string(index);
  // A device-global constexpr (not a local copy): every field access folds to a constant
  // and nothing is copied to the stack (a local constexpr copy costs ~3 KB of local memory,
  // spills and 15x the compile time).
  os << "\nnamespace brickdl_gen {\n"
     << "__host__ __device__ constexpr brickdl::dev::GroupDesc " << fn << "() {\n"
     << desc_to_cpp(k.desc) << "}\n"
     << "__device__ constexpr brickdl::dev::GroupDesc k_" << fn << " = " << fn << "();\n"
     << "}  // namespace brickdl_gen\n\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << k.threads << ", "
     << launch_min_blocks(k.threads) << ") ";
  // A cluster kernel (desc.cluster > 1) gets its cluster dims at launch, not here
  // (__cluster_dims__ fixes them at compile time and cannot exceed the portable 8):
  // detail/generated_run.cu launches it with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION.
  os << k.symbol << "(const brickdl::dev::KernelArgs a) {\n"
     << "  brickdl::dev::run_block(brickdl_gen::k_" << fn
     << ", a, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));\n"
     << "}\n";
  return os.str();
}

} // namespace

std::vector<float> pack_conv_weights(const dev::LayerDesc& L, const std::vector<float>& w) {
  BRICKDL_CHECK(L.op == dev::kOpConv && L.tile_co >= 1, "packing a conv layer's weights");
  const int64_t tco = L.tile_co, cout = L.out.c, cin_g = L.in.c / L.groups;
  const int64_t kvol = int64_t{L.k[0]} * L.k[1] * L.k[2];
  BRICKDL_CHECK(static_cast<int64_t>(w.size()) == cout * cin_g * kvol,
                "weights of " << w.size() << " values for " << cout << "x" << cin_g << "x" << kvol);
  const int64_t tiles = (cout + tco - 1) / tco;
  std::vector<float> packed(static_cast<size_t>(tiles * tco * cin_g * kvol), 0.f);
  for (int64_t co = 0; co < cout; ++co)
    for (int64_t ci = 0; ci < cin_g; ++ci)
      for (int64_t tap = 0; tap < kvol; ++tap)
        packed[static_cast<size_t>((((co / tco) * cin_g + ci) * kvol + tap) * tco + co % tco)] =
            w[static_cast<size_t>((co * cin_g + ci) * kvol + tap)];
  return packed;
}

// The masks' bit positions, which prelude.cuh's #if lines name.
static_assert(dev::kActClip == 3 && dev::kActSigmoid == 4 && dev::kActSilu == 5 &&
                  dev::kActHardSwish == 6 && dev::kActHardSigmoid == 7 && dev::kActGelu == 8,
              "prelude.cuh BRICKDL_ACTS");
static_assert(dev::kEwSigmoid == 2 && dev::kEwSilu == 3 && dev::kEwClip == 4 &&
                  dev::kEwHardSwish == 7 && dev::kEwHardSigmoid == 8 && dev::kEwGelu == 9 &&
                  dev::kEwAffine == 10,
              "brick_ops.cuh BRICKDL_EWS");

PlanPaths plan_paths(const KernelPlan& plan) {
  PlanPaths p;
  for (const KernelLaunch& k : plan.launches)
    for (int l = 0; l < k.desc.num_layers; ++l) {
      const LayerDesc& d = k.desc.layers[l];
      p.streamed = p.streamed || d.stream_c > 0;
      p.acc_regs = p.acc_regs || d.acc_regs;
      p.cluster = p.cluster || k.desc.cluster > 1;
      p.storage = k.desc.storage;
      p.acts |= 1 << d.act;
      p.ews |= d.op == dev::kOpEltwise ? 1 << d.ew : 0;
      if (d.op != dev::kOpConv)
        continue;
      if (d.mma_m > 0) {
        ++p.convs_mma;
        p.convs_wgmma += d.wgmma ? 1 : 0;
        p.wgmma_nts |= d.wgmma ? d.mma_n : 0;
        p.mma_math = d.math;
      } else {
        ++p.convs_fma;
      }
    }
  return p;
}

std::string desc_to_cpp(const dev::GroupDesc& g) {
  std::ostringstream os;
  os << "  brickdl::dev::GroupDesc g{};\n";
#define BRICKDL_EMIT(f) os << "  g." #f " = " << literal(g.f) << ";\n";
  BRICKDL_GROUP_DESC_FIELDS(BRICKDL_EMIT)
#undef BRICKDL_EMIT
  for (int e = 0; e < g.num_external; ++e) {
    const dev::ExternalDesc& x = g.ext[e];
    const std::string p = "  g.ext[" + std::to_string(e) + "].";
#define BRICKDL_EMIT(f) os << p << #f " = " << literal(x.f) << ";\n";
    BRICKDL_EXTERNAL_DESC_FIELDS(BRICKDL_EMIT)
#undef BRICKDL_EMIT
  }
  for (int l = 0; l < g.num_layers; ++l) {
    const dev::LayerDesc& x = g.layers[l];
    const std::string p = "  g.layers[" + std::to_string(l) + "].";
#define BRICKDL_EMIT(f) os << p << #f " = " << literal(x.f) << ";\n";
    BRICKDL_LAYER_DESC_FIELDS(BRICKDL_EMIT)
#undef BRICKDL_EMIT
  }
  os << "  return g;\n";
  return os.str();
}

namespace {

// What every launch of a plan shares.
struct PlanContext {
  const Graph& g;
  const GroupInfo& info;
  const CodegenOptions& o;
  int batch;
  std::string what; // names the group and candidate in errors
};

// Layer-by-layer: one single-layer padded kernel for group layer i; intermediates are whole
// NCDHW tensors.
KernelLaunch layerwise_launch(const PlanContext& ctx, size_t i) {
  const Graph& g = ctx.g;
  const Layer& l = g.layer(ctx.info.ids[i]);
  KernelLaunch k;
  k.symbol = "brickdl_layer_" + std::to_string(i);
  k.threads = ctx.o.layerwise_threads;
  k.output = static_cast<int>(i);
  k.layers = {static_cast<int>(i)};
  std::vector<int> sources; // graph ids this layer reads, as the kernel's external slots
  for (int in : l.inputs)
    if (std::find(sources.begin(), sources.end(), in) == sources.end())
      sources.push_back(in);
  GroupDesc& gd = k.desc;
  gd.mode = dev::kModePadded;
  gd.num_layers = 1;
  gd.num_external = static_cast<int>(sources.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    gd.ext[s].dims = dims_of(g.layer(sources[s]).out);
    const auto& ids = ctx.info.ids;
    const auto& inputs = ctx.info.inputs;
    if (const auto it = std::find(ids.begin(), ids.end(), sources[s]); it != ids.end()) {
      k.inputs.push_back({false, static_cast<int>(it - ids.begin())});
    } else {
      const auto e = std::find(inputs.begin(), inputs.end(), sources[s]);
      k.inputs.push_back({true, static_cast<int>(e - inputs.begin())});
    }
  }
  gd.layers[0] = describe_layer(g, l, {}, sources);
  mark_streamed(gd, g, Group{l.id, l.id}, sources);
  const BrickShape tile = clamp_brick(ctx.o.layerwise_tile, l.out, ctx.info.rank);
  set_units(gd, tile, clamp_cb(ctx.o.layerwise_tile.cb, gd.layers[0].out.c), gd.layers[0].out,
            ctx.batch);
  plan_padded(gd, tile, k.threads, ctx.o, ctx.what + " layer " + l.name);
  k.smem_bytes = gd.smem_floats * 4;
  k.blocks = unit_count(gd);
  return k;
}

// The CTAs per unit of candidate `c` (GroupDesc::cluster); throws Unsupported for a cluster the
// target or the strategy cannot run.
int cluster_of(const Candidate& c, const GroupDesc& gd, const PlanContext& ctx) {
  const std::string why = cluster_problem(c.strategy, c.brick.cl, ctx.o.max_cluster, gd.cb_last,
                                          gd.layers[gd.num_layers - 1].out.c);
  if (!why.empty())
    throw Unsupported(ctx.what + ": " + why);
  return std::max(1, c.brick.cl);
}

// Padded / memoized: one kernel for the whole group, one block per unit (a brick of the last
// layer's output); a cluster of blocks per unit with brick.cl > 1.
KernelLaunch group_launch(const PlanContext& ctx, const Candidate& c, KernelPlan& plan) {
  const Graph& g = ctx.g;
  const GroupInfo& info = ctx.info;
  // What padded and memoized cannot run (core/group.h), e.g. a broadcast operand computed inside
  // the group; layer by layer can.
  if (const std::string why = brick_blocker(g, c.group); !why.empty())
    throw Unsupported(why);
  KernelLaunch k;
  k.symbol = "brickdl_group";
  k.threads = c.threads;
  k.output = static_cast<int>(info.ids.size()) - 1;
  GroupDesc& gd = k.desc;
  gd.mode = c.strategy == Strategy::kMemoized ? dev::kModeMemoized : dev::kModePadded;
  gd.num_layers = static_cast<int>(info.ids.size());
  gd.num_external = static_cast<int>(info.inputs.size());
  for (size_t s = 0; s < info.inputs.size(); ++s) {
    gd.ext[s].dims = dims_of(g.layer(info.inputs[s]).out);
    k.inputs.push_back({true, static_cast<int>(s)});
  }
  for (size_t i = 0; i < info.ids.size(); ++i) {
    gd.layers[i] = describe_layer(g, g.layer(info.ids[i]), info.ids, info.inputs);
    k.layers.push_back(static_cast<int>(i));
  }
  const Layer& last = g.layer(c.group.last);
  BrickShape want = c.brick;
  want.d = info.rank == 3 ? std::max(want.d, 1) : 1;
  want.h = std::max(want.h, 1);
  want.w = std::max(want.w, 1);
  const BrickShape brick = clamp_brick(want, last.out, info.rank);
  set_units(gd, brick, clamp_cb(c.brick.cb, to_int(last.out.c, "channels")), dims_of(last.out),
            ctx.batch);
  gd.cluster = cluster_of(c, gd, ctx);
  if (c.strategy == Strategy::kPadded)
    mark_streamed(gd, g, c.group, info.inputs);
  if (c.strategy == Strategy::kMemoized) {
    plan_memoized(gd, g, info.ids, want, c.brick.cb, k.threads, ctx.o, ctx.what,
                  &plan.memo_elements, &plan.flag_count);
  } else {
    plan_padded(gd, brick, k.threads, ctx.o, ctx.what);
  }
  k.smem_bytes = gd.smem_floats * 4;
  k.blocks = unit_count(gd) * gd.cluster;
  k.persistent = c.strategy == Strategy::kMemoized;
  return k;
}

// The translation unit for NVRTC: the templates and one kernel per launch.
std::string plan_source(const KernelPlan& plan, const std::string& what) {
  const PlanPaths paths = plan_paths(plan); // only these are compiled
  std::ostringstream src;
  src << "// Generated by brickdl for " << what << "\n"
      << "#define BRICKDL_CONV_FMA " << (paths.convs_fma > 0 ? 1 : 0) << "\n"
      << "#define BRICKDL_CONV_MMA " << paths.mma_math << "\n"
      << "#define BRICKDL_WGMMA "
      << (paths.convs_wgmma == 0                 ? 0
          : paths.convs_wgmma == paths.convs_mma ? 1
                                                 : -1)
      << "\n"
      << "#define BRICKDL_WGMMA_NTS " << paths.wgmma_nts << "\n"
      << "#define BRICKDL_ACC_REGS " << (paths.acc_regs ? 1 : 0) << "\n"
      << "#define BRICKDL_STREAMED " << (paths.streamed ? 1 : 0) << "\n"
      << "#define BRICKDL_CLUSTER " << (paths.cluster ? 1 : 0) << "\n"
      << "#define BRICKDL_STORAGE " << paths.storage << "\n"
      << "#define BRICKDL_ACTS " << paths.acts << "\n"
      << "#define BRICKDL_EWS " << paths.ews << "\n"
      << "#include \"kernels.cuh\"\n";
  for (size_t i = 0; i < plan.launches.size(); ++i)
    src << kernel_text(plan.launches[i], static_cast<int>(i));
  return src.str();
}

} // namespace

KernelPlan plan_kernels(const Graph& g, const Candidate& c, const CodegenOptions& o) {
  const GroupInfo info = inspect_group(g, c.group);
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32 != 0)
    throw Unsupported("threads per block must be a multiple of 32 in [32, 1024], not " +
                      std::to_string(c.threads));
  KernelPlan plan;
  plan.candidate = c;
  plan.layer_ids = info.ids;
  plan.input_ids = info.inputs;
  const PlanContext ctx{g, info, o, to_int(g.layer(c.group.last).out.n, "batch"),
                        "group " + g.layer(c.group.first).name + " .. " +
                            g.layer(c.group.last).name + " (" + c.config_str() + ")"};
  if (c.strategy == Strategy::kLayerwise) {
    if (const std::string why = cluster_problem(c.strategy, c.brick.cl, o.max_cluster, 0, 0);
        !why.empty())
      throw Unsupported(ctx.what + ": " + why);
    for (size_t i = 0; i < info.ids.size(); ++i)
      plan.launches.push_back(layerwise_launch(ctx, i));
  } else {
    plan.launches.push_back(group_launch(ctx, c, plan));
  }
  for (auto& k : plan.launches)
    k.desc.storage = storage_of(g.dtype());
  for (const auto& k : plan.launches)
    if (k.blocks > std::numeric_limits<int>::max())
      throw Unsupported(ctx.what + ": " + std::to_string(k.blocks) + " thread blocks is too many");
  plan.source = plan_source(plan, ctx.what);
  return plan;
}

} // namespace brickdl::cuda
