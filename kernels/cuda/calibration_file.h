#pragma once
// The calibration file of brickdl-calibrate (format "brickdl-calibration/1"): what one short
// run on a GPU measured of the coefficients the model otherwise guesses (core/gpu_spec.h), for
// the tuner to read. Pure host code, no CUDA: the arithmetic from raw timings to values and the
// JSON are tested without a GPU.
//
//   raw timings (calibration.h, CudaMeasurer) ──record_*()──► CalibrationFile
//        │                                                      values  (GpuSpec fields)
//        │  a timing that is missing, not finite or implausible  failed  (key → why)
//        └─────────────────────────────────────────────────────► reference, metrics
//   CalibrationFile ──calibration_json()──► the file      calibration_exit_status() → 0 / 1
//
// The keys of "values" are GpuSpec field names; the tensor fractions carry their precision
// ("wgmma_fraction.tf32"). Each value keeps the spec's guess beside it and says how it was
// measured, so a reader can tell a calibrated number from a datasheet one.
#include <cstdint>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "core/gpu_spec.h"
#include "core/graph.h"

namespace brickdl::cuda {

inline constexpr const char* kCalibrationFormat = "brickdl-calibration/1";

// A fraction of a peak above this is a timing or a spec that is wrong, not a measurement
// (the datasheet peaks are at the boost clock; no kernel sustains half as much again).
inline constexpr double kMaxPlausibleFraction = 1.5;

struct CalibrationValue {
  double value = 0;
  double spec = 0; // the spec's guess for the same field
  std::string how; // what ran and the raw numbers, for a reader to check the arithmetic
};

struct CalibrationReference {
  double value = 0;
  std::string how;
};

struct CalibrationDevice {
  std::string name; // "NVIDIA H200"
  std::string cc;   // "9.0"
  int sm_count = 0;
  std::string driver;     // "13000"
  std::string runtime;    // "13000"
  std::string pci_bus_id; // "0000:3b:00.0"
};

struct CalibrationFile {
  std::string spec; // the named GpuSpec the fractions are relative to
  CalibrationDevice device;
  std::string measured_at; // UTC, "2026-12-02T16:00:00Z"
  std::string brickdl;     // git revision
  std::map<std::string, CalibrationValue> values;
  std::map<std::string, std::string> failed;             // key → why it could not be measured
  std::map<std::string, CalibrationReference> reference; // shown, never applied
  std::map<std::string, double> metrics;                 // "<value key>/<CUPTI metric>"
  std::vector<std::string> unknown_metrics;              // names the device's chip lacks
};

// Keys of "values".
std::string wgmma_fraction_key(DType precision);    // "wgmma_fraction.tf32"
std::string mma_sync_fraction_key(DType precision); // "mma_sync_fraction.bf16"
std::string cudnn_fraction_key(DType precision);    // "cudnn_fraction.tf32" (reference)
inline constexpr const char* kDramBandwidthKey = "dram_bandwidth_gbs";
inline constexpr const char* kL2BandwidthKey = "l2_bandwidth_gbs";
inline constexpr const char* kLaunchOverheadKey = "launch_overhead_us";

// The CUPTI metrics collected for each timed conv (tensor-pipe activity and instructions of
// mma.sync, "hmma", and of Hopper's wgmma, "gmma"; tensor-path operations per precision; SM
// cycles and the kernel's duration); a name the device's chip does not know is listed in
// "unknown_metrics", never fatal.
std::vector<std::string> calibration_metrics();

// The spec's value of a key of "values"; throws std::invalid_argument for another key.
double spec_value(const GpuSpec& spec, const std::string& key);
// The spec's dense tensor peak of a tensor precision (tf32, bf16, fp16), TFLOP/s; throws
// std::invalid_argument for fp32 (no tensor math).
double tensor_peak_tflops(const GpuSpec& spec, DType precision);

// The arithmetic. Each returns a negative number when its inputs cannot give a value (a time
// or a count that is not finite and positive); callers record that as a failure.
double tflops_per_s(double flops, double ms); // 1 TFLOP/s = 1e12 FLOP/s
double fraction_of_peak(double flops, double ms, double peak_tflops);
double bandwidth_gbs(double bytes, double ms);                     // GB/s = 1e9 B/s
double launch_gap_us(double first_ms, double all_ms, int kernels); // (t_N − t_1) / (N − 1)

// Median and best (smallest) of timings in ms; negative when empty.
double median_ms(std::vector<double> samples);
double best_ms(const std::vector<double>& samples);

// Records a value, or a failure instead when `value` is not finite and positive, or when a
// fraction (a key ending in ".tf32" / ".bf16" / ".fp16") is above kMaxPlausibleFraction: the
// reason names the number so the failure can be checked.
void record_value(CalibrationFile& f, const std::string& key, double value, double spec,
                  const std::string& how);
void record_failure(CalibrationFile& f, const std::string& key, const std::string& why);

// 0 when nothing failed, else 1 (brickdl-calibrate's exit status; the file is written anyway).
int calibration_exit_status(const CalibrationFile& f);

// "2026-12-02T16:00:00Z".
std::string utc_timestamp(std::time_t t);

// A short table for the terminal: each value next to the spec's guess, each reference, each
// failure with its reason, and the counts of metrics collected and unknown.
std::string calibration_table(const CalibrationFile& f);

// The file's text: one JSON object, keys as in docs/kernels.md (Calibration), 2-space indent.
std::string calibration_json(const CalibrationFile& f);

} // namespace brickdl::cuda
