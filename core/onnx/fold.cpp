// Constant folding of the shape arithmetic ONNX exporters emit (core/onnx/proto.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "core/onnx/proto.h"

namespace brickdl::onnx_detail {

namespace {

std::vector<int64_t> int_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name)
      return {a.ints().begin(), a.ints().end()};
  return {};
}

int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t dflt) {
  for (const auto& a : n.attribute())
    if (a.name() == name)
      return a.i();
  return dflt;
}

// Axes from the attribute (older opsets) or the second input (opset 13).
std::vector<int64_t> axes_of(const onnx::NodeProto& n, const std::vector<const OnnxTensor*>& in) {
  std::vector<int64_t> axes = int_attr(n, "axes");
  if (in.size() > 1 && in[1])
    for (float v : in[1]->values)
      axes.push_back(static_cast<int64_t>(v));
  return axes;
}

int64_t normalized(int64_t axis, int64_t rank, const std::string& where) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw UserError(fmt::format("{}: axis {} is out of range for rank {}", where, axis, rank));
  return a;
}

OnnxTensor gather(const onnx::NodeProto& n, const OnnxTensor& data, const OnnxTensor& idx,
                  const std::string& where) {
  if (data.dims.size() != 1 || normalized(int_attr(n, "axis", 0), 1, where) != 0)
    throw UserError(where + ": constant Gather of a tensor of rank other than 1");
  OnnxTensor out{idx.dims, {}};
  const auto size = static_cast<int64_t>(data.values.size());
  for (float f : idx.values) {
    const int64_t i = normalized(static_cast<int64_t>(f), size, where);
    out.values.push_back(data.values[static_cast<size_t>(i)]);
  }
  return out;
}

OnnxTensor unsqueeze(OnnxTensor t, std::vector<int64_t> axes, const std::string& where) {
  const auto rank = static_cast<int64_t>(t.dims.size() + axes.size());
  for (int64_t& a : axes)
    a = normalized(a, rank, where);
  std::sort(axes.begin(), axes.end());
  for (int64_t a : axes)
    t.dims.insert(t.dims.begin() + a, 1);
  return t;
}

OnnxTensor squeeze(OnnxTensor t, std::vector<int64_t> axes, const std::string& where) {
  const auto rank = static_cast<int64_t>(t.dims.size());
  std::vector<int64_t> dims;
  for (int64_t& a : axes)
    a = normalized(a, rank, where);
  for (int64_t i = 0; i < rank; ++i) {
    const bool listed = std::find(axes.begin(), axes.end(), i) != axes.end();
    if ((axes.empty() && t.dims[static_cast<size_t>(i)] == 1) || listed) {
      if (t.dims[static_cast<size_t>(i)] != 1)
        throw UserError(fmt::format("{}: squeezes axis {} of extent {}", where, i,
                                    t.dims[static_cast<size_t>(i)]));
      continue;
    }
    dims.push_back(t.dims[static_cast<size_t>(i)]);
  }
  t.dims = dims;
  return t;
}

OnnxTensor concat(const std::vector<const OnnxTensor*>& in, const std::string& where) {
  OnnxTensor out{{0}, {}, true};
  for (const OnnxTensor* t : in) {
    out.integer = out.integer && t->integer;
    if (t->dims.size() != 1)
      throw UserError(where + ": constant Concat of tensors of rank other than 1");
    out.values.insert(out.values.end(), t->values.begin(), t->values.end());
  }
  out.dims[0] = static_cast<int64_t>(out.values.size());
  return out;
}

// Same shapes, or one side a single value.
OnnxTensor arithmetic(const std::string& op, const OnnxTensor& a, const OnnxTensor& b,
                      const std::string& where) {
  const int64_t na = element_count(a.dims), nb = element_count(b.dims);
  if (na == 0 || nb == 0 || (na != nb && na != 1 && nb != 1))
    throw UserError(fmt::format("{}: constant {} of {} and {} values", where, op, na, nb));
  OnnxTensor out = na >= nb ? a : b;
  out.integer = a.integer && b.integer;
  for (int64_t i = 0; i < std::max(na, nb); ++i) {
    const float x = a.values[static_cast<size_t>(na == 1 ? 0 : i)];
    const float y = b.values[static_cast<size_t>(nb == 1 ? 0 : i)];
    if (op == "Div" && out.integer && y == 0)
      throw UserError(fmt::format("{}: constant integer Div {} / 0", where, x));
    // Integer tensors divide with truncation (torch's chunk sizes: (C + 1) / 2), float ones
    // exactly.
    const float q = out.integer ? std::trunc(x / y) : x / y;
    out.values[static_cast<size_t>(i)] = op == "Add"   ? x + y
                                         : op == "Sub" ? x - y
                                         : op == "Mul" ? x * y
                                                       : q;
  }
  return out;
}

// ONNX's Slice of a rank-1 constant (a shape): starts / ends / axes / steps inputs, ends and
// starts clamped as ONNX clamps them, negative steps walking back.
OnnxTensor slice(const std::vector<const OnnxTensor*>& in, const std::string& where) {
  const OnnxTensor& data = *in[0];
  if (data.dims.size() != 1)
    throw UserError(where + ": constant Slice of a tensor of rank other than 1");
  const auto value = [&](size_t k, int64_t dflt) {
    if (in.size() <= k || !in[k])
      return dflt;
    if (in[k]->values.size() != 1)
      throw UserError(fmt::format("{}: constant Slice of rank 1 takes one value per input, "
                                  "input {} has {}",
                                  where, k, in[k]->values.size()));
    // torch writes open ends as INT64_MAX, which the float copy holds as 2^63: saturate
    const double v = in[k]->values[0];
    return v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : static_cast<int64_t>(v);
  };
  const auto dim = static_cast<int64_t>(data.values.size());
  if (value(3, 0) != 0 && value(3, 0) != -1)
    throw UserError(fmt::format("{}: axis {} is out of range for rank 1", where, value(3, 0)));
  const int64_t step = value(4, 1);
  if (step == 0)
    throw UserError(where + ": Slice step 0");
  const auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
    return std::clamp(v < 0 ? (v < -dim - 1 ? -dim - 1 : v) + dim : v, lo, hi);
  };
  // ONNX: starts and ends clamp to [0, dim] for positive steps, [-1, dim - 1] for negative.
  const int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? dim : dim - 1;
  const int64_t start = clamp(value(1, 0), lo, hi);
  const int64_t end = clamp(value(2, step > 0 ? dim : -dim - 1), lo, hi);
  OnnxTensor out{{0}, {}, data.integer};
  for (int64_t i = start; step > 0 ? i < end : i > end; i += step)
    out.values.push_back(data.values[static_cast<size_t>(i)]);
  out.dims[0] = static_cast<int64_t>(out.values.size());
  return out;
}

// Cast: to an integer type truncates (toward zero, as ONNX's float → int casts do).
OnnxTensor cast(const onnx::NodeProto& n, OnnxTensor t) {
  const int64_t to = int_attr(n, "to", onnx::TensorProto::FLOAT);
  t.integer = to != onnx::TensorProto::FLOAT && to != onnx::TensorProto::DOUBLE &&
              to != onnx::TensorProto::FLOAT16 && to != onnx::TensorProto::BFLOAT16;
  if (t.integer)
    for (float& v : t.values)
      v = std::trunc(v);
  return t;
}

} // namespace

bool fold_constant_node(const onnx::NodeProto& n, const std::vector<const OnnxTensor*>& in,
                        const std::string& where, OnnxTensor* out) {
  const std::string& op = n.op_type();
  const auto needs = [&](size_t k) {
    if (in.size() < k || !std::all_of(in.begin(), in.begin() + static_cast<long>(k),
                                      [](const OnnxTensor* t) { return t != nullptr; }))
      throw UserError(fmt::format("{}: needs {} input(s)", where, k));
  };
  if (op == "Gather") {
    needs(2);
    *out = gather(n, *in[0], *in[1], where);
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    needs(1);
    *out = op == "Unsqueeze" ? unsqueeze(*in[0], axes_of(n, in), where)
                             : squeeze(*in[0], axes_of(n, in), where);
  } else if (op == "Concat") {
    needs(in.size());
    *out = concat(in, where);
  } else if (op == "Identity") {
    needs(1);
    *out = *in[0];
  } else if (op == "Cast") {
    needs(1);
    *out = cast(n, *in[0]);
  } else if (op == "Slice") {
    needs(3);
    *out = slice(in, where);
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    needs(2);
    *out = arithmetic(op, *in[0], *in[1], where);
  } else {
    return false;
  }
  return true;
}

} // namespace brickdl::onnx_detail
