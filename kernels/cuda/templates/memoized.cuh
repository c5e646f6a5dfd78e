#pragma once
// Memoized bricks: one thread block per output brick of the group's last layer; every brick
// of an intermediate layer is computed once, by whichever block needs it first, and kept in
// global memory (KernelArgs::memo, meant to stay in L2) for its other consumers.
//
// Each intermediate brick has a state flag; with e = KernelArgs::epoch (one per launch, so
// flags never need clearing):  v <= 2e free  ──atomicCAS──►  2e+1 claimed  ──release──►  2e+2
// done. A block works through an explicit stack (the recursion of the paper, made iterative):
//
//   top brick ── next dependency (producer brick its region touches)
//        ├─ done     → use it (acquire: flag read, then fence)                      hit
//        ├─ free     → claim it (CAS) and push it: compute its dependencies first   claim
//        └─ claimed  → another block computes it: wait until done                  conflict
//   all dependencies done → stage inputs, compute the brick, store it, fence, publish, pop.
//
// Batch blocks (G.nb images per unit): a brick's flag, claim and stack entry stand for the
// brick in every image of its batch block (BrickCoord::n is the batch block); its data stay
// per image in the memo buffer (brick_linear with the image). A brick is computed for all
// the block's images at once, each image's staging at j * G.smem_image in shared memory, a
// conv as one box over all the images (its weights stream through the block once).
//
// Deadlock freedom: a block only waits for a brick of a layer earlier than every brick it
// holds claimed (its stack descends layer by layer), so waits cannot form a cycle; a wait
// longer than KernelArgs::spin_limit sets KernelArgs::error and gives up (timeout status).
#include "padded.cuh"

namespace brickdl {
namespace dev {

enum MemoAction : int { kMemoDescend = 0, kMemoCompute = 1 };

BRICKDL_DEVICE BrickCoord decode_brick(const LayerDesc& L, int lin) {
  BrickCoord c;
  c.b[2] = lin % L.nblk[3];
  lin /= L.nblk[3];
  c.b[1] = lin % L.nblk[2];
  lin /= L.nblk[2];
  c.b[0] = lin % L.nblk[1];
  lin /= L.nblk[1];
  c.cb = lin % L.nblk[0];
  c.n = lin / L.nblk[0];
  return c;
}

// The producer bricks (of layer P, source s of L) that brick `q` of layer L reads: a box in
// brick coordinates (c, d, h, w), empty when the window only touches padding.
struct DepBox {
  int lo[4];
  int cnt[4];
  int total;
};

BRICKDL_DEVICE DepBox dependency_box(const LayerDesc& L, const LayerDesc& P, const BrickCoord& q) {
  DepBox r;
  const int c0 = q.cb * L.cb;
  const int c1 = imin(c0 + L.cb, L.out.c);
  int ilo = c0, ihi = c1;
  if (L.op != kOpEltwise)
    input_channels(L, c0, c1, &ilo, &ihi);
  r.lo[0] = ilo / P.cb;
  r.cnt[0] = (ihi - 1) / P.cb - r.lo[0] + 1;
  const int odim[3] = {L.out.d, L.out.h, L.out.w};
  const int idim[3] = {P.out.d, P.out.h, P.out.w};
  r.total = r.cnt[0];
  for (int a = 0; a < 3; ++a) {
    const int first = q.b[a] * L.bext[a];
    const int last = imin(first + L.bext[a], odim[a]) - 1;
    int lo = first, hi = last;
    if (L.op != kOpEltwise) {
      lo = imax(first * L.s[a] - L.p[a], 0);
      hi = imin(last * L.s[a] - L.p[a] + L.dl[a] * (L.k[a] - 1), idim[a] - 1);
    }
    if (lo > hi) {
      r.lo[a + 1] = 0;
      r.cnt[a + 1] = 0;
    } else {
      r.lo[a + 1] = lo / P.bext[a];
      r.cnt[a + 1] = hi / P.bext[a] - r.lo[a + 1] + 1;
    }
    r.total *= r.cnt[a + 1];
  }
  return r;
}

// One lookup of a producer brick's flag: true when this block claimed it (it must compute
// it), false once it is done (a hit, or a conflict waited for). Each lookup counts once: a
// claim, a hit, or a conflict (found claimed by another block, or lost the claim race to one).
BRICKDL_DEVICE bool memo_lookup(const KernelArgs& a, int* flag, unsigned long long* stats,
                                int claimed, int done) {
  bool contended = false;
  for (;;) {
    const int v = atomic_acquire_load(flag);
    if (v == done) {
      ++stats[contended ? kStatConflicts : kStatHits];
      return false;
    }
    if (v == claimed) {
      ++stats[kStatConflicts];
      const long long start = clock_ticks();
      while (atomic_acquire_load(flag) != done) {
        ++stats[kStatWaits];
        if (clock_ticks() - start > a.spin_limit || atomic_acquire_load(a.error) != 0) {
          atomic_store_int(a.error, kErrorTimeout);
          break;
        }
        spin_pause();
      }
      return false;
    }
    if (atomic_cas(flag, v, claimed) == v) {
      ++stats[kStatClaims];
      return true;
    }
    contended = true; // lost the claim race: look at the flag again
  }
}

// Thread 0 only: advances the top of the stack to its next missing dependency (claimed and
// pushed: kMemoDescend) or finds all present (kMemoCompute).
BRICKDL_DEVICE int memo_next(const GroupDesc& G, const KernelArgs& a, int* stk_layer,
                             int* stk_brick, int* stk_cursor, int* top, unsigned long long* stats,
                             int claimed, int done) {
  const int t = *top;
  const LayerDesc& L = G.layers[stk_layer[t]];
  const BrickCoord q = decode_brick(L, stk_brick[t]);
  int base = 0;
  for (int s = 0; s < L.num_src; ++s) {
    if (L.src_kind[s] != kSrcLayer)
      continue;
    const int p = L.src_index[s];
    const LayerDesc& P = G.layers[p];
    const DepBox r = dependency_box(L, P, q);
    for (int d = imax(stk_cursor[t] - base, 0); d < r.total; ++d) {
      int rem = d;
      const int bx = r.lo[3] + rem % r.cnt[3];
      rem /= r.cnt[3];
      const int by = r.lo[2] + rem % r.cnt[2];
      rem /= r.cnt[2];
      const int bz = r.lo[1] + rem % r.cnt[1];
      const int cb = r.lo[0] + rem / r.cnt[1];
      const int lin = brick_linear(P, q.n, cb, bz, by, bx);
      int* flag = a.flags + P.flag_offset + lin;
      if (memo_lookup(a, flag, stats, claimed, done)) {
        stk_cursor[t] = base + d + 1;
        *top = t + 1;
        stk_layer[t + 1] = p;
        stk_brick[t + 1] = lin;
        stk_cursor[t + 1] = 0;
        return kMemoDescend;
      }
    }
    base += r.total;
  }
  stk_cursor[t] = base;
  return kMemoCompute;
}

// Where brick `lin` (coordinates q) of layer l goes: the output tensor for the last layer,
// else its memoized brick.
BRICKDL_DEVICE OutTarget memo_target(const GroupDesc& G, const LayerDesc& L, int l,
                                     const KernelArgs& a, const BrickCoord& q, int n) {
  OutTarget out = {};
  if (l == G.num_layers - 1) {
    out.to_tensor = 1;
    out.t = a.out;
    out.dims = L.out;
    out.n = n;
  } else {
    out.to_tensor = 0;
    out.buf = memo_brick(L, a.memo, brick_linear(L, n, q.cb, q.b[0], q.b[1], q.b[2]), q.cb, q.b[0],
                         q.b[1], q.b[2]);
  }
  return out;
}

// Operand s of an elementwise brick q: an external tensor, or the same brick of the producer
// (same shape and channel blocking: codegen checks).
BRICKDL_DEVICE InSource memo_operand(const GroupDesc& G, const LayerDesc& L, int s,
                                     const KernelArgs& a, const BrickCoord& q, int n) {
  InSource src;
  if (L.src_kind[s] == kSrcExternal) {
    const int e = L.src_index[s];
    src.from_tensor = 1;
    src.t.p = a.ext[e];
    src.t.dims = G.ext[e].dims;
    src.t.n = n;
  } else {
    const LayerDesc& P = G.layers[L.src_index[s]];
    src.from_tensor = 0;
    src.buf = memo_brick(P, a.memo, brick_linear(P, n, q.cb, q.b[0], q.b[1], q.b[2]), q.cb, q.b[0],
                         q.b[1], q.b[2]);
  }
  return src;
}

// Stages channels [lo, hi) of window layer L's input over `in`'s box (its channel 0 is lo).
// Stages input 0 of window layer L, channels [lo, hi), for image n: an external tensor with
// asynchronous copies when `async` (the caller commits and waits), memo bricks (written by
// other blocks of this launch) with coherent loads.
BRICKDL_DEVICE void memo_stage(const GroupDesc& G, const LayerDesc& L, const KernelArgs& a, int n,
                               RegionBuf in, int lo, int hi, bool async) {
  in.c0 = lo;
  if (L.src_kind[0] == kSrcExternal) {
    TensorRef src;
    src.p = a.ext[L.src_index[0]];
    src.dims = G.ext[L.src_index[0]].dims;
    src.n = n;
    if (async) {
      stage_from_tensor_async(in, src, lo, hi);
    } else {
      stage_from_tensor(in, src, lo, hi);
    }
  } else {
    stage_from_bricks(in, G.layers[L.src_index[0]], a.memo, n, lo, hi);
  }
}

// A conv (groups 1) whose brick reads more than stream_c input channels: stage a chunk of
// every image, one ConvPass accumulating in shared memory (acc_smem: cb x bext per image),
// repeat; the last pass stores.
BRICKDL_DEVICE void memo_streamed_conv(const GroupDesc& G, const LayerDesc& L, int l,
                                       const KernelArgs& a, int n0, int images, const RegionBuf& in,
                                       const OutTarget& out, const int* bo, const int* ro,
                                       const int* re, int c0, int c1, int ilo, int ihi) {
  streamed_conv_passes(L, a.weight[l], a.bias[l], in,
                       accumulator(block_smem() + L.acc_smem, bo, L.bext, c0, G.smem_image), out,
                       ro, re, c0, c1, ilo, ihi, images, false,
                       [&](const RegionBuf& chunk, int lo, int hi) {
                         for (int j = 0; j < images; ++j)
                           memo_stage(G, L, a, n0 + j, image_buf(chunk, j), lo, hi, true);
                       });
}

// A window op's brick (origin bo, the part ro / re inside the tensor, channels [c0, c1)) for
// the `images` images from n0: stages each image's input region (halo included) at its own
// place in shared memory, then computes them (a conv: one box over all the images).
BRICKDL_DEVICE void memo_window(const GroupDesc& G, const LayerDesc& L, int l, const KernelArgs& a,
                                const BrickCoord& q, int n0, int images, const int* bo,
                                const int* ro, const int* re, int c0, int c1) {
  RegionBuf in;
  for (int ax = 0; ax < 3; ++ax) {
    in.o[ax] = bo[ax] * L.s[ax] - L.p[ax];
    in.e[ax] = (L.bext[ax] - 1) * L.s[ax] + L.dl[ax] * (L.k[ax] - 1) + 1;
  }
  int ilo = 0, ihi = 0;
  input_channels(L, c0, c1, &ilo, &ihi);
  in.c0 = ilo;
  in.coherent = 0;
  in.cslice = 0;
  in.cbase = 0;
  in.p = block_smem() + L.stage_smem;
  in.istride = G.smem_image;
  const OutTarget out = memo_target(G, L, l, a, q, n0);
#if BRICKDL_STREAMED
  if (L.stream_c > 0) {
    memo_streamed_conv(G, L, l, a, n0, images, in, out, bo, ro, re, c0, c1, ilo, ihi);
    return;
  }
#endif
  for (int j = 0; j < images; ++j)
    memo_stage(G, L, a, n0 + j, image_buf(in, j), ilo, ihi, false);
  BRICKDL_SYNC();
  if (L.op == kOpConv) {
    conv_layer_box(L, a.weight[l], a.bias[l], in, out, ro, re, c0, c1, whole_pass(L), images);
  } else {
    for (int j = 0; j < images; ++j)
      pool_box(L, image_buf(in, j), image_out(out, j), ro, re, c0, c1);
  }
}

// All threads: computes brick `lin` of layer L (group layer l) for every image of its batch
// block (its dependencies are done).
BRICKDL_DEVICE void memo_compute(const GroupDesc& G, const LayerDesc& L, int l, const KernelArgs& a,
                                 int lin) {
  const BrickCoord q = decode_brick(L, lin);
  const int n0 = q.n * G.nb;
  // The unit's images (the last batch block may hold fewer); a constant 1 without batch
  // blocks, so that the per-image loops fold away (registers).
  const int images = G.nb == 1 ? 1 : imin(G.nb, G.batch - n0);
  const int dim[3] = {L.out.d, L.out.h, L.out.w};
  int bo[3], ro[3], re[3];
  for (int ax = 0; ax < 3; ++ax) {
    bo[ax] = q.b[ax] * L.bext[ax];
    ro[ax] = bo[ax];
    re[ax] = imin(L.bext[ax], dim[ax] - bo[ax]);
  }
  const int c0 = q.cb * L.cb;
  const int c1 = imin(c0 + L.cb, L.out.c);
  if (L.op != kOpEltwise) {
    memo_window(G, L, l, a, q, n0, images, bo, ro, re, c0, c1);
    return;
  }
  for (int j = 0; j < images; ++j) {
    InSource src[kMaxSources];
    for (int s = 0; s < kMaxSources; ++s) {
      if (s >= L.num_src)
        break;
      src[s] = memo_operand(G, L, s, a, q, n0 + j);
    }
    eltwise_box(L, a.weight[l], a.bias[l], src, memo_target(G, L, l, a, q, n0 + j), ro, re, c0, c1);
  }
}

BRICKDL_DEVICE void memo_compute_layer(const GroupDesc& G, const KernelArgs& a, int layer,
                                       int lin) {
  BRICKDL_UNROLL
  for (int l = 0; l < kMaxLayers; ++l) {
    if (l >= G.num_layers)
      break;
    if (l == layer)
      memo_compute(G, G.layers[l], l, a, lin);
  }
}

// The brick of the last layer that unit `unit` owns (decode_unit: the units' order).
BRICKDL_DEVICE int unit_brick(const GroupDesc& G, int unit) {
  const LayerDesc& L = G.layers[G.num_layers - 1];
  const BrickCoord q = decode_unit(L.nblk, unit);
  return brick_linear(L, q.n, q.cb, q.b[0], q.b[1], q.b[2]);
}

// One unit: the last layer's brick `lin` (unit_brick), its dependencies claimed on the way.
BRICKDL_DEVICE void memoized_block(const GroupDesc& G, const KernelArgs& a, int lin) {
  BRICKDL_SHARED int s_layer[kMaxLayers];
  BRICKDL_SHARED int s_brick[kMaxLayers];
  BRICKDL_SHARED int s_cursor[kMaxLayers];
  BRICKDL_SHARED int s_top;
  BRICKDL_SHARED int s_action;
  BRICKDL_SHARED unsigned long long s_stats[kNumStats];
  const int claimed = 2 * a.epoch + 1;
  const int done = claimed + 1;
  BRICKDL_FOR_EACH_THREAD(t) {
    if (t == 0) {
      s_top = 0;
      s_layer[0] = G.num_layers - 1;
      s_brick[0] = lin; // the unit of work is a brick of the last layer, owned outright
      s_cursor[0] = 0;
      for (int i = 0; i < kNumStats; ++i)
        s_stats[i] = 0;
    }
  }
  BRICKDL_SYNC();
  for (;;) {
    BRICKDL_FOR_EACH_THREAD(t) {
      if (t == 0)
        s_action = memo_next(G, a, s_layer, s_brick, s_cursor, &s_top, s_stats, claimed, done);
    }
    BRICKDL_SYNC();
    const int action = s_action;
    const int top = s_top;
    const int layer = s_layer[top];
    const int lin = s_brick[top];
    BRICKDL_SYNC();
    if (action == kMemoDescend)
      continue;
    memo_compute_layer(G, a, layer, lin);
    // Release: every thread's stores are fenced before thread 0 publishes the brick.
    fence(); // outside a thread loop: every device thread runs it
    BRICKDL_SYNC();
    BRICKDL_FOR_EACH_THREAD(t) {
      if (t == 0) {
        if (layer != G.num_layers - 1)
          atomic_release_store(a.flags + G.layers[layer].flag_offset + lin, done);
        ++s_stats[kStatBricks];
        s_top = top - 1;
      }
    }
    BRICKDL_SYNC();
    if (top == 0)
      break;
  }
  BRICKDL_FOR_EACH_THREAD(t) {
    if (t == 0 && a.stats)
      for (int i = 0; i < kNumStats; ++i)
        atomic_add(a.stats + i, s_stats[i]);
  }
  BRICKDL_SYNC(); // the persistent loop's next unit reuses the shared stack
}

// A persistent memoized grid: block b of `grid` takes units b, b + grid, b + 2·grid, ... in
// order, so the units in flight are always a window of consecutive units and the live memo
// bricks are those of about one row of units (the model's live footprint). Claims are only
// ever held by running blocks and released within their unit, so a block waits only on a
// brick a resident block is computing.
BRICKDL_DEVICE void memoized_grid(const GroupDesc& G, const KernelArgs& a, int block, int grid) {
  const LayerDesc& L = G.layers[G.num_layers - 1];
  const int units = (G.batch + G.nb - 1) / G.nb * L.nblk[0] * L.nblk[1] * L.nblk[2] * L.nblk[3];
  for (int u = block; u < units; u += grid)
    memoized_block(G, a, unit_brick(G, u));
}

} // namespace dev
} // namespace brickdl
