#pragma once
// The graph IR: a DAG of layers in topological order, with inferred shapes.
//
//   GraphBuilder ──(shape inference, ShapeError)──► Graph ──fuse_for_inference()──► Graph
//        ▲                                            │         (BN folded into conv,
//   zoo models, YAML graphs                           ▼          activations as epilogues)
//                                   per layer: params, MACs, bytes; totals
//
// Every tensor is (N, C, D, H, W). 2-D tensors have D == 1 and spatial_rank == 2; flattened
// tensors (after flatten / linear) have D == H == W == 1 and spatial_rank == 0. Window
// attributes (kernel, stride, padding, dilation) are stored per dim in (d, h, w) order; 2-D
// ops have 1 / 1 / 0 / 1 in the d slot, so one code path serves 2-D and 3-D.
//
// MAC convention: multiply-accumulates of conv and linear layers only (FLOPs = 2·MACs), the
// convention of the published model figures (torchvision, the papers). Parameter counts
// include batch-norm weight and bias (not running statistics), as torchvision counts them.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/op_traits.h"

namespace brickdl {

// The precision of a graph: storage type and math. kTF32 stores fp32 and multiplies on TF32
// tensor cores (10-bit mantissa inputs, fp32 accumulation); kF16 / kBF16 store 2-byte values
// and accumulate in fp32.
enum class DType { kF32, kF16, kBF16, kTF32 };
int dtype_bytes(DType t);
const char* dtype_name(DType t);
// Parses "fp32" / "float32" / "tf32" / "fp16" / "half" / "bf16" / "bfloat16"; false if
// unknown.
bool parse_dtype(const std::string& s, DType* out);
// The canonical names of every DType ("fp32", "tf32", "bf16", "fp16"): the valid precisions.
std::vector<std::string> dtype_names();

struct TensorShape {
  int64_t n = 1, c = 1, d = 1, h = 1, w = 1;
  int spatial_rank = 2; // 0 (flat), 2 (NCHW) or 3 (NCDHW)

  int64_t spatial() const { return d * h * w; }
  int64_t numel() const { return n * c * d * h * w; }
  int64_t dim(int axis) const { return axis == 0 ? d : axis == 1 ? h : w; } // axis: 0=d,1=h,2=w
  std::string str() const; // "8x64x56x56", "1x3x112x112x112", "8x1000"
  bool operator==(const TensorShape& o) const = default;
};

// Numpy broadcasting of an operand of a binary elementwise op (add, sub, mul, div,
// channel_mul) over the op's output, per axis (c, d, h, w): true where the operand has extent
// 1 and the output more, so the operand is read at index 0 along it (a per-channel vector
// (N, C, 1, 1), a per-image scalar (N, 1, 1, 1), a row). The batch never broadcasts.
std::array<bool, 4> broadcast_axes(const TensorShape& operand, const TensorShape& out);
bool is_broadcast(const TensorShape& operand, const TensorShape& out);
// The output shape of a binary elementwise op on a and b (per axis the larger extent), or
// false when they do not broadcast: batches or ranks differ, or an axis differs with neither 1.
bool broadcast_shape(const TensorShape& a, const TensorShape& b, TensorShape* out);
// Whether elementwise `consumer` (kSame spatial and channel rules) broadcasts `operand`; a
// conv reading one channel into many, or any other op, never does.
bool broadcasts(const Layer& consumer, const TensorShape& operand);

// Activation applied as an epilogue of a conv / add / linear after fusion (fuse_for_inference
// folds the activation op into its producer): the op's math (kernels/detail/op_math.h), its
// parameters in the producer's Layer::leaky_slope / clip_min / clip_max.
enum class Activation {
  kNone,
  kRelu,
  kLeakyRelu,
  kClip,
  kSigmoid,
  kSilu,
  kHardSwish,
  kHardSigmoid,
  kGelu,
};
// The op's name ("relu", "clip", "gelu", ...); "none".
const char* activation_name(Activation a);
// The activation op `op` applies, as an epilogue (kNone: not an activation op, op_traits.h);
// and back, the op of an activation (not kNone).
Activation op_activation(OpKind op);
OpKind activation_op(Activation a);

// The activation `layer` applies: its fused epilogue, or its own op for relu / leaky_relu
// (with Layer::leaky_slope).
Activation applied_activation(const Layer& layer);

// Sliding-window attributes in (d, h, w) order.
struct Window {
  std::array<int, 3> kernel{1, 1, 1};
  std::array<int, 3> stride{1, 1, 1};
  std::array<int, 3> pad{0, 0, 0};
  std::array<int, 3> dilation{1, 1, 1};
  bool operator==(const Window& o) const = default;
};

struct Layer {
  int id = -1; // index in Graph::layers(), which is a topological order
  std::string name;
  OpKind op = OpKind::kInput;
  std::vector<int> inputs; // ids of producer layers

  // Attributes (meaningful per op).
  int64_t out_channels = 0;                  // conv, linear
  Window window;                             // conv, pools
  int groups = 1;                            // conv, channel_shuffle
  bool bias = false;                         // conv, linear
  bool ceil_mode = false;                    // pools
  bool count_include_pad = true;             // avg pool
  int upsample_scale = 1;                    // upsample (nearest or bilinear, same shape)
  bool bilinear = false;                     // upsample mode
  float leaky_slope = 0.1f;                  // leaky relu, or the epilogue of a fused layer
  std::array<int, 3> output_pad{0, 0, 0};    // conv_transpose: extra extent at the far end
  float clip_min = 0.0f, clip_max = 6.0f;    // clip (relu6 by default)
  std::array<int, 3> pad_begin{0, 0, 0};     // pad: zeros (or pad_value) before each dim
  std::array<int, 3> pad_end{0, 0, 0};       //      and after it, (d, h, w) order
  float pad_value = 0.0f;                    //      the fill value
  int64_t slice_begin = 0, slice_end = 0;    // slice: input channels [begin, end)
  float epsilon = 1e-5f;                     // layer norm: added to the variance
  Activation activation = Activation::kNone; // epilogue after fuse_for_inference
  bool bn_folded = false;                    // a batch-norm was folded into this conv / linear
  std::vector<std::string> fused_from;       // names of the layers folded into this one
  // An elementwise unary layer that writes its output over its one input's buffer, which no
  // other layer reads (the paper's unfused passes, model/baseline.h). Only the layerwise
  // model's L2 honours it (one buffer, rewritten); graphs built or imported never set it.
  bool in_place = false;

  // Inferred.
  TensorShape out;
  int64_t params = 0;
  int64_t macs = 0;
};

// Parameters that came with a graph (an imported ONNX model's initializers), per layer name
// of the unfused graph, in the stored form of kernels/weights.h: conv / conv_transpose /
// linear weight and bias; a batch-norm's folded scale (weight) and shift (bias). Graphs built
// by the zoo or from YAML carry none (their parameters are drawn from a seed).
struct NamedParams {
  std::vector<float> weight;
  std::vector<float> bias;
};
using ParamStore = std::unordered_map<std::string, NamedParams>;

// One output of a graph: the layer that computes it and the name it leaves the graph under (an
// ONNX file's output name; by default the layer's name). Fusion may move an output onto the
// layer an activation was folded into; the name stays.
struct GraphOutput {
  int layer = -1;
  std::string name;
  bool operator==(const GraphOutput& o) const = default;
};

// Batch-norm statistics in folded form: scale = gamma / sqrt(var + eps), shift = beta −
// mean·scale, computed in double and rounded once. Random statistics (kernels/weights.h) and
// ONNX imports both go through it, so an exported and re-imported model folds to the same bits.
void batch_norm_affine(const std::vector<float>& gamma, const std::vector<float>& beta,
                       const std::vector<float>& mean, const std::vector<float>& var, double eps,
                       std::vector<float>* scale, std::vector<float>* shift);

class Graph {
public:
  Graph() = default;
  // `outputs` empty: the last layer is the one output. Runtime inputs (op kInput) must be the
  // first layers, ids 0, 1, ...; every other layer follows them.
  Graph(std::string name, DType dtype, std::vector<Layer> layers,
        std::shared_ptr<const ParamStore> params = nullptr, std::vector<GraphOutput> outputs = {});

  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  const std::vector<Layer>& layers() const { return layers_; }
  const Layer& layer(int id) const { return layers_.at(static_cast<size_t>(id)); }
  int size() const { return static_cast<int>(layers_.size()); }
  // Layers that read the output of `id`, in topological order.
  const std::vector<int>& consumers(int id) const { return consumers_.at(static_cast<size_t>(id)); }
  // The runtime inputs: layers 0 .. num_inputs() − 1 (op kInput), in the order they were
  // declared (an ONNX file's); the computed layers are num_inputs() .. size() − 1, so the
  // first layer a group may hold is num_inputs(). Most graphs have one input, layer 0.
  int num_inputs() const { return num_inputs_; }
  std::vector<int> inputs() const;
  bool is_input(int id) const { return id >= 0 && id < num_inputs_; }
  // The layers whose outputs are the graph's outputs, in order (an ONNX file's); by default the
  // last layer alone. A layer may be an output and be read by later layers too.
  const std::vector<int>& outputs() const { return output_ids_; }
  const std::vector<GraphOutput>& output_refs() const { return outputs_; }
  bool is_output(int id) const;
  // The one output / the one input's shape of a graph that has exactly one (an internal error
  // otherwise: a caller that handles several asks outputs() / inputs()).
  int output() const;
  const TensorShape& input_shape() const;
  // Every input has the same batch (GraphBuilder checks it).
  int batch() const { return layers_.empty() ? 0 : static_cast<int>(layers_[0].out.n); }

  int64_t total_params() const;
  int64_t total_macs() const;
  int64_t input_bytes(int id) const;  // bytes of all input activations of layer `id`
  int64_t output_bytes(int id) const; // bytes of the output activation of layer `id`
  int64_t weight_bytes(int id) const; // params · element size
  int64_t activation_bytes() const;   // sum of output bytes of all layers but the input

  int find(const std::string& layer_name) const; // -1 if absent

  // Identifies the graph's content: a Graph never changes once constructed, every
  // construction draws a new uid, and copies keep it. Caches key on it (the model's group
  // structure, model/detail/geometry.h). 0 for a default-constructed (empty) graph.
  uint64_t uid() const { return uid_; }

  // The parameters the graph came with, or null (kernels/weights.h: model_weights).
  const std::shared_ptr<const ParamStore>& params() const { return params_; }

private:
  uint64_t uid_ = 0;
  std::string name_;
  DType dtype_ = DType::kF32;
  std::vector<Layer> layers_;
  std::vector<std::vector<int>> consumers_;
  std::shared_ptr<const ParamStore> params_;
  int num_inputs_ = 0;
  std::vector<GraphOutput> outputs_;
  std::vector<int> output_ids_;
};

// The dims of layer `l`'s weight in the stored form (kernels/weights.h): conv [Cout, Cin/groups,
// (kd,) kh, kw], conv_transpose [Cin, Cout/groups, (kd,) kh, kw], linear [out, in features],
// batch_norm [C] (its scale), layer_norm [C] (gamma; beta is its bias); empty for a layer without
// weights. A bias is [Cout].
std::vector<int64_t> weight_dims(const Graph& g, const Layer& l);

// Inference transform: folds every batch-norm into the conv (or linear) that feeds it
// alone, and every relu / leaky-relu into the conv / add / linear that feeds it alone, as
// its epilogue. Shapes are unchanged; the returned graph is what the search partitions.
Graph fuse_for_inference(const Graph& g);

} // namespace brickdl
