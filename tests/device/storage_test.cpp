// 16-bit global storage of bf16 / fp16 plans (templates/group_desc.h Storage): the host
// conversions the emulator, the device runner and the kernels share, bit for bit, and whole
// generated kernels whose inputs, weights, outputs and memoized bricks hold 16-bit values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/graph_builder.h"
#include "core/group.h"
#include "kernels/cuda/codegen.h"
#include "kernels/cuda/emulator.h"
#include "kernels/validation.h"
#include "tests/device/emulated_group.h"
#include "tests/device/test_graphs.h"

namespace brickdl::cuda {
namespace {

uint16_t stored(float v, int storage) {
  return to_storage(&v, 1, storage)[0];
}

float loaded(uint16_t u, int storage) {
  return from_storage({u}, storage)[0];
}

bool is_nan_bits(uint16_t u, int storage) {
  return storage == dev::kStorageBf16 ? (u & 0x7f80u) == 0x7f80u && (u & 0x7fu) != 0
                                      : (u & 0x7c00u) == 0x7c00u && (u & 0x3ffu) != 0;
}

// Every 16-bit pattern loads to a float that stores back to the same pattern (NaNs: a NaN).
TEST(Storage, EveryPatternRoundTrips) {
  for (int storage : {int{dev::kStorageBf16}, int{dev::kStorageF16}}) {
    std::vector<uint16_t> all(65536);
    for (size_t i = 0; i < all.size(); ++i)
      all[i] = static_cast<uint16_t>(i);
    const std::vector<float> values = from_storage(all, storage);
    const std::vector<uint16_t> back = to_storage(values.data(), values.size(), storage);
    int mismatches = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      if (is_nan_bits(all[i], storage)) {
        mismatches += std::isnan(values[i]) && is_nan_bits(back[i], storage) ? 0 : 1;
      } else {
        mismatches += back[i] == all[i] ? 0 : 1;
      }
    }
    EXPECT_EQ(mismatches, 0) << "storage " << storage;
  }
}

TEST(Storage, KnownEncodings) {
  const int bf = dev::kStorageBf16, hf = dev::kStorageF16;
  EXPECT_EQ(stored(1.f, bf), 0x3f80);
  EXPECT_EQ(stored(-2.f, bf), 0xc000);
  EXPECT_EQ(stored(1.f + std::ldexp(1.f, -8), bf), 0x3f80); // tie: to even (down)
  EXPECT_EQ(stored(1.f + std::ldexp(3.f, -8), bf), 0x3f82); // tie: to even (up)
  EXPECT_EQ(stored(std::numeric_limits<float>::infinity(), bf), 0x7f80);
  EXPECT_TRUE(is_nan_bits(stored(std::numeric_limits<float>::quiet_NaN(), bf), bf));
  // A NaN whose payload lies only in the low 16 bits must not become infinity.
  float low_nan;
  const uint32_t bits = 0x7f800001u;
  std::memcpy(&low_nan, &bits, sizeof low_nan);
  EXPECT_TRUE(is_nan_bits(stored(low_nan, bf), bf));
  EXPECT_EQ(stored(1.f, hf), 0x3c00);
  EXPECT_EQ(stored(-2.f, hf), 0xc000);
  EXPECT_EQ(stored(65504.f, hf), 0x7bff);               // the largest half
  EXPECT_EQ(stored(65520.f, hf), 0x7c00);               // overflow: infinity
  EXPECT_EQ(stored(std::ldexp(1.f, -24), hf), 0x0001);  // smallest subnormal
  EXPECT_EQ(stored(std::ldexp(3.f, -25), hf), 0x0002);  // subnormal tie: to even
  EXPECT_EQ(stored(-std::ldexp(1.f, -26), hf), 0x8000); // underflow: -0
  EXPECT_EQ(stored(std::ldexp(1.f, -14), hf), 0x0400);  // smallest normal
  EXPECT_EQ(loaded(0x3555, hf), 0x1.554p-2f);
  EXPECT_EQ(loaded(0x3eab, bf), 0x1.56p-2f);
  EXPECT_TRUE(is_nan_bits(stored(std::numeric_limits<float>::quiet_NaN(), hf), hf));
}

// Whether every value is what the storage type holds exactly.
int unrepresentable(const std::vector<float>& v, int storage) {
  const std::vector<float> again = from_storage(to_storage(v.data(), v.size(), storage), storage);
  int n = 0;
  for (size_t i = 0; i < v.size(); ++i)
    n += again[i] == v[i] || (std::isnan(again[i]) && std::isnan(v[i])) ? 0 : 1;
  return n;
}

// A bf16 / fp16 plan stores its output (and every global tensor) in 16 bits: each output
// element is a value of the format, within an ulp of the reference with the kernels' roundings
// and the measurers' tolerance of the fp32 reference (test_support::check_emulated);
// the same group in tf32 (fp32 storage) has outputs that are not, so the check can fail.
TEST(StorageKernels, SixteenBitPlansWriteSixteenBitValues) {
  const DType types[] = {DType::kTF32, DType::kBF16, DType::kF16};
  for (DType t : types) {
    const Graph g = test_support::bottleneck_block(TensorShape{2, 16, 1, 9, 10, 2}, 16, t);
    const Group grp{g.find("conv1"), g.find("add")};
    for (Strategy s : {Strategy::kPadded, Strategy::kMemoized, Strategy::kLayerwise}) {
      const Candidate c{grp, {1, 4, 4, 0}, s, 64};
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + c.config_str());
      EmulatorOptions eo;
      eo.workers = s == Strategy::kMemoized ? 3 : 1;
      const test_support::EmulatedGroup r = test_support::emulate_group(g, c, eo, 11);
      const int storage = r.plan.launches[0].desc.storage;
      EXPECT_EQ(storage, storage_of(t));
      EXPECT_NE(r.plan.source.find("#define BRICKDL_STORAGE " + std::to_string(storage)),
                std::string::npos);
      const int probe = t == DType::kTF32 ? dev::kStorageBf16 : storage;
      const int bad = unrepresentable(r.emu.output, probe);
      if (t == DType::kTF32) {
        EXPECT_GT(bad, static_cast<int>(r.emu.output.size() / 4)); // (zeros after the relu are)
      } else {
        EXPECT_EQ(bad, 0);
      }
      test_support::expect_emulated_ok(g, r, std::string(dtype_name(t)) + " " + c.config_str());
    }
  }
}

} // namespace
} // namespace brickdl::cuda
