#pragma once
// CudaMeasurer: the Measurer of the CUDA backend (CUDA-free interface).
//
//   candidate ──plan_kernels──► source ──NvrtcCompiler (cache)──► cubin ──cuModuleLoadData──┐
//   seeded inputs / weights (kernels/group_data.h, as the CPU backend) ──► device buffers ──┤
//                                                                                          ▼
//   reference: cuDNN layerwise, strict FP32, exact algorithms (else the CPU reference ops)
//   1 validation run  ──► compare (kernels/validation.h: |out−ref| <= atol + rtol·|ref|),
//                         memo counters, error flag
//   cold timing: warm-up runs; repetitions: [L2 flush: read sweep] [spin] event ─ kernels ─
//                event ──► samples
//   (+ CUPTI activity: summed kernel durations); counter pass: CUPTI range profiler, one user
//   range per run, replayed as many passes as the metrics need ──► MeasureResult::counters
//
// Where each part lives (kernels/cuda/):
//   cuda_measurer.cu        the measurer: the steps above, failures recorded as statuses
//   statuses.h              the backend's exceptions, one per failing MeasureStatus
//   device_session.cuh      stream, events, L2 flush, CUPTI profiler; recovery after failures
//   measure_cold.cuh        cold timing          measure_cupti.cuh   CUPTI counters
//   detail/device_buffers   device memory, uploads, downloads of a group's data
//   detail/generated_run    the generated kernels of a plan, loaded and launched
//   detail/l2_flush         the L2 flush (read sweep; check_l2_flush below tests it)
//   detail/launch_spin      the spin before each timed run (check_cold_timing tests it)
//   detail/shared_memory.h  the static + dynamic shared-memory opt-in rule
//   device_query.cu         cuda_device_available, query_device
//   run_on_device.cu        run_on_device (tests, benchmarks)
//
// Strategy `layerwise` is the baseline: its timed samples are cuDNN (one call per layer) in the
// math of the graph's precision (CudnnLayerwise::math_for: fp32 strict FP32, tf32 TF32, bf16 /
// fp16 on 16-bit tensors with FP32 accumulation), and the counters add
// "variant.cudnn_<math>_ms" for it and for one other math mode (fp32 ↔ tf32; bf16 and fp16:
// tf32, what a framework runs on fp32 data), "variant.paper_unfused_ms" (the BrickDL paper's own
// baseline in the precision's math: implicit-GEMM convs and unfused bias, batch-norm and
// activation passes, CudnnLayerwise::Algorithms::kPaperUnfused), "variant.own_layerwise_ms" (our
// single-layer kernels, validated), medians over the same repetitions, each cold. Beside each,
// "..._kernel_ms" (with CUPTI) sums the sequence's kernels' own durations, so the GPU's idle
// time between its launches shows, and "..._warm_ms" times the same layer sequence without the
// flush (inputs, intermediates and weights L2-warm from the previous run, as a framework runs
// layers back to back); the samples stay the cold ones (the tuner compares cold to cold). What
// cuDNN ran per conv: "cudnn_<math>.algo.<layer>" and ".math.<layer>" (cuDNN enum values, layer in
// the group) and "cudnn_<math>.tensor_op_convs" (0 for fp32). 16-bit cuDNN reads 16-bit copies of
// the inputs and weights made before the timing (CudnnLayerwise::bind), as the generated kernels
// do. Without cuDNN, `layerwise` times our own single-layer kernels. The reference stays strict
// FP32 whatever the precision; the tolerance follows the precision (kernels/validation.h,
// tolerance_for).
//
// Failures are statuses (statuses.h): unsupported (no template / too much shared memory /
// cuDNN lacks an op for the baseline), compile_error (with the NVRTC log), launch_error (the
// CUDA error), timeout (a memoized wait exceeded its limit, or the run exceeded
// MeasureOptions::timeout_s), wrong_result. After a launch_error or timeout the device is
// checked and reset only for a sticky error or work still running (statuses.h); the counter
// "device_reset" (0 or 1) says which. With recover_in_process off (a worker process) the device
// is not reset: the measurer reports it lost ("device_lost" 1, device_lost()) and refuses
// every later candidate; its process ends and a fresh one takes over.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/measurer.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/nvrtc_compiler.h"
#include "kernels/tensor.h"
#include "kernels/weights.h"

namespace brickdl::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc = 0; // compute capability major·10 + minor (90 for sm_90)
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t smem_optin_bytes = 0; // dynamic shared memory per block, opt-in maximum
  int64_t global_mem_bytes = 0;
  int clock_khz = 0;      // SM clock (for the memoized wait limit in clock ticks)
  int driver_version = 0; // 13000 for 13.0
  int runtime_version = 0;
  std::string cudnn_version = "none"; // "9.19.0"
  // "gpu:<name>/sm<cc>/drv<driver>/cuda<runtime>/cudnn<cudnn>", spaces in the name as '-'.
  std::string fingerprint() const;
};

// True when brickdl was built with CUDA, a driver is loaded and a device is visible.
bool cuda_device_available();
// Why cuda_device_available() is false ("" when it is true).
std::string cuda_unavailable_reason();
// Number of visible CUDA devices (0 without a driver, a device or a CUDA build).
int cuda_device_count();
// The PCI bus id of visible device `ordinal` ("0000:3b:00.0"): the same GPU under any
// CUDA_VISIBLE_DEVICES numbering. "" when there is no such device.
std::string cuda_pci_bus_id(int ordinal);
// Throws CudaError when there is no such device.
DeviceInfo query_device(int ordinal = 0);

struct CudaMeasurerOptions {
  int device = 0;
  std::string cache_dir = default_cache_dir(); // NVRTC cubins ("" = memory only)
  bool use_cudnn = true;            // reference and layerwise baseline (when built with cuDNN)
  bool use_cupti = true;            // kernel records and counters (when built with CUPTI)
  std::vector<std::string> metrics; // range-profiler metrics; empty = the profiler's defaults
  CodegenOptions codegen; // max_smem_bytes is lowered to the device's opt-in maximum; wgmma is
                          // the device's (wgmma_for), unless allow_wgmma is false
  // false: tensor-core convs run mma.sync even on a device with wgmma (brickdl-calibrate times
  // both instruction kinds on one GPU with the same blocks).
  bool allow_wgmma = true;
  // Test seam: edits each plan after generation, before compilation (device tests use it to
  // plant a wrong, broken or endless kernel and check the status the measurer reports).
  std::function<void(KernelPlan&)> edit_plan;
  // After a sticky error or a kernel still running: reset the device here (cudaDeviceReset,
  // "device_reset" 1) or, false, leave it and report it lost (Measurer::device_lost(),
  // "device_lost" 1): a measuring worker process then ends and is started afresh, which is
  // what CUDA's documentation asks for after such errors.
  bool recover_in_process = true;
};

// Throws CudaError when no device is available (check cuda_device_available() first).
std::unique_ptr<Measurer> make_cuda_measurer(const CudaMeasurerOptions& options = {});

// What run_on_device() runs.
// kCudnnOfPrecision: cuDNN in the math of the graph's precision (CudnnLayerwise::math_for; bf16 /
// fp16 on 16-bit tensors).
enum class DeviceRunner { kGenerated, kCudnnStrictFp32, kCudnnTf32, kCudnnOfPrecision };

// Self-check of the cold-run flush (DESIGN.md section 6) on `device`, with CUPTI: DRAM bytes
// written while a kernel that writes nothing reads one L2's worth of fresh data, right after
// the L2 was dirtied (a memset of twice its size) and then
//   flushed (DeviceSession::flush_l2)  → after_flush_write_bytes: near 0 (the flush left only
//                                         clean lines: no write-back lands in a timed run);
//   not flushed                        → after_memset_write_bytes: the dirty lines the reader
//                                         evicts, written back inside the range (what a memset
//                                         flush leaves to the next timed run).
// Throws CudaError without a device or a profiler (or when counters are restricted).
struct FlushCheck {
  double after_flush_write_bytes = 0;
  double after_memset_write_bytes = 0;
  int64_t l2_bytes = 0;
};
FlushCheck check_l2_flush(int device = 0);

// Self-check of cold timing's spin (measure_cold.cuh, detail/launch_spin.h) on `device`: the
// event-timed medians (default MeasureOptions: flushed, spin before the start event) of a run
// that enqueues nothing, and of a run of `launches` empty single-thread kernels, with their
// summed kernel time from CUPTI. With the spin before the start event the empty run times the
// event pair only, far below the spin; had the spin been inside, it would be at least the spin.
// Throws CudaError without a device.
struct ColdTimingCheck {
  double empty_run_ms = 0;
  double empty_spin_us = 0;       // the spin before the empty run (no queuing: the floor)
  double launches_ms = 0;         // median wall time of the run of `launches` kernels
  double launches_kernel_ms = -1; // their summed durations per run; -1 without CUPTI
  double launches_spin_us = 0;
  int launches_short_runs = 0; // repetitions whose queuing outlasted the spin
};
ColdTimingCheck check_cold_timing(int device = 0, int launches = 64);

// One run of `candidate` on device 0 with host data in and out (tests, benchmarks): inputs[k]
// is the tensor of its k-th external input (KernelPlan::input_ids), `weights` cover the group.
// Returns the last layer's NCDHW output. Throws Unsupported, CompileError, CudaError.
std::vector<float> run_on_device(const Graph& graph, const Candidate& candidate,
                                 DeviceRunner runner,
                                 const std::vector<const kernels::Tensor*>& inputs,
                                 const kernels::ModelWeights& weights);

} // namespace brickdl::cuda
