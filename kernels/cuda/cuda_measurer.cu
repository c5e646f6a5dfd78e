// The CUDA backend's Measurer (cuda_measurer.h): the steps of one measurement. The kinds of
// measurement are their own files (measure_cold, measure_cupti; validation is
// kernels/validation.h), and so are the failures they raise (statuses.h).
#include "kernels/cuda/cuda_measurer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>

#include "core/detail/statistics.h"
#include "kernels/cuda/cudnn_layerwise.h"
#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/detail/device_buffers.cuh"
#include "kernels/cuda/detail/generated_run.cuh"
#include "kernels/cuda/device_session.cuh"
#include "kernels/cuda/measure_cold.cuh"
#include "kernels/cuda/measure_cupti.cuh"
#include "kernels/cuda/statuses.h"
#include "kernels/group_data.h"
#include "kernels/merged_executor.h"
#include "kernels/validation.h"

namespace brickdl::cuda {

namespace {

using detail::GeneratedRun;
using detail::GroupBuffers;
using Math = CudnnLayerwise::Math;

// The counter name of a cuDNN math mode: "variant.cudnn_<key>_ms".
const char* math_key(Math m) {
  switch (m) {
  case Math::kTf32: return "tf32";
  case Math::kBf16: return "bf16";
  case Math::kFp16: return "fp16";
  default: return "fp32";
  }
}

// One measurement: what its steps share. The data are the CPU backend's (kernels/group_data.h).
struct Job {
  Job(const Graph& graph, const Candidate& candidate, const MeasureOptions& options,
      MeasureResult& result, KernelPlan kernel_plan)
      : g(graph), c(candidate), o(options), r(result), plan(std::move(kernel_plan)),
        data(graph, candidate.group, options.seed),
        buf(detail::upload_group(graph, candidate.group, data.input_ptrs, data.weights)) {}

  const Graph& g;
  const Candidate& c;
  const MeasureOptions& o;
  MeasureResult& r;
  const KernelPlan plan;
  const kernels::GroupData data;
  GroupBuffers buf;
  std::vector<float> ref;            // the reference output (NCDHW)
  std::unique_ptr<GeneratedRun> gen; // our kernels for the plan (reads `plan`)
};

class CudaMeasurer final : public Measurer {
public:
  explicit CudaMeasurer(const CudaMeasurerOptions& o)
      : opt_(o), device_(query_device(o.device)), compiler_(o.cache_dir),
        session_(o.device, device_.l2_bytes, o.use_cupti) {
    opt_.codegen.max_smem_bytes =
        static_cast<int>(std::min<int64_t>(opt_.codegen.max_smem_bytes, device_.smem_optin_bytes));
    opt_.codegen.max_cluster = std::min(opt_.codegen.max_cluster, max_cluster_for(device_.cc));
    opt_.codegen.wgmma = o.allow_wgmma && wgmma_for(device_.cc);
  }

  std::string target() const override { return device_.fingerprint(); }
  std::string backend() const override { return "cuda"; }
  bool device_lost() const override { return lost_; }

  // Failures are statuses (statuses.h); the samples of a failed measurement are dropped. The
  // job lives here, so that a failure that touched the device is checked before its buffers
  // are freed (freeing waits for a kernel that still runs).
  MeasureResult measure(const Graph& graph, const Candidate& c,
                        const MeasureOptions& options) override {
    MeasureResult r;
    if (lost_) { // a worker process measures nothing after losing its device
      r.status = MeasureStatus::kLaunchError;
      r.error = "the device was lost by an earlier candidate in this process";
      return r;
    }
    std::unique_ptr<Job> job;
    try {
      measure_impl(graph, c, options, r, job);
    } catch (const Failure& e) {
      record_failure(e.status(), e.detail(), e.touches_device(), options, job, r);
    } catch (const std::exception& e) {
      record_failure(MeasureStatus::kLaunchError, e.what(), true, options, job, r);
    }
    job.reset();
    if (r.status != MeasureStatus::kOk)
      r.samples_ms.clear();
    r.summarize();
    return r;
  }

private:
  // The grace period a failed run gets to finish before the device is reset (statuses.h):
  // its own time-out again, at least 1 s, at most 10 s.
  static double grace_s(const MeasureOptions& o) { return std::clamp(o.timeout_s, 1.0, 10.0); }

  // Records the failure; one that touched the device is checked, and the device reset only
  // when the work still runs or an error is sticky ("device_reset" says which happened).
  void record_failure(MeasureStatus status, const std::string& error, bool touched,
                      const MeasureOptions& o, std::unique_ptr<Job>& job, MeasureResult& r) {
    r.status = status;
    r.error = error;
    if (!touched)
      return;
    const DeviceState state = session_.check(grace_s(o));
    const bool running = state == DeviceState::kStillRunning;
    if (running)
      (void)job.release(); // its buffers die with the context; freeing them would wait
    job.reset();
    if (needs_reset(state) && !opt_.recover_in_process) {
      lost_ = true; // the process ends; its context (and a kernel still running) with it
      r.counters["device_lost"] = 1;
      r.error += "; the device is left unusable (" +
                 std::string(running ? "a kernel still runs" : "a sticky error") + ")";
      return;
    }
    r.counters["device_reset"] = needs_reset(state) ? 1 : 0;
    if (needs_reset(state))
      session_.reset(running);
  }

  bool use_cudnn() const { return opt_.use_cudnn && CudnnLayerwise::is_supported(); }

  void measure_impl(const Graph& g, const Candidate& c, const MeasureOptions& o, MeasureResult& r,
                    std::unique_ptr<Job>& job) {
    BRICKDL_CUDA_CALL(cudaSetDevice(opt_.device));
    KernelPlan plan = plan_kernels(g, c, opt_.codegen);
    if (opt_.edit_plan)
      opt_.edit_plan(plan);
    job = std::make_unique<Job>(g, c, o, r, std::move(plan));
    Job& j = *job;
    compute_reference(j); // before anything is timed
    const kernels::Comparison own = first_generated_run(j);
    if (c.strategy == Strategy::kLayerwise) {
      measure_layerwise(j, own);
    } else {
      measure_generated(j, own);
    }
  }

  // ---- reference ------------------------------------------------------------------------

  // cuDNN, strict FP32 with exact algorithms; else the CPU reference ops layer by layer.
  void compute_reference(Job& j) {
    if (use_cudnn())
      j.ref = cudnn_reference(j);
    if (!j.ref.empty()) {
      j.r.counters["reference.cudnn"] = 1;
      return;
    }
    Candidate lw = j.c;
    lw.strategy = Strategy::kLayerwise;
    const kernels::GroupResult cpu =
        kernels::execute_group(j.g, lw, j.data.input_ptrs, j.data.weights);
    if (!cpu.supported)
      throw Unsupported("no reference for this group: " + cpu.reason);
    j.ref = cpu.output.values();
    j.r.counters["reference.cudnn"] = 0;
  }

  // Empty when cuDNN lacks an op of the group.
  std::vector<float> cudnn_reference(Job& j) {
    try {
      CudnnLayerwise exact(j.g, j.c.group, CudnnLayerwise::Math::kStrictFp32,
                           CudnnLayerwise::Algorithms::kExact);
      bind(exact, j);
      exact.enqueue(session_.stream());
      session_.wait(j.o.timeout_s);
      return j.buf.download_output();
    } catch (const Unsupported&) {
      return {};
    }
  }

  // ---- our generated kernels ------------------------------------------------------------

  // Compiles and loads the plan's kernels, runs them once on a poisoned output and validates
  // it; memoized: the claim counters of that run.
  kernels::Comparison first_generated_run(Job& j) {
    const long long spin_limit = static_cast<long long>(std::min(j.o.timeout_s, 5.0) * 1e3 *
                                                        std::max(device_.clock_khz, 1000));
    const auto module = compiler_.compile(j.plan.source, device_.cc);
    j.gen = std::make_unique<GeneratedRun>(j.g, j.plan, module->cubin, j.buf, j.data.weights,
                                           spin_limit);
    for (size_t i = 0; i < j.plan.launches.size(); ++i)
      j.r.counters["registers." + std::to_string(i)] = j.gen->registers(i);
    j.buf.poison_output(session_.stream());
    j.gen->reset_stats();
    j.gen->enqueue(session_.stream());
    session_.wait(j.o.timeout_s);
    if (j.gen->error() != 0)
      throw TimedOut("a memoized wait for another block's brick exceeded its limit");
    j.gen->publish_output(j.buf);
    const kernels::Comparison cmp = validate(j);
    if (j.c.strategy == Strategy::kMemoized)
      j.gen->add_memo_counters(j.r.counters);
    return cmp;
  }

  // Padded / memoized: the candidate's kernels, if right, timed cold and then counted.
  void measure_generated(Job& j, const kernels::Comparison& own) {
    j.r.max_rel_error = own.max_rel_error;
    if (!own.ok())
      throw WrongResult(own.message);
    const auto run = [&] { j.gen->enqueue(session_.stream()); };
    j.r.samples_ms = measure_cold(session_, run, j.o, &j.r.counters);
    measure_cupti(session_, run, j.o, opt_.metrics, j.r.counters);
  }

  // ---- the layerwise baseline -----------------------------------------------------------

  // cuDNN in the math of the graph's precision is the baseline (fp32: strict FP32, tf32: TF32);
  // the other math mode and our own single-layer kernels are variants. Without cuDNN (or when
  // it lacks an op), our own kernels are the baseline.
  void measure_layerwise(Job& j, const kernels::Comparison& own) {
    const auto run_own = [&] { j.gen->enqueue(session_.stream()); };
    j.r.counters["variant.own_layerwise_max_rel_error"] = own.max_rel_error;
    std::vector<double> own_ms;
    if (own.ok()) {
      own_ms = measure_variant(j, run_own, "variant.own_layerwise");
      j.r.counters["variant.own_layerwise_warm_ms"] =
          brickdl::detail::median(measure_warm(session_, run_own, j.o));
    } else {
      j.r.counters["variant.own_layerwise_wrong"] = 1;
    }
    if (const std::unique_ptr<CudnnLayerwise> baseline = cudnn_variants(j)) {
      measure_cudnn_baseline(j, *baseline);
      return;
    }
    j.r.max_rel_error = own.max_rel_error;
    if (!own.ok())
      throw WrongResult(own.message);
    j.r.samples_ms = std::move(own_ms);
    measure_cupti(session_, run_own, j.o, opt_.metrics, j.r.counters);
  }

  // Times the other math mode as a variant and returns the baseline (math_for the graph's
  // precision), bound to the job's buffers; null without cuDNN or when it lacks an op of the
  // group (or refuses it in 16 bits).
  std::unique_ptr<CudnnLayerwise> cudnn_variants(Job& j) {
    if (!use_cudnn())
      return nullptr;
    try {
      const Math math = CudnnLayerwise::math_for(j.g.dtype());
      const Math other = math == Math::kTf32 ? Math::kStrictFp32 : Math::kTf32;
      auto baseline = std::make_unique<CudnnLayerwise>(j.g, j.c.group, math);
      bind(*baseline, j);
      CudnnLayerwise variant(j.g, j.c.group, other);
      bind(variant, j);
      const auto run_variant = [&] { variant.enqueue(session_.stream()); };
      j.buf.poison_output(session_.stream());
      run_variant();
      session_.wait(j.o.timeout_s);
      variant.publish();
      const std::string key = std::string("variant.cudnn_") + math_key(other);
      j.r.counters[key + "_max_rel_error"] = validate(j).max_rel_error;
      measure_variant(j, run_variant, key);
      j.r.counters[key + "_warm_ms"] =
          brickdl::detail::median(measure_warm(session_, run_variant, j.o));
      record_choices(variant, other, j.r.counters);
      record_choices(*baseline, math, j.r.counters);
      measure_paper_variant(j, math);
      return baseline;
    } catch (const Unsupported& e) {
      session_.warn_once(std::string("cuDNN baseline unavailable for a group: ") + e.what());
      return nullptr;
    }
  }

  // The BrickDL paper's own baseline (CudnnLayerwise::Algorithms::kPaperUnfused: implicit-GEMM
  // convs, bias, batch-norm and activation passes of their own) in the precision's math,
  // validated and timed as a variant: "variant.paper_unfused_ms" (cold median), "_kernel_ms",
  // "_warm_ms", "_max_rel_error" and "_calls" (library calls per run). A refusal leaves it out.
  void measure_paper_variant(Job& j, Math math) {
    try {
      CudnnLayerwise paper(j.g, j.c.group, math, CudnnLayerwise::Algorithms::kPaperUnfused);
      bind(paper, j);
      const auto run_paper = [&] { paper.enqueue(session_.stream()); };
      j.buf.poison_output(session_.stream());
      run_paper();
      session_.wait(j.o.timeout_s);
      paper.publish();
      const std::string key = "variant.paper_unfused";
      j.r.counters[key + "_max_rel_error"] = validate(j).max_rel_error;
      j.r.counters[key + "_calls"] = paper.calls_per_run();
      measure_variant(j, run_paper, key);
      j.r.counters[key + "_warm_ms"] =
          brickdl::detail::median(measure_warm(session_, run_paper, j.o));
    } catch (const Unsupported& e) {
      session_.warn_once(std::string("the paper's unfused cuDNN baseline unavailable: ") +
                         e.what());
    }
  }

  void measure_cudnn_baseline(Job& j, CudnnLayerwise& baseline) {
    const auto run = [&] { baseline.enqueue(session_.stream()); };
    const char* math = math_key(CudnnLayerwise::math_for(j.g.dtype()));
    j.buf.poison_output(session_.stream());
    run();
    session_.wait(j.o.timeout_s);
    baseline.publish();
    const kernels::Comparison cmp = validate(j);
    j.r.max_rel_error = cmp.max_rel_error;
    if (!cmp.ok())
      throw WrongResult(std::string("cuDNN ") + math + ": " + cmp.message);
    j.r.counters["cudnn_calls_per_run"] = baseline.calls_per_run();
    j.r.samples_ms = measure_cold(session_, run, j.o, &j.r.counters);
    j.r.counters[std::string("variant.cudnn_") + math + "_ms"] =
        brickdl::detail::median(j.r.samples_ms);
    if (const auto k = j.r.counters.find("kernel_time_ms"); k != j.r.counters.end())
      j.r.counters[std::string("variant.cudnn_") + math + "_kernel_ms"] = k->second;
    j.r.counters[std::string("variant.cudnn_") + math + "_warm_ms"] =
        brickdl::detail::median(measure_warm(session_, run, j.o));
    measure_cupti(session_, run, j.o, opt_.metrics, j.r.counters);
  }

  // What each conv of `cudnn` runs (cuDNN enum values): "cudnn_<math>.algo.<layer>",
  // "cudnn_<math>.math.<layer>" and "cudnn_<math>.tensor_op_convs" (0 under strict FP32).
  static void record_choices(const CudnnLayerwise& cudnn, Math m,
                             std::map<std::string, double>& counters) {
    const std::string key = std::string("cudnn_") + math_key(m);
    int tensor_op = 0;
    for (const CudnnLayerwise::ConvChoice& c : cudnn.choices()) {
      counters[key + ".algo." + std::to_string(c.layer)] = c.algo_id;
      counters[key + ".math." + std::to_string(c.layer)] = c.math_id;
      tensor_op += c.tensor_ops ? 1 : 0;
    }
    counters[key + ".tensor_op_convs"] = tensor_op;
  }

  // ---- helpers --------------------------------------------------------------------------

  // Cold samples of a variant's `run`: "<key>_ms" their median and, with CUPTI, "<key>_kernel_ms"
  // the run's kernels' own durations summed (mean per run): what _ms adds to it is the GPU's
  // idle time between the launches.
  std::vector<double> measure_variant(Job& j, const std::function<void()>& run,
                                      const std::string& key) {
    std::map<std::string, double> own;
    std::vector<double> samples = measure_cold(session_, run, j.o, &own);
    j.r.counters[key + "_ms"] = brickdl::detail::median(samples);
    if (const auto k = own.find("kernel_time_ms"); k != own.end())
      j.r.counters[key + "_kernel_ms"] = k->second;
    return samples;
  }

  // Binds `cudnn` to the job's buffers (16-bit math: converts them, untimed).
  void bind(CudnnLayerwise& cudnn, Job& j) {
    cudnn.bind(j.buf.input_ptrs, j.buf.weight_ptrs, j.buf.bias_ptrs, j.buf.output.as<float>(),
               session_.stream());
  }

  // The device's output (after a wait) against the reference (kernels/validation.h), with the
  // experiment's tolerance and the norm-wise allowance of the graph's precision.
  kernels::Comparison validate(const Job& j) const {
    return kernels::compare(j.buf.download_output(), j.ref,
                            kernels::group_tolerance(j.g, j.c.group, j.o.atol, j.o.rtol));
  }

  CudaMeasurerOptions opt_;
  DeviceInfo device_;
  NvrtcCompiler compiler_;
  DeviceSession session_;
  bool lost_ = false; // a device failure was left to the process to end (recover_in_process off)
};

} // namespace

std::unique_ptr<Measurer> make_cuda_measurer(const CudaMeasurerOptions& options) {
  return std::make_unique<CudaMeasurer>(options);
}

} // namespace brickdl::cuda
