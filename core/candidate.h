#pragma once
// Candidates: the unit the model predicts, the measurers run and the database stores.
//
//   Group  = layers one merged kernel runs (core/group.h: what is a group, what it reads).
//   Brick  = the block of every activation tensor of the group owned by one unit of work:
//            spatial extents bd × bh × bw (bd == 1 for 2-D), a channel block cb (0 = all
//            channels of the tensor) and a batch block nb (images computed together, so that
//            every weight a unit fetches serves nb images). Each tensor of the group is
//            bricked with the same extents at its own resolution.
//   Candidate = group + brick + strategy + kernel parameters.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/group.h"

namespace brickdl {

enum class Strategy { kLayerwise, kPadded, kMemoized };
const char* strategy_name(Strategy s);
bool parse_strategy(const std::string& s, Strategy* out);
// Every strategy's name, in enum order: layerwise, padded, memoized.
std::vector<std::string> strategy_names();

struct BrickShape {
  int d = 1, h = 8, w = 8;
  int cb = 0; // channel block; 0 = all channels
  int nb = 1; // batch block: images per unit of work (clamped to the batch)
  // Thread block cluster (sm_90): CTAs that compute one unit together, each a slice of every
  // tensor's channels (core/group.h cluster_slice); 1 = one CTA per unit.
  int cl = 1;
  int64_t volume() const { return int64_t{d} * h * w; }
  int dim(int axis) const { return axis == 0 ? d : axis == 1 ? h : w; }
  // "8x8" (2-D), "8x8x8" (3-D), with "/c32" when cb > 0, "/n4" when nb > 1 and "/x8" when
  // cl > 1
  std::string str() const;
  // Images one unit of work computes: nb clamped to [1, batch] (the last unit of the batch may
  // hold fewer). The model, the CPU executor, the code generator and the search all ask it.
  static int64_t images_per_unit(int64_t nb, int64_t batch) {
    return std::clamp<int64_t>(nb, 1, std::max<int64_t>(1, batch));
  }
  int64_t images_per_unit(int64_t batch) const { return images_per_unit(nb, batch); }
  bool operator==(const BrickShape& o) const = default;
};

// The largest batch block a configuration may ask for (experiments, plan files): larger
// values act as the batch anyway, so the cap only catches typos.
inline constexpr int kMaxBatchBlock = 1024;
// The largest thread block cluster: 16 CTAs, what sm_90 runs by opt-in (8 is the portable
// maximum; kernels/cuda/detail/generated_run.cu sets
// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED above it).
inline constexpr int kMaxCluster = 16;
// The largest cluster every sm_90 device runs without the opt-in.
inline constexpr int kMaxPortableCluster = 8;

// Empty when `brick` is one a group of spatial rank `rank` (2 or 3) can use: every extent in
// [1, kMaxBrickExtent] (core/limits.h), d == 1 for 2-D, cb in [0, 65536], nb in [1,
// kMaxBatchBlock], cl in [1, kMaxCluster]; else what is wrong, for the loader to report at its file
// and key.
std::string brick_problem(const BrickShape& brick, int rank);

// Empty when a candidate of `strategy` with clusters of `cl` CTAs per unit can run them on a
// target whose clusters hold at most `max_cluster` CTAs, its last layer's units computing
// `unit_channels` of its `channels` channels; else why not: clusters (cl > 1) run padded units
// only (sm_90), each unit computing every channel of its brick (channel block 0). The model
// and the code generator both ask.
std::string cluster_problem(Strategy strategy, int cl, int max_cluster, int64_t unit_channels,
                            int64_t channels);

struct Candidate {
  Group group;
  BrickShape brick;
  Strategy strategy = Strategy::kLayerwise;
  int threads = 256; // threads per block (GPU); worker threads are the measurer's business
  bool operator==(const Candidate& o) const = default;
  // Canonical text of the configuration (without the group): "memoized 8x8x8 t256".
  std::string config_str() const;
};

} // namespace brickdl
