// Darknet-53, the ImageNet classifier of YOLOv3 (Redmon & Farhadi 2018, Table 1; darknet's
// cfg/darknet53.cfg): a 3x3 stem, then five stages, each a 3x3 stride-2 downsampling conv and
// residual blocks (1x1 to half the channels, 3x3 back) repeated 1, 2, 8, 8, 4 times; every conv
// is followed by batch-norm and leaky-relu 0.1; the residual add has no activation; global
// average pool and a 1000-way classifier. The cfg's classifier is a 1x1 conv with bias on the
// pooled 1x1 map; it is modelled as the linear layer timm uses (the same weights and MACs).
//
// Names follow timm's darknet53 (stem.conv1, stages.S.conv_down, stages.S.blocks.B.conv1 /
// conv2, head.fc), with ".conv", ".bn", ".act" for the parts of each conv-norm-act.
#include <string>

#include "core/graph_builder.h"
#include "core/zoo/builders.h"

namespace brickdl::zoo_detail {

namespace {

constexpr float kLeakySlope = 0.1f; // darknet's "leaky" activation

int conv_bn_leaky(GraphBuilder& b, int x, int64_t out_channels, int kernel, int stride,
                  const std::string& p) {
  const int c = b.conv2d(x, out_channels, kernel, stride, kernel / 2, 1, 1, false, p + ".conv");
  return b.leaky_relu(b.batch_norm(c, p + ".bn"), kLeakySlope, p + ".act");
}

} // namespace

Graph build_darknet53(const ZooOptions& options) {
  const std::string name = "darknet53";
  const TensorShape in = resolve_input(name, options, 3, {256, 256});
  const int64_t classes = resolve_classes(name, options, 1000);
  GraphBuilder b(name, in, options.dtype);

  int x = conv_bn_leaky(b, b.input(), 32, 3, 1, "stem.conv1");
  const int blocks[5] = {1, 2, 8, 8, 4};
  for (int s = 0; s < 5; ++s) {
    const std::string stage = "stages." + std::to_string(s);
    const int64_t channels = int64_t{64} << s;
    x = conv_bn_leaky(b, x, channels, 3, 2, stage + ".conv_down");
    for (int i = 0; i < blocks[s]; ++i) {
      const std::string p = stage + ".blocks." + std::to_string(i);
      int y = conv_bn_leaky(b, x, channels / 2, 1, 1, p + ".conv1");
      y = conv_bn_leaky(b, y, channels, 3, 1, p + ".conv2");
      x = b.add(y, x, p + ".add"); // darknet [shortcut] activation=linear
    }
  }
  x = b.global_avg_pool(x, "head.global_pool");
  x = b.flatten(x, "head.flatten");
  b.linear(x, classes, true, "head.fc");
  return b.build();
}

} // namespace brickdl::zoo_detail
