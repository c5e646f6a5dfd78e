#include "core/onnx/opset.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

namespace brickdl {

int64_t onnx_max_opset() {
  return kOnnxMaxOpset;
}

namespace onnx_detail {

std::string check_opset(const onnx::ModelProto& model, int64_t* opset) {
  *opset = 0;
  for (const auto& o : model.opset_import()) {
    if (!o.domain().empty() && o.domain() != "ai.onnx")
      continue;
    *opset = o.version();
  }
  if (*opset == 0)
    return "no default-domain opset is imported (is this an ONNX model?)";
  if (*opset < kOnnxMinOpset || *opset > onnx_max_opset())
    return fmt::format("opset {} is not supported; brickdl reads opsets {} to {}", *opset,
                       kOnnxMinOpset, onnx_max_opset());
  return "";
}

std::vector<int64_t> reduce_axes(const std::vector<int64_t>& attribute, const OnnxTensor* input) {
  std::vector<int64_t> axes = attribute;
  if (input)
    for (float v : input->values)
      axes.push_back(static_cast<int64_t>(v));
  return axes;
}

std::vector<int64_t> pads_of_every_axis(const OnnxTensor& pads, const OnnxTensor* axes_input,
                                        int rank, std::string* why) {
  std::vector<int64_t> axes;
  if (axes_input)
    for (float f : axes_input->values)
      axes.push_back(static_cast<int64_t>(f) < 0 ? static_cast<int64_t>(f) + rank
                                                 : static_cast<int64_t>(f));
  else
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  if (pads.values.size() != 2 * axes.size()) {
    *why = fmt::format("pads has {} values for {} axes", pads.values.size(), axes.size());
    return {};
  }
  std::vector<int64_t> v(2 * static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank) {
      *why = fmt::format("axis {} is out of range for rank {}", axes[i], rank);
      return {};
    }
    v[static_cast<size_t>(axes[i])] = static_cast<int64_t>(pads.values[i]);
    v[static_cast<size_t>(axes[i] + rank)] = static_cast<int64_t>(pads.values[axes.size() + i]);
  }
  return v;
}

std::vector<int64_t> split_sizes(int64_t extent, int outputs, const std::vector<int64_t>* split,
                                 int64_t num_outputs, std::string* why) {
  if (split) {
    const bool positive =
        std::all_of(split->begin(), split->end(), [](int64_t s) { return s > 0; });
    const int64_t sum = std::accumulate(split->begin(), split->end(), int64_t{0});
    if (static_cast<int>(split->size()) != outputs || !positive || sum != extent) {
      *why = fmt::format("split [{}] must give {} positive sizes that add up to the extent {}",
                         fmt::join(*split, ", "), outputs, extent);
      return {};
    }
    return *split;
  }
  if (num_outputs != 0 && num_outputs != outputs) {
    *why = fmt::format("num_outputs {} but {} outputs", num_outputs, outputs);
    return {};
  }
  if (outputs < 1 || extent < outputs || (num_outputs == 0 && extent % outputs != 0)) {
    *why = fmt::format("an extent of {} does not split into {} equal parts", extent, outputs);
    return {};
  }
  const int64_t part = (extent + outputs - 1) / outputs;
  std::vector<int64_t> sizes(static_cast<size_t>(outputs), part);
  sizes.back() = extent - part * (outputs - 1);
  if (sizes.back() < 1) {
    *why = fmt::format("an extent of {} leaves nothing for the last of {} parts", extent, outputs);
    return {};
  }
  return sizes;
}

std::vector<int64_t> resize_axes(std::vector<int64_t> axes, int64_t rank, std::string* why) {
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) {
      *why = fmt::format("axis {} is out of range for rank {}", a, rank);
      return {};
    }
    a = a < 0 ? a + rank : a;
  }
  return axes;
}

std::vector<double> scales_of_every_axis(const std::vector<int64_t>& dims,
                                         const std::vector<int64_t>& axes, const OnnxTensor* scales,
                                         const OnnxTensor* sizes, const std::string& policy,
                                         std::string* why) {
  std::vector<double> given;
  bool from_sizes = false;
  if (scales && !scales->values.empty()) {
    given.assign(scales->values.begin(), scales->values.end());
  } else if (sizes) {
    from_sizes = true;
    for (size_t i = 0; i < sizes->values.size() && i < axes.size(); ++i)
      given.push_back(static_cast<double>(sizes->values[i]) /
                      static_cast<double>(dims[static_cast<size_t>(axes[i])]));
  }
  if (given.size() != axes.size()) {
    *why = fmt::format("needs constant scales or sizes, one per axis ({})", axes.size());
    return {};
  }
  if (from_sizes && policy != "stretch") {
    if (policy != "not_larger" && policy != "not_smaller") {
      *why = "keep_aspect_ratio_policy '" + policy +
             "' is not one of stretch, not_larger, not_smaller";
      return {};
    }
    const double one = policy == "not_larger" ? *std::min_element(given.begin(), given.end())
                                              : *std::max_element(given.begin(), given.end());
    std::fill(given.begin(), given.end(), one);
  }
  std::vector<double> result(dims.size(), 1.0);
  for (size_t i = 0; i < axes.size(); ++i)
    result[static_cast<size_t>(axes[i])] = given[i];
  return result;
}

std::string resize_coordinate_mode(const std::string& mode) {
  return mode == "half_pixel_symmetric" ? "half_pixel" : mode;
}

} // namespace onnx_detail

} // namespace brickdl
