#include "kernels/detail/group_info.h"

#include <algorithm>

#include "core/group.h"

namespace brickdl::kernels::detail {

GroupInfo::GroupInfo(const Graph& g, const Group& grp) : graph(&g), group(grp), size(grp.size()) {
  elem_bytes = dtype_bytes(g.dtype());
  external_ids = group_external_inputs(g, grp);
  external_readers.resize(external_ids.size());
  consumers.resize(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i)
    add_layer(i);
}

void GroupInfo::add_layer(int i) {
  const Layer& l = graph->layer(group.first + i);
  layers.push_back(&l);
  std::vector<Source> slots;
  std::vector<SourceSlots> distinct;
  std::vector<size_t> to_source;
  for (int s = 0; s < static_cast<int>(l.inputs.size()); ++s) {
    const int p = l.inputs[static_cast<size_t>(s)];
    Source src;
    if (group.contains(p)) {
      src.index = p - group.first;
      consumers[static_cast<size_t>(src.index)].emplace_back(i, s);
    } else {
      src.external = true;
      src.index = static_cast<int>(std::find(external_ids.begin(), external_ids.end(), p) -
                                   external_ids.begin());
      external_readers[static_cast<size_t>(src.index)].emplace_back(i, s);
    }
    slots.push_back(src);
    auto it = std::find_if(distinct.begin(), distinct.end(),
                           [&](const SourceSlots& d) { return d.source == src; });
    to_source.push_back(static_cast<size_t>(it - distinct.begin()));
    if (it == distinct.end()) {
      distinct.push_back(SourceSlots{src, {s}});
    } else {
      it->slots.push_back(s);
    }
  }
  slot_source.push_back(std::move(slots));
  slot_to_source.push_back(std::move(to_source));
  sources.push_back(std::move(distinct));
}

Region GroupInfo::need(int i, const SourceSlots& src, const Region& out) const {
  Region r;
  for (int s : src.slots)
    r = hull(r, input_need(*graph, layer(i), s, out));
  return r;
}

int64_t block_flops(const Graph& g, const Layer& l, const Region& r) {
  if (l.op != OpKind::kConv || r.empty())
    return 0;
  const int64_t cin_g = g.layer(l.inputs[0]).out.c / l.groups;
  const Window& w = l.window;
  return 2 * r.volume() * cin_g * w.kernel[0] * w.kernel[1] * w.kernel[2];
}

int64_t weight_share(const Layer& l, int64_t channels) {
  return l.out.c > 0 ? l.params * channels / l.out.c : 0;
}

float* scratch(std::vector<float>& buf, int64_t elems) {
  if (static_cast<int64_t>(buf.size()) < elems)
    buf.resize(static_cast<size_t>(elems));
  return buf.data();
}

} // namespace brickdl::kernels::detail
