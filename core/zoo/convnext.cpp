// ConvNeXt-T as torchvision.models.convnext_tiny (Liu et al., "A ConvNet for the 2020s", CVPR
// 2022): a 4x4 stride-4 patchify stem with a channel layer norm, four stages of 3, 3, 9, 3
// blocks (96, 192, 384, 768 channels) with a layer norm and a 2x2 stride-2 conv between them,
// global pool, layer norm, classifier. A block: depthwise 7x7 → layer norm over the channels →
// pointwise expansion by 4 → GELU → pointwise projection → layer scale → residual add.
//
// torchvision's blocks permute to channels-last for the norm and the two Linear layers; on our
// layout they are layer_norm over the channels and 1x1 convs, the same arithmetic (what the
// ONNX importer's pattern pass makes of an exported block). The layer scale, a per-channel
// constant, is folded into the projection's weights and bias as fuse_for_inference folds a
// batch-norm: the graph has 6,624 parameters fewer than torchvision's 28,589,128 (one per
// channel of each of the 18 blocks), and the same MACs. Stochastic depth is omitted
// (inference).
//
// Layer names are torchvision's modules: features.S.B.block.K (0 the depthwise conv, 2 the
// norm, 3 and 5 the pointwise convs, 4 the GELU), features.S.B.add, the downsampling
// features.S.0 (norm) and features.S.1 (conv), then avgpool and classifier.0 / .2.
#include <string>

#include "core/graph_builder.h"
#include "core/zoo/builders.h"

namespace brickdl::zoo_detail {

namespace {

constexpr float kEps = 1e-6f; // torchvision's LayerNorm2d and the blocks' LayerNorm

int cn_block(GraphBuilder& b, int x, const std::string& p) {
  const int64_t dim = b.shape(x).c;
  int y = b.conv2d(x, dim, 7, 1, 3, 1, static_cast<int>(dim), true, p + ".block.0");
  y = b.layer_norm(y, kEps, p + ".block.2");
  y = b.conv2d(y, 4 * dim, 1, 1, 0, 1, 1, true, p + ".block.3");
  y = b.gelu(y, p + ".block.4");
  y = b.conv2d(y, dim, 1, 1, 0, 1, 1, true, p + ".block.5"); // times the layer scale, folded
  return b.add(y, x, p + ".add");
}

} // namespace

Graph build_convnext_tiny(const ZooOptions& options) {
  const std::string name = "convnext_tiny";
  const TensorShape in = resolve_input(name, options, 3, {224, 224});
  const int64_t classes = resolve_classes(name, options, 1000);
  GraphBuilder b(name, in, options.dtype);

  int x = b.conv2d(b.input(), 96, 4, 4, 0, 1, 1, true, "features.0.0");
  x = b.layer_norm(x, kEps, "features.0.1");
  const int depths[4] = {3, 3, 9, 3};
  const int64_t dims[4] = {96, 192, 384, 768};
  for (int s = 0; s < 4; ++s) {
    const std::string stage = "features." + std::to_string(2 * s + 1);
    for (int i = 0; i < depths[s]; ++i)
      x = cn_block(b, x, stage + "." + std::to_string(i));
    if (s < 3) {
      const std::string down = "features." + std::to_string(2 * s + 2);
      x = b.layer_norm(x, kEps, down + ".0");
      x = b.conv2d(x, dims[s + 1], 2, 2, 0, 1, 1, true, down + ".1");
    }
  }
  x = b.global_avg_pool(x, "avgpool");
  x = b.layer_norm(x, kEps, "classifier.0");
  x = b.flatten(x, "classifier.1");
  b.linear(x, classes, true, "classifier.2");
  return b.build();
}

} // namespace brickdl::zoo_detail
