#include "kernels/cuda/cudnn_layerwise.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "kernels/cuda/codegen.h"
#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/detail/device_buffers.cuh"
#include "kernels/cuda/statuses.h"
#include "kernels/merged_executor.h"

namespace brickdl::cuda {

namespace {

// Element access of the tensors of each math: fp32, bf16, fp16 (FP32 arithmetic).
__device__ float to_float(float v) {
  return v;
}
__device__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ float to_float(__half v) {
  return __half2float(v);
}
template <class T> __device__ T from_float(float v);
template <> __device__ float from_float<float>(float v) {
  return v;
}
template <> __device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// y = x > 0 ? x : x·slope, in place: cuDNN has no leaky relu.
template <class T> __global__ void leaky_relu_kernel(T* y, long long n, float slope) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float v = to_float(y[i]);
    y[i] = from_float<T>(v > 0.f ? v : v * slope);
  }
}

unsigned grid_for(long long n, int threads) {
  return static_cast<unsigned>(
      std::max<long long>(1, std::min<long long>((n + threads - 1) / threads, 65535)));
}

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
  case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
  case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
  case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
  case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
  case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
  case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
  case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
  case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
  default: return "?";
  }
}

const char* algo_name(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
  case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "bwd_data_0";
  case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "bwd_data_1";
  case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "bwd_data_fft";
  case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "bwd_data_fft_tiling";
  case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "bwd_data_winograd";
  case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "bwd_data_winograd_nonfused";
  default: return "?";
  }
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
  case CUDNN_DEFAULT_MATH: return "default";
  case CUDNN_TENSOR_OP_MATH: return "tensor_op";
  case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "allow_conversion";
  case CUDNN_FMA_MATH: return "fma";
  default: return "?";
  }
}

struct Operand {
  bool external = true;
  int index = 0;
};

struct Step {
  // kDeconv: a transposed conv, run as the data gradient of the conv whose input is its output.
  enum Kind { kConvBiasRelu, kConv, kDeconv, kPool, kEltwise } kind = kConv;
  int layer = 0; // in the group
  std::vector<Operand> src;
  Activation act = Activation::kNone;
  float slope = 0.1f;
  bool bias = false;
  bool bn_pass = false; // kPaperUnfused: a folded batch-norm's pass of its own
  int64_t out_numel = 0;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr, x2 = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1; // kDeconv
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace = 0;
  cudnnActivationDescriptor_t activation = nullptr; // a sigmoid or clip step's own
  cudnnActivationDescriptor_t epilogue = nullptr;   // a sigmoid or clip epilogue (not relu)
  cudnnPoolingDescriptor_t pool = nullptr;
  cudnnOpTensorDescriptor_t op = nullptr;
};

cudnnTensorDescriptor_t tensor_desc(const TensorShape& s, cudnnDataType_t type) {
  cudnnTensorDescriptor_t d = nullptr;
  BRICKDL_CUDNN_CALL(cudnnCreateTensorDescriptor(&d));
  const bool is3d = s.spatial_rank == 3;
  std::vector<int> dims = {static_cast<int>(s.n), static_cast<int>(s.c)};
  if (is3d)
    dims.push_back(static_cast<int>(s.d));
  dims.push_back(static_cast<int>(s.h));
  dims.push_back(static_cast<int>(s.w));
  std::vector<int> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[static_cast<size_t>(i)] =
        strides[static_cast<size_t>(i) + 1] * dims[static_cast<size_t>(i) + 1];
  BRICKDL_CUDNN_CALL(cudnnSetTensorNdDescriptor(d, type, static_cast<int>(dims.size()), dims.data(),
                                                strides.data()));
  return d;
}

// Spatial window attributes for the rank of the tensor (the d slot only for 3-D).
std::vector<int> spatial(const std::array<int, 3>& v, int rank) {
  if (rank == 3)
    return {v[0], v[1], v[2]};
  return {v[1], v[2]};
}

using Math = CudnnLayerwise::Math;
using Algorithms = CudnnLayerwise::Algorithms;

// The tensors' data type under `math`; every computation accumulates in FP32.
cudnnDataType_t data_type(Math math) {
  switch (math) {
  case Math::kBf16: return CUDNN_DATA_BFLOAT16;
  case Math::kFp16: return CUDNN_DATA_HALF;
  default: return CUDNN_DATA_FLOAT;
  }
}

// The tensors' storage under `math` (dev::Storage, as the generated kernels' global memory).
int storage_of(Math math) {
  switch (math) {
  case Math::kBf16: return dev::kStorageBf16;
  case Math::kFp16: return dev::kStorageF16;
  default: return dev::kStorageF32;
  }
}

size_t element_bytes(Math math) {
  return detail::stored_element_bytes(storage_of(math));
}

using LibraryMath = CudnnLayerwise::LibraryMath;
static_assert(static_cast<int>(LibraryMath::kDefault) == CUDNN_DEFAULT_MATH &&
              static_cast<int>(LibraryMath::kTensorOp) == CUDNN_TENSOR_OP_MATH &&
              static_cast<int>(LibraryMath::kTensorOpAllowConversion) ==
                  CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
              static_cast<int>(LibraryMath::kFma) == CUDNN_FMA_MATH);

// The math a conv descriptor asks for (CudnnLayerwise::descriptor_math).
cudnnMathType_t wanted_math(Math math) {
  return static_cast<cudnnMathType_t>(CudnnLayerwise::descriptor_math(math));
}

// Whether cudnnFind's entry `m` may serve `math` (CudnnLayerwise::accepts). For strict FP32 the
// entry's own math does not decide how it runs: CUDNN_DEFAULT_MATH permits TF32 tensor cores on
// Ampere and later, so a strict step always runs with the descriptor forced to CUDNN_FMA_MATH
// (strict_fma below). TF32 takes what the library finds fastest for fp32 data under
// CUDNN_DEFAULT_MATH, in the entry's own math; bf16 / fp16 what it finds fastest for their data
// under CUDNN_TENSOR_OP_MATH.
bool accepts(Math math, cudnnMathType_t m) {
  return CudnnLayerwise::accepts(math, static_cast<LibraryMath>(m));
}

// Puts strict step `s` on CUDNN_FMA_MATH with `algo`, if cuDNN runs `algo` under it (its
// workspace size query succeeds); the workspace is then the larger of the two reports.
template <class Algo, class Query>
bool strict_fma(Step& s, Algo algo, size_t found_workspace, Algo& slot, Query&& workspace_of) {
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionMathType(s.conv, CUDNN_FMA_MATH));
  size_t ws = 0;
  if (workspace_of(algo, &ws) != CUDNN_STATUS_SUCCESS)
    return false;
  slot = algo;
  s.math = CUDNN_FMA_MATH;
  s.workspace = std::max(ws, found_workspace);
  return true;
}

// The fastest algorithm cudnnFind reports that `accepts` the math mode; strict FP32 must not
// run on tensor cores whatever cuDNN reports as allowed. False when none qualifies.
bool find_fastest(cudnnHandle_t handle, Step& s, Math math) {
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int n = 0;
  BRICKDL_CUDNN_CALL(cudnnFindConvolutionForwardAlgorithm(
      handle, s.x, s.w, s.conv, s.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
  const auto workspace_of = [&](cudnnConvolutionFwdAlgo_t a, size_t* ws) {
    return cudnnGetConvolutionForwardWorkspaceSize(handle, s.x, s.w, s.conv, s.y, a, ws);
  };
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || !accepts(math, perf[i].mathType))
      continue;
    // Bias + relu fused needs an algorithm cudnnConvolutionBiasActivationForward takes;
    // every algorithm is accepted for RELU, IMPLICIT_PRECOMP_GEMM for IDENTITY.
    if (math == Math::kStrictFp32) {
      if (strict_fma(s, perf[i].algo, perf[i].memory, s.algo, workspace_of))
        return true;
      continue;
    }
    s.algo = perf[i].algo;
    s.math = perf[i].mathType;
    s.workspace = perf[i].memory;
    return true;
  }
  return false;
}

// Implicit GEMM with FMA math (no Winograd / FFT rounding): the exact algorithms. False when
// cuDNN takes neither.
bool choose_exact(cudnnHandle_t handle, Step& s) {
  const auto workspace_of = [&](cudnnConvolutionFwdAlgo_t a, size_t* ws) {
    return cudnnGetConvolutionForwardWorkspaceSize(handle, s.x, s.w, s.conv, s.y, a, ws);
  };
  for (auto a :
       {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM})
    if (strict_fma(s, a, 0, s.algo, workspace_of))
      return true;
  return false;
}

// find_fastest for a kDeconv step: the backward-data algorithms, x the data gradient's dy
// (the layer's input) and y its dx (the layer's output).
bool find_fastest_data(cudnnHandle_t handle, Step& s, Math math) {
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int n = 0;
  BRICKDL_CUDNN_CALL(cudnnFindConvolutionBackwardDataAlgorithm(
      handle, s.w, s.x, s.conv, s.y, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
  const auto workspace_of = [&](cudnnConvolutionBwdDataAlgo_t a, size_t* ws) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, s.w, s.x, s.conv, s.y, a, ws);
  };
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || !accepts(math, perf[i].mathType))
      continue;
    if (math == Math::kStrictFp32) {
      if (strict_fma(s, perf[i].algo, perf[i].memory, s.data_algo, workspace_of))
        return true;
      continue;
    }
    s.data_algo = perf[i].algo;
    s.math = perf[i].mathType;
    s.workspace = perf[i].memory;
    return true;
  }
  return false;
}

// choose_exact for a kDeconv step: the GEMM-form backward-data algorithms with FMA math
// (ALGO_1 deterministic, ALGO_0 summing with atomics), no Winograd / FFT rounding.
bool choose_exact_data(cudnnHandle_t handle, Step& s) {
  const auto workspace_of = [&](cudnnConvolutionBwdDataAlgo_t a, size_t* ws) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, s.w, s.x, s.conv, s.y, a, ws);
  };
  for (auto a : {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0})
    if (strict_fma(s, a, 0, s.data_algo, workspace_of))
      return true;
  return false;
}

// The filter and convolution descriptors of conv layer `l` reading `in0`. Transposed: the
// conv whose data gradient `l` is (its input is l's output), whose filter [K][C / groups][k]
// is l's weight [Cin][Cout / groups][k] as stored.
void describe_conv(Step& s, const Layer& l, const TensorShape& in0, Math math,
                   bool transposed = false) {
  const int rank = l.out.spatial_rank;
  const cudnnDataType_t type = data_type(math);
  s.x = tensor_desc(in0, type);
  s.y = tensor_desc(l.out, type);
  s.b = tensor_desc(TensorShape{1, l.out.c, 1, 1, 1, rank}, type);
  BRICKDL_CUDNN_CALL(cudnnCreateFilterDescriptor(&s.w));
  std::vector<int> fdims =
      transposed
          ? std::vector<int>{static_cast<int>(in0.c), static_cast<int>(l.out_channels / l.groups)}
          : std::vector<int>{static_cast<int>(l.out_channels), static_cast<int>(in0.c / l.groups)};
  for (int k : spatial(l.window.kernel, rank))
    fdims.push_back(k);
  BRICKDL_CUDNN_CALL(cudnnSetFilterNdDescriptor(s.w, type, CUDNN_TENSOR_NCHW,
                                                static_cast<int>(fdims.size()), fdims.data()));
  BRICKDL_CUDNN_CALL(cudnnCreateConvolutionDescriptor(&s.conv));
  const auto pad = spatial(l.window.pad, rank), str = spatial(l.window.stride, rank),
             dil = spatial(l.window.dilation, rank);
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionNdDescriptor(
      s.conv, rank, pad.data(), str.data(), dil.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionGroupCount(s.conv, l.groups));
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionMathType(s.conv, wanted_math(math)));
}

// The paper's fixed algorithm, implicit GEMM, in the descriptor's math (strict FP32: FMA).
// False when cuDNN does not run it for the step.
bool choose_paper(cudnnHandle_t handle, Step& s, Math math) {
  size_t ws = 0;
  if (cudnnGetConvolutionForwardWorkspaceSize(handle, s.x, s.w, s.conv, s.y,
                                              CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                              &ws) != CUDNN_STATUS_SUCCESS)
    return false;
  s.algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  s.math = wanted_math(math);
  s.workspace = ws;
  return true;
}

// Whether the step's algorithm could be chosen as `algorithms` asks.
bool choose_forward(cudnnHandle_t handle, Step& s, Math math, Algorithms algorithms) {
  switch (algorithms) {
  case Algorithms::kFastest: return find_fastest(handle, s, math) || choose_exact(handle, s);
  case Algorithms::kExact: return choose_exact(handle, s);
  case Algorithms::kPaperUnfused: return choose_paper(handle, s, math);
  }
  return false;
}

// A conv step: descriptors and algorithm. Returns its library calls per run.
int plan_conv(cudnnHandle_t handle, Step& s, const Layer& l, const TensorShape& in0, Math math,
              Algorithms algorithms) {
  const bool paper = algorithms == Algorithms::kPaperUnfused;
  s.bias = l.bias;
  s.bn_pass = paper && l.bn_folded;
  s.kind =
      !paper && l.activation == Activation::kRelu && l.bias ? Step::kConvBiasRelu : Step::kConv;
  describe_conv(s, l, in0, math);
  if (!choose_forward(handle, s, math, algorithms))
    throw Unsupported(std::string("cuDNN baseline: no forward algorithm for ") + l.name +
                      (paper ? " (implicit GEMM, the paper's)" : ""));
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionMathType(s.conv, s.math));
  return s.kind == Step::kConvBiasRelu
             ? 1
             : 1 + (s.bias ? 1 : 0) + (s.bn_pass ? 1 : 0) + (l.activation != Activation::kNone);
}

// A transposed conv step: cudnnConvolutionBackwardData (+ cudnnAddTensor for the bias, +
// the activation epilogue, as an unfused conv). Returns its library calls per run.
int plan_deconv(cudnnHandle_t handle, Step& s, const Layer& l, const TensorShape& in0, Math math,
                Algorithms algorithms) {
  for (int a = 0; a < 3; ++a)
    if (l.output_pad[static_cast<size_t>(a)] >= l.window.stride[static_cast<size_t>(a)])
      throw Unsupported("cuDNN baseline: " + l.name +
                        " has an output_padding not below its stride (the dilation allows it); "
                        "the data gradient of a conv cannot produce that output extent");
  s.bias = l.bias;
  s.bn_pass = algorithms == Algorithms::kPaperUnfused && l.bn_folded;
  s.kind = Step::kDeconv;
  describe_conv(s, l, in0, math, true);
  const bool chosen = (algorithms == Algorithms::kFastest && find_fastest_data(handle, s, math)) ||
                      choose_exact_data(handle, s);
  if (!chosen)
    throw Unsupported("cuDNN baseline: no backward-data algorithm for " + l.name);
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionMathType(s.conv, s.math));
  return 1 + (s.bias ? 1 : 0) + (s.bn_pass ? 1 : 0) + (l.activation != Activation::kNone);
}

// A max / avg pool step (floor-mode output sizes only). Returns its calls per run.
int plan_pool(Step& s, const Layer& l, const TensorShape& in0, Math math) {
  const int rank = l.out.spatial_rank;
  s.kind = Step::kPool;
  if (l.window.dilation != std::array<int, 3>{1, 1, 1})
    throw Unsupported("cuDNN baseline: dilated pooling (" + l.name + ")");
  s.x = tensor_desc(in0, data_type(math));
  s.y = tensor_desc(l.out, data_type(math));
  BRICKDL_CUDNN_CALL(cudnnCreatePoolingDescriptor(&s.pool));
  const cudnnPoolingMode_t mode = l.op == OpKind::kMaxPool ? CUDNN_POOLING_MAX_DETERMINISTIC
                                  : l.count_include_pad
                                      ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                      : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  const auto win = spatial(l.window.kernel, rank), pad = spatial(l.window.pad, rank),
             str = spatial(l.window.stride, rank);
  BRICKDL_CUDNN_CALL(cudnnSetPoolingNdDescriptor(s.pool, mode, CUDNN_PROPAGATE_NAN, rank,
                                                 win.data(), pad.data(), str.data()));
  std::vector<int> out(static_cast<size_t>(rank) + 2);
  BRICKDL_CUDNN_CALL(cudnnGetPoolingNdForwardOutputDim(s.pool, s.x, rank + 2, out.data()));
  if (out.back() != l.out.w || out[out.size() - 2] != l.out.h)
    throw Unsupported("cuDNN baseline: " + l.name +
                      " needs ceil-mode output sizes, cuDNN pools in floor mode");
  return 1;
}

// The descriptor of activation `a` (a sigmoid, silu or clip layer's own, or a layer's epilogue)
// for cudnnActivationForward, with l's clip range: clip only as CUDNN_ACTIVATION_CLIPPED_RELU,
// min(max(x, 0), max), so its min must be 0; silu as CUDNN_ACTIVATION_SWISH with beta 1,
// x · sigmoid(x). Gelu and the hard ones have no call.
void describe_activation(cudnnActivationDescriptor_t* d, Activation a, const Layer& l) {
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_SIGMOID;
  double coef = 0.0;
  if (a == Activation::kClip) {
    if (l.clip_min != 0.0f)
      throw Unsupported("cuDNN baseline: clip " + l.name + " has min " +
                        std::to_string(l.clip_min) +
                        "; cuDNN's clipped relu clips at 0 below, so only min 0 has a call");
    mode = CUDNN_ACTIVATION_CLIPPED_RELU;
    coef = l.clip_max;
  } else if (a == Activation::kSilu) {
    mode = CUDNN_ACTIVATION_SWISH;
  } else if (a != Activation::kSigmoid) {
    throw Unsupported(std::string("cuDNN baseline: no layer-by-layer call for ") +
                      activation_name(a) + " (" + l.name + ")");
  }
  BRICKDL_CUDNN_CALL(cudnnCreateActivationDescriptor(d));
  BRICKDL_CUDNN_CALL(cudnnSetActivationDescriptor(*d, mode, CUDNN_PROPAGATE_NAN, coef));
  if (mode == CUDNN_ACTIVATION_SWISH)
    BRICKDL_CUDNN_CALL(cudnnSetActivationDescriptorSwishBeta(*d, 1.0));
}

// An add or mul (+ activation), relu, leaky relu, sigmoid, silu or clip step. Returns its calls
// per run.
int plan_eltwise(Step& s, const Layer& l, Math math) {
  s.kind = Step::kEltwise;
  if (l.op == OpKind::kRelu)
    s.act = Activation::kRelu;
  if (l.op == OpKind::kLeakyRelu)
    s.act = Activation::kLeakyRelu;
  s.x = tensor_desc(l.out, data_type(math));
  int calls = 0;
  if (l.op == OpKind::kAdd || l.op == OpKind::kMul) {
    BRICKDL_CUDNN_CALL(cudnnCreateOpTensorDescriptor(&s.op));
    BRICKDL_CUDNN_CALL(cudnnSetOpTensorDescriptor(
        s.op, l.op == OpKind::kAdd ? CUDNN_OP_TENSOR_ADD : CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT,
        CUDNN_PROPAGATE_NAN));
    calls += 1;
  }
  if (l.op == OpKind::kSigmoid || l.op == OpKind::kClip || l.op == OpKind::kSilu) {
    describe_activation(&s.activation, op_activation(l.op), l);
    calls += 1;
  }
  return calls + (s.act != Activation::kNone ? 1 : 0);
}

// The choice of conv step `s` (its algorithm `algo`).
template <class Algo> CudnnLayerwise::ConvChoice choice_of(const Step& s, Algo algo) {
  CudnnLayerwise::ConvChoice c;
  c.layer = s.layer;
  c.algo = algo_name(algo);
  c.math = math_name(s.math);
  c.algo_id = static_cast<int>(algo);
  c.math_id = static_cast<int>(s.math);
  c.tensor_ops = s.math != CUDNN_FMA_MATH;
  return c;
}

// Plans step `s` of layer `l` (switch over the ops with a cuDNN call); adds its library calls
// and workspace to `calls` and `workspace`, its algorithm to `desc` and `choices`. Throws
// Unsupported.
void plan_step(cudnnHandle_t handle, Step& s, const Layer& l, const TensorShape& in0, Math math,
               Algorithms algorithms, int& calls, size_t& workspace, std::ostringstream& desc,
               std::vector<CudnnLayerwise::ConvChoice>& choices) {
  switch (l.op) {
  case OpKind::kConv:
    calls += plan_conv(handle, s, l, in0, math, algorithms);
    choices.push_back(choice_of(s, s.algo));
    break;
  case OpKind::kConvTranspose:
    calls += plan_deconv(handle, s, l, in0, math, algorithms);
    choices.push_back(choice_of(s, s.data_algo));
    break;
  case OpKind::kMaxPool:
  case OpKind::kAvgPool: calls += plan_pool(s, l, in0, math); break;
  case OpKind::kAdd:
  case OpKind::kMul:
  case OpKind::kRelu:
  case OpKind::kLeakyRelu:
  case OpKind::kSigmoid:
  case OpKind::kSilu:
  case OpKind::kClip: calls += plan_eltwise(s, l, math); break;
  default:
    throw Unsupported(std::string("cuDNN baseline: no layer-by-layer call for ") + op_name(l.op) +
                      " (" + l.name + ")");
  }
  if (l.op == OpKind::kConv || l.op == OpKind::kConvTranspose)
    desc << l.name << ": " << choices.back().algo << "/" << choices.back().math << "; ";
  workspace = std::max(workspace, s.workspace);
}

// y = leaky_relu(y) in place, for the tensors of `math`.
void leaky_relu(Math math, void* y, long long n, float slope, cudaStream_t stream) {
  const int threads = 256;
  const unsigned grid = grid_for(n, threads);
  switch (math) {
  case Math::kBf16:
    leaky_relu_kernel<<<grid, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(y), n, slope);
    break;
  case Math::kFp16:
    leaky_relu_kernel<<<grid, threads, 0, stream>>>(static_cast<__half*>(y), n, slope);
    break;
  default: leaky_relu_kernel<<<grid, threads, 0, stream>>>(static_cast<float*>(y), n, slope);
  }
  BRICKDL_CUDA_CALL(cudaGetLastError());
}

// The epilogue cuDNN did not fuse into step `s`, on its output y in place: relu, sigmoid, silu
// and clip with cudnnActivationForward, leaky relu with our kernel.
void unfused_epilogue(cudnnHandle_t handle, cudnnActivationDescriptor_t relu, const Step& s,
                      void* y, Math math, cudaStream_t stream) {
  const float one = 1.f, zero = 0.f;
  const cudnnTensorDescriptor_t out = s.kind == Step::kEltwise ? s.x : s.y;
  if (s.act == Activation::kRelu)
    BRICKDL_CUDNN_CALL(cudnnActivationForward(handle, relu, &one, out, y, &zero, out, y));
  else if (s.act == Activation::kLeakyRelu)
    leaky_relu(math, y, s.out_numel, s.slope, stream);
  else if (s.epilogue)
    BRICKDL_CUDNN_CALL(cudnnActivationForward(handle, s.epilogue, &one, out, y, &zero, out, y));
}

// Elements of the weight and the bias of conv or conv_transpose layer `l` reading `in0` (0
// for other ops).
int64_t weight_numel(const Layer& l, const TensorShape& in0) {
  if (l.op != OpKind::kConv && l.op != OpKind::kConvTranspose)
    return 0;
  int64_t n = in0.c * (l.out_channels / l.groups);
  for (int k : spatial(l.window.kernel, l.out.spatial_rank))
    n *= k;
  return n;
}

} // namespace

struct CudnnLayerwise::Impl {
  cudnnHandle_t handle = nullptr;
  Math math = Math::kStrictFp32;
  std::vector<Step> steps;
  std::vector<void*> intermediate; // per group layer; nullptr for the last
  void* zeros = nullptr;           // kPaperUnfused with a batch-norm pass: a zero per channel
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudnnActivationDescriptor_t relu = nullptr;
  int calls = 0;
  std::string description;
  std::vector<CudnnLayerwise::ConvChoice> choices;
  // Sizes (elements) of what bind() converts under 16-bit math.
  std::vector<int64_t> input_numel, weight_numel, bias_numel; // per input / group layer
  int64_t output_numel = 0;
  // What the runs read and write (bind): the bound fp32 buffers, or the 16-bit copies in
  // `owned` (the output last); `published` is the bound fp32 output.
  std::vector<const void*> inputs, weights, biases;
  void* output = nullptr;
  float* published = nullptr;
  std::vector<detail::DeviceBuffer> owned;

  // A 16-bit copy of n fp32 values at `from` (nullptr for none).
  const void* stored(const float* from, int64_t n) {
    if (!from || n == 0)
      return nullptr;
    owned.push_back(detail::upload_stored(detail::download(from, n), storage_of(math)));
    return owned.back().as<void>();
  }
  void run(cudaStream_t stream, bool trial);
  // The batch-norm passes' per-channel zeros (all-zero bits are 0 in every storage type).
  void alloc_zeros(const Graph& graph, const Group& group) {
    int64_t channels = 0;
    for (const Step& s : steps)
      if (s.bn_pass)
        channels = std::max(channels, graph.layer(group.first + s.layer).out.c);
    if (channels == 0)
      return;
    const size_t bytes = static_cast<size_t>(channels) * sizeof(float);
    BRICKDL_CUDA_CALL(cudaMalloc(&zeros, bytes));
    BRICKDL_CUDA_CALL(cudaMemset(zeros, 0, bytes));
  }
  // The bias and batch-norm passes of an unfused conv step, on its output y.
  void run_bias_passes(const Step& s, size_t i, void* y) {
    const float one = 1.f;
    if (s.bias)
      BRICKDL_CUDNN_CALL(cudnnAddTensor(handle, &one, s.b, biases[i], &one, s.y, y));
    if (s.bn_pass)
      BRICKDL_CUDNN_CALL(cudnnAddTensor(handle, &one, s.b, zeros, &one, s.y, y));
  }
  void run_conv_bias_relu(Step& s, size_t i, const void* x, void* y, cudaStream_t stream,
                          bool trial);

  ~Impl() {
    for (Step& s : steps) {
      for (auto* t : {s.x, s.y, s.b, s.x2})
        if (t)
          cudnnDestroyTensorDescriptor(t);
      if (s.w)
        cudnnDestroyFilterDescriptor(s.w);
      if (s.conv)
        cudnnDestroyConvolutionDescriptor(s.conv);
      if (s.pool)
        cudnnDestroyPoolingDescriptor(s.pool);
      if (s.op)
        cudnnDestroyOpTensorDescriptor(s.op);
      if (s.activation)
        cudnnDestroyActivationDescriptor(s.activation);
      if (s.epilogue)
        cudnnDestroyActivationDescriptor(s.epilogue);
    }
    if (relu)
      cudnnDestroyActivationDescriptor(relu);
    for (void* p : intermediate)
      if (p)
        cudaFree(p);
    if (zeros)
      cudaFree(zeros);
    if (workspace)
      cudaFree(workspace);
    if (handle)
      cudnnDestroy(handle);
  }
};

bool CudnnLayerwise::is_supported() {
  return true;
}

std::string CudnnLayerwise::version() {
  const size_t v = cudnnGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

// Long on purpose: one pass over the group's layers, each planned as its step.
CudnnLayerwise::CudnnLayerwise(const Graph& graph, const Group& group, Math math,
                               Algorithms algorithms)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.math = math;
  const std::vector<int> inputs = group_external_inputs(graph, group);
  for (int id : inputs)
    m.input_numel.push_back(graph.layer(id).out.numel());
  m.output_numel = graph.layer(group.last).out.numel();
  auto operand = [&](int id) {
    if (group.contains(id))
      return Operand{false, id - group.first};
    return Operand{true,
                   static_cast<int>(std::find(inputs.begin(), inputs.end(), id) - inputs.begin())};
  };
  BRICKDL_CUDNN_CALL(cudnnCreate(&m.handle));
  BRICKDL_CUDNN_CALL(cudnnCreateActivationDescriptor(&m.relu));
  BRICKDL_CUDNN_CALL(
      cudnnSetActivationDescriptor(m.relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  std::ostringstream desc;
  for (int id = group.first; id <= group.last; ++id) {
    const Layer& l = graph.layer(id);
    Step s;
    s.layer = id - group.first;
    s.act = l.activation;
    s.slope = l.leaky_slope;
    s.out_numel = l.out.numel();
    for (int in : l.inputs)
      s.src.push_back(operand(in));
    const TensorShape& in0 = graph.layer(l.inputs.at(0)).out;
    if (l.out.spatial_rank != 2 && l.out.spatial_rank != 3)
      throw Unsupported("cuDNN baseline: " + l.name + " is not 2-D/3-D");
    m.weight_numel.push_back(weight_numel(l, in0));
    m.bias_numel.push_back(l.bias ? l.out.c : 0);
    // The step joins the list first, so that ~Impl frees its descriptors when planning throws.
    m.steps.push_back(s);
    if (l.activation != Activation::kNone && l.activation != Activation::kRelu &&
        l.activation != Activation::kLeakyRelu)
      describe_activation(&m.steps.back().epilogue, l.activation, l);
    plan_step(m.handle, m.steps.back(), l, in0, math, algorithms, m.calls, m.workspace_bytes, desc,
              m.choices);
    m.intermediate.push_back(nullptr);
    if (id != group.last)
      BRICKDL_CUDA_CALL(cudaMalloc(&m.intermediate.back(),
                                   static_cast<size_t>(l.out.numel()) * element_bytes(math)));
  }
  if (m.workspace_bytes > 0)
    BRICKDL_CUDA_CALL(cudaMalloc(&m.workspace, m.workspace_bytes));
  m.alloc_zeros(graph, group);
  if (math == Math::kTf32 && tf32_disabled_by_environment(std::getenv("NVIDIA_TF32_OVERRIDE")))
    desc << "(NVIDIA_TF32_OVERRIDE=0: cuDNN runs no TF32, FP32 FMA instead) ";
  m.description = desc.str();
}

CudnnLayerwise::~CudnnLayerwise() = default;

int CudnnLayerwise::calls_per_run() const {
  return impl_->calls;
}
std::string CudnnLayerwise::describe() const {
  return impl_->description;
}
const std::vector<CudnnLayerwise::ConvChoice>& CudnnLayerwise::choices() const {
  return impl_->choices;
}

void CudnnLayerwise::bind(const std::vector<const float*>& inputs,
                          const std::vector<const float*>& weights,
                          const std::vector<const float*>& biases, float* output, void* stream) {
  Impl& m = *impl_;
  const auto st = static_cast<cudaStream_t>(stream);
  m.published = output;
  m.inputs.assign(inputs.begin(), inputs.end());
  m.weights.assign(weights.begin(), weights.end());
  m.biases.assign(biases.begin(), biases.end());
  m.output = output;
  if (!sixteen_bit(m.math))
    return;
  m.owned.clear();
  for (size_t k = 0; k < m.inputs.size(); ++k)
    m.inputs[k] = m.stored(inputs[k], m.input_numel.at(k));
  for (size_t i = 0; i < m.steps.size(); ++i) {
    m.weights[i] = m.stored(weights.at(i), m.weight_numel[i]);
    m.biases[i] = m.stored(biases.at(i), m.bias_numel[i]);
  }
  const size_t out_bytes = static_cast<size_t>(m.output_numel) * element_bytes(m.math);
  m.owned.emplace_back(out_bytes);
  m.output = m.owned.back().as<void>();
  try {
    m.run(st, true);
    BRICKDL_CUDA_CALL(cudaStreamSynchronize(st));
  } catch (const CudaError& e) {
    throw Unsupported(std::string("cuDNN baseline in 16 bits: ") + e.what());
  }
  BRICKDL_CUDA_CALL(cudaMemsetAsync(m.output, 0xFF, out_bytes, st)); // NaN until a run writes
}

void CudnnLayerwise::enqueue(void* stream) {
  impl_->run(static_cast<cudaStream_t>(stream), false);
}

void CudnnLayerwise::publish() {
  const Impl& m = *impl_;
  if (sixteen_bit(m.math))
    detail::publish_stored(m.owned.back(), m.published, storage_of(m.math));
}

// A conv + bias + relu step as one cudnnConvolutionBiasActivationForward call. In a trial run
// (bind, 16-bit math) a refusal of that call (not supported, bad parameter) splits the step
// into conv, bias add and relu for good; any other failure throws.
void CudnnLayerwise::Impl::run_conv_bias_relu(Step& s, size_t i, const void* x, void* y,
                                              cudaStream_t stream, bool trial) {
  const float one = 1.f, zero = 0.f;
  const cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
      handle, &one, s.x, x, s.w, weights[i], s.conv, s.algo, workspace, workspace_bytes, &zero, s.y,
      y, s.b, biases[i], relu, s.y, y);
  if (st == CUDNN_STATUS_SUCCESS)
    return;
  if (!trial || (st != CUDNN_STATUS_NOT_SUPPORTED && st != CUDNN_STATUS_BAD_PARAM))
    BRICKDL_CUDNN_CALL(st);
  s.kind = Step::kConv;
  calls += 2; // conv, add, relu instead of one call
  description += "(layer " + std::to_string(s.layer) + ": conv, bias and relu unfused) ";
  BRICKDL_CUDNN_CALL(cudnnConvolutionForward(handle, &one, s.x, x, s.w, weights[i], s.conv, s.algo,
                                             workspace, workspace_bytes, &zero, s.y, y));
  BRICKDL_CUDNN_CALL(cudnnAddTensor(handle, &one, s.b, biases[i], &one, s.y, y));
  unfused_epilogue(handle, relu, s, y, math, stream);
}

// Long on purpose: one switch over the step kinds, each a cuDNN call or two.
void CudnnLayerwise::Impl::run(cudaStream_t stream, bool trial) {
  BRICKDL_CUDNN_CALL(cudnnSetStream(handle, stream));
  const float one = 1.f, zero = 0.f;
  auto ptr = [&](const Operand& o) -> const void* {
    return o.external ? inputs.at(static_cast<size_t>(o.index))
                      : intermediate.at(static_cast<size_t>(o.index));
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    Step& s = steps[i];
    void* y = i + 1 == steps.size() ? output : intermediate[i];
    const void* x = ptr(s.src[0]);
    switch (s.kind) {
    case Step::kConvBiasRelu: run_conv_bias_relu(s, i, x, y, stream, trial); continue;
    case Step::kConv:
      BRICKDL_CUDNN_CALL(cudnnConvolutionForward(handle, &one, s.x, x, s.w, weights[i], s.conv,
                                                 s.algo, workspace, workspace_bytes, &zero, s.y,
                                                 y));
      run_bias_passes(s, i, y);
      break;
    case Step::kDeconv:
      BRICKDL_CUDNN_CALL(cudnnConvolutionBackwardData(handle, &one, s.w, weights[i], s.x, x, s.conv,
                                                      s.data_algo, workspace, workspace_bytes,
                                                      &zero, s.y, y));
      run_bias_passes(s, i, y);
      break;
    case Step::kPool:
      BRICKDL_CUDNN_CALL(cudnnPoolingForward(handle, s.pool, &one, s.x, x, &zero, s.y, y));
      continue;
    case Step::kEltwise:
      if (s.op) {
        BRICKDL_CUDNN_CALL(
            cudnnOpTensor(handle, s.op, &one, s.x, x, &one, s.x, ptr(s.src[1]), &zero, s.x, y));
      } else if (s.act == Activation::kRelu) {
        BRICKDL_CUDNN_CALL(cudnnActivationForward(handle, relu, &one, s.x, x, &zero, s.x, y));
        continue;
      } else if (s.activation) {
        BRICKDL_CUDNN_CALL(
            cudnnActivationForward(handle, s.activation, &one, s.x, x, &zero, s.x, y));
      } else if (x != y) {
        BRICKDL_CUDA_CALL(cudaMemcpyAsync(y, x,
                                          static_cast<size_t>(s.out_numel) * element_bytes(math),
                                          cudaMemcpyDeviceToDevice, stream));
      }
      break;
    }
    unfused_epilogue(handle, relu, s, y, math, stream);
  }
}

} // namespace brickdl::cuda
