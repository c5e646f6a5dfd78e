#pragma once
// RunHeartbeat: keeps a running run's heartbeat_at fresh from a thread of its own, on a
// connection of its own, every kHeartbeatSeconds, so that tuners and readers on other hosts
// can tell a live run (whose measurement may take minutes) from a dead one. Best effort: a
// beat that fails (the database locked past the busy timeout) is retried at the next one.
//
//   tune() ── begin_run ──► RunHeartbeat(db, run id) ──thread──► TuningDb::heartbeat
//          ── end_run ────► ~RunHeartbeat (stops and joins the thread)
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace brickdl {

class TuningDb;

class RunHeartbeat {
public:
  // Opens a connection of its own to `db`'s file (throws UserError) and starts beating.
  RunHeartbeat(const TuningDb& db, int64_t run_id, int period_ms);
  RunHeartbeat(const TuningDb& db, int64_t run_id);
  ~RunHeartbeat();
  RunHeartbeat(const RunHeartbeat&) = delete;
  RunHeartbeat& operator=(const RunHeartbeat&) = delete;
  int beats() const; // heartbeats written so far (for tests)

private:
  void loop();

  std::unique_ptr<TuningDb> db_;
  int64_t run_id_;
  int period_ms_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  int beats_ = 0;
  std::thread thread_;
};

} // namespace brickdl
