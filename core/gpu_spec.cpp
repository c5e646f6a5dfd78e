#include "core/gpu_spec.h"

#include <algorithm>
#include <cctype>

namespace brickdl {

namespace {

GpuSpec a100(const std::string& name, double bw, double mem) {
  GpuSpec s;
  s.name = name;
  s.dram_bandwidth_gbs = bw;
  s.dram_gb = mem;
  s.l2_bytes = 40.0 * 1024 * 1024;
  // L2: 5120 B/clk at 1410 MHz is ~7.2 TB/s peak; microbenchmarks sustain about 4.8 TB/s.
  s.l2_bandwidth_gbs = 4800;
  s.smem_per_sm_bytes = 164 * 1024;
  s.smem_per_block_bytes = 163 * 1024;
  s.smem_bandwidth_gbs = 108 * 128 * 1.41; // 128 B/clk/SM at the 1410 MHz boost clock
  s.registers_per_sm = 65536;
  s.sm_count = 108;
  s.max_threads_per_sm = 2048;
  s.fp32_tflops = 19.5;
  s.tf32_tflops = 156;
  s.bf16_tflops = 312;
  s.fp16_tflops = 312;
  s.launch_overhead_us = 3.0;
  s.atomic_ns = 1.0;
  s.source =
      "NVIDIA A100 Tensor Core GPU datasheet and Architecture whitepaper (GA100: 108 SMs, 40 MB "
      "L2, 164 KB shared memory per SM; dense FP32 19.5 TFLOPS, TF32 156, BF16 312, FP16 312); "
      "CUDA C Programming Guide, compute capability 8.0 "
      "limits (shared memory: 32 banks of 4 bytes per clock per SM, at the 1410 MHz boost clock); "
      "L2 bandwidth, launch overhead and atomic cost are estimates to be calibrated";
  return s;
}

GpuSpec hopper(const std::string& name, double bw, double mem) {
  GpuSpec s;
  s.name = name;
  s.dram_bandwidth_gbs = bw;
  s.dram_gb = mem;
  s.l2_bytes = 50.0 * 1024 * 1024;
  s.l2_bandwidth_gbs = 10000; // estimate; calibrate per device
  s.smem_per_sm_bytes = 228 * 1024;
  s.smem_per_block_bytes = 227 * 1024;
  s.smem_bandwidth_gbs = 132 * 128 * 1.98; // 128 B/clk/SM at the 1980 MHz boost clock (SXM5)
  s.registers_per_sm = 65536;
  s.sm_count = 132;
  s.max_threads_per_sm = 2048;
  s.fp32_tflops = 67;
  s.tf32_tflops = 494.7;
  s.bf16_tflops = 989.4;
  s.fp16_tflops = 989.4;
  // Hopper's dense tensor peak needs wgmma (asynchronous, one warpgroup); public reports put
  // the synchronous warp-level mma.sync at about half of it. An estimate until the H200
  // measures ours.
  s.mma_sync_fraction = 0.5;
  // Our wgmma kernels (kernels/cuda/templates/conv_mma.cuh conv_box_wgmma) feed A from
  // registers gathered per k step and wait for each step's wgmma before the next: the tensor
  // cores idle while a warpgroup gathers, unless another warpgroup of the SM (2 to 4 per block,
  // more blocks per SM) issues meanwhile. An estimate between mma.sync's half and the library's
  // whole peak, until the H200 measures it.
  s.wgmma_fraction = 0.75;
  // Clusters: 8 CTAs portable, more by opt-in (cuda.h CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_
  // ALLOWED); 16 on the H100 by public reports, checked per kernel on the device
  // (cuOccupancyMaxActiveClusters in the loader).
  s.max_cluster = 16;
  s.launch_overhead_us = 2.5;
  s.atomic_ns = 0.8;
  s.source = "NVIDIA H100 / H200 datasheets (SXM5: 132 SMs, 50 MB L2, dense FP32 67 TFLOPS, TF32 "
             "494.7, BF16 989.4, FP16 989.4) and the Hopper Tuning Guide (228 KB shared memory per "
             "SM, 227 KB "
             "per block; 32 banks of 4 bytes per clock per SM, at the 1980 MHz boost clock); "
             "clusters of 16 CTAs (non-portable, by opt-in) by public reports; L2 "
             "bandwidth, launch overhead, atomic cost and the shares of the tensor peak that "
             "mma.sync (0.5) and our wgmma kernels (0.75) reach are estimates to be calibrated";
  return s;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

} // namespace

const std::vector<GpuSpec>& gpu_specs() {
  static const std::vector<GpuSpec> specs = {
      a100("A100-40GB", 1555, 40),
      a100("A100-80GB", 2039, 80),
      hopper("H100-SXM", 3350, 80),
      hopper("H200", 4800, 141),
  };
  return specs;
}

const GpuSpec* find_gpu_spec(const std::string& name) {
  for (const auto& s : gpu_specs())
    if (lower(s.name) == lower(name))
      return &s;
  return nullptr;
}

std::vector<std::string> gpu_spec_names() {
  std::vector<std::string> v;
  for (const auto& s : gpu_specs())
    v.push_back(s.name);
  return v;
}

} // namespace brickdl
