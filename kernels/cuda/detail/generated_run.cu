#include "kernels/cuda/detail/generated_run.cuh"

#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/detail/driver_api.cuh"
#include "kernels/cuda/detail/shared_memory.h"
#include "kernels/cuda/emulator.h"

namespace brickdl::cuda::detail {

namespace {

// The launch of a cluster kernel (k.desc.cluster > 1) over `grid` blocks: its cluster dims
// travel as a launch attribute (codegen sets none at compile time); `attr` must outlive it.
CUlaunchConfig cluster_config(const KernelLaunch& k, unsigned grid, CUstream stream,
                              CUlaunchAttribute& attr) {
  attr = CUlaunchAttribute{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = static_cast<unsigned>(k.desc.cluster);
  attr.value.clusterDim.y = 1;
  attr.value.clusterDim.z = 1;
  CUlaunchConfig c{};
  c.gridDimX = grid;
  c.gridDimY = c.gridDimZ = 1;
  c.blockDimX = static_cast<unsigned>(k.threads);
  c.blockDimY = c.blockDimZ = 1;
  c.sharedMemBytes = static_cast<unsigned>(k.smem_bytes);
  c.hStream = stream;
  c.attrs = &attr;
  c.numAttrs = 1;
  return c;
}

// A cluster kernel: opts in above the portable size, and throws Unsupported when not even one
// of its clusters can be resident (too many CTAs per cluster for a GPC with this much shared
// memory each), which would otherwise fail at launch.
void check_cluster(CUfunction f, const KernelLaunch& k) {
  const auto& d = driver();
  if (k.desc.cluster > kMaxPortableCluster)
    BRICKDL_CU_CALL(
        d.func_set_attribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  CUlaunchAttribute attr;
  const CUlaunchConfig c = cluster_config(k, static_cast<unsigned>(k.blocks), nullptr, attr);
  int clusters = 0;
  BRICKDL_CU_CALL(d.occupancy_max_active_clusters(&clusters, f, &c));
  if (clusters < 1)
    throw Unsupported(k.symbol + ": no cluster of " + std::to_string(k.desc.cluster) +
                      " CTAs with " + std::to_string(k.smem_bytes) +
                      " bytes of shared memory each fits this device at once "
                      "(cuOccupancyMaxActiveClusters: 0)");
}

} // namespace

Module::Module(const std::string& cubin, const KernelPlan& plan) {
  const auto& d = driver();
  int device = 0, optin = 0;
  BRICKDL_CUDA_CALL(cudaGetDevice(&device));
  BRICKDL_CUDA_CALL(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  BRICKDL_CU_CALL(d.module_load_data_ex(&mod_, cubin.data(), 0, nullptr, nullptr));
  try {
    for (const KernelLaunch& k : plan.launches) {
      CUfunction f = nullptr;
      BRICKDL_CU_CALL(d.module_get_function(&f, mod_, k.symbol.c_str()));
      // Static shared memory (memoized kernels declare some) counts against the same limits
      // as the dynamic part (detail/shared_memory.h).
      int static_bytes = 0;
      BRICKDL_CU_CALL(d.func_get_attribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
      if (needs_shared_opt_in(k.symbol, static_bytes, k.smem_bytes, optin))
        BRICKDL_CU_CALL(
            d.func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.smem_bytes));
      if (k.desc.cluster > 1)
        check_cluster(f, k);
      fns_.push_back(f);
    }
  } catch (...) { // the destructor does not run for a constructor that throws
    d.module_unload(mod_);
    throw;
  }
}

Module::~Module() {
  if (mod_)
    driver().module_unload(mod_);
}

int Module::registers(size_t i) const {
  int r = 0;
  driver().func_get_attribute(&r, CU_FUNC_ATTRIBUTE_NUM_REGS, fns_.at(i));
  return r;
}

GeneratedRun::GeneratedRun(const Graph& g, const KernelPlan& plan, const std::string& cubin,
                           const GroupBuffers& buf, const kernels::ModelWeights& weights,
                           long long spin_limit)
    : plan_(plan), module_(cubin, plan), storage_(plan.launches.at(0).desc.storage) {
  if (storage_ != dev::kStorageF32) // the inputs as the kernels read them
    for (size_t s = 0; s < buf.input_ptrs.size(); ++s) {
      const int64_t n = g.layer(plan.input_ids.at(s)).out.numel();
      stored_inputs_.push_back(upload_stored(download(buf.input_ptrs[s], n), storage_));
    }
  const std::vector<float*> out_ptr = allocate_outputs(g, buf);
  memo_ = DeviceBuffer(static_cast<size_t>(plan.memo_elements) * stored_element_bytes(storage_));
  flags_ = DeviceBuffer(static_cast<size_t>(plan.flag_count) * sizeof(int));
  if (plan.flag_count > 0)
    BRICKDL_CUDA_CALL(cudaMemset(flags_.as<int>(), 0, flags_.bytes()));
  stats_ = DeviceBuffer(dev::kNumStats * sizeof(unsigned long long));
  error_ = DeviceBuffer(sizeof(int));
  reset_stats();
  for (const KernelLaunch& k : plan.launches)
    args_.push_back(launch_args(k, buf, out_ptr, weights, spin_limit));
  int device = 0, sms = 1;
  BRICKDL_CUDA_CALL(cudaGetDevice(&device));
  BRICKDL_CUDA_CALL(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const KernelLaunch& k = plan.launches[i];
    int64_t grid = k.blocks;
    if (k.persistent) { // as many blocks as are resident at once, never more than the units
      int per_sm = 0;
      BRICKDL_CU_CALL(driver().occupancy_blocks_per_sm(&per_sm, module_.fn(i), k.threads,
                                                       static_cast<size_t>(k.smem_bytes)));
      grid = std::min<int64_t>(k.blocks, int64_t{std::max(per_sm, 1)} * sms);
    }
    grid_.push_back(static_cast<unsigned>(grid));
  }
}

std::vector<float*> GeneratedRun::allocate_outputs(const Graph& g, const GroupBuffers& buf) {
  const size_t L = plan_.layer_ids.size();
  layer_out_.resize(L);
  std::vector<float*> out_ptr(L, nullptr);
  out_ptr[L - 1] = buf.output.as<float>();
  for (const KernelLaunch& k : plan_.launches) {
    const size_t o = static_cast<size_t>(k.output);
    if (o + 1 < L || storage_ != dev::kStorageF32) { // 16 bits: the output converted later
      layer_out_[o] = DeviceBuffer(static_cast<size_t>(g.layer(plan_.layer_ids[o]).out.numel()) *
                                   stored_element_bytes(storage_));
      BRICKDL_CUDA_CALL(cudaMemset(layer_out_[o].as<void>(), 0xff, layer_out_[o].bytes())); // NaN
      out_ptr[o] = layer_out_[o].as<float>();
    }
  }
  return out_ptr;
}

dev::KernelArgs GeneratedRun::launch_args(const KernelLaunch& k, const GroupBuffers& buf,
                                          const std::vector<float*>& out_ptr,
                                          const kernels::ModelWeights& weights,
                                          long long spin_limit) {
  dev::KernelArgs a{};
  for (size_t s = 0; s < k.inputs.size(); ++s) {
    const size_t i = static_cast<size_t>(k.inputs[s].index);
    a.ext[s] = !k.inputs[s].external          ? out_ptr.at(i)
               : storage_ == dev::kStorageF32 ? buf.input_ptrs.at(i)
                                              : stored_inputs_.at(i).as<float>();
  }
  for (size_t l = 0; l < k.layers.size(); ++l) {
    const size_t gl = static_cast<size_t>(k.layers[l]);
    if (k.desc.layers[l].op == dev::kOpConv) {
      const int id = plan_.layer_ids[gl];
      packed_.push_back(
          upload_stored(pack_conv_weights(k.desc.layers[l], weights.at(id).weight), storage_));
      a.weight[l] = packed_.back().as<float>();
    } else if (k.desc.layers[l].op == dev::kOpEltwise && k.desc.layers[l].ew == dev::kEwAffine) {
      a.weight[l] = buf.weight_ptrs.at(gl); // a batch-norm's scale, fp32
    }
    a.bias[l] = buf.bias_ptrs.at(gl);
  }
  a.out = out_ptr.at(static_cast<size_t>(k.output));
  a.memo = memo_.as<float>();
  a.flags = flags_.as<int>();
  a.stats = stats_.as<unsigned long long>();
  a.error = error_.as<int>();
  a.spin_limit = spin_limit;
  return a;
}

void GeneratedRun::enqueue(cudaStream_t stream) {
  const auto& d = driver();
  ++epoch_;
  for (size_t i = 0; i < plan_.launches.size(); ++i) {
    const KernelLaunch& k = plan_.launches[i];
    args_[i].epoch = epoch_;
    void* params[] = {&args_[i]};
    if (k.desc.cluster > 1) {
      CUlaunchAttribute attr;
      const CUlaunchConfig c =
          cluster_config(k, grid_[i], reinterpret_cast<CUstream>(stream), attr);
      BRICKDL_CU_CALL(d.launch_kernel_ex(&c, module_.fn(i), params, nullptr));
      continue;
    }
    BRICKDL_CU_CALL(d.launch_kernel(module_.fn(i), grid_[i], 1, 1, static_cast<unsigned>(k.threads),
                                    1, 1, static_cast<unsigned>(k.smem_bytes),
                                    reinterpret_cast<CUstream>(stream), params, nullptr));
  }
}

void GeneratedRun::publish_output(const GroupBuffers& buf) const {
  if (storage_ == dev::kStorageF32)
    return;
  publish_stored(layer_out_.back(), buf.output.as<float>(), storage_);
}

void GeneratedRun::reset_stats() {
  BRICKDL_CUDA_CALL(cudaMemset(stats_.as<void>(), 0, stats_.bytes()));
  BRICKDL_CUDA_CALL(cudaMemset(error_.as<void>(), 0, error_.bytes()));
}

std::vector<unsigned long long> GeneratedRun::stats() const {
  std::vector<unsigned long long> v(dev::kNumStats);
  BRICKDL_CUDA_CALL(
      cudaMemcpy(v.data(), stats_.as<void>(), stats_.bytes(), cudaMemcpyDeviceToHost));
  return v;
}

int GeneratedRun::error() const {
  int e = 0;
  BRICKDL_CUDA_CALL(cudaMemcpy(&e, error_.as<void>(), sizeof e, cudaMemcpyDeviceToHost));
  return e;
}

void GeneratedRun::add_memo_counters(std::map<std::string, double>& counters) const {
  const auto s = stats();
  counters["memo_claims"] = static_cast<double>(s[dev::kStatClaims]);
  counters["memo_hits"] = static_cast<double>(s[dev::kStatHits]);
  counters["memo_conflicts"] = static_cast<double>(s[dev::kStatConflicts]);
  counters["memo_lookups"] =
      static_cast<double>(s[dev::kStatClaims] + s[dev::kStatHits] + s[dev::kStatConflicts]);
  counters["memo_wait_spins"] = static_cast<double>(s[dev::kStatWaits]);
  counters["bricks_computed"] = static_cast<double>(s[dev::kStatBricks]);
}

} // namespace brickdl::cuda::detail
