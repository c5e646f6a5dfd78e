#pragma once
// GPU specifications as data. Each named spec carries the source of its numbers; an
// experiment may name one (target.gpu) and override any field, or give every field itself.
#include <string>
#include <vector>

namespace brickdl {

struct GpuSpec {
  std::string name;                // "A100-40GB", "H200", or "custom"
  double dram_bandwidth_gbs = 0;   // GB/s (1e9 bytes/s), vendor peak
  double dram_gb = 0;              // capacity, GB
  double l2_bytes = 0;             // L2 capacity in bytes
  double l2_bandwidth_gbs = 0;     // GB/s, sustained L2 read bandwidth (estimate, see source)
  double smem_per_sm_bytes = 0;    // shared memory per SM (max carve-out)
  double smem_per_block_bytes = 0; // max dynamic shared memory per block (opt-in)
  // Aggregate shared-memory bandwidth, GB/s: 32 banks × 4 B per clock per SM × SMs × boost
  // clock. 0: shared-memory traffic is not charged (a custom spec that leaves it out).
  double smem_bandwidth_gbs = 0;
  int registers_per_sm = 0; // 32-bit registers
  int registers_per_thread_max = 255;
  int sm_count = 0;
  int max_threads_per_sm = 0;
  int max_threads_per_block = 1024;
  double fp32_tflops = 0; // peak dense FP32 (non-tensor)
  double tf32_tflops = 0; // peak dense TF32 tensor
  double bf16_tflops = 0; // peak dense BF16 tensor
  double fp16_tflops = 0; // peak dense FP16 tensor
  // Of the tensor peaks above, the fraction that warp-level mma.sync (the generated kernels)
  // reaches; the library's kernels reach the whole peak (on Hopper through wgmma).
  double mma_sync_fraction = 1.0;
  // Of the tensor peaks, the fraction the generated kernels reach with Hopper's warpgroup MMA
  // (wgmma, sm_90a; core/group.h uses_wgmma: blocks of whole warpgroups); 0: the target has
  // no wgmma, the kernels run mma.sync.
  double wgmma_fraction = 0;
  // The largest thread block cluster (CTAs) a kernel may use: 16 on sm_90 (non-portable above
  // 8: the kernels opt in), 1 (no clusters) before.
  int max_cluster = 1;
  double launch_overhead_us = 0; // per kernel launch, back to back in a stream
  double atomic_ns = 0;          // cost of one uncontended global atomic (estimate)
  std::string source;            // where the numbers come from
  // The rates above that a device calibration measured (core/gpu_calibration.h). A datasheet
  // rate is a peak that the model derates by its efficiencies (model/cost_model.h Coefficients);
  // a measured one is what kernels achieve on the device, which the model must not derate again
  // (model/detail/memory.cpp resolve). All false for the named specs.
  struct Measured {
    bool dram_bandwidth = false, l2_bandwidth = false;      // achieved GB/s
    bool mma_sync_fraction = false, wgmma_fraction = false; // achieved share of the peak
  } measured;
};

// The named specs: A100-40GB, A100-80GB, H100-SXM, H200.
const std::vector<GpuSpec>& gpu_specs();
// nullptr when unknown (names compare case-insensitively).
const GpuSpec* find_gpu_spec(const std::string& name);
std::vector<std::string> gpu_spec_names();

} // namespace brickdl
