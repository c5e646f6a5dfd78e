#pragma once
// Random but reproducible parameters of a (fused) graph, and random activations.
//
// Every layer's parameters come from its own stream, keyed by (seed, layer name), so a group
// measured alone gets the same weights as the same layers inside the whole model.
//
// Stored form (what the executors use and what brickdl-run writes):
//  - conv:   weight [Cout][Cin/groups][kd][kh][kw] (kd == 1 for 2-D; PyTorch's Conv2d layout
//            after dropping kd), bias [Cout] or empty;
//  - conv_transpose: weight [Cin][Cout/groups][kd][kh][kw] (PyTorch's and ONNX's layout),
//            bias [Cout] or empty;
//  - linear: weight [out][in], bias [out] or empty;
//  - batch_norm (not folded): weight = scale [C], bias = shift [C], y = x·scale + shift;
//  - layer_norm: weight = gamma [C], bias = beta [C] (random: gamma in [0.75, 1.25], beta in
//            [−0.25, 0.25]);
//  - a conv / linear with bn_folded carries the batch-norm folded in: from raw weights W and
//    random batch-norm statistics (gamma, beta, running mean, running var, eps = 1e-5),
//    scale = gamma / sqrt(var + eps), W' = W·scale[co], bias' = beta − mean·scale
//    (the raw layer is taken without a bias of its own). fold_batch_norm does the folding.
// Raw weights are uniform in ±sqrt(6 / fan_in) (variance-preserving under relu), batch-norm
// gamma and var in [0.75, 1.25], beta and mean in [−0.25, 0.25].
#include <cstdint>
#include <vector>

#include "core/graph.h"
#include "kernels/tensor.h"

namespace brickdl::kernels {

struct LayerWeights {
  std::vector<float> weight;
  std::vector<float> bias;
  bool empty() const { return weight.empty() && bias.empty(); }
};

// Parameters per layer id; layers without parameters (or not generated) have empty entries.
class ModelWeights {
public:
  ModelWeights() = default;
  explicit ModelWeights(std::vector<LayerWeights> layers) : layers_(std::move(layers)) {}
  const LayerWeights& at(int id) const;
  LayerWeights& at(int id);
  int size() const { return static_cast<int>(layers_.size()); }

private:
  std::vector<LayerWeights> layers_;
};

// Folds a batch-norm (y = x·scale + shift per output channel) into the conv / linear
// parameters `raw` (its bias, if any, is scaled too): W' = W·scale[o], b' = b·scale + shift.
LayerWeights fold_batch_norm(const LayerWeights& raw, const std::vector<float>& scale,
                             const std::vector<float>& shift);
// The same for the parameters of `layer` in its own layout (conv_transpose: output channels
// are the second weight axis, per group).
LayerWeights fold_batch_norm(const Layer& layer, const LayerWeights& raw,
                             const std::vector<float>& scale, const std::vector<float>& shift);
// Random batch-norm statistics in folded form (see above), channels values each.
void random_batch_norm(uint64_t seed, int64_t channels, std::vector<float>* scale,
                       std::vector<float>* shift);

// Random parameters of one layer of `graph` (empty for layers without parameters), before
// any batch-norm folding: `raw` in the layer's stored form, and for a layer with bn_folded
// the folded batch-norm's scale and shift (else empty).
struct RawLayerWeights {
  LayerWeights raw;
  std::vector<float> bn_scale, bn_shift;
};
RawLayerWeights random_raw_weights(const Graph& graph, int id, uint64_t seed);
// Random parameters of one layer of `graph` (empty for layers without parameters).
LayerWeights make_layer_weights(const Graph& graph, int id, uint64_t seed);
// Parameters of the layers [first, last] of `graph` (last < 0: to the end); others empty.
ModelWeights make_weights(const Graph& graph, uint64_t seed, int first = 1, int last = -1);

// The parameters a run of the whole model uses: the graph's own (Graph::params, an imported
// model's, batch-norms folded as fuse_for_inference folded the layers) when it carries them,
// else make_weights(graph, seed). Measurements keep random weights (make_weights): their
// timing does not depend on the values, and their reference outputs are cached per workload.
// Throws UserError when a layer's imported parameters are missing or the wrong size.
ModelWeights model_weights(const Graph& graph, uint64_t seed);

// The parameters of the unfused layers behind `fused` (a fuse_for_inference result) in the
// form Graph::params holds them: what an ONNX export writes so that model_weights of the
// re-imported model equals model_weights(fused, seed) bit for bit. A graph's own parameters
// when it carries them; else the seeded random ones (a folded batch-norm under its own name).
ParamStore unfused_params(const Graph& fused, uint64_t seed);

// A tensor of `shape` with values uniform in [−1, 1), from `seed` and `stream`.
Tensor random_tensor(const TensorShape& shape, uint64_t seed, uint64_t stream = 0);

// Deterministic 64-bit mix (splitmix64 finaliser); used to key random streams.
uint64_t mix64(uint64_t x);

} // namespace brickdl::kernels
