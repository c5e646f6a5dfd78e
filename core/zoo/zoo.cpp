#include "core/zoo.h"

#include "core/error.h"
#include "core/limits.h"
#include "core/zoo/builders.h"

namespace brickdl {

namespace zoo_detail {

namespace {

std::string extents_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

} // namespace

TensorShape resolve_input(const std::string& model, const ZooOptions& options,
                          int64_t default_channels, const std::vector<int64_t>& default_size) {
  BRICKDL_CHECK(default_size.size() == 2 || default_size.size() == 3,
                "model " << model << " has a default input of rank " << default_size.size());
  if (options.batch < 1)
    throw UserError("model '" + model + "': batch must be >= 1, got " +
                    std::to_string(options.batch));
  if (options.input_channels < 0)
    throw UserError("model '" + model + "': input_channels must be >= 1 (or 0 for the " +
                    "model's default " + std::to_string(default_channels) + "), got " +
                    std::to_string(options.input_channels));
  std::vector<int64_t> size = options.input_size.empty() ? default_size : options.input_size;
  const bool three_d = default_size.size() == 3;
  if (size.size() != default_size.size())
    throw UserError("model '" + model + "' takes a " + (three_d ? "3-D" : "2-D") +
                    " input: input_size must be " + (three_d ? "[D, H, W]" : "[H, W]") +
                    " (default " + extents_str(default_size) + "), got " + extents_str(size));
  for (int64_t e : size)
    if (e < 1)
      throw UserError("model '" + model + "': every input_size extent must be >= 1, got " +
                      extents_str(size));
  TensorShape t;
  t.n = options.batch;
  t.c = options.input_channels > 0 ? options.input_channels : default_channels;
  t.spatial_rank = three_d ? 3 : 2;
  t.d = three_d ? size[0] : 1;
  t.h = size[size.size() - 2];
  t.w = size[size.size() - 1];
  return t;
}

int64_t resolve_classes(const std::string& model, const ZooOptions& options,
                        int64_t default_classes) {
  if (options.num_classes < 0)
    throw UserError("model '" + model + "': num_classes must be >= 1 (or 0 for the model's " +
                    "default " + std::to_string(default_classes) + "), got " +
                    std::to_string(options.num_classes));
  if (options.num_classes > kMaxFeatures.max)
    throw UserError("model '" + model + "': num_classes " + std::to_string(options.num_classes) +
                    ": " + limit_text(kMaxFeatures));
  return options.num_classes > 0 ? options.num_classes : default_classes;
}

void reject_classes(const std::string& model, const ZooOptions& options) {
  if (options.num_classes != 0)
    throw UserError("model '" + model + "' has no classifier: num_classes must be 0 (unset), " +
                    "got " + std::to_string(options.num_classes));
}

} // namespace zoo_detail

const std::vector<ZooEntry>& zoo() {
  namespace d = zoo_detail;
  static const std::vector<ZooEntry> entries = {
      {"resnet50",
       "ResNet-50 v1.5 as torchvision resnet50 (stride on the 3x3 conv); 224x224, 1000 classes",
       d::build_resnet50},
      {"vgg16_bn",
       "VGG-16 with batch-norm as torchvision vgg16_bn (dropout omitted); 224x224, 1000 classes",
       d::build_vgg16_bn},
      {"darknet53",
       "Darknet-53 classifier of YOLOv3 (darknet53.cfg, leaky 0.1, timm layer names); 256x256",
       d::build_darknet53},
      {"drn_c_26", "DRN-C-26 as fyu/drn drn_c_26 (dilated stages, degridding layers 7-8); 224x224",
       d::build_drn_c_26},
      {"resnet3d_34",
       "3-D ResNet-34 as 3D-ResNets-PyTorch (shortcut B); 16x112x112 clips, 400 classes",
       d::build_resnet3d_34},
      {"deepcam",
       "DeepCAM as the MLPerf HPC reference (DeepLabv3+, Xception, os 16); 16x768x1152, 3 classes",
       d::build_deepcam},
      {"inception_v4",
       "Inception-v4 as timm inception_v4 (1000 classes, not pretrainedmodels' 1001); 299x299",
       d::build_inception_v4},
      {"mobilenet_v2",
       "MobileNetV2 1.0 as torchvision mobilenet_v2 (ReLU6 as clip, dropout omitted); 224x224",
       d::build_mobilenet_v2},
      {"efficientnet_b0",
       "EfficientNet-B0 as torchvision efficientnet_b0 (SE gate broadcast by an upsample); 224x224",
       d::build_efficientnet_b0},
      {"convnext_tiny",
       "ConvNeXt-T as torchvision convnext_tiny (1x1 convs for its Linear layers, layer scale "
       "folded)",
       d::build_convnext_tiny},
      {"micro_graphsize",
       "BrickDL microbenchmark 1 (Fig 10): 6 x (3x3x3 conv + relu), 3 channels, 112^3",
       d::build_micro_graphsize},
      {"micro_bricksize",
       "BrickDL microbenchmark 2 (Fig 11): 3 x (3x3x3 conv + relu), 3 channels, 224^3",
       d::build_micro_bricksize},
      {"conv_chain",
       "Parametric conv chain (build_conv_chain defaults: 3 x (3x3x3 conv + relu), 3 ch, 112^3)",
       d::build_conv_chain_model},
  };
  return entries;
}

std::vector<std::string> zoo_names() {
  std::vector<std::string> v;
  for (const auto& e : zoo())
    v.push_back(e.name);
  return v;
}

Graph build_zoo_model(const std::string& name, const ZooOptions& options) {
  for (const auto& e : zoo())
    if (e.name == name)
      return e.build(options);
  throw UserError("unknown model '" + name + "'" + did_you_mean(name, zoo_names()) +
                  "; valid: " + join_names(zoo_names()));
}

} // namespace brickdl
