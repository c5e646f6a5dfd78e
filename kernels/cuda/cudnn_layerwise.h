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
// all). kTf32 runs cuDNN's default math (CUDNN_DEFAULT_MATH, then the math of the entry
// cudnnFind reports fastest): for fp32 data on Ampere and later that permits TF32 tensor cores,
// what frameworks run by default there, and never a down-conversion of the fp32 inputs to FP16,
// which only CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION permits: an entry of that math is refused
// under every math mode (accepts). NVIDIA_TF32_OVERRIDE=0 in the environment turns TF32 off
// in cuDNN: the "TF32" baseline is then FP32 FMA, and describe() says so. Both keep fp32
// tensors (CUDNN_DATA_FLOAT). kBf16 / kFp16 run on 16-bit tensors
// (CUDNN_DATA_BFLOAT16 / CUDNN_DATA_HALF: inputs, weights, biases, intermediates, output) with
// FP32 accumulation (the convolution's compute type CUDNN_DATA_FLOAT) under
// CUDNN_TENSOR_OP_MATH, as a framework runs a bf16 / fp16 model. The baseline of a graph runs
// the math of its precision (math_for). Algorithms: kFastest asks cudnnFind (it runs the
// candidates once) under that math mode; kExact takes implicit GEMM with FMA math (no
// Winograd / FFT rounding; for conv_transpose the GEMM-form backward-data algorithms 1, then
// 0), used as the validation reference. kPaperUnfused is the BrickDL paper's own baseline
// (its public artifact; model/baseline.h names it 'paper-unfused'): every conv on a fixed
// CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM in the math's descriptor, never fused with its
// epilogue: cudnnConvolutionForward, then cudnnAddTensor of the bias, then the batch-norm pass
// of a conv with a folded batch-norm (cudnnAddTensor of a per-channel zero: the batch-norm's
// scale and shift are in the weights and bias already, and the pass moves the output through
// memory once more, as the paper's cudnnBatchNormalizationForwardInference does), then the
// activation (cudnnActivationForward, or our leaky-relu kernel); other ops as under kExact.
// Ops or attributes cuDNN lacks (ceil-mode or dilated pools, ...) make the constructor throw
// Unsupported.
//
// Buffers: bind() takes the fp32 device tensors of a group (kernels/cuda/detail/
// device_buffers.cuh). 16-bit math converts them there, once and untimed, into 16-bit copies
// of its own (detail::upload_stored: the generated kernels' storage, rounded to nearest even
// by the same host conversion) and writes a 16-bit
// output of its own, which publish() converts into the bound fp32 output; fp32 math reads and
// writes the bound buffers themselves.
#include <memory>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/error.h"
#include "core/graph.h"

namespace brickdl::cuda {

class CudnnLayerwise {
public:
  enum class Math { kStrictFp32, kTf32, kBf16, kFp16 };
  enum class Algorithms { kFastest, kExact, kPaperUnfused };

  static bool is_supported();   // false when built without cuDNN
  static std::string version(); // "9.19.0", or "none"

  // The math mode of `precision`: fp32 → kStrictFp32, tf32 → kTf32, bf16 → kBf16,
  // fp16 → kFp16.
  static Math math_for(DType precision) {
    switch (precision) {
    case DType::kF32: return Math::kStrictFp32;
    case DType::kTF32: return Math::kTf32;
    case DType::kBF16: return Math::kBf16;
    case DType::kF16: return Math::kFp16;
    }
    return Math::kStrictFp32;
  }
  static bool sixteen_bit(Math m) { return m == Math::kBf16 || m == Math::kFp16; }

  // cuDNN's cudnnMathType_t by value (cudnn_layerwise.cu checks them against cudnn.h), so that
  // the rules below are plain C++ and tested without cuDNN.
  enum class LibraryMath { kDefault = 0, kTensorOp = 1, kTensorOpAllowConversion = 2, kFma = 3 };
  // The math a conv descriptor asks for under `math`: strict FP32 FMA only; TF32 cuDNN's
  // default (TF32 tensor cores permitted for fp32 data on Ampere and later, no down-conversion);
  // bf16 / fp16 tensor ops on their own 16-bit data.
  static LibraryMath descriptor_math(Math math) {
    switch (math) {
    case Math::kStrictFp32: return LibraryMath::kFma;
    case Math::kTf32: return LibraryMath::kDefault;
    default: return LibraryMath::kTensorOp;
    }
  }
  // Whether a cudnnFind entry computed in `entry` may serve `math`. No math takes an entry that
  // down-converts its inputs (ALLOW_CONVERSION: fp32 to FP16, which is neither fp32 nor TF32
  // and would make a baseline faster by being less exact). Strict FP32 takes no tensor-op
  // entry either (and runs what it takes forced to FMA math: CUDNN_DEFAULT_MATH permits TF32).
  static bool accepts(Math math, LibraryMath entry) {
    if (entry == LibraryMath::kTensorOpAllowConversion)
      return false;
    return math != Math::kStrictFp32 || entry != LibraryMath::kTensorOp;
  }
  // NVIDIA_TF32_OVERRIDE=0: NVIDIA's libraries run no TF32 in this process.
  static bool tf32_disabled_by_environment(const char* override_value) {
    return override_value && override_value[0] == '0' && override_value[1] == '\0';
  }

  // Plans `group` of the fused `graph` on the current device, in `math` (which may differ from
  // math_for(graph.dtype()): the reference and the variants choose theirs). Throws
  // Unsupported or CudaError.
  CudnnLayerwise(const Graph& graph, const Group& group, Math math,
                 Algorithms algorithms = Algorithms::kFastest);
  ~CudnnLayerwise();
  CudnnLayerwise(const CudnnLayerwise&) = delete;
  CudnnLayerwise& operator=(const CudnnLayerwise&) = delete;

  // The device buffers the runs use, fp32 NCDHW: inputs[k] the tensor of the group's k-th
  // external input (order of first read, as KernelPlan::input_ids); weights / biases per group
  // layer (nullptr when none); output the last layer's output. 16-bit math converts the inputs
  // and parameters into its own buffers here (synchronous copies) and makes one trial run on
  // `stream` (a cudaStream_t; nullptr = the default stream): a fused conv + bias + relu that cuDNN
  // refuses in 16 bits runs unfused from then on (conv, add, relu), any other refusal throws
  // Unsupported; its own output is poisoned again afterwards (all-ones: NaN). Call again when the
  // buffers or their contents change.
  void bind(const std::vector<const float*>& inputs, const std::vector<const float*>& weights,
            const std::vector<const float*>& biases, float* output, void* stream);
  // Enqueues one run of the group on `stream` (after bind): what is timed.
  void enqueue(void* stream);
  // 16-bit math: converts its output into the bound fp32 output, synchronously, after a run
  // has finished (never inside a timed one); fp32 math: nothing to do.
  void publish();

  // The algorithm and math mode chosen for one convolution (forward or backward data).
  struct ConvChoice {
    int layer = 0;           // in the group (0 = group.first)
    std::string algo;        // "implicit_precomp_gemm", "bwd_data_1", ...
    std::string math;        // "fma", "default", "tensor_op" ("allow_conversion" is refused)
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
