// DeepCAM, the climate segmentation network of MLPerf HPC, as its reference implementation
// (mlcommons/hpc, deepcam/src/deepCam/architecture/deeplab_xception.py, constructed by train.py
// as DeepLabv3_plus(n_input=16, n_classes=3, os=16)): DeepLabv3+ with a modified aligned
// Xception encoder (entry flow blocks 1-3, middle flow blocks 4-19, exit flow block 20 and
// separable convs conv3-5 dilated by 2), an ASPP bottleneck (1x1 and 3x3 convs dilated by 6, 12,
// 18, plus an image-level branch), a 1x1 reduction of the low-level features to 48 channels, and
// a decoder of transposed convs. Input 16 x 768 x 1152, output 3 x 768 x 1152.
//
// Checked against deeplab_xception.py at mlcommons/hpc commit c622604: the decoder
// (DeconvUpsampler) has four ConvTranspose2d(k=3, stride=2, padding=1, output_padding=1,
// bias=False), deconv1.0, deconv1.3, deconv2.0 and last_deconv.0; they are conv_transpose layers
// here with those names, so parameters, shapes and MACs all follow the reference (each input
// pixel meets each tap once: Cin · Cout · 9 MACs per input pixel).
//
// One reference op has no IR op of its own; it is modelled with exact shapes and weights:
//  - torch.tile of the 1x1 image-level features to the 48x72 ASPP map becomes a nearest upsample
//    to the larger extent (72x72) and, when the map is not square, a stride-1 max-pool of a
//    (72-48+1) x 1 window that crops it to 48x72. Every element of the upsampled map is its
//    channel's value, so the crop is exact. The reference hard-codes the 48x72 tiling; here it
//    follows the input size.
// TrainableAffine (per-channel weight and bias of the image-level branch) is a batch-norm layer:
// the same parameters and the same per-channel affine map at inference.
//
// Names follow the reference modules; get_batchnorm() wraps nn.BatchNorm2d as ".bn"; the
// Xception's shared relu is "relu", "relu_1", ... in call order as in an FX trace.
#include <algorithm>
#include <string>
#include <vector>

#include "core/graph_builder.h"
#include "core/zoo/builders.h"

namespace brickdl::zoo_detail {

namespace {

constexpr int64_t kAsppChannels = 256;
constexpr int64_t kLowLevelChannels = 48;

class DeepCamBuilder {
public:
  explicit DeepCamBuilder(GraphBuilder& b) : b_(b) {}

  // SeparableConv2d_same: depthwise 3x3 ("same" padding = dilation) then pointwise 1x1.
  int separable(int x, int64_t out, int stride, int dilation, const std::string& p) {
    const int64_t in = b_.shape(x).c;
    const int dw =
        b_.conv2d(x, in, 3, stride, dilation, dilation, static_cast<int>(in), false, p + ".conv1");
    return b_.conv2d(dw, out, 1, 1, 0, 1, 1, false, p + ".pointwise");
  }

  // Xception Block. The rep sequence is (separable, batch-norm, relu) per repetition without
  // the last relu, then a strided separable conv (stride 2) or, for the last block of a flow,
  // an unstrided one; the skip is a strided 1x1 conv + batch-norm when the shape changes.
  int block(int inp, int64_t planes, int reps, int stride, int dilation, bool end_with_relu,
            bool grow_first, bool is_last, const std::string& p) {
    const int64_t inplanes = b_.shape(inp).c;
    std::vector<int64_t> outs;
    if (grow_first)
      outs.push_back(planes);
    for (int i = 0; i < reps - 1; ++i)
      outs.push_back(grow_first ? planes : inplanes);
    if (!grow_first)
      outs.push_back(planes);

    int index = 0;
    const auto rep = [&] { return p + ".rep." + std::to_string(index++); };
    int x = inp;
    for (size_t i = 0; i < outs.size(); ++i) {
      x = separable(x, outs[i], 1, dilation, rep());
      x = b_.batch_norm(x, rep() + ".bn");
      if (i + 1 < outs.size())
        x = b_.relu(x, rep());
    }
    if (stride != 1) {
      x = separable(x, planes, stride, 1, rep());
    } else if (is_last) {
      x = separable(x, planes, 1, 1, rep());
    }

    int skip = inp;
    if (planes != inplanes || stride != 1) {
      skip = b_.conv2d(inp, planes, 1, stride, 0, 1, 1, false, p + ".skip");
      skip = b_.batch_norm(skip, p + ".skipbn.bn");
    }
    x = b_.add(x, skip, p + ".add");
    return end_with_relu ? b_.relu(x, p + ".relu") : x;
  }

  // ASPP_module: 1x1 conv at rate 1, else 3x3 conv dilated by the rate; batch-norm; relu.
  int aspp(int x, int rate, const std::string& p) {
    const int k = rate == 1 ? 1 : 3;
    const int pad = rate == 1 ? 0 : rate;
    const int c = b_.conv2d(x, kAsppChannels, k, 1, pad, rate, 1, false, p + ".atrous_convolution");
    return b_.relu(b_.batch_norm(c, p + ".bn.bn"), p + ".relu");
  }

  // Broadcast of a 1x1 map to h x w (torch.tile); see the file comment.
  int tile(int x, int64_t h, int64_t w, const std::string& name) {
    const int64_t s = std::max(h, w);
    const int up = b_.upsample(x, static_cast<int>(s), false, name);
    if (h == w)
      return up;
    Window crop;
    crop.kernel = {1, static_cast<int>(s - h + 1), static_cast<int>(s - w + 1)};
    return b_.max_pool(up, crop, false, name + "_crop");
  }

  // ConvTranspose2d(k=3, stride=2, padding=1, output_padding=1, bias=False): doubles h and w.
  int deconv(int x, int64_t out, const std::string& name) {
    Window w;
    w.kernel = {1, 3, 3};
    w.stride = {1, 2, 2};
    w.pad = {0, 1, 1};
    return b_.conv_transpose(x, out, w, {0, 1, 1}, 1, false, name);
  }

private:
  GraphBuilder& b_;
};

// Encoder: Xception(os=16). Returns its output; *low_level is the feature the decoder reads.
int encoder(GraphBuilder& b, DeepCamBuilder& db, int* low_level) {
  // Entry block 3 has stride 2, middle rate 1, exit rates (1, 2).
  const std::string xf = "xception_features.";
  int x = b.conv2d(b.input(), 32, 3, 2, 1, 1, 1, false, xf + "conv1");
  x = b.relu(b.batch_norm(x, xf + "bn1.bn"), xf + "relu");
  x = b.conv2d(x, 64, 3, 1, 1, 1, 1, false, xf + "conv2");
  x = b.relu(b.batch_norm(x, xf + "bn2.bn"), xf + "relu_1");
  x = db.block(x, 128, 2, 2, 1, false, true, false, xf + "block1");
  // low_level_feat aliases block1's output, which the in-place relu then rectifies: the
  // decoder reads the relu's output.
  x = b.relu(x, xf + "relu_2");
  *low_level = x;
  x = db.block(x, 256, 2, 2, 1, true, true, false, xf + "block2");
  x = db.block(x, 728, 2, 2, 1, true, true, true, xf + "block3");
  for (int i = 4; i <= 19; ++i)
    x = db.block(x, 728, 3, 1, 1, true, true, false, xf + "block" + std::to_string(i));
  x = db.block(x, 1024, 2, 1, 1, false, false, true, xf + "block20");
  x = db.separable(x, 1536, 1, 2, xf + "conv3");
  x = b.relu(b.batch_norm(x, xf + "bn3.bn"), xf + "relu_3");
  x = db.separable(x, 1536, 1, 2, xf + "conv4");
  x = b.relu(b.batch_norm(x, xf + "bn4.bn"), xf + "relu_4");
  x = db.separable(x, 2048, 1, 2, xf + "conv5");
  x = b.relu(b.batch_norm(x, xf + "bn5.bn"), xf + "relu_5");

  return x;
}

// Bottleneck: ASPP at rates 1, 6, 12, 18 and the image-level branch.
int bottleneck(GraphBuilder& b, DeepCamBuilder& db, int x) {
  const std::string bn = "bottleneck.";
  const int a1 = db.aspp(x, 1, bn + "aspp1");
  const int a2 = db.aspp(x, 6, bn + "aspp2");
  const int a3 = db.aspp(x, 12, bn + "aspp3");
  const int a4 = db.aspp(x, 18, bn + "aspp4");
  const std::string gp = bn + "global_avg_pool.global_average_pool.";
  int a5 = b.global_avg_pool(x, gp + "0");
  a5 = b.conv2d(a5, kAsppChannels, 1, 1, 0, 1, 1, false, gp + "1");
  a5 = b.relu(b.batch_norm(a5, gp + "2"), gp + "3"); // TrainableAffine as batch-norm
  a5 = db.tile(a5, b.shape(x).h, b.shape(x).w, bn + "tile");
  x = b.concat({a1, a2, a3, a4, a5}, bn + "cat");
  x = b.conv2d(x, kAsppChannels, 1, 1, 0, 1, 1, false, bn + "conv");
  x = b.relu(b.batch_norm(x, bn + "bn.bn"), bn + "relu");

  return x;
}

// Decoder: the low-level features (1x1 conv to 48 channels) and the DeconvUpsampler.
int decoder(GraphBuilder& b, DeepCamBuilder& db, int x, int low_level, int64_t classes) {
  int low = b.conv2d(low_level, kLowLevelChannels, 1, 1, 0, 1, 1, false, "conv2");
  low = b.relu(b.batch_norm(low, "bn2.bn"), "relu");

  const std::string up = "upsample.";
  x = db.deconv(x, kAsppChannels, up + "deconv1.0");
  x = b.relu(b.batch_norm(x, up + "deconv1.1.bn"), up + "deconv1.2");
  x = db.deconv(x, kAsppChannels, up + "deconv1.3");
  x = b.relu(b.batch_norm(x, up + "deconv1.4.bn"), up + "deconv1.5");
  x = b.concat({x, low}, up + "cat");
  x = b.conv2d(x, 256, 3, 1, 1, 1, 1, false, up + "conv1.0");
  x = b.relu(b.batch_norm(x, up + "conv1.1.bn"), up + "conv1.2");
  x = b.conv2d(x, 256, 3, 1, 1, 1, 1, false, up + "conv1.3");
  x = b.relu(b.batch_norm(x, up + "conv1.4.bn"), up + "conv1.5");
  x = b.conv2d(x, 256, 1, 1, 0, 1, 1, /*bias=*/true, up + "conv1.6");
  x = db.deconv(x, kAsppChannels, up + "deconv2.0");
  x = b.relu(b.batch_norm(x, up + "deconv2.1.bn"), up + "deconv2.2");
  return db.deconv(x, classes, up + "last_deconv.0"); // no batch-norm, no bias
}

} // namespace

Graph build_deepcam(const ZooOptions& options) {
  const std::string name = "deepcam";
  const TensorShape in = resolve_input(name, options, 16, {768, 1152});
  const int64_t classes = resolve_classes(name, options, 3);
  GraphBuilder b(name, in, options.dtype);
  DeepCamBuilder db(b);
  int low_level = 0;
  const int features = encoder(b, db, &low_level);
  decoder(b, db, bottleneck(b, db, features), low_level, classes);
  return b.build();
}

} // namespace brickdl::zoo_detail
