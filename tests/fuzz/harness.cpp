#include "tests/fuzz/harness.h"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <new>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/fuzz/known_failures.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BRICKDL_FUZZ_SANITIZED 1
#else
#define BRICKDL_FUZZ_SANITIZED 0
#endif

namespace brickdl::fuzz {
namespace {

namespace fs = std::filesystem;

// Exit statuses of a child (see harness.h).
constexpr int kChildUserError = 2;
constexpr int kChildInternal = 3;
constexpr int kChildMemory = 4;
constexpr size_t kMessageMax = 2000;

struct Scratch {
  std::string dir;
  Scratch() {
    std::string tmpl = (fs::temp_directory_path() / "brickdl-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
      throw std::runtime_error("cannot create a scratch folder in " +
                               fs::temp_directory_path().string());
    dir = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

int64_t resident_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

int64_t own_address_space() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0;
  in >> size;
  return size * sysconf(_SC_PAGESIZE);
}

void write_message(int fd, const std::string& text) {
  const std::string m = text.substr(0, kMessageMax);
  [[maybe_unused]] ssize_t n = ::write(fd, m.data(), m.size());
}

// The child: limits, body, exit status. Never returns.
[[noreturn]] void child(const std::function<void(const FuzzInput&)>& body, const FuzzInput& input,
                        const Limits& limits, int message_fd, const std::string& stderr_path) {
  const int null_fd = ::open("/dev/null", O_WRONLY);
  const int err_fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (null_fd >= 0)
    ::dup2(null_fd, STDOUT_FILENO);
  if (err_fd >= 0)
    ::dup2(err_fd, STDERR_FILENO);
  if (!BRICKDL_FUZZ_SANITIZED) {
    const rlim_t cap = static_cast<rlim_t>(own_address_space() + limits.memory_bytes);
    const rlimit rl{cap, cap};
    setrlimit(RLIMIT_AS, &rl);
  }
  itimerval timer{};
  timer.it_value.tv_sec = static_cast<time_t>(limits.seconds);
  timer.it_value.tv_usec =
      static_cast<suseconds_t>((limits.seconds - static_cast<double>(timer.it_value.tv_sec)) * 1e6);
  setitimer(ITIMER_REAL, &timer, nullptr); // SIGALRM's default action ends the child
  try {
    body(input);
    _exit(0);
  } catch (const UserError&) {
    _exit(kChildUserError);
  } catch (const std::bad_alloc& e) {
    write_message(message_fd, std::string("std::bad_alloc: ") + e.what());
    _exit(kChildMemory);
  } catch (const std::exception& e) {
    write_message(message_fd, e.what());
    _exit(kChildInternal);
  } catch (...) {
    write_message(message_fd, "an exception that is no std::exception");
    _exit(kChildInternal);
  }
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  return out;
}

// The last lines of a child's stderr (a sanitizer's report), at most `max` characters.
std::string tail_of(const std::string& path, size_t max = 1500) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > max ? "..." + s.substr(s.size() - max) : s;
}

enum class Killed { kNo, kTime, kMemory };

// Waits for the child, killing it past the limits; returns its wait status.
int supervise(pid_t pid, const Limits& limits, Killed& killed) {
  const auto start = std::chrono::steady_clock::now();
  const double hard_seconds = limits.seconds + 2.0; // its own timer fires first
  const int64_t base = resident_bytes(getpid());
  auto pause = std::chrono::microseconds(50);
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return status;
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool over_memory = resident_bytes(pid) > base + limits.memory_bytes;
    if (t > hard_seconds || over_memory) {
      killed = over_memory ? Killed::kMemory : Killed::kTime;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return status;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

std::string symptom_of(int status, Killed killed, const std::string& message,
                       const std::string& stderr_path, const Limits& limits) {
  if (killed == Killed::kMemory)
    return fmt::format("memory: over {} MiB resident", limits.memory_bytes >> 20);
  if (killed == Killed::kTime || (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM))
    return fmt::format("hang: over {} s", limits.seconds);
  if (WIFSIGNALED(status))
    return fmt::format("signal {} ({}) {}", WTERMSIG(status), strsignal(WTERMSIG(status)),
                       tail_of(stderr_path));
  const int code = WEXITSTATUS(status);
  if (code == kChildInternal)
    return "internal error: " + message;
  if (code == kChildMemory)
    return fmt::format("memory: over {} MiB address space ({})", limits.memory_bytes >> 20,
                       message);
  const std::string report = tail_of(stderr_path, size_t{1} << 16);
  // A sanitizer's allocator refuses what RLIMIT_AS refuses in a plain build: the same symptom.
  for (const char* oom :
       {"AddressSanitizer: out-of-memory", "allocation-size-too-big", "requested allocation size"})
    if (report.find(oom) != std::string::npos)
      return fmt::format("memory: the sanitizer's allocator refused ({})", oom);
  return fmt::format("exit {} {}", code, tail_of(stderr_path));
}

std::string case_command(const Target& t, int64_t index) {
  return fmt::format("BRICKDL_FUZZ_CASE={} BRICKDL_FUZZ_DUMP=case{} build/tests/fuzz/fuzz_tests "
                     "--gtest_filter=Fuzz.{}",
                     index, t.suffix, t.name);
}

const KnownFailure* known(const std::string& target, const std::string& symptom) {
  for (const KnownFailure& k : kKnownFailures)
    if (target == k.target && symptom.find(k.symptom) != std::string::npos)
      return &k;
  return nullptr;
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

// Case `index` of `t`: a seed or a corpus input as it is, or a mutant of a seed made with the
// case's own generator.
FuzzInput make_case(const Target& t, const std::vector<FuzzInput>& kept, int64_t index) {
  if (index < static_cast<int64_t>(t.seeds.size()))
    return t.seeds[static_cast<size_t>(index)];
  if (index < static_cast<int64_t>(t.seeds.size() + kept.size()))
    return kept[static_cast<size_t>(index) - t.seeds.size()];
  std::mt19937_64 rng(name_hash(t.name) ^ (static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull));
  const FuzzInput& seed = t.seeds[rng() % t.seeds.size()];
  FuzzInput in{seed.bytes, "mutant of " + seed.origin};
  const uint64_t roll = rng() % 10; // mostly one change, so that many cases go deep
  const int rounds = roll < 6 ? 1 : roll < 9 ? 2 : 3;
  for (int r = 0; r < rounds; ++r)
    in.bytes = t.mutate(in.bytes, rng);
  return in;
}

struct Tally {
  int64_t cases = 0, success = 0, user_error = 0, known_failures = 0, new_failures = 0;
  std::map<std::string, int64_t> symptoms; // first line of each failure -> count
};

std::string first_line(const std::string& s) {
  const std::string line = s.substr(0, s.find('\n'));
  return line.size() > 160 ? line.substr(0, 160) + "..." : line;
}

// The symptom with the scratch folder's paths and the numbers taken out, so that the tally
// groups failures of one kind.
std::string kind_of(const std::string& symptom) {
  std::string s = first_line(symptom), out;
  for (size_t at; (at = s.find(scratch_dir())) != std::string::npos;)
    s.replace(at, scratch_dir().size(), "<scratch>");
  for (size_t i = 0; i < s.size(); ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(s[i])) != 0;
    if (!digit)
      out += s[i];
    else if (out.empty() || out.back() != '#')
      out += '#';
  }
  return out;
}

} // namespace

const std::string& scratch_dir() {
  static const Scratch scratch;
  return scratch.dir;
}

CaseResult run_isolated(const std::function<void(const FuzzInput&)>& body, const FuzzInput& input,
                        const Limits& limits) {
  int fds[2];
  if (pipe(fds) != 0)
    throw std::runtime_error("pipe failed");
  const std::string stderr_path = scratch_dir() + "/stderr.txt";
  std::cout.flush();
  std::cerr.flush();
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0)
    throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    child(body, input, limits, fds[1], stderr_path);
  }
  ::close(fds[1]);
  Killed killed = Killed::kNo;
  const int status = supervise(pid, limits, killed);
  const std::string message = read_all(fds[0]);
  ::close(fds[0]);
  CaseResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (killed == Killed::kNo && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    r.outcome = Outcome::kSuccess;
  else if (killed == Killed::kNo && WIFEXITED(status) && WEXITSTATUS(status) == kChildUserError)
    r.outcome = Outcome::kUserError;
  else {
    r.outcome = Outcome::kFailure;
    r.symptom = symptom_of(status, killed, message, stderr_path, limits);
  }
  return r;
}

std::vector<FuzzInput> input_files(const std::string& folder) {
  std::vector<FuzzInput> out;
  const fs::path dir = fs::path(BRICKDL_SOURCE_DIR) / "tests/fuzz" / folder;
  if (!fs::is_directory(dir))
    return out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.')
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files)
    out.push_back({read_file(f.string()), folder + "/" + f.filename().string()});
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Long on purpose: the loop, the one-case mode and the report read best in one place.
void run_target(const Target& target) {
  ASSERT_FALSE(target.seeds.empty()) << target.name << ": no seeds";
  Limits limits = target.limits;
  int64_t mutants = target.mutants;
  if (BRICKDL_FUZZ_SANITIZED) { // several times slower: fewer cases, more time each
    limits.seconds *= 5;
    limits.memory_bytes *= 2;
    mutants /= 4;
  }
  mutants = env_int("BRICKDL_FUZZ_CASES", mutants);
  const std::vector<FuzzInput> kept = input_files("corpus/" + target.name);
  const int64_t total = static_cast<int64_t>(target.seeds.size() + kept.size()) + mutants;
  const int64_t only = env_int("BRICKDL_FUZZ_CASE", -1);
  const bool verbose = env_int("BRICKDL_FUZZ_VERBOSE", 0) != 0; // every failure, not the first
  const auto start = std::chrono::steady_clock::now();
  Tally tally;
  int printed = 0;
  for (int64_t i = only >= 0 ? only : 0; i < (only >= 0 ? only + 1 : total); ++i) {
    const FuzzInput input = make_case(target, kept, i);
    if (only >= 0)
      if (const char* dump = std::getenv("BRICKDL_FUZZ_DUMP"); dump && *dump) {
        std::ofstream(dump, std::ios::binary) << input.bytes;
        std::cout << "fuzz " << target.name << ": case " << i << " (" << input.origin
                  << ") written to " << dump << "\n";
      }
    const CaseResult r = run_isolated(target.body, input, limits);
    ++tally.cases;
    if (r.outcome == Outcome::kSuccess) {
      ++tally.success;
      continue;
    }
    if (r.outcome == Outcome::kUserError) {
      ++tally.user_error;
      continue;
    }
    const KnownFailure* k = known(target.name, r.symptom);
    ++(k ? tally.known_failures : tally.new_failures);
    ++tally.symptoms[(k ? "[known] " : "[NEW] ") + kind_of(r.symptom)];
    if (only >= 0 || verbose || (!k && printed < 20) || (k && printed < 3)) {
      ++printed;
      std::cout << fmt::format(
          "fuzz {}: case {} ({}) FAILED{}: {}\n  rerun alone: {}\n", target.name, i, input.origin,
          k ? " [known: " + std::string(k->why) + "]" : "",
          only >= 0 ? r.symptom : first_line(r.symptom), case_command(target, i));
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format("fuzz {}: {} cases ({}): {} success, {} user error, {} failure ({} "
                           "known, {} new) in {:.1f} s\n",
                           target.name, tally.cases,
                           only >= 0 ? "case " + std::to_string(only)
                                     : fmt::format("{} seeds, {} corpus, {} mutants",
                                                   target.seeds.size(), kept.size(), mutants),
                           tally.success, tally.user_error,
                           tally.known_failures + tally.new_failures, tally.known_failures,
                           tally.new_failures, seconds);
  for (const auto& [symptom, count] : tally.symptoms)
    std::cout << fmt::format("  {:5} x {}\n", count, symptom);
  EXPECT_EQ(tally.new_failures, 0)
      << "fuzz " << target.name << ": cases ended in an internal error, a signal, a hang or "
      << "the memory limit (listed above, each with the command that reruns it alone); fix "
      << "them, or list them in tests/fuzz/known_failures.h with the reason";
}

} // namespace brickdl::fuzz
