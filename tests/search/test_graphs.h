#pragma once
// Small graphs and a fake model for the search tests.
#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include "core/graph.h"
#include "core/graph_builder.h"
#include "search/predictor.h"

namespace brickdl::search::testing {

// A random chain of `blocks` blocks over a 2-D or 3-D input: plain convs (1x1 or 3x3, with
// or without relu), residual blocks (conv → conv → add of the block input), and 2x2 max pools
// while the image is large enough. Returned fused.
inline Graph random_graph(uint64_t seed, int blocks, bool three_d = false) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  const int64_t image = three_d ? 16 : 32;
  TensorShape in{1, 4, three_d ? image : 1, image, image, three_d ? 3 : 2};
  GraphBuilder b("random" + std::to_string(seed), in);
  auto conv = [&](int x, int64_t c, int k) {
    return three_d ? b.conv3d(x, c, k, 1, k / 2) : b.conv2d(x, c, k, 1, k / 2);
  };
  int x = b.input();
  int64_t ch = 4;
  for (int i = 0; i < blocks; ++i) {
    switch (pick(4)) {
    case 0: // conv (+relu)
      ch = 4 * (1 + pick(3));
      x = conv(x, ch, pick(2) ? 3 : 1);
      if (pick(2))
        x = b.relu(x);
      break;
    case 1: { // residual block
      const int skip = x;
      const int y = b.relu(conv(x, ch, 3));
      x = b.relu(b.add(conv(y, ch, pick(2) ? 3 : 1), skip));
      break;
    }
    case 2: // pool
      if (b.shape(x).w >= 8) {
        x = b.max_pool(x, 2, 2);
      } else {
        x = conv(x, ch, 1);
      }
      break;
    default: // 1x1 conv + relu
      x = b.relu(conv(x, ch, 1));
      break;
    }
  }
  return fuse_for_inference(b.build());
}

// A deterministic fake model: cost from a hash of (workload signature, configuration), so it
// is a pure function of what Predictor promises. `levels` > 0 draws integer costs from
// 1..levels (many ties); otherwise costs are spread over [0.1, 10). One merged candidate in
// `infeasible_every` is infeasible.
class FakePredictor final : public Predictor {
public:
  FakePredictor(uint64_t salt = 0, int levels = 0, int infeasible_every = 7)
      : salt_(salt), levels_(levels), infeasible_every_(infeasible_every) {}

  model::Prediction predict(const Graph& g, const Candidate& c) const override;
  model::LowerBound lower_bound(const Graph& g, const Group& grp) const override {
    model::LowerBound lb;
    for (int id = grp.first; id <= grp.last; ++id)
      lb.dram_bytes += g.output_bytes(id);
    lb.time_ms = 0.01;
    return lb;
  }
  std::string version() const override { return "fake-1"; }
  std::string gpu_name() const override { return "FakeGPU"; }
  mutable int64_t calls = 0;

private:
  uint64_t salt_;
  int levels_;
  int infeasible_every_;
};

} // namespace brickdl::search::testing
