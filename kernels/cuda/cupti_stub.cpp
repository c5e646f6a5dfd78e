// CUPTI when brickdl is built without it (BRICKDL_ENABLE_CUPTI=OFF or no CUDA): unsupported;
// CudaMeasurer then times with CUDA events only and collects no hardware counters.
#include "kernels/cuda/cupti_profiler.h"
#include "kernels/cuda/statuses.h"

namespace brickdl::cuda {

namespace {
[[noreturn]] void not_built() {
  throw CudaError("brickdl was built without CUPTI (BRICKDL_ENABLE_CUPTI)");
}
} // namespace

struct CuptiProfiler::Impl {
  std::string chip;
};

bool CuptiProfiler::is_supported() {
  return false;
}
std::vector<std::string> CuptiProfiler::default_metrics() {
  return {};
}
std::vector<std::string> CuptiProfiler::unknown_metrics(const std::string&,
                                                        const std::vector<std::string>&) {
  not_built();
}
int CuptiProfiler::passes(const std::string&, const std::vector<std::string>&) {
  not_built();
}
CuptiProfiler::CuptiProfiler(int) {
  not_built();
}
CuptiProfiler::~CuptiProfiler() = default;
const std::string& CuptiProfiler::chip() const {
  return impl_->chip;
}
void CuptiProfiler::begin_kernel_records() {
  not_built();
}
std::vector<KernelRecord> CuptiProfiler::end_kernel_records() {
  not_built();
}
std::map<std::string, double> CuptiProfiler::collect(const std::vector<std::string>&,
                                                     const std::function<void()>&,
                                                     const std::function<void()>&) {
  not_built();
}

} // namespace brickdl::cuda
