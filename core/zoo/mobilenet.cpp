// MobileNetV2 (width 1.0) as torchvision.models.mobilenet_v2 (Sandler et al., "MobileNetV2:
// Inverted Residuals and Linear Bottlenecks", CVPR 2018, Table 2): a 3x3 stem, 17 inverted
// residual blocks (1x1 expansion by t, 3x3 depthwise, 1x1 linear projection; a residual add when
// the stride is 1 and the channels stay), a 1x1 conv to 1280 channels, global pool, classifier.
//
// Layer names are torchvision's modules: features.N.conv.K[.J] per block (features.1 has no
// expansion), features.N.add for the residual, then adaptive_avg_pool2d, flatten and
// classifier.1 (the forward's functional calls). ReLU6 is clip [0, 6]; the classifier's dropout
// is omitted (inference).
#include <string>

#include "core/graph_builder.h"
#include "core/zoo/builders.h"

namespace brickdl::zoo_detail {

namespace {

int relu6(GraphBuilder& b, int x, const std::string& name) {
  return b.clip(x, 0.0f, 6.0f, name);
}

// Conv2dNormActivation: conv (no bias) → batch-norm → ReLU6, torchvision's names p.0, p.1, p.2.
int conv_bn_relu6(GraphBuilder& b, int x, int64_t out, int kernel, int stride, int groups,
                  const std::string& p) {
  const int y = b.conv2d(x, out, kernel, stride, (kernel - 1) / 2, 1, groups, false, p + ".0");
  return relu6(b, b.batch_norm(y, p + ".1"), p + ".2");
}

int inverted_residual(GraphBuilder& b, int x, int64_t out, int stride, int expand,
                      const std::string& p) {
  const int64_t in = b.shape(x).c;
  const int64_t hidden = in * expand;
  int y = x;
  int k = 0; // index of the next module in p.conv
  if (expand != 1)
    y = conv_bn_relu6(b, y, hidden, 1, 1, 1, p + ".conv." + std::to_string(k++));
  y = conv_bn_relu6(b, y, hidden, 3, stride, static_cast<int>(hidden),
                    p + ".conv." + std::to_string(k++));
  y = b.conv2d(y, out, 1, 1, 0, 1, 1, false, p + ".conv." + std::to_string(k++));
  y = b.batch_norm(y, p + ".conv." + std::to_string(k));
  return stride == 1 && in == out ? b.add(x, y, p + ".add") : y;
}

} // namespace

Graph build_mobilenet_v2(const ZooOptions& options) {
  const std::string name = "mobilenet_v2";
  const TensorShape in = resolve_input(name, options, 3, {224, 224});
  const int64_t classes = resolve_classes(name, options, 1000);
  GraphBuilder b(name, in, options.dtype);

  int x = conv_bn_relu6(b, b.input(), 32, 3, 2, 1, "features.0");
  // The paper's Table 2: expansion t, output channels c, repeats n, first stride s.
  struct Stage {
    int t, c, n, s;
  };
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int index = 1;
  for (const Stage& st : stages)
    for (int i = 0; i < st.n; ++i, ++index)
      x = inverted_residual(b, x, st.c, i == 0 ? st.s : 1, st.t,
                            "features." + std::to_string(index));
  x = conv_bn_relu6(b, x, 1280, 1, 1, 1, "features." + std::to_string(index));
  x = b.global_avg_pool(x, "adaptive_avg_pool2d");
  x = b.flatten(x, "flatten");
  b.linear(x, classes, true, "classifier.1");
  return b.build();
}

} // namespace brickdl::zoo_detail
