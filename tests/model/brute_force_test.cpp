// The model's factored counts equal a brute-force walk over every unit and every brick, on
// random small graphs (2-D and 3-D; strides, dilations, grouped convs, pools, upsamples,
// residual adds, concats; bricks 1..8 that need not divide the tensors; channel blocks).
#include <gtest/gtest.h>

#include <cmath>

#include "core/gpu_spec.h"
#include "model/cost_model.h"
#include "tests/model/brute_force.h"
#include "tests/model/random_graphs.h"

namespace brickdl::model {
namespace {

using testing::brute_memoized;
using testing::brute_padded;
using testing::BruteCounts;

void expect_near(double model, double brute, const std::string& what, const std::string& ctx) {
  EXPECT_NEAR(model, brute, 1e-9 * std::max(1.0, std::fabs(brute))) << what << " " << ctx;
}

void compare(const Prediction& p, const BruteCounts& c, bool memoized, const std::string& ctx) {
  ASSERT_TRUE(p.reason.empty() || p.reason.find("shared memory") != std::string::npos ||
              p.reason.find("registers") != std::string::npos)
      << p.reason << " " << ctx;
  expect_near(p.flops, c.flops, "flops", ctx);
  expect_near(p.bytes_input, c.bytes_input, "bytes_input", ctx);
  expect_near(p.bytes_weight, c.bytes_weight, "bytes_weight", ctx);
  expect_near(p.bytes_output, c.bytes_output, "bytes_output", ctx);
  EXPECT_EQ(p.bricks_per_layer, c.bricks) << ctx;
  if (memoized) {
    expect_near(p.bytes_intermediate_load, c.bytes_intermediate_load, "intermediate_load", ctx);
    expect_near(p.bytes_intermediate_store, c.bytes_intermediate_store, "intermediate_store", ctx);
    expect_near(p.memo_lookups, c.lookups, "lookups", ctx);
    expect_near(p.atomics_compulsory, c.claims, "claims", ctx);
  }
}

TEST(CostModelBruteForce, RandomGraphsMatchEveryCount) {
  std::mt19937 rng(12345);
  const CostModel model(*find_gpu_spec("H100-SXM"));
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int dims = trial % 3 == 0 ? 3 : 2;
    const Graph g = fuse_for_inference(testing::random_graph(rng, dims, testing::pick(rng, 1, 6)));
    const int last = g.size() - 1;
    const int first = testing::pick(rng, 1, last);
    const Group grp{first, last};
    if (!is_valid_group(g, grp))
      continue;
    Candidate c;
    c.group = grp;
    c.brick = testing::random_brick(rng);
    const std::string ctx = "trial " + std::to_string(trial) + " group [" + std::to_string(first) +
                            "," + std::to_string(last) + "] brick " + c.brick.str() + " input " +
                            g.input_shape().str();
    c.strategy = Strategy::kPadded;
    compare(model.predict(g, c), brute_padded(g, c), false, "padded " + ctx);
    c.strategy = Strategy::kMemoized;
    compare(model.predict(g, c), brute_memoized(g, c), true, "memoized " + ctx);
    ++compared;
    if (::testing::Test::HasFailure())
      break;
  }
  EXPECT_GT(compared, 250);
}

} // namespace
} // namespace brickdl::model
