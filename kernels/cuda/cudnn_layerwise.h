#pragma once
// The cuDNN layer-by-layer baseline of a group (CUDA-free interface; cudnn_layerwise.cu).
//
//   conv (+ folded BN bias) + relu ─► cudnnConvolutionBiasActivationForward      (1 call)
//   conv without activation       ─► cudnnConvolutionForward + cudnnAddTensor   (2 calls)
//   conv + leaky relu             ─► the same + our elementwise kernel           (3 calls)
//   conv_transpose (+ bias, act.) ─► cudnnConvolutionBackwardData (the data gradient of the
//                                    conv whose input is its output; the weight [Cin][Cout/g][k]
//                                    is that conv's filter) + cudnnAddTensor (+ activation)
//   max / avg pool                ─► cudnnPoolingForward
//   add, mul (+ relu), relu       ─► cudnnOpTensor (+ cudnnActivationForward)
//   sigmoid; clip with min 0      ─► cudnnActivationForward (sigmoid; clipped relu)
//
// Other ops (silu, pad, a clip whose min is not 0, concat, upsample, ...) have no call here:
// the constructor throws Unsupported naming the op and the layer.
//
// Math: kStrictFp32 restricts convolutions to FMA kernels: the descriptor is forced to
// CUDNN_FMA_MATH and only non-tensor-op algorithms qualify (a cudnnFind entry reported under
// CUDNN_DEFAULT_MATH, which permits TF32 on Ampere and later, runs under FMA math or not at
// all). kTf32 allows tensor-core TF32 conversion (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, then
// the math of the entry cudnnFind reports fastest), what frameworks run by default on Ampere
// and later. The baseline of a graph runs the math of its
// precision (math_for): fp32 strict FP32, tf32 TF32. Its tensors are fp32 (CUDNN_DATA_FLOAT),
// so bf16 / fp16 graphs are refused rather than silently run in fp32. Algorithms: kFastest asks
// cudnnFind (it runs the candidates once) under that math mode; kExact takes implicit GEMM (no
// Winograd / FFT rounding; for conv_transpose the GEMM-form backward-data algorithms 1, then 0),
// used as the validation reference. Ops or attributes cuDNN lacks
// (ceil-mode or dilated pools, ...) make the constructor throw Unsupported.
#include <memory>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/error.h"
#include "core/graph.h"

namespace brickdl::cuda {

class CudnnLayerwise {
public:
  enum class Math { kStrictFp32, kTf32 };
  enum class Algorithms { kFastest, kExact };

  static bool is_supported();   // false when built without cuDNN
  static std::string version(); // "9.19.0", or "none"

  // The math mode of `precision`: fp32 → kStrictFp32, tf32 → kTf32. Throws UserError for
  // bf16 / fp16 (the baseline's tensors and buffers are fp32).
  static Math math_for(DType precision) {
    switch (precision) {
    case DType::kF32: return Math::kStrictFp32;
    case DType::kTF32: return Math::kTf32;
    case DType::kBF16:
    case DType::kF16: break;
    }
    throw UserError(std::string("the cuDNN baseline runs fp32 and tf32; precision '") +
                    dtype_name(precision) +
                    "' needs a baseline with 16-bit tensors (CUDNN_DATA_HALF / "
                    "CUDNN_DATA_BFLOAT16), which brickdl does not have yet");
  }

  // Plans `group` of the fused `graph` on the current device, in `math` (which may differ from
  // math_for(graph.dtype()): the reference and the variants choose theirs). Throws UserError
  // when the graph's precision is bf16 / fp16 (math_for), Unsupported or CudaError.
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

  // The algorithm and math mode chosen for one convolution (forward or backward data).
  struct ConvChoice {
    int layer = 0;           // in the group (0 = group.first)
    std::string algo;        // "implicit_precomp_gemm", "bwd_data_1", ...
    std::string math;        // "fma", "default", "tensor_op", "tf32"
    int algo_id = 0;         // cudnnConvolutionFwdAlgo_t or cudnnConvolutionBwdDataAlgo_t
    int math_id = 0;         // cudnnMathType_t
    bool tensor_ops = false; // the math permits tensor cores (CUDNN_DEFAULT_MATH does on
                             // Ampere and later); never under kStrictFp32
  };

  int calls_per_run() const;    // library calls (and our elementwise kernels) per run
  std::string describe() const; // chosen algorithm per conv, for logs
  const std::vector<ConvChoice>& choices() const; // per conv, in group order

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace brickdl::cuda
