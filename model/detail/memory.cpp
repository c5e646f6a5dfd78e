#include "model/detail/memory.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace brickdl::model::detail {

int estimate_registers(const GpuSpec& gpu, bool tensor_cores, int threads) {
  int regs = tensor_cores ? kRegistersMma : kRegistersFma;
  if (gpu.registers_per_sm > 0 && threads > 0)
    regs = std::min(regs, std::max(8, gpu.registers_per_sm / threads / 8 * 8));
  return std::min(regs, gpu.registers_per_thread_max > 0 ? gpu.registers_per_thread_max : 255);
}

Occupancy occupancy(const GpuSpec& gpu, int threads, double smem_bytes, int registers) {
  Occupancy o;
  if (threads < 1 || threads > gpu.max_threads_per_block) {
    o.reason = std::to_string(threads) + " threads per block; the GPU allows 1.." +
               std::to_string(gpu.max_threads_per_block);
    return o;
  }
  int bps = std::min(kMaxBlocksPerSm, gpu.max_threads_per_sm / threads);
  if (smem_bytes > 0) {
    const double per_block = smem_bytes + kReservedSmemPerBlock;
    bps = std::min(bps, static_cast<int>(gpu.smem_per_sm_bytes / per_block));
  }
  // Registers are allocated per warp in units of 256.
  const int warps = (threads + 31) / 32;
  const int regs_per_warp = ((registers * 32 + 255) / 256) * 256;
  if (regs_per_warp > 0)
    bps = std::min(bps, gpu.registers_per_sm / (regs_per_warp * warps));
  if (bps < 1) {
    o.reason = "no block fits an SM: " + std::to_string(threads) + " threads × " +
               std::to_string(registers) + " registers and " +
               std::to_string(static_cast<int64_t>(smem_bytes / 1024)) +
               " KiB of shared memory per block";
    return o;
  }
  o.blocks_per_sm = bps;
  o.concurrent_blocks = static_cast<double>(bps) * gpu.sm_count;
  const double thread_share =
      static_cast<double>(bps) * threads / std::max(1, gpu.max_threads_per_sm);
  o.factor = std::min(1.0, thread_share / kOccupancyForPeak);
  return o;
}

ReuseSplit split_reuse(const std::array<double, 4>& sum, const std::array<double, 4>& uni,
                       const std::array<double, 4>& distance, double scale) {
  ReuseSplit r;
  r.distance = distance;
  double first = scale;
  for (size_t a = 0; a < 4; ++a)
    first *= uni[a];
  r.first = first;
  for (size_t a = 0; a < 4; ++a) {
    double t = scale * std::max(0.0, sum[a] - uni[a]);
    for (size_t b = 0; b < a; ++b)
      t *= uni[b];
    for (size_t b = a + 1; b < 4; ++b)
      t *= sum[b];
    r.reread[a] = t;
  }
  return r;
}

double L2Window::conflicts(const ReuseSplit& s, double claimed) const {
  double c = 0;
  for (size_t a = 0; a < 4; ++a) {
    const double d = s.distance[a];
    if (d <= 0)
      continue; // the same block looks it up again: no other claimer
    c += s.reread[a] * std::max(0.0, 1.0 - d / std::max(1.0, concurrent));
  }
  return c * kConflictOverlap * claimed;
}

ResolvedCoefficients resolve(const GpuSpec& gpu, const Coefficients& c) {
  // A measured bandwidth (GB/s achieved by a streaming kernel on the device) replaces peak ×
  // default efficiency; derating it by 0.85 again would charge the DRAM twice for the same loss.
  const Coefficients defaults;
  ResolvedCoefficients r;
  r.dram_efficiency = gpu.measured.dram_bandwidth ? c.dram_efficiency / defaults.dram_efficiency
                                                  : c.dram_efficiency;
  r.l2_efficiency =
      gpu.measured.l2_bandwidth ? c.l2_efficiency / defaults.l2_efficiency : c.l2_efficiency;
  r.compute_efficiency = c.compute_efficiency;
  // A spec's fraction is of the library's rate (the library reaches "the whole peak", derated
  // like every kernel by compute_efficiency); a measured one is of the peak itself (achieved
  // TFLOP/s of a generated kernel / the datasheet's): divided by the default efficiency, the
  // roofline's product is the measured rate.
  r.mma_sync_fraction = gpu.measured.mma_sync_fraction
                            ? gpu.mma_sync_fraction / defaults.compute_efficiency
                            : gpu.mma_sync_fraction;
  r.wgmma_fraction = gpu.measured.wgmma_fraction ? gpu.wgmma_fraction / defaults.compute_efficiency
                                                 : gpu.wgmma_fraction;
  r.atomic_ns = c.atomic_ns >= 0 ? c.atomic_ns : gpu.atomic_ns;
  r.launch_us = c.launch_us >= 0 ? c.launch_us : gpu.launch_overhead_us;
  r.conflict_ns = c.conflict_ns >= 0 ? c.conflict_ns : r.atomic_ns;
  r.barrier_ns = c.barrier_ns;
  r.l2_share_bytes = c.l2_resident_fraction * gpu.l2_bytes;
  return r;
}

double peak_flops(const GpuSpec& gpu, DType dtype) {
  // Library and generated kernels run the same math per precision (memory.h, "Time").
  switch (dtype) {
  case DType::kF32: return gpu.fp32_tflops * 1e12;
  case DType::kTF32: return gpu.tf32_tflops * 1e12;
  case DType::kBF16: return gpu.bf16_tflops * 1e12;
  case DType::kF16: return gpu.fp16_tflops * 1e12;
  }
  BRICKDL_CHECK(false, "unknown dtype");
  return 0;
}

double add_kernel_roofline(const GpuSpec& gpu, const ResolvedCoefficients& c, DType dtype,
                           double dram_bytes, double l2_bytes, double flops, double blocks,
                           double occupancy_factor, Prediction& p, double smem_bytes) {
  const double sms = std::max(1, gpu.sm_count);
  const double per_sm = std::max(blocks, 1.0) / sms;
  const double u_mem = std::min(1.0, per_sm) * occupancy_factor;
  const double u_compute = per_sm / std::ceil(per_sm) * occupancy_factor;
  const double dram_ms =
      dram_bytes / (gpu.dram_bandwidth_gbs * 1e9 * c.dram_efficiency * u_mem) * 1e3;
  const double l2_ms = l2_bytes / (gpu.l2_bandwidth_gbs * 1e9 * c.l2_efficiency * u_mem) * 1e3;
  const double smem_ms = smem_bytes > 0 && gpu.smem_bandwidth_gbs > 0
                             ? smem_bytes / (gpu.smem_bandwidth_gbs * 1e9 * u_compute) * 1e3
                             : 0.0;
  const double compute_ms =
      flops / (peak_flops(gpu, dtype) * c.compute_efficiency * u_compute) * 1e3 + smem_ms;
  p.t_smem_ms += smem_ms;
  p.t_dram_ms += dram_ms;
  p.t_l2_ms += l2_ms;
  p.t_compute_ms += compute_ms;
  const double top = std::max({dram_ms, l2_ms, compute_ms});
  if (top == dram_ms) {
    p.bound_dram_ms += top;
  } else if (top == l2_ms) {
    p.bound_l2_ms += top;
  } else {
    p.bound_compute_ms += top;
  }
  return top;
}

void finish_time(Prediction& p) {
  p.time_ms = p.bound_dram_ms + p.bound_l2_ms + p.bound_compute_ms + p.t_atomic_compulsory_ms +
              p.t_atomic_conflict_ms + p.t_launch_ms + p.t_sync_ms;
}

} // namespace brickdl::model::detail
