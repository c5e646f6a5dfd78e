#pragma once
// A device calibration: what `brickdl-calibrate` measured on a GPU (the shares of the tensor
// peak our generated kernels reach, the achieved DRAM and L2 bandwidths, the gap between
// back-to-back kernels) in a JSON file of format "brickdl-calibration/1" (docs/calibration.md),
// applied over the named spec it was measured against in place of the spec's estimates.
//
//   calibration.json ──read_gpu_calibration──► GpuCalibration (format, spec name, keys and
//      ranges checked)
//      ──apply_gpu_calibration(cal, precision, the experiment's own fields, &spec)──► the spec
//        with the measured values (GpuSpec::measured set), named "H200+cal-<8 hex>", and an
//        AppliedCalibration: what was applied, for the run's configuration (config_json),
//        brickdl-tune --describe, the tuning report and brickdl-query show.
//
// A calibrated spec predicts other times than the plain one: its name keeps its predictions
// apart in the database (predictions are keyed by the spec's name, core/store/schema.sql), and
// the 8 hex digits (FNV-1a of the applied values) keep two calibrations apart.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/gpu_spec.h"
#include "core/graph.h"

namespace brickdl {

inline constexpr const char* kCalibrationFormat = "brickdl-calibration/1";

// One measured value of the file ("values" or "reference").
struct CalibrationValue {
  std::string key; // "wgmma_fraction.tf32", "dram_bandwidth_gbs", ...
  double value = 0;
  std::optional<double> spec; // the spec's value as the file recorded it
  std::string how;            // how it was measured
};

struct GpuCalibration {
  std::string file;                          // the path it was read from
  std::string spec;                          // the named GpuSpec it was measured against
  nlohmann::json device;                     // shown, never applied
  std::string measured_at;                   // as the file says (ISO 8601)
  std::string brickdl;                       // the revision of brickdl-calibrate
  std::vector<CalibrationValue> values;      // in calibration_value_keys() order
  std::map<std::string, std::string> failed; // key → why it could not be measured
  std::vector<CalibrationValue> reference;   // shown, never applied
  std::map<std::string, double> metrics;     // CUPTI metrics, shown
  std::vector<std::string> unknown_metrics;  // shown
  std::string device_name() const;           // device.name, or ""
  const CalibrationValue* find(const std::string& key) const;
};

// The keys "values" may hold: the GpuSpec fields a calibration measures, the tensor fractions
// per precision ("wgmma_fraction.tf32", "wgmma_fraction.bf16", ...).
std::vector<std::string> calibration_value_keys();

// Reads and checks a calibration file. Throws UserError naming the file and the key: the file
// missing or no JSON, another "format", an unknown "spec", a value out of range (fractions in
// (0, 1.5], bandwidths and the launch overhead > 0), an unknown key (refused, not skipped: a
// misspelt key would leave the spec's estimate in place without a word). `given_at` says where
// the file was named (a YAML key, a flag), for the error of a missing file.
GpuCalibration read_gpu_calibration(const std::string& path, const SourceLocation& given_at);
// Same, from JSON text; `file` names it in errors.
GpuCalibration parse_gpu_calibration(const std::string& text, const std::string& file);

// One GpuSpec field the calibration measured, for the experiment's precision.
struct CalibratedField {
  std::string field; // the GpuSpec field ("wgmma_fraction")
  std::string key;   // the calibration's key ("wgmma_fraction.tf32")
  double value = 0;  // measured
  double spec = 0;   // the named spec's own value
  std::string how;
  bool applied = true; // false: the experiment sets the field itself, and its value wins
  double used = 0;     // the value the spec now has (value, or the experiment's)
};

struct AppliedCalibration {
  std::string file;      // as given (relative to the experiment file, or the working directory)
  std::string given_by;  // "target.calibration" or "--calibration"
  std::string base_spec; // "H200"
  std::string spec_name; // "H200+cal-1a2b3c4d"; base_spec when nothing was applied
  GpuCalibration source;
  std::vector<CalibratedField> fields; // in calibration_value_keys() order
  std::vector<std::string> notes;      // precision mapping, values not applied, and why
  // "H200 calibrated by cal.json (measured 2026-12-02T16:00:00Z on NVIDIA H200):
  // wgmma_fraction 0.62 (measured, tf32; spec 0.75), ...; the rest are the spec's"
  std::string summary() const;
  nlohmann::json json() const; // the run's configuration records it (search/driver.cpp)
};

// Applies `cal` over `*spec` (the named spec it was measured against, with the experiment's own
// fields `explicit_fields` already set: they win over the calibration). The tensor fractions
// come from the entries of `precision`: tf32 the ".tf32" ones, bf16 the ".bf16" ones, fp16 the
// ".bf16" ones (said in the notes), fp32 none (it runs no tensor cores). Throws UserError when
// `cal` was measured against another spec than `spec->name`.
AppliedCalibration apply_gpu_calibration(const GpuCalibration& cal, DType precision,
                                         const std::vector<std::string>& explicit_fields,
                                         GpuSpec* spec);

} // namespace brickdl
