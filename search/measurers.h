#pragma once
// Choosing the Measurer for a backend name.
//
//   "none" → no measurer (model only)      "cpu"  → kernels::CpuMeasurer
//   "cuda" → make_cuda_measurer(), or UserError saying why it is not available
//   "auto" → cuda when available, else cpu, with ONE line on the log saying so
//
// Precisions each computes (the rest it refuses, check_backend_precision):
//   none: all (the model predicts every precision)     cpu: fp32 (the host executor is strict
//   fp32)     cuda: fp32, tf32, bf16 and fp16 (bf16 / fp16: the generated kernels and the
//   cuDNN baseline store 16-bit tensors)      auto: those of what it resolves to here
#include <memory>
#include <string>
#include <vector>

#include "core/experiment.h"
#include "core/measurer.h"
#include "search/tune_context.h"

namespace brickdl::search {

// A measurer around another that passes every call through (target, backend, measure,
// device_lost); a wrapper overrides only what it changes, so that none drops a call (one that
// did not pass device_lost on hid a lost GPU from its worker process, which then kept
// measuring on it).
class ForwardingMeasurer : public Measurer {
public:
  explicit ForwardingMeasurer(std::unique_ptr<Measurer> inner) : inner_(std::move(inner)) {}
  std::string target() const override { return inner_->target(); }
  std::string backend() const override { return inner_->backend(); }
  MeasureResult measure(const Graph& graph, const Candidate& candidate,
                        const MeasureOptions& options) override {
    return inner_->measure(graph, candidate, options);
  }
  bool device_lost() const override { return inner_->device_lost(); }

protected:
  const Measurer& inner() const { return *inner_; }

private:
  std::unique_ptr<Measurer> inner_;
};

// `m` with its target "<target>#<tag>" (BRICKDL_TARGET_TAG, below), everything else m's.
std::unique_ptr<Measurer> with_target_tag(std::unique_ptr<Measurer> m, std::string tag);

// nullptr for "none". Throws UserError for an unknown backend or an unavailable "cuda".
// With BRICKDL_TARGET_TAG set, the measurer's target is "<fingerprint>#<tag>": a site marks
// machines that its fingerprint cannot tell apart (another power cap or memory clock, a
// shared node), and their results never mix with the untagged ones.
//
// Test hook: with BRICKDL_TEST_MEASURE_FIFO naming a FIFO (mkfifo), the measurer holds each
// measurement until the test lets it go, so that a test can signal a run known to be
// mid-measurement (tests/cli/measure_fifo.h). Before each measurement the measuring process (the
// tuner, or its worker process) opens the FIFO for writing, writes "measuring <pid>\n", closes
// it, then opens it for reading and reads to end of file; each open blocks until the test opens
// the other end. Unset (or empty), it does nothing.
std::unique_ptr<Measurer> make_measurer(const std::string& backend, const MeasurementConfig& config,
                                        const Logger& log);
inline constexpr const char* kTestMeasureFifoVar = "BRICKDL_TEST_MEASURE_FIFO"; // the test hook

// The CUDA backend's measurer when brickdl was built with it and a GPU is present; otherwise
// nullptr and `*why_not` says what is missing. (The CUDA backend plugs in here.)
std::unique_ptr<Measurer> make_cuda_measurer(const MeasurementConfig& config, std::string* why_not);

std::vector<std::string> backend_names(); // none, cpu, cuda, auto

// How a run measures: the measurer (nullptr: model only) and whether it only validates the
// model's plan (TuneContext::validate_only).
struct MeasuringSetup {
  std::unique_ptr<Measurer> measurer;
  bool validate_only = false;
};

// The measurer of `experiment` for a run in this process. Which timings may re-plan which
// target:
//   cuda (or auto with a GPU)  measures and re-plans: the GPU is the target's device;
//   cpu, named explicitly      measures and re-plans for this CPU: asking for the CPU backend
//                              is how an experiment plans for the CPU (the measurer's target
//                              "cpu:<model>"; the report labels its times as this CPU's);
//   auto without a GPU         validate only: the experiment asked for its GPU target, which
//                              is not here, so the plan stays the model's for that GPU and the
//                              CPU checks the plan's merged groups against the reference, once
//                              each, stored under "cpu:<model>#validation" (never taken for
//                              CPU times); one line on the log says so;
//   none                       model only.
MeasuringSetup make_measuring(const ExperimentConfig& experiment, const Logger& log);

// The value of BRICKDL_TARGET_TAG ("" when unset).
std::string target_tag();

// What `backend` stands for on this machine: "auto" is "cuda" when a GPU is usable, else "cpu"
// (`*why_not` then says why not cuda); any other name is itself.
std::string resolve_backend(const std::string& backend, std::string* why_not = nullptr);

// The precisions a registered `backend` computes ("auto": resolved here, resolve_backend).
std::vector<DType> backend_precisions(const std::string& backend);

// Throws UserError at `where` when the registered `backend` cannot compute `precision`; the
// message names the backends that can. "auto" probes the GPU only when its two resolutions
// disagree on `precision`.
void check_backend_precision(const std::string& backend, DType precision,
                             const SourceLocation& where);

} // namespace brickdl::search
