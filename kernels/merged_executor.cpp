#include "kernels/merged_executor.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "core/group.h"
#include "kernels/cpu/isa.h"
#include "kernels/detail/group_info.h"
#include "kernels/strategies/strategies.h"

namespace brickdl::kernels {

namespace {

int resolve_threads(int threads) {
  return threads > 0 ? threads : usable_cpus();
}

} // namespace

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// ---- counters -----------------------------------------------------------------------------

int64_t ExecCounters::bricks_computed() const {
  int64_t s = 0;
  for (int64_t b : bricks_per_layer)
    s += b;
  return s;
}

void ExecCounters::add(const ExecCounters& o) {
  flops += o.flops;
  useful_flops += o.useful_flops;
  if (bricks_per_layer.size() < o.bricks_per_layer.size())
    bricks_per_layer.resize(o.bricks_per_layer.size(), 0);
  for (size_t i = 0; i < o.bricks_per_layer.size(); ++i)
    bricks_per_layer[i] += o.bricks_per_layer[i];
  memo_claims += o.memo_claims;
  memo_hits += o.memo_hits;
  memo_conflicts += o.memo_conflicts;
  memo_lookups += o.memo_lookups;
  bytes_loaded_input += o.bytes_loaded_input;
  bytes_loaded_weight += o.bytes_loaded_weight;
  bytes_loaded_intermediate += o.bytes_loaded_intermediate;
  bytes_stored_intermediate += o.bytes_stored_intermediate;
  bytes_stored_output += o.bytes_stored_output;
}

std::map<std::string, double> ExecCounters::to_map() const {
  std::map<std::string, double> m;
  const auto put = [&](const std::string& k, int64_t v) { m[k] = static_cast<double>(v); };
  put("flops", flops);
  put("useful_flops", useful_flops);
  put("bricks_computed", bricks_computed());
  for (size_t i = 0; i < bricks_per_layer.size(); ++i)
    put("bricks_computed." + std::to_string(i), bricks_per_layer[i]);
  put("memo_claims", memo_claims);
  put("memo_hits", memo_hits);
  put("memo_conflicts", memo_conflicts);
  put("memo_lookups", memo_lookups);
  put("bytes_loaded.input", bytes_loaded_input);
  put("bytes_loaded.weight", bytes_loaded_weight);
  put("bytes_loaded.intermediate", bytes_loaded_intermediate);
  put("bytes_stored.intermediate", bytes_stored_intermediate);
  put("bytes_stored.output", bytes_stored_output);
  put("bytes_loaded", bytes_loaded());
  put("bytes_stored", bytes_stored());
  return m;
}

// ---- entry points -------------------------------------------------------------------------

std::string unsupported_reason(const Graph& g, const Candidate& c) {
  std::string why = group_invalid_reason(g, c.group);
  if (!why.empty() || c.strategy == Strategy::kLayerwise)
    return why;
  if (c.brick.d < 1 || c.brick.h < 1 || c.brick.w < 1 || c.brick.cb < 0 || c.brick.nb < 1)
    return "brick " + c.brick.str() +
           " has an extent < 1, a negative channel block or a batch block < 1";
  return brick_blocker(g, c.group);
}

BlockedGroupResult execute_group(const Graph& graph, const Candidate& candidate,
                                 const std::vector<const cpu::BlockedTensor*>& inputs,
                                 const cpu::PackedModel& packed, const ExecOptions& options) {
  BlockedGroupResult res;
  res.reason = unsupported_reason(graph, candidate);
  if (!res.reason.empty()) {
    res.supported = false;
    return res;
  }
  const detail::GroupInfo info(graph, candidate.group);
  BRICKDL_CHECK(inputs.size() == info.external_ids.size(),
                "group needs " << info.external_ids.size() << " inputs, got " << inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k)
    BRICKDL_CHECK(inputs[k] && inputs[k]->shape() == graph.layer(info.external_ids[k]).out &&
                      inputs[k]->lanes() == packed.lanes(),
                  "input " << k << " of the group is not the output of layer "
                           << graph.layer(info.external_ids[k]).name << " in " << packed.lanes()
                           << " lanes");
  // The packed layers, resolved before the threads start (PackedModel::at takes a lock).
  std::vector<const cpu::PackedLayer*> layers;
  for (int id = candidate.group.first; id <= candidate.group.last; ++id)
    layers.push_back(&packed.at(id));
  const detail::StrategyContext ctx{info,
                                    inputs,
                                    layers,
                                    packed.lanes(),
                                    resolve_threads(options.threads),
                                    options.memo_observer,
                                    options.poison_output,
                                    options.onednn};
  switch (candidate.strategy) {
  case Strategy::kLayerwise: res = detail::run_layerwise(ctx); break;
  case Strategy::kPadded: res = detail::run_padded(ctx, candidate.brick); break;
  case Strategy::kMemoized: res = detail::run_memoized(ctx, candidate.brick); break;
  }
  for (int id = candidate.group.first; id <= candidate.group.last; ++id)
    res.counters.useful_flops += 2 * graph.layer(id).macs;
  return res;
}

GroupResult execute_group(const Graph& graph, const Candidate& candidate,
                          const std::vector<const Tensor*>& inputs, const ModelWeights& weights,
                          const ExecOptions& options) {
  GroupResult res;
  res.reason = unsupported_reason(graph, candidate);
  if (!res.reason.empty()) {
    res.supported = false;
    return res;
  }
  const int lanes = options.lanes > 0 ? options.lanes : cpu::lanes();
  std::vector<cpu::BlockedTensor> blocked;
  blocked.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    BRICKDL_CHECK(t != nullptr, "a null input");
    blocked.push_back(cpu::to_blocked(*t, lanes));
  }
  std::vector<const cpu::BlockedTensor*> ptrs;
  for (const cpu::BlockedTensor& t : blocked)
    ptrs.push_back(&t);
  const cpu::PackedModel packed(graph, weights, lanes);
  ExecOptions poisoned = options;
  poisoned.poison_output = true;
  BlockedGroupResult r = execute_group(graph, candidate, ptrs, packed, poisoned);
  res.supported = r.supported;
  res.reason = r.reason;
  res.output = cpu::from_blocked(r.output);
  for (auto& [id, t] : r.inner_outputs)
    res.inner_outputs.emplace(id, cpu::from_blocked(t));
  res.counters = std::move(r.counters);
  res.fallbacks = std::move(r.fallbacks);
  return res;
}

} // namespace brickdl::kernels
