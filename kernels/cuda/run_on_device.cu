// One run of a candidate on device 0 with host data in and out (cuda_measurer.h), for tests
// and benchmarks: no timing, no validation.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/cuda_measurer.h"
#include "kernels/cuda/cudnn_layerwise.h"
#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/detail/device_buffers.cuh"
#include "kernels/cuda/detail/generated_run.cuh"

namespace brickdl::cuda {

namespace {

void run_generated(const Graph& g, const Candidate& c, const DeviceInfo& dev,
                   const detail::GroupBuffers& buf, const kernels::ModelWeights& weights) {
  const KernelPlan plan = plan_kernels(g, c, codegen_for_device(dev.cc, dev.smem_optin_bytes));
  NvrtcCompiler compiler(default_cache_dir());
  detail::GeneratedRun run(g, plan, compiler.compile(plan.source, dev.cc)->cubin, buf, weights,
                           static_cast<long long>(5e3) * dev.clock_khz);
  run.enqueue(nullptr);
  BRICKDL_CUDA_CALL(cudaDeviceSynchronize());
  if (run.error() != 0)
    throw CudaError("a memoized wait exceeded its limit");
  run.publish_output(buf);
}

void run_cudnn(const Graph& g, const Candidate& c, DeviceRunner runner,
               const detail::GroupBuffers& buf) {
  using Math = CudnnLayerwise::Math;
  const Math math = runner == DeviceRunner::kCudnnTf32 ? Math::kTf32
                    : runner == DeviceRunner::kCudnnStrictFp32
                        ? Math::kStrictFp32
                        : CudnnLayerwise::math_for(g.dtype());
  CudnnLayerwise cudnn(g, c.group, math);
  cudnn.bind(buf.input_ptrs, buf.weight_ptrs, buf.bias_ptrs, buf.output.as<float>(), nullptr);
  cudnn.enqueue(nullptr);
  BRICKDL_CUDA_CALL(cudaDeviceSynchronize());
  cudnn.publish();
}

} // namespace

std::vector<float> run_on_device(const Graph& g, const Candidate& c, DeviceRunner runner,
                                 const std::vector<const kernels::Tensor*>& inputs,
                                 const kernels::ModelWeights& weights) {
  const DeviceInfo dev = query_device(0);
  BRICKDL_CUDA_CALL(cudaSetDevice(0));
  const detail::GroupBuffers buf = detail::upload_group(g, c.group, inputs, weights);
  if (runner == DeviceRunner::kGenerated) {
    run_generated(g, c, dev, buf, weights);
  } else {
    run_cudnn(g, c, runner, buf);
  }
  return buf.download_output();
}

} // namespace brickdl::cuda
