#pragma once
// A progress bar for long work, on one stream (stderr): counts, elapsed time and an ETA.
// Drawn only when the stream is a terminal or when forced (so logs and pipes stay clean);
// redrawn at most ten times a second.
//
//   measure [########..........]  12/40  3 resumed  1 failed  0:42 elapsed  ETA 1:23
#include <chrono>
#include <map>
#include <ostream>
#include <string>

#include "search/tune_context.h"

namespace brickdl::search {

// "0:07", "1:05", "1:02:03"; "?" for a negative (unknown) duration.
std::string format_duration(double seconds);

// The text of one progress line (no carriage return), `width` columns for the bar.
std::string progress_line(const std::string& label, int64_t done, int64_t total,
                          const std::string& detail, double elapsed_s, double eta_s,
                          int width = 20);

// True when stderr is a terminal.
bool stderr_is_terminal();

class ProgressBar {
public:
  ProgressBar(std::ostream& out, bool enabled) : out_(out), enabled_(enabled) {}
  ~ProgressBar() { finish(); }
  bool enabled() const { return enabled_; }
  // Redraws (rate-limited unless `force`).
  void update(const std::string& label, int64_t done, int64_t total, const std::string& detail,
              double elapsed_s, double eta_s, bool force = false);
  // Ends the line, if one was drawn.
  void finish();

private:
  std::ostream& out_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// Draws the measuring phase: handled / queued candidates, resumed and failed counts, and an
// ETA from the mean time of the fresh measurements (bounded by what the budget leaves); with
// MPI workers, each rank's count and throughput:
//
//   measure [####..........]  12/40  0 resumed  r1 6 (0.14/s)  r2 6 (0.14/s)  0:42 elapsed  ETA
//   1:23
class ProgressCallback final : public MeasureCallback {
public:
  explicit ProgressCallback(ProgressBar& bar) : bar_(bar) {}
  void on_result(const MeasureEvent& e) override;
  void on_phase_end() override { bar_.finish(); }

private:
  ProgressBar& bar_;
  std::map<int, int> by_worker_; // MPI rank → fresh results
  int failed_ = 0;
  double fresh_time_s_ = 0;
  double last_elapsed_s_ = 0;
};

} // namespace brickdl::search
