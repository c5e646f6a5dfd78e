#pragma once
// Host emulation of generated kernels: the kernel templates compiled as plain C++
// (BRICKDL_EMULATE), run block by block, each block's threads phase by phase.
//
//   KernelPlan ──emulate_plan(inputs, weights)──► output (NCDHW) + the kernels' own counters
//
// Blocks run on `workers` host threads at once, so the memoized claim / publish / wait protocol
// runs concurrently for real (std::atomic_ref atomics); a persistent (memoized) launch is a
// grid of one block per worker, each walking its units; the CTAs of a thread block cluster run
// at once, one host thread each (their cluster barriers are real). `reverse_order` starts the
// blocks from the last one down, which changes which block computes which shared brick. This is how
// the index math and the protocol of the device kernels are checked on a machine without a GPU; it
// is slow (every thread of every block in turn) and meant for small shapes.
#include <array>
#include <cstdint>
#include <vector>

#include "kernels/cuda/codegen.h"

namespace brickdl::cuda {

struct EmulatorOptions {
  int workers = 1;
  bool reverse_order = false;
  int runs = 1;             // memoized: launches in a row with epochs 0, 1, ... and the flags
                            // of the previous run left in place (no clearing needed)
  double wait_limit_s = 30; // per wait for another block's brick (KernelArgs::spin_limit)
};

struct EmulatorResult {
  std::vector<float> output;                    // NCDHW, shape of the group's last layer
  std::array<uint64_t, dev::kNumStats> stats{}; // of the last run, summed over launches
  bool timed_out = false;
};

// The values of a plan's 16-bit global storage (dev::Storage, not kStorageF32) as the kernels
// store them (nearest even; NaN stays NaN), and back (exact).
std::vector<uint16_t> to_storage(const float* v, size_t n, int storage);
std::vector<float> from_storage(const std::vector<uint16_t>& v, int storage);
// v as a tensor-core conv of `math` (dev::Math) multiplies it: rounded to the format of its
// operands (mma.cuh round_input: tf32 nearest with ties away from zero, bf16 and fp16 nearest
// even); v itself for kMathFp32.
float round_to_math(float v, int math);

// `plan` was made from `graph`. The kernels hold inputs, outputs and weights in the plan's
// storage (GroupDesc::storage): 16-bit copies are made here, and the output converted back.
// inputs[k]: the NCDHW tensor of plan.input_ids[k]; weights[i] / biases[i]: parameters of the
// group's layer i (empty when it has none).
EmulatorResult emulate_plan(const Graph& graph, const KernelPlan& plan,
                            const std::vector<const float*>& inputs,
                            const std::vector<std::vector<float>>& weights,
                            const std::vector<std::vector<float>>& biases,
                            const EmulatorOptions& options = {});

} // namespace brickdl::cuda
