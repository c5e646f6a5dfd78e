// NaN and infinities through the reference ops and the merged executor: they propagate as in
// PyTorch (relu(NaN) = NaN, clamp(NaN) = NaN, a max pool whose window holds a NaN gives NaN),
// and the executor puts every NaN and infinity where the reference does, on random groups.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/graph_builder.h"
#include "kernels/merged_executor.h"
#include "kernels/reference.h"
#include "kernels/validation.h"
#include "kernels/weights.h"
#include "tests/kernels/random_groups.h"

namespace brickdl::kernels {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor make(const TensorShape& s, std::vector<float> v) {
  Tensor t(s);
  t.values() = std::move(v);
  return t;
}

Window window2d(int k, int s, int p) {
  Window w;
  w.kernel = {1, k, k};
  w.stride = {1, s, s};
  w.pad = {0, p, p};
  return w;
}

TEST(NonFinite, ActivationsKeepNaN) {
  const Tensor x = make({1, 1, 1, 1, 5, 2}, {kNaN, -kInf, kInf, -1.f, 2.f});
  const Tensor r = relu(x);
  EXPECT_TRUE(std::isnan(r.values()[0]));
  EXPECT_EQ(r.values()[1], 0.f);
  EXPECT_EQ(r.values()[2], kInf);
  EXPECT_EQ(r.values()[3], 0.f);
  const Tensor l = leaky_relu(x, 0.1f);
  EXPECT_TRUE(std::isnan(l.values()[0]));
  EXPECT_EQ(l.values()[1], -kInf);
  // clamp / relu6: NaN stays NaN, infinities go to the bounds.
  const Tensor c = clip(x, 0.f, 6.f);
  EXPECT_TRUE(std::isnan(c.values()[0]));
  EXPECT_EQ(c.values()[1], 0.f);
  EXPECT_EQ(c.values()[2], 6.f);
  EXPECT_TRUE(std::isnan(sigmoid(x).values()[0]));
  EXPECT_EQ(sigmoid(x).values()[1], 0.f);
  EXPECT_EQ(sigmoid(x).values()[2], 1.f);
  EXPECT_TRUE(std::isnan(silu(x).values()[0]));
  // add's fused relu (a residual block's epilogue).
  const Tensor a = add(x, x, Epilogue{Activation::kRelu, 0});
  EXPECT_TRUE(std::isnan(a.values()[0]));
}

TEST(NonFinite, MaxPoolWindowWithNaNIsNaN) {
  // 4x4, 2x2 stride 2: windows {0,1,4,5} {2,3,6,7} {8,9,12,13} {10,11,14,15}. A NaN at 5
  // (last in its window's scan but one) and at 10 (first of its window).
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(i);
  v[5] = kNaN;
  v[10] = kNaN;
  v[3] = kInf;
  const Tensor y = max_pool(make({1, 1, 1, 4, 4, 2}, v), window2d(2, 2, 0), false);
  EXPECT_TRUE(std::isnan(y.values()[0]));
  EXPECT_EQ(y.values()[1], kInf);
  EXPECT_EQ(y.values()[2], 13.f);
  EXPECT_TRUE(std::isnan(y.values()[3]));
  // All NaN: NaN, not -inf.
  const Tensor all =
      max_pool(make({1, 1, 1, 2, 2, 2}, {kNaN, kNaN, kNaN, kNaN}), window2d(2, 2, 0), false);
  EXPECT_TRUE(std::isnan(all.values()[0]));
}

TEST(NonFinite, ConvWithFusedBiasAndReluKeepsNaN) {
  // A 1x1 conv with bias and relu fused (the conv + folded bn + relu path) of an all-NaN input.
  const Tensor x = make({1, 1, 1, 2, 2, 2}, {kNaN, kNaN, kNaN, kNaN});
  Window w = window2d(1, 1, 0);
  const Tensor y = conv(x, {-1.f}, {0.5f}, 1, w, 1, Epilogue{Activation::kRelu, 0});
  for (float v : y.values())
    EXPECT_TRUE(std::isnan(v));
}

// The external inputs of a random group, each element replaced by `fill(rng)` with probability
// `p` (1: all of them).
enum class Fill { kNaN, kInf, kMixed };

float draw(Fill f, std::mt19937& rng) {
  switch (f) {
  case Fill::kNaN: return kNaN;
  case Fill::kInf: return std::bernoulli_distribution(0.5)(rng) ? kInf : -kInf;
  case Fill::kMixed: break;
  }
  const int k = std::uniform_int_distribution<int>(0, 2)(rng);
  return k == 0 ? kNaN : k == 1 ? kInf : -kInf;
}

struct Case {
  test_support::RandomCase rc;
  std::vector<Tensor> ext;
  std::vector<const Tensor*> inputs;
  ModelWeights weights;
};

Case poisoned_case(std::mt19937& rng, int dims, uint64_t seed, Fill fill, double p) {
  Case c{test_support::random_case(rng, dims), {}, {}, {}};
  for (int id : group_external_inputs(c.rc.graph, c.rc.group)) {
    Tensor t = random_tensor(c.rc.graph.layer(id).out, seed, static_cast<uint64_t>(id));
    for (float& v : t.values())
      if (std::bernoulli_distribution(p)(rng))
        v = draw(fill, rng);
    c.ext.push_back(std::move(t));
  }
  for (const Tensor& t : c.ext)
    c.inputs.push_back(&t);
  c.weights = make_weights(c.rc.graph, seed);
  return c;
}

Tensor reference_of(const Case& c) {
  const Graph& g = c.rc.graph;
  const Group& grp = c.rc.group;
  const std::vector<int> ids = group_external_inputs(g, grp);
  std::vector<Tensor> out(static_cast<size_t>(grp.size()));
  for (int id = grp.first; id <= grp.last; ++id) {
    std::vector<const Tensor*> in;
    for (int p : g.layer(id).inputs)
      in.push_back(
          grp.contains(p)
              ? &out[static_cast<size_t>(p - grp.first)]
              : c.inputs[static_cast<size_t>(std::find(ids.begin(), ids.end(), p) - ids.begin())]);
    out[static_cast<size_t>(id - grp.first)] = run_layer(g.layer(id), in, c.weights.at(id));
  }
  return std::move(out.back());
}

int64_t count_nan(const Tensor& t) {
  int64_t n = 0;
  for (float v : t.values())
    n += std::isnan(v) ? 1 : 0;
  return n;
}

// Every strategy on random groups whose inputs hold NaN / infinities with probability p: the
// output agrees with the reference under compare() (a NaN where the reference has one, the
// same infinity, finite values within tolerance). With every input NaN, every output is NaN.
void check_poisoned(int dims, int cases, uint32_t seed, Fill fill, double p) {
  std::mt19937 rng(seed);
  for (int i = 0; i < cases; ++i) {
    const Case c = poisoned_case(rng, dims, static_cast<uint64_t>(i) + 1, fill, p);
    const Tensor ref = reference_of(c);
    if (fill == Fill::kNaN && p == 1.0)
      ASSERT_EQ(count_nan(ref), ref.numel()) << "case " << i << " [" << c.rc.text << "]";
    for (Strategy s : {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized}) {
      Candidate cand;
      cand.group = c.rc.group;
      cand.strategy = s;
      cand.brick = test_support::random_brick(rng, dims);
      const GroupResult r = execute_group(c.rc.graph, cand, c.inputs, c.weights, ExecOptions{2});
      ASSERT_TRUE(r.supported) << r.reason;
      const Comparison cmp = compare(r.output.values(), ref.values(), Tolerance{});
      EXPECT_TRUE(cmp.ok()) << "case " << i << " [" << c.rc.text << "] " << strategy_name(s) << " "
                            << cand.brick.str() << ": " << cmp.message;
      EXPECT_EQ(count_nan(r.output), count_nan(ref)) << "case " << i << " [" << c.rc.text << "]";
    }
  }
}

TEST(NonFiniteProperty, AllNaNInputsGiveAllNaNOutputs) {
  check_poisoned(2, 25, 11, Fill::kNaN, 1.0);
  check_poisoned(3, 10, 12, Fill::kNaN, 1.0);
}

TEST(NonFiniteProperty, SomeNaNInputsLandWhereTheReferencePutsThem) {
  check_poisoned(2, 25, 21, Fill::kNaN, 0.05);
  check_poisoned(3, 10, 22, Fill::kNaN, 0.02);
}

TEST(NonFiniteProperty, InfinitiesLandWhereTheReferencePutsThem) {
  check_poisoned(2, 25, 31, Fill::kInf, 0.05);
  check_poisoned(2, 25, 32, Fill::kMixed, 0.1);
  check_poisoned(3, 10, 33, Fill::kMixed, 0.02);
}

} // namespace
} // namespace brickdl::kernels
