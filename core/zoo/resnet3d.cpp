// 3-D ResNet-34 of Hara, Kataoka, Satoh ("Can Spatiotemporal 3D CNNs Retrace the History of
// 2D CNNs and ImageNet?", CVPR 2018) as models/resnet.py of their 3D-ResNets-PyTorch code:
// conv1 7x7x7 with stride (1, 2, 2) and padding 3 (conv1_t_size 7, conv1_t_stride 1), a 3x3x3
// stride-2 max-pool, BasicBlocks of two 3x3x3 convs in stages [3, 4, 6, 3] with 64..512
// channels, global average pool and a linear classifier (400 Kinetics classes). Input: 16-frame
// 112x112 clips.
//
// Shortcuts are the code's default type B (1x1x1 conv + batch-norm where the shape changes).
// The paper's Kinetics ResNet-34 used type A (stride-2 subsampling and zero channels, no
// weights), which the IR cannot express without a zero-tensor op; type B adds 173,824
// parameters (three 1x1x1 convs and their batch-norms) and their MACs.
//
// Names follow the reference modules in torchvision's FX style:
//   layerL.B.conv1 bn1 relu conv2 bn2 [downsample.0 downsample.1] add relu_1
#include <string>

#include "core/graph_builder.h"
#include "core/zoo/builders.h"

namespace brickdl::zoo_detail {

namespace {

int basic_block(GraphBuilder& b, int x, int64_t planes, int stride, const std::string& p) {
  const int64_t in_channels = b.shape(x).c;
  int y = b.conv3d(x, planes, 3, stride, 1, 1, 1, false, p + ".conv1");
  y = b.relu(b.batch_norm(y, p + ".bn1"), p + ".relu");
  y = b.conv3d(y, planes, 3, 1, 1, 1, 1, false, p + ".conv2");
  y = b.batch_norm(y, p + ".bn2");
  int identity = x;
  if (stride != 1 || in_channels != planes) {
    identity = b.conv3d(x, planes, 1, stride, 0, 1, 1, false, p + ".downsample.0");
    identity = b.batch_norm(identity, p + ".downsample.1");
  }
  return b.relu(b.add(y, identity, p + ".add"), p + ".relu_1");
}

} // namespace

Graph build_resnet3d_34(const ZooOptions& options) {
  const std::string name = "resnet3d_34";
  const TensorShape in = resolve_input(name, options, 3, {16, 112, 112});
  const int64_t classes = resolve_classes(name, options, 400);
  GraphBuilder b(name, in, options.dtype);

  Window conv1;
  conv1.kernel = {7, 7, 7};
  conv1.stride = {1, 2, 2};
  conv1.pad = {3, 3, 3};
  int x = b.conv(b.input(), 64, conv1, 1, false, "conv1");
  x = b.relu(b.batch_norm(x, "bn1"), "relu");
  x = b.max_pool(x, 3, 2, 1, false, "maxpool");

  const int blocks[4] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage;
    for (int i = 0; i < blocks[stage]; ++i) {
      const int stride = (stage > 0 && i == 0) ? 2 : 1;
      x = basic_block(b, x, planes, stride,
                      "layer" + std::to_string(stage + 1) + "." + std::to_string(i));
    }
  }
  x = b.global_avg_pool(x, "avgpool"); // AdaptiveAvgPool3d((1, 1, 1))
  x = b.flatten(x, "view");
  b.linear(x, classes, true, "fc");
  return b.build();
}

} // namespace brickdl::zoo_detail
