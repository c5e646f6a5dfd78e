#pragma once
// Who runs a tuning run, and whether that process is still alive. Private to the store: the
// runs table records the identity (begin_run), the readers and the claims ask `liveness`.
//
//   identity: host name, pid, and the process's start ('<boot id>:<start ticks>', from
//             /proc/self/stat field 22 and /proc/sys/kernel/random/boot_id), so that a pid
//             reused by another process, or the same pid after a reboot, is told apart.
//   liveness: same host → exact (the pid's /proc entry and its start); another host (or no
//             identity, e.g. a run written before schema version 3) → the run's last sign of
//             life (heartbeat_at, else started_at) against kStaleAfterSeconds.
#include <cstdint>
#include <optional>
#include <string>

namespace brickdl::store::detail {

// How often a running tuner refreshes runs.heartbeat_at, and how old the last heartbeat of a
// run on another host may be before the run counts as stale (its claims are taken over and
// brickdl-query shows it `stale?`). The margin covers a busy database and clock skew.
inline constexpr int kHeartbeatSeconds = 15;
inline constexpr int kStaleAfterSeconds = 120;

struct ProcessIdentity {
  std::string host;
  int64_t pid = 0;
  std::string start; // '<boot id>:<start ticks>'; "" where /proc is missing
};

// This process.
ProcessIdentity self_identity();

enum class Liveness {
  kAlive,  // this host, the same process
  kGone,   // this host, the process is gone (or the pid belongs to another process now)
  kRecent, // another host: a heartbeat within kStaleAfterSeconds
  kStale,  // another host: no sign of life for kStaleAfterSeconds
};

// The liveness of a `running` run recorded by `who`, whose last sign of life was `last_seen`
// (ISO-8601 UTC text); `now` is the current time in the same form.
Liveness liveness(const ProcessIdentity& who, const std::string& last_seen, const std::string& now);

// Seconds between two ISO-8601 UTC stamps the store writes ("2024-01-01T00:00:00.000Z");
// nullopt when either cannot be read.
std::optional<double> seconds_between(const std::string& from, const std::string& to);

} // namespace brickdl::store::detail
