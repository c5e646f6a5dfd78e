#include "kernels/cuda/emulator.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <limits>
#include <thread>

#include "core/error.h"

// The kernel templates, as host C++.
#define BRICKDL_EMULATE 1
#include "kernels/cuda/templates/kernels.cuh"

namespace brickdl::cuda {

std::vector<uint16_t> to_storage(const float* v, size_t n, int storage) {
  BRICKDL_CHECK(storage != dev::kStorageF32, "a 16-bit storage type");
  const int saved = dev::emu::storage;
  dev::emu::storage = storage;
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = dev::to_storage(v[i]);
  dev::emu::storage = saved;
  return out;
}

std::vector<float> from_storage(const std::vector<uint16_t>& v, int storage) {
  BRICKDL_CHECK(storage != dev::kStorageF32, "a 16-bit storage type");
  const int saved = dev::emu::storage;
  dev::emu::storage = storage;
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = dev::from_storage(v[i]);
  dev::emu::storage = saved;
  return out;
}

float round_to_math(float v, int math) {
  switch (math) {
  case dev::kMathTf32: return dev::round_input<dev::kMathTf32>(v);
  case dev::kMathBf16: return dev::round_input<dev::kMathBf16>(v);
  case dev::kMathFp16: return dev::round_input<dev::kMathFp16>(v);
  default: BRICKDL_CHECK(math == dev::kMathFp32, "unknown math " << math); return v;
  }
}

namespace {

// A global tensor as the kernels hold it: fp32, or 16-bit values of the plan's storage
// (GroupDesc::storage), NaN until written.
class GlobalTensor {
public:
  GlobalTensor() = default;
  GlobalTensor(size_t n, int storage) : storage_(storage) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    if (storage == dev::kStorageF32)
      f_.assign(n, nan);
    else
      h_.assign(n, to_storage(&nan, 1, storage)[0]);
  }
  GlobalTensor(const float* v, size_t n, int storage) : storage_(storage) {
    if (storage == dev::kStorageF32)
      f_.assign(v, v + n);
    else
      h_ = to_storage(v, n, storage);
  }
  float* data() {
    return storage_ == dev::kStorageF32 ? f_.data() : reinterpret_cast<float*>(h_.data());
  }
  std::vector<float> floats() const {
    return storage_ == dev::kStorageF32 ? f_ : from_storage(h_, storage_);
  }

private:
  int storage_ = dev::kStorageF32;
  std::vector<float> f_;
  std::vector<uint16_t> h_;
};

// A cluster launch (padded, desc.cluster > 1): the ranks of a cluster run at once, one host
// thread each with its own shared memory (NaN until written, so that a read of a slice no rank
// wrote shows), meeting at cluster_sync(); the clusters run one after another (reverse_order:
// from the last).
void run_cluster_launch(const KernelLaunch& k, const dev::KernelArgs& args,
                        const EmulatorOptions& o) {
  const int ranks = k.desc.cluster;
  const int64_t clusters = k.blocks / ranks;
  const size_t floats = static_cast<size_t>(std::max(k.desc.smem_floats, 1));
  std::vector<std::vector<float>> smem(static_cast<size_t>(ranks), std::vector<float>(floats));
  std::vector<float*> bases;
  for (auto& s : smem)
    bases.push_back(s.data());
  std::barrier<> barrier(ranks);
  auto rank_thread = [&](int r) {
    dev::emu::block_threads = k.threads;
    dev::emu::storage = k.desc.storage;
    dev::emu::block_smem = bases[static_cast<size_t>(r)];
    dev::emu::cluster_smem = bases.data();
    dev::emu::cluster_barrier = &barrier;
    for (int64_t i = 0; i < clusters; ++i) {
      const int64_t c = o.reverse_order ? clusters - 1 - i : i;
      std::fill(smem[static_cast<size_t>(r)].begin(), smem[static_cast<size_t>(r)].end(),
                std::numeric_limits<float>::quiet_NaN());
      dev::run_block(k.desc, args, static_cast<int>(c * ranks + r), static_cast<int>(k.blocks));
    }
    dev::emu::block_smem = nullptr;
    dev::emu::cluster_smem = nullptr;
    dev::emu::cluster_barrier = nullptr;
  };
  std::vector<std::thread> pool;
  for (int r = 0; r < ranks; ++r)
    pool.emplace_back(rank_thread, r);
  for (auto& t : pool)
    t.join();
}

// A persistent launch (memoized) emulates a grid of one block per worker, each walking its
// units; others one block per unit.
void run_launch(const KernelLaunch& k, const dev::KernelArgs& args, const EmulatorOptions& o) {
  if (k.desc.cluster > 1) {
    run_cluster_launch(k, args, o);
    return;
  }
  const int workers = std::max(1, o.workers);
  const int64_t grid = k.persistent ? std::min<int64_t>(k.blocks, workers) : k.blocks;
  std::atomic<int64_t> next{0};
  auto worker = [&]() {
    std::vector<float> smem(static_cast<size_t>(std::max(k.desc.smem_floats, 1)));
    dev::emu::block_threads = k.threads;
    dev::emu::storage = k.desc.storage;
    dev::emu::block_smem = smem.data();
    for (;;) {
      const int64_t i = next.fetch_add(1);
      if (i >= grid)
        break;
      const int64_t block = o.reverse_order ? grid - 1 - i : i;
      dev::run_block(k.desc, args, static_cast<int>(block), static_cast<int>(grid));
    }
    dev::emu::block_smem = nullptr;
  };
  if (workers == 1) {
    worker();
    return;
  }
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back(worker);
  for (auto& t : pool)
    t.join();
}

// The launch's parameters in `a`: conv weights packed as the kernel reads them (in the returned
// tensors, which must outlive the launch), a batch-norm's scale, and the biases (fp32).
std::vector<GlobalTensor> bind_parameters(const KernelLaunch& k,
                                          const std::vector<std::vector<float>>& weights,
                                          const std::vector<std::vector<float>>& biases,
                                          int storage, dev::KernelArgs& a) {
  std::vector<GlobalTensor> packed(k.layers.size());
  for (size_t l = 0; l < k.layers.size(); ++l) {
    const size_t gl = static_cast<size_t>(k.layers[l]);
    const dev::LayerDesc& d = k.desc.layers[l];
    if (d.op == dev::kOpConv) {
      const std::vector<float> w = pack_conv_weights(d, weights[gl]);
      packed[l] = GlobalTensor(w.data(), w.size(), storage);
      a.weight[l] = packed[l].data();
    } else if (d.op == dev::kOpEltwise && d.ew == dev::kEwAffine) {
      a.weight[l] = weights[gl].data();
    }
    a.bias[l] = biases[gl].empty() ? nullptr : biases[gl].data();
  }
  return packed;
}

} // namespace

EmulatorResult emulate_plan(const Graph& graph, const KernelPlan& plan,
                            const std::vector<const float*>& inputs,
                            const std::vector<std::vector<float>>& weights,
                            const std::vector<std::vector<float>>& biases,
                            const EmulatorOptions& o) {
  const size_t L = plan.layer_ids.size();
  BRICKDL_CHECK(inputs.size() == plan.input_ids.size(), "one input per external tensor");
  BRICKDL_CHECK(weights.size() == L && biases.size() == L, "parameters per layer");
  const int storage = plan.launches.at(0).desc.storage;
  const auto numel = [&](int id) { return static_cast<size_t>(graph.layer(id).out.numel()); };
  // The global tensors as the kernels hold them: inputs, every layer's NCDHW output
  // (layer-by-layer launches write them all; others the last), packed weights, memo bricks.
  std::vector<GlobalTensor> in(inputs.size()), outputs(L);
  for (size_t s = 0; s < inputs.size(); ++s)
    in[s] = GlobalTensor(inputs[s], numel(plan.input_ids[s]), storage);
  for (const auto& k : plan.launches)
    outputs[static_cast<size_t>(k.output)] =
        GlobalTensor(numel(plan.layer_ids[static_cast<size_t>(k.output)]), storage);
  GlobalTensor memo(static_cast<size_t>(plan.memo_elements), storage);
  std::vector<int> flags(static_cast<size_t>(plan.flag_count), 0);
  std::array<unsigned long long, dev::kNumStats> stats{};
  int error = 0;

  EmulatorResult result;
  for (int run = 0; run < std::max(1, o.runs); ++run) {
    stats.fill(0);
    for (const auto& k : plan.launches) {
      dev::KernelArgs a{};
      for (size_t s = 0; s < k.inputs.size(); ++s) {
        const TensorSlot& slot = k.inputs[s];
        a.ext[s] = (slot.external ? in : outputs).at(static_cast<size_t>(slot.index)).data();
      }
      const std::vector<GlobalTensor> packed = bind_parameters(k, weights, biases, storage, a);
      a.out = outputs[static_cast<size_t>(k.output)].data();
      a.memo = memo.data();
      a.flags = flags.data();
      a.stats = stats.data();
      a.error = &error;
      a.epoch = run;
      a.spin_limit = static_cast<long long>(o.wait_limit_s * 1e9); // emulated clock: ns
      run_launch(k, a, o);
    }
  }
  result.output = outputs[L - 1].floats();
  for (size_t i = 0; i < stats.size(); ++i)
    result.stats[i] = stats[i];
  result.timed_out = error != 0;
  return result;
}

} // namespace brickdl::cuda
