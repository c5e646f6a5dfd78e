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
#include "kernels/detail/parallel.h"
#include "kernels/strategies/strategies.h"

namespace brickdl::kernels::detail {

namespace {

constexpr uint8_t kEmpty = 0, kClaimed = 1, kDone = 2;

// One intermediate layer's bricked store with a state flag per brick.
struct BrickStore {
  BrickLayout layout;
  std::unique_ptr<float[]> data; // uninitialised: only computed bricks are ever read
  std::unique_ptr<std::atomic<uint8_t>[]> state;

  BrickStore(const TensorShape& shape, const BrickShape& brick, int64_t blocks)
      : layout(shape, brick) {
    data.reset(new float[static_cast<size_t>(layout.storage_elems())]);
    const int64_t units = blocks * layout.bricks_per_image();
    state.reset(new std::atomic<uint8_t>[static_cast<size_t>(units)]);
    for (int64_t i = 0; i < units; ++i)
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
  MemoRun(const StrategyContext& ctx, const BrickShape& brick)
      : info_(ctx.info), inputs_(ctx.inputs), weights_(ctx.weights),
        last_(info_.shape(info_.last()), brick), batch_block_(brick.images_per_unit(batch())),
        blocks_((batch() + batch_block_ - 1) / batch_block_),
        workers_(static_cast<size_t>(ctx.threads)), observer_(ctx.memo_observer) {
    for (int i = 0; i < info_.last(); ++i)
      stores_.push_back(std::make_unique<BrickStore>(info_.shape(i), brick, blocks_));
    for (auto& w : workers_) {
      w.counters.bricks_per_layer.assign(static_cast<size_t>(info_.size), 0);
      w.levels.resize(static_cast<size_t>(info_.size));
    }
  }

  GroupResult run() {
    GroupResult res;
    res.output = Tensor(info_.shape(info_.last()), std::numeric_limits<float>::quiet_NaN());
    output_ = &res.output;
    parallel_for(blocks_ * last_.bricks_per_image(), static_cast<int>(workers_.size()),
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
      uint8_t s = st.state[b].load(std::memory_order_acquire);
      if (s == kEmpty && st.state[b].compare_exchange_strong(s, kClaimed, std::memory_order_acq_rel,
                                                             std::memory_order_acquire)) {
        k.memo_claims += 1;
        if (observer_)
          observer_(MemoEvent::kClaim, p, b);
        compute(p, b, w);
        st.state[b].store(kDone, std::memory_order_release);
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
      for (int spins = 0; st.state[b].load(std::memory_order_acquire) != kDone; ++spins) {
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
    compute_block(g, l, weights_.at(l.id), lv.inputs, out, what);
    k.flops += block_flops(g, l, what);
    (is_last ? k.bytes_stored_output : k.bytes_stored_intermediate) +=
        what.volume() * info_.elem_bytes;
  }

  const GroupInfo& info_;
  const std::vector<const Tensor*>& inputs_;
  const ModelWeights& weights_;
  BrickLayout last_;
  const int64_t batch_block_; // images per unit
  const int64_t blocks_;      // batch blocks
  std::vector<std::unique_ptr<BrickStore>> stores_;
  std::vector<Worker> workers_;
  const MemoObserver& observer_;
  Tensor* output_ = nullptr;
  std::atomic<bool> abort_{false};
};

} // namespace

GroupResult run_memoized(const StrategyContext& ctx, const BrickShape& brick) {
  return MemoRun(ctx, brick).run();
}

} // namespace brickdl::kernels::detail
