// Whole-model plans, .npy files and the CPU measurer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/graph_builder.h"
#include "kernels/cpu_measurer.h"
#include "kernels/npy.h"
#include "kernels/plan_executor.h"
#include "kernels/plan_io.h"
#include "kernels/reference.h"
#include "kernels/validation.h"

namespace brickdl::kernels {
namespace {

namespace fs = std::filesystem;

Candidate cand(int first, int last, Strategy s, BrickShape b = {}) {
  Candidate c;
  c.group = Group{first, last};
  c.strategy = s;
  c.brick = b;
  return c;
}

void expect_close(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < b.numel(); ++i)
    EXPECT_NEAR(a.data()[i], b.data()[i], 1e-5 * (1 + std::fabs(b.data()[i]))) << "at " << i;
}

// A small residual network: stem, two residual blocks (one downsampling), pool, classifier.
Graph small_resnet() {
  GraphBuilder b("small_resnet", TensorShape{2, 3, 1, 19, 17, 2});
  int x = b.conv_bn_relu(b.input(), 8, 3, 1, 1, 1, "stem");
  x = b.max_pool(x, 3, 2, 1);
  // Block 1: identity skip.
  int y = b.conv_bn_relu(x, 8, 3, 1, 1, 1, "b1.a");
  y = b.batch_norm(b.conv2d(y, 8, 3, 1, 1, 1, 1, false, "b1.b.conv"), "b1.b.bn");
  x = b.relu(b.add(y, x));
  // Block 2: strided, with a 1x1 projection on the skip.
  int z = b.conv_bn_relu(x, 12, 3, 2, 1, 1, "b2.a");
  z = b.batch_norm(b.conv2d(z, 12, 3, 1, 1, 1, 1, false, "b2.b.conv"), "b2.b.bn");
  const int proj = b.batch_norm(b.conv2d(x, 12, 1, 2, 0, 1, 1, false, "b2.proj"), "b2.proj.bn");
  x = b.relu(b.add(z, proj));
  x = b.global_avg_pool(x);
  b.linear(b.flatten(x), 5);
  return fuse_for_inference(b.build());
}

TEST(PlanExecutor, MixedPlanMatchesTheReferenceModel) {
  const Graph g = small_resnet();
  const ModelWeights w = make_weights(g, 5);
  const Tensor x = random_tensor(g.input_shape(), 6);
  const Tensor ref = run_graph(g, x, w);
  // Fused layer ids: 1 stem, 2 pool, 3 b1.a, 4 b1.b, 5 add, 6 b2.a, 7 b2.b, 8 proj, 9 add,
  // 10 gap, 11 flatten, 12 linear.
  ASSERT_EQ(g.size(), 13);
  ASSERT_EQ(g.layer(5).op, OpKind::kAdd);
  ASSERT_EQ(g.layer(8).name, "b2.proj");
  const std::vector<Candidate> plan = {
      cand(1, 2, Strategy::kPadded, BrickShape{1, 4, 4, 0}),
      cand(3, 5, Strategy::kMemoized, BrickShape{1, 3, 5, 4}),
      cand(6, 7, Strategy::kPadded, BrickShape{1, 2, 2, 0}),
      // 8 runs layerwise (outside every group); 9..12 as one layerwise group.
      cand(9, 12, Strategy::kLayerwise),
  };
  const PlanResult r = execute_plan(g, plan, x, w, ExecOptions{3});
  expect_close(r.output(), ref);
  ASSERT_EQ(r.group_counters.size(), plan.size());
  EXPECT_EQ(r.group_counters[0].bricks_per_layer.size(), 2u);
  // The totals hold the groups and layer 8, run layerwise between them.
  EXPECT_EQ(r.counters.flops, r.group_counters[0].flops + r.group_counters[1].flops +
                                  r.group_counters[2].flops + r.group_counters[3].flops +
                                  2 * g.layer(8).macs);
  // No plan: every layer layerwise.
  const PlanResult none = execute_plan(g, {}, x, w, ExecOptions{2});
  expect_close(none.output(), ref);
  EXPECT_EQ(none.counters.flops, 2 * g.total_macs());
}

// Regression: the plan totals used to drop every group's per-layer brick counts, so
// bricks_computed was 0 for every plan.
TEST(PlanExecutor, TotalsKeepTheBricksOfEveryGroupByGraphLayerId) {
  const Graph g = small_resnet();
  const ModelWeights w = make_weights(g, 5);
  const Tensor x = random_tensor(g.input_shape(), 6);
  const std::vector<Candidate> plan = {
      cand(6, 7, Strategy::kPadded, BrickShape{1, 2, 2, 0}),
      cand(1, 2, Strategy::kPadded, BrickShape{1, 4, 4, 0}),
      cand(3, 5, Strategy::kMemoized, BrickShape{1, 3, 5, 4}),
  };
  const PlanResult r = execute_plan(g, plan, x, w, ExecOptions{2});
  int64_t sum = 0;
  for (const ExecCounters& c : r.group_counters)
    sum += c.bricks_computed();
  EXPECT_GT(r.group_counters[0].bricks_computed(), 0);
  EXPECT_GT(r.counters.bricks_computed(), 0);
  EXPECT_EQ(r.counters.bricks_computed(), sum);
  EXPECT_EQ(r.counters.to_map().at("bricks_computed"), static_cast<double>(sum));
  // Per layer, at the graph's layer ids; layers run layerwise have none.
  ASSERT_EQ(r.counters.bricks_per_layer.size(), static_cast<size_t>(g.size()));
  for (size_t k = 0; k < plan.size(); ++k)
    for (int id = plan[k].group.first; id <= plan[k].group.last; ++id)
      EXPECT_EQ(r.counters.bricks_per_layer[static_cast<size_t>(id)],
                r.group_counters[k].bricks_per_layer[static_cast<size_t>(id - plan[k].group.first)])
          << "layer " << id;
  for (int id : {0, 8, 9, 10, 11, 12})
    EXPECT_EQ(r.counters.bricks_per_layer[static_cast<size_t>(id)], 0) << "layer " << id;
  // A plan without bricks: none counted.
  EXPECT_EQ(execute_plan(g, {}, x, w, ExecOptions{2}).counters.bricks_computed(), 0);
}

// A prepared plan runs as often as asked, each call with results of its own; segment starts
// split the layerwise runs (oneDNN and the brick kernels) without changing the outputs.
TEST(PlanExecutor, PreparedPlansRunAgainAndSplitWhereAsked) {
  const Graph g = small_resnet();
  const ModelWeights w = make_weights(g, 5);
  const Tensor x = random_tensor(g.input_shape(), 6);
  const Tensor ref = run_graph(g, x, w);
  const std::vector<Candidate> plan = {cand(3, 5, Strategy::kMemoized, BrickShape{1, 3, 5, 4})};
  for (LayerwiseEngine engine : {LayerwiseEngine::kOnednn, LayerwiseEngine::kBricks}) {
    SCOPED_TRACE(layerwise_engine_name(engine));
    PlanOptions o;
    o.exec.threads = 2;
    o.layerwise = engine;
    PreparedPlan whole(g, plan, w, o);
    const PlanResult a = whole.run({x}, 1, 2);
    const PlanResult b = whole.run({x}, 0, 1);
    expect_close(a.output(), ref);
    EXPECT_EQ(a.end_to_end_ms.size(), 2u);
    EXPECT_EQ(b.end_to_end_ms.size(), 1u); // its own runs only
    EXPECT_EQ(b.counters.bricks_computed(), a.counters.bricks_computed());
    EXPECT_EQ(b.counters.flops, a.counters.flops);
    EXPECT_GT(b.counters.bricks_computed(), 0);
    ASSERT_EQ(a.segments.size(), 3u); // 1..2, the group 3..5, 6..12
    EXPECT_EQ(a.segments[2].first, 6);
    EXPECT_EQ(a.segments[2].last, 12);
    // Split at 8 and 10: 1..2, 3..5, 6..7, 8..9, 10..12, the same outputs.
    o.segment_starts = {8, 10};
    PreparedPlan split(g, plan, w, o);
    const PlanResult c = split.run({x}, 0, 1);
    ASSERT_EQ(c.segments.size(), 5u);
    const std::vector<std::pair<int, int>> want = {{1, 2}, {3, 5}, {6, 7}, {8, 9}, {10, 12}};
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(c.segments[k].first, want[k].first) << k;
      EXPECT_EQ(c.segments[k].last, want[k].second) << k;
    }
    expect_close(c.output(), ref);
    EXPECT_EQ(c.counters.flops, a.counters.flops);
    // A start outside the layers is an internal error, before any run.
    o.segment_starts = {13};
    EXPECT_THROW(PreparedPlan(g, plan, w, o), InternalError);
  }
}

TEST(PlanExecutor, RejectsBadPlans) {
  const Graph g = small_resnet();
  const ModelWeights w = make_weights(g, 5);
  const Tensor x = random_tensor(g.input_shape(), 6);
  EXPECT_THROW(validate_plan(g, {cand(1, 3, Strategy::kPadded), cand(3, 4, Strategy::kPadded)}),
               UserError);                                                     // overlap
  EXPECT_THROW(validate_plan(g, {cand(0, 2, Strategy::kPadded)}), UserError);  // the input
  EXPECT_THROW(validate_plan(g, {cand(5, 13, Strategy::kPadded)}), UserError); // past the end
  // Layer 3's output is read by the add (5) outside [3, 4].
  EXPECT_THROW(validate_plan(g, {cand(1, 3, Strategy::kPadded)}), UserError);
  EXPECT_THROW(validate_plan(g, {cand(9, 12, Strategy::kMemoized)}), UserError); // gap/linear
  EXPECT_NO_THROW(validate_plan(g, {cand(9, 12, Strategy::kLayerwise)}));
}

TEST(PlanJson, ReadsBothFormsAndNamesBadKeys) {
  const Graph g = small_resnet();
  const std::vector<Candidate> a = parse_plan_json(
      R"([{"first": 1, "last": "max_pool1", "strategy": "padded", "brick": [4, 4], "cb": 8},
          {"first": 3, "last": 5, "strategy": "layerwise"}])",
      "a.json", g);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].group, (Group{1, 2}));
  EXPECT_EQ(a[0].strategy, Strategy::kPadded);
  EXPECT_EQ(a[0].brick, (BrickShape{1, 4, 4, 8}));
  EXPECT_EQ(a[1].strategy, Strategy::kLayerwise);
  // brickdl-tune's plan.json: the plan under "plan", report fields ignored.
  const std::vector<Candidate> b = parse_plan_json(
      R"({"status": "complete", "plan": {"label": "dp", "groups": [
          {"first_layer": 3, "last_layer": 5, "strategy": "memoized", "measured_ms": 1.5,
           "layers": "b1.a .. add1", "brick": {"d": 1, "h": 3, "w": 5, "cb": 4},
           "threads": 128}]}})",
      "b.json", g);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].group, (Group{3, 5}));
  EXPECT_EQ(b[0].brick, (BrickShape{1, 3, 5, 4}));
  EXPECT_EQ(b[0].threads, 128);
  // Round trip of the first form.
  EXPECT_EQ(parse_plan_json(plan_to_json(a).dump(), "c.json", g), a);
  const auto error_of = [&](const std::string& text) {
    try {
      parse_plan_json(text, "p.json", g);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"([{"first": 1, "last": 2, "strategy": "paded", "brick": [4, 4]}])")
                .find("key '[0].strategy'"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"first": 1, "last": 2, "strategy": "padded"}])").find("'brick'"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"first": 1, "last": "b1.x", "strategy": "layerwise"}])")
                .find("no layer named 'b1.x'"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"first": 1, "last": 2, "strategy": "padded", "brick": [4, 4, 4]}])")
                .find("depth 1"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"first": 1, "lsat": 2}])").find("did you mean 'last'"),
            std::string::npos);
  EXPECT_NE(error_of("[{\"first\": 1,\n  \"last\": }]").find("p.json:2:"), std::string::npos)
      << error_of("[{\"first\": 1,\n  \"last\": }]");
}

TEST(PlanJson, BatchBlockIsReadWrittenAndDefaultsToOne) {
  const Graph g = small_resnet();
  // Absent: one image per unit of work (files written before batch blocks still load).
  const std::vector<Candidate> old = parse_plan_json(
      R"([{"first": 1, "last": 2, "strategy": "padded", "brick": [4, 4], "cb": 8}])", "o.json", g);
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].brick.nb, 1);
  // Both forms: "nb" next to "cb", or inside the brick object.
  const std::vector<Candidate> a = parse_plan_json(
      R"([{"first": 1, "last": 2, "strategy": "padded", "brick": [4, 4], "cb": 8, "nb": 4},
          {"first": 3, "last": 5, "strategy": "layerwise"}])",
      "a.json", g);
  EXPECT_EQ(a[0].brick, (BrickShape{1, 4, 4, 8, 4}));
  EXPECT_EQ(a[0].brick.str(), "4x4/c8/n4");
  EXPECT_EQ(parse_plan_json(plan_to_json(a).dump(), "c.json", g), a);
  EXPECT_EQ(plan_to_json(a)[0]["nb"], 4);
  const std::vector<Candidate> b = parse_plan_json(
      R"({"groups": [{"first_layer": 3, "last_layer": 5, "strategy": "memoized",
          "brick": {"h": 3, "w": 5, "cb": 4, "nb": 2}}]})",
      "b.json", g);
  EXPECT_EQ(b[0].brick, (BrickShape{1, 3, 5, 4, 2}));
  const auto error_of = [&](const std::string& text) {
    try {
      parse_plan_json(text, "p.json", g);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (const char* bad : {"0", "-2", "2.5", "\"4\"", "4096"}) {
    const std::string e = error_of(
        std::string(R"([{"first": 1, "last": 2, "strategy": "padded", "brick": [4, 4], "nb": )") +
        bad + "}]");
    EXPECT_NE(e.find("p.json"), std::string::npos) << e;
    EXPECT_NE(e.find("[0].nb"), std::string::npos) << e;
    EXPECT_NE(e.find("an integer from 1 to 1024"), std::string::npos) << e;
  }
  const std::string e = error_of(R"({"groups": [{"first_layer": 1, "last_layer": 2,
      "strategy": "padded", "brick": {"h": 4, "w": 4, "nb": 0}}]})");
  EXPECT_NE(e.find("groups[0].brick.nb"), std::string::npos) << e;
  // Thread block clusters: "cl" likewise (absent: 1), round trip, and the range check.
  const std::vector<Candidate> x = parse_plan_json(
      R"([{"first": 1, "last": 2, "strategy": "padded", "brick": {"h": 4, "w": 4, "cl": 4}}])",
      "x.json", g);
  EXPECT_EQ(x[0].brick.cl, 4);
  EXPECT_EQ(x[0].brick.str(), "4x4/x4");
  EXPECT_EQ(parse_plan_json(plan_to_json(x).dump(), "c.json", g), x);
  EXPECT_EQ(a[0].brick.cl, 1);
  const std::string ex =
      error_of(R"([{"first": 1, "last": 2, "strategy": "padded", "brick": [4, 4], "cl": 17}])");
  EXPECT_NE(ex.find("p.json"), std::string::npos) << ex;
  EXPECT_NE(ex.find("cluster 17: must be from 1 (no cluster) to 16 CTAs"), std::string::npos) << ex;
}

class TempDir {
public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("brickdl_kernels_test_" +
             std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
  fs::path path_;
};

TEST(Npy, RoundTripAndHeaderLayout) {
  TempDir dir;
  const Tensor t = random_tensor({2, 3, 4, 5, 6, 3}, 1);
  write_npy(dir.file("t.npy"), t);
  const NpyArray a = read_npy(dir.file("t.npy"));
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(a.data, t.values());
  EXPECT_EQ(read_npy_tensor(dir.file("t.npy"), t.shape()).values(), t.values());
  // Magic, version 1.0, a header padded so the data starts at a multiple of 64 bytes.
  std::ifstream f(dir.file("t.npy"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(bytes[6], 1);
  const size_t header_len =
      static_cast<unsigned char>(bytes[8]) + 256u * static_cast<unsigned char>(bytes[9]);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(bytes.size(), 10 + header_len + t.numel() * 4);
  const std::string header = bytes.substr(10, header_len);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'shape': (2, 3, 4, 5, 6)"), std::string::npos) << header;
  EXPECT_EQ(header.back(), '\n');
  // 2-D and flat shapes; a 1-D shape is written as Python writes a 1-tuple.
  EXPECT_EQ(npy_shape({2, 3, 1, 5, 6, 2}), (std::vector<int64_t>{2, 3, 5, 6}));
  EXPECT_EQ(npy_shape({2, 10, 1, 1, 1, 0}), (std::vector<int64_t>{2, 10}));
  write_npy(dir.file("v.npy"), {3}, {1, 2, 3});
  EXPECT_EQ(read_npy(dir.file("v.npy")).shape, (std::vector<int64_t>{3}));
}

TEST(Npy, ReadsFloat64AndRejectsBadFiles) {
  TempDir dir;
  // A float64 file written by hand: header for shape (2,) then two doubles.
  {
    std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::ofstream f(dir.file("d.npy"), std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    const uint16_t len = static_cast<uint16_t>(header.size());
    f.write(reinterpret_cast<const char*>(&len), 2);
    f << header;
    const double v[2] = {1.5, -2.25};
    f.write(reinterpret_cast<const char*>(v), sizeof v);
  }
  EXPECT_EQ(read_npy(dir.file("d.npy")).data, (std::vector<float>{1.5f, -2.25f}));
  try {
    read_npy(dir.file("missing.npy"));
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.npy"), std::string::npos);
  }
  {
    std::ofstream f(dir.file("bad.npy"), std::ios::binary);
    f << "not numpy at all";
  }
  EXPECT_THROW(read_npy(dir.file("bad.npy")), UserError);
  write_npy(dir.file("t.npy"), random_tensor({1, 2, 1, 3, 3, 2}, 1));
  try {
    read_npy_tensor(dir.file("t.npy"), TensorShape{1, 3, 1, 3, 3, 2});
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("1x2x3x3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1x3x3x3"), std::string::npos) << e.what();
  }
}

TEST(CpuMeasurer, MeasuresValidatesAndCounts) {
  GraphBuilder b("m", TensorShape{1, 3, 12, 12, 12, 3});
  int x = b.input();
  for (int i = 0; i < 3; ++i)
    x = b.relu(b.conv3d(x, 3, 3, 1, 1));
  const Graph g = fuse_for_inference(b.build());
  CpuMeasurer m(2);
  EXPECT_EQ(m.backend(), "cpu");
  EXPECT_EQ(m.target().rfind("cpu:", 0), 0u);
  EXPECT_GT(m.target().size(), 4u);
  MeasureOptions o;
  o.warmup = 1;
  o.repetitions = 4;
  for (Strategy s : {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized}) {
    const MeasureResult r = m.measure(g, cand(1, 3, s, BrickShape{4, 4, 4, 0}), o);
    ASSERT_EQ(r.status, MeasureStatus::kOk) << strategy_name(s) << ": " << r.error;
    EXPECT_EQ(r.samples_ms.size(), 4u);
    EXPECT_GT(r.min_ms, 0);
    EXPECT_LE(r.min_ms, r.median_ms);
    EXPECT_LE(r.median_ms, r.max_ms);
    EXPECT_LE(r.max_rel_error, 1e-5);
    EXPECT_EQ(r.counters.at("useful_flops"), 2.0 * 3 * g.layer(1).macs);
    EXPECT_EQ(r.counters.at("bytes_stored.output"), 3 * 12 * 12 * 12 * 4);
    EXPECT_EQ(r.counters.count("bricks_computed.2"), 1u);
    EXPECT_EQ(r.counters.count("memo_conflicts"), 1u);
    EXPECT_EQ(r.counters.at("cpu_threads"), 2);
  }
  // The candidate's own counters, not another strategy's: memoized computes each of the
  // 27 bricks of the two intermediate layers once.
  const MeasureResult memo =
      m.measure(g, cand(1, 3, Strategy::kMemoized, BrickShape{4, 4, 4, 0}), o);
  EXPECT_EQ(memo.counters.at("memo_claims"), 54);
  // A tolerance that nothing meets marks the result wrong, with the error in the message.
  MeasureOptions strict = o;
  strict.atol = -1;
  const MeasureResult wrong =
      m.measure(g, cand(1, 3, Strategy::kPadded, BrickShape{4, 4, 4, 0}), strict);
  EXPECT_EQ(wrong.status, MeasureStatus::kWrongResult);
  EXPECT_NE(wrong.error.find("differ from the reference"), std::string::npos) << wrong.error;
  EXPECT_TRUE(wrong.samples_ms.empty());
}

// A decoder step as DeepCAM's: conv → conv_transpose (k 3, stride 2, pad 1, output_padding 1)
// → batch-norm → relu → conv → max pool 3x3/1; fused, the batch-norm and relu fold into the
// transposed conv: 1 conv, 2 conv_transpose (+bn, relu), 3 conv, 4 max pool.
Graph decoder_step() {
  GraphBuilder b("decoder", TensorShape{2, 4, 1, 5, 6, 2});
  const int c = b.conv2d(b.input(), 6, 3, 1, 1, 1, 1, false, "conv");
  Window w;
  w.kernel = {1, 3, 3};
  w.stride = {1, 2, 2};
  w.pad = {0, 1, 1};
  const int t = b.conv_transpose(c, 4, w, {0, 1, 1}, 2, false, "deconv");
  const int r = b.relu(b.batch_norm(t, "deconv.bn"), "deconv.relu");
  b.max_pool(b.conv2d(r, 3, 3, 1, 1, 1, 1, true, "head"), 3, 1, 1, false, "pool");
  return fuse_for_inference(b.build());
}

// Issue 13, item 5: a plan's brick is checked against the model it is for: a [h, w] brick on
// a 3-D model is refused (it was read as [1, h, w]), and an extent of 2^31 is refused at its key
// (it was read as -2147483648).
TEST(PlanJson, BrickRankAndRangeAreChecked) {
  GraphBuilder b("v", TensorShape{1, 3, 8, 8, 8, 3});
  const int x = b.relu(b.conv3d(b.input(), 3, 3, 1, 1));
  b.relu(b.conv3d(x, 3, 3, 1, 1));
  const Graph g = fuse_for_inference(b.build());
  const auto error_of = [&](const std::string& brick) {
    try {
      parse_plan_json(R"([{"first": 1, "last": 2, "strategy": "padded", "brick": )" + brick + "}]",
                      "p.json", g);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("[4, 4]").find("a 3-D model needs a brick [d, h, w], got [h, w]"),
            std::string::npos)
      << error_of("[4, 4]");
  const std::string big = error_of("[4, 4, 2147483648]");
  EXPECT_NE(big.find("[0].brick[2]"), std::string::npos) << big;
  EXPECT_NE(big.find("2147483647"), std::string::npos) << big;
  EXPECT_EQ(big.find("-2147483648"), std::string::npos) << big;
  EXPECT_NE(error_of("[4, 4, 65]").find("from 1 to"), std::string::npos) << error_of("[4, 4, 65]");
  EXPECT_EQ(error_of("[4, 4, 4]"), "no error");
}

// A validation (search/plan_validation.h): repetitions 0 runs the candidate once, validates it
// and keeps that run as the one sample.
TEST(CpuMeasurer, RepetitionsZeroValidatesOnce) {
  GraphBuilder b("v", TensorShape{1, 3, 8, 8, 8, 3});
  const int x = b.relu(b.conv3d(b.input(), 3, 3, 1, 1));
  b.relu(b.conv3d(x, 3, 3, 1, 1));
  const Graph g = fuse_for_inference(b.build());
  CpuMeasurer m(1);
  MeasureOptions o;
  o.warmup = 0;
  o.repetitions = 0;
  o.collect_counters = false;
  const MeasureResult r = m.measure(g, cand(1, 2, Strategy::kMemoized, BrickShape{4, 4, 4, 0}), o);
  ASSERT_EQ(r.status, MeasureStatus::kOk) << r.error;
  ASSERT_EQ(r.samples_ms.size(), 1u);
  EXPECT_EQ(r.median_ms, r.samples_ms[0]);
  EXPECT_TRUE(r.counters.empty());
  EXPECT_LE(r.max_rel_error, 1e-5);
}

// The CPU kernels compute a bf16 or tf32 graph in fp32: they are validated at fp32's tolerance
// (kernels/validation.h fp32_group_tolerance), not at the 9.4% of max|ref| that three bf16
// layers allow a kernel that rounds. An output 2% off fails here (made by hand once: every
// output element x 1.02 before validation gave kWrongResult for each precision).
TEST(CpuMeasurer, TensorCoreAndSixteenBitGraphsAreValidatedAtFp32) {
  for (DType t : {DType::kTF32, DType::kBF16}) {
    GraphBuilder b("p", TensorShape{1, 16, 1, 12, 12, 2}, t);
    const int x = b.relu(b.conv2d(b.input(), 16, 3, 1, 1));
    b.conv2d(b.relu(b.conv2d(x, 16, 1, 1, 0)), 16, 3, 1, 1);
    const Graph g = fuse_for_inference(b.build());
    SCOPED_TRACE(dtype_name(t));
    const Tolerance tol = fp32_group_tolerance(g, Group{1, 3});
    EXPECT_EQ(tol.norm_rtol, 0); // fp32: 8 · 3 · 2^-24 · sqrt(144) is below the default rtol
    EXPECT_GT(group_tolerance(g, Group{1, 3}, 1e-5, 1e-4).norm_rtol, 0.01);
    CpuMeasurer m(1);
    MeasureOptions o;
    o.warmup = 0;
    o.repetitions = 0;
    o.collect_counters = false;
    for (Strategy s : {Strategy::kPadded, Strategy::kLayerwise}) {
      const MeasureResult r = m.measure(g, cand(1, 3, s, BrickShape{1, 4, 4, 0}), o);
      ASSERT_EQ(r.status, MeasureStatus::kOk) << r.error;
      EXPECT_LE(r.max_rel_error, 1e-5);
    }
  }
}

TEST(CpuMeasurer, LayerwiseGroupWithAConvTransposeRunsAndValidates) {
  const Graph g = decoder_step();
  ASSERT_EQ(g.size(), 5);
  ASSERT_EQ(g.layer(2).op, OpKind::kConvTranspose);
  ASSERT_TRUE(g.layer(2).bn_folded);
  ASSERT_EQ(g.layer(2).out, (TensorShape{2, 4, 1, 10, 12, 2}));
  CpuMeasurer m(2);
  MeasureOptions o;
  o.warmup = 0;
  o.repetitions = 2;
  const MeasureResult r = m.measure(g, cand(1, 4, Strategy::kLayerwise), o);
  ASSERT_EQ(r.status, MeasureStatus::kOk) << r.error;
  EXPECT_LE(r.max_rel_error, 1e-5);
  int64_t macs = 0, params = 0;
  for (int id = 1; id <= 4; ++id) {
    macs += g.layer(id).macs;
    params += g.layer(id).params;
  }
  EXPECT_EQ(r.counters.at("useful_flops"), 2.0 * static_cast<double>(macs));
  EXPECT_EQ(r.counters.at("bytes_loaded.weight"), 4.0 * static_cast<double>(params));
  EXPECT_EQ(r.counters.at("bytes_stored.output"), 2 * 3 * 10 * 12 * 4);
  // Merged strategies refuse the groups holding it, and run the brickable rest.
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized}) {
    const MeasureResult no = m.measure(g, cand(1, 4, s, BrickShape{1, 4, 4, 0}), o);
    EXPECT_EQ(no.status, MeasureStatus::kUnsupported);
    EXPECT_NE(no.error.find("conv_transpose"), std::string::npos) << no.error;
    const MeasureResult tail = m.measure(g, cand(3, 4, s, BrickShape{1, 4, 4, 0}), o);
    EXPECT_EQ(tail.status, MeasureStatus::kOk) << tail.error;
  }
}

TEST(PlanExecutor, ConvTransposeOutsideTheGroupsRunsLayerwise) {
  // Plan: the conv padded, the head and pool memoized; the transposed conv between them
  // belongs to no group and runs as a one-layer layerwise group.
  const Graph g = decoder_step();
  const ModelWeights w = make_weights(g, 3);
  const Tensor x = random_tensor(g.input_shape(), 4);
  const std::vector<Candidate> plan = {
      cand(1, 1, Strategy::kPadded, BrickShape{1, 4, 4, 0}),
      cand(3, 4, Strategy::kMemoized, BrickShape{1, 4, 4, 0}),
  };
  const PlanResult res = execute_plan(g, plan, x, w, ExecOptions{2});
  expect_close(res.output(), run_graph(g, x, w));
  EXPECT_EQ(res.counters.bricks_per_layer.at(2), 0); // layerwise: no bricks
  EXPECT_GT(res.counters.bricks_per_layer.at(3), 0);
}

TEST(CpuMeasurer, ReferenceIsNotReusedAcrossDifferentGroups) {
  // Same graph name, layer names, shapes and parameter counts; only the dilation (and padding)
  // differ. A reference cached by a too-coarse key would mark the second result wrong.
  const auto chain = [](int dilation) {
    GraphBuilder b("same_name", TensorShape{1, 2, 8, 8, 8, 3});
    b.conv3d(b.conv3d(b.input(), 2, 3, 1, dilation, dilation), 2, 3, 1, 1);
    return b.build();
  };
  const Graph a = chain(1), b = chain(2);
  ASSERT_EQ(a.layer(1).out, b.layer(1).out);
  ASSERT_EQ(a.layer(1).params, b.layer(1).params);
  CpuMeasurer m(2);
  MeasureOptions o;
  o.warmup = 0;
  o.repetitions = 1;
  for (const Graph* g : {&a, &b, &a}) {
    const MeasureResult r =
        m.measure(*g, cand(1, 2, Strategy::kMemoized, BrickShape{3, 3, 3, 0}), o);
    EXPECT_EQ(r.status, MeasureStatus::kOk) << r.error;
  }
}

TEST(CpuMeasurer, UnsupportedCandidatesAreResultsNotExceptions) {
  GraphBuilder b("u", TensorShape{1, 3, 1, 8, 8, 2});
  b.linear(b.flatten(b.global_avg_pool(b.conv2d(b.input(), 4, 3, 1, 1))), 2);
  const Graph g = b.build();
  CpuMeasurer m(1);
  const MeasureResult r = m.measure(g, cand(1, 4, Strategy::kPadded), MeasureOptions{});
  EXPECT_EQ(r.status, MeasureStatus::kUnsupported);
  EXPECT_FALSE(r.error.empty());
  EXPECT_TRUE(r.samples_ms.empty());
}

} // namespace
} // namespace brickdl::kernels
