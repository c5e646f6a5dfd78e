// Layerwise: one library kernel per layer (as cuDNN runs a model), each reading its inputs
// and weights whole and writing its output whole. Whether a tensor comes from L2 or DRAM is
// decided by an LRU of whole buffers over the group's kernels (model/detail/memory.h; a layer
// writing in place, Layer::in_place, rewrites its input's buffer). What a GEMM-shaped kernel
// issues to L2 is more than its tensors once: its tiles re-read them (library_tiles below).
#include <algorithm>
#include <cmath>

#include "model/strategies/strategies.h"

namespace brickdl::model::detail {

namespace {

struct Entry {
  int key = 0; // tensor index, or T + layer for a layer's weights
  double bytes = 0;
};

struct Scratch {
  std::vector<Entry> lru;         // most recent first, keyed by buffer
  std::vector<double> read_miss;  // per kernel
  std::vector<bool> written_back; // per tensor
  std::vector<int> buffer;        // per tensor: the buffer it is written to (an LRU key)
  std::vector<bool> rewritten;    // per layer: a later in-place layer writes over it
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Touches `key`; returns the bytes touched since its last use, itself included (infinity when
// it was never touched), and moves it to the front.
double touch(std::vector<Entry>& lru, int key, double bytes) {
  double depth = 0;
  for (size_t k = 0; k < lru.size(); ++k) {
    depth += lru[k].bytes;
    if (lru[k].key == key) {
      const Entry e = lru[k];
      lru.erase(lru.begin() + static_cast<std::ptrdiff_t>(k));
      lru.insert(lru.begin(), e);
      return depth;
    }
  }
  lru.insert(lru.begin(), Entry{key, bytes});
  return INFINITY;
}

double depth_of(const std::vector<Entry>& lru, int key) {
  double depth = 0;
  for (const Entry& e : lru) {
    depth += e.bytes;
    if (e.key == key)
      return depth;
  }
  return INFINITY;
}

// The buffers of the group's tensors: each its own, but for a layer that writes in place
// (Layer::in_place) over an intermediate whose last reader it is and which leaves the group
// nowhere: that layer's output lives in its input's buffer, and the input is rewritten.
void assign_buffers(const GroupGeometry& g, Scratch& s) {
  const int L = g.layer_count;
  s.buffer.resize(static_cast<size_t>(g.tensor_count()));
  for (int t = 0; t < g.tensor_count(); ++t)
    s.buffer[static_cast<size_t>(t)] = t;
  s.rewritten.assign(static_cast<size_t>(L), false);
  for (int i = 0; i < L; ++i) {
    const size_t is = static_cast<size_t>(i);
    if (!g.layers[is]->in_place || g.edge_begin[is + 1] != g.edge_begin[is] + 1)
      continue;
    const int t = g.edges[static_cast<size_t>(g.edge_begin[is])].producer;
    if (t >= L || g.last_use[static_cast<size_t>(t)] != i ||
        g.graph->is_output(g.tensor_ids[static_cast<size_t>(t)]))
      continue;
    s.buffer[is] = s.buffer[static_cast<size_t>(t)];
    s.rewritten[static_cast<size_t>(t)] = true;
  }
}

// Pass 1: an LRU of whole buffers over the group's kernels decides which reads miss
// (Scratch::read_miss, per kernel) and which intermediates are written back to DRAM
// (Scratch::written_back): those evicted before a read (the read misses), and those not
// resident when the group ends. L2 writes back, so a dirty line costs one DRAM write when it
// is evicted: a tensor rewritten in place while resident costs none, and one still resident
// at the end is dead scratch that the next kernel overwrites in L2 (model/detail/memory.h).
void simulate_l2(const GroupGeometry& g, double share, Scratch& s) {
  const int L = g.layer_count;
  const int T = g.tensor_count();
  const double dt = g.dtype_bytes;
  assign_buffers(g, s);
  s.lru.clear();
  s.read_miss.assign(static_cast<size_t>(L), 0.0);
  s.written_back.assign(static_cast<size_t>(T), false);
  for (int i = 0; i < L; ++i) {
    for (int e = g.edge_begin[static_cast<size_t>(i)]; e < g.edge_begin[static_cast<size_t>(i) + 1];
         ++e) {
      const int t = g.edges[static_cast<size_t>(e)].producer;
      const double bytes = g.numel(t) * dt;
      const double depth = touch(s.lru, s.buffer[static_cast<size_t>(t)], bytes);
      if (depth > share) {
        s.read_miss[static_cast<size_t>(i)] += bytes;
        if (t < L)
          s.written_back[static_cast<size_t>(t)] = true; // it left L2 dirty
      }
    }
    const double wbytes = g.params[static_cast<size_t>(i)] * dt;
    if (wbytes > 0) {
      touch(s.lru, T + i, wbytes); // weights: each read by one kernel, cold
      s.read_miss[static_cast<size_t>(i)] += wbytes;
    }
    touch(s.lru, s.buffer[static_cast<size_t>(i)], g.numel(i) * dt); // write-allocated
  }
  for (int t = 0; t < L - 1; ++t)
    if (!s.rewritten[static_cast<size_t>(t)] &&
        depth_of(s.lru, s.buffer[static_cast<size_t>(t)]) > share)
      s.written_back[static_cast<size_t>(t)] = true;
}

// The tiles of a library kernel computing layer l as an implicit GEMM (conv, conv_transpose,
// linear: output positions × output channels of a group, K = input channels × taps). A CTA
// computes an mt × nt tile of it, loading the input rows of its positions (once per channel
// tile: the input is read ceil(channels per group / nt) times) and the weights of its
// channels (once per position tile: ceil(positions / mt) times). No real kernel moves less
// than the least of these over the tile shapes of the libraries' tensor-core and FMA
// kernels (64 to 256 on a side, at most 256 × 128 accumulators): that least is the estimate,
// with no halo, no split-K and no tile count kept up for occupancy, so it never exceeds what
// cuDNN issues. The operands' bytes once each are a floor no kernel spread over many SMs
// reaches (model/detail/memory.h, Layerwise L1 / L2 bytes). Other ops stream: 1 × 1.
struct LibraryTiles {
  double input = 1, weight = 1; // reads of the input and of the weights
};

LibraryTiles library_tiles(const Layer& l, double input_bytes, double weight_bytes) {
  if (l.op != OpKind::kConv && l.op != OpKind::kConvTranspose && l.op != OpKind::kLinear)
    return {};
  const double positions = static_cast<double>(l.out.n * l.out.spatial());
  const double channels = static_cast<double>(l.out.c / std::max(1, l.groups));
  LibraryTiles best{INFINITY, INFINITY};
  double least = INFINITY;
  for (double mt : {64.0, 128.0, 256.0})
    for (double nt : {64.0, 128.0, 256.0}) {
      if (mt * nt > kLibraryTileAccumulators)
        continue;
      const LibraryTiles t{std::ceil(channels / nt), std::ceil(positions / mt)};
      const double bytes = t.input * input_bytes + t.weight * weight_bytes;
      if (bytes < least) {
        least = bytes;
        best = t;
      }
    }
  return best;
}

// Pass 2, layer i's kernel: adds its bytes, FLOPs, blocks and roofline to p, and its cost to
// `kernels` when given.
void add_layer_kernel(const GroupGeometry& g, const StrategyContext& ctx, const Scratch& s, int i,
                      Prediction& p, std::vector<KernelCost>* kernels) {
  const int L = g.layer_count;
  const size_t is = static_cast<size_t>(i);
  const double dt = g.dtype_bytes;
  const Layer& l = *g.layers[is];
  double loads = 0;
  for (int e = g.edge_begin[is]; e < g.edge_begin[is + 1]; ++e) {
    const int t = g.edges[static_cast<size_t>(e)].producer;
    const double bytes = g.numel(t) * dt;
    (t < L ? p.bytes_intermediate_load : p.bytes_input) += bytes;
    loads += bytes;
  }
  const double wbytes = g.params[is] * dt;
  const double out = g.numel(i) * dt;
  p.bytes_weight += wbytes;
  (i == L - 1 ? p.bytes_output : p.bytes_intermediate_store) += out;
  const double flops = 2.0 * static_cast<double>(l.macs);
  p.flops += flops;
  const double write = (i == L - 1 || s.written_back[is]) ? out : 0.0;
  const double read = s.read_miss[is];
  const double l1 = loads + wbytes + out;
  const LibraryTiles tiles = library_tiles(l, loads, wbytes);
  p.l1_bytes += tiles.input * loads + tiles.weight * wbytes + out;
  const double blocks = std::max(1.0, std::ceil(g.numel(i) / kLibraryOutputsPerBlock));
  p.dram_read_bytes += read;
  p.dram_write_bytes += write;
  p.thread_blocks += static_cast<int64_t>(blocks);
  // The library at its roofline bound: cuDNN chooses tiles and split-K so that even a layer
  // with few outputs fills every SM, so the baseline is never charged for a grid we guessed
  // (`blocks` above is only the count reported). One block per SM is full utilisation. Its
  // L2 time takes the operands once (l1), not the tiles' re-reads: the baseline is never
  // charged for tiles we guessed either.
  const double top = add_kernel_roofline(ctx.gpu, ctx.coef, g.graph->dtype(), read + write, l1,
                                         flops, std::max(1, ctx.gpu.sm_count), 1.0, p);
  if (kernels)
    kernels->push_back({l.id, read, write, l1, flops, blocks, top + ctx.coef.launch_us * 1e-3});
}

} // namespace

void predict_layerwise(const GroupGeometry& g, const StrategyContext& ctx, Prediction& p,
                       std::vector<KernelCost>* kernels) {
  Scratch& s = scratch();
  const int L = g.layer_count;
  simulate_l2(g, ctx.coef.l2_share_bytes, s);
  if (kernels)
    kernels->clear();
  for (int i = 0; i < L; ++i)
    add_layer_kernel(g, ctx, s, i, p, kernels); // the bytes by kind once, l1_bytes tiled
  p.l2_bytes = p.l1_bytes;
  p.dram_bytes = p.dram_read_bytes + p.dram_write_bytes;
  p.launches = L;
  p.t_launch_ms = L * ctx.coef.launch_us * 1e-3;
  finish_time(p);
}

} // namespace brickdl::model::detail
