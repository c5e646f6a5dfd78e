#pragma once
// Tensor: an owning, dense fp32 activation in NC(D)HW order (the order PyTorch and NumPy use
// for contiguous tensors), with the graph's TensorShape. 2-D tensors have d == 1; flat tensors
// (after flatten / linear) have d == h == w == 1.
#include <cstdint>
#include <vector>

#include "core/graph.h"

namespace brickdl::kernels {

class Tensor {
public:
  Tensor() = default;
  explicit Tensor(const TensorShape& shape, float fill = 0.0f)
      : shape_(shape), data_(static_cast<size_t>(shape.numel()), fill) {}

  const TensorShape& shape() const { return shape_; }
  int64_t numel() const { return static_cast<int64_t>(data_.size()); }
  bool empty() const { return data_.empty(); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::vector<float>& values() { return data_; }
  const std::vector<float>& values() const { return data_; }

  // Elements of one image (all channels and positions).
  int64_t image_numel() const { return shape_.c * shape_.spatial(); }
  float* image(int64_t n) { return data_.data() + n * image_numel(); }
  const float* image(int64_t n) const { return data_.data() + n * image_numel(); }

  int64_t index(int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) const {
    return (((n * shape_.c + c) * shape_.d + z) * shape_.h + y) * shape_.w + x;
  }
  float& at(int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) {
    return data_[static_cast<size_t>(index(n, c, z, y, x))];
  }
  float at(int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) const {
    return data_[static_cast<size_t>(index(n, c, z, y, x))];
  }

private:
  TensorShape shape_;
  std::vector<float> data_;
};

} // namespace brickdl::kernels
