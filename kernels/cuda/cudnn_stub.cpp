// The cuDNN baseline when brickdl is built without cuDNN (BRICKDL_ENABLE_CUDNN=OFF or no
// CUDA): unsupported; CudaMeasurer then validates against the CPU reference and times the
// layer-by-layer baseline with our own single-layer kernels.
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/cudnn_layerwise.h"

namespace brickdl::cuda {

struct CudnnLayerwise::Impl {};

bool CudnnLayerwise::is_supported() {
  return false;
}
std::string CudnnLayerwise::version() {
  return "none";
}
CudnnLayerwise::CudnnLayerwise(const Graph&, const Group&, Math, Algorithms) {
  throw Unsupported("brickdl was built without cuDNN (BRICKDL_ENABLE_CUDNN)");
}
CudnnLayerwise::~CudnnLayerwise() = default;
void CudnnLayerwise::bind(const std::vector<const float*>&, const std::vector<const float*>&,
                          const std::vector<const float*>&, float*, void*) {}
void CudnnLayerwise::enqueue(void*) {}
void CudnnLayerwise::publish() {}
int CudnnLayerwise::calls_per_run() const {
  return 0;
}
std::string CudnnLayerwise::describe() const {
  return "";
}
const std::vector<CudnnLayerwise::ConvChoice>& CudnnLayerwise::choices() const {
  static const std::vector<ConvChoice> none;
  return none;
}

} // namespace brickdl::cuda
