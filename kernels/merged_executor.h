#pragma once
// Merged execution of one group of layers on the CPU.
//
//   external inputs (full tensors) ──► execute_group(graph, candidate, ...) ──► output tensor
//                                              │                                + ExecCounters
//               ┌──────────────────────────────┼─────────────────────────────┐
//           layerwise                        padded                       memoized
//     one layer at a time over     one unit per brick of the      a bricked store per
//     whole tensors (block         last layer's output: every     intermediate layer, one
//     kernels; reference ops for   earlier layer recomputed over  atomic state flag per brick
//     gap / flatten / linear)      the unit's region (all         (EMPTY → CLAIMED → DONE);
//                                  channels) in unit-local        each needed brick computed
//                                  buffers                        once, recursively, by
//                                                                 whichever worker claims it
//     (strategies/layerwise.cpp)   (strategies/padded.cpp)        (strategies/memoized.cpp)
//
// merged_executor.cpp resolves the group once (detail/group_info.h: where each input comes
// from, who reads each layer) and dispatches (strategies/strategies.h); all three compute on the
// channel-blocked layout (kernels/cpu/blocked.h: nChw8c on AVX2, nChw16c on AVX-512) with the
// CPU kernels of kernels/cpu/region_ops.h (libxsmm's batch-reduce GEMM for convs and linear
// layers, vector loops for the rest), on OpenMP threads. Parameters are packed once per
// PackedModel (kernels/cpu/packed.h), not per call.
//
// Counting conventions are those at the top of model/cost_model.h (the analytic model
// predicts the same counts for the same candidate), made precise here:
//  - flops: 2 · (output elements computed) · (Cin / groups) · kernel volume, for conv layers
//    (linear layers: 2 · MACs, layerwise only); other ops 0. useful_flops = 2 · MACs of the
//    group's layers.
//  - Regions are those of kernels/region.h. A tensor read by several layers of a unit (padded)
//    or by several inputs of one layer is needed over the hull of what each read needs.
//  - Batch blocks (BrickShape::nb, clamped to [1, batch]): a unit, and a memoized brick,
//    covers the same brick in nb consecutive images (the last block may hold fewer). Per unit
//    or brick, bricks, weights, claims and lookups count once; elements (FLOPs, loads, stores)
//    count once per image.
//  - padded: unit = one brick of the last layer (batch block, channel block, spatial brick).
//    Earlier layers are computed over the hull of what their in-group consumers need, with
//    all their channels; the last layer over the brick (clipped), its channel block only.
//    bricks_computed.<i> += 1 per unit for every layer computed (non-empty region).
//    bytes_loaded.input += per image, each external input's needed region (channels included)
//    as the generated kernel loads it: the hull of what its window readers (conv, pool) need,
//    staged once, plus what each other reader (an elementwise op: a residual add) needs, read
//    again from global memory (over the reader's slots reading the input);
//    bytes_loaded.weight += per unit, the parameters of every layer computed, the last layer's
//    scaled to its channel block (params · channels in block / channels); intermediates are
//    neither stored nor re-loaded (they stay in the unit).
//  - memoized: every brick of the last layer is computed; a brick of an intermediate layer is
//    computed iff some computed consumer brick needs part of it. A computed brick covers its
//    whole (clipped) extent and its channel block. Per computed brick: memo_lookups += number
//    of intermediate producer bricks its needed region touches (channel blocks included); each
//    lookup is exactly one of a claim (the brick was EMPTY and this worker computed it),
//    a hit (DONE) or a conflict (CLAIMED by another worker, then waited for), so
//    memo_lookups = memo_claims + memo_hits + memo_conflicts, and memo_claims = intermediate
//    bricks computed. bytes_loaded.intermediate += needed region of each intermediate input;
//    bytes_loaded.input += needed region of each external input; bytes_loaded.weight +=
//    params · channels in block / channels; bytes_stored.intermediate += the brick's clipped
//    volume × its channels (intermediates); bytes_stored.output likewise for the last layer.
//  - layerwise: each layer reads each distinct input tensor whole once, its parameters once,
//    and writes its output whole once; no bricks, no memo counters.
//  - bytes = elements × the graph's element size (dtype_bytes), whatever the CPU computes in.
// flops, bricks, claims, lookups and bytes do not depend on the number of threads; how the
// lookups split into hits and conflicts does.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"
#include "kernels/cpu/blocked.h"
#include "kernels/cpu/packed.h"
#include "kernels/tensor.h"
#include "kernels/weights.h"

namespace brickdl::kernels {

namespace cpu {
class OnednnGroup;
} // namespace cpu

struct ExecCounters {
  int64_t flops = 0;
  int64_t useful_flops = 0;
  std::vector<int64_t> bricks_per_layer; // index = layer id − group.first
  int64_t memo_claims = 0, memo_hits = 0, memo_conflicts = 0, memo_lookups = 0;
  int64_t bytes_loaded_input = 0, bytes_loaded_weight = 0, bytes_loaded_intermediate = 0;
  int64_t bytes_stored_intermediate = 0, bytes_stored_output = 0;

  int64_t bricks_computed() const;
  int64_t bytes_loaded() const {
    return bytes_loaded_input + bytes_loaded_weight + bytes_loaded_intermediate;
  }
  int64_t bytes_stored() const { return bytes_stored_intermediate + bytes_stored_output; }
  // Adds `o` (the per-layer vector element-wise, growing it when needed).
  void add(const ExecCounters& o);
  // The counters under their contract names: "flops", "useful_flops", "bricks_computed",
  // "bricks_computed.<i>", "memo_claims", "memo_hits", "memo_conflicts", "memo_lookups",
  // "bytes_loaded.input", "bytes_loaded.weight", "bytes_loaded.intermediate",
  // "bytes_stored.intermediate", "bytes_stored.output", "bytes_loaded", "bytes_stored".
  std::map<std::string, double> to_map() const;
};

// What a memoized worker found when it looked up an intermediate brick (ExecOptions).
enum class MemoEvent { kClaim, kConflict };
using MemoObserver = std::function<void(MemoEvent, int layer, int64_t brick)>;

struct ExecOptions {
  int threads = 1; // worker threads for padded / memoized; 0 = usable_cpus()
  // Optional; memoized only. Called on the worker's own thread with the group layer index and
  // the brick (unit) index: kClaim right after the worker claimed the brick and before it
  // computes it (the claim is held while the observer runs, so other workers that need the
  // brick meet a conflict), kConflict when the worker found the brick claimed by another.
  // Tests use it to make a conflict certain; it must be thread-safe.
  MemoObserver memo_observer = nullptr;
  // Lanes of the blocked layout the Tensor overload of execute_group converts to (8 or 16;
  // 0: the ISA's, kernels/cpu/isa.h). The blocked overload takes its inputs' lanes.
  int lanes = 0;
  // padded / memoized: the output starts as NaN (padding lanes too), so that an element a
  // strategy failed to write shows. The Tensor overload of execute_group always sets it.
  bool poison_output = false;
  // A layerwise candidate runs through this oneDNN preparation of its group
  // (kernels/cpu/onednn.h) instead of the brick kernels; null: the brick kernels. Ignored by
  // padded and memoized.
  const cpu::OnednnGroup* onednn = nullptr;
};

// The CPUs this process may run on: its affinity mask, which mpirun's binding, taskset and
// cpusets narrow (std::thread::hardware_concurrency() counts the machine's). At least 1.
int usable_cpus();

struct GroupResult {
  bool supported = true;
  std::string reason; // why not, when !supported
  Tensor output;      // the last layer's output
  // The outputs of the group's layers before the last that are graph outputs, by layer id:
  // layerwise only (padded and memoized refuse such groups: core/group.h brick_blocker). Their
  // stores count as intermediate stores, as every layerwise layer's do.
  std::map<int, Tensor> inner_outputs;
  ExecCounters counters;
  // Layers of a layerwise group that ran on the reference ops for want of a CPU kernel
  // ("<layer>: why"), as the report lists them.
  std::vector<std::string> fallbacks;
};

// The same on the blocked layout: what plans and measurements run (no conversion inside).
struct BlockedGroupResult {
  bool supported = true;
  std::string reason;
  cpu::BlockedTensor output;
  std::map<int, cpu::BlockedTensor> inner_outputs;
  ExecCounters counters;
  std::vector<std::string> fallbacks;
};

// Empty when `candidate` can run on the CPU executor, else why not: the group rules of
// core/group.h (an intermediate that leaves the group; for padded / memoized, a layer that is
// not brickable) or a brick with an extent < 1.
std::string unsupported_reason(const Graph& graph, const Candidate& candidate);

// Runs `candidate` on `graph` (fused or not). inputs[k] is the full output tensor of
// group_external_inputs(graph, group)[k] (core/group.h); weights cover the group's layers. An
// unsupported candidate returns supported = false and no output.
// Converts the inputs to the blocked layout of options.lanes, packs the group's parameters,
// runs, and converts the outputs back: for tests and one-off runs (plans and measurements use the
// blocked overload, which converts nothing).
GroupResult execute_group(const Graph& graph, const Candidate& candidate,
                          const std::vector<const Tensor*>& inputs, const ModelWeights& weights,
                          const ExecOptions& options = {});
// inputs[k] in the blocked layout (all of one lane count, the packed model's).
BlockedGroupResult execute_group(const Graph& graph, const Candidate& candidate,
                                 const std::vector<const cpu::BlockedTensor*>& inputs,
                                 const cpu::PackedModel& packed, const ExecOptions& options = {});

} // namespace brickdl::kernels
