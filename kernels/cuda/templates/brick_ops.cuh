#pragma once
// Block-level building blocks shared by the padded, memoized and layer-by-layer kernels:
// staging a region of a tensor into shared memory, and computing one layer (conv, pool,
// elementwise) over a box of its output. Every function is called by all threads of a block
// and is one phase (no barrier inside); the caller places BRICKDL_SYNC() between phases.
//
// Semantics follow PyTorch (and the CPU reference): zero padding for convolutions, -inf for
// max pooling, avg pooling with count_include_pad, floor or ceil output sizes decided by the
// graph. A conv has a folded batch-norm bias when has_bias, then its activation.
#include "prelude.cuh"

namespace brickdl {
namespace dev {

// A box of one tensor's channels [c0, ...) held as [c][d][h][w] with extents e (shared
// memory, or one memoized brick in global memory when `coherent`: then p and istride are in
// elements of the global storage type, gload_coherent / gstore_coherent). With batch blocks, the
// same box of the unit's image j is at p + j · istride. In a cluster kernel a box in shared
// memory is split by channels over the ranks (cslice > 0): rank r holds channels
// [cbase + r · cslice, cbase + (r + 1) · cslice) at the same offset p in its own shared
// memory, c0 is this rank's first channel, and channel_plane reaches the others.
struct RegionBuf {
  float* p;
  int o[3];
  int e[3];
  int c0;
  int coherent;
  int istride;
  int cslice;
  int cbase;
};

// The same box of the unit's image j.
BRICKDL_DEVICE RegionBuf image_buf(RegionBuf b, int j) {
  const long long off = (long long)j * b.istride;
  b.p = b.coherent ? goffset(b.p, off) : b.p + off;
  return b;
}

BRICKDL_DEVICE int region_index(const RegionBuf& b, int c, int z, int y, int x) {
  return (((c - b.c0) * b.e[0] + (z - b.o[0])) * b.e[1] + (y - b.o[1])) * b.e[2] + (x - b.o[2]);
}

// The first element of channel c's box (`plane` = e[0] · e[1] · e[2] floats): in b's own
// buffer, or for a box split over a cluster, in the buffer of the rank that holds c
// (distributed shared memory). Only window layers read other ranks' channels.
BRICKDL_DEVICE const float* channel_plane(const RegionBuf& b, int c, int plane) {
#if BRICKDL_CLUSTER
  if (b.cslice > 0) {
    const int r = (c - b.cbase) / b.cslice;
    return cluster_peer(b.p, r) + (c - b.cbase - r * b.cslice) * plane;
  }
#endif
  return b.p + (c - b.c0) * plane;
}

// A barrier of the block, or of the whole cluster in a cluster kernel (whose ranks read each
// other's shared memory).
BRICKDL_DEVICE void block_sync(bool cluster) {
#if BRICKDL_CLUSTER
  if (cluster) {
    cluster_sync();
    return;
  }
#endif
  BRICKDL_SYNC();
}

// An NCDHW tensor, sample n.
struct TensorRef {
  const float* p;
  Dims dims;
  int n;
};

BRICKDL_DEVICE long long tensor_index(const Dims& d, int n, int c, int z, int y, int x) {
  return ((((long long)n * d.c + c) * d.d + z) * d.h + y) * (long long)d.w + x;
}

BRICKDL_DEVICE bool inside(const Dims& d, int z, int y, int x) {
  return z >= 0 && z < d.d && y >= 0 && y < d.h && x >= 0 && x < d.w;
}

// Where a layer's results go: a region buffer, or the NCDHW output tensor.
struct OutTarget {
  int to_tensor;
  RegionBuf buf;
  float* t;
  Dims dims;
  int n;
};

// The target of the unit's image j: sample n + j of the tensor, or image j's buffer.
BRICKDL_DEVICE OutTarget image_out(OutTarget o, int j) {
  if (o.to_tensor) {
    o.n += j;
  } else {
    o.buf = image_buf(o.buf, j);
  }
  return o;
}

BRICKDL_DEVICE void store_out(const OutTarget& o, int c, int z, int y, int x, float v) {
  if (o.to_tensor) {
    gstore(o.t, tensor_index(o.dims, o.n, c, z, y, x), v);
  } else if (o.buf.coherent) {
    gstore_coherent(o.buf.p, region_index(o.buf, c, z, y, x), v);
  } else {
    o.buf.p[region_index(o.buf, c, z, y, x)] = v;
  }
}

// An elementwise operand: a region buffer or an NCDHW tensor.
struct InSource {
  int from_tensor;
  RegionBuf buf;
  TensorRef t;
};

// A tensor operand broadcast along an axis (extent 1 there: core/graph.h broadcast_axes) is
// read at 0 on it; an operand from a region buffer never is (codegen: its producer would be in
// the group, which core/group.h brick_blocker refuses).
BRICKDL_DEVICE float fetch(const InSource& s, int c, int z, int y, int x) {
  if (s.from_tensor) {
    const Dims& d = s.t.dims;
    return gload(s.t.p, tensor_index(d, s.t.n, d.c == 1 ? 0 : c, d.d == 1 ? 0 : z, d.h == 1 ? 0 : y,
                                     d.w == 1 ? 0 : x));
  }
  const int i = region_index(s.buf, c, z, y, x);
  return s.buf.coherent ? gload_coherent(s.buf.p, i) : s.buf.p[i];
}

// ---- memoized brick addressing ------------------------------------------------------------

// Linear index (including the sample) of brick (n, cb, bz, by, bx) of a bricked layer.
BRICKDL_DEVICE int brick_linear(const LayerDesc& L, int n, int cb, int bz, int by, int bx) {
  return (((n * L.nblk[0] + cb) * L.nblk[1] + bz) * L.nblk[2] + by) * L.nblk[3] + bx;
}

// The region buffer of one memoized brick of layer P (global memory); the same brick of the
// next image is one sample's bricks further (brick_linear: the sample outermost).
BRICKDL_DEVICE RegionBuf memo_brick(const LayerDesc& P, float* memo, int lin, int cb, int bz,
                                    int by, int bx) {
  RegionBuf b;
  b.p = goffset(memo, P.memo_offset + (long long)lin * P.brick_stride);
  b.istride = P.nblk[0] * P.nblk[1] * P.nblk[2] * P.nblk[3] * P.brick_stride;
  b.o[0] = bz * P.bext[0];
  b.o[1] = by * P.bext[1];
  b.o[2] = bx * P.bext[2];
  b.e[0] = P.bext[0];
  b.e[1] = P.bext[1];
  b.e[2] = P.bext[2];
  b.c0 = cb * P.cb;
  b.coherent = 1;
  b.cslice = 0;
  b.cbase = 0;
  return b;
}

// ---- staging ------------------------------------------------------------------------------

// Every element of dst's box (shared memory) for channels [c0, c1): put(&element, c, z, y, x).
// One traversal for every kind of source and copy.
template <class Put>
BRICKDL_DEVICE void for_each_staged(const RegionBuf& dst, int c0, int c1, const Put& put) {
  const int plane = dst.e[1] * dst.e[2];
  const int vol = dst.e[0] * plane;
  const int total = (c1 - c0) * vol;
  BRICKDL_FOR_EACH_THREAD(t) {
    for (int i = t; i < total; i += BRICKDL_NUM_THREADS()) {
      const int c = c0 + i / vol;
      const int r = i % vol;
      const int z = dst.o[0] + r / plane;
      const int y = dst.o[1] + (r % plane) / dst.e[2];
      const int x = dst.o[2] + r % dst.e[2];
      put(dst.p + region_index(dst, c, z, y, x), c, z, y, x);
    }
  }
}

// dst (shared memory) <- channels [c0, c1) over dst's box, each value from load(c, z, y, x),
// which returns 0 outside the source tensor.
template <class Load>
BRICKDL_DEVICE void stage_region(const RegionBuf& dst, int c0, int c1, const Load& load) {
  for_each_staged(dst, c0, c1,
                  [&](float* d, int c, int z, int y, int x) { *d = load(c, z, y, x); });
}

// dst (shared memory) <- channels [c0, c1) of an NCDHW tensor over dst's box; 0 outside.
BRICKDL_DEVICE void stage_from_tensor(const RegionBuf& dst, const TensorRef& src, int c0, int c1) {
  stage_region(dst, c0, c1, [&](int c, int z, int y, int x) {
    return inside(src.dims, z, y, x) ? gload(src.p, tensor_index(src.dims, src.n, c, z, y, x))
                                     : 0.f;
  });
}

// As stage_from_tensor with asynchronous copies (cp_async_f32): the caller commits, and the
// values land at its cp_async_wait_all() and the barrier after it. A 16-bit tensor is
// converted on the way, so it is loaded and stored at once.
BRICKDL_DEVICE void stage_from_tensor_async(const RegionBuf& dst, const TensorRef& src, int c0,
                                            int c1) {
  if (storage() != kStorageF32) {
    stage_from_tensor(dst, src, c0, c1);
    return;
  }
  for_each_staged(dst, c0, c1, [&](float* d, int c, int z, int y, int x) {
    const bool in = inside(src.dims, z, y, x);
    cp_async_f32(d, in ? src.p + tensor_index(src.dims, src.n, c, z, y, x) : src.p, in);
  });
}

// dst (shared memory) <- channels [c0, c1) of memoized layer P (shape P.out) over dst's box.
BRICKDL_DEVICE void stage_from_bricks(const RegionBuf& dst, const LayerDesc& P, const float* memo,
                                      int n, int c0, int c1) {
  stage_region(dst, c0, c1, [&](int c, int z, int y, int x) {
    if (!inside(P.out, z, y, x))
      return 0.f;
    const int lin = brick_linear(P, n, c / P.cb, z / P.bext[0], y / P.bext[1], x / P.bext[2]);
    const int off =
        (((c % P.cb) * P.bext[0] + z % P.bext[0]) * P.bext[1] + y % P.bext[1]) * P.bext[2] +
        x % P.bext[2];
    return gload_coherent(memo, P.memo_offset + (long long)lin * P.brick_stride + off);
  });
}

// ---- layers -------------------------------------------------------------------------------

// Whether the kernel source contains the streamed-input passes (ConvPass): codegen defines
// BRICKDL_STREAMED 0 when no layer of the plan streams its input, so NVRTC never sees them
// (dead code inlined into every layer still costs registers and stack before it folds away:
// the 4-conv ResNet-50 block with its add, padded 8x8, tf32, sm_90: 101 -> 203 registers and
// a 160-byte stack frame). Under emulation it is always there.
#if !defined(BRICKDL_STREAMED)
#define BRICKDL_STREAMED 1
#endif

// One pass of a conv over input channels [ci_lo, ci_hi) of each output channel's group
// (relative to the group's first input channel). A streamed input takes one pass per chunk:
// the first starts from the bias, later ones from the partial sums in `acc`, and every pass
// but the last leaves raw partial sums there (no activation); the last stores the results.
// An unstreamed conv is one pass (whole_pass).
struct ConvPass {
  int ci_lo, ci_hi;
  int first, last;
  RegionBuf acc; // partial sums over the box, channels from acc.c0 (unused for one pass)
};

BRICKDL_DEVICE ConvPass whole_pass(const LayerDesc& L) {
  ConvPass p = {};
  p.ci_lo = 0;
  p.ci_hi = L.in.c / L.groups;
  p.first = 1;
  p.last = 1;
  return p;
}

// Conv over the box (ro, re) of its output, channels [c0, c1), one pass (ConvPass) over
// its input channels, for the unit's `images` images (image j: image_buf / image_out of `in`,
// `out` and the pass's partial sums). `in` covers every input position the box needs (0
// outside the input tensor) for the pass's channels. Output positions outside the output
// tensor get 0. Each thread computes a tile of tile_co channels × tile_px consecutive w; the
// channel tile is the slowest index, so every image's positions are computed while one tile's
// weights are in L1 (one stream of the weights per unit, as the model counts).
// `w` is packed per channel tile (codegen.h pack_conv_weights): [cout / tco][cin / groups]
// [kd][kh][kw][tco], so a thread's tco weights of one tap are one (vector) load.
// Long on purpose: the hot loop of every generated kernel. Moving its tap loop or its channel
// loop into a __forceinline__ helper changes the generated code (bottleneck padded 8x8: 77 ->
// 79 registers on sm_80 and sm_90), and moving its three parts out (init, taps, store) even
// adds spills to a memoized kernel; none of that can be timed without a GPU.
BRICKDL_DEVICE void conv_box(const LayerDesc& L, const float* BRICKDL_RESTRICT w,
                             const float* BRICKDL_RESTRICT bias, const RegionBuf& in,
                             const OutTarget& out, const int* ro, const int* re, int c0, int c1,
                             const ConvPass& pass, int images) {
  const int tco = L.tile_co;
  const int tpx = L.tile_px;
  const int cout_g = L.out.c / L.groups;
  const int cin_g = L.in.c / L.groups;
  const int kvol = L.k[0] * L.k[1] * L.k[2];
  const int ntc = (c1 - c0 + tco - 1) / tco;
  const int ntx = (re[2] + tpx - 1) / tpx;
  const int rows = re[0] * re[1];
  const int items = ntc * images * rows * ntx;
  const int in_row = in.e[2];
  const int in_chan = in.e[0] * in.e[1] * in.e[2];
  BRICKDL_FOR_EACH_THREAD(t) {
    // Channel tile slowest: neighbouring threads share weights (L1 broadcast).
    for (int it = t; it < items; it += BRICKDL_NUM_THREADS()) {
      const int xt = it % ntx;
      const int rest = it / ntx;
      const int row = rest % rows;
      const int img = images == 1 ? 0 : (rest / rows) % images;
      const int co0 = c0 + (rest / rows / images) * tco;
      const RegionBuf src = image_buf(in, img);
      const RegionBuf part = image_buf(pass.acc, img);
      const int z = ro[0] + row / re[1];
      const int y = ro[1] + row % re[1];
      const int x0 = ro[2] + xt * tpx;
      const int nx = imin(tpx, ro[2] + re[2] - x0); // valid w positions of this tile
      const int nco = imin(tco, c1 - co0);
      const bool row_inside = z >= 0 && z < L.out.d && y >= 0 && y < L.out.h;
      float acc[kMaxTileCo][kMaxTilePx];
      if (row_inside) {
        BRICKDL_UNROLL
        for (int j = 0; j < kMaxTileCo; ++j) {
          if (j >= tco)
            break;
          const int cj = co0 + imin(j, nco - 1);
          const float b = L.has_bias ? load_cached(bias + cj) : 0.f;
          BRICKDL_UNROLL
          for (int i = 0; i < kMaxTilePx; ++i) {
#if BRICKDL_STREAMED
            acc[j][i] = pass.first ? b : part.p[region_index(part, cj, z, y, x0 + imin(i, nx - 1))];
#else
            acc[j][i] = b;
#endif
          }
        }
        const int ci0 = (co0 / cout_g) * cin_g; // a tile never spans two groups (codegen)
        const int zb = z * L.s[0] - L.p[0] - src.o[0];
        const int yb = y * L.s[1] - L.p[1] - src.o[1];
        const int xb = x0 * L.s[2] - L.p[2] - src.o[2];
        const long long wco = (long long)(co0 / tco) * cin_g * kvol * tco; // weight elements
        for (int ci = pass.ci_lo; ci < pass.ci_hi; ++ci) {
          const float* ip = channel_plane(src, ci0 + ci, in_chan);
          const long long wp = wco + ci * kvol * tco;
          for (int kz = 0; kz < L.k[0]; ++kz) {
            for (int ky = 0; ky < L.k[1]; ++ky) {
              const float* irow =
                  ip + ((zb + kz * L.dl[0]) * in.e[1] + (yb + ky * L.dl[1])) * in_row + xb;
              const long long wk = wp + (kz * L.k[1] + ky) * L.k[2] * tco;
              for (int kx = 0; kx < L.k[2]; ++kx) {
                float iv[kMaxTilePx] = {}; // (set below up to tpx; {} for the host compiler)
                BRICKDL_UNROLL
                for (int i = 0; i < kMaxTilePx; ++i) {
                  if (i >= tpx)
                    break;
                  iv[i] = irow[imin(i, nx - 1) * L.s[2] + kx * L.dl[2]];
                }
                float wv[kMaxTileCo];
                load_weights(w, wk + kx * tco, tco, wv);
                BRICKDL_UNROLL
                for (int j = 0; j < kMaxTileCo; ++j) {
                  if (j >= tco)
                    break;
                  BRICKDL_UNROLL
                  for (int i = 0; i < kMaxTilePx; ++i) {
                    if (i >= tpx)
                      break;
                    acc[j][i] = fmaf(wv[j], iv[i], acc[j][i]);
                  }
                }
              }
            }
          }
        }
      }
      BRICKDL_UNROLL
      for (int j = 0; j < kMaxTileCo; ++j) {
        if (j >= nco)
          break;
        BRICKDL_UNROLL
        for (int i = 0; i < kMaxTilePx; ++i) {
          if (i >= nx)
            break;
          const int x = x0 + i;
#if BRICKDL_STREAMED
          if (!pass.last) { // a partial sum (rows outside the tensor: the last pass writes 0)
            if (row_inside)
              part.p[region_index(part, co0 + j, z, y, x)] = acc[j][i];
            continue;
          }
#endif
          const float v = row_inside && x >= 0 && x < L.out.w
                              ? activate(acc[j][i], L.act, L.slope, L.clip_lo, L.clip_hi)
                              : 0.f;
          store_out(image_out(out, img), co0 + j, z, y, x, v);
        }
      }
    }
  }
}

// Max / avg pool over the box (ro, re), channels [c0, c1); reads `in` only at positions
// inside the input tensor.
BRICKDL_DEVICE void pool_box(const LayerDesc& L, const RegionBuf& in, const OutTarget& out,
                             const int* ro, const int* re, int c0, int c1) {
  const int vol = re[0] * re[1] * re[2];
  const int total = (c1 - c0) * vol;
  const bool is_max = L.op == kOpMaxPool;
  BRICKDL_FOR_EACH_THREAD(t) {
    for (int i = t; i < total; i += BRICKDL_NUM_THREADS()) {
      const int c = c0 + i / vol;
      const int r = i % vol;
      const int z = ro[0] + r / (re[1] * re[2]);
      const int y = ro[1] + (r / re[2]) % re[1];
      const int x = ro[2] + r % re[2];
      float v = 0.f;
      if (inside(L.out, z, y, x)) {
        const int st[3] = {z * L.s[0] - L.p[0], y * L.s[1] - L.p[1], x * L.s[2] - L.p[2]};
        const int dim[3] = {L.in.d, L.in.h, L.in.w};
        float acc = is_max ? neg_inf() : 0.f;
        int count = 0;
        for (int kz = 0; kz < L.k[0]; ++kz) {
          const int zi = st[0] + kz * L.dl[0];
          if (zi < 0 || zi >= dim[0])
            continue;
          for (int ky = 0; ky < L.k[1]; ++ky) {
            const int yi = st[1] + ky * L.dl[1];
            if (yi < 0 || yi >= dim[1])
              continue;
            for (int kx = 0; kx < L.k[2]; ++kx) {
              const int xi = st[2] + kx * L.dl[2];
              if (xi < 0 || xi >= dim[2])
                continue;
              const float q = in.p[region_index(in, c, zi, yi, xi)];
              acc = is_max ? max_step(acc, q) : acc + q;
              ++count;
            }
          }
        }
        if (is_max) {
          v = acc;
        } else {
          // PyTorch: the divisor counts padding (clipped to input + pad) unless excluded.
          int divisor = 1;
          for (int a = 0; a < 3; ++a) {
            const int end = imin(st[a] + L.k[a], dim[a] + L.p[a]);
            divisor *= end - st[a];
          }
          v = acc / static_cast<float>(L.count_include_pad ? divisor : (count > 0 ? count : 1));
        }
      }
      store_out(out, c, z, y, x, v);
    }
  }
}

// Elementwise: act(f(sources)) over the box (ro, re), channels [c0, c1): f sums them (add),
// multiplies (mul, channel_mul), subtracts or divides them, or maps its one source (sigmoid,
// silu, clip, hard_swish, hard_sigmoid, gelu; a batch-norm's per-channel scale w and shift b,
// fp32 as a conv's bias); LayerDesc::ew.
BRICKDL_DEVICE float eltwise_value(const LayerDesc& L, const float* BRICKDL_RESTRICT w,
                                   const float* BRICKDL_RESTRICT b, const InSource* src, int c,
                                   int z, int y, int x) {
  float v = fetch(src[0], c, z, y, x);
  for (int s = 1; s < L.num_src; ++s) {
    const float u = fetch(src[s], c, z, y, x);
    v = L.ew == kEwMul ? v * u : L.ew == kEwSub ? v - u : L.ew == kEwDiv ? v / u : v + u;
  }
  switch (L.ew) { // only the functions the plan uses are compiled (prelude.cuh BRICKDL_EWS)
#if BRICKDL_EWS & (1 << 2) // kEwSigmoid
  case kEwSigmoid: return sigmoid_f(v);
#endif
#if BRICKDL_EWS & (1 << 3) // kEwSilu
  case kEwSilu: return v * sigmoid_f(v);
#endif
#if BRICKDL_EWS & (1 << 4) // kEwClip
  case kEwClip: return clip_f(v, L.clip_lo, L.clip_hi);
#endif
#if BRICKDL_EWS & (1 << 7) // kEwHardSwish
  case kEwHardSwish: return v * hard_sigmoid_f(v);
#endif
#if BRICKDL_EWS & (1 << 8) // kEwHardSigmoid
  case kEwHardSigmoid: return hard_sigmoid_f(v);
#endif
#if BRICKDL_EWS & (1 << 9) // kEwGelu
  case kEwGelu: return gelu_f(v);
#endif
#if BRICKDL_EWS & (1 << 10) // kEwAffine
  case kEwAffine: return v * load_cached(w + c) + load_cached(b + c);
#endif
  default: return v;
  }
}

// `w` and `b`: the layer's KernelArgs weight and bias (a batch-norm's scale and shift).
BRICKDL_DEVICE void eltwise_box(const LayerDesc& L, const float* w, const float* b,
                                const InSource* src, const OutTarget& out, const int* ro,
                                const int* re, int c0, int c1) {
  const int vol = re[0] * re[1] * re[2];
  const int total = (c1 - c0) * vol;
  BRICKDL_FOR_EACH_THREAD(t) {
    for (int i = t; i < total; i += BRICKDL_NUM_THREADS()) {
      const int c = c0 + i / vol;
      const int r = i % vol;
      const int z = ro[0] + r / (re[1] * re[2]);
      const int y = ro[1] + (r / re[2]) % re[1];
      const int x = ro[2] + r % re[2];
      float v = 0.f;
      if (inside(L.out, z, y, x))
        v = activate(eltwise_value(L, w, b, src, c, z, y, x), L.act, L.slope, L.clip_lo, L.clip_hi);
      store_out(out, c, z, y, x, v);
    }
  }
}

// Input channels [lo, hi) that output channels [c0, c1) of a window op read.
BRICKDL_DEVICE void input_channels(const LayerDesc& L, int c0, int c1, int* lo, int* hi) {
  if (L.op == kOpConv) {
    const int cout_g = L.out.c / L.groups;
    const int cin_g = L.in.c / L.groups;
    *lo = (c0 / cout_g) * cin_g;
    *hi = ((c1 - 1) / cout_g + 1) * cin_g;
  } else {
    *lo = c0;
    *hi = c1;
  }
}

} // namespace dev
} // namespace brickdl
