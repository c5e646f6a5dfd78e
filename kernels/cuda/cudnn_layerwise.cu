#include "kernels/cuda/cudnn_layerwise.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <sstream>

#include "kernels/cuda/codegen.h"
#include "kernels/cuda/detail/cuda_call.cuh"
#include "kernels/cuda/statuses.h"
#include "kernels/merged_executor.h"

namespace brickdl::cuda {

namespace {

// y = x > 0 ? x : x·slope, in place: cuDNN has no leaky relu.
__global__ void leaky_relu_kernel(float* y, long long n, float slope) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float v = y[i];
    y[i] = v > 0.f ? v : v * slope;
  }
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
  case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tf32";
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
  int64_t out_numel = 0;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr, x2 = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1; // kDeconv
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace = 0;
  cudnnActivationDescriptor_t activation = nullptr; // a sigmoid or clip step's own
  cudnnPoolingDescriptor_t pool = nullptr;
  cudnnOpTensorDescriptor_t op = nullptr;
};

cudnnTensorDescriptor_t tensor_desc(const TensorShape& s) {
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
  BRICKDL_CUDNN_CALL(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, static_cast<int>(dims.size()),
                                                dims.data(), strides.data()));
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

// Whether a perf entry's math is on tensor cores.
bool tensor_math(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// Whether cudnnFind's entry `m` may serve `math`. Strict FP32 takes no tensor-op entry, and
// the entry's own math does not decide how it runs: CUDNN_DEFAULT_MATH permits TF32 tensor
// cores on Ampere and later, so a strict step always runs with the descriptor forced to
// CUDNN_FMA_MATH (strict_fma below). TF32 takes what the library finds fastest for fp32 data
// under CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, in the entry's own math.
bool accepts(Math math, cudnnMathType_t m) {
  return math == Math::kTf32 || !tensor_math(m);
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
void describe_conv(Step& s, const Layer& l, const TensorShape& in0, cudnnMathType_t want_math,
                   bool transposed = false) {
  const int rank = l.out.spatial_rank;
  s.x = tensor_desc(in0);
  s.y = tensor_desc(l.out);
  s.b = tensor_desc(TensorShape{1, l.out.c, 1, 1, 1, rank});
  BRICKDL_CUDNN_CALL(cudnnCreateFilterDescriptor(&s.w));
  std::vector<int> fdims =
      transposed
          ? std::vector<int>{static_cast<int>(in0.c), static_cast<int>(l.out_channels / l.groups)}
          : std::vector<int>{static_cast<int>(l.out_channels), static_cast<int>(in0.c / l.groups)};
  for (int k : spatial(l.window.kernel, rank))
    fdims.push_back(k);
  BRICKDL_CUDNN_CALL(cudnnSetFilterNdDescriptor(s.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                static_cast<int>(fdims.size()), fdims.data()));
  BRICKDL_CUDNN_CALL(cudnnCreateConvolutionDescriptor(&s.conv));
  const auto pad = spatial(l.window.pad, rank), str = spatial(l.window.stride, rank),
             dil = spatial(l.window.dilation, rank);
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionNdDescriptor(
      s.conv, rank, pad.data(), str.data(), dil.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionGroupCount(s.conv, l.groups));
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionMathType(s.conv, want_math));
}

// A conv step: descriptors and algorithm. Returns its library calls per run.
int plan_conv(cudnnHandle_t handle, Step& s, const Layer& l, const TensorShape& in0, Math math,
              Algorithms algorithms) {
  s.bias = l.bias;
  s.kind = l.activation == Activation::kRelu && l.bias ? Step::kConvBiasRelu : Step::kConv;
  describe_conv(s, l, in0,
                math == Math::kStrictFp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
  const bool chosen = (algorithms == Algorithms::kFastest && find_fastest(handle, s, math)) ||
                      choose_exact(handle, s);
  if (!chosen)
    throw Unsupported("cuDNN baseline: no forward algorithm for " + l.name);
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionMathType(s.conv, s.math));
  return s.kind == Step::kConvBiasRelu ? 1
                                       : 1 + (s.bias ? 1 : 0) + (l.activation != Activation::kNone);
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
  s.kind = Step::kDeconv;
  describe_conv(s, l, in0,
                math == Math::kStrictFp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION,
                true);
  const bool chosen = (algorithms == Algorithms::kFastest && find_fastest_data(handle, s, math)) ||
                      choose_exact_data(handle, s);
  if (!chosen)
    throw Unsupported("cuDNN baseline: no backward-data algorithm for " + l.name);
  BRICKDL_CUDNN_CALL(cudnnSetConvolutionMathType(s.conv, s.math));
  return 1 + (s.bias ? 1 : 0) + (l.activation != Activation::kNone);
}

// A max / avg pool step (floor-mode output sizes only). Returns its calls per run.
int plan_pool(Step& s, const Layer& l, const TensorShape& in0) {
  const int rank = l.out.spatial_rank;
  s.kind = Step::kPool;
  if (l.window.dilation != std::array<int, 3>{1, 1, 1})
    throw Unsupported("cuDNN baseline: dilated pooling (" + l.name + ")");
  s.x = tensor_desc(in0);
  s.y = tensor_desc(l.out);
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

// The activation descriptor of a sigmoid or clip layer (cudnnActivationForward): clip only
// as CUDNN_ACTIVATION_CLIPPED_RELU, min(max(x, 0), max), so its min must be 0.
void describe_activation(Step& s, const Layer& l) {
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_SIGMOID;
  double coef = 0.0;
  if (l.op == OpKind::kClip) {
    if (l.clip_min != 0.0f)
      throw Unsupported("cuDNN baseline: clip " + l.name + " has min " +
                        std::to_string(l.clip_min) +
                        "; cuDNN's clipped relu clips at 0 below, so only min 0 has a call");
    mode = CUDNN_ACTIVATION_CLIPPED_RELU;
    coef = l.clip_max;
  }
  BRICKDL_CUDNN_CALL(cudnnCreateActivationDescriptor(&s.activation));
  BRICKDL_CUDNN_CALL(cudnnSetActivationDescriptor(s.activation, mode, CUDNN_PROPAGATE_NAN, coef));
}

// An add or mul (+ activation), relu, leaky relu, sigmoid or clip step. Returns its calls per
// run.
int plan_eltwise(Step& s, const Layer& l) {
  s.kind = Step::kEltwise;
  if (l.op == OpKind::kRelu)
    s.act = Activation::kRelu;
  if (l.op == OpKind::kLeakyRelu)
    s.act = Activation::kLeakyRelu;
  s.x = tensor_desc(l.out);
  int calls = 0;
  if (l.op == OpKind::kAdd || l.op == OpKind::kMul) {
    BRICKDL_CUDNN_CALL(cudnnCreateOpTensorDescriptor(&s.op));
    BRICKDL_CUDNN_CALL(cudnnSetOpTensorDescriptor(
        s.op, l.op == OpKind::kAdd ? CUDNN_OP_TENSOR_ADD : CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT,
        CUDNN_PROPAGATE_NAN));
    calls += 1;
  }
  if (l.op == OpKind::kSigmoid || l.op == OpKind::kClip) {
    describe_activation(s, l);
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
  case OpKind::kAvgPool: calls += plan_pool(s, l, in0); break;
  case OpKind::kAdd:
  case OpKind::kMul:
  case OpKind::kRelu:
  case OpKind::kLeakyRelu:
  case OpKind::kSigmoid:
  case OpKind::kClip: calls += plan_eltwise(s, l); break;
  default:
    throw Unsupported(std::string("cuDNN baseline: no layer-by-layer call for ") + op_name(l.op) +
                      " (" + l.name + ")");
  }
  if (l.op == OpKind::kConv || l.op == OpKind::kConvTranspose)
    desc << l.name << ": " << choices.back().algo << "/" << choices.back().math << "; ";
  workspace = std::max(workspace, s.workspace);
}

// The epilogue cuDNN did not fuse into step `s`, on its output y in place: relu with
// cudnnActivationForward, leaky relu with our kernel.
void unfused_epilogue(cudnnHandle_t handle, cudnnActivationDescriptor_t relu, const Step& s,
                      float* y, cudaStream_t stream) {
  const float one = 1.f, zero = 0.f;
  const cudnnTensorDescriptor_t out = s.kind == Step::kEltwise ? s.x : s.y;
  if (s.act == Activation::kRelu) {
    BRICKDL_CUDNN_CALL(cudnnActivationForward(handle, relu, &one, out, y, &zero, out, y));
  } else if (s.act == Activation::kLeakyRelu) {
    const int threads = 256;
    const long long blocks = std::min<long long>((s.out_numel + threads - 1) / threads, 65535);
    leaky_relu_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(y, s.out_numel,
                                                                             s.slope);
    BRICKDL_CUDA_CALL(cudaGetLastError());
  }
}

} // namespace

struct CudnnLayerwise::Impl {
  cudnnHandle_t handle = nullptr;
  std::vector<Step> steps;
  std::vector<float*> intermediate; // per group layer; nullptr for the last
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudnnActivationDescriptor_t relu = nullptr;
  int calls = 0;
  std::string description;
  std::vector<CudnnLayerwise::ConvChoice> choices;

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
    }
    if (relu)
      cudnnDestroyActivationDescriptor(relu);
    for (float* p : intermediate)
      if (p)
        cudaFree(p);
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

CudnnLayerwise::CudnnLayerwise(const Graph& graph, const Group& group, Math math,
                               Algorithms algorithms)
    : impl_(std::make_unique<Impl>()) {
  math_for(graph.dtype()); // refuses 16-bit storage: every tensor here is CUDNN_DATA_FLOAT
  Impl& m = *impl_;
  const std::vector<int> inputs = group_external_inputs(graph, group);
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
    // The step joins the list first, so that ~Impl frees its descriptors when planning throws.
    m.steps.push_back(s);
    plan_step(m.handle, m.steps.back(), l, in0, math, algorithms, m.calls, m.workspace_bytes, desc,
              m.choices);
    m.intermediate.push_back(nullptr);
    if (id != group.last)
      BRICKDL_CUDA_CALL(
          cudaMalloc(&m.intermediate.back(), static_cast<size_t>(l.out.numel()) * sizeof(float)));
  }
  if (m.workspace_bytes > 0)
    BRICKDL_CUDA_CALL(cudaMalloc(&m.workspace, m.workspace_bytes));
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

void CudnnLayerwise::enqueue(const std::vector<const float*>& inputs,
                             const std::vector<const float*>& weights,
                             const std::vector<const float*>& biases, float* output, void* stream) {
  Impl& m = *impl_;
  BRICKDL_CUDNN_CALL(cudnnSetStream(m.handle, static_cast<cudaStream_t>(stream)));
  const float one = 1.f, zero = 0.f;
  auto ptr = [&](const Operand& o) -> const float* {
    return o.external ? inputs.at(static_cast<size_t>(o.index))
                      : m.intermediate.at(static_cast<size_t>(o.index));
  };
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const Step& s = m.steps[i];
    float* y = i + 1 == m.steps.size() ? output : m.intermediate[i];
    const float* x = ptr(s.src[0]);
    switch (s.kind) {
    case Step::kConvBiasRelu:
      BRICKDL_CUDNN_CALL(cudnnConvolutionBiasActivationForward(
          m.handle, &one, s.x, x, s.w, weights[i], s.conv, s.algo, m.workspace, m.workspace_bytes,
          &zero, s.y, y, s.b, biases[i], m.relu, s.y, y));
      break;
    case Step::kConv:
      BRICKDL_CUDNN_CALL(cudnnConvolutionForward(m.handle, &one, s.x, x, s.w, weights[i], s.conv,
                                                 s.algo, m.workspace, m.workspace_bytes, &zero, s.y,
                                                 y));
      if (s.bias)
        BRICKDL_CUDNN_CALL(cudnnAddTensor(m.handle, &one, s.b, biases[i], &one, s.y, y));
      break;
    case Step::kDeconv:
      BRICKDL_CUDNN_CALL(cudnnConvolutionBackwardData(m.handle, &one, s.w, weights[i], s.x, x,
                                                      s.conv, s.data_algo, m.workspace,
                                                      m.workspace_bytes, &zero, s.y, y));
      if (s.bias)
        BRICKDL_CUDNN_CALL(cudnnAddTensor(m.handle, &one, s.b, biases[i], &one, s.y, y));
      break;
    case Step::kPool:
      BRICKDL_CUDNN_CALL(cudnnPoolingForward(m.handle, s.pool, &one, s.x, x, &zero, s.y, y));
      break;
    case Step::kEltwise:
      if (s.op) {
        BRICKDL_CUDNN_CALL(
            cudnnOpTensor(m.handle, s.op, &one, s.x, x, &one, s.x, ptr(s.src[1]), &zero, s.x, y));
      } else if (s.act == Activation::kRelu) {
        BRICKDL_CUDNN_CALL(cudnnActivationForward(m.handle, m.relu, &one, s.x, x, &zero, s.x, y));
        continue;
      } else if (s.activation) {
        BRICKDL_CUDNN_CALL(
            cudnnActivationForward(m.handle, s.activation, &one, s.x, x, &zero, s.x, y));
      } else if (x != y) {
        BRICKDL_CUDA_CALL(cudaMemcpyAsync(y, x, static_cast<size_t>(s.out_numel) * sizeof(float),
                                          cudaMemcpyDeviceToDevice,
                                          static_cast<cudaStream_t>(stream)));
      }
      break;
    }
    if (s.kind != Step::kConvBiasRelu && s.kind != Step::kPool)
      unfused_epilogue(m.handle, m.relu, s, y, static_cast<cudaStream_t>(stream));
  }
}

} // namespace brickdl::cuda
