#pragma once
// The sizes brickdl accepts, in one place. Every loader (experiment YAML, inline YAML graphs,
// zoo parameters, ONNX shapes) and the graph builder check them, so that every accepted input
// is one the model, the search and the executors handle in bounded time and memory, and no
// size arithmetic can overflow int64 (check_layer_limits below uses checked multiplication).
//
// Each limit is far above every real CNN and the paper's models (the largest: ResNet-50's 2048
// channels, VGG-16's 25088 flattened features and 102.8 M weights in one layer, DeepCAM's
// 768 x 1152 images, 3-D chains of 224^3). A limit names itself in every message, so a user who
// hits one knows which and why.
#include <cstdint>
#include <limits>
#include <string>

namespace brickdl {

struct Layer;
struct TensorShape;

struct SizeLimit {
  const char* what; // "channels of a tensor"
  int64_t max;      // the largest accepted value
  const char* why;  // one line, for messages and docs
};

// Images in a batch: the tuner's --batch takes up to 2^20 as well.
inline constexpr SizeLimit kMaxBatch{"images in a batch", int64_t{1} << 20,
                                     "larger batches are split into runs"};
// Channels of a spatial tensor (conv out_channels, input channels): real CNNs use <= 4096.
inline constexpr SizeLimit kMaxChannels{"channels of a tensor", int64_t{1} << 16,
                                        "real CNNs use at most a few thousand"};
// Features of a flat tensor (flatten, linear out_features, num_classes): VGG-16 flattens to
// 25088 features, the largest common classifier (ImageNet-21k) has 21841 classes.
inline constexpr SizeLimit kMaxFeatures{"features of a flat tensor", int64_t{1} << 22,
                                        "VGG-16 flattens to 25088, ImageNet-21k has 21841 classes"};
// Extent of one spatial dim (input_size, every layer's output).
inline constexpr SizeLimit kMaxExtent{"spatial extents", int64_t{1} << 15,
                                      "larger images are tiled before inference"};
// Window kernel extent per dim (conv, pools).
inline constexpr SizeLimit kMaxKernel{"kernel extents", 1024,
                                      "CNN kernels are at most a few dozen wide"};
// Stride, dilation, padding and upsampling factor per dim: at most a spatial extent.
inline constexpr SizeLimit kMaxWindowParam{"strides, dilations, paddings and scales",
                                           int64_t{1} << 15,
                                           "no window attribute exceeds the largest image extent"};
// Elements of one tensor, all images: 16 GiB in fp32, as much as one GPU holds.
inline constexpr SizeLimit kMaxTensorElements{"elements of a tensor", int64_t{1} << 32,
                                              "16 GiB in fp32, what one GPU can hold"};
// Weights of one layer: VGG-16's largest layer has 102.8 M.
inline constexpr SizeLimit kMaxLayerWeights{"weights of a layer", int64_t{1} << 28,
                                            "VGG-16's largest layer has 102.8 M"};
// Layers of a graph before fusion (ResNet-152 has about 510, Inception-v4 about 470).
inline constexpr SizeLimit kMaxLayers{"layers of a graph", 2048,
                                      "ResNet-152 has about 510 layers before fusion"};
// Multiply-accumulates of one layer and of a whole graph: keeps every sum of MACs in int64.
inline constexpr SizeLimit kMaxGraphMacs{"multiply-accumulates of a graph", int64_t{1} << 60,
                                         "every count of work stays a 64-bit integer"};
// Spatial extent of a brick (search.brick_sizes, plan files): a 64^3 fp32 brick is 1 MiB, far
// beyond any on-chip memory.
inline constexpr SizeLimit kMaxBrickExtent{"brick extents", 64, "a 64^3 fp32 brick is 1 MiB"};
// Values in one search list (channel_blocks): each multiplies the search space.
inline constexpr SizeLimit kMaxSearchValues{"values in a search list", 64,
                                            "each value multiplies the candidates of every group"};
// Layers of one group (search.max_group_len): the model computes padded / memoized groups of
// at most 64 layers (model/detail/geometry.h).
inline constexpr SizeLimit kMaxGroupLength{"layers of a group", 64,
                                           "the model merges at most 64 layers"};
// Work of a search: its candidates weighted by their group's length (a prediction costs that
// many layers), at most fused layers x (1 + 2 + ... + max_group_len) x configurations.
// resnet50.yaml has about 180 000; the model predicts some 500 000 layers a second.
inline constexpr SizeLimit kMaxSearchWork{"candidate layers of a search", int64_t{1} << 21,
                                          "a model-only search stays within seconds"};
// Plans the random searcher draws.
inline constexpr SizeLimit kMaxRandomSamples{"random samples", int64_t{1} << 17,
                                             "each sample is a whole plan"};

// a · b, or INT64_MAX when it does not fit (or either is negative: sizes are never negative).
int64_t saturating_mul(int64_t a, int64_t b);
// a + b, or INT64_MAX when it does not fit.
int64_t saturating_add(int64_t a, int64_t b);
// Elements of `shape` (all images), saturating.
int64_t checked_numel(const TensorShape& shape);

// "channels of a tensor are limited to 65536 (real CNNs use at most a few thousand)".
std::string limit_text(const SizeLimit& limit);

// Empty when `shape` is within the limits, else why not ("1x2147483647: 2147483647 features;
// features of a flat tensor are limited to ...").
std::string shape_limit_problem(const TensorShape& shape);
// Empty when the layer's attributes (out_channels, window, scale, pads) are within the limits;
// checked before its shape is inferred, so that no inference arithmetic can overflow.
std::string attribute_limit_problem(const Layer& layer);
// Empty when the inferred layer (output, weights, MACs) is within the limits.
std::string layer_limit_problem(const Layer& layer);

} // namespace brickdl
