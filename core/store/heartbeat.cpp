#include "core/store/heartbeat.h"

#include <chrono>
#include <exception>

#include "core/store/detail/process.h"
#include "core/store/tuning_db.h"

namespace brickdl {

RunHeartbeat::RunHeartbeat(const TuningDb& db, int64_t run_id)
    : RunHeartbeat(db, run_id, store::detail::kHeartbeatSeconds * 1000) {}

RunHeartbeat::RunHeartbeat(const TuningDb& db, int64_t run_id, int period_ms)
    : db_(db.another_connection(/*busy_timeout_ms=*/1000)), run_id_(run_id), period_ms_(period_ms) {
  thread_ = std::thread([this] { loop(); });
}

RunHeartbeat::~RunHeartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

int RunHeartbeat::beats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return beats_;
}

void RunHeartbeat::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(period_ms_), [this] { return stop_; })) {
    lock.unlock();
    bool ok = true;
    try {
      db_->heartbeat(run_id_);
    } catch (const std::exception&) {
      ok = false; // locked or unwritable now: the next beat tries again
    }
    lock.lock();
    beats_ += ok ? 1 : 0;
  }
}

} // namespace brickdl
