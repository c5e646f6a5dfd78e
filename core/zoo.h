#pragma once
// The model zoo: the seven models of the paper, its two microbenchmarks, and a parametric
// conv-chain generator. Each builder follows its standard reference definition layer for
// layer (batch-norm and activations as separate layers; fuse_for_inference() folds them).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/graph.h"

namespace brickdl {

struct ZooOptions {
  int batch = 1;
  DType dtype = DType::kF32;
  std::vector<int64_t> input_size;  // empty = the model's default ([H,W] or [D,H,W])
  int64_t input_channels = 0;       // 0 = the model's default
  int64_t num_classes = 0;          // 0 = the model's default
};

struct ConvChainOptions {
  int depth = 3;
  int64_t channels = 3;
  int kernel = 3;
  int64_t image = 112;  // extent per spatial dim
  int dims = 3;         // 2 or 3
  int batch = 1;
  int stride = 1;
  int dilation = 1;
  bool batch_norm = false;
  bool relu = true;
  DType dtype = DType::kF32;
};

struct ZooEntry {
  std::string name;         // "resnet50"
  std::string description;  // one line, with the reference it follows
  std::function<Graph(const ZooOptions&)> build;
};

const std::vector<ZooEntry>& zoo();
std::vector<std::string> zoo_names();
// Throws UserError (with a suggestion) for an unknown name.
Graph build_zoo_model(const std::string& name, const ZooOptions& options);

Graph build_conv_chain(const ConvChainOptions& options);

}  // namespace brickdl
