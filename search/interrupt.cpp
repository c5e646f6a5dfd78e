#include "search/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

namespace brickdl::search {

namespace {
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
} // namespace

InterruptHandler::InterruptHandler(double grace_s, std::function<void()> on_force)
    : grace_s_(grace_s), on_force_(std::move(on_force)) {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  watcher_ = std::thread([this] { watch(); });
}

InterruptHandler::~InterruptHandler() {
  shutdown_ = true;
  watcher_.join();
  // Signals stay blocked: one that arrives now is still pending and ends the process the
  // usual way when main() unblocks it, which it does not need to: the process is ending.
}

void InterruptHandler::set_on_force(std::function<void()> on_force) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_force_ = std::move(on_force);
  armed_ = true; // a new run (several experiments: one after another)
}

void InterruptHandler::set_notice(std::string notice) {
  std::lock_guard<std::mutex> lock(mutex_);
  notice_ = std::move(notice);
}

void InterruptHandler::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;
}

void InterruptHandler::force() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (armed_ && on_force_) {
      try {
        on_force_();
      } catch (...) {
        // Exiting anyway; the run stays 'running' in the database.
      }
    }
  }
  std::fputs("\ninterrupted: exiting now\n", stderr);
  _exit(kExitInterrupted);
}

void InterruptHandler::watch() {
  const sigset_t set = stop_signals();
  std::chrono::steady_clock::time_point first{};
  while (!shutdown_) {
    timespec tick{0, 100'000'000}; // 100 ms: how quickly shutdown and the grace are noticed
    siginfo_t info;
    const int sig = sigtimedwait(&set, &info, &tick);
    if (sig > 0) {
      if (requested_)
        force(); // a second signal
      requested_ = true;
      first = std::chrono::steady_clock::now();
      std::lock_guard<std::mutex> lock(mutex_);
      if (!notice_.empty())
        std::fputs(("\n" + notice_ + "\n").c_str(), stderr);
    }
    if (requested_ &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - first).count() >
            grace_s_) {
      bool armed;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        armed = armed_;
      }
      if (armed)
        force();
    }
  }
}

} // namespace brickdl::search
