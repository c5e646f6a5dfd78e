#pragma once
// Convolution on tensor cores: the box of a conv layer's output as an implicit GEMM
//
//   D[m][n] = bias[n] + sum_k A[m][k] · B[k][n]
//     m: an output position of the box (z, y, x flattened, x fastest) in one of the unit's
//        images (image m / P of the batch block, P positions per image)
//     n: an output channel of [c0, c1)
//     k: (input channel of n's group, kz, ky, kx), the order of the packed weights
//     A[m][k]: the input region `in` at m's window tap k (im2col on the fly, from shared
//              memory), B[k][n]: the packed weights (tile_co == 8: [cout / 8][K][8])
//
// Each warp owns tiles of mma_m × 16 positions by mma_n × 8 channels; per step of k (8 for
// TF32, 16 for BF16 / FP16) a lane gathers its A and B fragment values and the warp issues
// mma_m × mma_n mma_step. Tiles run positions fastest: the warps in flight work on the same
// channels (different positions and images), so a weight tile read from L2 serves them all
// through L1, and the unit streams its weights about once, as the model counts, rather than
// once per position tile and image. K is padded with zeros to the step; positions past the box and
// channels past c1 read zeros and are not stored. One call is one ConvPass: k runs over the
// pass's input channels only. Output positions outside the output tensor
// are stored as 0 (they are padding of the next layer), as in conv_box.
#include "brick_ops.cuh"
#include "mma.cuh"

// The tensor-core step the kernel source contains (codegen defines it from its plan): 0 mma.sync
// only, 1 wgmma only (sm_90a), -1 both, chosen per layer by LayerDesc::wgmma (emulation).
#if !defined(BRICKDL_WGMMA)
#if defined(BRICKDL_EMULATE)
#define BRICKDL_WGMMA -1
#else
#define BRICKDL_WGMMA 0
#endif
#endif

namespace brickdl {
namespace dev {

// The offset in `in` of input tap k = (ci, kz, ky, kx) relative to a position's window
// origin in the conv group's channel 0; -1 past K. *ci: the tap's channel in the group (0 past
// K).
BRICKDL_DEVICE int tap_offset(const LayerDesc& L, const RegionBuf& in, int k, int kvol, int K,
                              int* ci) {
  *ci = 0;
  if (k >= K)
    return -1;
  *ci = k / kvol;
  const int tap = k - *ci * kvol;
  const int kx = tap % L.k[2];
  const int ky = (tap / L.k[2]) % L.k[1];
  const int kz = tap / (L.k[1] * L.k[2]);
  return (*ci * in.e[0] + kz * L.dl[0]) * in.e[1] * in.e[2] + ky * L.dl[1] * in.e[2] + kx * L.dl[2];
}

// Output position m of the unit's box (P positions per image, `images` images) as its image
// and (z, y, x); the image is a constant 0 without batch blocks.
BRICKDL_DEVICE int box_position(const int* ro, const int* re, int P, int images, int m, int* z,
                                int* y, int* x) {
  const int img = images == 1 ? 0 : m / P;
  const int q = m - img * P;
  const int plane = re[1] * re[2];
  *z = ro[0] + q / plane;
  *y = ro[1] + (q % plane) / re[2];
  *x = ro[2] + q % re[2];
  return img;
}

// The partial sums of a lane's accumulator fragment (layout of mma.cuh's C, per m16 x n8
// tile) from / to `acc` (a ConvPass buffer), for the positions (of `images` images of P
// each) and channels inside the box.
// Row block mt of a lane starts at m_base + mstride · mt (mma.sync: 16, the warp's own blocks;
// wgmma: 64, m_base including the warp's 16 · w).
template <bool kStore>
BRICKDL_DEVICE void mma_partial(float* frag, const RegionBuf& acc, const int* ro, const int* re,
                                int P, int images, int m_base, int mstride, int co_base, int c1,
                                int MT, int NT, int g, int t) {
  BRICKDL_UNROLL
  for (int i = 0; i < 4 * kMaxMmaM * kMaxMmaN; ++i) {
    const int mt = i / (4 * kMaxMmaN), nt = (i / 4) % kMaxMmaN, r = i % 4;
    const int m = m_base + mstride * mt + g + 8 * (r / 2);
    const int co = co_base + 8 * nt + 2 * t + r % 2;
    if (mt >= MT || nt >= NT || m >= images * P || co >= c1)
      continue;
    int z, y, x;
    const int img = box_position(ro, re, P, images, m, &z, &y, &x);
    const RegionBuf part = image_buf(acc, img);
    float* p = part.p + region_index(part, co, z, y, x);
    if (kStore) {
      *p = frag[i];
    } else {
      frag[i] = *p;
    }
  }
}
BRICKDL_DEVICE void mma_load_partial(float* frag, const RegionBuf& acc, const int* ro,
                                     const int* re, int P, int images, int m_base, int mstride,
                                     int co_base, int c1, int MT, int NT, int g, int t) {
  mma_partial<false>(frag, acc, ro, re, P, images, m_base, mstride, co_base, c1, MT, NT, g, t);
}
BRICKDL_DEVICE void mma_store_partial(float* frag, const RegionBuf& acc, const int* ro,
                                      const int* re, int P, int images, int m_base, int mstride,
                                      int co_base, int c1, int MT, int NT, int g, int t) {
  mma_partial<true>(frag, acc, ro, re, P, images, m_base, mstride, co_base, c1, MT, NT, g, t);
}

// The window origin in `in` of output position m of the box (image included); -1 past it.
BRICKDL_DEVICE int mma_row_origin(const LayerDesc& L, const RegionBuf& in, const int* ro,
                                  const int* re, int P, int images, int M, int m) {
  if (m >= M)
    return -1;
  int z, y, x;
  const int img = box_position(ro, re, P, images, m, &z, &y, &x);
  return img * in.istride +
         ((z * L.s[0] - L.p[0] - in.o[0]) * in.e[1] + (y * L.s[1] - L.p[1] - in.o[1])) * in.e[2] +
         (x * L.s[2] - L.p[2] - in.o[2]);
}

// A lane's A fragments of one k step (k0) for its MT row blocks, whose window origins are
// pix[2 · mt] (rows g) and pix[2 · mt + 1] (rows g + 8): im2col from `in` (layout of mma.cuh's
// A; zeros past the box and past k_hi). `in_g` is the conv group's channel 0 (channel ci0).
template <int MATH>
BRICKDL_DEVICE void mma_gather_a(float* fa, const int* pix, const LayerDesc& L, const RegionBuf& in,
                                 const float* in_g, int ci0, int in_chan, int k0, int k_hi,
                                 int kvol, int MT, int t) {
  using S = MmaShape<MATH>;
  BRICKDL_UNROLL
  for (int j = 0; j < S::a; ++j) { // A word j / w, value j % w
    const int r = j / S::w;
    int ci;
    const int off = tap_offset(L, in, k0 + (t + 4 * (r / 2)) * S::w + j % S::w, kvol, k_hi, &ci);
    const float* src = in_g;
    int shift = 0; // what `off` counts of the channel that src already points at
#if BRICKDL_CLUSTER
    if (in.cslice > 0) { // channel ci0 + ci in the rank that holds it
      src = channel_plane(in, ci0 + ci, in_chan);
      shift = ci * in_chan;
    }
#endif
    BRICKDL_UNROLL
    for (int mt = 0; mt < kMaxMmaM; ++mt) {
      if (mt >= MT)
        break;
      const int p = pix[2 * mt + r % 2];
      fa[mt * S::a + j] = p >= 0 && off >= 0 ? src[p + off - shift] : 0.f;
    }
  }
}

// A lane's accumulator fragments as the conv's results: activated, stored to `out`, positions
// outside the output tensor as 0 (row blocks as in mma_partial).
BRICKDL_DEVICE void mma_store_out(const float* frag, const LayerDesc& L, const OutTarget& out,
                                  const int* ro, const int* re, int P, int images, int M,
                                  int m_base, int mstride, int co_base, int c1, int MT, int NT,
                                  int g, int t) {
  BRICKDL_UNROLL
  for (int i = 0; i < 4 * kMaxMmaM * kMaxMmaN; ++i) {
    const int mt = i / (4 * kMaxMmaN), nt = (i / 4) % kMaxMmaN, r = i % 4;
    if (mt >= MT || nt >= NT)
      continue;
    const int m = m_base + mstride * mt + g + 8 * (r / 2);
    const int co = co_base + 8 * nt + 2 * t + r % 2;
    if (m >= M || co >= c1)
      continue;
    int z, y, x;
    const int img = box_position(ro, re, P, images, m, &z, &y, &x);
    const float v =
        inside(L.out, z, y, x) ? activate(frag[i], L.act, L.slope, L.clip_lo, L.clip_hi) : 0.f;
    store_out(image_out(out, img), co, z, y, x, v);
  }
}

// A lane's accumulators at the start of a tile: the bias of their channels (or 0).
BRICKDL_DEVICE void mma_init_acc(float* frag, const LayerDesc& L, const float* bias, int co_base,
                                 int c1, int t) {
  BRICKDL_UNROLL
  for (int i = 0; i < 4 * kMaxMmaM * kMaxMmaN; ++i) {
    const int co = co_base + 8 * ((i / 4) % kMaxMmaN) + 2 * t + i % 2;
    frag[i] = L.has_bias && co < c1 ? load_cached(bias + co) : 0.f;
  }
}

// Long on purpose: the tensor-core inner loop. Its per-lane pieces (mma_row_origin,
// mma_gather_a, mma_init_acc, mma_store_out, shared with wgmma) take a lane's arrays by pointer
// and are force-inlined: ptxas keeps them in registers (kernel_report: no stack frame, block 1
// tf32 memoized 96 registers on sm_80, 122 with the loops written out here).
template <int MATH>
BRICKDL_DEVICE void conv_box_mma(const LayerDesc& L, const float* BRICKDL_RESTRICT w,
                                 const float* BRICKDL_RESTRICT bias, const RegionBuf& in,
                                 const OutTarget& out, const int* ro, const int* re, int c0, int c1,
                                 const ConvPass& pass, int images) {
  using S = MmaShape<MATH>;
  const int MT = L.mma_m, NT = L.mma_n;
  const int cout_g = L.out.c / L.groups, cin_g = L.in.c / L.groups;
  const int kvol = L.k[0] * L.k[1] * L.k[2];
  const int K = cin_g * kvol;                                   // the packed weights' k extent
  const int k_lo = pass.ci_lo * kvol, k_hi = pass.ci_hi * kvol; // this pass's k range
  const int P = re[0] * re[1] * re[2];                          // positions per image
  const int M = images * P;
  const int m_tiles = (M + 16 * MT - 1) / (16 * MT);
  const int n_tiles = (c1 - c0 + 8 * NT - 1) / (8 * NT);
  const int in_chan = in.e[0] * in.e[1] * in.e[2];
  BRICKDL_FOR_EACH_WARP(wp) {
    for (int tile = wp; tile < m_tiles * n_tiles; tile += BRICKDL_NUM_WARPS()) {
      const int m_base = (tile % m_tiles) * 16 * MT; // positions fastest (weights in L1)
      const int co_base = c0 + (tile / m_tiles) * 8 * NT;
      const int ci0 = (co_base / cout_g) * cin_g; // a tile never spans two groups (codegen)
      // The group's channel 0 (may lie before a chunk's first channel; unused when `in` is
      // split over a cluster).
      const float* in_g = in.p + (ci0 - in.c0) * in_chan;
      Lanes<int, 2 * kMaxMmaM> pix; // window origin of rows g, g + 8 (image included); -1: none
      Lanes<float, 4 * kMaxMmaM * kMaxMmaN> acc;
      BRICKDL_FOR_EACH_LANE(lane) {
        const int g = lane >> 2, t = lane & 3;
        BRICKDL_UNROLL
        for (int i = 0; i < 2 * kMaxMmaM; ++i) {
          if (i >= 2 * MT)
            break;
          pix(lane)[i] =
              mma_row_origin(L, in, ro, re, P, images, M, m_base + 16 * (i / 2) + g + 8 * (i % 2));
        }
        mma_init_acc(acc(lane), L, bias, co_base, c1, t);
        // A later pass of a streamed input resumes from the partial sums (separate loop: for
        // one-pass convs it folds away whole).
#if BRICKDL_STREAMED
        if (!pass.first)
          mma_load_partial(acc(lane), pass.acc, ro, re, P, images, m_base, 16, co_base, c1, MT, NT,
                           g, t);
#endif
      }
      for (int k0 = k_lo; k0 < k_hi; k0 += S::k) {
        Lanes<float, S::a * kMaxMmaM> fa;
        Lanes<float, S::b * kMaxMmaN> fb;
        BRICKDL_FOR_EACH_LANE(lane) {
          const int g = lane >> 2, t = lane & 3;
          mma_gather_a<MATH>(fa(lane), pix(lane), L, in, in_g, ci0, in_chan, k0, k_hi, kvol, MT, t);
          BRICKDL_UNROLL
          for (int j = 0; j < S::b; ++j) { // B word j / w, value j % w
            const int k = k0 + (t + 4 * (j / S::w)) * S::w + j % S::w;
            BRICKDL_UNROLL
            for (int nt = 0; nt < kMaxMmaN; ++nt) {
              if (nt >= NT)
                break;
              const int co = co_base + 8 * nt + g;
              fb(lane)[nt * S::b + j] =
                  k < k_hi && co < c1 ? gload(w, ((long long)(co >> 3) * K + k) * 8 + g) : 0.f;
            }
          }
        }
        BRICKDL_UNROLL
        for (int mt = 0; mt < kMaxMmaM; ++mt) {
          if (mt >= MT)
            break;
          BRICKDL_UNROLL
          for (int nt = 0; nt < kMaxMmaN; ++nt) {
            if (nt >= NT)
              break;
            mma_step<MATH>(acc, 4 * (mt * kMaxMmaN + nt), fa, mt * S::a, fb, nt * S::b);
          }
        }
      }
      BRICKDL_FOR_EACH_LANE(lane) {
        const int g = lane >> 2, t = lane & 3;
#if BRICKDL_STREAMED
        if (!pass.last) {
          mma_store_partial(acc(lane), pass.acc, ro, re, P, images, m_base, 16, co_base, c1, MT, NT,
                            g, t);
          continue;
        }
#endif
        mma_store_out(acc(lane), L, out, ro, re, P, images, M, m_base, 16, co_base, c1, MT, NT, g,
                      t);
      }
    }
  }
}

// B of one wgmma step (k0 .. k0 + k of the packed weights, channels co_base .. co_base + 8 · NT)
// into a tile of mma.cuh's layout, rounded to the precision; thread l of the warpgroup's 128
// stores every 128th value (consecutive threads: consecutive channels of the packed weights).
template <int MATH, int NT>
BRICKDL_DEVICE void wgmma_stage_b(float* tile, const float* BRICKDL_RESTRICT w, int K, int k0,
                                  int k_hi, int co_base, int c1, int l) {
  using S = MmaShape<MATH>;
  constexpr int esize = MATH == kMathTf32 ? 4 : 2;
  BRICKDL_UNROLL
  for (int e = l; e < 8 * NT * S::k; e += 128) {
    const int c8 = e & 7, k = (e >> 3) % S::k, nb = (e >> 3) / S::k;
    const int co = co_base + 8 * nb + c8, kk = k0 + k;
    const float v = kk < k_hi && co < c1 ? gload(w, ((long long)(co >> 3) * K + kk) * 8 + c8) : 0.f;
    wgmma_store_b<MATH>(tile, wgmma_b_offset(8 * nb + c8, k, esize), v);
  }
}

// What a warpgroup's tiles of one conv share: the GEMM's extents and where its tiles go.
struct WgmmaConv {
  int MT, cout_g, cin_g, kvol, K, P, M, m_tiles, n_tiles;
  float* tiles; // the warpgroup's two weight tiles
};

BRICKDL_DEVICE WgmmaConv wgmma_conv(const LayerDesc& L, const int* re, int c0, int c1, int images,
                                    int nt, int wg) {
  WgmmaConv v;
  v.MT = L.mma_m;
  v.cout_g = L.out.c / L.groups;
  v.cin_g = L.in.c / L.groups;
  v.kvol = L.k[0] * L.k[1] * L.k[2];
  v.K = v.cin_g * v.kvol;
  v.P = re[0] * re[1] * re[2];
  v.M = images * v.P;
  v.m_tiles = (v.M + 64 * v.MT - 1) / (64 * v.MT);
  v.n_tiles = (c1 - c0 + 8 * nt - 1) / (8 * nt);
  v.tiles = block_smem() + L.wgmma_smem + 2 * kWgmmaTileFloats * wg;
  return v;
}

// A warpgroup thread's start of tile `tile`: its rows' window origins and its accumulators
// (the bias); *m_base and *co_base: the tile's first position and channel.
template <class Pix, class Acc>
BRICKDL_DEVICE void wgmma_tile_start(Pix& pix, Acc& acc, const WgmmaConv& v, const LayerDesc& L,
                                     const float* bias, const RegionBuf& in, const int* ro,
                                     const int* re, int c0, int c1, int images, int nt, int tile,
                                     int* m_base, int* co_base) {
  *m_base = (tile % v.m_tiles) * 64 * v.MT;
  *co_base = c0 + (tile / v.m_tiles) * 8 * nt;
  BRICKDL_FOR_EACH_WG_LANE(l) {
    const int g = (l & 31) >> 2, mw = *m_base + 16 * (l >> 5);
    BRICKDL_UNROLL
    for (int i = 0; i < 2 * kMaxMmaM; ++i) {
      if (i >= 2 * v.MT)
        break;
      pix(l)[i] =
          mma_row_origin(L, in, ro, re, v.P, images, v.M, mw + 64 * (i / 2) + g + 8 * (i % 2));
    }
    mma_init_acc(acc(l), L, bias, *co_base, c1, l & 3);
  }
}

// A warpgroup's k steps [k_lo, k_hi) of its tile (channels from co_base) into acc, A gathered
// from `in`, B staged per step into the two weight tiles (the next step's while this one
// multiplies), one warpgroup barrier per step:
//
//   stage B(0) | sync | gather + convert A(0), stage B(1), fence, wgmma(0), wait | sync | ...
template <int MATH, int NT, class Pix, class Acc>
BRICKDL_DEVICE void wgmma_k_steps(Acc& acc, const Pix& pix, const WgmmaConv& v, const LayerDesc& L,
                                  const float* BRICKDL_RESTRICT w, const RegionBuf& in, int wg,
                                  int k_lo, int k_hi, int co_base, int c1) {
  using S = MmaShape<MATH>;
  const int ci0 = (co_base / v.cout_g) * v.cin_g; // a tile never spans two groups (codegen)
  const int in_chan = in.e[0] * in.e[1] * in.e[2];
  const float* in_g = in.p + (ci0 - in.c0) * in_chan;
  BRICKDL_FOR_EACH_WG_LANE(l) {
    wgmma_stage_b<MATH, NT>(v.tiles, w, v.K, k_lo, k_hi, co_base, c1, l);
    fence_proxy_async();
  }
  warpgroup_sync(wg);
  for (int k0 = k_lo, b = 0; k0 < k_hi; k0 += S::k, b ^= 1) {
    Lanes<float, S::a * kMaxMmaM, 128> fa;
    Lanes<unsigned, 4 * kMaxMmaM, 128> ra; // A converted before the fence (mma.cuh)
    BRICKDL_FOR_EACH_WG_LANE(l) {
      mma_gather_a<MATH>(fa(l), pix(l), L, in, in_g, ci0, in_chan, k0, k_hi, v.kvol, v.MT, l & 3);
      wgmma_pack_a<MATH>(ra(l), fa(l), v.MT);
      if (k0 + S::k < k_hi) { // the other tile: its last wgmma finished before the sync
        wgmma_stage_b<MATH, NT>(v.tiles + (b ^ 1) * kWgmmaTileFloats, w, v.K, k0 + S::k, k_hi,
                                co_base, c1, l);
        fence_proxy_async();
      }
    }
    wgmma_fence();
    const unsigned long long desc = wgmma_desc(smem_address(v.tiles + b * kWgmmaTileFloats));
    BRICKDL_UNROLL
    for (int mt = 0; mt < kMaxMmaM; ++mt) {
      if (mt >= v.MT)
        break;
      wgmma_step<MATH, NT>(acc, 4 * mt * kMaxMmaN, ra, 4 * mt, desc);
    }
    wgmma_commit_and_wait();
    wgmma_fence_operands(acc, 4 * kMaxMmaM * kMaxMmaN);
    warpgroup_sync(wg);
  }
}

// conv_box_mma one level up, on sm_90a: a warpgroup's tile is MT x 64 positions (warp w of it
// rows 16 · w .. 16 · w + 15 of each 64, gathered as for mma.sync) by NT x 8 channels, one
// wgmma per 64 positions and k step (wgmma_k_steps).
template <int MATH, int NT>
BRICKDL_DEVICE void conv_box_wgmma(const LayerDesc& L, const float* BRICKDL_RESTRICT w,
                                   const float* BRICKDL_RESTRICT bias, const RegionBuf& in,
                                   const OutTarget& out, const int* ro, const int* re, int c0,
                                   int c1, const ConvPass& pass, int images) {
  BRICKDL_FOR_EACH_WARPGROUP(wg) {
    const WgmmaConv v = wgmma_conv(L, re, c0, c1, images, NT, wg);
    for (int tile = wg; tile < v.m_tiles * v.n_tiles; tile += BRICKDL_NUM_WARPGROUPS()) {
      Lanes<int, 2 * kMaxMmaM, 128> pix;
      Lanes<float, 4 * kMaxMmaM * kMaxMmaN, 128> acc;
      int m_base, co_base;
      wgmma_tile_start(pix, acc, v, L, bias, in, ro, re, c0, c1, images, NT, tile, &m_base,
                       &co_base);
#if BRICKDL_STREAMED
      if (!pass.first)
        BRICKDL_FOR_EACH_WG_LANE(l) {
          mma_load_partial(acc(l), pass.acc, ro, re, v.P, images, m_base + 16 * (l >> 5), 64,
                           co_base, c1, v.MT, NT, (l & 31) >> 2, l & 3);
        }
#endif
      wgmma_k_steps<MATH, NT>(acc, pix, v, L, w, in, wg, pass.ci_lo * v.kvol, pass.ci_hi * v.kvol,
                              co_base, c1);
      BRICKDL_FOR_EACH_WG_LANE(l) {
        const int g = (l & 31) >> 2, t = l & 3, mw = m_base + 16 * (l >> 5);
#if BRICKDL_STREAMED
        if (!pass.last) {
          mma_store_partial(acc(l), pass.acc, ro, re, v.P, images, mw, 64, co_base, c1, v.MT, NT, g,
                            t);
          continue;
        }
#endif
        mma_store_out(acc(l), L, out, ro, re, v.P, images, v.M, mw, 64, co_base, c1, v.MT, NT, g,
                      t);
      }
    }
  }
}

// One value per warpgroup of the block that lives across barriers: under emulation one per
// warpgroup (the warpgroups run one after the other between two barriers), on the device the
// thread's own (its warpgroup's part).
constexpr int kMaxWarpgroups = 8; // 1024 threads
template <class T> struct PerWarpgroup {
#if defined(BRICKDL_EMULATE)
  T v[kMaxWarpgroups];
  T& operator()(int wg) {
    return v[wg];
  }
#else
  T v;
  BRICKDL_DEVICE T& operator()(int) {
    return v;
  }
#endif
};

// The double-buffered walk over a streamed input's chunks (streamed_conv_passes): stages chunk
// [lo, hi) of [lo0, hi0) with stage(buffer, lo, hi) and, once it landed and every thread (a
// cluster: every rank) reached the barrier, calls pass(buffer, lo, hi) while the next chunk is
// staged into the other buffer (`chunk` and `chunk` + L.stream_next floats). The caller
// synchronizes after the last pass.
template <class Stage, class Pass>
BRICKDL_DEVICE void for_each_chunk(const LayerDesc& L, RegionBuf chunk, int lo0, int hi0,
                                   bool cluster, const Stage& stage, const Pass& pass) {
  float* const base = chunk.p; // buffer k at base + k * stream_next (no array: no stack)
  chunk.c0 = lo0;
  chunk.cbase = lo0;
  stage(chunk, lo0, imin(lo0 + L.stream_c, hi0));
  cp_async_commit();
  for (int lo = lo0, k = 0; lo < hi0; lo += L.stream_c, k ^= 1) {
    const int hi = imin(lo + L.stream_c, hi0);
    cp_async_wait_all();
    block_sync(cluster);
    if (hi < hi0) {
      RegionBuf next = chunk;
      next.p = base + (k ^ 1) * L.stream_next;
      next.c0 = hi;
      next.cbase = hi;
      stage(next, hi, imin(hi + L.stream_c, hi0));
      cp_async_commit();
    }
    chunk.p = base + k * L.stream_next;
    chunk.c0 = lo;
    chunk.cbase = lo;
    pass(static_cast<const RegionBuf&>(chunk), lo, hi);
  }
}

// A streamed conv (streamed_conv_passes) on wgmma with at most one tile per warpgroup
// (LayerDesc::acc_regs): each warpgroup keeps its tile's accumulators in registers from the
// first chunk to the last and stores the results once; the chunks are staged and synchronized
// by the whole block as there.
template <int MATH, int NT, class Stage>
BRICKDL_DEVICE void wgmma_resident_passes(const LayerDesc& L, const float* w, const float* bias,
                                          RegionBuf chunk, const OutTarget& out, const int* ro,
                                          const int* re, int c0, int c1, int lo0, int hi0,
                                          int images, bool cluster, const Stage& stage) {
  PerWarpgroup<Lanes<int, 2 * kMaxMmaM, 128>> pix;
  PerWarpgroup<Lanes<float, 4 * kMaxMmaM * kMaxMmaN, 128>> acc;
  PerWarpgroup<int> m_base, co_base;
  BRICKDL_FOR_EACH_WARPGROUP(wg) {
    const WgmmaConv v = wgmma_conv(L, re, c0, c1, images, NT, wg);
    if (wg < v.m_tiles * v.n_tiles)
      wgmma_tile_start(pix(wg), acc(wg), v, L, bias, chunk, ro, re, c0, c1, images, NT, wg,
                       &m_base(wg), &co_base(wg));
  }
  for_each_chunk(L, chunk, lo0, hi0, cluster, stage, [&](const RegionBuf& in, int lo, int hi) {
    BRICKDL_FOR_EACH_WARPGROUP(wg) {
      const WgmmaConv v = wgmma_conv(L, re, c0, c1, images, NT, wg);
      if (wg < v.m_tiles * v.n_tiles)
        wgmma_k_steps<MATH, NT>(acc(wg), pix(wg), v, L, w, in, wg, lo * v.kvol, hi * v.kvol,
                                co_base(wg), c1);
    }
  });
  BRICKDL_FOR_EACH_WARPGROUP(wg) {
    const WgmmaConv v = wgmma_conv(L, re, c0, c1, images, NT, wg);
    if (wg < v.m_tiles * v.n_tiles)
      BRICKDL_FOR_EACH_WG_LANE(l) {
        mma_store_out(acc(wg)(l), L, out, ro, re, v.P, images, v.M, m_base(wg) + 16 * (l >> 5), 64,
                      co_base(wg), c1, v.MT, NT, (l & 31) >> 2, l & 3);
      }
  }
  block_sync(cluster);
}

// The conv paths a kernel source contains. Codegen defines BRICKDL_CONV_FMA (0 / 1) and
// BRICKDL_CONV_MMA (0, or the Math of its tensor-core layers) from the layers of its plan, so
// NVRTC compiles only the paths used: an unused path inlined into every layer, even behind a
// branch that folds away, costs registers (the 5-layer bottleneck, padded 8x8, fp32, sm_90:
// 77 -> 254 registers and a 160-byte stack frame) and 10x the compile time. Under emulation
// every path is there and the descriptor chooses at run time (BRICKDL_CONV_MMA == -1).
#if !defined(BRICKDL_CONV_FMA)
#define BRICKDL_CONV_FMA 1
#endif
#if !defined(BRICKDL_CONV_MMA)
#define BRICKDL_CONV_MMA -1
#endif

// The NT of the plan's wgmma layers, as a mask (the OR of their NT: 1, 2, 4): codegen defines it,
// so that only those are compiled (each is a copy of the inner loop: the 4-conv bottleneck with all
// three went to a 192-byte stack frame on sm_90a); all three under emulation.
#if !defined(BRICKDL_WGMMA_NTS)
#define BRICKDL_WGMMA_NTS 7
#endif

// A compile-time int handed to the generic lambdas of the dispatchers below, which instantiate
// a template at decltype(arg)::value.
template <int V> struct IntConst { static constexpr int value = V; };

// f(IntConst<MATH>{}) for tensor-core layer L's Math: the one codegen compiled
// (BRICKDL_CONV_MMA > 0), else L.math at run time (emulation).
template <class F> BRICKDL_DEVICE void with_tensor_math(const LayerDesc& L, const F& f) {
#if BRICKDL_CONV_MMA > 0
  (void)L;
  f(IntConst<BRICKDL_CONV_MMA>{});
#else
  if (L.math == kMathTf32)
    f(IntConst<kMathTf32>{});
  else if (L.math == kMathBf16)
    f(IntConst<kMathBf16>{});
  else
    f(IntConst<kMathFp16>{});
#endif
}

// f(IntConst<NT>{}) for wgmma layer L's n tile (codegen: 1, 2 or 4), among the compiled ones.
template <class F> BRICKDL_DEVICE void with_wgmma_nt(const LayerDesc& L, const F& f) {
#if BRICKDL_WGMMA_NTS & 4
  if (L.mma_n == 4) {
    f(IntConst<4>{});
    return;
  }
#endif
#if BRICKDL_WGMMA_NTS & 2
  if (L.mma_n == 2) {
    f(IntConst<2>{});
    return;
  }
#endif
#if BRICKDL_WGMMA_NTS & 1
  f(IntConst<1>{});
#else
  (void)f;
  unplanned_path(); // an NT codegen did not plan: never compute nothing silently
#endif
}

// Whether the source contains wgmma_resident_passes (codegen: a layer of the plan has acc_regs;
// compiled in but unused, it cost layer3's cluster kernel a 448-byte stack frame).
#if !defined(BRICKDL_ACC_REGS)
#define BRICKDL_ACC_REGS 1
#endif

#if BRICKDL_WGMMA != 0 && BRICKDL_ACC_REGS
// wgmma_resident_passes for the layer's Math and NT.
template <class Stage>
BRICKDL_DEVICE void wgmma_resident(const LayerDesc& L, const float* w, const float* bias,
                                   const RegionBuf& chunk, const OutTarget& out, const int* ro,
                                   const int* re, int c0, int c1, int lo0, int hi0, int images,
                                   bool cluster, const Stage& stage) {
  with_tensor_math(L, [&](auto math) {
    with_wgmma_nt(L, [&](auto nt) {
      wgmma_resident_passes<decltype(math)::value, decltype(nt)::value>(
          L, w, bias, chunk, out, ro, re, c0, c1, lo0, hi0, images, cluster, stage);
    });
  });
}
#endif

// A tensor-core conv layer: wgmma where codegen chose it, else mma.sync.
template <int MATH>
BRICKDL_DEVICE void conv_box_tensor(const LayerDesc& L, const float* BRICKDL_RESTRICT w,
                                    const float* BRICKDL_RESTRICT bias, const RegionBuf& in,
                                    const OutTarget& out, const int* ro, const int* re, int c0,
                                    int c1, const ConvPass& pass, int images) {
#if BRICKDL_WGMMA != 0
  if (L.wgmma) {
    with_wgmma_nt(L, [&](auto nt) {
      conv_box_wgmma<MATH, decltype(nt)::value>(L, w, bias, in, out, ro, re, c0, c1, pass, images);
    });
    return;
  }
#endif
#if BRICKDL_WGMMA <= 0
  conv_box_mma<MATH>(L, w, bias, in, out, ro, re, c0, c1, pass, images);
#endif
}

// A conv layer over the box, for the unit's `images` images: on tensor cores when codegen
// chose an MMA tile, else FP32 FMA.
BRICKDL_DEVICE void conv_layer_box(const LayerDesc& L, const float* BRICKDL_RESTRICT w,
                                   const float* BRICKDL_RESTRICT bias, const RegionBuf& in,
                                   const OutTarget& out, const int* ro, const int* re, int c0,
                                   int c1, const ConvPass& pass, int images) {
#if BRICKDL_CONV_MMA != 0
  if (L.mma_m > 0) {
    with_tensor_math(L, [&](auto math) {
      conv_box_tensor<decltype(math)::value>(L, w, bias, in, out, ro, re, c0, c1, pass, images);
    });
    return;
  }
#endif
#if BRICKDL_CONV_FMA
  conv_box(L, w, bias, in, out, ro, re, c0, c1, pass, images);
#endif
}

// An accumulator of cb x `ext` partial sums in shared memory at `smem`, for the box from
// origin `o` and channel c0 (a streamed conv whose output is not a shared-memory region);
// image j's at smem + j · istride.
BRICKDL_DEVICE RegionBuf accumulator(float* smem, const int* o, const int* ext, int c0,
                                     int istride) {
  RegionBuf acc;
  acc.p = smem;
  for (int ax = 0; ax < 3; ++ax) {
    acc.o[ax] = o[ax];
    acc.e[ax] = ext[ax];
  }
  acc.c0 = c0;
  acc.coherent = 0;
  acc.istride = istride;
  acc.cslice = 0;
  acc.cbase = 0;
  return acc;
}

// A streamed conv of the unit's `images` images: for input channels [lo0, hi0) in chunks of
// stream_c, stage(buffer, lo, hi) fills a chunk buffer of every image (its channel 0 is lo;
// image j's: image_buf), then one ConvPass adds the chunk to `acc`; the last pass stores the
// results to `out`. Double buffered (core/group.h kStreamBuffers): the
// chunk buffers are `chunk` and `chunk` + L.stream_next floats, and the next chunk is staged
// (asynchronously where `stage` copies with cp.async) while this one's pass runs. All threads.
//
//   stage(0) | wait, barrier | stage(1), pass(0) | wait, barrier | stage(2), pass(1) | ...
//
// A buffer is restaged only after the barrier that follows the pass that read it. In a
// cluster kernel (`cluster`) a chunk is split over the ranks (chunk.cslice channels each from
// the chunk's first, cbase), each rank's `stage` fills its own part, and the barriers are the
// cluster's.
template <class Stage>
BRICKDL_DEVICE void streamed_conv_passes(const LayerDesc& L, const float* w, const float* bias,
                                         RegionBuf chunk, const RegionBuf& acc,
                                         const OutTarget& out, const int* ro, const int* re, int c0,
                                         int c1, int lo0, int hi0, int images, bool cluster,
                                         const Stage& stage) {
#if BRICKDL_WGMMA != 0 && BRICKDL_ACC_REGS
  if (L.acc_regs) { // the accumulators in registers, `acc` unused
    wgmma_resident(L, w, bias, chunk, out, ro, re, c0, c1, lo0, hi0, images, cluster, stage);
    return;
  }
#endif
  ConvPass pass = whole_pass(L);
  pass.acc = acc;
  for_each_chunk(L, chunk, lo0, hi0, cluster, stage, [&](const RegionBuf& in, int lo, int hi) {
    pass.ci_lo = lo;
    pass.ci_hi = hi;
    pass.first = lo == lo0;
    pass.last = hi == hi0;
    conv_layer_box(L, w, bias, in, out, ro, re, c0, c1, pass, images);
  });
  block_sync(cluster);
}

} // namespace dev
} // namespace brickdl
