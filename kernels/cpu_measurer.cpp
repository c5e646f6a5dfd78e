#include "kernels/cpu_measurer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

#include "core/group.h"
#include "kernels/merged_executor.h"
#include "kernels/reference.h"
#include "kernels/weights.h"

namespace brickdl::kernels {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The group layer by layer with the plain reference ops: the ground truth.
Tensor reference_group(const Graph& g, const Group& grp, const std::vector<int>& ext_ids,
                       const std::vector<Tensor>& ext, const ModelWeights& w) {
  std::vector<Tensor> out(static_cast<size_t>(grp.size()));
  for (int id = grp.first; id <= grp.last; ++id) {
    const Layer& l = g.layer(id);
    std::vector<const Tensor*> in;
    for (int p : l.inputs) {
      if (grp.contains(p)) {
        in.push_back(&out[static_cast<size_t>(p - grp.first)]);
      } else {
        const auto k = std::find(ext_ids.begin(), ext_ids.end(), p) - ext_ids.begin();
        in.push_back(&ext[static_cast<size_t>(k)]);
      }
    }
    out[static_cast<size_t>(id - grp.first)] = run_layer(l, in, w.at(id));
  }
  return std::move(out.back());
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

CpuMeasurer::CpuMeasurer(int threads)
    : threads_(threads > 0 ? threads
                           : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {}

std::string CpuMeasurer::target() const {
  return "cpu:" + cpu_model_name();
}

MeasureResult CpuMeasurer::measure(const Graph& graph, const Candidate& candidate,
                                   const MeasureOptions& options) {
  MeasureResult res;
  const std::string why = unsupported_reason(graph, candidate);
  if (!why.empty()) {
    res.status = MeasureStatus::kUnsupported;
    res.error = why;
    return res;
  }
  const Group& grp = candidate.group;
  const std::vector<int> ext_ids = group_external_inputs(graph, grp);
  std::vector<Tensor> ext;
  for (int id : ext_ids)
    ext.push_back(random_tensor(graph.layer(id).out, options.seed, static_cast<uint64_t>(id)));
  std::vector<const Tensor*> inputs;
  for (const Tensor& t : ext)
    inputs.push_back(&t);
  const ModelWeights weights = make_weights(graph, options.seed, grp.first, grp.last);
  const ExecOptions exec{threads_};

  // Everything the reference depends on: the work (the workload signature), the seed, each
  // layer's name (which seeds its weights) and whether a batch-norm was folded into it, and
  // which graph layers the inputs are (their ids seed them).
  std::string key = workload_signature(graph, grp) + " | seed" + std::to_string(options.seed);
  for (int id = grp.first; id <= grp.last; ++id)
    key += " | " + graph.layer(id).name + (graph.layer(id).bn_folded ? " bn" : "");
  for (int id : ext_ids)
    key += " | X" + std::to_string(id);
  if (key != reference_key_) {
    reference_ = reference_group(graph, grp, ext_ids, ext, weights);
    reference_key_ = key;
  }
  const Tensor& ref = reference_;
  const auto t0 = Clock::now();
  GroupResult run = execute_group(graph, candidate, inputs, weights, exec);
  const double first_ms = ms_since(t0);
  if (!run.supported) {
    res.status = MeasureStatus::kUnsupported;
    res.error = run.reason;
    return res;
  }
  if (options.collect_counters) {
    res.counters = run.counters.to_map();
    res.counters["cpu_threads"] = threads_; // how the times were taken, not a count
  }

  // Validation.
  double max_diff = 0, max_ref = 0;
  int64_t bad = 0, first_bad = -1;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = run.output.data()[i], b = ref.data()[i];
    const double diff = std::fabs(a - b);
    max_ref = std::max(max_ref, std::fabs(b));
    max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
    if (!(diff <= options.atol + options.rtol * std::fabs(b)) && bad++ == 0)
      first_bad = i;
  }
  res.max_rel_error = max_ref > 0 ? max_diff / max_ref : max_diff;
  if (bad > 0) {
    res.status = MeasureStatus::kWrongResult;
    res.error = std::to_string(bad) + " of " + std::to_string(ref.numel()) +
                " output elements differ from the reference beyond atol " +
                std::to_string(options.atol) + " + rtol " + std::to_string(options.rtol) +
                " (first at flat index " + std::to_string(first_bad) + "); max relative error " +
                std::to_string(res.max_rel_error);
    return res;
  }
  if (first_ms > options.timeout_s * 1e3) {
    res.status = MeasureStatus::kTimeout;
    res.error = "one run took " + std::to_string(first_ms) + " ms, over the time-out of " +
                std::to_string(options.timeout_s) + " s";
    return res;
  }

  // Timing: warm-up runs, then one sample per repetition.
  const auto budget_start = Clock::now();
  const double budget_ms = options.timeout_s * 1e3;
  for (int i = 0; i < options.warmup; ++i) {
    execute_group(graph, candidate, inputs, weights, exec);
    if (ms_since(budget_start) > budget_ms)
      break;
  }
  for (int i = 0; i < options.repetitions; ++i) {
    const auto t = Clock::now();
    execute_group(graph, candidate, inputs, weights, exec);
    res.samples_ms.push_back(ms_since(t));
    if (ms_since(budget_start) > budget_ms && i + 1 < options.repetitions) {
      res.status = MeasureStatus::kTimeout;
      res.error = "stopped after " + std::to_string(i + 1) + " of " +
                  std::to_string(options.repetitions) + " repetitions: over the time-out of " +
                  std::to_string(options.timeout_s) + " s";
      break;
    }
  }
  res.summarize();
  return res;
}

} // namespace brickdl::kernels
