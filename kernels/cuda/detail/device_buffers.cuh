#pragma once
// Device memory of a measurement: owning buffers, host <-> device copies, and the buffers of
// one group (its inputs, parameters and output), all dense NCDHW fp32.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/graph.h"
#include "core/group.h"
#include "kernels/tensor.h"
#include "kernels/weights.h"

namespace brickdl::cuda::detail {

// Owning device allocation (cudaMalloc / cudaFree); movable, not copyable.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  template <class T> T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t n);

private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

DeviceBuffer upload_floats(const std::vector<float>& v);
std::vector<float> download(const float* p, int64_t n);

// Global storage of the generated kernels and the 16-bit cuDNN baseline (dev::Storage):
// bytes per element; host floats uploaded in it (rounded to nearest even as the kernels store,
// emulator.h to_storage; fp32 as they are); a stored buffer widened into the fp32 buffer `out`
// (exact; synchronous: after the run that wrote it has finished).
size_t stored_element_bytes(int storage);
DeviceBuffer upload_stored(const std::vector<float>& v, int storage);
void publish_stored(const DeviceBuffer& stored, float* out, int storage);

// What one candidate runs on: inputs, parameters and outputs on the device.
struct GroupBuffers {
  std::vector<DeviceBuffer> inputs, weights, biases;
  std::vector<const float*> input_ptrs, weight_ptrs, bias_ptrs; // per input / group layer
  DeviceBuffer output;
  int64_t output_numel = 0;

  std::vector<float> download_output() const { return download(output.as<float>(), output_numel); }
  // All-ones bytes are NaN: an output element a kernel fails to write fails validation.
  void poison_output(cudaStream_t stream) const;
};

// Uploads a group's inputs (host_inputs[k]: its k-th external input) and parameters;
// allocates its output.
GroupBuffers upload_group(const Graph& g, const Group& group,
                          const std::vector<const kernels::Tensor*>& host_inputs,
                          const kernels::ModelWeights& host_weights);

} // namespace brickdl::cuda::detail
