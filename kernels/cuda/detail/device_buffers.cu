#include "kernels/cuda/detail/device_buffers.cuh"

#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/emulator.h"

namespace brickdl::cuda::detail {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes_ > 0)
    BRICKDL_CUDA_CALL(cudaMalloc(&p_, bytes_));
}

DeviceBuffer::~DeviceBuffer() {
  if (p_)
    cudaFree(p_);
}

void DeviceBuffer::upload(const void* src, size_t n) {
  BRICKDL_CUDA_CALL(cudaMemcpy(p_, src, n, cudaMemcpyHostToDevice));
}

DeviceBuffer upload_floats(const std::vector<float>& v) {
  DeviceBuffer b(v.size() * sizeof(float));
  if (!v.empty())
    b.upload(v.data(), v.size() * sizeof(float));
  return b;
}

size_t stored_element_bytes(int storage) {
  return storage == dev::kStorageF32 ? sizeof(float) : sizeof(uint16_t);
}

DeviceBuffer upload_stored(const std::vector<float>& v, int storage) {
  if (storage == dev::kStorageF32)
    return upload_floats(v);
  const std::vector<uint16_t> h = to_storage(v.data(), v.size(), storage);
  DeviceBuffer b(h.size() * sizeof(uint16_t));
  if (!h.empty())
    b.upload(h.data(), h.size() * sizeof(uint16_t));
  return b;
}

void publish_stored(const DeviceBuffer& stored, float* out, int storage) {
  std::vector<uint16_t> h(stored.bytes() / sizeof(uint16_t));
  BRICKDL_CUDA_CALL(
      cudaMemcpy(h.data(), stored.as<void>(), stored.bytes(), cudaMemcpyDeviceToHost));
  const std::vector<float> v = from_storage(h, storage);
  BRICKDL_CUDA_CALL(cudaMemcpy(out, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
}

std::vector<float> download(const float* p, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  BRICKDL_CUDA_CALL(cudaMemcpy(v.data(), p, v.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

void GroupBuffers::poison_output(cudaStream_t stream) const {
  BRICKDL_CUDA_CALL(cudaMemsetAsync(output.as<void>(), 0xff, output.bytes(), stream));
}

GroupBuffers upload_group(const Graph& g, const Group& group,
                          const std::vector<const kernels::Tensor*>& host_inputs,
                          const kernels::ModelWeights& host_weights) {
  GroupBuffers b;
  for (const kernels::Tensor* t : host_inputs) {
    b.inputs.push_back(upload_floats(t->values()));
    b.input_ptrs.push_back(b.inputs.back().as<float>());
  }
  for (int id = group.first; id <= group.last; ++id) {
    const kernels::LayerWeights& w = host_weights.at(id);
    b.weights.push_back(upload_floats(w.weight));
    b.biases.push_back(upload_floats(w.bias));
    b.weight_ptrs.push_back(w.weight.empty() ? nullptr : b.weights.back().as<float>());
    b.bias_ptrs.push_back(w.bias.empty() ? nullptr : b.biases.back().as<float>());
  }
  b.output_numel = g.layer(group.last).out.numel();
  b.output = DeviceBuffer(static_cast<size_t>(b.output_numel) * sizeof(float));
  return b;
}

} // namespace brickdl::cuda::detail
