#pragma once
// The generated kernels of a KernelPlan, loaded from their cubin and ready to enqueue:
//
//   cubin ──Module (cuModuleLoadData, opt-in shared memory: static + dynamic, shared_memory.h)
//         ──► CUfunction per launch
//   GroupBuffers + packed conv weights + memo / flag / stats / error buffers ──► KernelArgs
//   enqueue(stream): every launch once, with a fresh epoch (memoized flags need no clearing)
//
// After a run: error() != 0 when a memoized wait exceeded KernelArgs::spin_limit, and the
// stats buffer holds the memoized counts (claims, hits, conflicts, wait spins, bricks).
#include <cuda.h>
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

#include "core/graph.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/detail/device_buffers.cuh"
#include "kernels/weights.h"

namespace brickdl::cuda::detail {

// A module loaded from a cubin, with the kernels of a plan's launches.
class Module {
public:
  // On the current device. Throws Unsupported when a launch's static plus dynamic shared
  // memory exceeds the device's opt-in maximum per block (naming both).
  Module(const std::string& cubin, const KernelPlan& plan);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  CUfunction fn(size_t i) const { return fns_.at(i); }
  int registers(size_t i) const;

private:
  CUmodule mod_ = nullptr;
  std::vector<CUfunction> fns_;
};

class GeneratedRun {
public:
  // `weights`: the group's parameters in PyTorch layout; each launch gets its conv weights
  // packed for its tile (pack_conv_weights). `spin_limit`: clock ticks a memoized wait may take.
  GeneratedRun(const Graph& g, const KernelPlan& plan, const std::string& cubin,
               const GroupBuffers& buf, const kernels::ModelWeights& weights, long long spin_limit);

  // One run of all launches; every run has its own epoch (memoized flags need no clearing).
  void enqueue(cudaStream_t stream);
  // After a run (synchronised): a plan with 16-bit storage (bf16 / fp16) writes its own output
  // buffer, converted here into buf.output (fp32, as every other runner leaves it); a no-op for
  // fp32 storage, whose kernels write buf.output themselves. Never part of a timed run.
  void publish_output(const GroupBuffers& buf) const;
  void reset_stats();
  std::vector<unsigned long long> stats() const;
  int error() const;
  int registers(size_t i) const { return module_.registers(i); }
  // The memoized counts of the runs since reset_stats() under their counter names:
  // memo_claims, memo_hits, memo_conflicts, memo_lookups, memo_wait_spins, bricks_computed.
  void add_memo_counters(std::map<std::string, double>& counters) const;

private:
  // Device buffers of every launch's outputs; out_ptr[layer] is where a layer's output goes.
  std::vector<float*> allocate_outputs(const Graph& g, const GroupBuffers& buf);
  dev::KernelArgs launch_args(const KernelLaunch& k, const GroupBuffers& buf,
                              const std::vector<float*>& out_ptr,
                              const kernels::ModelWeights& weights, long long spin_limit);

  const KernelPlan& plan_;
  Module module_;
  int storage_; // dev::Storage of the plan's global tensors
  // 16-bit storage: the inputs as the kernels read them (converted once); every launch's
  // output, the last layer's included, is in layer_out_.
  std::vector<DeviceBuffer> stored_inputs_;
  std::vector<DeviceBuffer> layer_out_, packed_;
  DeviceBuffer memo_, flags_, stats_, error_;
  std::vector<dev::KernelArgs> args_;
  std::vector<unsigned> grid_; // per launch: its blocks, or the resident ones when persistent
  int epoch_ = 0;
};

} // namespace brickdl::cuda::detail
