#include "core/measurer.h"

#include <algorithm>

namespace brickdl {

namespace {
constexpr std::pair<MeasureStatus, const char*> kStatus[] = {
    {MeasureStatus::kOk, "ok"},
    {MeasureStatus::kCompileError, "compile_error"},
    {MeasureStatus::kLaunchError, "launch_error"},
    {MeasureStatus::kTimeout, "timeout"},
    {MeasureStatus::kWrongResult, "wrong_result"},
    {MeasureStatus::kUnsupported, "unsupported"},
    {MeasureStatus::kCrashed, "crashed"},
};

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty())
    return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double f = pos - static_cast<double>(lo);
  return sorted[lo] * (1 - f) + sorted[hi] * f;
}
} // namespace

const char* measure_status_name(MeasureStatus s) {
  for (const auto& [k, n] : kStatus)
    if (k == s)
      return n;
  return "?";
}

bool parse_measure_status(const std::string& s, MeasureStatus* out) {
  for (const auto& [k, n] : kStatus) {
    if (s == n) {
      *out = k;
      return true;
    }
  }
  return false;
}

void MeasureResult::summarize() {
  std::vector<double> s = samples_ms;
  std::sort(s.begin(), s.end());
  median_ms = quantile(s, 0.5);
  p25_ms = quantile(s, 0.25);
  p75_ms = quantile(s, 0.75);
  min_ms = s.empty() ? 0 : s.front();
  max_ms = s.empty() ? 0 : s.back();
}

} // namespace brickdl
