// Memoized: a bricked store per intermediate layer, one atomic state flag per brick and batch
// block; each needed brick computed once, recursively, by whichever worker claims it
// (merged_executor.h). A claim covers the brick in every image of its batch block: the CPU
// computes those images one after the other and counts what a GPU unit holding them together
// moves (the weights and the flags once, the elements once per image).
//
// Unit u of a layer: brick u % bricks_per_image of the images of batch block u / bricks_per_image.
#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <thread>

#include "core/error.h"
#include "kernels/bricks.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/region_ops.h"
#include "kernels/strategies/strategies.h"

namespace brickdl::kernels::detail {

namespace {

constexpr uint8_t kEmpty = 0, kClaimed = 1, kDone = 2;

// A brick's state flag on a cache line of its own: workers claiming neighbouring bricks do not
// share a line.
struct alignas(64) BrickFlag {
  std::atomic<uint8_t> state{kEmpty};
};

// One intermediate layer's bricked store, each brick a blocked view of its own 64-byte aligned
// storage (its channel block, whole vectors), with a state flag per brick and batch block.
struct BrickStore {
  BrickLayout layout;
  int lanes;
  int64_t brick_floats = 0;
  cpu::AlignedFloats data; // uninitialised: only computed bricks are ever read
  std::unique_ptr<BrickFlag[]> state;

  BrickStore(const TensorShape& shape, const BrickShape& brick, int64_t blocks, int lanes)
      : layout(shape, brick), lanes(lanes) {
    for (int64_t cb = 0; cb < layout.channel_blocks(); ++cb)
      brick_floats = std::max(brick_floats, view(cb).floats());
    brick_floats = cpu::round_up(brick_floats, 16);
    data = cpu::aligned_floats(layout.num_bricks() * brick_floats);
    state.reset(new BrickFlag[static_cast<size_t>(blocks * layout.bricks_per_image())]);
  }
  // The view of a brick of channel block cb (data unset), over the brick's whole extent.
  cpu::BlockedView view(int64_t cb) const {
    const Region r = layout.storage_region(BrickCoord{0, cb, {0, 0, 0}});
    return {nullptr, cpu::blocked_storage_region(r, lanes), lanes};
  }
  cpu::BlockedView brick(int64_t i) const {
    const BrickCoord c = layout.coord(i);
    cpu::BlockedView v{data.get() + i * brick_floats,
                       cpu::blocked_storage_region(layout.storage_region(c), lanes), lanes};
    return v;
  }
};

// Deadlock freedom: a worker holds claims only on bricks it is computing, and while computing
// a brick of layer i it waits only for bricks of layers < i (producers come earlier in the
// topological order). Every wait therefore points to a strictly earlier layer, so the
// waits-for relation has no cycle, and the worker holding the awaited claim always progresses.
// A conflict does not wait at once: the worker first claims or checks every other brick it
// needs (doing useful work meanwhile) and waits for the conflicting ones last.
class MemoRun {
public:
  MemoRun(const StrategyContext& ctx, const BrickShape& brick)
      : info_(ctx.info), inputs_(ctx.inputs), packed_(ctx.packed), lanes_(ctx.lanes),
        last_(info_.shape(info_.last()), brick), batch_block_(brick.images_per_unit(batch())),
        blocks_((batch() + batch_block_ - 1) / batch_block_),
        workers_(static_cast<size_t>(ctx.threads)), observer_(ctx.memo_observer),
        poison_(ctx.poison) {
    for (int i = 0; i < info_.last(); ++i)
      stores_.push_back(std::make_unique<BrickStore>(info_.shape(i), brick, blocks_, lanes_));
    for (auto& w : workers_) {
      w.counters.bricks_per_layer.assign(static_cast<size_t>(info_.size), 0);
      w.levels.resize(static_cast<size_t>(info_.size));
    }
  }

  BlockedGroupResult run() {
    BlockedGroupResult res;
    res.output = cpu::BlockedTensor(info_.shape(info_.last()), lanes_);
    if (poison_)
      std::fill_n(res.output.data(), res.output.floats(), std::numeric_limits<float>::quiet_NaN());
    output_ = &res.output;
    cpu::parallel_units(blocks_ * last_.bricks_per_image(), static_cast<int>(workers_.size()),
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
    std::vector<Region> needs;                 // per distinct source
    std::vector<std::vector<float>> buffers;   // gathered intermediate regions, per source
    std::vector<cpu::ConstBlockedView> blocks; // per source
    std::vector<cpu::ConstBlockedView> inputs; // per input slot
    std::vector<int64_t> bricks, deferred;     // producer bricks being ensured
  };
  struct alignas(64) Worker {
    ExecCounters counters;
    std::vector<Level> levels; // [layer]
  };

  const BrickLayout& layout(int i) const {
    return i == info_.last() ? last_ : stores_[static_cast<size_t>(i)]->layout;
  }
  int64_t batch() const { return info_.shape(info_.last()).n; }

  // Producer bricks of image n0 (the first image of its batch block) as units of layer p.
  void to_units(int p, int64_t n0, std::vector<int64_t>& bricks) const {
    const int64_t bpi = layout(p).bricks_per_image();
    for (int64_t& b : bricks)
      b += n0 / batch_block_ * bpi - n0 * bpi;
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
      std::atomic<uint8_t>& flag = st.state[b].state;
      uint8_t s = flag.load(std::memory_order_acquire);
      if (s == kEmpty && flag.compare_exchange_strong(s, kClaimed, std::memory_order_acq_rel,
                                                      std::memory_order_acquire)) {
        k.memo_claims += 1;
        if (observer_)
          observer_(MemoEvent::kClaim, p, b);
        compute(p, b, w);
        flag.store(kDone, std::memory_order_release);
      } else if (s == kDone) {
        k.memo_hits += 1;
      } else {
        k.memo_conflicts += 1;
        if (observer_)
          observer_(MemoEvent::kConflict, p, b);
        deferred.push_back(b);
      }
    }
    for (int64_t b : deferred) {
      for (int spins = 0; st.state[b].state.load(std::memory_order_acquire) != kDone; ++spins) {
        if (abort_.load(std::memory_order_relaxed))
          throw InternalError("memoized execution aborted by another worker's failure");
        if (spins > 64)
          std::this_thread::yield();
      }
    }
  }

  // Computes unit u of group layer i into its store (or the output for the last layer).
  void compute(int i, int64_t u, Worker& w) {
    const Layer& l = info_.layer(i);
    const int64_t bpi = layout(i).bricks_per_image();
    const int64_t n0 = u / bpi * batch_block_, n1 = std::min(n0 + batch_block_, batch());
    const Region what = layout(i).region(layout(i).coord(n0 * bpi + u % bpi));
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
      layout(p).bricks_touching(n0, lv.needs[s], &lv.bricks);
      to_units(p, n0, lv.bricks);
      ensure(p, lv.bricks, lv.deferred, w);
    }
    for (int64_t n = n0; n < n1; ++n)
      compute_image(i, layout(i).coord(n * bpi + u % bpi), what, lv, w);
    w.counters.bricks_per_layer[static_cast<size_t>(i)] += 1;
    w.counters.bytes_loaded_weight += weight_share(l, what.channels()) * info_.elem_bytes;
  }

  // Region `need` of intermediate layer p in image n, copied out of its bricks (each exactly its
  // own channels) into `buf`; `bricks` is scratch.
  cpu::ConstBlockedView gather(int p, int64_t n, const Region& need, std::vector<float>& buf,
                               std::vector<int64_t>& bricks) const {
    const BrickStore& st = *stores_[static_cast<size_t>(p)];
    cpu::BlockedView dst{nullptr, cpu::blocked_storage_region(need, lanes_), lanes_};
    dst.data = scratch(buf, dst.floats());
    st.layout.bricks_touching(n, need, &bricks);
    for (int64_t b : bricks)
      cpu::copy_channels(cpu::as_const(st.brick(b)), dst,
                         intersect(need, st.layout.region(st.layout.coord(b))));
    return cpu::as_const(dst);
  }

  // Brick bc of layer i (its region `what`) in bc's image, from the producers' stores.
  void compute_image(int i, const BrickCoord& bc, const Region& what, Level& lv, Worker& w) {
    const Graph& g = *info_.graph;
    const Layer& l = info_.layer(i);
    const auto& sources = info_.sources[static_cast<size_t>(i)];
    const int64_t b = layout(i).index(bc);
    ExecCounters& k = w.counters;
    lv.blocks.resize(sources.size());
    if (lv.buffers.size() < sources.size())
      lv.buffers.resize(sources.size());
    for (size_t s = 0; s < sources.size(); ++s) {
      const Source& src = sources[s].source;
      const Region& need = lv.needs[s];
      const int64_t bytes = need.volume() * info_.elem_bytes;
      if (src.external) {
        lv.blocks[s] = inputs_[static_cast<size_t>(src.index)]->image(bc.n);
        k.bytes_loaded_input += bytes;
      } else {
        lv.blocks[s] = gather(src.index, bc.n, need, lv.buffers[s], lv.bricks);
        k.bytes_loaded_intermediate += bytes;
      }
    }
    lv.inputs.clear();
    for (size_t s : info_.slot_to_source[static_cast<size_t>(i)])
      lv.inputs.push_back(lv.blocks[s]);
    const bool is_last = i == info_.last();
    cpu::BlockedView out =
        is_last ? output_->image(bc.n) : stores_[static_cast<size_t>(i)]->brick(b);
    cpu::compute_region(g, *packed_[static_cast<size_t>(i)], lv.inputs, out, what);
    k.flops += block_flops(g, l, what);
    (is_last ? k.bytes_stored_output : k.bytes_stored_intermediate) +=
        what.volume() * info_.elem_bytes;
  }

  const GroupInfo& info_;
  const std::vector<const cpu::BlockedTensor*>& inputs_;
  const std::vector<const cpu::PackedLayer*>& packed_;
  const int lanes_;
  BrickLayout last_;
  const int64_t batch_block_; // images per unit
  const int64_t blocks_;      // batch blocks
  std::vector<std::unique_ptr<BrickStore>> stores_;
  std::vector<Worker> workers_;
  const MemoObserver& observer_;
  cpu::BlockedTensor* output_ = nullptr;
  std::atomic<bool> abort_{false};
  const bool poison_;
};

} // namespace

BlockedGroupResult run_memoized(const StrategyContext& ctx, const BrickShape& brick) {
  return MemoRun(ctx, brick).run();
}

} // namespace brickdl::kernels::detail
