#pragma once
// Kernel generation for one candidate (pure host C++; no CUDA header).
//
//   fused Graph + Candidate ──plan_kernels()──► KernelPlan
//                                                 ├─ launches: one GroupDesc each (padded /
//                                                 │  memoized: one kernel for the group;
//                                                 │  layerwise: one single-layer kernel per layer)
//                                                 ├─ buffers: memo bricks, state flags
//                                                 └─ source: the templates (kernels/cuda/
//                                                    templates/*.cuh) + one constexpr GroupDesc
//                                                    per kernel, for NVRTC
//
// The same KernelPlan drives the CUDA launcher (detail/generated_run.cuh) and the host emulator
// (emulator.h), so the emulator checks exactly what the device runs, minus the compiler.
//
// Tensors the kernels read and write are dense NCDHW (as kernels/tensor.h); memoized
// intermediates are bricked inside KernelArgs::memo.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"
#include "kernels/cuda/statuses.h"
#include "kernels/cuda/templates/group_desc.h"

namespace brickdl::cuda {

struct CodegenOptions {
  // Dynamic shared memory a block may use (the target's opt-in maximum; 227 KiB on sm_90,
  // 163 KiB on sm_80).
  int max_smem_bytes = 227 * 1024;
  // The largest thread block cluster the target runs (padded candidates with brick.cl > 1):
  // kMaxCluster on sm_90 (above kMaxPortableCluster by opt-in), 1 on sm_80 (no clusters).
  int max_cluster = kMaxCluster;
  // Tensor-core convs with wgmma (sm_90a: compute capability 9.0 only; wgmma_for) in blocks of
  // whole warpgroups; mma.sync otherwise.
  bool wgmma = false;
  // The layer-by-layer kernels of our own: output tile per block (bd is used for 3-D only).
  BrickShape layerwise_tile{4, 8, 8, 64};
  int layerwise_threads = 256;
};

// The largest thread block cluster a device of compute capability `cc` (major·10 + minor)
// runs: kMaxCluster from sm_90, 1 (none) before.
inline int max_cluster_for(int cc) {
  return cc >= 90 ? kMaxCluster : 1;
}

// Whether the generated kernels use wgmma on a device of compute capability `cc`: sm_90a code,
// which runs on 9.0 only (H100, H200).
inline bool wgmma_for(int cc) {
  return cc == 90;
}

// The options the generated kernels of a run on a device are planned with (run_on_device, the
// device tests): its opt-in shared memory, its clusters, wgmma on 9.0. One definition, so that
// kernels compiled ahead for a device (tests/device/device_test_kernels.cpp) carry the same
// source, hence the same NVRTC cache key, as those the device compiles.
inline CodegenOptions codegen_for_device(int cc, int64_t smem_optin_bytes) {
  CodegenOptions co;
  co.max_smem_bytes = static_cast<int>(std::min<int64_t>(co.max_smem_bytes, smem_optin_bytes));
  co.max_cluster = max_cluster_for(cc);
  co.wgmma = wgmma_for(cc);
  return co;
}

// A tensor a launch reads: external input slot `index` of the group, or the output of the
// group's layer `index` (layer-by-layer launches).
struct TensorSlot {
  bool external = true;
  int index = 0;
  bool operator==(const TensorSlot& o) const = default;
};

struct KernelLaunch {
  std::string symbol; // extern "C" name in the generated module
  dev::GroupDesc desc{};
  int64_t blocks = 0;      // units of work; one block each unless persistent
  bool persistent = false; // memoized: a grid of at most the resident blocks walks the units
                           // (kernels.cuh); the grid is sized at launch time
  int threads = 256;
  int smem_bytes = 0;             // dynamic shared memory
  std::vector<TensorSlot> inputs; // what KernelArgs::ext[i] points to
  int output = 0;                 // group layer index whose NCDHW output it writes
  std::vector<int> layers;        // group layer index of desc.layers[i] (weights, bias)
};

struct KernelPlan {
  Candidate candidate;
  std::vector<int> layer_ids; // graph ids of the group's layers, in order
  std::vector<int> input_ids; // graph ids of its external inputs, in order of first read
  std::vector<KernelLaunch> launches;
  int64_t memo_elements = 0; // KernelArgs::memo, in elements of the plan's storage
  int64_t flag_count = 0;    // KernelArgs::flags
  std::string source;        // the whole translation unit for NVRTC
};

// Plans and generates the kernels of `candidate` on the fused `graph`. Throws Unsupported
// (statuses.h) when the candidate cannot run as generated kernels (an op without a template,
// too much shared memory per block, ...).
KernelPlan plan_kernels(const Graph& graph, const Candidate& candidate,
                        const CodegenOptions& options = {});

// What a plan's kernels compute with: its conv layers on FP32 FMA units and on tensor cores
// (mma_math: their Math, 0 when none), and whether a layer streams its input in channel
// chunks, and whether a kernel runs as thread block clusters. The generated source compiles
// only these paths (conv_mma.cuh, brick_ops.cuh, prelude.cuh).
struct PlanPaths {
  int convs_fma = 0;
  int convs_mma = 0;
  int convs_wgmma = 0;   // of convs_mma, on wgmma (sm_90a)
  int wgmma_nts = 0;     // the mma_n of those (1, 2, 4), OR-ed: a mask
  bool acc_regs = false; // a streamed wgmma conv keeps its accumulators in registers
  int mma_math = 0;
  bool streamed = false;
  bool cluster = false;
  int storage = 0; // dev::Storage of the global tensors (every launch of a plan alike)
  int acts = 0;    // the epilogues (dev::Act) of the plan's layers, bit a for Act a: a mask
  int ews = 0;     // the elementwise functions (dev::Ew) of its elementwise layers: a mask
};
PlanPaths plan_paths(const KernelPlan& plan);

// What global memory holds for a graph of precision t (dev::Storage): the 16-bit type of bf16
// and fp16, fp32 otherwise (tf32 multiplies rounded fp32 values).
int storage_of(DType t);

// The weights of a conv layer as its kernel reads them: from PyTorch's [cout][cin / groups]
// [kd][kh][kw] to [cout / tco][cin / groups][kd][kh][kw][tco] with tco = L.tile_co (the
// output channels one thread computes), zero-padded to a multiple of tco channels. Done once
// on the host, as inference frameworks pre-pack weights; each launch has its own tile.
std::vector<float> pack_conv_weights(const dev::LayerDesc& L, const std::vector<float>& w);

// `static constexpr` C++ that builds `desc` field by field: the body of a constexpr function
// (used by plan_kernels; exposed for tests).
std::string desc_to_cpp(const dev::GroupDesc& desc);

// The names and contents of the template headers, as NVRTC headers ("kernels.cuh").
struct TemplateHeader {
  const char* name;
  const char* source;
};
const std::vector<TemplateHeader>& template_headers();

} // namespace brickdl::cuda
