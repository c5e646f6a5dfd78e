// The model report of `brickdl-tune --describe` on a tiny graph whose every number is worked
// out by hand below.
#include <gtest/gtest.h>

#include <sstream>

#include "core/gpu_spec.h"
#include "core/graph_builder.h"
#include "model/baseline.h"
#include "model/report.h"

namespace brickdl::model {
namespace {

// input 1x8x64x64 → conv1 3x3 pad 1 (8 → 8) → conv2 3x3 pad 1 (8 → 8), fp32.
Graph tiny() {
  GraphBuilder b("tiny", TensorShape{1, 8, 1, 64, 64, 2});
  const int c1 = b.conv2d(0, 8, 3, 1, 1);
  b.conv2d(c1, 8, 3, 1, 1);
  return fuse_for_inference(b.build());
}

// Lines of the report that contain `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);)
    if (line.find(needle) != std::string::npos)
      out.push_back(line);
  return out;
}

TEST(ModelReport, TinyGraphOnA100) {
  std::ostringstream os;
  describe_model(tiny(), *find_gpu_spec("A100-40GB"), os);
  const std::string r = os.str();
  SCOPED_TRACE(r);
  EXPECT_NE(r.find("Model report: tiny (fp32, batch 1) on A100-40GB"), std::string::npos);
  // Tensors are 8 · 64 · 64 · 4 B = 131072 B; weights 8 · 8 · 9 · 4 B = 2304 B. Each layer
  // alone reads its input and weights cold and writes its output: 264448 B = 0.264 MB, which
  // is also its lower bound (DRAM/LB = 1.00).
  // Lower bound time = max(264448 B / 1555 GB/s = 0.17 us, 2 · 8 · 4096 · 72 FLOPs /
  // 19.5 TFLOPS = 0.24198 us) = 0.24 us.
  // Baseline time: the library at its roofline (it fills every SM, model/strategies/
  // layerwise.cpp): compute 4718592 / (19.5e12 · 0.6) = 0.4033 us beats DRAM (264448 /
  // (1555e9 · 0.85) = 0.20 us) and L2; + 3 us launch = 3.4033 us; 3.4033 / 0.24198 = 14.06x
  // the bound.
  for (const char* layer : {"conv1", "conv2"}) {
    const auto rows = lines_with(r, std::string(" ") + layer + " ");
    ASSERT_EQ(rows.size(), 1u) << layer;
    std::istringstream row(rows[0]);
    std::vector<std::string> f;
    for (std::string w; row >> w;)
      f.push_back(w);
    // id, name, op words..., output, DRAM MB, time us, LB MB, LB us, DRAM/LB, time/LB
    ASSERT_GE(f.size(), 9u);
    const size_t n = f.size();
    EXPECT_EQ(f[n - 7], "1x8x64x64") << layer;
    EXPECT_EQ(f[n - 6], "0.264") << layer;
    EXPECT_EQ(f[n - 5], "3.40") << layer;
    EXPECT_EQ(f[n - 4], "0.264") << layer;
    EXPECT_EQ(f[n - 3], "0.24") << layer;
    EXPECT_EQ(f[n - 2], "1.00") << layer;
    EXPECT_EQ(f[n - 1], "14.06") << layer;
  }
  // Sum row: 0.529 MB of DRAM over 0.529 MB of per-layer bounds, 6.81 us.
  const auto sum = lines_with(r, "2 layers, 2 launches");
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_NE(sum[0].find("0.529       6.81      0.529       0.48    1.00   14.06"),
            std::string::npos);
  // Back to back, conv1's output stays in L2 for conv2 (128 KiB << 20 MiB) and is never
  // written: input + weights + weights + output = 266752 B = 0.267 MB. The whole model as
  // one group moves the same 0.267 MB and needs 2 · 4718592 FLOPs at peak = 0.48 us.
  EXPECT_NE(r.find("L2 kept between them: 0.267 MB"), std::string::npos);
  EXPECT_NE(r.find("Whole model as one group"), std::string::npos);
  EXPECT_NE(r.find("0.267 MB, 0.48 us"), std::string::npos);
}

TEST(ModelReport, BaselineTotalsAreSumsOfItsLayers) {
  const Graph g = tiny();
  const CostModel m(*find_gpu_spec("H100-SXM"));
  const Baseline b = layerwise_baseline(m, g);
  ASSERT_EQ(b.layers.size(), 2u);
  double dram = 0, time = 0;
  for (const BaselineLayer& l : b.layers) {
    dram += l.predicted.dram_bytes;
    time += l.predicted.time_ms;
    EXPECT_GE(l.predicted.time_ms, l.bound.time_ms);
    EXPECT_GE(l.predicted.dram_bytes, l.bound.dram_bytes);
  }
  EXPECT_DOUBLE_EQ(dram, b.total.dram_bytes);
  EXPECT_NEAR(time, b.total.time_ms, 1e-12);
  EXPECT_EQ(b.total.launches, 2);
  // Back to back, the intermediate stays in L2: one tensor read and one written less.
  EXPECT_DOUBLE_EQ(b.warm.dram_bytes, b.total.dram_bytes - 2 * 131072.0);
  EXPECT_DOUBLE_EQ(b.model_bound.dram_bytes, (131072.0 * 2 + 2304 * 2));
}

} // namespace
} // namespace brickdl::model
