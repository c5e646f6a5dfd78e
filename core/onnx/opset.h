#pragma once
// What differs between the opsets import_onnx reads (kOnnxMinOpset to kOnnxMaxOpset; core/onnx.h
// lists the changes since 17), each form read into one: attributes that became inputs (the
// reductions' `axes` and Pad's `axes` at 18, Split's `split` at 13), Split's `num_outputs` and
// Resize's `axes` and `keep_aspect_ratio_policy` (18), Resize's `half_pixel_symmetric` (19).
// The forms are told apart by the node's inputs and attributes, which every opset spells
// differently, not by the model's opset number. The Importer (core/onnx/importer.h) reads the
// node's attributes and constant inputs and passes them here; a `why` that comes back non-empty
// is its refusal of the node.
#include <cstdint>
#include <string>
#include <vector>

#include "core/onnx.h"

namespace onnx {
class ModelProto;
}

namespace brickdl::onnx_detail {

// The model's default-domain opset (its last ai.onnx import) into `opset`, 0 when it has none;
// returns "" when import_onnx reads that opset, else the reason it does not.
std::string check_opset(const onnx::ModelProto& model, int64_t* opset);

// The axes of ReduceMean / ReduceMax: the `axes` attribute before opset 18, the constant
// `axes` input (null: absent) since.
std::vector<int64_t> reduce_axes(const std::vector<int64_t>& attribute, const OnnxTensor* input);

// Pad's begin and end pads of every axis of a rank-`rank` tensor (ONNX's order: every begin,
// then every end): `pads` lists every axis, or (opset 18) the axes of the constant `axes`
// input (null: absent), the others unpadded.
std::vector<int64_t> pads_of_every_axis(const OnnxTensor& pads, const OnnxTensor* axes, int rank,
                                        std::string* why);

// The sizes of the outputs of an ONNX Split of an axis of `extent` into `outputs` parts:
// `split` when given (opset 11's attribute, opset 13's input), else by opset 18's
// `num_outputs` (0: absent; equal parts of ceil(extent / n), the last one smaller), else equal
// parts. Returns the sizes, or an empty vector with `why` saying what is wrong.
std::vector<int64_t> split_sizes(int64_t extent, int outputs, const std::vector<int64_t>* split,
                                 int64_t num_outputs, std::string* why);

// Resize's axes: opset 18's `axes` attribute made non-negative, or every axis of a
// rank-`rank` tensor when it is absent.
std::vector<int64_t> resize_axes(std::vector<int64_t> axes, int64_t rank, std::string* why);
// One scale per axis of `dims`, from the constant `scales` or (when scales is absent or empty)
// `sizes` input, of the axes `axes` (resize_axes; the others 1); sizes with
// keep_aspect_ratio_policy `policy` not_larger / not_smaller give those axes one scale, the
// smallest / largest of their ratios.
std::vector<double> scales_of_every_axis(const std::vector<int64_t>& dims,
                                         const std::vector<int64_t>& axes, const OnnxTensor* scales,
                                         const OnnxTensor* sizes, const std::string& policy,
                                         std::string* why);
// Resize's coordinate_transformation_mode as one brickdl reads: opset 19's
// half_pixel_symmetric shifts the source by (1 − out_int / out) · in / 2, nothing when the
// output size is the exact multiple brickdl's integer factors give, so it is half_pixel.
std::string resize_coordinate_mode(const std::string& mode);

} // namespace brickdl::onnx_detail
