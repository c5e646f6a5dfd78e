#include "core/candidate.h"

#include "core/limits.h"

namespace brickdl {

const char* strategy_name(Strategy s) {
  switch (s) {
  case Strategy::kLayerwise: return "layerwise";
  case Strategy::kPadded: return "padded";
  case Strategy::kMemoized: return "memoized";
  }
  return "?";
}

namespace {
constexpr Strategy kStrategies[] = {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized};
} // namespace

bool parse_strategy(const std::string& s, Strategy* out) {
  for (Strategy k : kStrategies) {
    if (s == strategy_name(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> v;
  for (Strategy k : kStrategies)
    v.emplace_back(strategy_name(k));
  return v;
}

std::string BrickShape::str() const {
  std::string s;
  if (d > 1)
    s = std::to_string(d) + "x";
  s += std::to_string(h) + "x" + std::to_string(w);
  if (cb > 0)
    s += "/c" + std::to_string(cb);
  if (nb > 1)
    s += "/n" + std::to_string(nb);
  if (cl > 1)
    s += "/x" + std::to_string(cl);
  return s;
}

std::string brick_problem(const BrickShape& b, int rank) {
  for (const int e : {b.d, b.h, b.w})
    if (e < 1 || e > kMaxBrickExtent.max)
      return "brick " + b.str() + ": every extent must be from 1 to " +
             std::to_string(kMaxBrickExtent.max) + ", got " + std::to_string(e);
  if (rank != 3 && b.d != 1)
    return "brick " + b.str() + ": a 2-D group's brick has depth 1";
  if (b.cb < 0 || b.cb > kMaxChannels.max)
    return "channel block " + std::to_string(b.cb) + ": must be from 0 (all channels) to " +
           std::to_string(kMaxChannels.max);
  if (b.nb < 1 || b.nb > kMaxBatchBlock)
    return "batch block " + std::to_string(b.nb) + ": must be from 1 to " +
           std::to_string(kMaxBatchBlock);
  if (b.cl < 1 || b.cl > kMaxCluster)
    return "cluster " + std::to_string(b.cl) + ": must be from 1 (no cluster) to " +
           std::to_string(kMaxCluster) + " CTAs";
  return "";
}

std::string cluster_problem(Strategy strategy, int cl, int max_cluster, int64_t unit_channels,
                            int64_t channels) {
  if (cl <= 1)
    return "";
  if (strategy == Strategy::kLayerwise)
    return "layer-by-layer kernels run without thread block clusters";
  if (strategy != Strategy::kPadded)
    return "thread block clusters run padded units only";
  if (cl > max_cluster)
    return "a cluster of " + std::to_string(cl) + " CTAs; the target allows " +
           std::to_string(max_cluster) + " (thread block clusters need sm_90)";
  if (unit_channels < channels)
    return "a cluster unit computes every channel of its brick (channel block 0), its CTAs a "
           "slice each";
  return "";
}

std::string Candidate::config_str() const {
  std::string s = strategy_name(strategy);
  if (strategy != Strategy::kLayerwise)
    s += " " + brick.str() + " t" + std::to_string(threads);
  return s;
}

} // namespace brickdl
