#pragma once
// Private to the zoo: one builder per model (each in its own file of core/zoo/) and the
// option handling they share. Users go through core/zoo.h.
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/zoo.h"

namespace brickdl::zoo_detail {

// The input tensor of `model` under `options`: the model's default channels and spatial size
// (2 extents [H, W] or 3 extents [D, H, W]) unless overridden. Throws UserError for a batch
// below 1, a negative channel count, or an input_size of the wrong rank or with an extent
// below 1.
TensorShape resolve_input(const std::string& model, const ZooOptions& options,
                          int64_t default_channels, const std::vector<int64_t>& default_size);

// options.num_classes, or `default_classes` when it is 0. Throws UserError if negative.
int64_t resolve_classes(const std::string& model, const ZooOptions& options,
                        int64_t default_classes);

// For models without a classifier: throws UserError unless options.num_classes is 0.
void reject_classes(const std::string& model, const ZooOptions& options);

Graph build_resnet50(const ZooOptions& options);
Graph build_vgg16_bn(const ZooOptions& options);
Graph build_darknet53(const ZooOptions& options);
Graph build_drn_c_26(const ZooOptions& options);
Graph build_resnet3d_34(const ZooOptions& options);
Graph build_deepcam(const ZooOptions& options);
Graph build_inception_v4(const ZooOptions& options);
Graph build_mobilenet_v2(const ZooOptions& options);
Graph build_efficientnet_b0(const ZooOptions& options);
Graph build_convnext_tiny(const ZooOptions& options);
Graph build_micro_graphsize(const ZooOptions& options);
Graph build_micro_bricksize(const ZooOptions& options);
Graph build_conv_chain_model(const ZooOptions& options);

} // namespace brickdl::zoo_detail
