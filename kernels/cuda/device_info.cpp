#include <algorithm>

#include "kernels/cuda/cuda_measurer.h"

namespace brickdl::cuda {

std::string DeviceInfo::fingerprint() const {
  std::string n = name;
  std::replace(n.begin(), n.end(), ' ', '-');
  return "gpu:" + n + "/sm" + std::to_string(cc) + "/drv" + std::to_string(driver_version) +
         "/cuda" + std::to_string(runtime_version) + "/cudnn" + cudnn_version;
}

} // namespace brickdl::cuda
