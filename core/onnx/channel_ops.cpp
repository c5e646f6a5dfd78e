#include "core/onnx/channel_ops.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "core/onnx/opset.h"
#include "core/onnx/patterns.h"

namespace brickdl::onnx_detail {

IndexRange slice_range(int64_t start, int64_t end, int64_t extent) {
  const auto clamp = [extent](int64_t i) {
    if (i < 0)
      i = i < -extent ? 0 : i + extent; // no overflow for INT64_MIN
    return std::min(i, extent);
  };
  return {clamp(start), clamp(end)};
}

bool is_to_channels_last(const std::vector<int64_t>& perm) {
  const auto r = static_cast<int64_t>(perm.size());
  if (r < 3 || perm[0] != 0 || perm.back() != 1)
    return false;
  for (int64_t i = 1; i + 1 < r; ++i)
    if (perm[static_cast<size_t>(i)] != i + 1)
      return false;
  return true;
}

bool is_to_channels_first(const std::vector<int64_t>& perm) {
  const auto r = static_cast<int64_t>(perm.size());
  if (r < 3 || perm[0] != 0 || perm[1] != r - 1)
    return false;
  for (int64_t i = 2; i < r; ++i)
    if (perm[static_cast<size_t>(i)] != i - 1)
      return false;
  return true;
}

int64_t channel_shuffle_groups(const std::vector<int64_t>& in, const std::vector<int64_t>& split,
                               const std::vector<int64_t>& perm, const std::vector<int64_t>& out) {
  const size_t r = in.size();
  if (r < 2 || split.size() != r + 1 || perm.size() != r + 1 || out != in)
    return 0;
  const int64_t g = split[1];
  if (split[0] != in[0] || g < 1 || split[2] < 1 || g * split[2] != in[1])
    return 0;
  if (!std::equal(in.begin() + 2, in.end(), split.begin() + 3))
    return 0;
  if (perm[0] != 0 || perm[1] != 2 || perm[2] != 1)
    return 0;
  for (size_t i = 3; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return 0;
  return g;
}

namespace {

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

// Integer values of a constant (OnnxTensor holds floats): torch's open ends, INT64_MAX and
// INT64_MIN, round to ±2^63 in float and saturate back instead of overflowing.
std::vector<int64_t> constant_ints(const OnnxTensor& t) {
  std::vector<int64_t> v;
  for (float f : t.values)
    v.push_back(f >= 9.2e18f ? INT64_MAX : f <= -9.2e18f ? INT64_MIN : static_cast<int64_t>(f));
  return v;
}

// The channel axis of ONNX dims (core/onnx.h): 0 for a rank-1 tensor, else 1.
int64_t channel_axis(size_t rank) {
  return rank == 1 ? 0 : 1;
}

ChannelOpPlan::Output slice_output(int64_t begin, int64_t end, int64_t channels) {
  ChannelOpPlan::Output o;
  o.alias = begin == 0 && end == channels;
  o.layer.op = OpKind::kSlice;
  o.layer.slice_begin = begin;
  o.layer.slice_end = end;
  return o;
}

// Slice: constant starts / ends (/ axes / steps); every axis but the channels' must keep its
// whole extent, and the channels' step must be 1.
std::string plan_slice(const onnx::NodeProto& n, const std::vector<int64_t>& dims,
                       const std::vector<const OnnxTensor*>& c, ChannelOpPlan* plan) {
  const auto at = [&](size_t i) { return i < c.size() ? c[i] : nullptr; };
  if (!at(1) || !at(2) || (n.input_size() > 3 && !n.input(3).empty() && !at(3)) ||
      (n.input_size() > 4 && !n.input(4).empty() && !at(4)))
    return "computes its starts, ends, axes or steps; brickdl takes them constant";
  const std::vector<int64_t> starts = constant_ints(*at(1)), ends = constant_ints(*at(2));
  std::vector<int64_t> axes = at(3) ? constant_ints(*at(3)) : std::vector<int64_t>{};
  std::vector<int64_t> steps = at(4) ? constant_ints(*at(4)) : std::vector<int64_t>{};
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  steps.resize(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size())
    return "has starts, ends and axes of different lengths";
  const auto rank = static_cast<int64_t>(dims.size());
  IndexRange channels{0, dims[static_cast<size_t>(channel_axis(dims.size()))]};
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank)
      return fmt::format("slices axis {} of a rank-{} tensor", axes[i], rank);
    const int64_t extent = dims[static_cast<size_t>(axis)];
    const IndexRange r = slice_range(starts[i], ends[i], extent);
    if (steps[i] != 1 && !(axis != channel_axis(dims.size()) && r.begin == 0 && r.end == extent))
      return fmt::format("slices with step {}; brickdl slices channels with step 1", steps[i]);
    if (axis == channel_axis(dims.size())) {
      channels = r;
    } else if (r.begin != 0 || r.end != extent) {
      return fmt::format("slices axis {} ([{}, {}) of {}); brickdl slices channels (axis {}) only",
                         axis, r.begin, r.end, extent, channel_axis(dims.size()));
    }
  }
  if (channels.empty())
    return fmt::format("keeps no channel (channels [{}, {}))", channels.begin, channels.end);
  plan->outputs.push_back(slice_output(channels.begin, channels.end,
                                       dims[static_cast<size_t>(channel_axis(dims.size()))]));
  return "";
}

// Split on the channel axis: sizes from opset 11's attribute, opset 13's input or opset 18's
// num_outputs (split_sizes).
std::string plan_split(const onnx::NodeProto& n, const std::vector<int64_t>& dims,
                       const std::vector<const OnnxTensor*>& c, ChannelOpPlan* plan) {
  const auto rank = static_cast<int64_t>(dims.size());
  const onnx::AttributeProto* ax = find_attribute(n, "axis");
  const int64_t axis = ax ? (ax->i() < 0 ? ax->i() + rank : ax->i()) : 0;
  const int64_t ch = channel_axis(dims.size());
  if (axis != ch)
    return fmt::format("splits axis {}; brickdl splits channels (axis {}) only", ax ? ax->i() : 0,
                       ch);
  std::vector<int64_t> given;
  const std::vector<int64_t>* split = nullptr;
  if (n.input_size() > 1 && !n.input(1).empty()) {
    if (c.size() < 2 || !c[1])
      return "computes its split sizes; brickdl takes them constant";
    given = constant_ints(*c[1]);
    split = &given;
  } else if (const onnx::AttributeProto* a = find_attribute(n, "split")) {
    given.assign(a->ints().begin(), a->ints().end());
    split = &given;
  }
  const onnx::AttributeProto* num = find_attribute(n, "num_outputs");
  std::string why;
  const int64_t channels = dims[static_cast<size_t>(ch)];
  const std::vector<int64_t> sizes =
      split_sizes(channels, n.output_size(), split, num ? num->i() : 0, &why);
  if (sizes.empty())
    return why;
  int64_t begin = 0;
  for (int64_t s : sizes) {
    plan->outputs.push_back(slice_output(begin, begin + s, channels));
    begin += s;
  }
  return "";
}

std::string plan_layer_norm(const onnx::NodeProto& n, const std::vector<int64_t>& dims,
                            const std::vector<const OnnxTensor*>& c, ChannelOpPlan* plan) {
  const auto channels = static_cast<size_t>(dims[static_cast<size_t>(channel_axis(dims.size()))]);
  const OnnxTensor* scale = c.size() > 1 ? c[1] : nullptr;
  const OnnxTensor* bias = c.size() > 2 ? c[2] : nullptr;
  if (!scale || (n.input_size() > 2 && !n.input(2).empty() && !bias))
    return "computes its scale or bias; brickdl takes them constant";
  if (scale->values.size() != channels || (bias && bias->values.size() != channels))
    return fmt::format("has a scale or bias that is not one value per channel ({} channels)",
                       channels);
  ChannelOpPlan::Output o;
  o.layer.op = OpKind::kLayerNorm;
  const onnx::AttributeProto* eps = find_attribute(n, "epsilon");
  o.layer.epsilon = eps ? eps->f() : 1e-5f;
  plan->outputs.push_back(o);
  plan->params.weight = scale->values;
  plan->params.bias = bias ? bias->values : std::vector<float>(channels, 0.0f);
  return "";
}

} // namespace

bool is_channel_op(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (n.domain() == kBrickdlDomain)
    return op == "ChannelShuffle" || op == "ChannelLayerNorm";
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return false;
  return op == "Slice" || op == "Split" || op == "Transpose" ||
         (op == "Concat" && n.input_size() == 1);
}

std::string plan_channel_op(const onnx::NodeProto& n, int64_t opset,
                            const std::vector<int64_t>& in_dims,
                            const std::vector<const OnnxTensor*>& constants, ChannelOpPlan* plan) {
  (void)opset; // the forms of every opset are told apart by the inputs and attributes
  *plan = ChannelOpPlan{};
  if (in_dims.empty())
    return "reads a scalar; brickdl takes tensors with channels";
  const std::string& op = n.op_type();
  if (op == "Slice")
    return plan_slice(n, in_dims, constants, plan);
  if (op == "Split")
    return plan_split(n, in_dims, constants, plan);
  if (op == "Concat") {
    plan->outputs.push_back({true, Layer{}});
    return "";
  }
  if (op == "ChannelLayerNorm")
    return plan_layer_norm(n, in_dims, constants, plan);
  if (op == "Transpose") { // one the pattern rewrites (core/onnx/patterns.h) did not take
    const onnx::AttributeProto* p = find_attribute(n, "perm");
    const std::string perm =
        p ? fmt::format("[{}]", fmt::join(p->ints(), ", ")) : std::string("reversed");
    return "transposes (perm " + perm +
           "); brickdl keeps channels on axis 1 and maps a Transpose only in torch's channel "
           "shuffle (Reshape-Transpose-Reshape) or to channels-last and back around "
           "LayerNormalization, MatMul by a constant and elementwise ops";
  }
  // ChannelShuffle: the pattern assumed the input's dims are the output's.
  const onnx::AttributeProto* shape = find_attribute(n, "shape");
  const onnx::AttributeProto* groups = find_attribute(n, "groups");
  if (!shape || !groups ||
      std::vector<int64_t>(shape->ints().begin(), shape->ints().end()) != in_dims)
    return "is a Reshape-Transpose-Reshape whose Reshapes do not keep the input's dims; brickdl "
           "takes it as a channel shuffle only then";
  ChannelOpPlan::Output o;
  o.layer.op = OpKind::kChannelShuffle;
  o.layer.groups = static_cast<int>(groups->i());
  plan->outputs.push_back(o);
  return "";
}

} // namespace brickdl::onnx_detail
