#pragma once
// Reference ops: the ground truth every other execution is checked against. Plain loops over
// whole NC(D)HW tensors, one output element at a time, with PyTorch's semantics (zero padding
// for conv, −inf for max pool, count_include_pad and ceil_mode for avg pool,
// align_corners = False for bilinear upsample). Storage is fp32; sums accumulate in fp32 or,
// on request, in fp64.
//
// Summation order, per output element: conv over input channel, then kd, kh, kw (padding
// taps skipped), then + bias, then the activation epilogue. The fast CPU kernels
// (kernels/cpu/) sum in another order (GEMM blocking), so they agree within a tolerance
// (kernels/validation.h), not bit for bit.
//
// Threads: where the build has OpenMP, the loops over output elements (images × channels,
// pixels, or flat) run on OpenMP's threads (omp_set_num_threads / OMP_NUM_THREADS decide how
// many); each element is computed whole by one thread in the order above, so the results are
// bit-identical on any number of threads.
#include <array>
#include <functional>
#include <vector>

#include "core/graph.h"
#include "kernels/tensor.h"
#include "kernels/weights.h"

namespace brickdl::kernels {

enum class Accumulation { kF32, kF64 };

struct Epilogue {
  Activation activation = Activation::kNone;
  float slope = 0.1f;             // leaky relu
  float clip_lo = 0, clip_hi = 0; // clip
};

// weight [Cout][Cin/groups][kd][kh][kw]; bias [Cout] or empty.
Tensor conv(const Tensor& x, const std::vector<float>& weight, const std::vector<float>& bias,
            int64_t out_channels, const Window& window, int groups, Epilogue epilogue = {},
            Accumulation acc = Accumulation::kF32);
// y = x·scale[c] + shift[c] (batch-norm in inference form).
Tensor batch_norm(const Tensor& x, const std::vector<float>& scale,
                  const std::vector<float>& shift);
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, float slope);
Tensor add(const Tensor& a, const Tensor& b, Epilogue epilogue = {});
Tensor concat(const std::vector<const Tensor*>& xs); // along channels
Tensor max_pool(const Tensor& x, const Window& window, bool ceil_mode);
Tensor avg_pool(const Tensor& x, const Window& window, bool ceil_mode, bool count_include_pad,
                Accumulation acc = Accumulation::kF32);
Tensor global_avg_pool(const Tensor& x, Accumulation acc = Accumulation::kF32);
// Integer scale on every spatial axis of the tensor (h, w; and d for 3-D tensors).
Tensor upsample(const Tensor& x, int scale, bool bilinear);
Tensor flatten(const Tensor& x);
// Transposed conv: weight [Cin][Cout/groups][kd][kh][kw]; bias [Cout] or empty. Each output
// element gathers the taps that reach it, over input channel, then kd, kh, kw.
Tensor conv_transpose(const Tensor& x, const std::vector<float>& weight,
                      const std::vector<float>& bias, const Layer& layer, Epilogue epilogue = {},
                      Accumulation acc = Accumulation::kF32);
Tensor sigmoid(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor hard_swish(const Tensor& x);
Tensor hard_sigmoid(const Tensor& x);
Tensor gelu(const Tensor& x);
// x (N, C, ...) times s (N, C, 1, ...): every element of channel c of image n by s[n, c].
Tensor channel_mul(const Tensor& x, const Tensor& s);
Tensor clip(const Tensor& x, float lo, float hi);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// Constant padding (negative pads crop) of the spatial dims, (d, h, w) order.
Tensor pad(const Tensor& x, const std::array<int, 3>& begin, const std::array<int, 3>& end,
           float value);
// Channels [begin, end) of x.
Tensor slice(const Tensor& x, int64_t begin, int64_t end);
// Output channel j·g + i <- input channel i·(C/g) + j (torch's channel_shuffle).
Tensor channel_shuffle(const Tensor& x, int groups);
// Per pixel over the channels: (x − mean) / sqrt(var + eps) · gamma[c] + beta[c] (biased
// variance, as PyTorch's LayerNorm over a channels-last tensor).
Tensor layer_norm(const Tensor& x, const std::vector<float>& gamma, const std::vector<float>& beta,
                  float epsilon, Accumulation acc = Accumulation::kF32);
// x flat (N, in); weight [out][in]; bias [out] or empty.
Tensor linear(const Tensor& x, const std::vector<float>& weight, const std::vector<float>& bias,
              int64_t out_features, Epilogue epilogue = {}, Accumulation acc = Accumulation::kF32);

// One layer of a graph, dispatched on its op with its attributes (epilogue included).
// `inputs` are the outputs of layer.inputs, in order. The result has shape layer.out.
Tensor run_layer(const Layer& layer, const std::vector<const Tensor*>& inputs,
                 const LayerWeights& weights, Accumulation acc = Accumulation::kF32);

// Called as a whole-graph run goes (here and in execute_plan): every layer up to and including
// `last_done` has run (graph layer ids; the last layer's id when the run is complete).
using LayerProgress = std::function<void(int last_done)>;

// Every layer of `graph` in order from `inputs` (one per runtime input, graph.inputs() order);
// returns the graph's outputs (graph.outputs() order). Intermediate tensors are freed after
// their last reader. `progress`, when set, is called after each layer.
std::vector<Tensor> run_graph_outputs(const Graph& graph, std::vector<Tensor> inputs,
                                      const ModelWeights& weights,
                                      Accumulation acc = Accumulation::kF32,
                                      const LayerProgress& progress = {});
// The same for a graph of one input (`input`, the output of layer 0) and one output.
Tensor run_graph(const Graph& graph, const Tensor& input, const ModelWeights& weights,
                 Accumulation acc = Accumulation::kF32, const LayerProgress& progress = {});

} // namespace brickdl::kernels
