// The CUDA backend when brickdl is built without CUDA: every class reports itself unsupported
// and nothing can be compiled or launched; the rest of brickdl builds and runs unchanged.
#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/nvrtc_compiler.h"

namespace brickdl::cuda {

namespace {
[[noreturn]] void not_built(const char* what) {
  throw CudaError(std::string(what) + ": brickdl was built without CUDA (BRICKDL_ENABLE_CUDA)");
}
}  // namespace

NvrtcCompiler::NvrtcCompiler(std::string disk_cache_dir) : dir_(std::move(disk_cache_dir)) {}
bool NvrtcCompiler::is_supported() { return false; }
std::string NvrtcCompiler::version() { return "none"; }
std::vector<int> NvrtcCompiler::supported_archs() { return {}; }
std::shared_ptr<const CompiledModule> NvrtcCompiler::compile(const std::string&, int,
                                                             const std::vector<std::string>&) {
  not_built("NVRTC");
}
int64_t NvrtcCompiler::hits() const { return 0; }
int64_t NvrtcCompiler::misses() const { return 0; }

}  // namespace brickdl::cuda
