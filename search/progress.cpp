#include "search/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace brickdl::search {

std::string format_duration(double seconds) {
  if (seconds < 0 || !std::isfinite(seconds))
    return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600)
    return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string progress_line(const std::string& label, int64_t done, int64_t total,
                          const std::string& detail, double elapsed_s, double eta_s, int width) {
  const double frac = total > 0 ? std::clamp(static_cast<double>(done) / total, 0.0, 1.0) : 0.0;
  const int fill = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(fill), '#');
  bar.append(static_cast<size_t>(width - fill), '.');
  std::string s = fmt::format("{} [{}] {}/{}", label, bar, done, total);
  if (!detail.empty())
    s += "  " + detail;
  s += "  " + format_duration(elapsed_s) + " elapsed";
  if (done < total)
    s += "  ETA " + format_duration(eta_s);
  return s;
}

bool stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

void ProgressBar::update(const std::string& label, int64_t done, int64_t total,
                         const std::string& detail, double elapsed_s, double eta_s, bool force) {
  if (!enabled_)
    return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && drawn_ && now - last_ < std::chrono::milliseconds(100))
    return;
  last_ = now;
  // \r returns to the line start, ESC[K clears what a longer previous line left.
  out_ << '\r' << progress_line(label, done, total, detail, elapsed_s, eta_s) << "\x1b[K"
       << std::flush;
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_)
    out_ << '\n' << std::flush;
  drawn_ = false;
}

void ProgressCallback::on_result(const MeasureEvent& e) {
  if (e.result->status != MeasureStatus::kOk)
    ++failed_;
  if (!e.resumed)
    fresh_time_s_ += e.elapsed_s - last_elapsed_s_;
  last_elapsed_s_ = e.elapsed_s;
  const int remaining = std::max(0, e.queued - e.done);
  double eta = e.fresh > 0 ? fresh_time_s_ / e.fresh * remaining : -1;
  if (e.budget_s > 0)
    eta = std::min(eta < 0 ? e.budget_s : eta, e.budget_s - e.elapsed_s);
  std::string detail = fmt::format("{} resumed", e.done - e.fresh);
  if (failed_ > 0)
    detail += fmt::format("  {} failed", failed_);
  if (!e.resumed && e.worker > 0)
    ++by_worker_[e.worker];
  for (const auto& [rank, n] : by_worker_)
    detail += fmt::format("  r{} {} ({:.2f}/s)", rank, n, e.elapsed_s > 0 ? n / e.elapsed_s : 0.0);
  bar_.update("measure", e.done, e.queued, detail, e.elapsed_s, std::max(eta, -1.0),
              e.done == e.queued);
}

} // namespace brickdl::search
