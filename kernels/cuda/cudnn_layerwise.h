#pragma once
// The cuDNN layer-by-layer baseline of a group (CUDA-free interface; cudnn_layerwise.cu).
//
//   conv (+ folded BN bias) + relu ─► cudnnConvolutionBiasActivationForward      (1 call)
//   conv without activation       ─► cudnnConvolutionForward + cudnnAddTensor   (2 calls)
//   conv + leaky relu             ─► the same + our elementwise kernel           (3 calls)
//   max / avg pool                ─► cudnnPoolingForward
//   add (+ relu), relu            ─► cudnnOpTensor (+ cudnnActivationForward)
//
// Math: kStrictFp32 restricts convolutions to FMA kernels (CUDNN_FMA_MATH: no TF32);
// kTf32 allows tensor-core TF32 conversion (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION), what
// frameworks run by default on Ampere and later. Algorithms: kFastest asks cudnnFind (it runs
// the candidates once) under that math mode; kExact takes implicit GEMM (no Winograd / FFT
// rounding), used as the validation reference. Ops or attributes cuDNN lacks (ceil-mode or
// dilated pools, ...) make the constructor throw Unsupported.
#include <memory>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"

namespace brickdl::cuda {

class CudnnLayerwise {
public:
  enum class Math { kStrictFp32, kTf32 };
  enum class Algorithms { kFastest, kExact };

  static bool is_supported();   // false when built without cuDNN
  static std::string version(); // "9.19.0", or "none"

  // Plans `group` of the fused `graph` on the current device. Throws Unsupported or CudaError.
  CudnnLayerwise(const Graph& graph, const Group& group, Math math,
                 Algorithms algorithms = Algorithms::kFastest);
  ~CudnnLayerwise();
  CudnnLayerwise(const CudnnLayerwise&) = delete;
  CudnnLayerwise& operator=(const CudnnLayerwise&) = delete;

  // Enqueues the group on `stream` (a cudaStream_t; nullptr = the default stream). Device
  // pointers: inputs[k] is the NCDHW tensor of the group's k-th external input (order of first
  // read, as KernelPlan::input_ids); weights / biases per group layer (nullptr when none);
  // output: the last layer's NCDHW output.
  void enqueue(const std::vector<const float*>& inputs, const std::vector<const float*>& weights,
               const std::vector<const float*>& biases, float* output, void* stream);

  int calls_per_run() const;    // library calls (and our elementwise kernels) per run
  std::string describe() const; // chosen algorithm per conv, for logs

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace brickdl::cuda
