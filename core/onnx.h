#pragma once
// ONNX in and out, through the ONNX library's protobuf classes (Debian's libonnx-dev).
//
//   model.onnx ──import_onnx()──► Graph (unfused, with its initializers as Graph::params)
//   Graph + ParamStore ──export_onnx()──► model.onnx (opset 13; 17 with a layer_norm)
//
// Import reads opsets 11 to the newest the library knows (17 for Debian 12's 1.12), one or
// several runtime inputs (of one batch; `batch` and `input_size` apply to each) and one or
// several outputs (each a node's first output; OnnxModel::outputs). Input ranks: 4 (N, C, H, W) and
// 5 (N, C, D, H, W) as they are; 3 (N, C, L) becomes N, C, 1, L; 2 (N, C) is flat; 1 (L) is one
// flat row (1, L). Ops and how they map (anything else is refused, naming the node and its op):
//   Conv, ConvTranspose        conv / conv_transpose (1-D as 2-D with H = 1; pads that differ
//                              at the two ends: the common part in the window, the rest as a
//                              pad layer, zero-filled before a conv, cropped after a transposed
//                              conv; auto_pad SAME_UPPER / SAME_LOWER / VALID; ConvTranspose's
//                              output_shape as pads and output padding)
//   BatchNormalization         batch_norm (folded form, core/graph.h batch_norm_affine)
//   Relu LeakyRelu Sigmoid Clip relu / leaky_relu / sigmoid / clip; Sigmoid → Mul(x, ·): silu
//   Add, Mul                   add / mul of two equal-shaped tensors; by a constant that is
//                              per channel or a scalar: a batch_norm (y = x·scale + shift)
//   Concat (channels)          concat
//   MaxPool AveragePool        max_pool / avg_pool (count_include_pad, auto_pad; ceil_mode
//                              where ONNX's output extent is PyTorch's, else refused)
//   GlobalAveragePool          global_avg_pool
//   Resize                     upsample: one integer scale on every spatial dim; nearest
//                              (asymmetric + floor, or half-pixel + round) or linear
//                              (half_pixel / pytorch_half_pixel)
//   Gemm, MatMul (+ Add bias)  linear (flat input; a constant weight)
//   Flatten (axis 1), Reshape  flatten to (N, C·spatial), or a relabel that keeps the layout
//   Identity, Dropout          removed (a model that is only these copies its input)
//   Pad (constant mode)        pad
// tests/onnx/ runs ONNX's own node tests through this; tests/onnx/expected_refusals.txt lists
// every test of these ops that is refused, and why.
// Bad input — not an ONNX file, an opset outside the range, an unsupported op or attribute, a
// dynamic size with no value given, an initializer whose size does not fit, a cycle — throws
// UserError naming the file and the node (or the initializer, input or output concerned).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/graph.h"

namespace brickdl {

// A dense float tensor as ONNX stores it (row-major over `dims`).
struct OnnxTensor {
  std::vector<int64_t> dims;
  std::vector<float> values;
  // The file's element type was an integer one (shapes, indices, sizes): shape arithmetic
  // divides such tensors with truncation, as ONNX does, and float ones exactly.
  bool integer = false;
};

struct OnnxImportOptions {
  std::string name;                // the graph's name; default: the file's stem
  int batch = 0;                   // > 0: overrides the file's batch (needed when dynamic)
  int dynamic_batch = 0;           // > 0 (and batch 0): the batch of inputs whose batch is dynamic
  std::vector<int64_t> input_size; // non-empty: [H, W] or [D, H, W] overriding the file's
  DType dtype = DType::kF32;
  // Graph inputs given values here become constants (ONNX node tests pass weights as inputs).
  std::map<std::string, OnnxTensor> constants;
};

// One graph output of an ONNX file: its name and ONNX dims (rank as in the file).
struct OnnxOutput {
  std::string name;
  std::vector<int64_t> dims;
};

struct OnnxModel {
  Graph graph;                      // unfused; Graph::params holds the initializers
  std::string input_name;           // the (first) runtime input
  std::string output_name;          // the (first) graph output
  std::vector<int64_t> output_dims; // the (first) output's ONNX dims (rank as in the file)
  // Every graph output, in the file's order (graph.outputs() order). A file of several runtime
  // inputs has them as graph layers 0, 1, ... named as in the file.
  std::vector<OnnxOutput> outputs;
  int64_t opset = 0;
};

// True for a path naming an ONNX file (ends in ".onnx"): what `model:` and the tools'
// model arguments take as an ONNX model rather than a zoo name or an experiment.
bool is_onnx_path(const std::string& path);

// The oldest and newest default-domain opset import_onnx reads. The newest is that of the onnx
// release pinned in scripts/requirements.txt (1.23: opset 28), whose node tests ctest
// onnx_node_tests_current runs; not Debian's libonnx (1.12: opset 17), which only parses. The
// mapped ops changed after 17 as follows, and the importer reads each version: Pad 18 (an
// `axes` input), Split 18 (`num_outputs`), Resize 18 (`antialias`, `axes`,
// `keep_aspect_ratio_policy`) and 19 (`half_pixel_symmetric`), ReduceMean 18 (`axes` became an
// input), AveragePool 19 (`dilations`); every other change since 17 only adds element types
// (bfloat16, float8, int4...), which the importer refuses by name.
constexpr int64_t kOnnxMinOpset = 11;
constexpr int64_t kOnnxMaxOpset = 28;
int64_t onnx_max_opset();

OnnxModel import_onnx(const std::string& path, const OnnxImportOptions& options = {});

// A serialized TensorProto (the .pb files of ONNX's node tests); float, double, bool and
// integer data are read as float. Throws UserError.
OnnxTensor read_onnx_tensor(const std::string& path);
// Writes `t` as a serialized float TensorProto.
void write_onnx_tensor(const std::string& path, const OnnxTensor& t, const std::string& name);

// Writes `graph` (unfused: no folded batch-norm; epilogue activations become nodes) with the
// parameters `params` (per layer name, kernels/weights.h stored form; a batch-norm's scale and
// shift are written as gamma and beta with mean 0, var 1, epsilon 0, so a re-import folds to
// the same bits) as an opset-13 model (opset 17 when it holds a layer_norm: LayerNormalization
// between Transposes to channels-last and back). The file is valid ONNX as ONNX Runtime checks
// it: a Gemm reads a rank-2 tensor (a global average pool read only by linear layers is written
// as ReduceMean with keepdims 0; another (N, C, 1, ...) input gets a Flatten first). Throws
// UserError when the file cannot be written.
void export_onnx(const Graph& graph, const ParamStore& params, const std::string& path);

} // namespace brickdl
