#pragma once
// CudaMeasurer: the Measurer of the CUDA backend (CUDA-free interface).
//
//   candidate ──plan_kernels──► source ──NvrtcCompiler (cache)──► cubin ──cuModuleLoadData──┐
//   seeded inputs / weights (kernels/group_data.h, as the CPU backend) ──► device buffers ──┤
//                                                                                          ▼
//   reference: cuDNN layerwise, strict FP32, exact algorithms (else the CPU reference ops)
//   1 validation run  ──► compare (kernels/validation.h: |out−ref| <= atol + rtol·|ref|),
//                         memo counters, error flag
//   cold timing: warm-up runs; repetitions: [L2 flush] event ─ kernels ─ event ──► samples
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
//   detail/l2_flush         the L2 flush buffer
//   device_query.cu         cuda_device_available, query_device
//   run_on_device.cu        run_on_device (tests, benchmarks)
//
// Strategy `layerwise` is the baseline: its timed samples are cuDNN (one call per layer) in the
// math of the graph's precision (CudnnLayerwise::math_for: fp32 strict FP32, tf32 TF32), and
// the counters add "variant.cudnn_tf32_ms" (TF32 tensor cores allowed), "variant.cudnn_fp32_ms"
// (strict FP32; one of the two is the baseline itself) and "variant.own_layerwise_ms" (our
// single-layer kernels, validated), medians over the same repetitions. Without cuDNN,
// `layerwise` times our own single-layer kernels. The reference stays strict FP32 whatever the
// precision; the tolerance follows the precision (kernels/validation.h, tolerance_for).
//
// Failures are statuses (statuses.h): unsupported (no template / too much shared memory /
// cuDNN lacks an op for the baseline), compile_error (with the NVRTC log), launch_error (the
// CUDA error; the device is reset so tuning can go on), timeout (a memoized wait exceeded its
// limit, or the run exceeded MeasureOptions::timeout_s), wrong_result.
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
  CodegenOptions codegen;           // max_smem_bytes is lowered to the device's opt-in maximum
  // Test seam: edits each plan after generation, before compilation (device tests use it to
  // plant a wrong, broken or endless kernel and check the status the measurer reports).
  std::function<void(KernelPlan&)> edit_plan;
};

// Throws CudaError when no device is available (check cuda_device_available() first).
std::unique_ptr<Measurer> make_cuda_measurer(const CudaMeasurerOptions& options = {});

// What run_on_device() runs.
enum class DeviceRunner { kGenerated, kCudnnStrictFp32, kCudnnTf32 };

// One run of `candidate` on device 0 with host data in and out (tests, benchmarks): inputs[k]
// is the tensor of its k-th external input (KernelPlan::input_ids), `weights` cover the group.
// Returns the last layer's NCDHW output. Throws Unsupported, CompileError, CudaError.
std::vector<float> run_on_device(const Graph& graph, const Candidate& candidate,
                                 DeviceRunner runner,
                                 const std::vector<const kernels::Tensor*>& inputs,
                                 const kernels::ModelWeights& weights);

} // namespace brickdl::cuda
