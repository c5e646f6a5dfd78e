#include "core/group.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/op_traits.h"

namespace brickdl {

namespace {

bool in_range(const Graph& graph, const Group& group) {
  return group.first >= std::max(graph.num_inputs(), 1) && group.first <= group.last &&
         group.last < graph.size();
}

void check_range(const Graph& graph, const Group& group) {
  BRICKDL_CHECK(in_range(graph, group), "group [" << group.first << ", " << group.last
                                                  << "] outside graph of " << graph.size()
                                                  << " layers");
}

// Shape without the batch: "64x56x56", "3x112x112x112", "1000".
std::string shape_wo_batch(const TensorShape& s) {
  std::string r = std::to_string(s.c);
  if (s.spatial_rank == 3)
    r += "x" + std::to_string(s.d);
  if (s.spatial_rank >= 2)
    r += "x" + std::to_string(s.h) + "x" + std::to_string(s.w);
  return r;
}

std::string epilogue_text(const Layer& l) {
  switch (l.activation) {
  case Activation::kNone: return "";
  case Activation::kRelu: return " relu";
  case Activation::kLeakyRelu: return fmt::format(" leaky{}", l.leaky_slope);
  case Activation::kClip: return fmt::format(" clip{}:{}", l.clip_min, l.clip_max);
  default: return std::string(" ") + activation_name(l.activation);
  }
}

// "conv3x3/2 64->128 28x28", "conv_transpose3x3/2 256->256 192x288" (the output's extent),
// "maxpool3x3/2 56x56", "linear 2048->1000", "add 56x56".
std::string layer_description(const Graph& graph, const Layer& l) {
  const int64_t in_c = l.inputs.empty() ? 0 : graph.layer(l.inputs[0]).out.c;
  std::string spatial;
  if (l.out.spatial_rank == 3)
    spatial = fmt::format(" {}x{}x{}", l.out.d, l.out.h, l.out.w);
  if (l.out.spatial_rank == 2)
    spatial = fmt::format(" {}x{}", l.out.h, l.out.w);
  const auto& k = l.window.kernel;
  const std::string kern = l.out.spatial_rank == 3 ? fmt::format("{}x{}x{}", k[0], k[1], k[2])
                                                   : fmt::format("{}x{}", k[1], k[2]);
  const std::string stride = l.window.stride[2] > 1 ? "/" + std::to_string(l.window.stride[2]) : "";
  switch (l.op) {
  case OpKind::kConv: return fmt::format("conv{}{} {}->{}{}", kern, stride, in_c, l.out.c, spatial);
  case OpKind::kConvTranspose:
    return fmt::format("conv_transpose{}{} {}->{}{}", kern, stride, in_c, l.out.c, spatial);
  case OpKind::kMaxPool: return fmt::format("maxpool{}{}{}", kern, stride, spatial);
  case OpKind::kAvgPool: return fmt::format("avgpool{}{}{}", kern, stride, spatial);
  case OpKind::kLinear: return fmt::format("linear {}->{}", in_c, l.out.c);
  default: return std::string(op_name(l.op)) + spatial;
  }
}

} // namespace

std::string group_invalid_reason(const Graph& graph, const Group& group) {
  if (!in_range(graph, group))
    return "group [" + std::to_string(group.first) + ", " + std::to_string(group.last) +
           "] is not a range of layers " + std::to_string(std::max(graph.num_inputs(), 1)) + ".." +
           std::to_string(graph.size() - 1);
  for (int id = group.first; id < group.last; ++id)
    for (int c : graph.consumers(id))
      if (!group.contains(c))
        return "the output of layer '" + graph.layer(id).name + "' is read by '" +
               graph.layer(c).name + "' outside the group [" + graph.layer(group.first).name +
               " .. " + graph.layer(group.last).name +
               "]; only the last layer's output may leave a group";
  return "";
}

bool is_valid_group(const Graph& graph, const Group& group) {
  if (!in_range(graph, group))
    return false;
  // Consumers come later in the topological order: one outside the group is after it.
  for (int id = group.first; id < group.last; ++id)
    for (int c : graph.consumers(id))
      if (c > group.last)
        return false;
  return true;
}

std::vector<int> group_external_inputs(const Graph& graph, const Group& group) {
  check_range(graph, group);
  std::vector<int> ids;
  for (int id = group.first; id <= group.last; ++id)
    for (int p : graph.layer(id).inputs)
      if (!group.contains(p) && std::find(ids.begin(), ids.end(), p) == ids.end())
        ids.push_back(p);
  return ids;
}

int stream_chunk_channels(const Graph& graph, const Group& group, int input_id) {
  check_range(graph, group);
  int readers = 0; // window readers (the others read it from global memory)
  const Layer* reader = nullptr;
  for (int id = group.first; id <= group.last; ++id)
    for (int p : graph.layer(id).inputs)
      if (p == input_id && traits(graph.layer(id).op).windowed()) {
        ++readers;
        reader = &graph.layer(id);
      }
  if (readers != 1 || reader->op != OpKind::kConv || reader->groups != 1 ||
      graph.layer(input_id).out.c <= kStreamBuffers * kStreamChunkChannels)
    return 0;
  return kStreamChunkChannels;
}

int cluster_slice(int64_t channels, int cluster) {
  const int64_t per = (channels + cluster - 1) / std::max(cluster, 1);
  return static_cast<int>(channels % 8 == 0 && cluster > 1 ? (per + 7) / 8 * 8 : per);
}

int cluster_stream_slice(int cluster) {
  return std::max(8, kStreamChunkChannels / std::max(cluster, 1));
}

int memoized_stream_chunk(const Layer& layer, int64_t staged_channels, int64_t staged_points,
                          int64_t acc_elements, int64_t budget_elements) {
  const int64_t whole = staged_channels * staged_points;
  const int64_t chunks = kStreamBuffers * kStreamChunkChannels;
  if (layer.op != OpKind::kConv || layer.groups != 1 || staged_channels <= chunks ||
      whole <= kStageWholeElements || chunks * staged_points + acc_elements >= whole)
    return 0;
  int chunk = kStreamChunkChannels;
  while (chunk > kMinStreamChunkChannels &&
         kStreamBuffers * chunk * staged_points + acc_elements > budget_elements)
    chunk /= 2;
  return chunk;
}

bool has_tensor_math(DType precision) {
  return precision != DType::kF32;
}

bool conv_on_tensor_cores(bool tensor_math, int64_t out_channels, int64_t groups,
                          int64_t channels_per_block) {
  return tensor_math && groups >= 1 && (out_channels / groups) % 8 == 0 &&
         channels_per_block % 8 == 0;
}

bool uses_wgmma(bool target_has_wgmma, int threads) {
  return target_has_wgmma && threads > 0 && threads % 128 == 0;
}

int64_t wgmma_tile_floats(int threads) {
  return int64_t{kStreamBuffers} * (kWgmmaTileBytes / 4) * (threads / 128);
}

MmaTile choose_mma_tile(int64_t box_points, int64_t cout_g, int64_t channels_per_unit, int threads,
                        bool wgmma) {
  MmaTile t{kMmaMaxM, kMmaMaxN};
  while (t.n > 1 && ((cout_g / 8) % t.n != 0 || (channels_per_unit / 8) % t.n != 0))
    t.n /= 2;
  const int teams = threads / (wgmma ? 128 : 32);
  while (mma_tile_count(box_points, channels_per_unit, t, wgmma) < teams && (t.m > 1 || t.n > 1)) {
    if (t.m >= t.n && t.m > 1) {
      t.m /= 2;
    } else {
      t.n /= 2;
    }
  }
  return t;
}

int64_t mma_tile_count(int64_t box_points, int64_t channels_per_unit, MmaTile t, bool wgmma) {
  const int64_t rows = int64_t{wgmma ? 64 : 16} * t.m;
  return (box_points + rows - 1) / rows * ((channels_per_unit + 8 * t.n - 1) / (8 * t.n));
}

int max_kernel_wgmma_n(bool sixteen_bit_storage, int batch_block) {
  return sixteen_bit_storage && batch_block > 1 ? kMaxWgmmaNSixteenBitBatched : kMmaMaxN;
}

bool wgmma_acc_in_registers(int64_t box_points, int64_t channels_per_unit, MmaTile t, int threads,
                            bool tf32, int cluster, int layers) {
  return tf32 && cluster <= 1 && layers <= kMaxLayersWithAccInRegisters &&
         mma_tile_count(box_points, channels_per_unit, t, true) <= threads / 128;
}

std::string brick_blocker(const Graph& graph, const Group& group) {
  check_range(graph, group);
  for (int id = group.first; id <= group.last; ++id) {
    const Layer& l = graph.layer(id);
    if (!is_brickable(l))
      return "layer '" + l.name + "' (" + op_name(l.op) + ", output " + l.out.str() +
             ") cannot be computed brick by brick, so padded and memoized cannot run the "
             "group; it runs layerwise";
    // A broadcast operand (the SE vector) is read whole by every brick; computed inside the
    // group it would be a tensor of another grid, which padded and memoized do not keep.
    for (int in : l.inputs)
      if (group.contains(in) && broadcasts(l, graph.layer(in).out))
        return "layer '" + l.name + "' (" + op_name(l.op) + ") broadcasts '" +
               graph.layer(in).name + "' " + graph.layer(in).out.str() +
               ", computed inside the group; padded and memoized read a broadcast operand "
               "only from outside their group, so the group runs layerwise";
    // Padded and memoized compute an intermediate only where the last layer needs it and
    // store none whole: a graph output must be the last layer of their groups.
    if (id < group.last && graph.is_output(id))
      return "layer '" + l.name + "' is a graph output inside the group; padded and memoized " +
             "store only the last layer's output, so the group runs layerwise";
  }
  return "";
}

std::string workload_signature(const Graph& graph, const Group& group) {
  check_range(graph, group);
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
                              attribute_text(l), epilogue_text(l), shape_wo_batch(l.out));
  }
  // Graph outputs before the last layer change what may run the group (brick_blocker); graphs
  // with one output never have them, so their keys stay as they were.
  std::string inner_outputs;
  for (int id = group.first; id < group.last; ++id)
    if (graph.is_output(id))
      inner_outputs +=
          (inner_outputs.empty() ? " | outputs L" : ",L") + std::to_string(id - group.first);
  return fmt::format("v1 n{} {}", graph.batch(), dtype_name(graph.dtype())) + ext_part +
         layer_part + inner_outputs;
}

std::string workload_description(const Graph& graph, const Group& group) {
  check_range(graph, group);
  std::string s;
  for (int id = group.first; id <= group.last; ++id) {
    const Layer& l = graph.layer(id);
    if (!s.empty())
      s += " | ";
    s += layer_description(graph, l);
    if (l.activation != Activation::kNone)
      s += std::string(" +") + activation_name(l.activation);
  }
  return s;
}

std::string group_layer_names(const Graph& graph, const Group& group) {
  check_range(graph, group);
  if (group.size() == 1)
    return graph.layer(group.first).name;
  return graph.layer(group.first).name + " .. " + graph.layer(group.last).name;
}

} // namespace brickdl
