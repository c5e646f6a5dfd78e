#include <cstdint>
#include <string>

#include "model/strategies/strategies.h"

namespace brickdl::model::detail {

Occupancy set_block_footprint(const GroupGeometry& g, const StrategyContext& ctx, double smem_bytes,
                              const char* what, bool padded, Prediction& p) {
  const int threads = ctx.candidate.threads;
  if (uses_wgmma(ctx.gpu.wgmma_fraction > 0, threads) && any_merged_tensor_conv(g, padded))
    smem_bytes += static_cast<double>(wgmma_tile_floats(threads)) * kSharedElementBytes;
  p.smem_bytes_per_block = smem_bytes;
  p.registers_per_thread =
      estimate_registers(ctx.gpu, has_tensor_math(g.graph->dtype()), ctx.candidate.threads);
  const Occupancy occ =
      occupancy(ctx.gpu, ctx.candidate.threads, p.smem_bytes_per_block, p.registers_per_thread);
  p.blocks_per_sm = occ.blocks_per_sm;
  if (p.smem_bytes_per_block > ctx.gpu.smem_per_block_bytes) {
    p.feasible = false;
    p.reason = std::string(what) + " " +
               std::to_string(static_cast<int64_t>(p.smem_bytes_per_block / 1024)) +
               " KiB of shared memory per block; " + ctx.gpu.name + " allows " +
               std::to_string(static_cast<int64_t>(ctx.gpu.smem_per_block_bytes / 1024)) + " KiB";
  } else if (!occ.reason.empty()) {
    p.feasible = false;
    p.reason = occ.reason;
  }
  return occ;
}

} // namespace brickdl::model::detail
