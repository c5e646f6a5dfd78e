#include "search/workload.h"

#include <map>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace brickdl::search {

namespace {

// Shape without the batch: "64x56x56", "3x112x112x112", "1000".
std::string shape_wo_batch(const TensorShape& s) {
  std::string r = std::to_string(s.c);
  if (s.spatial_rank == 3)
    r += "x" + std::to_string(s.d);
  if (s.spatial_rank >= 2)
    r += "x" + std::to_string(s.h) + "x" + std::to_string(s.w);
  return r;
}

std::string triple(const std::array<int, 3>& v) {
  return fmt::format("{}x{}x{}", v[0], v[1], v[2]);
}

std::string window_str(const Window& w) {
  return "k" + triple(w.kernel) + " s" + triple(w.stride) + " p" + triple(w.pad) + " d" +
         triple(w.dilation);
}

std::string epilogue_str(const Layer& l) {
  switch (l.activation) {
  case Activation::kNone: return "";
  case Activation::kRelu: return " relu";
  case Activation::kLeakyRelu: return fmt::format(" leaky{}", l.leaky_slope);
  }
  return "";
}

// The attributes that change the work of a layer, per op.
std::string attributes(const Layer& l) {
  switch (l.op) {
  case OpKind::kConv:
    return " " + window_str(l.window) +
           fmt::format(" g{} c{} b{}", l.groups, l.out_channels, l.bias ? 1 : 0);
  case OpKind::kLinear: return fmt::format(" c{} b{}", l.out_channels, l.bias ? 1 : 0);
  case OpKind::kMaxPool: return " " + window_str(l.window) + (l.ceil_mode ? " ceil" : "");
  case OpKind::kAvgPool:
    return " " + window_str(l.window) + (l.ceil_mode ? " ceil" : "") +
           (l.count_include_pad ? " incpad" : "");
  case OpKind::kUpsample:
    return fmt::format(" x{}{}", l.upsample_scale, l.bilinear ? " bilinear" : " nearest");
  case OpKind::kLeakyRelu: return fmt::format(" slope{}", l.leaky_slope);
  default: return "";
  }
}

void check_group(const Graph& graph, const Group& group) {
  BRICKDL_CHECK(group.first >= 1 && group.first <= group.last && group.last < graph.size(),
                "group [" << group.first << ", " << group.last << "] outside graph of "
                          << graph.size() << " layers");
}

} // namespace

std::string workload_signature(const Graph& graph, const Group& group) {
  check_group(graph, group);
  std::map<int, int> external; // producer id -> X index, in order of first read
  std::string ext_part;
  std::string layer_part;
  for (int id = group.first; id <= group.last; ++id) {
    const Layer& l = graph.layer(id);
    std::string ins;
    for (int in : l.inputs) {
      if (!ins.empty())
        ins += ",";
      if (group.contains(in)) {
        ins += "L" + std::to_string(in - group.first);
        continue;
      }
      auto [it, fresh] = external.emplace(in, static_cast<int>(external.size()));
      if (fresh)
        ext_part += fmt::format(" | X{}={}", it->second, shape_wo_batch(graph.layer(in).out));
      ins += "X" + std::to_string(it->second);
    }
    layer_part += fmt::format(" | L{}={}({}){}{} -> {}", id - group.first, op_name(l.op), ins,
                              attributes(l), epilogue_str(l), shape_wo_batch(l.out));
  }
  return fmt::format("v1 n{} {}", graph.batch(), dtype_name(graph.dtype())) + ext_part + layer_part;
}

std::string workload_description(const Graph& graph, const Group& group) {
  check_group(graph, group);
  std::string s;
  for (int id = group.first; id <= group.last; ++id) {
    const Layer& l = graph.layer(id);
    if (!s.empty())
      s += " | ";
    const int64_t in_c = l.inputs.empty() ? 0 : graph.layer(l.inputs[0]).out.c;
    std::string spatial;
    if (l.out.spatial_rank == 3)
      spatial = fmt::format(" {}x{}x{}", l.out.d, l.out.h, l.out.w);
    if (l.out.spatial_rank == 2)
      spatial = fmt::format(" {}x{}", l.out.h, l.out.w);
    const auto& k = l.window.kernel;
    const std::string kern = l.out.spatial_rank == 3 ? fmt::format("{}x{}x{}", k[0], k[1], k[2])
                                                     : fmt::format("{}x{}", k[1], k[2]);
    switch (l.op) {
    case OpKind::kConv:
      s += fmt::format("conv{}{} {}->{}{}", kern,
                       l.window.stride[2] > 1 ? "/" + std::to_string(l.window.stride[2]) : "", in_c,
                       l.out.c, spatial);
      break;
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      s += fmt::format("{}{}{}{}", l.op == OpKind::kMaxPool ? "maxpool" : "avgpool", kern,
                       l.window.stride[2] > 1 ? "/" + std::to_string(l.window.stride[2]) : "",
                       spatial);
      break;
    case OpKind::kLinear: s += fmt::format("linear {}->{}", in_c, l.out.c); break;
    default: s += std::string(op_name(l.op)) + spatial; break;
    }
    if (l.activation != Activation::kNone)
      s += std::string(" +") + activation_name(l.activation);
  }
  return s;
}

std::string group_layer_names(const Graph& graph, const Group& group) {
  check_group(graph, group);
  if (group.size() == 1)
    return graph.layer(group.first).name;
  return graph.layer(group.first).name + " .. " + graph.layer(group.last).name;
}

} // namespace brickdl::search
