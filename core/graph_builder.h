#pragma once
// GraphBuilder: adds layers one at a time, inferring shapes, parameters and MACs.
// A layer whose input shapes do not fit throws ShapeError naming the layer and the shapes.
// Names default to "<op><index>" (e.g. "conv12"); the zoo passes reference names.
#include <array>
#include <string>
#include <vector>

#include "core/graph.h"

namespace brickdl {

class GraphBuilder {
public:
  // The graph's first runtime input, layer 0, named `input_name`.
  GraphBuilder(std::string graph_name, TensorShape input, DType dtype = DType::kF32,
               std::string input_name = "input");

  int input() const { return 0; }
  // Another runtime input (layer 1, 2, ...): before any computed layer, with the batch of the
  // first. Returns its id.
  int add_input(const TensorShape& shape, const std::string& name);
  // Makes layer `id` a graph output, leaving under `name` (default: the layer's name), after
  // those marked before. A graph with none marked has one: its last layer.
  void mark_output(int id, const std::string& name = "");
  const TensorShape& shape(int id) const;
  const Layer& layer(int id) const;

  int conv(int x, int64_t out_channels, const Window& w, int groups = 1, bool bias = false,
           const std::string& name = "");
  // 2-D conv: square kernel, stride, padding, dilation.
  int conv2d(int x, int64_t out_channels, int kernel, int stride = 1, int pad = 0, int dilation = 1,
             int groups = 1, bool bias = false, const std::string& name = "");
  // 2-D conv with a rectangular kernel (kh × kw) and padding (ph, pw), as Inception uses.
  int conv2d_rect(int x, int64_t out_channels, int kh, int kw, int ph, int pw, int stride = 1,
                  bool bias = false, const std::string& name = "");
  // 3-D conv: cubic kernel, stride, padding, dilation.
  int conv3d(int x, int64_t out_channels, int kernel, int stride = 1, int pad = 0, int dilation = 1,
             int groups = 1, bool bias = false, const std::string& name = "");
  int batch_norm(int x, const std::string& name = "");
  int relu(int x, const std::string& name = "");
  int leaky_relu(int x, float slope = 0.1f, const std::string& name = "");
  // The op of activation `a` (not kNone) on x, with `params`' slope or clip range: an epilogue
  // written out as its own layer.
  int activation(int x, Activation a, const Layer& params, const std::string& name = "");
  int add(int a, int b, const std::string& name = "");
  int concat(const std::vector<int>& xs, const std::string& name = "");
  int max_pool(int x, const Window& w, bool ceil_mode = false, const std::string& name = "");
  int avg_pool(int x, const Window& w, bool count_include_pad = true, bool ceil_mode = false,
               const std::string& name = "");
  // Square / cubic windows matching the input's spatial rank.
  int max_pool(int x, int kernel, int stride, int pad = 0, bool ceil_mode = false,
               const std::string& name = "");
  int avg_pool(int x, int kernel, int stride, int pad = 0, bool count_include_pad = true,
               const std::string& name = "");
  int global_avg_pool(int x, const std::string& name = "");
  int upsample(int x, int scale, bool bilinear = false, const std::string& name = "");
  int flatten(int x, const std::string& name = "");
  int linear(int x, int64_t out_features, bool bias = true, const std::string& name = "");

  // Transposed conv (ONNX ConvTranspose): window in (d, h, w) order as for conv.
  int conv_transpose(int x, int64_t out_channels, const Window& w,
                     const std::array<int, 3>& output_pad, int groups = 1, bool bias = false,
                     const std::string& name = "");
  int sigmoid(int x, const std::string& name = "");
  int silu(int x, const std::string& name = "");         // x · sigmoid(x)
  int hard_swish(int x, const std::string& name = "");   // x · hard_sigmoid(x)
  int hard_sigmoid(int x, const std::string& name = ""); // clip(x / 6 + 1/2, 0, 1)
  int gelu(int x, const std::string& name = "");         // x / 2 · (1 + erf(x / √2))
  // x (N, C, ...) times `scale` (N, C, 1, ...): squeeze-excitation's per-channel multiply.
  int channel_mul(int x, int scale, const std::string& name = "");
  int clip(int x, float lo, float hi, const std::string& name = "");
  int mul(int a, int b, const std::string& name = ""); // elementwise product
  int sub(int a, int b, const std::string& name = ""); // elementwise a − b, one shape
  int div(int a, int b, const std::string& name = ""); // elementwise a / b, one shape
  // Constant padding of the spatial dims, (d, h, w) order; negative pads crop.
  int pad(int x, const std::array<int, 3>& begin, const std::array<int, 3>& end, float value = 0,
          const std::string& name = "");
  // Input channels [begin, end) (ONNX Split / Slice on axis 1, step 1).
  int slice(int x, int64_t begin, int64_t end, const std::string& name = "");
  // torch's channel shuffle: reshape [N, g, C/g, ...], swap the two channel axes, reshape back.
  int channel_shuffle(int x, int groups, const std::string& name = "");
  // Layer norm over the channels of every pixel, with per-channel gamma and beta.
  int layer_norm(int x, float epsilon = 1e-5f, const std::string& name = "");

  // conv → batch-norm → relu, the most common triple; returns the relu.
  int conv_bn_relu(int x, int64_t out_channels, int kernel, int stride = 1, int pad = 0,
                   int dilation = 1, const std::string& prefix = "");

  // Adds a fully described layer (used by the YAML loader and the fusion transform): infers
  // its shape, parameters and MACs from its inputs and attributes.
  int add_layer(Layer layer);

  // Parameters the built graph carries (Graph::params), e.g. an imported model's.
  void set_params(std::shared_ptr<const ParamStore> params) { params_ = std::move(params); }

  Graph build() const;

private:
  Window square_window(int x, int kernel, int stride, int pad, int dilation) const;
  std::string auto_name(OpKind op, const std::string& given);

  std::string name_;
  DType dtype_;
  std::vector<Layer> layers_;
  std::vector<int> op_counters_;
  std::shared_ptr<const ParamStore> params_;
  std::vector<GraphOutput> outputs_;
  int64_t total_macs_ = 0; // of the layers so far (core/limits.h: kMaxGraphMacs)
};

// Shape inference for one layer given its producers' output shapes. Throws ShapeError.
void infer_layer(Layer& layer, const std::vector<const TensorShape*>& inputs);

// Output extent of a sliding window over `in` (PyTorch semantics, floor or ceil mode).
int64_t window_out_extent(int64_t in, int kernel, int stride, int pad, int dilation,
                          bool ceil_mode);

} // namespace brickdl
