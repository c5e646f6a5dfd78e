// Layerwise: one layer at a time over whole tensors (merged_executor.h).
#include <algorithm>

#include "kernels/detail/parallel.h"
#include "kernels/reference.h"
#include "kernels/strategies/strategies.h"

namespace brickdl::kernels::detail {

namespace {

// One layer over its whole output with the block kernels (the baseline's "library kernel"),
// in parallel over (image, block of output channels, slab of the outermost non-trivial
// spatial axis). Units keep many output channels, so a conv reuses its staged input across
// them; there are about four units per worker.
Tensor run_whole_layer(const Graph& g, const Layer& l, const std::vector<const Tensor*>& in,
                       const LayerWeights& w, int threads) {
  if (!traits(l.op).brickable)
    return run_layer(l, in, w);
  Tensor y(l.out);
  const int64_t want = 4 * int64_t{threads};
  const int64_t cblock = std::max<int64_t>(1, l.out.c * l.out.n / want);
  const int64_t cblocks = (l.out.c + cblock - 1) / cblock;
  const int axis = l.out.d > 1 ? 0 : l.out.h > 1 ? 1 : 2;
  const int64_t extent = l.out.dim(axis);
  const int64_t slabs =
      std::min(extent, std::max<int64_t>(1, (want + l.out.n * cblocks - 1) / (l.out.n * cblocks)));
  const int64_t slab = (extent + slabs - 1) / slabs;
  parallel_for(l.out.n * cblocks * slabs, threads, [&](int64_t u, int) {
    const int64_t n = u / (cblocks * slabs), c = (u / slabs) % cblocks, s = u % slabs;
    Region what = Region::whole(l.out);
    what.c0 = c * cblock;
    what.c1 = std::min(l.out.c, (c + 1) * cblock);
    what.lo[static_cast<size_t>(axis)] = s * slab;
    what.hi[static_cast<size_t>(axis)] = std::min(extent, (s + 1) * slab);
    if (what.empty())
      return;
    std::vector<ConstBlock> blocks;
    for (const Tensor* t : in)
      blocks.push_back(image_block(*t, n));
    compute_block(g, l, w, blocks, Block{y.image(n), Region::whole(l.out)}, what);
  });
  return y;
}

// Layer i read each distinct input whole once, its parameters once, and wrote its output.
void count_layer(const GroupInfo& info, int i, const std::vector<const Tensor*>& in,
                 ExecCounters& k) {
  const Layer& l = info.layer(i);
  for (const SourceSlots& s : info.sources[static_cast<size_t>(i)]) {
    const int64_t bytes = in[static_cast<size_t>(s.slots[0])]->numel() * info.elem_bytes;
    (s.source.external ? k.bytes_loaded_input : k.bytes_loaded_intermediate) += bytes;
  }
  k.bytes_loaded_weight += l.params * info.elem_bytes;
  k.flops += 2 * l.macs;
  const int64_t out_bytes = l.out.numel() * info.elem_bytes;
  (i == info.last() ? k.bytes_stored_output : k.bytes_stored_intermediate) += out_bytes;
}

// An intermediate is dead once its last in-group reader (layer i) ran, unless it is a graph
// output.
void release_dead_inputs(const GroupInfo& info, int i, std::vector<Tensor>& outs) {
  for (const Source& s : info.slot_source[static_cast<size_t>(i)]) {
    if (s.external || info.graph->is_output(info.layer(s.index).id))
      continue;
    const auto& readers = info.consumers[static_cast<size_t>(s.index)];
    if (!readers.empty() && readers.back().first == i)
      outs[static_cast<size_t>(s.index)] = Tensor();
  }
}

} // namespace

GroupResult run_layerwise(const StrategyContext& ctx) {
  const GroupInfo& info = ctx.info;
  GroupResult res;
  res.counters.bricks_per_layer.assign(static_cast<size_t>(info.size), 0);
  std::vector<Tensor> outs(static_cast<size_t>(info.size));
  for (int i = 0; i < info.size; ++i) {
    const Layer& l = info.layer(i);
    std::vector<const Tensor*> in;
    for (const Source& s : info.slot_source[static_cast<size_t>(i)])
      in.push_back(s.external ? ctx.inputs[static_cast<size_t>(s.index)]
                              : &outs[static_cast<size_t>(s.index)]);
    outs[static_cast<size_t>(i)] =
        run_whole_layer(*info.graph, l, in, ctx.weights.at(l.id), ctx.threads);
    count_layer(info, i, in, res.counters);
    release_dead_inputs(info, i, outs);
  }
  for (int i = 0; i + 1 < info.size; ++i)
    if (info.graph->is_output(info.layer(i).id))
      res.inner_outputs.emplace(info.layer(i).id, std::move(outs[static_cast<size_t>(i)]));
  res.output = std::move(outs.back());
  return res;
}

} // namespace brickdl::kernels::detail
