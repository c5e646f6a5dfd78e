// The CUDA backend when brickdl is built without CUDA: every class reports itself unsupported
// and nothing can be compiled or launched; the rest of brickdl builds and runs unchanged.
#include "kernels/cuda/nvrtc_compiler.h"
#include "kernels/cuda/statuses.h"

namespace brickdl::cuda {

namespace {
[[noreturn]] void not_built(const char* what) {
  throw CudaError(std::string(what) + ": brickdl was built without CUDA (BRICKDL_ENABLE_CUDA)");
}
} // namespace

NvrtcCompiler::NvrtcCompiler(std::string disk_cache_dir) : dir_(std::move(disk_cache_dir)) {}
bool NvrtcCompiler::is_supported() {
  return false;
}
std::string NvrtcCompiler::version() {
  return "none";
}
std::vector<int> NvrtcCompiler::supported_archs() {
  return {};
}
std::shared_ptr<const CompiledModule> NvrtcCompiler::compile(const std::string&, int,
                                                             const std::vector<std::string>&) {
  not_built("NVRTC");
}
int64_t NvrtcCompiler::hits() const {
  return 0;
}
int64_t NvrtcCompiler::misses() const {
  return 0;
}

} // namespace brickdl::cuda

// ---- CudaMeasurer -------------------------------------------------------------------------
#include "kernels/cuda/cuda_measurer.h"
#include "kernels/cuda/device_attributes.h"

namespace brickdl::cuda {

std::string cuda_unavailable_reason() {
  return "brickdl was built without CUDA (BRICKDL_ENABLE_CUDA)";
}
int cuda_device_count() {
  return 0;
}
std::string cuda_pci_bus_id(int) {
  return "";
}

bool cuda_device_available() {
  return false;
}
DeviceInfo query_device(int) {
  throw CudaError(cuda_unavailable_reason());
}
DeviceAttributes query_device_attributes(int) {
  throw CudaError(cuda_unavailable_reason());
}
std::unique_ptr<Measurer> make_cuda_measurer(const CudaMeasurerOptions&) {
  throw CudaError(cuda_unavailable_reason());
}
FlushCheck check_l2_flush(int) {
  throw CudaError(cuda_unavailable_reason());
}
ColdTimingCheck check_cold_timing(int, int) {
  throw CudaError(cuda_unavailable_reason());
}
std::vector<float> run_on_device(const Graph&, const Candidate&, DeviceRunner,
                                 const std::vector<const kernels::Tensor*>&,
                                 const kernels::ModelWeights&) {
  throw CudaError(cuda_unavailable_reason());
}

} // namespace brickdl::cuda

// ---- brickdl-calibrate's micro-measurements -----------------------------------------------
#include "kernels/cuda/calibration.h"

namespace brickdl::cuda {

StreamTiming measure_dram_read(int, int64_t, int, double) {
  throw CudaError(cuda_unavailable_reason());
}
StreamTiming measure_l2_read(int, int64_t, int, int, double) {
  throw CudaError(cuda_unavailable_reason());
}
LaunchGapTiming measure_launch_gap(int, int, int, double) {
  throw CudaError(cuda_unavailable_reason());
}
std::string cupti_chip(int) {
  throw CudaError(cuda_unavailable_reason());
}

} // namespace brickdl::cuda
