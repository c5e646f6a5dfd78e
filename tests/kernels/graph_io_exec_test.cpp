// Graphs of two runtime inputs and several outputs, run by the reference and by the plan
// executor (merged plans of every strategy), against the same computation done as graphs of
// one input and one output, on random shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "core/error.h"
#include "core/graph.h"
#include "core/graph_builder.h"
#include "kernels/plan_executor.h"
#include "kernels/reference.h"
#include "kernels/weights.h"

namespace brickdl::kernels {
namespace {

TensorShape shape2d(int64_t n, int64_t c, int64_t h, int64_t w) {
  TensorShape s;
  s.n = n;
  s.c = c;
  s.h = h;
  s.w = w;
  return s;
}

struct Dims {
  int64_t n, ca, cb, cm, co, h, w;
};

Dims random_dims(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  return Dims{pick(1, 2), pick(1, 5),     pick(1, 5),    pick(1, 6),
              pick(1, 5), 2 * pick(2, 6), 2 * pick(2, 6)};
}

// a (ca, h, w) and b (cb, h/2, w/2). Fused layers: 0 a, 1 b, 2 c3 = relu(conv3x3 a) (output
// "mid"), 3 up = upsample(b), 4 cat = concat(c3, up), 5 head3 = conv3x3 cat (output "out3"),
// 6 head4 = conv1x1 b (output "out4"). Outputs in the order out3, mid, out4.
Graph neck(const Dims& d) {
  GraphBuilder b("neck", shape2d(d.n, d.ca, d.h, d.w), DType::kF32, "a");
  const int in_b = b.add_input(shape2d(d.n, d.cb, d.h / 2, d.w / 2), "b");
  const int mid = b.relu(b.conv2d(b.input(), d.cm, 3, 1, 1, 1, 1, true, "c3"), "mid");
  const int up = b.upsample(in_b, 2, false, "up");
  const int cat = b.concat({mid, up}, "cat");
  const int head3 = b.conv2d(cat, d.co, 3, 1, 1, 1, 1, true, "head3");
  const int head4 = b.conv2d(in_b, d.co, 1, 1, 0, 1, 1, true, "head4");
  b.mark_output(head3, "out3");
  b.mark_output(mid);
  b.mark_output(head4, "out4");
  return fuse_for_inference(b.build());
}

// A one-input graph of one conv (3x3 pad 1 or 1x1), optionally with a relu, from `in`.
Graph one_conv(const TensorShape& in, int64_t out, int kernel, bool relu) {
  GraphBuilder b("one", in);
  const int c = b.conv2d(b.input(), out, kernel, 1, kernel / 2, 1, 1, true, "c");
  if (relu)
    b.relu(c);
  return fuse_for_inference(b.build());
}

Tensor run_one(const Graph& g, const Tensor& x, const LayerWeights& w) {
  return run_graph(g, x, ModelWeights({LayerWeights{}, w}));
}

// concat(x, nearest-upsample-by-2(y)) along channels, by hand.
Tensor concat_upsampled(const Tensor& x, const Tensor& y) {
  const TensorShape& s = x.shape();
  Tensor out(shape2d(s.n, s.c + y.shape().c, s.h, s.w));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t i = 0; i < s.h; ++i)
      for (int64_t j = 0; j < s.w; ++j) {
        for (int64_t c = 0; c < s.c; ++c)
          out.at(n, c, 0, i, j) = x.at(n, c, 0, i, j);
        for (int64_t c = 0; c < y.shape().c; ++c)
          out.at(n, s.c + c, 0, i, j) = y.at(n, c, 0, i / 2, j / 2);
      }
  return out;
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double worst = 0;
  for (size_t i = 0; i < want.values().size(); ++i)
    worst = std::max(worst, std::abs(double{got.values()[i]} - want.values()[i]) /
                                (1.0 + std::abs(double{want.values()[i]})));
  EXPECT_LE(worst, 1e-5) << what;
}

struct Case {
  Graph g;
  ModelWeights w;
  std::vector<Tensor> inputs;
  std::vector<Tensor> expected; // out3, mid, out4 from one-input graphs
};

Case make_case(uint64_t seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  const Dims d = random_dims(rng);
  Case k{neck(d), {}, {}, {}};
  const Graph& g = k.g;
  EXPECT_EQ(g.size(), 7);
  k.w = make_weights(g, seed, g.num_inputs());
  k.inputs = {random_tensor(g.layer(0).out, seed, 0), random_tensor(g.layer(1).out, seed, 1)};
  const Tensor mid =
      run_one(one_conv(g.layer(0).out, d.cm, 3, true), k.inputs[0], k.w.at(g.find("c3")));
  const Tensor cat = concat_upsampled(mid, k.inputs[1]);
  const Tensor out3 = run_one(one_conv(cat.shape(), d.co, 3, false), cat, k.w.at(g.find("head3")));
  const Tensor out4 =
      run_one(one_conv(g.layer(1).out, d.co, 1, false), k.inputs[1], k.w.at(g.find("head4")));
  k.expected = {out3, mid, out4};
  return k;
}

TEST(GraphIoExec, ReferenceMatchesOneInputGraphs) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const Case k = make_case(seed);
    const std::vector<Tensor> outs = run_graph_outputs(k.g, k.inputs, k.w);
    ASSERT_EQ(outs.size(), 3u);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(outs[i].values(), k.expected[i].values()) << "seed " << seed << " output " << i;
  }
}

Candidate cand(int first, int last, Strategy s, int bh, int bw) {
  Candidate c;
  c.group = {first, last};
  c.strategy = s;
  c.brick.h = bh;
  c.brick.w = bw;
  return c;
}

TEST(GraphIoExec, MergedPlansOfEveryStrategyMatch) {
  const Strategy all[] = {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized};
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const Case k = make_case(seed);
    const Graph& g = k.g;
    for (Strategy s : all) {
      // Groups: [c3], [up .. head3] (concat of the group's upsample and the external c3), [head4];
      // [c3 .. head3] holds the output "mid" before its last layer (layerwise only); [up ..
      // head4] holds "out3" before its last layer.
      const std::vector<std::vector<Candidate>> plans = {
          {},
          {cand(2, 2, s, 4, 4), cand(3, 5, s, 2, 4), cand(6, 6, s, 4, 2)},
          {cand(2, 5, Strategy::kLayerwise, 4, 4), cand(6, 6, s, 3, 3)},
          {cand(2, 2, s, 5, 3), cand(3, 6, Strategy::kLayerwise, 4, 4)},
          {cand(2, 6, Strategy::kLayerwise, 4, 4)},
          {cand(4, 5, s, 4, 4)},
      };
      for (size_t p = 0; p < plans.size(); ++p) {
        const PlanResult r = execute_plan(g, plans[p], k.inputs, k.w, ExecOptions{2});
        ASSERT_EQ(r.outputs.size(), 3u);
        for (size_t i = 0; i < 3; ++i)
          expect_close(r.outputs[i], k.expected[i],
                       "seed " + std::to_string(seed) + " strategy " + strategy_name(s) + " plan " +
                           std::to_string(p) + " output " + std::to_string(i));
      }
    }
  }
}

TEST(GraphIoExec, PlansThatCannotKeepAnInnerOutputAreRefused) {
  const Case k = make_case(3);
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
    for (const Candidate& c : {cand(2, 5, s, 4, 4), cand(3, 6, s, 4, 4)}) {
      try {
        validate_plan(k.g, {c});
        ADD_FAILURE() << strategy_name(s) << " accepted a group with an output inside";
      } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("graph output inside the group"), std::string::npos)
            << e.what();
      }
    }
  }
  // Layer 1 is the second input: no plan entry may hold it.
  try {
    validate_plan(k.g, {cand(1, 2, Strategy::kLayerwise, 4, 4)});
    ADD_FAILURE() << "a group holding an input was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("are the inputs"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace brickdl::kernels
