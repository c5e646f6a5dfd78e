#pragma once
// Shared by the ONNX importer and exporter (core/onnx.h): file bytes and TensorProto
// conversion.
#include <string>

#include <onnx/onnx_pb.h>

#include "core/onnx.h"

namespace brickdl::onnx_detail {

// The number of elements of a tensor of `dims`.
int64_t element_count(const std::vector<int64_t>& dims);
// The ONNX dims (rank 1 to 5) of a brickdl tensor: (L) for a rank-1 tensor (one flat row),
// (N, C·spatial) for rank 2, (N, C, W) for rank 3 (H == 1), (N, C, H, W), (N, C, D, H, W).
std::vector<int64_t> onnx_dims(const TensorShape& s, int rank);

// The whole file; UserError naming it when it cannot be read.
std::string read_file(const std::string& path);
// A float tensor from a TensorProto (float, double, bool or an integer type; raw or typed
// data); UserError naming `where` for external data (load_external_data first), another type
// or a size that does not match the dims.
OnnxTensor tensor_from_proto(const onnx::TensorProto& t, const std::string& where);
// Reads the bytes of a tensor stored as external data (data_location EXTERNAL: `location`
// relative to the model's folder `dir`, optional `offset` and `length`) into its raw_data, as
// if the file held them; nothing for a tensor stored inside the file. UserError naming
// `where`, the data file and what is wrong: a location that is absolute or leaves `dir`, a
// missing or short file, a bad offset or length.
void load_external_data(onnx::TensorProto* t, const std::string& dir, const std::string& where);
// A float TensorProto named `name`.
onnx::TensorProto tensor_to_proto(const std::string& name, const std::vector<int64_t>& dims,
                                  const std::vector<float>& values);

// Shape arithmetic on constants, as exporters write it (x.view(x.size(0), -1) becomes Shape →
// Gather → Unsqueeze → Concat → Reshape; F.interpolate(size=x.shape[-2:]) Shape → Slice →
// Concat → Resize; torch.chunk's sizes Shape → Gather → Add → Div): Gather, Unsqueeze,
// Squeeze, Concat, Slice and Cast of rank-1 tensors and the elementwise Add / Sub / Mul / Div
// of constant `inputs` (null: an absent optional input); integer tensors divide with
// truncation. Returns false when `node` is not such an op; throws UserError (naming `where`)
// when it is but cannot be folded (an axis out of range, shapes that do not broadcast).
bool fold_constant_node(const onnx::NodeProto& node, const std::vector<const OnnxTensor*>& inputs,
                        const std::string& where, OnnxTensor* out);

} // namespace brickdl::onnx_detail
