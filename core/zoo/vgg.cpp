// VGG-16 with batch-norm as torchvision.models.vgg16_bn (configuration "D").
//
// Names are the indices of torchvision's nn.Sequential containers ("features.0" is the first
// conv, "features.1" its batch-norm, ...). Dropout (classifier.2 and classifier.5) is an
// identity at inference and is omitted, so those indices are absent.
#include <string>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/zoo/builders.h"

namespace brickdl::zoo_detail {

namespace {

constexpr int kPool = 0; // a max-pool entry in the configuration
constexpr int kConfigD[] = {64,    64,  kPool, 128, 128,   kPool, 256, 256, 256,
                            kPool, 512, 512,   512, kPool, 512,   512, 512, kPool};
constexpr int64_t kPooledExtent = 7; // AdaptiveAvgPool2d((7, 7))

} // namespace

Graph build_vgg16_bn(const ZooOptions& options) {
  const std::string name = "vgg16_bn";
  const TensorShape in = resolve_input(name, options, 3, {224, 224});
  const int64_t classes = resolve_classes(name, options, 1000);
  GraphBuilder b(name, in, options.dtype);

  int x = b.input();
  int index = 0;
  const auto feature = [&index] { return "features." + std::to_string(index++); };
  for (int v : kConfigD) {
    if (v == kPool) {
      x = b.max_pool(x, 2, 2, 0, false, feature());
    } else {
      x = b.conv2d(x, v, 3, 1, 1, 1, 1, /*bias=*/true, feature()); // torchvision keeps the bias
      x = b.batch_norm(x, feature());
      x = b.relu(x, feature());
    }
  }

  // AdaptiveAvgPool2d((7, 7)): at 224x224 the features are already 7x7 and it is an identity,
  // so no layer is added. On a multiple (e.g. 14x14 at 448) it is a uniform average pool; other
  // extents need PyTorch's uneven adaptive windows, which the IR does not have.
  const TensorShape& f = b.shape(x);
  if (f.h % kPooledExtent != 0 || f.w % kPooledExtent != 0)
    throw ShapeError("layer 'avgpool' of vgg16_bn: adaptive average pooling to 7x7 needs "
                     "features whose extents are multiples of 7, got " +
                     f.str() + " from input " + in.str() +
                     "; use an input size that is a multiple of 224");
  if (f.h != kPooledExtent || f.w != kPooledExtent) {
    Window w;
    w.kernel = {1, static_cast<int>(f.h / kPooledExtent), static_cast<int>(f.w / kPooledExtent)};
    w.stride = w.kernel;
    x = b.avg_pool(x, w, true, false, "avgpool");
  }

  x = b.flatten(x, "flatten");
  x = b.relu(b.linear(x, 4096, true, "classifier.0"), "classifier.1");
  x = b.relu(b.linear(x, 4096, true, "classifier.3"), "classifier.4");
  b.linear(x, classes, true, "classifier.6");
  return b.build();
}

} // namespace brickdl::zoo_detail
