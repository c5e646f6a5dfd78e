#include "kernels/merged_executor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <thread>

#include "core/error.h"
#include "kernels/bricks.h"
#include "kernels/detail/block_ops.h"
#include "kernels/detail/parallel.h"
#include "kernels/reference.h"
#include "kernels/region.h"

namespace brickdl::kernels {

namespace {

using detail::Block;
using detail::ConstBlock;

// Where one input tensor of a group layer comes from.
struct Source {
  bool external = false;
  int index = 0; // external: index into the group's inputs; else: layer index in the group
  bool operator==(const Source& o) const = default;
};

// The distinct tensors a layer reads, each with the input slots that read it.
struct SourceSlots {
  Source source;
  std::vector<int> slots;
};

// The group's structure, resolved once per execution.
struct GroupInfo {
  const Graph* graph = nullptr;
  Group group;
  int size = 0;
  std::vector<const Layer*> layers;
  std::vector<std::vector<Source>> slot_source;            // [layer][slot]
  std::vector<std::vector<SourceSlots>> sources;           // [layer] distinct sources
  std::vector<std::vector<size_t>> slot_to_source;         // [layer][slot] index into sources
  std::vector<std::vector<std::pair<int, int>>> consumers; // [layer] (consumer layer, slot)
  std::vector<int> external_ids;
  std::vector<std::vector<std::pair<int, int>>> external_readers; // [external] (layer, slot)
  int64_t elem_bytes = 4;

  GroupInfo(const Graph& g, const Group& grp) : graph(&g), group(grp), size(grp.size()) {
    elem_bytes = dtype_bytes(g.dtype());
    external_ids = group_external_inputs(g, grp);
    external_readers.resize(external_ids.size());
    consumers.resize(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) {
      const Layer& l = g.layer(grp.first + i);
      layers.push_back(&l);
      std::vector<Source> slots;
      std::vector<SourceSlots> distinct;
      std::vector<size_t> to_source;
      for (int s = 0; s < static_cast<int>(l.inputs.size()); ++s) {
        const int p = l.inputs[static_cast<size_t>(s)];
        Source src;
        if (grp.contains(p)) {
          src.index = p - grp.first;
          consumers[static_cast<size_t>(src.index)].emplace_back(i, s);
        } else {
          src.external = true;
          src.index = static_cast<int>(std::find(external_ids.begin(), external_ids.end(), p) -
                                       external_ids.begin());
          external_readers[static_cast<size_t>(src.index)].emplace_back(i, s);
        }
        slots.push_back(src);
        auto it = std::find_if(distinct.begin(), distinct.end(),
                               [&](const SourceSlots& d) { return d.source == src; });
        to_source.push_back(static_cast<size_t>(it - distinct.begin()));
        if (it == distinct.end()) {
          distinct.push_back(SourceSlots{src, {s}});
        } else {
          it->slots.push_back(s);
        }
      }
      slot_source.push_back(std::move(slots));
      slot_to_source.push_back(std::move(to_source));
      sources.push_back(std::move(distinct));
    }
  }

  const Layer& layer(int i) const { return *layers[static_cast<size_t>(i)]; }
  const TensorShape& shape(int i) const { return layer(i).out; }
  int last() const { return size - 1; }

  // What layer i needs of `src` (the hull over the slots reading it) to produce `out`.
  Region need(int i, const SourceSlots& src, const Region& out) const {
    Region r;
    for (int s : src.slots)
      r = hull(r, input_need(*graph, layer(i), s, out));
    return r;
  }
};

int64_t block_flops(const Graph& g, const Layer& l, const Region& r) {
  if (l.op != OpKind::kConv || r.empty())
    return 0;
  const int64_t cin_g = g.layer(l.inputs[0]).out.c / l.groups;
  const Window& w = l.window;
  return 2 * r.volume() * cin_g * w.kernel[0] * w.kernel[1] * w.kernel[2];
}

// The share of a layer's parameters that computing `channels` of its output channels reads.
int64_t weight_share(const Layer& l, int64_t channels) {
  return l.out.c > 0 ? l.params * channels / l.out.c : 0;
}

ConstBlock image_block(const Tensor& t, int64_t n) {
  return ConstBlock{t.image(n), Region::whole(t.shape())};
}

// A growable scratch buffer that keeps its memory between uses.
float* scratch(std::vector<float>& buf, int64_t elems) {
  if (static_cast<int64_t>(buf.size()) < elems)
    buf.resize(static_cast<size_t>(elems));
  return buf.data();
}

int resolve_threads(int threads) {
  if (threads > 0)
    return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// ---- layerwise ----------------------------------------------------------------------------

// One layer over its whole output with the block kernels (the baseline's "library kernel"),
// in parallel over (image, block of output channels, slab of the outermost non-trivial
// spatial axis). Units keep many output channels, so a conv reuses its staged input across
// them; there are about four units per worker.
Tensor run_whole_layer(const Graph& g, const Layer& l, const std::vector<const Tensor*>& in,
                       const LayerWeights& w, int threads) {
  if (!traits(l.op).brickable)
    return run_layer(l, in, w);
  Tensor y(l.out);
  const int64_t want = 4 * int64_t{threads};
  const int64_t cblock = std::max<int64_t>(1, l.out.c * l.out.n / want);
  const int64_t cblocks = (l.out.c + cblock - 1) / cblock;
  const int axis = l.out.d > 1 ? 0 : l.out.h > 1 ? 1 : 2;
  const int64_t extent = l.out.dim(axis);
  const int64_t slabs =
      std::min(extent, std::max<int64_t>(1, (want + l.out.n * cblocks - 1) / (l.out.n * cblocks)));
  const int64_t slab = (extent + slabs - 1) / slabs;
  detail::parallel_for(l.out.n * cblocks * slabs, threads, [&](int64_t u, int) {
    const int64_t n = u / (cblocks * slabs), c = (u / slabs) % cblocks, s = u % slabs;
    Region what = Region::whole(l.out);
    what.c0 = c * cblock;
    what.c1 = std::min(l.out.c, (c + 1) * cblock);
    what.lo[static_cast<size_t>(axis)] = s * slab;
    what.hi[static_cast<size_t>(axis)] = std::min(extent, (s + 1) * slab);
    if (what.empty())
      return;
    std::vector<ConstBlock> blocks;
    for (const Tensor* t : in)
      blocks.push_back(image_block(*t, n));
    detail::compute_block(g, l, w, blocks, Block{y.image(n), Region::whole(l.out)}, what);
  });
  return y;
}

GroupResult run_layerwise(const GroupInfo& info, const std::vector<const Tensor*>& inputs,
                          const ModelWeights& weights, int threads) {
  GroupResult res;
  ExecCounters& k = res.counters;
  k.bricks_per_layer.assign(static_cast<size_t>(info.size), 0);
  std::vector<Tensor> outs(static_cast<size_t>(info.size));
  for (int i = 0; i < info.size; ++i) {
    const Layer& l = info.layer(i);
    std::vector<const Tensor*> in;
    for (const Source& s : info.slot_source[static_cast<size_t>(i)])
      in.push_back(s.external ? inputs[static_cast<size_t>(s.index)]
                              : &outs[static_cast<size_t>(s.index)]);
    outs[static_cast<size_t>(i)] = run_whole_layer(*info.graph, l, in, weights.at(l.id), threads);
    for (const SourceSlots& s : info.sources[static_cast<size_t>(i)]) {
      const int64_t bytes = in[static_cast<size_t>(s.slots[0])]->numel() * info.elem_bytes;
      (s.source.external ? k.bytes_loaded_input : k.bytes_loaded_intermediate) += bytes;
    }
    k.bytes_loaded_weight += l.params * info.elem_bytes;
    k.flops += 2 * l.macs;
    const int64_t out_bytes = l.out.numel() * info.elem_bytes;
    (i == info.last() ? k.bytes_stored_output : k.bytes_stored_intermediate) += out_bytes;
    // An intermediate is dead once its last in-group reader ran.
    for (const Source& s : info.slot_source[static_cast<size_t>(i)]) {
      if (s.external)
        continue;
      const auto& readers = info.consumers[static_cast<size_t>(s.index)];
      if (!readers.empty() && readers.back().first == i)
        outs[static_cast<size_t>(s.index)] = Tensor();
    }
  }
  res.output = std::move(outs.back());
  return res;
}

// ---- padded -------------------------------------------------------------------------------

GroupResult run_padded(const GroupInfo& info, const BrickShape& brick,
                       const std::vector<const Tensor*>& inputs, const ModelWeights& weights,
                       int threads) {
  const Graph& g = *info.graph;
  const int L = info.size;
  const BrickLayout units(info.shape(info.last()), brick);
  GroupResult res;
  res.output = Tensor(info.shape(info.last()), std::numeric_limits<float>::quiet_NaN());
  std::vector<ExecCounters> counters(static_cast<size_t>(threads));
  for (auto& c : counters)
    c.bricks_per_layer.assign(static_cast<size_t>(L), 0);
  // Per worker, reused across units: one buffer and one region per group layer.
  struct Scratch {
    std::vector<std::vector<float>> buffers;
    std::vector<Region> region;
    std::vector<ConstBlock> in;
  };
  std::vector<Scratch> scratches(static_cast<size_t>(threads));
  for (Scratch& sc : scratches) {
    sc.buffers.resize(static_cast<size_t>(L));
    sc.region.resize(static_cast<size_t>(L));
  }

  detail::parallel_for(units.num_bricks(), threads, [&](int64_t u, int t) {
    ExecCounters& k = counters[static_cast<size_t>(t)];
    Scratch& sc = scratches[static_cast<size_t>(t)];
    auto& buf = sc.buffers;
    auto& region = sc.region;
    auto& in = sc.in;
    const BrickCoord b = units.coord(u);
    region[static_cast<size_t>(L - 1)] = units.region(b);
    for (int i = L - 2; i >= 0; --i) {
      Region r;
      for (const auto& [j, slot] : info.consumers[static_cast<size_t>(i)])
        r = hull(r, input_need(g, info.layer(j), slot, region[static_cast<size_t>(j)]));
      if (!r.empty()) {
        r.c0 = 0;
        r.c1 = info.shape(i).c;
      }
      region[static_cast<size_t>(i)] = r;
    }
    for (size_t e = 0; e < info.external_ids.size(); ++e) {
      Region r;
      for (const auto& [j, slot] : info.external_readers[e])
        r = hull(r, input_need(g, info.layer(j), slot, region[static_cast<size_t>(j)]));
      k.bytes_loaded_input += r.volume() * info.elem_bytes;
    }
    for (int i = 0; i < L; ++i) {
      const Region& what = region[static_cast<size_t>(i)];
      if (what.empty())
        continue;
      const Layer& l = info.layer(i);
      in.clear();
      for (const Source& s : info.slot_source[static_cast<size_t>(i)]) {
        if (s.external) {
          in.push_back(image_block(*inputs[static_cast<size_t>(s.index)], b.n));
        } else {
          in.push_back(ConstBlock{buf[static_cast<size_t>(s.index)].data(),
                                  region[static_cast<size_t>(s.index)]});
        }
      }
      const Block out = i == L - 1
                            ? Block{res.output.image(b.n), Region::whole(l.out)}
                            : Block{scratch(buf[static_cast<size_t>(i)], what.volume()), what};
      detail::compute_block(g, l, weights.at(l.id), in, out, what);
      k.flops += block_flops(g, l, what);
      k.bricks_per_layer[static_cast<size_t>(i)] += 1;
      k.bytes_loaded_weight += weight_share(l, what.channels()) * info.elem_bytes;
      if (i == L - 1)
        k.bytes_stored_output += what.volume() * info.elem_bytes;
    }
  });
  for (const auto& c : counters)
    res.counters.add(c);
  return res;
}

// ---- memoized -----------------------------------------------------------------------------

constexpr uint8_t kEmpty = 0, kClaimed = 1, kDone = 2;

// One intermediate layer's bricked store with a state flag per brick.
struct BrickStore {
  BrickLayout layout;
  std::unique_ptr<float[]> data; // uninitialised: only computed bricks are ever read
  std::unique_ptr<std::atomic<uint8_t>[]> state;

  BrickStore(const TensorShape& shape, const BrickShape& brick) : layout(shape, brick) {
    data.reset(new float[static_cast<size_t>(layout.storage_elems())]);
    state.reset(new std::atomic<uint8_t>[static_cast<size_t>(layout.num_bricks())]);
    for (int64_t i = 0; i < layout.num_bricks(); ++i)
      state[i].store(kEmpty, std::memory_order_relaxed);
  }
  float* brick(int64_t i) { return data.get() + i * layout.brick_elems(); }
};

// Deadlock freedom: a worker holds claims only on bricks it is computing, and while computing
// a brick of layer i it waits only for bricks of layers < i (producers come earlier in the
// topological order). Every wait therefore points to a strictly earlier layer, so the
// waits-for relation has no cycle, and the worker holding the awaited claim always progresses.
// A conflict does not wait at once: the worker first claims or checks every other brick it
// needs (doing useful work meanwhile) and waits for the conflicting ones last.
class MemoRun {
public:
  MemoRun(const GroupInfo& info, const BrickShape& brick, const std::vector<const Tensor*>& inputs,
          const ModelWeights& weights, int threads)
      : info_(info), inputs_(inputs), weights_(weights), last_(info.shape(info.last()), brick),
        workers_(static_cast<size_t>(threads)) {
    for (int i = 0; i < info.last(); ++i)
      stores_.push_back(std::make_unique<BrickStore>(info.shape(i), brick));
    for (auto& w : workers_) {
      w.counters.bricks_per_layer.assign(static_cast<size_t>(info.size), 0);
      w.levels.resize(static_cast<size_t>(info.size));
    }
  }

  GroupResult run() {
    GroupResult res;
    res.output = Tensor(info_.shape(info_.last()), std::numeric_limits<float>::quiet_NaN());
    output_ = &res.output;
    detail::parallel_for(last_.num_bricks(), static_cast<int>(workers_.size()),
                         [&](int64_t b, int t) {
                           try {
                             compute(info_.last(), b, workers_[static_cast<size_t>(t)]);
                           } catch (...) {
                             abort_.store(true, std::memory_order_relaxed);
                             throw;
                           }
                         });
    for (const auto& w : workers_)
      res.counters.add(w.counters);
    return res;
  }

private:
  // Scratch of one worker for computing a brick of one layer; reused, so the hot path does
  // not allocate. compute(i) recurses only into layers < i, so each layer's level is in use
  // by at most one brick at a time.
  struct Level {
    std::vector<Region> needs;               // per distinct source
    std::vector<std::vector<float>> buffers; // gathered intermediate regions, per source
    std::vector<ConstBlock> blocks;          // per source
    std::vector<ConstBlock> inputs;          // per input slot
    std::vector<int64_t> bricks, deferred;   // producer bricks being ensured
  };
  struct Worker {
    ExecCounters counters;
    std::vector<Level> levels; // [layer]
  };

  const BrickLayout& layout(int i) const {
    return i == info_.last() ? last_ : stores_[static_cast<size_t>(i)]->layout;
  }

  // Makes every listed brick of intermediate layer p DONE, computing the EMPTY ones.
  // `deferred` is scratch of the caller's level.
  void ensure(int p, const std::vector<int64_t>& bricks, std::vector<int64_t>& deferred,
              Worker& w) {
    BrickStore& st = *stores_[static_cast<size_t>(p)];
    ExecCounters& k = w.counters;
    k.memo_lookups += static_cast<int64_t>(bricks.size());
    deferred.clear();
    for (int64_t b : bricks) {
      uint8_t s = st.state[b].load(std::memory_order_acquire);
      if (s == kEmpty && st.state[b].compare_exchange_strong(s, kClaimed, std::memory_order_acq_rel,
                                                             std::memory_order_acquire)) {
        k.memo_claims += 1;
        compute(p, b, w);
        st.state[b].store(kDone, std::memory_order_release);
      } else if (s == kDone) {
        k.memo_hits += 1;
      } else {
        k.memo_conflicts += 1;
        deferred.push_back(b);
      }
    }
    for (int64_t b : deferred) {
      for (int spins = 0; st.state[b].load(std::memory_order_acquire) != kDone; ++spins) {
        if (abort_.load(std::memory_order_relaxed))
          throw InternalError("memoized execution aborted by another worker's failure");
        if (spins > 64)
          std::this_thread::yield();
      }
    }
  }

  // Computes brick b of group layer i into its store (or the output for the last layer).
  void compute(int i, int64_t b, Worker& w) {
    const Graph& g = *info_.graph;
    const Layer& l = info_.layer(i);
    const BrickCoord bc = layout(i).coord(b);
    const Region what = layout(i).region(bc);
    const auto& sources = info_.sources[static_cast<size_t>(i)];
    Level& lv = w.levels[static_cast<size_t>(i)];
    // First make every needed producer brick available, then gather (the recursion uses the
    // levels of earlier layers only, so this level's buffers stay valid).
    lv.needs.resize(sources.size());
    for (size_t s = 0; s < sources.size(); ++s) {
      lv.needs[s] = info_.need(i, sources[s], what);
      if (sources[s].source.external || lv.needs[s].empty())
        continue;
      const int p = sources[s].source.index;
      layout(p).bricks_touching(bc.n, lv.needs[s], &lv.bricks);
      ensure(p, lv.bricks, lv.deferred, w);
    }
    ExecCounters& k = w.counters;
    lv.blocks.resize(sources.size());
    if (lv.buffers.size() < sources.size())
      lv.buffers.resize(sources.size());
    for (size_t s = 0; s < sources.size(); ++s) {
      const Source& src = sources[s].source;
      const Region& need = lv.needs[s];
      const int64_t bytes = need.volume() * info_.elem_bytes;
      if (src.external) {
        lv.blocks[s] = image_block(*inputs_[static_cast<size_t>(src.index)], bc.n);
        k.bytes_loaded_input += bytes;
      } else {
        float* dst = scratch(lv.buffers[s], need.volume());
        gather_region(stores_[static_cast<size_t>(src.index)]->data.get(), layout(src.index), bc.n,
                      need, dst);
        lv.blocks[s] = ConstBlock{dst, need};
        k.bytes_loaded_intermediate += bytes;
      }
    }
    lv.inputs.clear();
    for (size_t s : info_.slot_to_source[static_cast<size_t>(i)])
      lv.inputs.push_back(lv.blocks[s]);
    const bool is_last = i == info_.last();
    const Block out =
        is_last ? Block{output_->image(bc.n), Region::whole(l.out)}
                : Block{stores_[static_cast<size_t>(i)]->brick(b), layout(i).storage_region(bc)};
    detail::compute_block(g, l, weights_.at(l.id), lv.inputs, out, what);
    k.flops += block_flops(g, l, what);
    k.bricks_per_layer[static_cast<size_t>(i)] += 1;
    k.bytes_loaded_weight += weight_share(l, what.channels()) * info_.elem_bytes;
    (is_last ? k.bytes_stored_output : k.bytes_stored_intermediate) +=
        what.volume() * info_.elem_bytes;
  }

  const GroupInfo& info_;
  const std::vector<const Tensor*>& inputs_;
  const ModelWeights& weights_;
  BrickLayout last_;
  std::vector<std::unique_ptr<BrickStore>> stores_;
  std::vector<Worker> workers_;
  Tensor* output_ = nullptr;
  std::atomic<bool> abort_{false};
};

} // namespace

// ---- counters -----------------------------------------------------------------------------

int64_t ExecCounters::bricks_computed() const {
  int64_t s = 0;
  for (int64_t b : bricks_per_layer)
    s += b;
  return s;
}

void ExecCounters::add(const ExecCounters& o) {
  flops += o.flops;
  useful_flops += o.useful_flops;
  if (bricks_per_layer.size() < o.bricks_per_layer.size())
    bricks_per_layer.resize(o.bricks_per_layer.size(), 0);
  for (size_t i = 0; i < o.bricks_per_layer.size(); ++i)
    bricks_per_layer[i] += o.bricks_per_layer[i];
  memo_claims += o.memo_claims;
  memo_hits += o.memo_hits;
  memo_conflicts += o.memo_conflicts;
  memo_lookups += o.memo_lookups;
  bytes_loaded_input += o.bytes_loaded_input;
  bytes_loaded_weight += o.bytes_loaded_weight;
  bytes_loaded_intermediate += o.bytes_loaded_intermediate;
  bytes_stored_intermediate += o.bytes_stored_intermediate;
  bytes_stored_output += o.bytes_stored_output;
}

std::map<std::string, double> ExecCounters::to_map() const {
  std::map<std::string, double> m;
  const auto put = [&](const std::string& k, int64_t v) { m[k] = static_cast<double>(v); };
  put("flops", flops);
  put("useful_flops", useful_flops);
  put("bricks_computed", bricks_computed());
  for (size_t i = 0; i < bricks_per_layer.size(); ++i)
    put("bricks_computed." + std::to_string(i), bricks_per_layer[i]);
  put("memo_claims", memo_claims);
  put("memo_hits", memo_hits);
  put("memo_conflicts", memo_conflicts);
  put("memo_lookups", memo_lookups);
  put("bytes_loaded.input", bytes_loaded_input);
  put("bytes_loaded.weight", bytes_loaded_weight);
  put("bytes_loaded.intermediate", bytes_loaded_intermediate);
  put("bytes_stored.intermediate", bytes_stored_intermediate);
  put("bytes_stored.output", bytes_stored_output);
  put("bytes_loaded", bytes_loaded());
  put("bytes_stored", bytes_stored());
  return m;
}

// ---- entry points -------------------------------------------------------------------------

std::string unsupported_reason(const Graph& g, const Candidate& c) {
  std::string why = group_invalid_reason(g, c.group);
  if (!why.empty() || c.strategy == Strategy::kLayerwise)
    return why;
  if (c.brick.d < 1 || c.brick.h < 1 || c.brick.w < 1 || c.brick.cb < 0)
    return "brick " + c.brick.str() + " has an extent < 1 or a negative channel block";
  return brick_blocker(g, c.group);
}

GroupResult execute_group(const Graph& graph, const Candidate& candidate,
                          const std::vector<const Tensor*>& inputs, const ModelWeights& weights,
                          const ExecOptions& options) {
  GroupResult res;
  res.reason = unsupported_reason(graph, candidate);
  if (!res.reason.empty()) {
    res.supported = false;
    return res;
  }
  const GroupInfo info(graph, candidate.group);
  BRICKDL_CHECK(inputs.size() == info.external_ids.size(),
                "group needs " << info.external_ids.size() << " inputs, got " << inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k)
    BRICKDL_CHECK(inputs[k] && inputs[k]->shape() == graph.layer(info.external_ids[k]).out,
                  "input " << k << " of the group is not the output of layer "
                           << graph.layer(info.external_ids[k]).name);
  const int threads = resolve_threads(options.threads);
  switch (candidate.strategy) {
  case Strategy::kLayerwise: res = run_layerwise(info, inputs, weights, threads); break;
  case Strategy::kPadded: res = run_padded(info, candidate.brick, inputs, weights, threads); break;
  case Strategy::kMemoized:
    res = MemoRun(info, candidate.brick, inputs, weights, threads).run();
    break;
  }
  for (int id = candidate.group.first; id <= candidate.group.last; ++id)
    res.counters.useful_flops += 2 * graph.layer(id).macs;
  return res;
}

} // namespace brickdl::kernels
