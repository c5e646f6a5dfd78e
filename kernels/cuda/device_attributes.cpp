#include "kernels/cuda/device_attributes.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace brickdl::cuda {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// One spec field the device also reports: its name, the two values, the unit and what the
// model uses it for.
struct Field {
  const char* name;
  double device;
  double spec;
  const char* unit;
  const char* use;
};

std::vector<Field> fields(const DeviceAttributes& a, const GpuSpec& s) {
  return {
      {"sm_count", double(a.sm_count), double(s.sm_count), "SMs", "waves and occupancy"},
      {"l2_bytes", double(a.l2_bytes), s.l2_bytes, "bytes",
       "L2 reuse distances and the live memo footprint"},
      {"smem_per_sm_bytes", double(a.smem_per_sm_bytes), s.smem_per_sm_bytes, "bytes",
       "blocks per SM"},
      {"smem_per_block_bytes", double(a.smem_per_block_optin_bytes), s.smem_per_block_bytes,
       "bytes", "which candidates are feasible"},
      {"registers_per_sm", double(a.registers_per_sm), double(s.registers_per_sm), "registers",
       "blocks per SM"},
      {"max_threads_per_sm", double(a.max_threads_per_sm), double(s.max_threads_per_sm), "threads",
       "blocks per SM"},
      {"dram_bandwidth_gbs", a.dram_peak_gbs(), s.dram_bandwidth_gbs, "GB/s",
       "DRAM time (from the memory clock and bus width the device reports)"},
  };
}

} // namespace

double DeviceAttributes::dram_peak_gbs() const {
  return 2.0 * mem_clock_khz * 1e3 * (mem_bus_bits / 8.0) / 1e9;
}

const GpuSpec* spec_for_device(const std::string& device_name) {
  const std::string n = lower(device_name);
  if (contains(n, "h200"))
    return find_gpu_spec("H200");
  if (contains(n, "h100"))
    return find_gpu_spec("H100-SXM");
  if (contains(n, "a100"))
    return find_gpu_spec(contains(n, "80g") ? "A100-80GB" : "A100-40GB");
  return nullptr;
}

std::vector<SpecDifference> compare_with_spec(const DeviceAttributes& a, const GpuSpec& spec,
                                              double tolerance) {
  std::vector<SpecDifference> out;
  for (const Field& f : fields(a, spec)) {
    if (f.device <= 0 && f.spec <= 0)
      continue;
    const double scale = std::max(std::abs(f.device), std::abs(f.spec));
    if (std::abs(f.device - f.spec) > tolerance * scale)
      out.push_back({f.name, f.device, f.spec, f.unit, f.use});
  }
  return out;
}

std::string describe(const DeviceAttributes& a, const GpuSpec* spec) {
  std::ostringstream o;
  o << fmt::format("device {}: {} (sm_{}), PCI {}\n", a.ordinal, a.name, a.cc, a.pci_bus_id);
  o << fmt::format("  SMs {}, max {} threads / {} blocks per SM, {} registers per SM\n", a.sm_count,
                   a.max_threads_per_sm, a.max_blocks_per_sm, a.registers_per_sm);
  o << fmt::format("  L2 {} bytes ({:.1f} MiB; persisting at most {} bytes)\n", a.l2_bytes,
                   double(a.l2_bytes) / (1 << 20), a.persisting_l2_max_bytes);
  o << fmt::format("  shared memory {} bytes per SM, {} per block (opt-in)\n", a.smem_per_sm_bytes,
                   a.smem_per_block_optin_bytes);
  o << fmt::format("  max SM clock {} MHz; memory {} MHz x {} bits = {:.0f} GB/s peak; {:.1f} GB\n",
                   a.sm_clock_khz / 1000, a.mem_clock_khz / 1000, a.mem_bus_bits, a.dram_peak_gbs(),
                   double(a.global_mem_bytes) / 1e9);
  o << fmt::format("  driver {}, CUDA runtime {}, cuDNN {}, NVRTC {}\n", a.driver_version,
                   a.runtime_version, a.cudnn_version, a.nvrtc_version);
  if (!spec) {
    o << "spec: none of the named specs matches this device's name\n";
    return o.str();
  }
  const auto diffs = compare_with_spec(a, *spec);
  o << "spec " << spec->name << ": " << (diffs.empty() ? "matches the device" : "differs") << "\n";
  for (const SpecDifference& d : diffs)
    o << fmt::format(
        "  differs: {}: device {:.6g} {}, spec {:.6g} {} ({:+.1f}%); the model uses it "
        "for {}\n",
        d.field, d.device, d.unit, d.spec, d.unit, 100.0 * (d.spec - d.device) / d.device, d.note);
  return o.str();
}

std::string to_json(const DeviceAttributes& a, const GpuSpec* spec) {
  nlohmann::json j = {{"ordinal", a.ordinal},
                      {"name", a.name},
                      {"pci_bus_id", a.pci_bus_id},
                      {"cc", a.cc},
                      {"sm_count", a.sm_count},
                      {"l2_bytes", a.l2_bytes},
                      {"persisting_l2_max_bytes", a.persisting_l2_max_bytes},
                      {"smem_per_sm_bytes", a.smem_per_sm_bytes},
                      {"smem_per_block_optin_bytes", a.smem_per_block_optin_bytes},
                      {"registers_per_sm", a.registers_per_sm},
                      {"max_threads_per_sm", a.max_threads_per_sm},
                      {"max_blocks_per_sm", a.max_blocks_per_sm},
                      {"sm_clock_khz", a.sm_clock_khz},
                      {"mem_clock_khz", a.mem_clock_khz},
                      {"mem_bus_bits", a.mem_bus_bits},
                      {"dram_peak_gbs", a.dram_peak_gbs()},
                      {"global_mem_bytes", a.global_mem_bytes},
                      {"driver_version", a.driver_version},
                      {"runtime_version", a.runtime_version},
                      {"cudnn_version", a.cudnn_version},
                      {"nvrtc_version", a.nvrtc_version},
                      {"spec", spec ? nlohmann::json(spec->name) : nlohmann::json(nullptr)}};
  nlohmann::json diffs = nlohmann::json::array();
  if (spec)
    for (const SpecDifference& d : compare_with_spec(a, *spec))
      diffs.push_back({{"field", d.field},
                       {"device", d.device},
                       {"spec", d.spec},
                       {"unit", d.unit},
                       {"used_for", d.note}});
  j["differences"] = diffs;
  return j.dump(2);
}

} // namespace brickdl::cuda
