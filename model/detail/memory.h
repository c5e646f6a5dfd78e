#pragma once
// The estimated part of the model: occupancy, what hits in L2, and time.
//
// Counted exactly (shared with the CPU executor): FLOPs, bricks, claims, lookups and the
// bytes a kernel issues. Estimated here, with these assumptions:
//
// Occupancy. Resident blocks per SM = min(threads, shared memory, registers, 32 blocks).
//   Registers per thread = 32 + 4 per output a thread accumulates (brick volume / threads,
//   at most 32), capped at the spec's maximum (beyond it the compiler spills; not
//   infeasible). Bandwidth and FP throughput need some warps to hide latency: below 25 % of
//   the SM's thread slots they scale down linearly (kOccupancyForPeak).
//
// Cold group. Every group starts with a cold L2: its external inputs and weights come from
//   DRAM once (the measurement protocol flushes L2 between repetitions, and a prediction must
//   depend on the group's workload alone, not on what ran before). The group's output is
//   written back to DRAM once (dirty lines are written back eventually).
//
// L2 reuse (merged kernels). Thread blocks run in launch order, channel block fastest, then
//   w, h, d, image. A region re-read by a unit Δ blocks later hits in L2 when Δ blocks' worth
//   of unique traffic fits the share of L2 a kernel can count on (l2_resident_fraction ·
//   capacity), or when both blocks are resident at once (Δ < concurrent blocks). Re-reads are
//   split by the axis along which neighbours overlap, with the identity
//     Π S_a − Π U_a = Σ_a (S_a − U_a) · Π_{b<a} U_b · Π_{b>a} S_b
//   (S_a: sum of per-brick extents along axis a, U_a: their union; axes fastest first), so
//   each term has one reuse distance. First touches of external inputs miss; first touches
//   of memoized intermediates hit (they were just stored by the same or a nearby block).
//
// Write-back of intermediates. Memoized bricks and layerwise intermediates are dirty in L2.
//   Those evicted while the group runs are written to DRAM; those still resident when it
//   ends are dead scratch that the next kernel overwrites in L2 (no write-back). For
//   memoized, the evicted share is 1 − (L2 share / the kernel's unique footprint), at least
//   0. Layerwise kernels run an LRU of whole buffers: a tensor read again hits when the
//   bytes touched since its last use, itself included, fit the L2 share. A layer that writes
//   in place (Layer::in_place: the paper's unfused passes) rewrites its input's buffer: the
//   input, overwritten while resident, is never written back; evicted before the layer
//   reads it, it was (its read misses).
//
// L1 / L2 bytes. A block stages each region it reads once (shared memory), so l1_bytes is
//   what the kernel issues and reaches L2 unchanged; memoized adds one 32-byte sector per
//   flag lookup and two per claim (claim, publish), which L2 serves (atomics bypass L1).
//   Weights are the exception: they are counted once per unit (all its images), while the
//   kernels load them per register tile from global memory. A conv's tiles run positions
//   fastest over every image of the unit (docs/kernels.md, Batch blocks), so the warps in
//   flight share a channel tile's weights through L1 and L2 sees about one read per unit
//   while each warp gets at most one position tile per channel tile; beyond that (16x16
//   bricks with halos, nb = 8) a channel tile's K extent is read again per round of tiles,
//   from L2 unless L1 still holds it. Neither the per-tile L1 requests nor those rounds are
//   counted yet: the GPU's L1 / L2 counters are to say how much they add.
//
// Layerwise L1 / L2 bytes. A library kernel runs a conv, conv_transpose or linear layer as an
//   implicit GEMM in CTA tiles of output positions × output channels: each tile loads the
//   input rows of its positions and the weights of its channels, so the input is read once
//   per channel tile and the weights once per position tile. The estimate is the least of
//   these over tiles 64-256 on a side, at most 256 × 128 accumulators (strategies/
//   layerwise.cpp library_tiles), with no halo and no split-K: it never exceeds what cuDNN
//   issues. The tensors once (the bytes by kind) are a floor no kernel that fills the GPU
//   reaches: a CTA doing w MACs of a GEMM touches at least 3·w^(2/3) distinct operands
//   (Loomis-Whitney: w ≤ sqrt(|A|·|B|·|C|)), so work W spread evenly over P SMs, which share
//   nothing but L2, moves at least 3·P^(1/3)·W^(2/3) elements. ResNet-50 layer3.1 conv1 at
//   batch 8 (1568 × 256 × 1024 MACs) on the A100's 108 SMs: at least 31.6 MB, against 9.1 MB
//   for its tensors once; the tiles' estimate is 21.7 MB (128 × 256: 13 tiles, 13 SMs).
//   Merged kernels' bytes count their weight re-reads per unit, so both sides count re-reads.
//   The layerwise time keeps the tensors once (the library at its roofline bound, never
//   charged for tiles we guessed).
//
// Clusters (padded, brick.cl > 1). A unit's CTAs run at once on one GPC and meet at cluster
//   barriers, one per layer per unit (barrier_ns, as a block's: to calibrate). The L2 window
//   counts units (concurrent CTAs / cl); the roofline counts CTAs (units × cl). Their reads of
//   each other's shared memory (dsmem_bytes) cross the SM-to-SM network, whose bandwidth is in
//   no spec sheet: they are charged at the L2 bandwidth (t_l2) until the GPU measures them.
//
// Time. Per kernel, t_dram = DRAM bytes / (peak · dram_efficiency · u_mem), t_l2 likewise,
//   t_compute = FLOPs / (peak · compute_efficiency · u_compute), where u_mem = min(1, blocks /
//   SMs) and u_compute = (blocks / SMs) / ceil(blocks / SMs) (the last partial wave), both
//   times the occupancy factor. The peak follows the precision, the same for library (cuDNN)
//   and generated kernels, which run the same math: fp32 the FP32 FMA peak (strict FP32:
//   cuDNN with CUDNN_FMA_MATH, the generated kernels' FMA path), tf32 the TF32 tensor peak,
//   bf16 and fp16 their 16-bit tensor peaks (mma.sync with FP32 accumulation), dense rates.
//   Atomics: claims × atomic_ns. Conflicts (a lookup finding the brick CLAIMED by another
//   block): a re-lookup along an axis with reuse distance Δ comes from a block that runs at
//   the same time with probability max(0, 1 − Δ / concurrent blocks). A block computes
//   bricks_total / units bricks one after the other, so a brick is being computed for a
//   fraction units / bricks_total of a block's life; the looking-up block reaches the shared
//   brick second half of the time (the first one claims it): the lookup conflicts with
//   probability 0.5 · units / bricks_total. Each conflict costs conflict_ns (re-polls of the
//   flag; the SM's other resident blocks keep it busy meanwhile). Barriers: one per layer per
//   unit (padded) or two per brick (memoized), and in both a streamed conv one more per chunk
//   pass beyond the first (core/group.h stream_chunk_channels, memoized_stream_chunk), barrier_ns
//   each, overlapped across the concurrent blocks. The streamed passes' accumulator traffic
//   (Prediction::smem_acc_bytes: every pass but the first reloads the accumulator, every one
//   but the last stores it) is charged at the spec's shared-memory bandwidth (32 banks x 4 B
//   per clock per SM) and added to t_compute (t_smem): the SM's pipes, in series with the
//   math; the operand loads of the math itself are in its efficiency. Launches: one per kernel,
//   launch_us each.
#include <array>
#include <string>

#include "core/gpu_spec.h"
#include "core/graph.h"
#include "model/cost_model.h"

namespace brickdl::model::detail {

inline constexpr double kOccupancyForPeak = 0.25;
inline constexpr int kMaxBlocksPerSm = 32;
inline constexpr double kSectorBytes = 32;
// Share of concurrent re-lookups that reach a shared brick second (the first one claims it).
inline constexpr double kConflictOverlap = 0.5;
// Library kernels (layerwise): outputs per thread block, for the grid size they report (their
// time assumes they fill every SM: model/strategies/layerwise.cpp).
inline constexpr double kLibraryOutputsPerBlock = 2048;
// Library kernels (layerwise): the largest CTA tile of an implicit GEMM, in accumulators
// (256 × 128: the largest tiles of the tensor-core kernels on sm_80 / sm_90).
inline constexpr double kLibraryTileAccumulators = 256.0 * 128.0;
// Shared memory the runtime reserves per block.
inline constexpr double kReservedSmemPerBlock = 1024;

struct Occupancy {
  int blocks_per_sm = 0;
  double concurrent_blocks = 0; // blocks_per_sm · SMs
  double factor = 1;            // throughput scale from too few resident warps
  std::string reason;           // non-empty when nothing fits on an SM
};

// Registers per thread of a merged kernel, as ptxas allocates them for the generated kernels
// (benchmarks/kernel_report, NVRTC 13.0, sm_80 / sm_90, ResNet-50 block 1 and layer3.1,
// bricks 4x4 and 8x8, batch blocks 1-8, channel blocks, 256 and 512 threads): the FP32 FMA
// path 83-128, the tensor-core path 95-128, most of them 110-128. The kernels ask ptxas for
// at most 128 per thread (codegen.cpp launch_min_blocks); without that hint it chose as few
// as 64 and spilled. The model takes kRegistersFma / kRegistersMma; the GPU's own counts
// (cuFuncGetAttribute) are to replace them once measured.
inline constexpr int kRegistersFma = 120;
inline constexpr int kRegistersMma = 120;
// __launch_bounds__(threads) caps them so that one block fits an SM (ptxas spills beyond).
int estimate_registers(const GpuSpec& gpu, bool tensor_cores, int threads);
Occupancy occupancy(const GpuSpec& gpu, int threads, double smem_bytes, int registers);

// Loads of one stream split into first touches and re-reads at four reuse distances.
struct ReuseSplit {
  double first = 0;
  std::array<double, 4> reread{};   // per axis, fastest first
  std::array<double, 4> distance{}; // in thread blocks
};
// S, U, distance ordered fastest axis first; scale multiplies every part (batch · bytes).
ReuseSplit split_reuse(const std::array<double, 4>& sum, const std::array<double, 4>& uni,
                       const std::array<double, 4>& distance, double scale);

struct L2Window {
  double share_bytes = 0;     // l2_resident_fraction · capacity
  double bytes_per_block = 0; // unique traffic of one thread block
  double concurrent = 1;      // resident blocks
  bool hits(double distance) const {
    return distance < concurrent || distance * bytes_per_block <= share_bytes;
  }
  double misses(const ReuseSplit& s) const {
    double m = 0;
    for (size_t a = 0; a < 4; ++a)
      if (!hits(s.distance[a]))
        m += s.reread[a];
    return m;
  }
  // Expected conflicting lookups among the re-lookups of `s` (counts, not bytes), when a
  // brick is CLAIMED but not DONE a fraction `claimed` of the time.
  double conflicts(const ReuseSplit& s, double claimed) const;
};

// The coefficients with the spec's defaults filled in. A rate the spec carries as measured on
// the device (GpuSpec::measured, core/gpu_calibration.h) is already what kernels achieve: its
// efficiency is the coefficient's ratio to the default (1 with the defaults, so the measured
// rate is taken as it is; a fitted coefficient, model/calibration.h, keeps its correction).
// The tensor fractions are in the model's terms: of the rate the library reaches (the peak ×
// compute_efficiency, which the roofline applies to every kernel), so a measured share of the
// peak itself is divided by the default compute efficiency here.
struct ResolvedCoefficients {
  double dram_efficiency, l2_efficiency, compute_efficiency;
  double atomic_ns, launch_us, conflict_ns, barrier_ns, l2_share_bytes;
  double mma_sync_fraction, wgmma_fraction; // merged tensor-core convs (strategies.h)
};
ResolvedCoefficients resolve(const GpuSpec& gpu, const Coefficients& c);

// Peak FLOP/s of the math `dtype` runs: the same for library and generated kernels.
double peak_flops(const GpuSpec& gpu, DType dtype);

// Adds one kernel's roofline terms to p (t_* and bound_*). Returns max of the three (ms).
// `smem_bytes` (shared-memory traffic beyond what the FLOPs imply) adds its time at the
// spec's shared-memory bandwidth to the compute term: the SM's own pipes, in series.
double add_kernel_roofline(const GpuSpec& gpu, const ResolvedCoefficients& c, DType dtype,
                           double dram_bytes, double l2_bytes, double flops, double blocks,
                           double occupancy_factor, Prediction& p, double smem_bytes = 0);

// time_ms = bound terms + atomics + launch + sync (all already in p).
void finish_time(Prediction& p);

} // namespace brickdl::model::detail
