#pragma once
// The descriptor of one generated kernel: what codegen (host) decides and the templates read.
//
//   codegen.cpp ──fills──► GroupDesc ──BRICKDL_GROUP_DESC_FIELDS──► "g.x = 3;" lines in the
//        │                     │                                    NVRTC source (constexpr:
//        │                     │                                    the device compiler folds
//        │                     │                                    every field to a constant)
//        │                     └──────────► emulator.cpp (the same templates as host C++,
//        │                                  the same descriptor at run time)
//        └──► KernelPlan (buffers, launches)
//
// Plain C++17 with no includes: it is compiled by NVRTC (no standard library there), by the
// host compiler, and embedded as a string. Every field is a 4-byte int or float so the struct
// has no padding; the field list macros below name every field exactly once (a host test
// checks they cover the whole struct), and the source generator walks them.
//
// Coordinates: a tensor is (N, C, D, H, W) in NCDHW order; 2-D tensors have D == 1. A
// "region" is a box [o, o + e) per spatial axis (d, h, w) of one tensor, stored in a buffer
// as [c][d][h][w] with extents e; positions outside the tensor hold 0 (convolution padding).

namespace brickdl {
namespace dev {

constexpr int kMaxLayers = 12;  // layers in one group
constexpr int kMaxSources = 2;  // inputs of one layer
constexpr int kMaxExternal = 6; // tensors a group reads from outside
constexpr int kMaxTileCo = 8;   // output channels per thread (conv register tile)
constexpr int kMaxTilePx = 4;   // consecutive w positions per thread (conv register tile)
constexpr int kMaxMmaM = 2;     // m16 tiles (output positions) per warp (tensor-core conv)
constexpr int kMaxMmaN = 4;     // n8 tiles (output channels) per warp (tensor-core conv)
constexpr int kWgmmaTileFloats = 64 * kMaxMmaN; // a wgmma weight tile: 8·kMaxMmaN x 32 bytes

enum Op : int { kOpConv = 0, kOpEltwise = 1, kOpMaxPool = 2, kOpAvgPool = 3 };
// A layer's epilogue activation (core/graph.h Activation; its clip range in clip_lo / clip_hi).
// The values are bit positions of codegen's BRICKDL_ACTS / BRICKDL_EWS masks (prelude.cuh):
// keep them and the masks' #if lines in step.
enum Act : int {
  kActNone = 0,
  kActRelu = 1,
  kActLeaky = 2,
  kActClip = 3,
  kActSigmoid = 4,
  kActSilu = 5,
  kActHardSwish = 6,
  kActHardSigmoid = 7,
  kActGelu = 8,
};
// What an elementwise layer computes before its activation (brick_ops.cuh eltwise_box): the
// sum of its sources (add, relu, leaky relu), their product (mul, channel_mul), difference,
// quotient, or one function of its one source (the formulas of kernels/detail/op_math.h).
enum Ew : int {
  kEwSum = 0,
  kEwMul = 1,
  kEwSigmoid = 2,
  kEwSilu = 3,
  kEwClip = 4,
  kEwSub = 5,
  kEwDiv = 6,
  kEwHardSwish = 7,
  kEwHardSigmoid = 8,
  kEwGelu = 9,
  kEwAffine = 10, // batch-norm: x · scale[c] + shift[c] (KernelArgs weight and bias, fp32)
};
enum SrcKind : int { kSrcExternal = 0, kSrcLayer = 1 };
enum Mode : int { kModePadded = 0, kModeMemoized = 1 };
// How a conv multiplies: FP32 FMA, or tensor-core MMA with inputs rounded to TF32 (m16n8k8),
// BF16 or FP16 (m16n8k16); tensor-core products accumulate in fp32.
enum Math : int { kMathFp32 = 0, kMathTf32 = 1, kMathBf16 = 2, kMathFp16 = 3 };
// What the tensors in global memory hold (inputs, conv weights, outputs, memoized bricks):
// fp32, or the 16-bit type of a bf16 / fp16 plan. Shared memory, biases and all arithmetic stay
// fp32; values are rounded (nearest even) when they are stored (prelude.cuh gload / gstore).
enum Storage : int { kStorageF32 = 0, kStorageBf16 = 1, kStorageF16 = 2 };

// Per-sample shape of a tensor.
struct Dims {
  int c, d, h, w;
};

// Per spatial axis: a region's origin is brick_origin * scale + offset, its extent is ext.
// (For the last layer scale = 1, offset = 0, ext = brick; producers follow backwards.)
struct RegionMap {
  int scale[3];
  int offset[3];
  int ext[3];
};

struct LayerDesc {
  int op;  // Op
  int act; // Act (conv, eltwise)
  float slope;
  int ew;                 // Ew (eltwise)
  float clip_lo, clip_hi; // kEwClip's range
  int num_src;
  int src_kind[kMaxSources];  // SrcKind
  int src_index[kMaxSources]; // external slot or layer index within the group
  Dims in;                    // shape of source 0
  Dims out;
  int groups;
  int k[3], s[3], p[3], dl[3]; // window: kernel, stride, padding, dilation (d, h, w)
  int count_include_pad;       // avg pool
  int has_bias;
  int tile_co, tile_px; // conv register tile (<= kMaxTileCo, kMaxTilePx)
  // Tensor-core conv (mma_m > 0): each warp computes mma_m x 16 output positions by
  // mma_n x 8 output channels per tile; the weights are packed with tile_co == 8. mma_m == 0:
  // the FP32 FMA path (register tile tile_co x tile_px).
  int math; // Math
  int mma_m, mma_n;
  // Tensor-core conv on sm_90a (wgmma != 0): each warpgroup computes mma_m x 64 positions
  // (warp w of it rows 16·w .. 16·w + 15 of each 64) by mma_n x 8 channels with wgmma, its
  // weight tiles staged in two buffers of kWgmmaTileFloats at wgmma_smem + 2 ·
  // kWgmmaTileFloats · warpgroup (floats from the block's shared memory; mma.cuh).
  int wgmma;
  int wgmma_smem;
  // A streamed wgmma conv whose tiles are at most one per warpgroup: the accumulators stay in
  // registers across the input's passes (no partial sums in shared memory).
  int acc_regs;
  // Padded: the region this layer computes per unit of work, and where it lives in shared
  // memory (floats; -1 for the last layer, which writes the output tensor).
  RegionMap region;
  int smem_out;
  // Padded, a conv whose source 0 is a streamed external input: its input channels arrive in
  // chunks of stream_c through two shared-memory buffers at stream_smem and stream_smem +
  // stream_next (floats; double buffered); partial sums accumulate in the layer's own region,
  // or (last layer) in acc_smem (cb_last x brick). Memoized streamed convs likewise, their
  // buffers at stage_smem and stage_smem + stream_next.
  int stream_c;
  int stream_smem;
  int stream_next;
  int acc_smem;
  // Memoized: this layer's output is bricked: extents `bext` (the candidate's brick clamped
  // to this tensor), `cb` channels per brick, `nblk` bricks per axis c, d, h, w per sample.
  // Intermediate bricks live in KernelArgs::memo from `memo_offset` (elements), `brick_stride`
  // elements each (of GroupDesc::storage), and their state flags in KernelArgs::flags from
  // `flag_offset`.
  int bext[3];
  int cb;
  int nblk[4];
  int memo_offset;
  int brick_stride;
  int flag_offset;
  // Memoized: shared-memory staging buffer of source 0 of a window op (floats).
  int stage_smem;
  // Padded with a cluster (GroupDesc::cluster > 1): the channels of this layer's output each
  // rank holds and computes (core/group.h cluster_slice); 0 without a cluster.
  int cslice;
};

// A tensor the group reads from outside (graph input, an earlier group's output, a skip).
struct ExternalDesc {
  Dims dims;
  int staged;       // padded: loaded once into shared memory (it feeds a window op), freed
                    // after its last window reader; elementwise readers (a residual add) read
                    // it from global memory at the output's coordinates
  int streamed;     // padded: its one reader streams it in channel chunks instead
  RegionMap region; // padded, when staged
  int smem;         // padded, when staged: float offset
  int cslice;       // padded with a cluster, when staged: the channels each rank stages
};

struct GroupDesc {
  int mode; // Mode
  int num_layers;
  int batch;
  int nb;           // batch block: images per unit of work (padded; 1 for memoized)
  int brick[3];     // bd, bh, bw (bd == 1 for 2-D)
  int cb_last;      // channels per unit of work of the last layer
  int nblk_last[4]; // units of work per axis c, d, h, w per batch block
  int smem_image;   // padded: shared memory of one image of the unit (floats); image j of the
                    // unit has its regions at j * smem_image
  int smem_floats;  // dynamic shared memory per block
  int storage;      // Storage of every global tensor the kernel reads or writes
  // Padded: CTAs of a thread block cluster that compute one unit together (sm_90), each the
  // channel slice `cslice` of every layer and staged input, reading the other slices from the
  // other CTAs' shared memory (padded.cuh); 1 = no cluster.
  int cluster;
  int num_external;
  ExternalDesc ext[kMaxExternal];
  LayerDesc layers[kMaxLayers];
};

// What a launch needs at run time (device pointers; host pointers under emulation). ext,
// weight, out and memo hold GroupDesc::storage elements (typed float* for fp32; 16-bit values
// otherwise, reached only through gload / gstore / goffset), bias is fp32.
struct KernelArgs {
  const float* ext[kMaxExternal];  // NCDHW
  const float* weight[kMaxLayers]; // conv: packed (codegen.h pack_conv_weights); batch-norm:
                                   // its scale, [c], fp32
  const float* bias[kMaxLayers];   // conv with bias: [cout], fp32; batch-norm: its shift
  float* out;                      // NCDHW output of the last layer
  float* memo;                     // memoized: intermediate bricks
  int* flags;                      // memoized: one state flag per intermediate brick
  unsigned long long* stats;       // kStat* counters, accumulated with atomics
  int* error;                      // set to kErrorTimeout when a wait exceeds spin_limit
  int epoch;                       // memoized: flags <= 2·epoch are free this launch
  long long spin_limit;            // clock ticks a block may wait for one brick
};

// Counters a memoized kernel accumulates in KernelArgs::stats.
enum Stat : int {
  kStatClaims = 0,    // bricks claimed and computed (compulsory atomics)
  kStatHits = 1,      // dependencies found done
  kStatConflicts = 2, // dependencies found claimed by another block, or a lost claim
  kStatWaits = 3,     // spin iterations spent waiting for other blocks
  kStatBricks = 4,    // bricks computed, all layers (including the last)
  kNumStats = 5,
};
constexpr int kErrorTimeout = 1;

} // namespace dev
} // namespace brickdl

// X-macro lists of every field, for the source generator and the coverage test.
// X(expr) receives a field access relative to the struct, e.g. X(k[0]).
// clang-format off
#define BRICKDL_DIMS_FIELDS(X, p) X(p.c) X(p.d) X(p.h) X(p.w)
#define BRICKDL_REGION_FIELDS(X, p)                                                              \
  X(p.scale[0]) X(p.scale[1]) X(p.scale[2]) X(p.offset[0]) X(p.offset[1]) X(p.offset[2])        \
  X(p.ext[0]) X(p.ext[1]) X(p.ext[2])
#define BRICKDL_LAYER_DESC_FIELDS(X)                                                             \
  X(op) X(act) X(slope) X(ew) X(clip_lo) X(clip_hi) X(num_src) X(src_kind[0]) X(src_kind[1]) X(src_index[0])                 \
  X(src_index[1]) BRICKDL_DIMS_FIELDS(X, in) BRICKDL_DIMS_FIELDS(X, out) X(groups) X(k[0])       \
  X(k[1]) X(k[2]) X(s[0]) X(s[1]) X(s[2]) X(p[0]) X(p[1]) X(p[2]) X(dl[0]) X(dl[1])             \
  X(dl[2]) X(count_include_pad) X(has_bias) X(tile_co) X(tile_px) X(math) X(mma_m) X(mma_n)       \
  X(wgmma) X(wgmma_smem) X(acc_regs)                                                             \
  BRICKDL_REGION_FIELDS(X, region) X(smem_out) X(stream_c) X(stream_smem) X(stream_next) X(acc_smem) X(bext[0]) X(bext[1]) X(bext[2]) X(cb)           \
  X(nblk[0]) X(nblk[1]) X(nblk[2]) X(nblk[3]) X(memo_offset) X(brick_stride) X(flag_offset)     \
  X(stage_smem) X(cslice)
#define BRICKDL_EXTERNAL_DESC_FIELDS(X)                                                          \
  BRICKDL_DIMS_FIELDS(X, dims) X(staged) X(streamed) BRICKDL_REGION_FIELDS(X, region) X(smem) X(cslice)
#define BRICKDL_GROUP_DESC_FIELDS(X)                                                             \
  X(mode) X(num_layers) X(batch) X(nb) X(brick[0]) X(brick[1]) X(brick[2]) X(cb_last)         \
  X(nblk_last[0]) X(nblk_last[1]) X(nblk_last[2]) X(nblk_last[3]) X(smem_image) X(smem_floats) \
  X(storage) X(cluster) X(num_external)
// clang-format on
