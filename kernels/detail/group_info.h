#pragma once
// The structure of one group of layers as the CPU strategies walk it (resolved once per
// execution), and the counting and buffer helpers every strategy shares.
//
//   Graph + Group ──GroupInfo──► per layer: where each input slot comes from (an external
//                                input of the group or an earlier group layer), the distinct
//                                tensors it reads, and who reads each layer's output
#include <cstdint>
#include <utility>
#include <vector>

#include "core/graph.h"
#include "core/group.h"
#include "kernels/region.h"
#include "kernels/tensor.h"

namespace brickdl::kernels::detail {

// Where one input tensor of a group layer comes from.
struct Source {
  bool external = false;
  int index = 0; // external: index into the group's inputs; else: layer index in the group
  bool operator==(const Source& o) const = default;
};

// The distinct tensors a layer reads, each with the input slots that read it.
struct SourceSlots {
  Source source;
  std::vector<int> slots;
};

// The group's structure. Layer indices are group-relative (graph id − group.first).
struct GroupInfo {
  const Graph* graph = nullptr;
  Group group;
  int size = 0;
  std::vector<const Layer*> layers;
  std::vector<std::vector<Source>> slot_source;            // [layer][slot]
  std::vector<std::vector<SourceSlots>> sources;           // [layer] distinct sources
  std::vector<std::vector<size_t>> slot_to_source;         // [layer][slot] index into sources
  std::vector<std::vector<std::pair<int, int>>> consumers; // [layer] (consumer layer, slot)
  std::vector<int> external_ids;                           // group_external_inputs (core/group.h)
  std::vector<std::vector<std::pair<int, int>>> external_readers; // [external] (layer, slot)
  int64_t elem_bytes = 4; // dtype_bytes of the graph: what the counters count in

  GroupInfo(const Graph& g, const Group& grp);

  const Layer& layer(int i) const { return *layers[static_cast<size_t>(i)]; }
  const TensorShape& shape(int i) const { return layer(i).out; }
  int last() const { return size - 1; }

  // What layer i needs of `src` (the hull over the slots reading it) to produce `out`.
  Region need(int i, const SourceSlots& src, const Region& out) const;

private:
  void add_layer(int i);
};

// Flops of computing region `r` of layer `l`'s output (merged_executor.h counting rules):
// 2 · elements · (Cin / groups) · kernel volume for a conv, 0 for other ops.
int64_t block_flops(const Graph& g, const Layer& l, const Region& r);

// The share of a layer's parameters that computing `channels` of its output channels reads.
int64_t weight_share(const Layer& l, int64_t channels);

// A growable scratch buffer that keeps its memory between uses.
float* scratch(std::vector<float>& buf, int64_t elems);

} // namespace brickdl::kernels::detail
