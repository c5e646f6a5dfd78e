#include "kernels/cpu_measurer.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "core/group.h"
#include "kernels/cpu/cache_flush.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/parallel.h"
#include "kernels/group_data.h"
#include "kernels/merged_executor.h"
#include "kernels/reference.h"
#include "kernels/validation.h"

namespace brickdl::kernels {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The group layer by layer with the plain reference ops: the ground truth.
Tensor reference_group(const Graph& g, const Group& grp, const GroupData& data) {
  std::vector<Tensor> out(static_cast<size_t>(grp.size()));
  for (int id = grp.first; id <= grp.last; ++id) {
    const Layer& l = g.layer(id);
    std::vector<const Tensor*> in;
    for (int p : l.inputs) {
      if (grp.contains(p)) {
        in.push_back(&out[static_cast<size_t>(p - grp.first)]);
      } else {
        const auto k =
            std::find(data.input_ids.begin(), data.input_ids.end(), p) - data.input_ids.begin();
        in.push_back(&data.inputs[static_cast<size_t>(k)]);
      }
    }
    out[static_cast<size_t>(id - grp.first)] = run_layer(l, in, data.weights.at(id));
  }
  return std::move(out.back());
}

// Everything the reference depends on: the work (the workload signature), the seed, each
// layer's name (which seeds its weights) and whether a batch-norm was folded into it, and
// which graph layers the inputs are (their ids seed them).
std::string reference_key(const Graph& g, const Group& grp, const GroupData& data, uint64_t seed) {
  std::string key = workload_signature(g, grp) + " | seed" + std::to_string(seed);
  for (int id = grp.first; id <= grp.last; ++id)
    key += " | " + g.layer(id).name + (g.layer(id).bn_folded ? " bn" : "");
  for (int id : data.input_ids)
    key += " | X" + std::to_string(id);
  return key;
}

// Sets `res` to kUnsupported with `why` when `why` is not empty.
bool unsupported(const std::string& why, MeasureResult& res) {
  if (why.empty())
    return false;
  res.status = MeasureStatus::kUnsupported;
  res.error = why;
  return true;
}

// Validation of the first run (kernels/validation.h): kWrongResult when some element is off
// (the tolerance: fp32_group_tolerance, the experiment's and fp32's: the CPU kernels compute in
// fp32 whatever the graph's precision).
bool wrong_result(const Tensor& out, const Tensor& ref, const Tolerance& tol, MeasureResult& res) {
  const Comparison cmp = compare(out.values(), ref.values(), tol);
  res.max_rel_error = cmp.max_rel_error;
  if (cmp.ok())
    return false;
  res.status = MeasureStatus::kWrongResult;
  res.error = cmp.message;
  return true;
}

// kTimeout when the first run alone took longer than the time-out.
bool first_run_timed_out(double first_ms, const MeasureOptions& o, MeasureResult& res) {
  if (first_ms <= o.timeout_s * 1e3)
    return false;
  res.status = MeasureStatus::kTimeout;
  res.error = "one run took " + std::to_string(first_ms) + " ms, over the time-out of " +
              std::to_string(o.timeout_s) + " s";
  return true;
}

// Warm-up runs, then one sample per repetition, within the time-out (else kTimeout with the
// samples so far). The time-out counts the candidate's runs, not the cache sweeps between them.
void time_repetitions(const std::function<void()>& run, const std::function<void()>& flush,
                      const MeasureOptions& o, MeasureResult& res) {
  double spent_ms = 0;
  const double budget_ms = o.timeout_s * 1e3;
  for (int i = 0; i < o.warmup; ++i) {
    const auto t = Clock::now();
    run();
    spent_ms += ms_since(t);
    if (spent_ms > budget_ms)
      break;
  }
  for (int i = 0; i < o.repetitions; ++i) {
    if (o.flush_l2)
      flush();
    const auto t = Clock::now();
    run();
    res.samples_ms.push_back(ms_since(t));
    spent_ms += res.samples_ms.back();
    if (spent_ms > budget_ms && i + 1 < o.repetitions) {
      res.status = MeasureStatus::kTimeout;
      res.error = "stopped after " + std::to_string(i + 1) + " of " +
                  std::to_string(o.repetitions) + " repetitions: over the time-out of " +
                  std::to_string(o.timeout_s) + " s";
      break;
    }
  }
}

} // namespace

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) != 0)
      continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    std::string name = line.substr(colon + 1);
    const size_t b = name.find_first_not_of(" \t");
    const size_t e = name.find_last_not_of(" \t\r");
    if (b != std::string::npos)
      return name.substr(b, e - b + 1);
  }
  return "unknown";
}

CpuMeasurer::CpuMeasurer(int threads) : threads_(threads > 0 ? threads : usable_cpus()) {}

std::string CpuMeasurer::target() const {
  return "cpu:" + cpu_model_name();
}

const Tensor& CpuMeasurer::reference(const Graph& graph, const Group& group, const GroupData& data,
                                     uint64_t seed) {
  const std::string key = reference_key(graph, group, data, seed);
  if (key != reference_key_) {
    reference_ = reference_group(graph, group, data);
    reference_key_ = key;
  }
  return reference_;
}

MeasureResult CpuMeasurer::measure(const Graph& graph, const Candidate& candidate,
                                   const MeasureOptions& options) {
  MeasureResult res;
  if (unsupported(unsupported_reason(graph, candidate), res))
    return res;
  const GroupData data(graph, candidate.group, options.seed);
  const Tensor& ref = reference(graph, candidate.group, data, options.seed);
  // The inputs in the blocked layout and the parameters packed once, outside every timing: in a
  // plan, activations stay blocked between groups and parameters are packed once.
  const int lanes = cpu::lanes();
  const cpu::PackedModel packed(graph, data.weights, lanes);
  packed.pack(candidate.group.first, candidate.group.last);
  std::vector<cpu::BlockedTensor> blocked;
  for (const Tensor* t : data.input_ptrs)
    blocked.push_back(cpu::to_blocked(*t, lanes));
  std::vector<const cpu::BlockedTensor*> inputs;
  for (const cpu::BlockedTensor& t : blocked)
    inputs.push_back(&t);
  ExecOptions exec{threads_};
  // A layerwise candidate is the honest baseline: oneDNN with its own fusions, prepared once.
  std::unique_ptr<cpu::OnednnGroup> onednn;
  if (candidate.strategy == Strategy::kLayerwise) {
    onednn = std::make_unique<cpu::OnednnGroup>(graph, candidate.group, packed,
                                                cpu::OnednnOptions{true, true});
    exec.onednn = onednn.get();
  }
  const cpu::ScopedPinning pinning(threads_);
  const auto run = [&] { return execute_group(graph, candidate, inputs, packed, exec); };
  const auto t0 = Clock::now();
  const BlockedGroupResult first = run();
  const double first_ms = ms_since(t0);
  if (unsupported(first.supported ? "" : first.reason, res))
    return res;
  if (options.collect_counters) {
    res.counters = first.counters.to_map();
    res.counters["cpu_threads"] = threads_; // how the times were taken, not a count
    if (onednn) // layers oneDNN could not run, which ran on the brick kernels
      res.counters["onednn_fallbacks"] = static_cast<double>(onednn->fallbacks().size());
  }
  const Tolerance tol = fp32_group_tolerance(graph, candidate.group, options.atol, options.rtol);
  if (wrong_result(cpu::from_blocked(first.output), ref, tol, res) ||
      first_run_timed_out(first_ms, options, res))
    return res;
  if (options.repetitions == 0) // validation only: the first run is the one sample
    res.samples_ms.push_back(first_ms);
  else
    time_repetitions(
        run, [&] { cpu::flush_caches(threads_); }, options, res);
  res.summarize();
  return res;
}

} // namespace brickdl::kernels
