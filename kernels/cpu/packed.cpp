#include "kernels/cpu/packed.h"

#include <algorithm>
#include <mutex>

#include "core/error.h"

namespace brickdl::kernels::cpu {

namespace {

std::vector<float> padded(const std::vector<float>& v, int64_t channels, int lanes) {
  if (v.empty())
    return {};
  std::vector<float> p(static_cast<size_t>(round_up(channels, lanes)), 0.0f);
  std::copy(v.begin(), v.end(), p.begin());
  return p;
}

// [group][m-block][tap][cin_g][mb] from the stored [cout][cin_g][taps] (packed.h).
AlignedFloats pack_conv(const Layer& l, const std::vector<float>& w, int64_t cin_g) {
  const int64_t groups = l.groups, cout_g = l.out_channels / groups;
  const int64_t taps = int64_t{l.window.kernel[0]} * l.window.kernel[1] * l.window.kernel[2];
  AlignedFloats p = aligned_floats(groups * taps * cin_g * cout_g);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t m0 = 0; m0 < cout_g; m0 += kConvBlockM) {
      const int64_t mb = std::min(kConvBlockM, cout_g - m0);
      float* block = p.get() + g * taps * cin_g * cout_g + m0 * taps * cin_g;
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t ci = 0; ci < cin_g; ++ci)
          for (int64_t co = 0; co < mb; ++co)
            block[(t * cin_g + ci) * mb + co] =
                w[static_cast<size_t>(((g * cout_g + m0 + co) * cin_g + ci) * taps + t)];
    }
  return p;
}

// [block][tap][lane], zero lanes beyond the channels.
AlignedFloats pack_depthwise(const Layer& l, const std::vector<float>& w, int lanes) {
  const int64_t c = l.out_channels, blocks = ceil_div(c, lanes);
  const int64_t taps = int64_t{l.window.kernel[0]} * l.window.kernel[1] * l.window.kernel[2];
  AlignedFloats p = aligned_floats(blocks * taps * lanes);
  std::fill_n(p.get(), blocks * taps * lanes, 0.0f);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t t = 0; t < taps; ++t)
      p[static_cast<size_t>(((ch / lanes) * taps + t) * lanes + ch % lanes)] =
          w[static_cast<size_t>(ch * taps + t)];
  return p;
}

// [in][out] from the stored [out][in].
AlignedFloats pack_linear(const Layer& l, const std::vector<float>& w, int64_t in) {
  const int64_t out = l.out_channels;
  AlignedFloats p = aligned_floats(in * out);
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o)
      p[static_cast<size_t>(i * out + o)] = w[static_cast<size_t>(o * in + i)];
  return p;
}

} // namespace

PackedLayer pack_layer(const Graph& g, const Layer& l, const LayerWeights& w, int lanes) {
  PackedLayer p;
  p.layer = &l;
  p.lanes = lanes;
  p.raw = &w;
  switch (l.op) {
  case OpKind::kConv: {
    const int64_t cin = g.layer(l.inputs[0]).out.c;
    p.depthwise = l.groups == cin && l.out_channels == cin && l.groups > 1;
    p.weight =
        p.depthwise ? pack_depthwise(l, w.weight, lanes) : pack_conv(l, w.weight, cin / l.groups);
    p.bias = padded(w.bias, l.out_channels, lanes);
    break;
  }
  case OpKind::kLinear:
    p.weight = pack_linear(l, w.weight, g.layer(l.inputs[0]).out.numel() / l.out.n);
    p.bias = padded(w.bias, l.out_channels, lanes);
    break;
  case OpKind::kBatchNorm:
  case OpKind::kLayerNorm:
    p.scale = padded(w.weight, l.out.c, lanes);
    p.shift = padded(w.bias, l.out.c, lanes);
    break;
  default: break;
  }
  return p;
}

struct PackedModel::State {
  std::mutex mutex;
  std::map<int, std::unique_ptr<PackedLayer>> layers;
};

PackedModel::PackedModel(const Graph& graph, const ModelWeights& weights, int lanes)
    : graph_(&graph), weights_(&weights), lanes_(lanes), state_(std::make_unique<State>()) {}

PackedModel::~PackedModel() = default;

const PackedLayer& PackedModel::at(int id) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto& slot = state_->layers[id];
  if (!slot)
    slot = std::make_unique<PackedLayer>(
        pack_layer(*graph_, graph_->layer(id), weights_->at(id), lanes_));
  return *slot;
}

void PackedModel::pack(int first, int last) const {
  for (int id = first; id <= last; ++id)
    (void)at(id);
}

} // namespace brickdl::kernels::cpu
