#pragma once
// The graphs and candidates of the device tests that run generated kernels against a reference
// (device_test.cpp), in one place for two readers:
//
//   device_test.cpp          runs each case on the GPU (run_on_device), compares
//   device_test_kernels.cpp  compiles each case's kernel ahead, without a GPU, into the NVRTC
//                            cache the device bundle carries (scripts/device-bundle.sh)
//
// A case's kernel source depends on its graph, its candidate and the device's code generator
// options (codegen_for_device), not on the data, so both readers compile the same source and
// the device finds it in the cache. Adding a case here adds it to both.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"
#include "core/graph_builder.h"
#include "tests/device/test_graphs.h"

namespace brickdl::cuda::test_support {

struct DeviceCase {
  Graph graph;
  Candidate candidate;
  std::string label; // for the test's trace: precision, channels, configuration
};

inline Candidate make_candidate(Group g, Strategy s, BrickShape b, int threads = 128) {
  Candidate c;
  c.group = g;
  c.strategy = s;
  c.brick = b;
  c.threads = threads;
  return c;
}

inline Graph device_bottleneck(int batch, int64_t image, int64_t channels = 64) {
  return bottleneck_block(TensorShape{batch, channels, 1, image, image, 2}, 32);
}

inline Graph chain3d(int64_t image) {
  GraphBuilder b("chain3d", TensorShape{1, 3, image, image, image, 3});
  int x = b.input();
  for (int i = 1; i <= 3; ++i)
    x = b.relu(b.conv3d(x, 3, 3, 1, 1, 1, 1, true, "c" + std::to_string(i)));
  return fuse_for_inference(b.build());
}

inline void add_cases(std::vector<DeviceCase>& out, const Graph& g,
                      const std::vector<Candidate>& cands, const std::string& prefix = "") {
  for (const Candidate& c : cands)
    out.push_back({g, c, prefix + g.name() + " " + c.config_str()});
}

// Device.GeneratedKernelsMatchTheCpuReference: fp32 (FMA) kernels of every strategy.
inline std::vector<DeviceCase> generated_cases() {
  using S = Strategy;
  std::vector<DeviceCase> out;
  add_cases(out, device_bottleneck(2, 20),
            {make_candidate({1, 4}, S::kPadded, {1, 8, 8, 0}),
             make_candidate({1, 4}, S::kMemoized, {1, 4, 8, 16}, 64),
             make_candidate({1, 4}, S::kLayerwise, {1, 8, 8, 0})});
  // Batch blocks (the last one ragged), the persistent memoized grid, and the 96-channel
  // input streamed through two chunk buffers with cp.async: padded conv1 .. conv3 (its only
  // reader is conv1) and memoized conv1 alone (20x20 bricks of 16 channels: core/group.h
  // memoized_stream_chunk streams it).
  add_cases(out, device_bottleneck(3, 20, 96),
            {make_candidate({1, 4}, S::kPadded, {1, 8, 8, 0, 2}),
             make_candidate({1, 3}, S::kPadded, {1, 4, 4, 16, 2}),
             make_candidate({1, 4}, S::kMemoized, {1, 8, 8, 16, 2}, 256),
             make_candidate({1, 4}, S::kPadded, {1, 4, 4, 0, 3}, 512),
             make_candidate({1, 4}, S::kMemoized, {1, 8, 8, 32, 3}, 512),
             make_candidate({1, 1}, S::kMemoized, {1, 20, 20, 16}, 128)});
  add_cases(out, chain3d(18),
            {make_candidate({1, 3}, S::kPadded, {4, 4, 4, 0}),
             make_candidate({1, 3}, S::kMemoized, {8, 8, 8, 0}, 256),
             make_candidate({2, 3}, S::kMemoized, {3, 5, 7, 0}, 96)});
  // EfficientNet-B0's MBConv block without its SE (SiLU epilogues, the depthwise conv between
  // the 1x1 convs), merged whole.
  add_cases(out, mbconv_block(TensorShape{2, 16, 1, 20, 20, 2}, 4),
            {make_candidate({1, 4}, S::kPadded, {1, 8, 8, 0}),
             make_candidate({1, 4}, S::kMemoized, {1, 4, 8, 16}, 128)});
  // With its SE: the group after the SE's pool multiplies by the SE vector (layers 6..8),
  // and the group before it ends at the depthwise conv with its SiLU (layers 1..2).
  add_cases(out, mbconv_se_block(TensorShape{2, 16, 1, 20, 20, 2}, 4),
            {make_candidate({6, 8}, S::kPadded, {1, 8, 8, 0}),
             make_candidate({6, 8}, S::kMemoized, {1, 4, 8, 16}, 128),
             make_candidate({1, 2}, S::kPadded, {1, 8, 8, 0})});
  // Random 2-D chains with stride, dilation and ragged bricks (a fixed seed: the same chains on
  // every machine, so the kernels compiled ahead are the ones run).
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int t = 0; t < 4; ++t) {
    GraphBuilder b("random", TensorShape{pick(1, 3), pick(1, 8), 1, pick(9, 30), pick(9, 30), 2});
    int x = b.input();
    for (int l = 0; l < 3; ++l) {
      const int k = pick(0, 1) * 2 + 1, s = pick(0, 3) == 0 ? 2 : 1, dil = pick(1, 2);
      x = b.relu(b.conv2d(x, pick(2, 12), k, s, dil * (k - 1) / 2, dil, 1, true));
    }
    const Graph g = fuse_for_inference(b.build());
    const BrickShape brick{1, pick(2, 9), pick(2, 9), pick(0, 1) ? 0 : 4, pick(1, 2)};
    const int padded_threads = 32 * pick(1, 8);
    const int memoized_threads = 32 * pick(1, 8);
    add_cases(out, g,
              {make_candidate({1, 3}, S::kPadded, brick, padded_threads),
               make_candidate({1, 3}, S::kMemoized, brick, memoized_threads)});
  }
  return out;
}

// Device.TensorCoreKernelsMatchTheirHostEmulation: each tensor-core precision, every strategy.
inline std::vector<DeviceCase> tensor_core_cases() {
  std::vector<DeviceCase> out;
  for (DType t : {DType::kTF32, DType::kBF16, DType::kF16})
    add_cases(out, bottleneck_block(TensorShape{2, 32, 1, 20, 20, 2}, 32, t),
              {make_candidate({1, 4}, Strategy::kPadded, {1, 8, 8, 0}),
               make_candidate({1, 4}, Strategy::kMemoized, {1, 4, 8, 16}, 64),
               make_candidate({1, 4}, Strategy::kLayerwise, {1, 8, 8, 0})},
              std::string(dtype_name(t)) + " ");
  for (DType t : {DType::kTF32, DType::kBF16})
    add_cases(out, mbconv_block(TensorShape{2, 16, 1, 20, 20, 2}, 4, t),
              {make_candidate({1, 4}, Strategy::kPadded, {1, 8, 8, 0}),
               make_candidate({1, 4}, Strategy::kMemoized, {1, 4, 8, 16}, 128)},
              std::string(dtype_name(t)) + " ");
  for (DType t : {DType::kTF32, DType::kBF16})
    add_cases(out, mbconv_se_block(TensorShape{2, 16, 1, 20, 20, 2}, 4, t),
              {make_candidate({6, 8}, Strategy::kPadded, {1, 8, 8, 0}),
               make_candidate({6, 8}, Strategy::kMemoized, {1, 4, 8, 16}, 128)},
              std::string(dtype_name(t)) + " ");
  return out;
}

// Device.WgmmaKernelsMatchTheirHostEmulation: warpgroup tiles of 64 positions by 8, 16 and 32
// channels (8, 16 and 96 channels), one and two per warpgroup, padded and memoized.
inline std::vector<DeviceCase> wgmma_cases() {
  std::vector<DeviceCase> out;
  for (DType t : {DType::kTF32, DType::kBF16, DType::kF16})
    for (int64_t ch : {8, 16, 96})
      add_cases(out,
                bottleneck_block(TensorShape{2, ch, 1, 20, 20, 2}, std::max<int64_t>(ch / 2, 8), t),
                {make_candidate({1, 4}, Strategy::kPadded, {1, 8, 8, 0}, 128),
                 make_candidate({1, 4}, Strategy::kPadded, {1, 16, 16, 0}, 256),
                 make_candidate({1, 4}, Strategy::kMemoized, {1, 8, 8, 0}, 256)},
                std::string(dtype_name(t)) + " " + std::to_string(ch) + " channels ");
  return out;
}

// Device.ClusterKernelsMatchTheirHostEmulation: clusters of 2, 8 and 16 CTAs, fp32 and tf32.
inline std::vector<DeviceCase> cluster_cases() {
  std::vector<DeviceCase> out;
  for (DType t : {DType::kF32, DType::kTF32})
    for (int cl : {2, 8, 16})
      add_cases(out, bottleneck_block(TensorShape{2, 128, 1, 10, 10, 2}, 128, t),
                {make_candidate({1, 4}, Strategy::kPadded, {1, 10, 10, 0, 1, cl}, 128)},
                std::string(dtype_name(t)) + " ");
  return out;
}

// Each test above by its gtest name, in the order the device run runs them.
struct DeviceCaseSet {
  const char* test;
  std::vector<DeviceCase> (*cases)();
};
inline const std::vector<DeviceCaseSet>& device_case_sets() {
  static const std::vector<DeviceCaseSet> sets{
      {"Device.WgmmaKernelsMatchTheirHostEmulation", wgmma_cases},
      {"Device.TensorCoreKernelsMatchTheirHostEmulation", tensor_core_cases},
      {"Device.ClusterKernelsMatchTheirHostEmulation", cluster_cases},
      {"Device.GeneratedKernelsMatchTheCpuReference", generated_cases}};
  return sets;
}

} // namespace brickdl::cuda::test_support
