#include "tests/search/test_graphs.h"

#include "core/group.h"

namespace brickdl::search::testing {

model::Prediction FakePredictor::predict(const Graph& g, const Candidate& c) const {
  ++calls;
  const uint64_t h =
      std::hash<std::string>{}(workload_signature(g, c.group) + "|" + c.config_str()) ^ salt_;
  std::mt19937_64 rng(h);
  model::Prediction p;
  if (c.strategy != Strategy::kLayerwise && infeasible_every_ > 0 &&
      rng() % static_cast<uint64_t>(infeasible_every_) == 0) {
    p.feasible = false;
    p.reason = "fake: too much shared memory";
    return p;
  }
  p.time_ms = levels_ > 0 ? static_cast<double>(1 + rng() % static_cast<uint64_t>(levels_))
                          : 0.1 + static_cast<double>(rng() % 99000) / 10000.0;
  p.dram_bytes = 1000.0 * p.time_ms;
  return p;
}

} // namespace brickdl::search::testing
