// Padded: one unit per brick of the last layer's output and batch block of images; every
// earlier layer recomputed over the unit's region in unit-local buffers (merged_executor.h).
// The CPU runs a unit's images one after the other; it counts what a GPU unit holding them
// together moves: the weights once per unit, the regions once per image. Unit buffers are
// blocked views of the worker's own storage, sized to the unit's regions: a brick sized to one
// core's L2 keeps every intermediate of the unit there.
#include <algorithm>
#include <limits>

#include "kernels/bricks.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/region_ops.h"
#include "kernels/strategies/strategies.h"

namespace brickdl::kernels::detail {

namespace {

class PaddedRun {
public:
  PaddedRun(const StrategyContext& ctx, const BrickShape& brick)
      : ctx_(ctx), info_(ctx.info), units_(info_.shape(info_.last()), brick),
        batch_block_(brick.images_per_unit(units_.shape().n)),
        blocks_((units_.shape().n + batch_block_ - 1) / batch_block_),
        workers_(static_cast<size_t>(ctx.threads)) {
    for (Worker& w : workers_) {
      w.counters.bricks_per_layer.assign(static_cast<size_t>(info_.size), 0);
      w.buffers.resize(static_cast<size_t>(info_.size));
      w.region.resize(static_cast<size_t>(info_.size));
    }
  }

  BlockedGroupResult run() {
    BlockedGroupResult res;
    res.output = cpu::BlockedTensor(info_.shape(info_.last()), ctx_.lanes);
    if (ctx_.poison)
      std::fill_n(res.output.data(), res.output.floats(), std::numeric_limits<float>::quiet_NaN());
    output_ = &res.output;
    cpu::parallel_units(blocks_ * units_.bricks_per_image(), ctx_.threads,
                        [&](int64_t u, int t) { run_unit(u, workers_[static_cast<size_t>(t)]); });
    for (const Worker& w : workers_)
      res.counters.add(w.counters);
    return res;
  }

private:
  // Per worker, reused across units: one buffer and one region per group layer. Aligned to
  // cache lines, so two workers never share one.
  struct alignas(64) Worker {
    ExecCounters counters;
    std::vector<std::vector<float>> buffers;
    std::vector<Region> region;
    std::vector<cpu::ConstBlockedView> in;
  };

  // Unit u: brick u % bricks_per_image of the images of batch block u / bricks_per_image.
  void run_unit(int64_t u, Worker& w) {
    const int64_t bpi = units_.bricks_per_image();
    const int64_t n0 = u / bpi * batch_block_;
    const int64_t n1 = std::min(n0 + batch_block_, units_.shape().n);
    for (int64_t n = n0; n < n1; ++n) {
      const BrickCoord b = units_.coord(n * bpi + u % bpi);
      plan_regions(b, w.region);
      count_input_loads(w.region, w.counters);
      for (int i = 0; i < info_.size; ++i)
        if (!w.region[static_cast<size_t>(i)].empty())
          compute_layer(i, b.n, n == n0, w);
    }
  }

  // The unit's region of every layer: the last layer's brick, and for each earlier layer the
  // hull of what its in-group consumers need, with all its channels.
  void plan_regions(const BrickCoord& b, std::vector<Region>& region) const {
    const Graph& g = *info_.graph;
    region[static_cast<size_t>(info_.last())] = units_.region(b);
    for (int i = info_.last() - 1; i >= 0; --i) {
      Region r;
      for (const auto& [j, slot] : info_.consumers[static_cast<size_t>(i)])
        r = hull(r, input_need(g, info_.layer(j), slot, region[static_cast<size_t>(j)]));
      if (!r.empty()) {
        r.c0 = 0;
        r.c1 = info_.shape(i).c;
      }
      region[static_cast<size_t>(i)] = r;
    }
  }

  // Each external input's loads: the hull of what its window readers need, staged once; and
  // what each other reader needs (an elementwise op: a residual add, over its slots reading the
  // input), which it reads from global memory itself (model/cost_model.h).
  void count_input_loads(const std::vector<Region>& region, ExecCounters& k) const {
    for (size_t e = 0; e < info_.external_ids.size(); ++e) {
      Region staged, direct;
      int direct_reader = -1;
      int64_t elements = 0;
      for (const auto& [j, slot] : info_.external_readers[e]) { // by reader, then slot
        const Layer& l = info_.layer(j);
        const Region need = input_need(*info_.graph, l, slot, region[static_cast<size_t>(j)]);
        if (traits(l.op).windowed()) {
          staged = hull(staged, need);
          continue;
        }
        if (j != direct_reader) {
          elements += direct.volume();
          direct = Region{};
          direct_reader = j;
        }
        direct = hull(direct, need);
      }
      elements += staged.volume() + direct.volume();
      k.bytes_loaded_input += elements * info_.elem_bytes;
    }
  }

  // The unit buffer of layer s as a view (its region, all channels from 0).
  cpu::BlockedView buffer(Worker& w, int s) const {
    const Region& r = w.region[static_cast<size_t>(s)];
    return {w.buffers[static_cast<size_t>(s)].data(), cpu::blocked_storage_region(r, ctx_.lanes),
            ctx_.lanes};
  }

  // Layer i over the unit's region of it (image n): intermediates into the worker's buffers,
  // the last layer into the output. The unit's first image counts the brick and the weights.
  void compute_layer(int i, int64_t n, bool first_image, Worker& w) {
    const Region& what = w.region[static_cast<size_t>(i)];
    const Layer& l = info_.layer(i);
    w.in.clear();
    for (const Source& s : info_.slot_source[static_cast<size_t>(i)]) {
      if (s.external)
        w.in.push_back(ctx_.inputs[static_cast<size_t>(s.index)]->image(n));
      else
        w.in.push_back(cpu::as_const(buffer(w, s.index)));
    }
    const bool is_last = i == info_.last();
    cpu::BlockedView out;
    if (is_last) {
      out = output_->image(n);
    } else {
      out = buffer(w, i);
      scratch(w.buffers[static_cast<size_t>(i)], out.floats());
      out.data = w.buffers[static_cast<size_t>(i)].data();
    }
    cpu::compute_region(*info_.graph, *ctx_.packed[static_cast<size_t>(i)], w.in, out, what);
    ExecCounters& k = w.counters;
    k.flops += block_flops(*info_.graph, l, what);
    if (first_image) {
      k.bricks_per_layer[static_cast<size_t>(i)] += 1;
      k.bytes_loaded_weight += weight_share(l, what.channels()) * info_.elem_bytes;
    }
    if (is_last)
      k.bytes_stored_output += what.volume() * info_.elem_bytes;
  }

  const StrategyContext& ctx_;
  const GroupInfo& info_;
  const BrickLayout units_;
  const int64_t batch_block_; // images per unit
  const int64_t blocks_;      // batch blocks
  std::vector<Worker> workers_;
  cpu::BlockedTensor* output_ = nullptr;
};

} // namespace

BlockedGroupResult run_padded(const StrategyContext& ctx, const BrickShape& brick) {
  return PaddedRun(ctx, brick).run();
}

} // namespace brickdl::kernels::detail
