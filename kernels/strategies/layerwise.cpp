// Layerwise: one layer at a time over whole tensors (merged_executor.h), each through the CPU
// kernels' whole-layer entry (kernels/cpu/region_ops.h: units of image × channel range × slab),
// or through oneDNN (kernels/cpu/onednn.h) when the caller prepared it. The counts are the
// same either way: they count what a layer-by-layer execution moves.
#include <algorithm>

#include "kernels/cpu/onednn.h"
#include "kernels/cpu/region_ops.h"
#include "kernels/strategies/strategies.h"

namespace brickdl::kernels::detail {

namespace {

// Layer i read each distinct input whole once, its parameters once, and wrote its output.
void count_layer(const GroupInfo& info, int i, ExecCounters& k) {
  const Layer& l = info.layer(i);
  for (const SourceSlots& s : info.sources[static_cast<size_t>(i)]) {
    const int input = l.inputs[static_cast<size_t>(s.slots[0])];
    const int64_t bytes = info.graph->layer(input).out.numel() * info.elem_bytes;
    (s.source.external ? k.bytes_loaded_input : k.bytes_loaded_intermediate) += bytes;
  }
  k.bytes_loaded_weight += l.params * info.elem_bytes;
  k.flops += 2 * l.macs;
  const int64_t out_bytes = l.out.numel() * info.elem_bytes;
  (i == info.last() ? k.bytes_stored_output : k.bytes_stored_intermediate) += out_bytes;
}

// An intermediate is dead once its last in-group reader (layer i) ran, unless it is a graph
// output.
void release_dead_inputs(const GroupInfo& info, int i, std::vector<cpu::BlockedTensor>& outs) {
  for (const Source& s : info.slot_source[static_cast<size_t>(i)]) {
    if (s.external || info.graph->is_output(info.layer(s.index).id))
      continue;
    const auto& readers = info.consumers[static_cast<size_t>(s.index)];
    if (!readers.empty() && readers.back().first == i)
      outs[static_cast<size_t>(s.index)] = cpu::BlockedTensor();
  }
}

} // namespace

ExecCounters layerwise_counters(const GroupInfo& info) {
  ExecCounters k;
  k.bricks_per_layer.assign(static_cast<size_t>(info.size), 0);
  for (int i = 0; i < info.size; ++i)
    count_layer(info, i, k);
  return k;
}

BlockedGroupResult run_layerwise(const StrategyContext& ctx) {
  const GroupInfo& info = ctx.info;
  if (ctx.onednn) {
    BlockedGroupResult res = ctx.onednn->run(ctx.inputs, ctx.threads);
    res.counters = layerwise_counters(info);
    return res;
  }
  BlockedGroupResult res;
  res.counters.bricks_per_layer.assign(static_cast<size_t>(info.size), 0);
  std::vector<cpu::BlockedTensor> outs(static_cast<size_t>(info.size));
  for (int i = 0; i < info.size; ++i) {
    const Layer& l = info.layer(i);
    std::vector<const cpu::BlockedTensor*> in;
    for (const Source& s : info.slot_source[static_cast<size_t>(i)])
      in.push_back(s.external ? ctx.inputs[static_cast<size_t>(s.index)]
                              : &outs[static_cast<size_t>(s.index)]);
    std::string fallback;
    outs[static_cast<size_t>(i)] = cpu::run_whole_layer(
        *info.graph, *ctx.packed[static_cast<size_t>(i)], in, ctx.threads, &fallback);
    if (!fallback.empty())
      res.fallbacks.push_back(l.name + ": " + fallback);
    count_layer(info, i, res.counters);
    release_dead_inputs(info, i, outs);
  }
  for (int i = 0; i + 1 < info.size; ++i)
    if (info.graph->is_output(info.layer(i).id))
      res.inner_outputs.emplace(info.layer(i).id, std::move(outs[static_cast<size_t>(i)]));
  res.output = std::move(outs.back());
  return res;
}

} // namespace brickdl::kernels::detail
