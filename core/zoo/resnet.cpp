// ResNet-50 as torchvision.models.resnet50 (ResNet v1.5: the stride of a downsampling
// bottleneck sits on its 3x3 conv, not on the first 1x1 as in the original paper).
//
// Layer names are those of torchvision's FX graph (torchvision.models.feature_extraction):
// a module called more than once gets "_1", "_2" suffixes, so a bottleneck reads
//   layerL.B.conv1 bn1 relu  conv2 bn2 relu_1  conv3 bn3  [downsample.0 downsample.1]  add relu_2
#include <string>

#include "core/graph_builder.h"
#include "core/zoo/builders.h"

namespace brickdl::zoo_detail {

namespace {

constexpr int kExpansion = 4;

int bottleneck(GraphBuilder& b, int x, int64_t planes, int stride, const std::string& p) {
  const int64_t in_channels = b.shape(x).c;
  int y = b.conv2d(x, planes, 1, 1, 0, 1, 1, false, p + ".conv1");
  y = b.relu(b.batch_norm(y, p + ".bn1"), p + ".relu");
  y = b.conv2d(y, planes, 3, stride, 1, 1, 1, false, p + ".conv2");
  y = b.relu(b.batch_norm(y, p + ".bn2"), p + ".relu_1");
  y = b.conv2d(y, planes * kExpansion, 1, 1, 0, 1, 1, false, p + ".conv3");
  y = b.batch_norm(y, p + ".bn3");
  int identity = x;
  if (stride != 1 || in_channels != planes * kExpansion) {
    identity = b.conv2d(x, planes * kExpansion, 1, stride, 0, 1, 1, false, p + ".downsample.0");
    identity = b.batch_norm(identity, p + ".downsample.1");
  }
  return b.relu(b.add(y, identity, p + ".add"), p + ".relu_2");
}

} // namespace

Graph build_resnet50(const ZooOptions& options) {
  const std::string name = "resnet50";
  const TensorShape in = resolve_input(name, options, 3, {224, 224});
  const int64_t classes = resolve_classes(name, options, 1000);
  GraphBuilder b(name, in, options.dtype);

  int x = b.conv2d(b.input(), 64, 7, 2, 3, 1, 1, false, "conv1");
  x = b.relu(b.batch_norm(x, "bn1"), "relu");
  x = b.max_pool(x, 3, 2, 1, false, "maxpool");

  const int blocks[4] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage;
    for (int i = 0; i < blocks[stage]; ++i) {
      const int stride = (stage > 0 && i == 0) ? 2 : 1;
      x = bottleneck(b, x, planes, stride,
                     "layer" + std::to_string(stage + 1) + "." + std::to_string(i));
    }
  }
  x = b.global_avg_pool(x, "avgpool"); // AdaptiveAvgPool2d((1, 1))
  x = b.flatten(x, "flatten");
  b.linear(x, classes, true, "fc");
  return b.build();
}

} // namespace brickdl::zoo_detail
