#pragma once
// The CPU executor's three strategies, behind one signature each (merged_executor.h has the
// contract: what each computes and counts). All three run on the blocked layout
// (kernels/cpu/blocked.h) with the CPU kernels of kernels/cpu/region_ops.h.
//
//   execute_group ──GroupInfo (detail/group_info.h)──► run_layerwise ─┐
//                                                   ├─► run_padded    ─┼─► BlockedGroupResult
//                                                   └─► run_memoized  ─┘
//
// Each runs a supported candidate (the caller has checked unsupported_reason and the inputs)
// and fills the output and every counter except useful_flops, which execute_group adds.
#include <vector>

#include "core/candidate.h"
#include "kernels/cpu/blocked.h"
#include "kernels/cpu/packed.h"
#include "kernels/detail/group_info.h"
#include "kernels/merged_executor.h"

namespace brickdl::kernels::detail {

struct StrategyContext {
  const GroupInfo& info;
  const std::vector<const cpu::BlockedTensor*>& inputs; // [k]: external input k of the group
  const std::vector<const cpu::PackedLayer*>& packed;   // [i]: group layer i, packed
  int lanes = 8;
  int threads = 1;                          // resolved (>= 1)
  MemoObserver memo_observer;               // ExecOptions::memo_observer
  bool poison = false;                      // ExecOptions::poison_output
  const cpu::OnednnGroup* onednn = nullptr; // ExecOptions::onednn (layerwise only)
};

BlockedGroupResult run_layerwise(const StrategyContext& ctx);
// What a layerwise execution of the group counts (run_layerwise's counters), without running it.
ExecCounters layerwise_counters(const GroupInfo& info);
BlockedGroupResult run_padded(const StrategyContext& ctx, const BrickShape& brick);
BlockedGroupResult run_memoized(const StrategyContext& ctx, const BrickShape& brick);

} // namespace brickdl::kernels::detail
