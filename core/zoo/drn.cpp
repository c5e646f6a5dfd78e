// DRN-C-26 from "Dilated Residual Networks" (Yu, Koltun, Funkhouser, CVPR 2017), as drn_c_26
// of the authors' reference code (fyu/drn, drn.py): a 7x7 stride-1 stem with 16 channels, eight
// levels of BasicBlocks [1, 1, 2, 2, 2, 2, 1, 1] with channels 16, 32, 64, 128, 256, 512, 512,
// 512; levels 2-4 downsample by 2 (output stride 8), level 5 is dilated by 2 and level 6 by 4;
// levels 7 and 8 are the degridding blocks (dilation 2, then 1) without residual connections.
// The classifier averages the 28x28 map (AvgPool2d(28) at 224x224, a global average pool; the
// code's pool_size follows the input) and applies a 1x1 conv with bias, then flattens.
//
// Names follow the reference modules in torchvision's FX style:
//   layerL.B.conv1 bn1 relu conv2 bn2 [downsample.0 downsample.1] [add] relu_1
#include <string>

#include "core/graph_builder.h"
#include "core/zoo/builders.h"

namespace brickdl::zoo_detail {

namespace {

struct Level {
  int64_t channels;
  int blocks;
  int stride;
  int dilation;
  bool residual;
};

// drn_c_26: DRN(BasicBlock, [1, 1, 2, 2, 2, 2, 1, 1], arch='C'). Levels 5 and 6 are built with
// new_level=False, so even their first block uses the full dilation.
constexpr Level kLevels[8] = {
    {16, 1, 1, 1, true},  {32, 1, 2, 1, true},  {64, 2, 2, 1, true},   {128, 2, 2, 1, true},
    {256, 2, 1, 2, true}, {512, 2, 1, 4, true}, {512, 1, 1, 2, false}, {512, 1, 1, 1, false},
};

int basic_block(GraphBuilder& b, int x, const Level& level, int stride, const std::string& p) {
  const int64_t in_channels = b.shape(x).c;
  const int d = level.dilation;
  int y = b.conv2d(x, level.channels, 3, stride, d, d, 1, false, p + ".conv1");
  y = b.relu(b.batch_norm(y, p + ".bn1"), p + ".relu");
  y = b.conv2d(y, level.channels, 3, 1, d, d, 1, false, p + ".conv2");
  y = b.batch_norm(y, p + ".bn2");
  if (level.residual) {
    int identity = x;
    if (stride != 1 || in_channels != level.channels) {
      identity = b.conv2d(x, level.channels, 1, stride, 0, 1, 1, false, p + ".downsample.0");
      identity = b.batch_norm(identity, p + ".downsample.1");
    }
    y = b.add(y, identity, p + ".add");
  }
  return b.relu(y, p + ".relu_1");
}

} // namespace

Graph build_drn_c_26(const ZooOptions& options) {
  const std::string name = "drn_c_26";
  const TensorShape in = resolve_input(name, options, 3, {224, 224});
  const int64_t classes = resolve_classes(name, options, 1000);
  GraphBuilder b(name, in, options.dtype);

  int x = b.conv2d(b.input(), kLevels[0].channels, 7, 1, 3, 1, 1, false, "conv1");
  x = b.relu(b.batch_norm(x, "bn1"), "relu");
  for (int l = 0; l < 8; ++l) {
    for (int i = 0; i < kLevels[l].blocks; ++i) {
      const int stride = i == 0 ? kLevels[l].stride : 1;
      x = basic_block(b, x, kLevels[l], stride,
                      "layer" + std::to_string(l + 1) + "." + std::to_string(i));
    }
  }
  x = b.global_avg_pool(x, "avgpool");
  x = b.conv2d(x, classes, 1, 1, 0, 1, 1, /*bias=*/true, "fc");
  b.flatten(x, "view");
  return b.build();
}

} // namespace brickdl::zoo_detail
