// Conv and linear layers through libxsmm's batch-reduce GEMM, the dispatch of compute_region, and
// whole-tensor execution (region_ops.h).
#include "kernels/cpu/region_ops.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "kernels/cpu/brgemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_ops.h"
#include "kernels/reference.h"

namespace brickdl::kernels::cpu {

namespace {

// Output channels per GEMM (m) and output pixels per GEMM (n) at most: the tile C (m × n) and
// one tap's panel of weights stay in L1 / L2.
constexpr int64_t kMaxM = kConvBlockM; // a panel of the packed weights (packed.h)
constexpr int64_t kMaxN = 128;

// Kernels of this thread by shape (dispatching through libxsmm costs a hash look-up and a lock;
// this one is a hash look-up of the thread's own).
const Brgemm& kernel(const BrgemmShape& s) {
  struct Hash {
    size_t operator()(const BrgemmShape& k) const {
      uint64_t h = 1469598103934665603ull;
      for (int64_t v : {int64_t{k.m}, int64_t{k.n}, int64_t{k.k}, int64_t{k.lda}, int64_t{k.ldb},
                        int64_t{k.ldc}, int64_t{k.accumulate}})
        h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };
  thread_local std::unordered_map<BrgemmShape, Brgemm, Hash> cache;
  const auto it = cache.find(s);
  if (it != cache.end())
    return it->second;
  return cache.emplace(s, Brgemm(s)).first->second;
}

struct Scratch {
  std::vector<float> staged, tile;
  BrgemmBatch batch;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

float* grow(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n)
    v.resize(static_cast<size_t>(n));
  return v.data();
}

// A run of input channels [c, c + k) inside one channel block: one batch item's k.
struct Segment {
  int64_t c = 0;
  int k = 0;
};

// The channels [c0, c1) split at block boundaries, grouped by k (each group one GEMM call).
std::vector<std::vector<Segment>> segments_by_k(int64_t c0, int64_t c1, int lanes) {
  std::vector<std::vector<Segment>> groups;
  for (int64_t c = c0; c < c1;) {
    const int64_t end = std::min(c1, (c / lanes + 1) * lanes);
    const Segment s{c, static_cast<int>(end - c)};
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const std::vector<Segment>& g) { return g[0].k == s.k; });
    if (it == groups.end())
      groups.push_back({s});
    else
      it->push_back(s);
    c = end;
  }
  return groups;
}

// The input box a conv's region `what` reads, unclipped (padding included), over the input
// channels of the groups `what` covers (low side widened to a whole block).
Region conv_input_box(const Layer& l, const Region& what, int64_t cin_g, int64_t cout_g,
                      int lanes) {
  Region box;
  for (size_t a = 0; a < 3; ++a) {
    const Window& w = l.window;
    box.lo[a] = what.lo[a] * w.stride[a] - w.pad[a];
    box.hi[a] =
        (what.hi[a] - 1) * w.stride[a] - w.pad[a] + int64_t{w.dilation[a]} * (w.kernel[a] - 1) + 1;
  }
  box.c0 = what.c0 / cout_g * cin_g / lanes * lanes;
  box.c1 = ((what.c1 - 1) / cout_g + 1) * cin_g;
  return box;
}

bool box_inside(const Region& box, const TensorShape& s, const Region& stored) {
  const int64_t ext[3] = {s.d, s.h, s.w};
  for (size_t a = 0; a < 3; ++a)
    if (box.lo[a] < 0 || box.hi[a] > ext[a])
      return false;
  return stored.contains(box);
}

// The view a conv reads: `in` itself when the box lies inside the tensor and the stored
// region, else a zero-padded copy of the box in this thread's scratch.
ConstBlockedView conv_source(const ConstBlockedView& in, const Region& box, const TensorShape& is,
                             Scratch& sc) {
  if (box_inside(box, is, in.stored))
    return in;
  const BlockedView staged{nullptr, box, in.lanes};
  float* buf = grow(sc.staged, staged.floats());
  std::fill_n(buf, staged.floats(), 0.0f);
  const BlockedView s{buf, box, in.lanes};
  copy_region(in, s, intersect(box, Region::whole(is)));
  return as_const(s);
}

// Pixels of one GEMM: output rows [y0, y0 + rows) of plane z, columns [x0, x0 + count). With
// `flat`, the rows are one run of n = (rows − 1)·width + count positions of the source (the
// columns between rows are computed and dropped).
struct Chunk {
  int64_t z, y0, rows, x0, count, n;
};

template <typename F> void for_chunks(const Region& what, bool flat, int64_t width, F f) {
  const int64_t ex = what.extent(2);
  for (int64_t z = what.lo[0]; z < what.hi[0]; ++z) {
    if (flat && ex <= kMaxN) {
      const int64_t rows = std::max<int64_t>(1, (kMaxN - ex) / width + 1);
      for (int64_t y = what.lo[1]; y < what.hi[1]; y += rows) {
        const int64_t r = std::min(rows, what.hi[1] - y);
        f(Chunk{z, y, r, what.lo[2], ex, (r - 1) * width + ex});
      }
      continue;
    }
    for (int64_t y = what.lo[1]; y < what.hi[1]; ++y)
      for (int64_t x = what.lo[2]; x < what.hi[2]; x += kMaxN) {
        const int64_t cnt = std::min(kMaxN, what.hi[2] - x);
        f(Chunk{z, y, 1, x, cnt, cnt});
      }
  }
}

// One conv group g, output channels [mo, mo + m), one chunk: the batch of every tap and input
// segment into the tile (one GEMM call per distinct k), then bias, activation and the store.
struct ConvCall {
  const Layer& l;
  const PackedLayer& p;
  const ConstBlockedView& src;
  const BlockedView& out;
  const Region& what;
  int64_t cin_g, cout_g, taps, g;
  bool flat;
};

void conv_chunk(const ConvCall& cc, const std::vector<std::vector<Segment>>& by_k, int64_t mo,
                int m, const Chunk& ch, Scratch& sc) {
  const Window& w = cc.l.window;
  const int L = cc.p.lanes;
  const int64_t ldb = cc.flat ? L : int64_t{L} * w.stride[2];
  float* tile = grow(sc.tile, ch.n * m);
  // The packed panel of output channels [m0, m0 + mb) of the group that holds mo.
  const int64_t m0 = cc.g * cc.cout_g + (mo - cc.g * cc.cout_g) / kMaxM * kMaxM;
  const int64_t mb = std::min(kMaxM, (cc.g + 1) * cc.cout_g - m0);
  const float* panel = cc.p.weight.get() + cc.g * cc.taps * cc.cin_g * cc.cout_g +
                       (m0 - cc.g * cc.cout_g) * cc.taps * cc.cin_g;
  bool first = true;
  for (const std::vector<Segment>& segs : by_k) {
    sc.batch.clear();
    int t = 0;
    for (int a = 0; a < w.kernel[0]; ++a)
      for (int b = 0; b < w.kernel[1]; ++b)
        for (int c = 0; c < w.kernel[2]; ++c, ++t) {
          const int64_t iz = ch.z * w.stride[0] - w.pad[0] + int64_t{a} * w.dilation[0];
          const int64_t iy = ch.y0 * w.stride[1] - w.pad[1] + int64_t{b} * w.dilation[1];
          const int64_t ix = ch.x0 * w.stride[2] - w.pad[2] + int64_t{c} * w.dilation[2];
          for (const Segment& s : segs)
            sc.batch.add(panel + (t * cc.cin_g + (s.c - cc.g * cc.cin_g)) * mb + (mo - m0),
                         cc.src.at(s.c / L, iz, iy, ix) + s.c % L);
        }
    const BrgemmShape shape{
        m,     static_cast<int>(ch.n), segs[0].k, static_cast<int>(mb), static_cast<int>(ldb), m,
        !first};
    kernel(shape)(sc.batch.a.data(), sc.batch.b.data(), tile, sc.batch.size());
    first = false;
  }
  const detail::VectorKernels& vk = detail::vector_kernels(L);
  vk.bias_act(tile, ch.n, m, m, cc.p.bias.empty() ? nullptr : cc.p.bias.data() + mo,
              detail::epilogue_of(cc.l));
  const int64_t row_step = cc.flat ? cc.src.stored.extent(2) : 0;
  for (int64_t r = 0; r < ch.rows; ++r)
    vk.store_row(tile + r * row_step * m, m, mo, m, cc.what.c0, cc.what.c1, cc.out, ch.z, ch.y0 + r,
                 ch.x0, ch.count);
}

// A 1×1, stride-1, ungrouped conv whose region covers whole channel blocks: each GEMM is one
// block of output channels (m = lanes) written straight into the blocked output (ldc = lanes:
// oneDNN's nChw16c kernel shape), over a run of pixels that is contiguous in both tensors (whole
// rows when the views are as wide as the region), its bias and activation applied in place.
bool direct_pointwise(const Layer& l, const Region& what, int lanes) {
  const Window& w = l.window;
  const bool pointwise = w.kernel == std::array<int, 3>{1, 1, 1} &&
                         w.stride == std::array<int, 3>{1, 1, 1} &&
                         w.pad == std::array<int, 3>{0, 0, 0} && l.groups == 1;
  return pointwise && what.c0 % lanes == 0 && (what.c1 % lanes == 0 || what.c1 == l.out.c) &&
         l.out.c % lanes == 0;
}

void conv_direct(const Graph& g, const PackedLayer& p, const ConstBlockedView& in,
                 const BlockedView& out, const Region& what) {
  const Layer& l = *p.layer;
  const int L = p.lanes;
  const int64_t cin = g.layer(l.inputs[0]).out.c, cout = l.out_channels;
  const auto by_k = segments_by_k(0, cin, L);
  Scratch& sc = scratch();
  // Rows run together when both views are exactly as wide as the region.
  const int64_t ex = what.extent(2);
  const bool rows =
      in.stored.extent(2) == ex && out.stored.extent(2) == ex && out.stored.lo[2] == what.lo[2];
  // Pixels per GEMM: the run's input (all its channels) stays in L2 across the output blocks.
  const int64_t max_n = std::clamp<int64_t>(32768 / std::max<int64_t>(cin, 1), 16, 256);
  const detail::VectorKernels& vk = detail::vector_kernels(L);
  const auto run = [&](int64_t z, int64_t y, int64_t x, int64_t n) {
    for (int64_t b = what.c0 / L; b * L < what.c1; ++b) {
      const int64_t m0 = b * L / kMaxM * kMaxM, mb = std::min(kMaxM, cout - m0);
      const float* panel = p.weight.get() + m0 * cin;
      float* c = out.at(b, z, y, x);
      bool first = true;
      for (const std::vector<Segment>& segs : by_k) {
        sc.batch.clear();
        for (const Segment& s : segs)
          sc.batch.add(panel + s.c * mb + (b * L - m0), in.at(s.c / L, z, y, x) + s.c % L);
        kernel({L, static_cast<int>(n), segs[0].k, static_cast<int>(mb), L, L, !first})(
            sc.batch.a.data(), sc.batch.b.data(), c, sc.batch.size());
        first = false;
      }
      vk.bias_act(c, n, L, L, p.bias.empty() ? nullptr : p.bias.data() + b * L,
                  detail::epilogue_of(l));
    }
  };
  for (int64_t z = what.lo[0]; z < what.hi[0]; ++z) {
    if (rows) {
      const int64_t total = what.extent(1) * ex;
      for (int64_t j = 0; j < total; j += max_n)
        run(z, what.lo[1] + j / ex, what.lo[2] + j % ex, std::min(max_n, total - j));
      continue;
    }
    for (int64_t y = what.lo[1]; y < what.hi[1]; ++y)
      for (int64_t x = what.lo[2]; x < what.hi[2]; x += max_n)
        run(z, y, x, std::min(max_n, what.hi[2] - x));
  }
}

void conv_gemm(const Graph& g, const PackedLayer& p, const ConstBlockedView& in,
               const BlockedView& out, const Region& what) {
  if (direct_pointwise(*p.layer, what, p.lanes)) {
    conv_direct(g, p, in, out, what);
    return;
  }
  const Layer& l = *p.layer;
  const TensorShape& is = g.layer(l.inputs[0]).out;
  const int64_t groups = l.groups, cin_g = is.c / groups, cout_g = l.out_channels / groups;
  const int64_t taps = int64_t{l.window.kernel[0]} * l.window.kernel[1] * l.window.kernel[2];
  Scratch& sc = scratch();
  const ConstBlockedView src =
      conv_source(in, conv_input_box(l, what, cin_g, cout_g, p.lanes), is, sc);
  // Rows run together when the columns dropped between them are few (a staged box's halo), not
  // when the source is much wider than the region (a brick read in place from a whole tensor).
  const int64_t width = src.stored.extent(2), ex = what.extent(2);
  const bool flat = l.window.stride[1] == 1 && l.window.stride[2] == 1 && 2 * (width - ex) <= ex;
  for (int64_t grp = what.c0 / cout_g; grp * cout_g < what.c1; ++grp) {
    const auto by_k = segments_by_k(grp * cin_g, (grp + 1) * cin_g, p.lanes);
    const ConvCall cc{l, p, src, out, what, cin_g, cout_g, taps, grp, flat};
    const int64_t o0 = std::max(what.c0, grp * cout_g);
    const int64_t o1 = std::min(what.c1, (grp + 1) * cout_g);
    for (int64_t mo = o0; mo < o1;) {
      // Up to the end of mo's panel of the packed weights.
      const int64_t panel_end = grp * cout_g + ((mo - grp * cout_g) / kMaxM + 1) * kMaxM;
      const int m = static_cast<int>(std::min(panel_end, o1) - mo);
      for_chunks(what, flat, width, [&](const Chunk& ch) { conv_chunk(cc, by_k, mo, m, ch, sc); });
      mo += m;
    }
  }
}

// A linear layer over every image of a flat input: m output features by n images per GEMM, the
// input features (k) in blocks of lanes; A is the packed [in][out] weight (`conv_panels`: a 1x1
// conv's panels of kConvBlockM outputs, packed.h), B the images (ldb: one image). A 1x1 conv on
// 1x1 images (a squeeze-excitation branch) runs here too: one GEMM over the batch, not one
// column per image.
void linear_gemm(const PackedLayer& p, const BlockedTensor& in, BlockedTensor& out, int threads,
                 bool conv_panels = false) {
  const Layer& l = *p.layer;
  const int L = p.lanes;
  const int64_t images = in.shape().n, features = in.shape().c, outs = l.out_channels;
  const auto by_k = segments_by_k(0, features, L);
  const int64_t mchunks = ceil_div(outs, kMaxM), nchunks = ceil_div(images, kMaxN);
  parallel_units(mchunks * nchunks, threads, [&](int64_t u, int) {
    const int64_t mo = u / nchunks * kMaxM, n0 = u % nchunks * kMaxN;
    const int m = static_cast<int>(std::min(kMaxM, outs - mo));
    const int n = static_cast<int>(std::min(kMaxN, images - n0));
    Scratch& sc = scratch();
    float* tile = grow(sc.tile, int64_t{n} * m);
    bool first = true;
    for (const std::vector<Segment>& segs : by_k) {
      sc.batch.clear();
      const int64_t mb = std::min(kMaxM, outs - mo); // with conv_panels, mo starts a panel
      for (const Segment& s : segs)
        sc.batch.add(conv_panels ? p.weight.get() + mo * features + s.c * mb
                                 : p.weight.get() + s.c * outs + mo,
                     in.image_data(n0) + s.c);
      const int lda = static_cast<int>(conv_panels ? mb : outs);
      const BrgemmShape shape{m, n, segs[0].k, lda, static_cast<int>(in.image_floats()), m, !first};
      kernel(shape)(sc.batch.a.data(), sc.batch.b.data(), tile, sc.batch.size());
      first = false;
    }
    detail::vector_kernels(L).bias_act(tile, n, m, m, p.bias.empty() ? nullptr : p.bias.data() + mo,
                                       detail::epilogue_of(l));
    for (int j = 0; j < n; ++j)
      std::copy_n(tile + int64_t{j} * m, m, out.image_data(n0 + j) + mo);
  });
}

// The layer through the reference ops on dense copies of its inputs.
BlockedTensor run_reference(const PackedLayer& p, const std::vector<const BlockedTensor*>& in) {
  std::vector<Tensor> dense;
  dense.reserve(in.size());
  for (const BlockedTensor* t : in)
    dense.push_back(from_blocked(*t));
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : dense)
    ptrs.push_back(&t);
  return to_blocked(run_layer(*p.layer, ptrs, *p.raw), p.lanes);
}

// Units of a whole layer: (image, channel range, slab of the outermost non-trivial spatial
// axis), about four per thread; channel ranges are whole panels of packed weights and as wide as
// the units allow, so a conv reuses its staged input across many output channels.
void run_brickable(const Graph& g, const PackedLayer& p,
                   const std::vector<const BlockedTensor*>& in, BlockedTensor& y, int threads) {
  const Layer& l = *p.layer;
  const int L = p.lanes;
  const int64_t want = 4 * int64_t{threads};
  // Channel ranges of whole weight panels (kConvBlockM) as wide as the units allow; slabs first
  // split the rest, so each GEMM keeps a full panel of output channels.
  // A GEMM conv reuses its staged input over the channels, other layers do not: they split by
  // blocks of lanes.
  const bool gemm = l.op == OpKind::kConv && !p.depthwise;
  const int64_t unit = gemm ? kConvBlockM : L;
  const int64_t cblock = std::min(
      round_up(l.out.c, L),
      round_up(std::max<int64_t>(unit, l.out.c * l.out.n / std::max<int64_t>(want, 1)), unit));
  const int64_t cblocks = ceil_div(l.out.c, cblock);
  const int axis = l.out.d > 1 ? 0 : l.out.h > 1 ? 1 : 2;
  const int64_t extent = l.out.dim(axis);
  const int64_t slabs = std::min(extent, std::max<int64_t>(1, ceil_div(want, l.out.n * cblocks)));
  const int64_t slab = ceil_div(extent, slabs);
  parallel_units(l.out.n * cblocks * slabs, threads, [&](int64_t u, int) {
    const int64_t n = u / (cblocks * slabs), c = (u / slabs) % cblocks, s = u % slabs;
    Region what = Region::whole(l.out);
    what.c0 = c * cblock;
    what.c1 = std::min(l.out.c, (c + 1) * cblock);
    what.lo[static_cast<size_t>(axis)] = s * slab;
    what.hi[static_cast<size_t>(axis)] = std::min(extent, (s + 1) * slab);
    if (what.empty())
      return;
    std::vector<ConstBlockedView> views;
    for (const BlockedTensor* t : in)
      views.push_back(t->image(n));
    compute_region(g, p, views, y.image(n), what);
  });
}

} // namespace

void compute_region(const Graph& g, const PackedLayer& p, std::span<const ConstBlockedView> inputs,
                    const BlockedView& out, const Region& what) {
  if (what.empty())
    return;
  const Layer& l = *p.layer;
  BRICKDL_CHECK(traits(l.op).brickable,
                "layer " << l.name << " (" << op_name(l.op) << ") has no region kernel");
  BRICKDL_CHECK(inputs.size() == l.inputs.size(), "layer " << l.name << ": inputs");
  BRICKDL_CHECK(out.stored.contains(what) && out.stored.c0 % p.lanes == 0 && out.lanes == p.lanes,
                "layer " << l.name << ": output view " << out.stored.str() << " lacks "
                         << what.str());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Region need = input_need(g, l, static_cast<int>(i), what);
    BRICKDL_CHECK(need.empty() || (inputs[i].data && inputs[i].stored.contains(need) &&
                                   inputs[i].stored.c0 % p.lanes == 0),
                  "layer " << l.name << ": input " << i << " view " << inputs[i].stored.str()
                           << " lacks " << need.str());
  }
  if (l.op == OpKind::kConv && !p.depthwise) {
    conv_gemm(g, p, inputs[0], out, what);
    return;
  }
  detail::vector_kernels(p.lanes).compute(g, p, inputs, out, what);
}

std::string whole_layer_fallback(const Graph& g, const Layer& l) {
  if (traits(l.op).brickable)
    return "";
  switch (l.op) {
  case OpKind::kGlobalAvgPool: return "";
  case OpKind::kLinear:
  case OpKind::kFlatten:
    if (g.layer(l.inputs[0]).out.spatial() == 1)
      return "";
    return std::string(op_name(l.op)) + " of a tensor with spatial extent runs on the reference";
  default: return std::string(op_name(l.op)) + " has no fast CPU kernel: it runs on the reference";
  }
}

BlockedTensor run_whole_layer(const Graph& g, const PackedLayer& p,
                              const std::vector<const BlockedTensor*>& in, int threads,
                              std::string* fallback) {
  const Layer& l = *p.layer;
  const std::string why = whole_layer_fallback(g, l);
  if (!why.empty()) {
    if (fallback)
      *fallback = why;
    return run_reference(p, in);
  }
  BlockedTensor y(l.out, p.lanes);
  switch (l.op) {
  case OpKind::kGlobalAvgPool:
    parallel_units(l.out.n, threads, [&](int64_t n, int) {
      detail::vector_kernels(p.lanes).global_avg_pool(*in[0], y, n);
    });
    break;
  case OpKind::kLinear: linear_gemm(p, *in[0], y, threads); break;
  case OpKind::kConv:
    if (l.out.spatial() == 1 && l.groups == 1 && l.window.kernel == std::array<int, 3>{1, 1, 1} &&
        l.window.stride == std::array<int, 3>{1, 1, 1} &&
        l.window.pad == std::array<int, 3>{0, 0, 0})
      linear_gemm(p, *in[0], y, threads, true);
    else
      run_brickable(g, p, in, y, threads);
    break;
  case OpKind::kFlatten: std::copy_n(in[0]->data(), in[0]->floats(), y.data()); break;
  default: run_brickable(g, p, in, y, threads); break;
  }
  return y;
}

} // namespace brickdl::kernels::cpu
