// Inception-v4 (Szegedy, Ioffe, Vanhoucke, Alemi, AAAI 2017) as timm's inception_v4, which
// follows the pretrainedmodels port of the TensorFlow-Slim definition: stem (features.0-5),
// 4 x Inception-A, Reduction-A, 7 x Inception-B, Reduction-B, 3 x Inception-C, global average
// pool and a linear classifier. timm has 1000 classes; pretrainedmodels' port has 1001 (a
// background class), so the default here is timm's 1000.
//
// Every conv is conv (no bias) + batch-norm + relu, named ".conv", ".bn", ".relu" under the
// module's path; pools inside a branch sit at their Sequential index (e.g. branch3.0);
// concatenations are "cat", "cat_1", ... as in an FX trace. Pools have no padding and floor
// rounding; the 3x3 average pools of branch3 pad by 1 without counting the padding.
#include <string>
#include <vector>

#include "core/graph_builder.h"
#include "core/zoo/builders.h"

namespace brickdl::zoo_detail {

namespace {

class InceptionBuilder {
public:
  explicit InceptionBuilder(GraphBuilder& b) : b_(b) {}

  // conv (kh x kw, padding ph x pw) + batch-norm + relu.
  int conv(int x, int64_t out, int kh, int kw, int ph, int pw, int stride, const std::string& p) {
    const int c = b_.conv2d_rect(x, out, kh, kw, ph, pw, stride, false, p + ".conv");
    return b_.relu(b_.batch_norm(c, p + ".bn"), p + ".relu");
  }
  int conv(int x, int64_t out, int k, int stride, int pad, const std::string& p) {
    return conv(x, out, k, k, pad, pad, stride, p);
  }
  int max_pool(int x, const std::string& name) { return b_.max_pool(x, 3, 2, 0, false, name); }
  int avg_pool(int x, const std::string& name) { return b_.avg_pool(x, 3, 1, 1, false, name); }
  int cat(const std::vector<int>& xs, const std::string& name) { return b_.concat(xs, name); }

  int mixed_3a(int x, const std::string& p) {
    const int x0 = max_pool(x, p + ".maxpool");
    const int x1 = conv(x, 96, 3, 2, 0, p + ".conv");
    return cat({x0, x1}, p + ".cat");
  }

  int mixed_4a(int x, const std::string& p) {
    int x0 = conv(x, 64, 1, 1, 0, p + ".branch0.0");
    x0 = conv(x0, 96, 3, 1, 0, p + ".branch0.1");
    int x1 = conv(x, 64, 1, 1, 0, p + ".branch1.0");
    x1 = conv(x1, 64, 1, 7, 0, 3, 1, p + ".branch1.1");
    x1 = conv(x1, 64, 7, 1, 3, 0, 1, p + ".branch1.2");
    x1 = conv(x1, 96, 3, 1, 0, p + ".branch1.3");
    return cat({x0, x1}, p + ".cat");
  }

  int mixed_5a(int x, const std::string& p) {
    const int x0 = conv(x, 192, 3, 2, 0, p + ".conv");
    const int x1 = max_pool(x, p + ".maxpool");
    return cat({x0, x1}, p + ".cat");
  }

  int inception_a(int x, const std::string& p) {
    const int x0 = conv(x, 96, 1, 1, 0, p + ".branch0");
    int x1 = conv(x, 64, 1, 1, 0, p + ".branch1.0");
    x1 = conv(x1, 96, 3, 1, 1, p + ".branch1.1");
    int x2 = conv(x, 64, 1, 1, 0, p + ".branch2.0");
    x2 = conv(x2, 96, 3, 1, 1, p + ".branch2.1");
    x2 = conv(x2, 96, 3, 1, 1, p + ".branch2.2");
    int x3 = avg_pool(x, p + ".branch3.0");
    x3 = conv(x3, 96, 1, 1, 0, p + ".branch3.1");
    return cat({x0, x1, x2, x3}, p + ".cat");
  }

  int reduction_a(int x, const std::string& p) {
    const int x0 = conv(x, 384, 3, 2, 0, p + ".branch0");
    int x1 = conv(x, 192, 1, 1, 0, p + ".branch1.0");
    x1 = conv(x1, 224, 3, 1, 1, p + ".branch1.1");
    x1 = conv(x1, 256, 3, 2, 0, p + ".branch1.2");
    const int x2 = max_pool(x, p + ".branch2");
    return cat({x0, x1, x2}, p + ".cat");
  }

  int inception_b(int x, const std::string& p) {
    const int x0 = conv(x, 384, 1, 1, 0, p + ".branch0");
    int x1 = conv(x, 192, 1, 1, 0, p + ".branch1.0");
    x1 = conv(x1, 224, 1, 7, 0, 3, 1, p + ".branch1.1");
    x1 = conv(x1, 256, 7, 1, 3, 0, 1, p + ".branch1.2");
    int x2 = conv(x, 192, 1, 1, 0, p + ".branch2.0");
    x2 = conv(x2, 192, 7, 1, 3, 0, 1, p + ".branch2.1");
    x2 = conv(x2, 224, 1, 7, 0, 3, 1, p + ".branch2.2");
    x2 = conv(x2, 224, 7, 1, 3, 0, 1, p + ".branch2.3");
    x2 = conv(x2, 256, 1, 7, 0, 3, 1, p + ".branch2.4");
    int x3 = avg_pool(x, p + ".branch3.0");
    x3 = conv(x3, 128, 1, 1, 0, p + ".branch3.1");
    return cat({x0, x1, x2, x3}, p + ".cat");
  }

  int reduction_b(int x, const std::string& p) {
    int x0 = conv(x, 192, 1, 1, 0, p + ".branch0.0");
    x0 = conv(x0, 192, 3, 2, 0, p + ".branch0.1");
    int x1 = conv(x, 256, 1, 1, 0, p + ".branch1.0");
    x1 = conv(x1, 256, 1, 7, 0, 3, 1, p + ".branch1.1");
    x1 = conv(x1, 320, 7, 1, 3, 0, 1, p + ".branch1.2");
    x1 = conv(x1, 320, 3, 2, 0, p + ".branch1.3");
    const int x2 = max_pool(x, p + ".branch2");
    return cat({x0, x1, x2}, p + ".cat");
  }

  int inception_c(int x, const std::string& p) {
    const int x0 = conv(x, 256, 1, 1, 0, p + ".branch0");
    const int x1_0 = conv(x, 384, 1, 1, 0, p + ".branch1_0");
    const int x1_1a = conv(x1_0, 256, 1, 3, 0, 1, 1, p + ".branch1_1a");
    const int x1_1b = conv(x1_0, 256, 3, 1, 1, 0, 1, p + ".branch1_1b");
    const int x1 = cat({x1_1a, x1_1b}, p + ".cat");
    int x2 = conv(x, 384, 1, 1, 0, p + ".branch2_0");
    x2 = conv(x2, 448, 3, 1, 1, 0, 1, p + ".branch2_1");
    x2 = conv(x2, 512, 1, 3, 0, 1, 1, p + ".branch2_2");
    const int x2_3a = conv(x2, 256, 1, 3, 0, 1, 1, p + ".branch2_3a");
    const int x2_3b = conv(x2, 256, 3, 1, 1, 0, 1, p + ".branch2_3b");
    x2 = cat({x2_3a, x2_3b}, p + ".cat_1");
    int x3 = avg_pool(x, p + ".branch3.0");
    x3 = conv(x3, 256, 1, 1, 0, p + ".branch3.1");
    return cat({x0, x1, x2, x3}, p + ".cat_2");
  }

private:
  GraphBuilder& b_;
};

} // namespace

Graph build_inception_v4(const ZooOptions& options) {
  const std::string name = "inception_v4";
  const TensorShape in = resolve_input(name, options, 3, {299, 299});
  const int64_t classes = resolve_classes(name, options, 1000);
  GraphBuilder b(name, in, options.dtype);
  InceptionBuilder ib(b);

  int index = 0;
  const auto feature = [&index] { return "features." + std::to_string(index++); };
  int x = ib.conv(b.input(), 32, 3, 2, 0, feature()); // 149x149 at 299
  x = ib.conv(x, 32, 3, 1, 0, feature());             // 147x147
  x = ib.conv(x, 64, 3, 1, 1, feature());             // 147x147
  x = ib.mixed_3a(x, feature());                      // 73x73x160
  x = ib.mixed_4a(x, feature());                      // 71x71x192
  x = ib.mixed_5a(x, feature());                      // 35x35x384
  for (int i = 0; i < 4; ++i)
    x = ib.inception_a(x, feature());
  x = ib.reduction_a(x, feature()); // 17x17x1024
  for (int i = 0; i < 7; ++i)
    x = ib.inception_b(x, feature());
  x = ib.reduction_b(x, feature()); // 8x8x1536
  for (int i = 0; i < 3; ++i)
    x = ib.inception_c(x, feature());

  x = b.global_avg_pool(x, "global_pool");
  x = b.flatten(x, "flatten");
  b.linear(x, classes, true, "last_linear");
  return b.build();
}

} // namespace brickdl::zoo_detail
