#include "core/gpu_calibration.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/hash.h"

namespace brickdl {

namespace {

using Json = nlohmann::json;

// A key of "values": the GpuSpec field it measures, for which precision's tensor math (none:
// every precision), and its valid range.
struct ValueKey {
  const char* key;
  const char* field;
  double GpuSpec::*member;
  bool GpuSpec::Measured::*flag; // nullptr: the model takes the field as it is either way
  const char* precision;         // "tf32" / "bf16"; nullptr: every precision
  bool fraction;                 // (0, 1.5]; else > 0
};

const std::vector<ValueKey>& value_keys() {
  using M = GpuSpec::Measured;
  static const std::vector<ValueKey> keys = {
      {"wgmma_fraction.tf32", "wgmma_fraction", &GpuSpec::wgmma_fraction, &M::wgmma_fraction,
       "tf32", true},
      {"wgmma_fraction.bf16", "wgmma_fraction", &GpuSpec::wgmma_fraction, &M::wgmma_fraction,
       "bf16", true},
      {"mma_sync_fraction.tf32", "mma_sync_fraction", &GpuSpec::mma_sync_fraction,
       &M::mma_sync_fraction, "tf32", true},
      {"mma_sync_fraction.bf16", "mma_sync_fraction", &GpuSpec::mma_sync_fraction,
       &M::mma_sync_fraction, "bf16", true},
      {"dram_bandwidth_gbs", "dram_bandwidth_gbs", &GpuSpec::dram_bandwidth_gbs, &M::dram_bandwidth,
       nullptr, false},
      {"l2_bandwidth_gbs", "l2_bandwidth_gbs", &GpuSpec::l2_bandwidth_gbs, &M::l2_bandwidth,
       nullptr, false},
      {"launch_overhead_us", "launch_overhead_us", &GpuSpec::launch_overhead_us, nullptr, nullptr,
       false},
  };
  return keys;
}

// A share above 1 is possible in the model's terms (a kernel beating the library's derated
// rate), but 1.5 of a datasheet peak is a broken measurement.
constexpr double kMaxFraction = 1.5;

const std::vector<std::string> kTopKeys = {"format",  "spec",           "device", "measured_at",
                                           "brickdl", "values",         "failed", "reference",
                                           "metrics", "unknown_metrics"};
const std::vector<std::string> kEntryKeys = {"value", "spec", "how"};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string kind_of(const Json& j) {
  switch (j.type()) {
  case Json::value_t::object: return "an object";
  case Json::value_t::array: return "a list";
  case Json::value_t::string: return "a string";
  case Json::value_t::boolean: return "a boolean";
  case Json::value_t::null: return "null";
  default: return "a number";
  }
}

class Reader {
public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw UserError(SourceLocation{file_, 0, 0, key}, message);
  }
  void expect(const Json& j, bool ok, const std::string& key, const std::string& what) const {
    if (!ok)
      fail(key, "expected " + what + ", got " + kind_of(j));
  }
  void expect_keys(const Json& obj, const std::vector<std::string>& valid,
                   const std::string& prefix, const std::string& what) const {
    for (const auto& [k, v] : obj.items())
      if (std::find(valid.begin(), valid.end(), k) == valid.end())
        fail(prefix + k, "unknown key '" + k + "' in " + what + did_you_mean(k, valid) +
                             "; valid: " + join_names(valid));
  }
  double number(const Json& j, const std::string& key) const {
    expect(j, j.is_number(), key, "a number");
    const double x = j.get<double>();
    if (!std::isfinite(x))
      fail(key, "expected a finite number");
    return x;
  }
  std::string text(const Json& j, const std::string& key) const {
    expect(j, j.is_string(), key, "a string");
    return j.get<std::string>();
  }
  CalibrationValue entry(const Json& j, const std::string& prefix, const std::string& key) const {
    const std::string at = prefix + key;
    expect(j, j.is_object(), at, "an object {\"value\": ..., \"spec\": ..., \"how\": \"...\"}");
    expect_keys(j, kEntryKeys, at + ".", "'" + at + "'");
    if (!j.contains("value"))
      fail(at, "missing 'value' (the measured number)");
    CalibrationValue v;
    v.key = key;
    v.value = number(j["value"], at + ".value");
    if (j.contains("spec"))
      v.spec = number(j["spec"], at + ".spec");
    if (j.contains("how"))
      v.how = text(j["how"], at + ".how");
    return v;
  }
  const std::string& file() const { return file_; }

private:
  std::string file_;
};

void check_range(const Reader& r, const ValueKey& k, double x) {
  const std::string at = std::string("values.") + k.key + ".value";
  if (k.fraction && !(x > 0 && x <= kMaxFraction))
    r.fail(at, fmt::format("{:g} is out of range: a share of the tensor peak is in (0, {:g}]", x,
                           kMaxFraction));
  if (!k.fraction && !(x > 0))
    r.fail(at, fmt::format("{:g} is out of range: it must be > 0 ({})", x,
                           std::string(k.key) == "launch_overhead_us" ? "microseconds"
                                                                      : "GB/s achieved"));
}

void read_values(const Reader& r, const Json& values, GpuCalibration& cal) {
  r.expect(values, values.is_object(), "values", "an object of measured values");
  const std::vector<std::string> valid = calibration_value_keys();
  r.expect_keys(values, valid, "values.", "'values'");
  for (const ValueKey& k : value_keys()) {
    if (!values.contains(k.key))
      continue;
    CalibrationValue v = r.entry(values[k.key], "values.", k.key);
    check_range(r, k, v.value);
    cal.values.push_back(std::move(v));
  }
}

// "reference", "metrics", "unknown_metrics", "failed", "device": shown, never applied; checked
// for their shape only.
void read_shown(const Reader& r, const Json& root, GpuCalibration& cal) {
  if (root.contains("device")) {
    r.expect(root["device"], root["device"].is_object(), "device", "an object");
    cal.device = root["device"];
  }
  if (root.contains("failed")) {
    const Json& f = root["failed"];
    r.expect(f, f.is_object(), "failed", "an object (key: why it could not be measured)");
    for (const auto& [k, v] : f.items())
      cal.failed[k] = r.text(v, "failed." + k);
  }
  if (root.contains("reference")) {
    const Json& ref = root["reference"];
    r.expect(ref, ref.is_object(), "reference", "an object of reference values");
    for (const auto& [k, v] : ref.items())
      cal.reference.push_back(r.entry(v, "reference.", k));
  }
  if (root.contains("metrics")) {
    const Json& m = root["metrics"];
    r.expect(m, m.is_object(), "metrics", "an object (CUPTI metric: value)");
    for (const auto& [k, v] : m.items())
      cal.metrics[k] = r.number(v, "metrics." + k);
  }
  if (root.contains("unknown_metrics")) {
    const Json& u = root["unknown_metrics"];
    r.expect(u, u.is_array(), "unknown_metrics", "a list of metric names");
    for (size_t i = 0; i < u.size(); ++i)
      cal.unknown_metrics.push_back(r.text(u[i], fmt::format("unknown_metrics[{}]", i)));
  }
}

void read_header(const Reader& r, const Json& root, GpuCalibration& cal) {
  if (!root.contains("format"))
    r.fail("format", std::string("missing 'format'; a calibration file says \"format\": \"") +
                         kCalibrationFormat + "\"");
  const std::string format = r.text(root["format"], "format");
  if (format != kCalibrationFormat)
    r.fail("format",
           "'" + format + "' is not a format this brickdl reads; valid: " + kCalibrationFormat);
  if (!root.contains("spec"))
    r.fail("spec", "missing 'spec', the named GPU spec it was measured against; named GPUs: " +
                       join_names(gpu_spec_names()));
  cal.spec = r.text(root["spec"], "spec");
  const GpuSpec* named = find_gpu_spec(cal.spec);
  if (!named)
    r.fail("spec", "unknown GPU spec '" + cal.spec + "'" +
                       did_you_mean(cal.spec, gpu_spec_names()) +
                       "; valid: " + join_names(gpu_spec_names()));
  cal.spec = named->name;
  if (root.contains("measured_at"))
    cal.measured_at = r.text(root["measured_at"], "measured_at");
  if (root.contains("brickdl"))
    cal.brickdl = r.text(root["brickdl"], "brickdl");
}

// "0.62 (measured of the peak, tf32; spec 0.75 of the library's rate)", "4100 (measured; spec
// 4800)" or "0.5 (the experiment's; measured 0.62 not applied)". A measured tensor fraction is
// of the datasheet's peak, the spec's of the library's rate (model/detail/memory.cpp resolve):
// said, so that no reader compares the two numbers as if they were alike.
std::string field_text(const CalibratedField& f) {
  const auto dot = f.key.find('.');
  const std::string precision = dot == std::string::npos ? "" : ", " + f.key.substr(dot + 1);
  if (f.applied && dot != std::string::npos)
    return fmt::format("{} {:g} (measured of the peak{}; spec {:g} of the library's rate)", f.field,
                       f.value, precision, f.spec);
  if (f.applied)
    return fmt::format("{} {:g} (measured{}; spec {:g})", f.field, f.value, precision, f.spec);
  return fmt::format("{} {:g} (the experiment's; measured {:g}{} not applied)", f.field, f.used,
                     f.value, precision);
}

// The precision whose tensor fractions apply ("" for none), with a note when it is not the
// experiment's own.
std::string fraction_precision(DType precision, const GpuCalibration& cal,
                               std::vector<std::string>& notes) {
  switch (precision) {
  case DType::kTF32: return "tf32";
  case DType::kBF16: return "bf16";
  case DType::kF16:
    notes.push_back("fp16 takes the bf16 tensor fractions (the same tensor rate on the named "
                    "GPUs; brickdl-calibrate measures bf16)");
    return "bf16";
  case DType::kF32:
    for (const CalibrationValue& v : cal.values)
      if (v.key.find('.') != std::string::npos) {
        notes.push_back("fp32 runs no tensor cores: the tensor fractions are not applied");
        break;
      }
    return "";
  }
  return "";
}

} // namespace

std::vector<std::string> calibration_value_keys() {
  std::vector<std::string> keys;
  for (const ValueKey& k : value_keys())
    keys.emplace_back(k.key);
  return keys;
}

std::string GpuCalibration::device_name() const {
  if (device.is_object() && device.contains("name") && device["name"].is_string())
    return device["name"].get<std::string>();
  return "";
}

const CalibrationValue* GpuCalibration::find(const std::string& key) const {
  for (const CalibrationValue& v : values)
    if (v.key == key)
      return &v;
  return nullptr;
}

GpuCalibration parse_gpu_calibration(const std::string& text, const std::string& file) {
  const Reader r(file);
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 3, column 1: ..." without its tag.
    std::string what = e.what();
    if (const auto close = what.find("] "); close != std::string::npos)
      what = what.substr(close + 2);
    throw UserError(SourceLocation{file, 0, 0, ""}, "not a JSON calibration file: " + what);
  }
  if (!root.is_object())
    throw UserError(SourceLocation{file, 0, 0, ""},
                    "expected a JSON object (a brickdl-calibration/1 file), got " + kind_of(root));
  GpuCalibration cal;
  cal.file = file;
  read_header(r, root, cal);
  r.expect_keys(root, kTopKeys, "", "the calibration");
  if (!root.contains("values"))
    r.fail("values", "missing 'values' (the measured values; {} when nothing was measured)");
  read_values(r, root["values"], cal);
  read_shown(r, root, cal);
  return cal;
}

GpuCalibration read_gpu_calibration(const std::string& path, const SourceLocation& given_at) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UserError(given_at, "the calibration file '" + path + "' is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UserError(given_at, "cannot read the calibration file '" + path +
                                  "': " + std::strerror(errno) +
                                  " (brickdl-calibrate writes one on a GPU: docs/calibration.md)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_gpu_calibration(text.str(), path);
}

AppliedCalibration apply_gpu_calibration(const GpuCalibration& cal, DType precision,
                                         const std::vector<std::string>& explicit_fields,
                                         GpuSpec* spec) {
  const std::string file = std::filesystem::path(cal.file).filename().string();
  if (lower(cal.spec) != lower(spec->name))
    throw UserError(fmt::format("{} was measured against {}; the target is {} (a calibration "
                                "applies over the spec it was measured against: target {}, or "
                                "run brickdl-calibrate on the target's GPU)",
                                cal.file, cal.spec, spec->name, cal.spec));
  const GpuSpec& named = *find_gpu_spec(cal.spec);
  AppliedCalibration a;
  a.base_spec = named.name;
  a.source = cal;
  const std::string tensor = fraction_precision(precision, cal, a.notes);
  uint64_t h = kFnvOffsetBasis;
  for (const ValueKey& k : value_keys()) {
    if (k.precision && tensor != k.precision)
      continue;
    const CalibrationValue* v = cal.find(k.key);
    if (!v) {
      if (auto f = cal.failed.find(k.key); f != cal.failed.end())
        a.notes.push_back(fmt::format("{} could not be measured ({}): the spec's {:g} is used",
                                      k.key, f->second, named.*k.member));
      continue;
    }
    CalibratedField f{k.field, k.key, v->value, named.*k.member, v->how, true, v->value};
    if (std::find(explicit_fields.begin(), explicit_fields.end(), k.field) !=
        explicit_fields.end()) {
      f.applied = false; // the experiment's own value wins: it says so on purpose
      f.used = spec->*k.member;
    } else {
      spec->*k.member = v->value;
      if (k.flag)
        spec->measured.*k.flag = true;
      h = fnv1a_field(h, fmt::format("{}={:.17g}", k.field, v->value));
    }
    if (v->spec && std::fabs(*v->spec - f.spec) > 1e-9 * std::max(1.0, std::fabs(f.spec)))
      a.notes.push_back(fmt::format("{}: the file compares with a spec of {:g}; brickdl's {} "
                                    "says {:g}",
                                    k.key, *v->spec, named.name, f.spec));
    a.fields.push_back(std::move(f));
  }
  const bool any = std::any_of(a.fields.begin(), a.fields.end(),
                               [](const CalibratedField& f) { return f.applied; });
  a.spec_name = any ? fmt::format("{}+cal-{:08x}", named.name, h & 0xffffffffu) : named.name;
  spec->name = a.spec_name;
  if (any)
    spec->source += "; calibrated by " + file + " (brickdl-calibrate, measured " +
                    (cal.measured_at.empty() ? "at an unknown time" : cal.measured_at) + ")";
  return a;
}

std::string AppliedCalibration::summary() const {
  const std::string file_name = std::filesystem::path(file).filename().string();
  std::string on = source.measured_at.empty() ? "" : "measured " + source.measured_at;
  if (!source.device_name().empty())
    on += (on.empty() ? "measured on " : " on ") + source.device_name();
  const std::string head =
      fmt::format("{} calibrated by {}{}", base_spec, file_name, on.empty() ? "" : " (" + on + ")");
  if (fields.empty())
    return head + ": nothing it measured applies to this experiment; the spec's values are used";
  std::vector<std::string> parts;
  for (const CalibratedField& f : fields)
    parts.push_back(field_text(f));
  return head + ": " + join_names(parts) + "; the rest are the spec's";
}

Json AppliedCalibration::json() const {
  Json fs = Json::array();
  for (const CalibratedField& f : fields)
    fs.push_back({{"field", f.field},
                  {"key", f.key},
                  {"value", f.value},
                  {"spec", f.spec},
                  {"applied", f.applied},
                  {"used", f.used},
                  {"how", f.how}});
  Json reference = Json::object();
  for (const CalibrationValue& v : source.reference)
    reference[v.key] = {{"value", v.value}, {"how", v.how}};
  return {{"file", file},
          {"given_by", given_by},
          {"spec", base_spec},
          {"applied_as", spec_name},
          {"measured_at", source.measured_at},
          {"device", source.device.is_null() ? Json::object() : source.device},
          {"brickdl", source.brickdl},
          {"fields", fs},
          {"failed", source.failed},
          {"reference", reference},
          {"metrics", source.metrics},
          {"unknown_metrics", source.unknown_metrics},
          {"notes", notes},
          {"summary", summary()}};
}

} // namespace brickdl
