#pragma once
// Ctrl-C for a tuning run. SIGINT and SIGTERM become a stop request that the driver checks
// between candidates, so the run ends as `aborted` with everything measured kept. When the
// candidate in flight takes longer than `grace_s`, or a second signal arrives, `on_force` runs
// (it marks the run aborted through its own connection) and the process exits with 130 at
// once; SQLite discards a transaction cut short, so at most that candidate is lost.
//
// Construct it in main() before any other thread starts: it blocks the two signals in the
// calling thread, every thread started later inherits the mask, and one watcher thread
// receives them with sigtimedwait().
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace brickdl::search {

class InterruptHandler {
public:
  explicit InterruptHandler(double grace_s = 3.0, std::function<void()> on_force = {});
  ~InterruptHandler();
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;

  const std::atomic<bool>& requested() const { return requested_; }
  // Replaces what a forced exit does first (e.g. once the run id is known), and arms it.
  void set_on_force(std::function<void()> on_force);
  // The line printed on the first signal ("" prints nothing: MPI worker ranks).
  void set_notice(std::string notice);
  // The run has ended: a forced exit no longer runs on_force (it still exits with 130).
  void disarm();

  static constexpr int kExitInterrupted = 130;

private:
  void watch();
  void force();

  double grace_s_;
  std::function<void()> on_force_;
  std::string notice_ = "interrupted: stopping after the candidate in flight (again to exit now)";
  std::mutex mutex_;
  bool armed_ = true;
  std::atomic<bool> requested_{false};
  std::atomic<bool> shutdown_{false};
  std::thread watcher_;
};

} // namespace brickdl::search
