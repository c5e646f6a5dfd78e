#include "core/store/detail/process.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>

namespace brickdl::store::detail {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return "";
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Field 22 of /proc/<pid>/stat (the start time in clock ticks after boot); "" when the process
// does not exist. The command name (field 2) may hold spaces and parentheses, so the fields
// are counted after its last ')'.
std::string start_ticks(int64_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos)
    return "";
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 22)
      return field;
  }
  return "";
}

std::string boot_id() {
  std::string id = read_file("/proc/sys/kernel/random/boot_id");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' '))
    id.pop_back();
  return id;
}

std::string start_of(int64_t pid) {
  const std::string ticks = start_ticks(pid);
  return ticks.empty() ? "" : boot_id() + ":" + ticks;
}

std::optional<std::time_t> parse_utc(const std::string& s) {
  std::tm t{};
  int ms = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &t.tm_year, &t.tm_mon, &t.tm_mday,
                  &t.tm_hour, &t.tm_min, &t.tm_sec, &ms) < 6)
    return std::nullopt;
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  return timegm(&t);
}

} // namespace

ProcessIdentity self_identity() {
  // Computed once per process: a forked child (same memory, new pid) computes its own.
  static thread_local ProcessIdentity self;
  const auto pid = static_cast<int64_t>(getpid());
  if (self.pid != pid) {
    char host[256] = {};
    self.host = gethostname(host, sizeof(host) - 1) == 0 ? host : "";
    self.pid = pid;
    self.start = start_of(pid);
  }
  return self;
}

std::optional<double> seconds_between(const std::string& from, const std::string& to) {
  const auto a = parse_utc(from), b = parse_utc(to);
  if (!a || !b)
    return std::nullopt;
  return std::difftime(*b, *a);
}

Liveness liveness(const ProcessIdentity& who, const std::string& last_seen,
                  const std::string& now) {
  const ProcessIdentity self = self_identity();
  if (!who.host.empty() && who.host == self.host && who.pid > 0 && !self.start.empty()) {
    // Same host: exact. A recorded start from another boot, or a pid now started at another
    // time, is another process.
    if (who.pid == self.pid && who.start == self.start)
      return Liveness::kAlive;
    const std::string start = start_of(who.pid);
    return !start.empty() && start == who.start ? Liveness::kAlive : Liveness::kGone;
  }
  const auto age = seconds_between(last_seen, now);
  return age && *age <= kStaleAfterSeconds ? Liveness::kRecent : Liveness::kStale;
}

} // namespace brickdl::store::detail
