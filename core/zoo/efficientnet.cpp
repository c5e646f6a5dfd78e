// EfficientNet-B0 as torchvision.models.efficientnet_b0 (Tan and Le, "EfficientNet: Rethinking
// Model Scaling for Convolutional Neural Networks", ICML 2019, Table 1): a 3x3 stem, 16 MBConv
// blocks in 7 stages, a 1x1 conv to 1280 channels, global pool, classifier. An MBConv block:
// 1x1 expansion by 6 (not in stage 1) → depthwise k x k → squeeze-and-excitation (global pool,
// 1x1 conv to a quarter of the block's input channels, SiLU, 1x1 conv back, sigmoid, the
// [N, C, 1, 1] scale times the map) → 1x1 linear projection; a residual add when the
// stride is 1 and the channels stay. Every activation but the SE's gate is SiLU.
//
// Layer names are torchvision's modules: features.S.B.block.K[.J] (K counts the block's
// modules: [expand,] depthwise, SE, project), the SE's avgpool / fc1 / activation / fc2 /
// scale_activation and its product "mul", the block's residual "add", then avgpool, flatten and
// classifier.1. Stochastic depth and dropout are omitted (inference).
#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/zoo/builders.h"

namespace brickdl::zoo_detail {

namespace {

// Conv2dNormActivation with SiLU: conv (no bias) → batch-norm → SiLU, names p.0, p.1, p.2.
int conv_bn_silu(GraphBuilder& b, int x, int64_t out, int kernel, int stride, int groups,
                 const std::string& p) {
  const int y = b.conv2d(x, out, kernel, stride, (kernel - 1) / 2, 1, groups, false, p + ".0");
  return b.silu(b.batch_norm(y, p + ".1"), p + ".2");
}

// torchvision's SqueezeExcitation: the map scaled per image and channel by a gate computed from
// its global average: channel_mul of the map by the [N, C, 1, 1] gate (broadcast, core/graph.h).
// The pool ends any merged group before it; the multiply merges into the group after it
// (docs/kernels.md, the SE vector).
int squeeze_excitation(GraphBuilder& b, int x, int64_t squeeze, const std::string& p) {
  const int64_t channels = b.shape(x).c;
  int s = b.global_avg_pool(x, p + ".avgpool");
  s = b.conv2d(s, squeeze, 1, 1, 0, 1, 1, true, p + ".fc1");
  s = b.silu(s, p + ".activation");
  s = b.conv2d(s, channels, 1, 1, 0, 1, 1, true, p + ".fc2");
  s = b.sigmoid(s, p + ".scale_activation");
  return b.channel_mul(x, s, p + ".mul");
}

int mbconv(GraphBuilder& b, int x, int64_t out, int kernel, int stride, int expand,
           const std::string& p) {
  const int64_t in = b.shape(x).c;
  const int64_t hidden = in * expand;
  int y = x;
  int k = 0; // index of the next module in p.block
  const auto next = [&] { return p + ".block." + std::to_string(k++); };
  if (expand != 1)
    y = conv_bn_silu(b, y, hidden, 1, 1, 1, next());
  y = conv_bn_silu(b, y, hidden, kernel, stride, static_cast<int>(hidden), next());
  y = squeeze_excitation(b, y, std::max<int64_t>(1, in / 4), next());
  const std::string project = next();
  y = b.batch_norm(b.conv2d(y, out, 1, 1, 0, 1, 1, false, project + ".0"), project + ".1");
  return stride == 1 && in == out ? b.add(y, x, p + ".add") : y;
}

} // namespace

Graph build_efficientnet_b0(const ZooOptions& options) {
  const std::string name = "efficientnet_b0";
  const TensorShape in = resolve_input(name, options, 3, {224, 224});
  const int64_t classes = resolve_classes(name, options, 1000);
  GraphBuilder b(name, in, options.dtype);

  int x = conv_bn_silu(b, b.input(), 32, 3, 2, 1, "features.0");
  // The paper's Table 1 (B0): expansion, kernel, first stride, output channels, repeats.
  struct Stage {
    int expand, kernel, stride, channels, repeats;
  };
  const Stage stages[] = {{1, 3, 1, 16, 1},  {6, 3, 2, 24, 2},  {6, 5, 2, 40, 2}, {6, 3, 2, 80, 3},
                          {6, 5, 1, 112, 3}, {6, 5, 2, 192, 4}, {6, 3, 1, 320, 1}};
  int stage_index = 1;
  for (const Stage& st : stages) {
    for (int i = 0; i < st.repeats; ++i)
      x = mbconv(b, x, st.channels, st.kernel, i == 0 ? st.stride : 1, st.expand,
                 "features." + std::to_string(stage_index) + "." + std::to_string(i));
    ++stage_index;
  }
  x = conv_bn_silu(b, x, 1280, 1, 1, 1, "features." + std::to_string(stage_index));
  x = b.global_avg_pool(x, "avgpool");
  x = b.flatten(x, "flatten");
  b.linear(x, classes, true, "classifier.1");
  return b.build();
}

} // namespace brickdl::zoo_detail
