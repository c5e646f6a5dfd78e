#include "kernels/weights.h"

#include <cmath>
#include <string>

#include "core/error.h"

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

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h;
}

void fill_uniform(Rng& rng, std::vector<float>& v, float bound) {
  for (float& x : v)
    x = rng.uniform(-bound, bound);
}

// Random batch-norm statistics folded to y = x·scale + shift.
void batch_norm_scale_shift(Rng& rng, int64_t channels, std::vector<float>* scale,
                            std::vector<float>* shift) {
  constexpr double kEps = 1e-5;
  scale->resize(static_cast<size_t>(channels));
  shift->resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const double gamma = rng.uniform(0.75f, 1.25f);
    const double beta = rng.uniform(-0.25f, 0.25f);
    const double mean = rng.uniform(-0.25f, 0.25f);
    const double var = rng.uniform(0.75f, 1.25f);
    const double s = gamma / std::sqrt(var + kEps);
    (*scale)[static_cast<size_t>(c)] = static_cast<float>(s);
    (*shift)[static_cast<size_t>(c)] = static_cast<float>(beta - mean * s);
  }
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

LayerWeights make_layer_weights(const Graph& graph, int id, uint64_t seed) {
  const Layer& l = graph.layer(id);
  LayerWeights w;
  Rng rng(mix64(seed ^ mix64(fnv1a(l.name))));
  switch (l.op) {
  case OpKind::kConv:
  case OpKind::kLinear: {
    const TensorShape& in = graph.layer(l.inputs.at(0)).out;
    const int64_t fan_in = l.op == OpKind::kConv ? (in.c / l.groups) * l.window.kernel[0] *
                                                       l.window.kernel[1] * l.window.kernel[2]
                                                 : in.c * in.spatial();
    w.weight.resize(static_cast<size_t>(l.out_channels * fan_in));
    fill_uniform(rng, w.weight, static_cast<float>(std::sqrt(6.0 / static_cast<double>(fan_in))));
    if (l.bn_folded) {
      std::vector<float> scale, shift;
      batch_norm_scale_shift(rng, l.out_channels, &scale, &shift);
      w = fold_batch_norm(w, scale, shift);
    } else if (l.bias) {
      w.bias.resize(static_cast<size_t>(l.out_channels));
      fill_uniform(rng, w.bias, static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in))));
    }
    break;
  }
  case OpKind::kBatchNorm: batch_norm_scale_shift(rng, l.out.c, &w.weight, &w.bias); break;
  default: break;
  }
  return w;
}

ModelWeights make_weights(const Graph& graph, uint64_t seed, int first, int last) {
  if (last < 0)
    last = graph.size() - 1;
  std::vector<LayerWeights> layers(static_cast<size_t>(graph.size()));
  for (int id = std::max(first, 0); id <= last; ++id)
    layers[static_cast<size_t>(id)] = make_layer_weights(graph, id, seed);
  return ModelWeights(std::move(layers));
}

Tensor random_tensor(const TensorShape& shape, uint64_t seed, uint64_t stream) {
  Tensor t(shape);
  Rng rng(mix64(seed ^ mix64(stream + 0x5851f42d4c957f2dULL)));
  for (float& x : t.values())
    x = rng.uniform(-1.0f, 1.0f);
  return t;
}

} // namespace brickdl::kernels
