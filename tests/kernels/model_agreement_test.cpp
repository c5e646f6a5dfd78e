// The CPU executor's counts equal the analytic model's predictions for the same candidates
// (the shared counting conventions of model/cost_model.h and kernels/merged_executor.h).
#include <gtest/gtest.h>

#include <random>

#include "core/gpu_spec.h"
#include "kernels/merged_executor.h"
#include "kernels/weights.h"
#include "model/cost_model.h"
#include "tests/kernels/random_groups.h"

namespace brickdl::kernels {
namespace {

struct Compared {
  int candidates = 0;
  int skipped = 0; // the model calls the candidate infeasible (so predicts no counts)
};

void expect_agreement(const Graph& g, const Candidate& c, const model::CostModel& m,
                      const std::string& what, Compared* n) {
  const model::Prediction p = m.predict(g, c);
  if (!p.feasible) {
    ++n->skipped;
    return;
  }
  ++n->candidates;
  std::vector<Tensor> ext;
  std::vector<const Tensor*> in;
  for (int id : group_external_inputs(g, c.group))
    ext.push_back(random_tensor(g.layer(id).out, 1, id));
  for (const Tensor& t : ext)
    in.push_back(&t);
  const GroupResult r =
      execute_group(g, c, in, make_weights(g, 1, c.group.first, c.group.last), ExecOptions{2});
  ASSERT_TRUE(r.supported) << what << ": " << r.reason;
  const ExecCounters& k = r.counters;
  EXPECT_EQ(k.flops, p.flops) << what;
  EXPECT_EQ(k.useful_flops, p.useful_flops) << what;
  EXPECT_EQ(k.bricks_per_layer, p.bricks_per_layer) << what;
  EXPECT_EQ(k.bytes_loaded_input, p.bytes_input) << what;
  EXPECT_EQ(k.bytes_loaded_weight, p.bytes_weight) << what;
  EXPECT_EQ(k.bytes_loaded_intermediate, p.bytes_intermediate_load) << what;
  EXPECT_EQ(k.bytes_stored_intermediate, p.bytes_intermediate_store) << what;
  EXPECT_EQ(k.bytes_stored_output, p.bytes_output) << what;
  EXPECT_EQ(k.memo_lookups, p.memo_lookups) << what;
  EXPECT_EQ(k.memo_claims, p.atomics_compulsory) << what;
}

void check(int dims, int cases, uint32_t seed) {
  const GpuSpec* gpu = find_gpu_spec("A100-40GB");
  ASSERT_NE(gpu, nullptr);
  const model::CostModel m(*gpu);
  std::mt19937 rng(seed);
  Compared n;
  for (int i = 0; i < cases; ++i) {
    const test_support::RandomCase rc = test_support::random_case(rng, dims);
    for (Strategy s : {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized}) {
      Candidate c;
      c.group = rc.group;
      c.strategy = s;
      c.brick = test_support::random_brick(rng, dims);
      const std::string what = "case " + std::to_string(i) + " [" + rc.text + "] " + c.config_str();
      expect_agreement(rc.graph, c, m, what, &n);
    }
  }
  // Nearly every random candidate is feasible; a model that rejected them all would make this
  // test vacuous.
  EXPECT_GE(n.candidates, 3 * cases * 9 / 10) << n.skipped << " skipped";
}

TEST(ModelAgreement, Random2dCandidates) {
  check(2, 50, 77);
}

TEST(ModelAgreement, Random3dCandidates) {
  check(3, 30, 78);
}

} // namespace
} // namespace brickdl::kernels
