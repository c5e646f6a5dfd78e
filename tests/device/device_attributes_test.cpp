// Device attributes against the named specs (kernels/cuda/device_attributes.h): no GPU needed.
#include "kernels/cuda/device_attributes.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace brickdl::cuda {
namespace {

// What an H200 reports, as far as this project saw one: 132 SMs and 60 MB of L2 (PyTorch's
// reading on a lent H200), Hopper's shared memory and registers, HBM3e at 3201 MHz on a
// 6144-bit bus.
DeviceAttributes h200_as_seen() {
  DeviceAttributes a;
  a.name = "NVIDIA H200";
  a.cc = 90;
  a.sm_count = 132;
  a.l2_bytes = 60 * 1024 * 1024;
  a.smem_per_sm_bytes = 228 * 1024;
  a.smem_per_block_optin_bytes = 227 * 1024;
  a.registers_per_sm = 65536;
  a.max_threads_per_sm = 2048;
  a.mem_clock_khz = 3201000;
  a.mem_bus_bits = 6144;
  a.global_mem_bytes = int64_t{143771} * 1024 * 1024;
  return a;
}

TEST(DeviceAttributes, DeviceNamesMapToTheirSpecs) {
  ASSERT_NE(spec_for_device("NVIDIA H200"), nullptr);
  EXPECT_EQ(spec_for_device("NVIDIA H200")->name, "H200");
  EXPECT_EQ(spec_for_device("NVIDIA H100 80GB HBM3")->name, "H100-SXM");
  EXPECT_EQ(spec_for_device("NVIDIA A100-SXM4-80GB")->name, "A100-80GB");
  EXPECT_EQ(spec_for_device("NVIDIA A100-SXM4-40GB")->name, "A100-40GB");
  EXPECT_EQ(spec_for_device("NVIDIA GeForce RTX 4090"), nullptr);
}

TEST(DeviceAttributes, DramPeakFromClockAndBus) {
  const DeviceAttributes a = h200_as_seen();
  // 2 transfers per clock x 3.201 GHz x 768 bytes = 4917 GB/s.
  EXPECT_NEAR(a.dram_peak_gbs(), 4916.7, 0.1);
}

TEST(DeviceAttributes, TheH200sLargerL2IsTheOneDifference) {
  const GpuSpec* spec = find_gpu_spec("H200");
  ASSERT_NE(spec, nullptr);
  const DeviceAttributes a = h200_as_seen();
  const auto diffs = compare_with_spec(a, *spec);
  std::string fields;
  for (const SpecDifference& d : diffs)
    fields += d.field + " ";
  // The spec's 50 MB L2 is the H100's; everything else agrees within 5% (the bandwidth from
  // the clocks, 4917 GB/s, within 2.4% of the datasheet's 4800).
  ASSERT_EQ(diffs.size(), 1u) << fields;
  EXPECT_EQ(diffs[0].field, "l2_bytes");
  EXPECT_EQ(diffs[0].device, 60.0 * 1024 * 1024);
  EXPECT_EQ(diffs[0].spec, spec->l2_bytes);
  const std::string text = describe(a, spec);
  EXPECT_NE(text.find("differs: l2_bytes"), std::string::npos) << text;
  const auto j = nlohmann::json::parse(to_json(a, spec));
  EXPECT_EQ(j["spec"], "H200");
  ASSERT_EQ(j["differences"].size(), 1u);
  EXPECT_EQ(j["differences"][0]["field"], "l2_bytes");
}

TEST(DeviceAttributes, ASpecMatchingEveryFieldHasNoDifference) {
  const GpuSpec* spec = find_gpu_spec("A100-40GB");
  ASSERT_NE(spec, nullptr);
  DeviceAttributes a;
  a.name = "NVIDIA A100-SXM4-40GB";
  a.sm_count = spec->sm_count;
  a.l2_bytes = static_cast<int64_t>(spec->l2_bytes);
  a.smem_per_sm_bytes = static_cast<int64_t>(spec->smem_per_sm_bytes);
  a.smem_per_block_optin_bytes = static_cast<int64_t>(spec->smem_per_block_bytes);
  a.registers_per_sm = spec->registers_per_sm;
  a.max_threads_per_sm = spec->max_threads_per_sm;
  a.global_mem_bytes = static_cast<int64_t>(spec->dram_gb * 1e9);
  a.mem_bus_bits = 5120;
  a.mem_clock_khz = static_cast<int>(spec->dram_bandwidth_gbs * 1e9 / (2 * 640) / 1e3);
  EXPECT_TRUE(compare_with_spec(a, *spec).empty()) << describe(a, spec);
  EXPECT_NE(describe(a, spec).find("matches the device"), std::string::npos);
  // One SM fewer is within 5%; 10% fewer is not.
  a.sm_count = spec->sm_count - 1;
  EXPECT_TRUE(compare_with_spec(a, *spec).empty());
  a.sm_count = spec->sm_count * 9 / 10;
  ASSERT_EQ(compare_with_spec(a, *spec).size(), 1u);
  EXPECT_EQ(compare_with_spec(a, *spec)[0].field, "sm_count");
}

TEST(DeviceAttributes, NoSpecIsSaid) {
  DeviceAttributes a;
  a.name = "Some GPU";
  EXPECT_NE(describe(a, nullptr).find("none of the named specs"), std::string::npos);
  EXPECT_TRUE(nlohmann::json::parse(to_json(a, nullptr))["spec"].is_null());
}

} // namespace
} // namespace brickdl::cuda
