#include "kernels/cuda/calibration_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace brickdl::cuda {

namespace {

bool positive(double x) {
  return std::isfinite(x) && x > 0;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_fraction_key(const std::string& key) {
  return ends_with(key, ".tf32") || ends_with(key, ".bf16") || ends_with(key, ".fp16");
}

// Shortest text that reads back as the same double (so the reason quotes what was measured).
std::string number(double x) {
  return nlohmann::json(x).dump();
}

} // namespace

std::string wgmma_fraction_key(DType precision) {
  return std::string("wgmma_fraction.") + dtype_name(precision);
}

std::string mma_sync_fraction_key(DType precision) {
  return std::string("mma_sync_fraction.") + dtype_name(precision);
}

std::string cudnn_fraction_key(DType precision) {
  return std::string("cudnn_fraction.") + dtype_name(precision);
}

std::vector<std::string> calibration_metrics() {
  return {
      // Tensor pipe busy, of the cycles the SM was active: on Hopper it counts wgmma (HGMMA)
      // cycles too (the metric's description in CUPTI 13).
      "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__inst_executed_pipe_tensor_op_hmma.sum",
      "sm__inst_executed_pipe_tensor_op_gmma.sum", // Hopper only
      // Tensor-path operations per instruction kind and precision: Hopper only.
      "sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum",
      "sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32.sum",
      "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum",
      "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum",
      "sm__cycles_elapsed.avg",
      "gpu__time_duration.sum",
  };
}

double spec_value(const GpuSpec& spec, const std::string& key) {
  if (key.rfind("wgmma_fraction.", 0) == 0)
    return spec.wgmma_fraction;
  if (key.rfind("mma_sync_fraction.", 0) == 0)
    return spec.mma_sync_fraction;
  if (key == kDramBandwidthKey)
    return spec.dram_bandwidth_gbs;
  if (key == kL2BandwidthKey)
    return spec.l2_bandwidth_gbs;
  if (key == kLaunchOverheadKey)
    return spec.launch_overhead_us;
  throw std::invalid_argument("calibration: no GpuSpec field for key '" + key + "'");
}

double tensor_peak_tflops(const GpuSpec& spec, DType precision) {
  switch (precision) {
  case DType::kTF32: return spec.tf32_tflops;
  case DType::kBF16: return spec.bf16_tflops;
  case DType::kF16: return spec.fp16_tflops;
  case DType::kF32: break;
  }
  throw std::invalid_argument("calibration: fp32 has no tensor-core peak");
}

double tflops_per_s(double flops, double ms) {
  if (!positive(flops) || !positive(ms))
    return -1;
  return flops / (ms * 1e-3) / 1e12;
}

double fraction_of_peak(double flops, double ms, double peak_tflops) {
  const double achieved = tflops_per_s(flops, ms);
  if (achieved < 0 || !positive(peak_tflops))
    return -1;
  return achieved / peak_tflops;
}

double bandwidth_gbs(double bytes, double ms) {
  if (!positive(bytes) || !positive(ms))
    return -1;
  return bytes / (ms * 1e-3) / 1e9;
}

double launch_gap_us(double first_ms, double all_ms, int kernels) {
  if (kernels < 2 || !positive(first_ms) || !positive(all_ms))
    return -1;
  const double gap = (all_ms - first_ms) * 1e3 / (kernels - 1);
  return positive(gap) ? gap : -1;
}

double median_ms(std::vector<double> samples) {
  if (samples.empty())
    return -1;
  std::sort(samples.begin(), samples.end());
  const size_t h = samples.size() / 2;
  return samples.size() % 2 ? samples[h] : 0.5 * (samples[h - 1] + samples[h]);
}

double best_ms(const std::vector<double>& samples) {
  return samples.empty() ? -1 : *std::min_element(samples.begin(), samples.end());
}

void record_value(CalibrationFile& f, const std::string& key, double value, double spec,
                  const std::string& how) {
  if (!positive(value)) {
    record_failure(f, key, "no positive value from the timings (" + how + ")");
    return;
  }
  if (is_fraction_key(key) && value > kMaxPlausibleFraction) {
    record_failure(f, key,
                   "implausible: " + number(value) + " of the spec's peak is above " +
                       number(kMaxPlausibleFraction) + " (" + how + ")");
    return;
  }
  f.failed.erase(key);
  f.values[key] = {value, spec, how};
}

void record_failure(CalibrationFile& f, const std::string& key, const std::string& why) {
  f.values.erase(key);
  f.reference.erase(key);
  f.failed[key] = why;
}

int calibration_exit_status(const CalibrationFile& f) {
  return f.failed.empty() ? 0 : 1;
}

std::string utc_timestamp(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string calibration_table(const CalibrationFile& f) {
  std::string t = "calibration of " + f.device.name + " against spec " + f.spec + "\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %-26s %12s %12s %8s\n", "value", "measured", "spec", "ratio");
  t += line;
  bool fractions = false;
  for (const auto& [k, v] : f.values) {
    // A tensor fraction is measured of the datasheet's peak; the spec's is of the library's
    // rate (the model derates both by its compute efficiency): their ratio means nothing.
    const bool fraction = k.find("_fraction.") != std::string::npos;
    fractions |= fraction;
    if (fraction)
      std::snprintf(line, sizeof line, "  %-26s %12.4g %12.4g %8s\n", k.c_str(), v.value, v.spec,
                    "*");
    else
      std::snprintf(line, sizeof line, "  %-26s %12.4g %12.4g %8.2f\n", k.c_str(), v.value, v.spec,
                    v.spec > 0 ? v.value / v.spec : 0.0);
    t += line;
  }
  if (fractions)
    t += "  * measured: of the tensor peak; spec: of the library's rate, which the model takes "
         "as its compute efficiency times the peak (docs/calibration.md)\n";
  for (const auto& [k, r] : f.reference) {
    std::snprintf(line, sizeof line, "  %-26s %12.4g %12s %8s  (reference, not applied)\n",
                  k.c_str(), r.value, "-", "-");
    t += line;
  }
  for (const auto& [k, why] : f.failed)
    t += "  " + k + ": FAILED: " + why + "\n";
  t += "  " + std::to_string(f.metrics.size()) + " CUPTI values, " +
       std::to_string(f.unknown_metrics.size()) + " metric names unknown on this chip\n";
  return t;
}

std::string calibration_json(const CalibrationFile& f) {
  using nlohmann::json;
  json values = json::object(), reference = json::object();
  for (const auto& [k, v] : f.values)
    values[k] = {{"value", v.value}, {"spec", v.spec}, {"how", v.how}};
  for (const auto& [k, r] : f.reference)
    reference[k] = {{"value", r.value}, {"how", r.how}};
  const json device = {{"name", f.device.name},         {"cc", f.device.cc},
                       {"sm_count", f.device.sm_count}, {"driver", f.device.driver},
                       {"runtime", f.device.runtime},   {"pci_bus_id", f.device.pci_bus_id}};
  // ordered_json keeps the format's order of keys, so the file reads top-down as documented.
  nlohmann::ordered_json j;
  j["format"] = kCalibrationFormat;
  j["spec"] = f.spec;
  j["device"] = device;
  j["measured_at"] = f.measured_at;
  j["brickdl"] = f.brickdl;
  j["values"] = values;
  j["failed"] = json(f.failed);
  j["reference"] = reference;
  j["metrics"] = json(f.metrics);
  j["unknown_metrics"] = json(f.unknown_metrics);
  return j.dump(2) + "\n";
}

} // namespace brickdl::cuda
