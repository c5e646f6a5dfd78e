#pragma once
// The model zoo: the seven models of the paper, its two microbenchmarks, and a parametric
// conv-chain generator. Each builder follows its standard reference definition layer for
// layer (batch-norm and activations as separate layers; fuse_for_inference() folds them).
//
//   resnet50 vgg16_bn darknet53 drn_c_26 resnet3d_34 deepcam inception_v4   (the paper's models)
//   mobilenet_v2 efficientnet_b0 convnext_tiny            (issue 32: mobile and modern blocks)
//   micro_graphsize micro_bricksize conv_chain                    (chains of build_conv_chain)
//
// Layer names are those of the reference's modules ("layer1.0.conv1", "features.3.cat",
// "xception_features.block4.rep.0.pointwise"); a module applied more than once gets "_1",
// "_2", ... as in torchvision's FX graphs ("layer1.0.relu_2"). Each builder's file in
// core/zoo/ names its reference and every place where the IR could not follow it exactly.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/graph.h"

namespace brickdl {

// Every model honours every option; a bad value is a UserError, an input too small for the
// model a ShapeError from the builder.
struct ZooOptions {
  int batch = 1;
  DType dtype = DType::kF32;
  std::vector<int64_t> input_size; // empty = the model's default ([H,W] or [D,H,W]); the
                                   // rank must be the model's (conv_chain takes either)
  int64_t input_channels = 0;      // 0 = the model's default
  int64_t num_classes = 0;         // 0 = the model's default; DeepCAM's segmentation classes;
                                   // must stay 0 for the chains, which have no classifier
};

struct ConvChainOptions {
  int depth = 3;
  int64_t channels = 3;
  int kernel = 3;
  int64_t image = 112; // extent per spatial dim
  int dims = 3;        // 2 or 3
  // [H, W] or [D, H, W]: the input's extents, overriding `image` and `dims` (the chain runs on
  // any box, as every zoo model takes any input_size of its rank).
  std::vector<int64_t> input_size;
  int batch = 1;
  int stride = 1;
  int dilation = 1;
  bool batch_norm = false;
  bool relu = true;
  DType dtype = DType::kF32;
};

struct ZooEntry {
  std::string name;        // "resnet50"
  std::string description; // one line, with the reference it follows
  std::function<Graph(const ZooOptions&)> build;
};

const std::vector<ZooEntry>& zoo();
std::vector<std::string> zoo_names();
// Throws UserError (with a suggestion) for an unknown name.
Graph build_zoo_model(const std::string& name, const ZooOptions& options);

// Layers conv<i> [bn<i>] [relu<i>] for i = 1..depth: every conv keeps the channel count, has no
// bias and pads by dilation * (kernel - 1) / 2. Throws UserError for an invalid option.
Graph build_conv_chain(const ConvChainOptions& options);

} // namespace brickdl
