#include "kernels/weights.h"

#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "core/hash.h"

namespace brickdl::kernels {

namespace {

// splitmix64: tiny, fast, and the same on every platform and standard library, so the
// .npy files brickdl-run writes do not depend on the C++ library that built it.
class Rng {
public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }
  // Uniform in [lo, hi), 24 random bits (exact in fp32).
  float uniform(float lo, float hi) {
    const float u = static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
  }

private:
  uint64_t state_;
};

// FNV-1a of a layer name from a basis one digit short of FNV's own: it seeds every random
// weight, so the committed results depend on it; kept.
uint64_t name_hash(const std::string& s) {
  return fnv1a(s, 1469598103934665603ULL);
}

void fill_uniform(Rng& rng, std::vector<float>& v, float bound) {
  for (float& x : v)
    x = rng.uniform(-bound, bound);
}

// Random batch-norm statistics folded to y = x·scale + shift.
void batch_norm_scale_shift(Rng& rng, int64_t channels, std::vector<float>* scale,
                            std::vector<float>* shift) {
  const auto n = static_cast<size_t>(channels);
  std::vector<float> gamma(n), beta(n), mean(n), var(n);
  for (size_t c = 0; c < n; ++c) {
    gamma[c] = rng.uniform(0.75f, 1.25f);
    beta[c] = rng.uniform(-0.25f, 0.25f);
    mean[c] = rng.uniform(-0.25f, 0.25f);
    var[c] = rng.uniform(0.75f, 1.25f);
  }
  batch_norm_affine(gamma, beta, mean, var, 1e-5, scale, shift);
}

// The number of weights of a conv, conv_transpose or linear layer (weight_dims), and the
// fan-in of its random initialisation: weights per output channel.
std::pair<int64_t, int64_t> weight_count(const Graph& graph, const Layer& l) {
  const std::vector<int64_t> dims = weight_dims(graph, l);
  const int64_t count = std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
  return {count, count / l.out_channels};
}

} // namespace

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

LayerWeights fold_batch_norm(const LayerWeights& raw, const std::vector<float>& scale,
                             const std::vector<float>& shift) {
  const size_t outs = scale.size();
  BRICKDL_CHECK(outs > 0 && shift.size() == outs && raw.weight.size() % outs == 0 &&
                    (raw.bias.empty() || raw.bias.size() == outs),
                "batch-norm of " << outs << " channels on " << raw.weight.size() << " weights");
  const size_t per_out = raw.weight.size() / outs;
  LayerWeights w;
  w.weight.resize(raw.weight.size());
  w.bias.resize(outs);
  for (size_t o = 0; o < outs; ++o) {
    for (size_t i = 0; i < per_out; ++i)
      w.weight[o * per_out + i] = raw.weight[o * per_out + i] * scale[o];
    w.bias[o] = (raw.bias.empty() ? 0.0f : raw.bias[o] * scale[o]) + shift[o];
  }
  return w;
}

LayerWeights fold_batch_norm(const Layer& layer, const LayerWeights& raw,
                             const std::vector<float>& scale, const std::vector<float>& shift) {
  if (layer.op != OpKind::kConvTranspose)
    return fold_batch_norm(raw, scale, shift);
  // [Cin][Cout/g][k...]: output channel g·(Cout/g) + j of input channel ci in group g.
  const auto outs = static_cast<size_t>(layer.out_channels);
  const auto groups = static_cast<size_t>(layer.groups);
  BRICKDL_CHECK(scale.size() == outs && shift.size() == outs && raw.weight.size() % outs == 0 &&
                    (raw.bias.empty() || raw.bias.size() == outs),
                "batch-norm of " << outs << " channels on " << raw.weight.size() << " weights");
  const size_t cout_g = outs / groups;
  const auto kvol =
      static_cast<size_t>(layer.window.kernel[0]) * layer.window.kernel[1] * layer.window.kernel[2];
  BRICKDL_CHECK(raw.weight.size() % (cout_g * kvol) == 0, "conv_transpose weights");
  const size_t cin = raw.weight.size() / (cout_g * kvol);
  const size_t cin_g = cin / groups;
  LayerWeights w;
  w.weight.resize(raw.weight.size());
  w.bias.resize(outs);
  for (size_t ci = 0; ci < cin; ++ci)
    for (size_t j = 0; j < cout_g; ++j) {
      const size_t o = (ci / cin_g) * cout_g + j;
      for (size_t k = 0; k < kvol; ++k) {
        const size_t i = (ci * cout_g + j) * kvol + k;
        w.weight[i] = raw.weight[i] * scale[o];
      }
    }
  for (size_t o = 0; o < outs; ++o)
    w.bias[o] = (raw.bias.empty() ? 0.0f : raw.bias[o] * scale[o]) + shift[o];
  return w;
}

void random_batch_norm(uint64_t seed, int64_t channels, std::vector<float>* scale,
                       std::vector<float>* shift) {
  Rng rng(mix64(seed));
  batch_norm_scale_shift(rng, channels, scale, shift);
}

const LayerWeights& ModelWeights::at(int id) const {
  BRICKDL_CHECK(id >= 0 && id < size(), "no weights for layer " << id);
  return layers_[static_cast<size_t>(id)];
}

LayerWeights& ModelWeights::at(int id) {
  BRICKDL_CHECK(id >= 0 && id < size(), "no weights for layer " << id);
  return layers_[static_cast<size_t>(id)];
}

RawLayerWeights random_raw_weights(const Graph& graph, int id, uint64_t seed) {
  const Layer& l = graph.layer(id);
  RawLayerWeights r;
  LayerWeights& w = r.raw;
  Rng rng(mix64(seed ^ mix64(name_hash(l.name))));
  switch (l.op) {
  case OpKind::kConv:
  case OpKind::kConvTranspose:
  case OpKind::kLinear: {
    const auto [count, fan_in] = weight_count(graph, l);
    w.weight.resize(static_cast<size_t>(count));
    fill_uniform(rng, w.weight, static_cast<float>(std::sqrt(6.0 / static_cast<double>(fan_in))));
    if (l.bn_folded) {
      batch_norm_scale_shift(rng, l.out_channels, &r.bn_scale, &r.bn_shift);
    } else if (l.bias) {
      w.bias.resize(static_cast<size_t>(l.out_channels));
      fill_uniform(rng, w.bias, static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in))));
    }
    break;
  }
  case OpKind::kBatchNorm: batch_norm_scale_shift(rng, l.out.c, &w.weight, &w.bias); break;
  case OpKind::kLayerNorm:
    // gamma near 1 and beta near 0, as for a batch-norm's.
    w.weight.resize(static_cast<size_t>(l.out.c));
    w.bias.resize(static_cast<size_t>(l.out.c));
    for (float& g : w.weight)
      g = rng.uniform(0.75f, 1.25f);
    fill_uniform(rng, w.bias, 0.25f);
    break;
  default: break;
  }
  return r;
}

LayerWeights make_layer_weights(const Graph& graph, int id, uint64_t seed) {
  RawLayerWeights r = random_raw_weights(graph, id, seed);
  if (r.bn_scale.empty())
    return std::move(r.raw);
  return fold_batch_norm(graph.layer(id), r.raw, r.bn_scale, r.bn_shift);
}

ModelWeights make_weights(const Graph& graph, uint64_t seed, int first, int last) {
  if (last < 0)
    last = graph.size() - 1;
  std::vector<LayerWeights> layers(static_cast<size_t>(graph.size()));
  for (int id = std::max(first, 0); id <= last; ++id)
    layers[static_cast<size_t>(id)] = make_layer_weights(graph, id, seed);
  return ModelWeights(std::move(layers));
}

namespace {

// The parameters `graph` carries for layer `name`, checked against the sizes the layer needs.
const NamedParams& imported(const Graph& graph, const Layer& l, const std::string& name,
                            size_t weights, size_t biases, bool bias_optional) {
  const auto it = graph.params()->find(name);
  if (it == graph.params()->end())
    throw UserError("model '" + graph.name() + "': no parameters for layer '" + name + "'");
  const NamedParams& p = it->second;
  if (p.weight.size() != weights || !(p.bias.size() == biases || (bias_optional && p.bias.empty())))
    throw UserError(fmt::format("model '{}': layer '{}' ({}) needs {} weights and {} biases, its "
                                "parameters have {} and {}",
                                graph.name(), name, op_name(l.op), weights, biases, p.weight.size(),
                                p.bias.size()));
  return p;
}

LayerWeights imported_layer_weights(const Graph& graph, int id) {
  const Layer& l = graph.layer(id);
  switch (l.op) {
  case OpKind::kConv:
  case OpKind::kConvTranspose:
  case OpKind::kLinear: {
    const auto count = static_cast<size_t>(weight_count(graph, l).first);
    const auto outs = static_cast<size_t>(l.out_channels);
    // A folded conv has a bias either way; its own (before the batch-norm) is optional.
    const NamedParams& p = imported(graph, l, l.name, count, l.bias ? outs : 0, l.bn_folded);
    LayerWeights raw{p.weight, p.bias};
    if (!l.bn_folded)
      return raw;
    // fuse_for_inference records the folded batch-norm first (before any activation).
    BRICKDL_CHECK(!l.fused_from.empty(), "layer " << l.name << " folds no batch-norm");
    const NamedParams& bn = imported(graph, l, l.fused_from.front(), outs, outs, false);
    return fold_batch_norm(l, raw, bn.weight, bn.bias);
  }
  case OpKind::kBatchNorm:
  case OpKind::kLayerNorm: {
    const auto c = static_cast<size_t>(l.out.c);
    const NamedParams& p = imported(graph, l, l.name, c, c, false);
    return LayerWeights{p.weight, p.bias};
  }
  default: return {};
  }
}

} // namespace

ModelWeights model_weights(const Graph& graph, uint64_t seed) {
  if (!graph.params())
    return make_weights(graph, seed);
  std::vector<LayerWeights> layers(static_cast<size_t>(graph.size()));
  for (int id = 1; id < graph.size(); ++id)
    layers[static_cast<size_t>(id)] = imported_layer_weights(graph, id);
  return ModelWeights(std::move(layers));
}

ParamStore unfused_params(const Graph& fused, uint64_t seed) {
  if (fused.params())
    return *fused.params();
  ParamStore store;
  for (int id = 1; id < fused.size(); ++id) {
    const Layer& l = fused.layer(id);
    RawLayerWeights r = random_raw_weights(fused, id, seed);
    if (r.raw.empty())
      continue;
    if (l.bn_folded) {
      BRICKDL_CHECK(!l.fused_from.empty(), "layer " << l.name << " folds no batch-norm");
      store[l.fused_from.front()] = NamedParams{std::move(r.bn_scale), std::move(r.bn_shift)};
    }
    store[l.name] = NamedParams{std::move(r.raw.weight), std::move(r.raw.bias)};
  }
  return store;
}

Tensor random_tensor(const TensorShape& shape, uint64_t seed, uint64_t stream) {
  Tensor t(shape);
  Rng rng(mix64(seed ^ mix64(stream + 0x5851f42d4c957f2dULL)));
  for (float& x : t.values())
    x = rng.uniform(-1.0f, 1.0f);
  return t;
}

} // namespace brickdl::kernels
