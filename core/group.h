#pragma once
// Groups: the layers one merged kernel runs (the paper's subgraphs), and every rule about
// them, in one place.
//
//   Graph + Group ──group_invalid_reason()──► "" when it is a group at all
//                 ──brick_blocker()─────────► "" when padded / memoized can run it
//                 ──group_external_inputs()─► the tensors it reads from outside
//                 ──workload_signature()────► the key the tuning database shares results by
//
// A group is a contiguous range [first, last] of a (fused) graph's topological order whose
// only output leaving the group is its last layer's; inputs may come from outside (residual
// skips). The graph's inputs (layer 0, or layers 0 .. num_inputs() − 1) are never in a group.
// A graph output before a group's last layer is written by layerwise execution, as every layer
// is; padded and memoized refuse such a group (brick_blocker). The model (model/detail/geometry),
// the search space, the CPU executor and the CUDA code generator all ask these functions, so
// they agree on what a group is and what it reads.
#include <string>
#include <vector>

#include "core/graph.h"

namespace brickdl {

struct Group {
  int first = 1; // inclusive
  int last = 1;  // inclusive
  int size() const { return last - first + 1; }
  bool contains(int id) const { return id >= first && id <= last; }
  bool operator==(const Group& o) const = default;
};

// Empty when `group` is a group of `graph`; else why not: a range outside the computed layers
// num_inputs()..size−1, or a layer before the last whose output is read outside the group (named).
std::string group_invalid_reason(const Graph& graph, const Group& group);
bool is_valid_group(const Graph& graph, const Group& group);

// The tensors (producer layer ids) that layers of `group` read but the group does not
// produce, in order of first read: the first layer's input, residual skips, ...
std::vector<int> group_external_inputs(const Graph& graph, const Group& group);

// Empty when padded and memoized can compute every layer of the (valid) group brick by
// brick (is_brickable, core/op_traits.h) and store every output the group must leave (a graph
// output before its last layer stops them); else why not, naming the first layer that stops
// them.
std::string brick_blocker(const Graph& graph, const Group& group);

// Padded merged kernels stream an external input through shared memory in chunks of
// kStreamChunkChannels input channels, instead of staging all its channels at once, when its
// only window reader in the group is one conv with groups == 1 (other readers, a residual add,
// read it from global memory: padded.cuh) and it has more channels than the
// kStreamBuffers chunks that are in shared memory at once (double buffering: the next chunk
// is copied, asynchronously, while the conv consumes this one): then only the intermediate
// tiles must fit on chip with all their channels. Returns the channels per chunk, or 0 when
// the input is staged whole (or not staged at all). The model's footprint
// (model/strategies/padded.cpp) and the code generator (kernels/cuda/codegen.cpp) both ask it.
constexpr int kStreamChunkChannels = 32;
constexpr int kStreamBuffers = 2;
int stream_chunk_channels(const Graph& graph, const Group& group, int input_id);
// Memoized merged kernels stage each window layer's input per brick; a conv with groups == 1
// whose staged input (`staged_channels` x `staged_points` positions) is over
// kStageWholeElements and spans more than the kStreamBuffers chunks in flight streams it in
// chunks instead, with its partial sums in an accumulator of `acc_elements` (cb x brick), when
// those chunks plus the accumulator are smaller than the whole input (smaller inputs stay
// whole: the streamed passes cost registers). Returns the channels per chunk, or 0: normally
// kStreamChunkChannels; when its chunks plus the accumulator exceed `budget_elements` (the
// target's shared memory per block, in 4-byte elements), the chunk halves until they fit or it
// reaches kMinStreamChunkChannels (one tensor-core k-step), trading more passes over the
// accumulator for the space. The model and the code generator pass the same budget.
constexpr int64_t kStageWholeElements = 12288; // 48 KiB of fp32
constexpr int kMinStreamChunkChannels = 8;
int memoized_stream_chunk(const Layer& layer, int64_t staged_channels, int64_t staged_points,
                          int64_t acc_elements, int64_t budget_elements);

// Generated kernels multiply a conv on tensor cores (mma.sync: kernels/cuda/templates/
// conv_mma.cuh) when the precision has tensor-core math (tf32, bf16, fp16: has_tensor_math)
// and its output channels split into whole tiles of 8 per conv group and per block of
// `channels_per_block` channels that one unit computes; else on FP32 FMA units (depthwise
// and narrow convs). The code generator and the model's compute time both ask.
bool has_tensor_math(DType precision);
bool conv_on_tensor_cores(bool tensor_math, int64_t out_channels, int64_t groups,
                          int64_t channels_per_block);

// Hopper's warpgroup MMA (wgmma, sm_90a): a target that has it runs the tensor-core convs of a
// merged kernel with `threads` threads on it when the block is whole warpgroups of 128
// threads (else mma.sync). Each warpgroup stages its weights in two tiles of kWgmmaTileBytes
// (kernels/cuda/templates/mma.cuh): wgmma_tile_floats more shared memory per block, in 4-byte
// elements, when any conv of the kernel runs on wgmma.
constexpr int kWgmmaTileBytes = 1024;
bool uses_wgmma(bool target_has_wgmma, int threads);
int64_t wgmma_tile_floats(int threads);

// The tensor-core tile of a conv whose unit computes `box_points` output positions (all its
// images) by `channels_per_unit` channels, `cout_g` output channels per conv group: m row
// blocks of 16 positions per warp (wgmma: 64 per warpgroup) by n tiles of 8 channels, n the
// largest power of two up to kMmaMaxN dividing cout_g / 8 and channels_per_unit / 8, both as
// large as possible while every warp (warpgroup) of `threads` still has a tile (codegen's
// choice; the model asks the same).
constexpr int kMmaMaxM = 2, kMmaMaxN = 4;
struct MmaTile {
  int m = 0, n = 0;
};
MmaTile choose_mma_tile(int64_t box_points, int64_t cout_g, int64_t channels_per_unit, int threads,
                        bool wgmma);
int64_t mma_tile_count(int64_t box_points, int64_t channels_per_unit, MmaTile t, bool wgmma);
// A streamed conv on wgmma keeps its accumulators in registers across its input's passes when
// each warpgroup has at most one tile (in the kernel's n tile, the narrowest of its wgmma
// convs): no partial sums through shared memory between passes. TF32 without clusters only, as
// ptxas shows: the 16-bit formats' A fragments take twice the registers (k16) and their kernels
// already sit at the register cap (ResNet-50 layer2.1 conv2 .. add, bf16, 4-CTA clusters: a
// 688-byte stack frame with them), and a cluster's gather (an address per rank) does not fit
// beside them either (layer3's block on 8 / 16-CTA clusters, tf32: 448 / 192-byte stack frames),
// nor do more than three layers of a kernel (layer4.1 conv1 .. add memoized 8x8/c64/n2, tf32:
// a 1216-byte stack frame; conv2 .. add and conv1 .. conv3: none).
constexpr int kMaxLayersWithAccInRegisters = 3;
bool wgmma_acc_in_registers(int64_t box_points, int64_t channels_per_unit, MmaTile t, int threads,
                            bool tf32, int cluster, int layers);

// The widest n tile the wgmma convs of one kernel share (codegen's reserve_wgmma_tiles takes the
// narrowest any of them chooses, then at most this; the model's kernel_wgmma_n the same). With
// 16-bit tensors in global memory and several images per unit, n = 4 does not fit under the
// 128-register cap, as ptxas 13.0 shows for ResNet-50's layer1.1 conv1 .. add in bf16 for the
// H200 (the device bundle's kernels): padded 8x8/n2 a 464-byte stack frame and its wgmma
// serialized (C7515), memoized 8x8/n2 and 16x16/n2 992 bytes (C7520); at n = 2 89 and 105
// registers, no stack frame and no advisory. fp32 storage (tf32) and one image per unit
// (bf16 n1: 115 / 128 registers) fit at n = 4.
constexpr int kMaxWgmmaNSixteenBitBatched = 2;
int max_kernel_wgmma_n(bool sixteen_bit_storage, int batch_block);

// Thread block clusters (sm_90, padded only): the `cluster` CTAs of a unit split the channels
// of every tensor the unit holds in shared memory, and of its output: rank q holds and
// computes channels [q·s, (q+1)·s) of a tensor with `channels` channels, s =
// cluster_slice(channels, cluster), and reads the other ranks' slices through distributed
// shared memory. s is ceil(channels / cluster), rounded up to a multiple of 8 when the channels
// are one (slices of whole tensor-core tiles and packed weight tiles), so the last ranks may
// hold fewer channels or none. cluster == 1: s == channels.
int cluster_slice(int64_t channels, int cluster);
// An input streamed in a cluster kernel (stream_chunk_channels > 0): every rank stages
// cluster_stream_slice(cluster) channels of each chunk, so a chunk (one pass) covers that
// times `cluster` channels: at least kStreamChunkChannels, and at least 8 per rank.
int cluster_stream_slice(int cluster);

// The canonical workload signature of a group: the key under which the tuning database
// shares predictions and measurements across positions, runs and models (ResNet's repeated
// blocks are one workload). It names every layer by its position in the group (L0, L1, ...)
// and every tensor read from outside by the order in which the group first reads it (X0,
// X1, ...), so it depends neither on layer names nor on where the group sits. It holds what
// determines the work: ops, attributes (attribute_text, core/op_traits.h), epilogues, the
// shapes of the external inputs and of every layer's output (without the batch), the batch
// and the precision, and, only where a graph output lies before the last layer, which layers
// those are (" | outputs L1"), e.g.
//   "v1 n8 fp32 | X0=64x56x56 | L0=conv(X0) k1x3x3 s1x1x1 p0x1x1 d1x1x1 g1 c64 b1 relu
//    -> 64x56x56 | ..."
std::string workload_signature(const Graph& graph, const Group& group);

// Human-readable summary: "conv3x3 64->64 56x56 +relu | add +relu".
std::string workload_description(const Graph& graph, const Group& group);

// "layer1.0.conv1 .. layer1.0.conv3", or the single layer's name.
std::string group_layer_names(const Graph& graph, const Group& group);

} // namespace brickdl
