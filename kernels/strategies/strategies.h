#pragma once
// The CPU executor's three strategies, behind one signature each (merged_executor.h has the
// contract: what each computes and counts).
//
//   execute_group ──GroupInfo (detail/group_info.h)──► run_layerwise ─┐
//                                                   ├─► run_padded    ─┼─► GroupResult
//                                                   └─► run_memoized  ─┘
//
// Each runs a supported candidate (the caller has checked unsupported_reason and the inputs)
// and fills the output and every counter except useful_flops, which execute_group adds.
#include <vector>

#include "core/candidate.h"
#include "kernels/detail/group_info.h"
#include "kernels/merged_executor.h"
#include "kernels/tensor.h"
#include "kernels/weights.h"

namespace brickdl::kernels::detail {

struct StrategyContext {
  const GroupInfo& info;
  const std::vector<const Tensor*>& inputs; // [k]: external input k of the group, whole
  const ModelWeights& weights;
  int threads = 1;            // resolved (>= 1)
  MemoObserver memo_observer; // ExecOptions::memo_observer
};

GroupResult run_layerwise(const StrategyContext& ctx);
GroupResult run_padded(const StrategyContext& ctx, const BrickShape& brick);
GroupResult run_memoized(const StrategyContext& ctx, const BrickShape& brick);

} // namespace brickdl::kernels::detail
