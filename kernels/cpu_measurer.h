#pragma once
// CpuMeasurer: the Measurer of the CPU backend. It runs a candidate with the merged executor
// (kernels/merged_executor.h) on seeded random inputs and weights: padded and memoized
// candidates on the brick kernels, layerwise ones through oneDNN with its own fusions
// (kernels/cpu/onednn.h: the honest baseline every merged candidate is compared with). Inputs
// are converted to the blocked layout and parameters packed (oneDNN's primitives made) once,
// before the first run and outside every timing; the worker threads are pinned while it runs.
//
//   inputs, weights (seed) ─► reference (plain loops) ─────────────────────┐ validate
//                          └► candidate once (counters, output) ───────────┘ (rtol, atol)
//                          └► warm-up runs, then timed repetitions (steady_clock) ─► summarize
//
// Group inputs are random tensors of the external inputs' shapes, one stream per producer
// layer (kernels/group_data.h, as the CUDA backend), so every candidate of a group sees the
// same inputs. The reference is the group run
// layer by layer with the plain reference ops. A result is wrong (kWrongResult) when some
// element fails |out − ref| <= atol + rtol·|ref| (NaN fails; kernels/validation.h, shared by
// every backend); max_rel_error is the norm-wise error max|out − ref| / max|ref|. Candidates the
// executor cannot run are kUnsupported; a run longer than timeout_s ends the measurement with
// kTimeout (the samples so far are kept). With flush_l2 (the default) every timed run is cold: the
// caches are swept before it (kernels/cpu/cache_flush.h), untimed; without it runs follow each
// other warm. Worker threads are the constructor's; the counters (ExecCounters::to_map) carry their
// number as "cpu_threads". With repetitions 0 (a validation: search/plan_validation.h) the
// validated first run is the only sample and nothing else runs.
#include <string>

#include "core/measurer.h"
#include "kernels/group_data.h"
#include "kernels/tensor.h"

namespace brickdl::kernels {

class CpuMeasurer : public Measurer {
public:
  // threads: worker threads of the executor (0 = the CPUs this process may use, usable_cpus():
  // under mpirun's core binding a CPU worker does not run more threads than it has cores).
  explicit CpuMeasurer(int threads = 0);
  std::string target() const override; // "cpu:<model name from /proc/cpuinfo>"
  std::string backend() const override { return "cpu"; }
  // `graph` is the graph the candidate's group indexes (the fused graph the search partitions).
  MeasureResult measure(const Graph& graph, const Candidate& candidate,
                        const MeasureOptions& options) override;
  int threads() const { return threads_; }

private:
  // The reference output of `group` on `data` (reference_ when the key is unchanged).
  const Tensor& reference(const Graph& graph, const Group& group, const GroupData& data,
                          uint64_t seed);

  int threads_;
  // The reference output of the group measured last: the tuner measures several candidates
  // of one group in a row, and the plain reference loops are the slowest part of a measurement.
  std::string reference_key_;
  Tensor reference_;
};

// The processor's model name ("model name" of /proc/cpuinfo), "unknown" if unavailable.
std::string cpu_model_name();

} // namespace brickdl::kernels
