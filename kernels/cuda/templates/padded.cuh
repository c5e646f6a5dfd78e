#pragma once
// Padded bricks: one thread block per output brick (unit of work) of the group's last layer
// and batch block of images (G.nb; every image's regions side by side in shared memory, at
// j * G.smem_image for the unit's image j; each layer runs for all of them between barriers,
// a conv as one box over all the images, so its weights stream through the block once).
//
//   external inputs ──stage (halo region, once)──► shared memory, or streamed by their one
//                     conv reader in chunks of input channels (padded_streamed_conv); an
//                     elementwise layer (a residual add) reads them from global memory, so
//                     the staged copy lives only until its last window reader
//   layer 1 .. L-1: computed over their region (brick + ghost zone grown backwards, all
//                   channels) into shared memory; no communication between blocks
//   layer L:        computed over the brick, the unit's channel block, into the output
//
// Ghost zones are recomputed by neighbouring blocks (the redundant FLOPs of the model). The
// single-layer case of this kernel is also the layer-by-layer baseline of our own.
//
// Clusters (G.cluster > 1, sm_90): the unit is computed by the G.cluster CTAs of a thread block
// cluster (blocks unit · cluster + rank). Rank q stages and computes only its channel slice of
// every tensor (LayerDesc / ExternalDesc cslice: [q · cslice, (q + 1) · cslice)), so each
// region takes 1/cluster of the shared memory and each weight leaves L2 once per unit; a window
// layer reads the other channels of its input from the other ranks' shared memory
// (channel_plane). Cluster barriers replace the block's: after the staging and after every
// layer, so a slice is read only once complete and overwritten only once every rank is past
// its last reader (the last barrier also keeps a CTA's shared memory alive while others read
// it). A streamed input's chunks are split over the ranks too (padded_streamed_conv), with
// cluster barriers between the passes.
#include "conv_mma.cuh"

namespace brickdl {
namespace dev {

BRICKDL_DEVICE void map_region(const RegionMap& m, const int* bo, int* o, int* e) {
  for (int a = 0; a < 3; ++a) {
    o[a] = bo[a] * m.scale[a] + m.offset[a];
    e[a] = m.ext[a];
  }
}

// A region of image 0 of the unit in shared memory at p (image j's: image_buf); in a cluster
// kernel, rank `rank`'s slice of `cslice` channels of it (cslice 0: all channels).
BRICKDL_DEVICE RegionBuf region_buf(const GroupDesc& G, float* p, const RegionMap& m, const int* bo,
                                    int cslice, int rank) {
  RegionBuf b;
  b.p = p;
  map_region(m, bo, b.o, b.e);
  b.c0 = rank * cslice;
  b.coherent = 0;
  b.istride = G.smem_image;
  b.cslice = cslice;
  b.cbase = 0;
  return b;
}

// The channels [*c0, *c1) of a tensor of `channels` channels that rank `rank` holds: its
// slice in a cluster kernel (empty past the last channel), else all.
BRICKDL_DEVICE void rank_channels(const GroupDesc& G, int cslice, int channels, int rank, int* c0,
                                  int* c1) {
  *c0 = G.cluster > 1 ? rank * cslice : 0;
  *c1 = G.cluster > 1 ? imax(*c0, imin(*c0 + cslice, channels)) : channels;
}

// The barrier between two phases of a unit: the cluster's in a cluster kernel.
BRICKDL_DEVICE void unit_sync(const GroupDesc& G) {
  block_sync(G.cluster > 1);
}

// Input 0 of window layer L as its shared-memory region buffer (staged input or producer).
BRICKDL_DEVICE RegionBuf padded_window_input(const GroupDesc& G, const LayerDesc& L, const int* bo,
                                             int rank) {
  if (L.src_kind[0] == kSrcExternal) {
    const ExternalDesc& X = G.ext[L.src_index[0]];
    return region_buf(G, block_smem() + X.smem, X.region, bo, X.cslice, rank);
  }
  const LayerDesc& P = G.layers[L.src_index[0]];
  return region_buf(G, block_smem() + P.smem_out, P.region, bo, P.cslice, rank);
}

// A conv whose external input streams through shared memory in chunks of stream_c input
// channels (groups == 1): stage a chunk of every image, one ConvPass, repeat. Partial sums live
// in the layer's own region, or for the last layer in its accumulator (cb_last x brick; in a
// cluster kernel the rank's slice of the channels). In a cluster kernel each rank stages its
// X.cslice channels of every chunk, and the pass reads the chunk from every rank.
BRICKDL_DEVICE void padded_streamed_conv(const GroupDesc& G, const LayerDesc& L,
                                         const KernelArgs& a, const float* w, const float* bias,
                                         const int* bo, int n0, int images, const OutTarget& out,
                                         const int* ro, const int* re, int c0, int c1, int rank) {
  const ExternalDesc& X = G.ext[L.src_index[0]];
  TensorRef src;
  src.p = a.ext[L.src_index[0]];
  src.dims = X.dims;
  float* const smem = block_smem();
  const RegionBuf acc =
      out.to_tensor ? accumulator(smem + L.acc_smem, bo, G.brick, c0, G.smem_image) : out.buf;
  const bool cluster = G.cluster > 1;
  streamed_conv_passes(L, w, bias, region_buf(G, smem + L.stream_smem, X.region, bo, X.cslice, 0),
                       acc, out, ro, re, c0, c1, 0, L.in.c, images, cluster,
                       [&](RegionBuf chunk, int lo, int hi) {
                         if (cluster) { // this rank's part of the chunk
                           lo = imin(hi, lo + rank * X.cslice);
                           hi = imin(hi, lo + X.cslice);
                           chunk.c0 = lo;
                         }
                         for (int j = 0; j < images; ++j) {
                           src.n = n0 + j;
                           stage_from_tensor_async(image_buf(chunk, j), src, lo, hi);
                         }
                       });
}

// What layer L of the unit computes: the box (ro, re) and channels [c0, c1), and where they
// go. The last layer: the unit's brick, clipped to the tensor, its channel block (a cluster
// unit holds every channel: the rank's slice), into the output tensor; others their region,
// all channels (the rank's slice), into shared memory.
BRICKDL_DEVICE OutTarget padded_target(const GroupDesc& G, const LayerDesc& L, bool is_last,
                                       const KernelArgs& a, const int* bo, int n0, int cblk,
                                       int rank, int* ro, int* re, int* c0, int* c1) {
  OutTarget out = {};
  if (is_last) {
    const int dim[3] = {L.out.d, L.out.h, L.out.w};
    for (int ax = 0; ax < 3; ++ax) {
      ro[ax] = bo[ax];
      re[ax] = imin(G.brick[ax], dim[ax] - bo[ax]);
    }
    if (G.cluster > 1) {
      rank_channels(G, L.cslice, L.out.c, rank, c0, c1);
    } else {
      *c0 = cblk * G.cb_last;
      *c1 = imin(*c0 + G.cb_last, L.out.c);
    }
    out.to_tensor = 1;
    out.t = a.out;
    out.dims = L.out;
    out.n = n0;
  } else {
    map_region(L.region, bo, ro, re);
    rank_channels(G, L.cslice, L.out.c, rank, c0, c1);
    out.to_tensor = 0;
    out.buf = region_buf(G, block_smem() + L.smem_out, L.region, bo, L.cslice, rank);
  }
  return out;
}

// Layer L of the unit for its `images` images from n0 (image j's regions at j · G.smem_image),
// rank `rank`'s channels of it in a cluster kernel.
BRICKDL_DEVICE void padded_layer(const GroupDesc& G, const LayerDesc& L, bool is_last,
                                 const KernelArgs& a, const float* w, const float* bias,
                                 const int* bo, int n0, int images, int cblk, int rank) {
  int ro[3], re[3], c0, c1;
  const OutTarget out = padded_target(G, L, is_last, a, bo, n0, cblk, rank, ro, re, &c0, &c1);
  if (L.op == kOpEltwise) {
    for (int j = 0; j < images; ++j) {
      InSource src[kMaxSources];
      for (int s = 0; s < kMaxSources; ++s) {
        if (s >= L.num_src)
          break;
        if (L.src_kind[s] == kSrcExternal) {
          const int e = L.src_index[s];
          src[s].from_tensor = 1;
          src[s].t.p = a.ext[e];
          src[s].t.dims = G.ext[e].dims;
          src[s].t.n = n0 + j;
        } else {
          const LayerDesc& P = G.layers[L.src_index[s]];
          src[s].from_tensor = 0;
          src[s].buf =
              image_buf(region_buf(G, block_smem() + P.smem_out, P.region, bo, P.cslice, rank), j);
        }
      }
      eltwise_box(L, w, bias, src, image_out(out, j), ro, re, c0, c1);
    }
#if BRICKDL_STREAMED
  } else if (L.stream_c > 0) {
    padded_streamed_conv(G, L, a, w, bias, bo, n0, images, out, ro, re, c0, c1, rank);
#endif
  } else {
    const RegionBuf in = padded_window_input(G, L, bo, rank);
    if (L.op == kOpConv) {
      conv_layer_box(L, w, bias, in, out, ro, re, c0, c1, whole_pass(L), images);
    } else {
      for (int j = 0; j < images; ++j)
        pool_box(L, image_buf(in, j), image_out(out, j), ro, re, c0, c1);
    }
  }
}

// A brick of one layer: its batch block n (images n · G.nb ..), channel block and position.
struct BrickCoord {
  int n, cb, b[3];
};

// Unit `unit` as a brick of the last layer (its bricks per axis c, d, h, w: nblk): units run
// channel block fastest, then w, h, d, batch block, the order the model's reuse distances
// assume, so the units in flight share their inputs and intermediate bricks.
BRICKDL_DEVICE BrickCoord decode_unit(const int* nblk, int unit) {
  BrickCoord q;
  int u = unit;
  q.cb = u % nblk[0];
  u /= nblk[0];
  q.b[2] = u % nblk[3];
  u /= nblk[3];
  q.b[1] = u % nblk[2];
  u /= nblk[2];
  q.b[0] = u % nblk[1];
  q.n = u / nblk[1];
  return q;
}

// Block `block`: unit block / G.cluster, as rank block % G.cluster of its cluster (1-D
// clusters of consecutive blocks: the rank is the block's %cluster_ctarank).
BRICKDL_DEVICE void padded_block(const GroupDesc& G, const KernelArgs& a, int block) {
  const int rank = G.cluster > 1 ? block % G.cluster : 0;
  const BrickCoord q = decode_unit(G.nblk_last, G.cluster > 1 ? block / G.cluster : block);
  const int cblk = q.cb;
  const int n0 = q.n * G.nb;
  // The unit's images (the last batch block may hold fewer); a constant 1 without batch
  // blocks, so that the per-image loops fold away (registers).
  const int images = G.nb == 1 ? 1 : imin(G.nb, G.batch - n0);
  const int bo[3] = {q.b[0] * G.brick[0], q.b[1] * G.brick[1], q.b[2] * G.brick[2]};

  for (int j = 0; j < images; ++j) {
    BRICKDL_UNROLL
    for (int e = 0; e < kMaxExternal; ++e) {
      if (e >= G.num_external)
        break;
      const ExternalDesc& X = G.ext[e];
      if (!X.staged || X.streamed)
        continue;
      TensorRef src;
      src.p = a.ext[e];
      src.dims = X.dims;
      src.n = n0 + j;
      int c0, c1;
      rank_channels(G, X.cslice, X.dims.c, rank, &c0, &c1);
      stage_from_tensor(
          image_buf(region_buf(G, block_smem() + X.smem, X.region, bo, X.cslice, rank), j), src, c0,
          c1);
    }
  }
  unit_sync(G);

  BRICKDL_UNROLL
  for (int l = 0; l < kMaxLayers; ++l) {
    if (l >= G.num_layers)
      break;
    padded_layer(G, G.layers[l], l == G.num_layers - 1, a, a.weight[l], a.bias[l], bo, n0, images,
                 cblk, rank);
    unit_sync(G);
  }
}

} // namespace dev
} // namespace brickdl
