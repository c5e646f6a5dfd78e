#pragma once
// What a CUDA device says about itself, next to the named spec the model predicts for
// (core/gpu_spec.h): the device run records both and flags where they differ, since every
// prediction of a run is only as good as its spec (brickdl-device prints this).
//
//   query_device_attributes(ordinal)   (device_attributes.cu; throws CudaError without a GPU)
//        │
//        ├── spec_for_device(name)      the named spec of a device name ("NVIDIA H200" → H200)
//        └── compare_with_spec(a, s)    one SpecDifference per field that differs by > tolerance
#include <cstdint>
#include <string>
#include <vector>

#include "core/gpu_spec.h"

namespace brickdl::cuda {

struct DeviceAttributes {
  int ordinal = 0;
  std::string name;       // "NVIDIA H200"
  std::string pci_bus_id; // "0000:3b:00.0"
  int cc = 0;             // compute capability major·10 + minor
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t persisting_l2_max_bytes = 0;
  int64_t smem_per_sm_bytes = 0;
  int64_t smem_per_block_optin_bytes = 0;
  int registers_per_sm = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int sm_clock_khz = 0;  // the maximum (boost) clock the device reports, not the current one
  int mem_clock_khz = 0; // peak memory clock
  int mem_bus_bits = 0;
  int64_t global_mem_bytes = 0;
  int driver_version = 0;  // 13000 for 13.0
  int runtime_version = 0; // the cudart brickdl was linked with
  std::string cudnn_version = "none";
  std::string nvrtc_version = "none";

  // Peak DRAM bandwidth from the memory clock and bus width (double data rate), GB/s.
  double dram_peak_gbs() const;
};

// A field where the device and the spec disagree by more than the tolerance.
struct SpecDifference {
  std::string field; // the GpuSpec field's name, e.g. "l2_bytes"
  double device = 0;
  double spec = 0;
  std::string unit; // "bytes", "GB/s", ...
  std::string note; // what the model does with the field
};

// The named spec for a device name (case-insensitive: "H200" → H200, "H100" → H100-SXM,
// "A100" with "80GB" → A100-80GB, other A100 → A100-40GB); nullptr when none matches.
const GpuSpec* spec_for_device(const std::string& device_name);

// Each spec field the model uses that the device reports, compared; a relative difference
// above `tolerance` is a difference (5%: a datasheet's rounded bandwidth is no difference,
// an L2 a fifth larger is). DRAM bandwidth compares the spec with dram_peak_gbs(); memory
// capacity is not compared (the model does not use it, and datasheets round it).
std::vector<SpecDifference> compare_with_spec(const DeviceAttributes& a, const GpuSpec& spec,
                                              double tolerance = 0.05);

// "key: value" lines of every attribute, then the spec's name and one "differs:" line per
// difference (or "matches the spec"), for logs and env.txt.
std::string describe(const DeviceAttributes& a, const GpuSpec* spec);
// The same as one JSON object (attributes, spec name, differences).
std::string to_json(const DeviceAttributes& a, const GpuSpec* spec);

// Throws CudaError (statuses.h) when there is no usable device or brickdl has no CUDA.
DeviceAttributes query_device_attributes(int ordinal = 0);

} // namespace brickdl::cuda
