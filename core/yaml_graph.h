#pragma once
// Inline graphs written in YAML, as the `model:` of an experiment or on their own:
//
//   input: {channels: 3, size: [112, 112, 112]}   # size: [H, W] (2-D) or [D, H, W] (3-D)
//   layers:
//     - {op: conv, name: c1, out_channels: 8, kernel: 3, padding: 1}
//     - {op: relu}                                 # reads the previous layer
//     - {op: conv, name: c2, out_channels: 8, kernel: [1, 3, 3], padding: [0, 1, 1]}
//     - {op: add, inputs: [c1, c2]}
//   name: my_graph                                 # optional
//
// A graph of several runtime inputs lists them instead of `input`, each named, and may name its
// outputs (default: the last layer), in order:
//
//   inputs:
//     - {name: p3, channels: 8, size: [16, 16]}
//     - {name: p4, channels: 16, size: [8, 8]}
//   layers:
//     - {op: upsample, name: up, inputs: p4, scale: 2}
//     - {op: concat, name: cat, inputs: [p3, up]}
//     - {op: conv, name: head3, out_channels: 4, kernel: 1, inputs: cat}
//     - {op: conv, name: head4, out_channels: 4, kernel: 1, inputs: p4}
//   outputs: [head3, head4]
//
// Each layer is a mapping with `op` (a name of core/graph.h except `input`), an optional
// unique `name` (default "<op><k>", e.g. "conv2"), optional `inputs` (a name or a list of
// names of earlier layers; `input` is the graph input, or an input's name; default: the previous
// layer, or the last input) and the
// attributes of its op:
//
//   conv        out_channels, kernel (required); stride 1, padding 0, dilation 1, groups 1,
//               bias false (the conv is usually followed by a batch-norm)
//   max_pool    kernel (required); stride = kernel, padding 0, dilation 1, ceil_mode false
//   avg_pool    kernel (required); stride = kernel, padding 0, ceil_mode false,
//               count_include_pad true
//   leaky_relu  slope 0.1
//   upsample    scale (required, integer >= 1), mode nearest | bilinear (default nearest)
//   linear      out_features (or out_channels; required), bias true
//   batch_norm, relu, add (two inputs), concat (two or more), global_avg_pool, flatten: none
//
// kernel / stride / padding / dilation are an integer (the same for every spatial dim) or a
// list with one integer per spatial dim of the graph input (2 for 2-D, 3 for 3-D, in D, H, W
// order). Every problem throws UserError at the file, line and column of the offending node;
// shapes that do not fit throw ShapeError at the mapping of the layer that does not fit.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/graph.h"

namespace YAML {
class Node;
} // namespace YAML

namespace brickdl {

struct YamlGraphOptions {
  std::string name = "custom"; // graph name unless the YAML gives `name`
  int batch = 1;
  DType dtype = DType::kF32;
  std::vector<int64_t> input_size; // overrides input.size when non-empty
  int64_t input_channels = 0;      // overrides input.channels when > 0
};

// Builds the graph described by `node` (the mapping above). `where` gives the file and the
// key path of `node` (e.g. "model") used in error messages; its line/column are not used.
Graph build_yaml_graph(const YAML::Node& node, const SourceLocation& where,
                       const YamlGraphOptions& options);

// Same, from YAML text whose top level is the mapping above; `file` names it in messages.
Graph parse_yaml_graph(const std::string& yaml_text, const std::string& file,
                       const YamlGraphOptions& options = {});

// Same, from a file.
Graph load_yaml_graph(const std::string& path, const YamlGraphOptions& options = {});

// The keys a layer of op `op` accepts (common keys first), for messages and docs.
std::vector<std::string> yaml_layer_keys(OpKind op);

} // namespace brickdl
