#include "distributed/process_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/protocol.h"

extern char** environ;

namespace brickdl::distributed {

namespace {

constexpr const char* kWorkerVar =
    "BRICKDL_MEASURE_WORKER"; // "<experiment>,<device>,<fd>,<parent>"
constexpr const char* kBackendVar = "BRICKDL_MEASURE_WORKER_BACKEND";
constexpr int kWorkerFd = 3;

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// "died of SIGSEGV (Segmentation fault)", "exited with status 1", from a wait status.
std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return fmt::format("died of SIG{} ({})", abbrev ? abbrev : std::to_string(sig).c_str(),
                       strsignal(sig));
  }
  if (WIFEXITED(status))
    return fmt::format("exited with status {}", WEXITSTATUS(status));
  return "ended";
}

// Writes one message; false when the other side is gone (no SIGPIPE: MSG_NOSIGNAL).
bool send_line(int fd, const nlohmann::json& message) {
  const std::string text = message.dump() + "\n";
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// The next complete line of `buffer` (removed from it), parsed; nullopt when none is complete.
std::optional<nlohmann::json> take_line(std::string& buffer) {
  const size_t end = buffer.find('\n');
  if (end == std::string::npos)
    return std::nullopt;
  const std::string line = buffer.substr(0, end);
  buffer.erase(0, end + 1);
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw InternalError(std::string("a malformed message from a measuring worker: ") + e.what());
  }
}

// Reads what `fd` has into `buffer`; false at end of file or on an error (the peer is gone).
bool read_some(int fd, std::string& buffer) {
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n > 0) {
      buffer.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return true;
    return false;
  }
}

// The environment of a new worker: this process's, without any worker variables, plus its own.
std::vector<std::string> worker_env(const ProcessPoolOptions& o, int device) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, kWorkerVar, std::strlen(kWorkerVar)) != 0)
      env.emplace_back(*e);
  env.push_back(fmt::format("{}={},{},{},{}", kWorkerVar, o.experiment, device, kWorkerFd,
                            static_cast<long>(getpid())));
  env.push_back(fmt::format("{}={}", kBackendVar, o.backend));
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Starts `argv` with `child_end` as its fd 3, its stdout on our stderr, in a process group of
// its own (a Ctrl-C on the terminal reaches the tuner, which stops the workers itself) with
// default signal dispositions and no blocked signals. Returns the pid; throws InternalError.
pid_t spawn_worker(std::vector<std::string> argv, std::vector<std::string> env, int child_end) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, child_end, kWorkerFd); // clears close-on-exec
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT})
    sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const std::vector<char*> args = c_strings(argv);
  const std::vector<char*> envp = c_strings(env);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, &attr, args.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    throw InternalError(
        fmt::format("could not start the measuring worker {}: {}", argv[0], std::strerror(rc)));
  return pid;
}

// Waits up to `patience_s` for `pid` to end, then kills it; its wait status.
int reap(pid_t pid, double patience_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(patience_s);
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR))
      return status;
    if (std::chrono::steady_clock::now() >= until)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

} // namespace

// ---- the parent's side -------------------------------------------------------------------

struct ProcessPool::Worker {
  int slot = 0; // 1, 2, ...: the number the report shows
  int device = 0;
  pid_t pid = -1; // -1: not running (started on the next submit)
  int fd = -1;
  std::string buffer; // what it sent and was not read yet
  std::optional<int64_t> ticket;
  Clock::time_point started;
  double watchdog_s = 0;
  search::WorkerStats stats;

  bool running() const { return pid > 0; }
  // Ends the process (killed unless it leaves by itself within `patience_s`); its wait status.
  int stop(double patience_s) {
    if (fd >= 0)
      ::close(fd); // a worker reading its socket sees end of file and exits
    fd = -1;
    const int status = pid > 0 ? reap(pid, patience_s) : 0;
    pid = -1;
    buffer.clear();
    ticket.reset();
    return status;
  }
};

ProcessPool::ProcessPool(ProcessPoolOptions options, const std::atomic<bool>* stop)
    : opt_(std::move(options)) {
  BRICKDL_CHECK(!opt_.argv.empty() && !opt_.devices.empty() && opt_.per_device >= 1,
                "a process pool needs a program, devices and workers");
  for (int device : opt_.devices) {
    for (int k = 0; k < opt_.per_device; ++k) {
      auto w = std::make_unique<Worker>();
      w->slot = static_cast<int>(workers_.size()) + 1;
      w->device = device;
      workers_.push_back(std::move(w));
    }
  }
  for (auto& w : workers_) {
    if (stop && *stop)
      break;
    start(*w, stop);
  }
}

ProcessPool::~ProcessPool() {
  for (auto& w : workers_)
    if (w->running() && !w->ticket)
      send_line(w->fd, {{"quit", true}});
  for (auto& w : workers_)
    w->stop(w->ticket ? 0 : 5);
}

// Long on purpose: one start, read as a sequence: spawn, then wait for the hello while
// watching the stop flag, the child's death and the start-up time-out.
void ProcessPool::start(Worker& w, const std::atomic<bool>* stop) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw InternalError(std::string("socketpair for a measuring worker: ") + std::strerror(errno));
  try {
    w.pid = spawn_worker(opt_.argv, worker_env(opt_, w.device), sv[1]);
  } catch (...) {
    ::close(sv[0]);
    ::close(sv[1]);
    throw;
  }
  ::close(sv[1]);
  w.fd = sv[0];
  fcntl(w.fd, F_SETFL, fcntl(w.fd, F_GETFL) | O_NONBLOCK);
  const Clock::time_point t0 = Clock::now();
  for (;;) {
    if (std::optional<nlohmann::json> m = take_line(w.buffer)) {
      if (!m->contains("hello"))
        throw InternalError("a measuring worker spoke before its hello: " + m->dump());
      check_hello(w, m->at("hello"));
      return;
    }
    if (stop && *stop) {
      w.stop(0);
      return;
    }
    pollfd p{w.fd, POLLIN, 0};
    ::poll(&p, 1, 100);
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && !read_some(w.fd, w.buffer) &&
        w.buffer.find('\n') == std::string::npos) {
      const pid_t pid = w.pid;
      const std::string how = describe_exit(w.stop(5));
      throw InternalError(fmt::format("the measuring worker process {} ({}) {} before it was "
                                      "ready; its own messages, if any, are above",
                                      pid, opt_.argv[0], how));
    }
    if (seconds(Clock::now() - t0) > opt_.start_timeout_s) {
      const pid_t pid = w.pid;
      w.stop(0);
      throw InternalError(fmt::format("the measuring worker process {} said nothing within {} s "
                                      "of starting; it was killed",
                                      pid, opt_.start_timeout_s));
    }
  }
}

// A worker that cannot measure is refused with its own words (a UserError: no GPU, bad input);
// one that built another space or measures another target than its siblings is a defect.
void ProcessPool::check_hello(Worker& w, const nlohmann::json& hello) {
  const Hello h = hello_from_json(hello);
  if (!h.error.empty()) {
    w.stop(5);
    throw UserError(h.error);
  }
  if (!opt_.digest.empty() && h.digest != opt_.digest) {
    w.stop(5);
    throw InternalError("a measuring worker built another search space than the tuner (digest " +
                        h.digest + ", expected " + opt_.digest + ")");
  }
  if (!target_.empty() && h.target != target_) {
    w.stop(5);
    throw UserError(fmt::format("measuring worker {} measures on {}, its siblings on {}: give "
                                "every worker the same kind of GPU",
                                w.slot, h.target, target_));
  }
  target_ = h.target;
  backend_ = h.backend;
  w.stats.rank = w.slot;
  w.stats.kind = "worker";
  w.stats.host = fmt::format("pid {}{}", static_cast<long>(w.pid),
                             h.device.empty() ? "" : ", GPU " + h.device);
  w.stats.target = h.target;
}

int ProcessPool::running() const {
  return static_cast<int>(
      std::count_if(workers_.begin(), workers_.end(), [](const auto& w) { return w->running(); }));
}

int ProcessPool::in_flight() const {
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(),
                                        [](const auto& w) { return w->ticket.has_value(); }));
}

void ProcessPool::submit(const search::MeasureJob& job) {
  auto idle = std::find_if(workers_.begin(), workers_.end(),
                           [](const auto& w) { return !w->ticket.has_value(); });
  BRICKDL_CHECK(idle != workers_.end(), "ProcessPool::submit with every worker busy");
  Worker& w = **idle;
  const nlohmann::json message = {
      {"job", {{"ticket", job.ticket}, {"group", job.ref.group}, {"index", job.ref.index}}}};
  for (int attempt = 0;; ++attempt) {
    if (!w.running()) {
      start(w, nullptr);
      ++restarts_;
      ++w.stats.restarts;
    }
    if (send_line(w.fd, message))
      break;
    w.stop(5); // it died while idle: once more with a fresh one
    BRICKDL_CHECK(attempt == 0, "a fresh measuring worker could not take a job");
  }
  w.ticket = job.ticket;
  w.started = Clock::now();
  w.watchdog_s = 2 * job.options.timeout_s + opt_.grace_s;
}

// A busy worker's complete answer already read, if any.
std::optional<search::MeasureDone> ProcessPool::take_buffered() {
  for (auto& w : workers_) {
    if (!w->ticket)
      continue;
    while (std::optional<nlohmann::json> m = take_line(w->buffer)) {
      if (m->contains("result"))
        return answered(*w, m->at("result"));
    }
  }
  return std::nullopt;
}

std::optional<search::MeasureDone> ProcessPool::next(const std::atomic<bool>* stop) {
  for (;;) {
    if ((stop && *stop) || in_flight() == 0)
      return std::nullopt;
    if (std::optional<search::MeasureDone> done = take_buffered())
      return done;
    std::vector<pollfd> fds;
    std::vector<Worker*> busy;
    for (auto& w : workers_) {
      if (w->ticket) {
        fds.push_back({w->fd, POLLIN, 0});
        busy.push_back(w.get());
      }
    }
    ::poll(fds.data(), fds.size(), 50);
    for (size_t i = 0; i < busy.size(); ++i) {
      Worker& w = *busy[i];
      const bool open =
          !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)) || read_some(w.fd, w.buffer);
      if (w.buffer.find('\n') != std::string::npos)
        continue; // answered; taken on the next turn
      if (stop && *stop)
        return std::nullopt; // a worker dying with the tuner's stop is no candidate's fault
      if (!open) {
        const pid_t pid = w.pid;
        const std::string how = describe_exit(w.stop(5));
        return lost(w, MeasureStatus::kCrashed,
                    fmt::format("its measuring worker process {} {} while measuring it", pid, how));
      }
      if (seconds(Clock::now() - w.started) > w.watchdog_s) {
        const pid_t pid = w.pid;
        w.stop(0);
        return lost(w, MeasureStatus::kTimeout,
                    fmt::format("no answer within {:.3g} s (twice timeout_s, plus {:.3g} s for "
                                "compiling): its measuring worker process {} was killed",
                                w.watchdog_s, opt_.grace_s, pid));
      }
    }
  }
}

search::MeasureDone ProcessPool::answered(Worker& w, const nlohmann::json& message) {
  search::MeasureDone done;
  done.ticket = message.value("ticket", int64_t{-1});
  BRICKDL_CHECK(w.ticket && done.ticket == *w.ticket,
                "measuring worker " << w.slot << " answered another job than its own");
  done.worker = w.slot;
  done.wall_s = message.value("wall_s", 0.0);
  w.ticket.reset();
  if (message.contains("error")) // its measurer threw: a broken setup, as in process
    throw std::runtime_error(fmt::format("measuring worker {} ({}): {}", w.slot, w.stats.host,
                                         message["error"].get<std::string>()));
  done.result = result_from_json(message.at("result"));
  if (message.value("device_lost", false)) {
    done.result.error += "; the device is lost with its worker process: a fresh worker "
                         "measures the next candidate";
    w.stop(5); // it exits by itself after answering
  }
  ++w.stats.measured;
  w.stats.failed += done.result.status != MeasureStatus::kOk;
  w.stats.busy_s += done.wall_s;
  return done;
}

// The result of a job whose worker is gone: `status` with why; the next job starts a fresh one.
search::MeasureDone ProcessPool::lost(Worker& w, MeasureStatus status, const std::string& why) {
  search::MeasureDone done;
  done.ticket = *w.ticket;
  done.worker = w.slot;
  done.wall_s = seconds(Clock::now() - w.started);
  done.result.status = status;
  done.result.error = why + "; a fresh worker measures the next candidate";
  done.result.summarize();
  w.ticket.reset();
  ++w.stats.measured;
  ++w.stats.failed;
  w.stats.busy_s += done.wall_s;
  return done;
}

std::vector<search::WorkerStats> ProcessPool::workers() const {
  std::vector<search::WorkerStats> out;
  for (const auto& w : workers_)
    out.push_back(w->stats);
  return out;
}

// ---- the worker's side ---------------------------------------------------------------------

std::optional<WorkerEnvironment> worker_environment() {
  const char* v = std::getenv(kWorkerVar);
  if (!v)
    return std::nullopt;
  WorkerEnvironment env;
  long parent = 0;
  if (std::sscanf(v, "%d,%d,%d,%ld", &env.experiment, &env.device, &env.fd, &parent) != 4 ||
      env.experiment < 0 || env.device < 0 || env.fd < 0 || parent <= 0)
    throw InternalError(
        fmt::format("{}='{}' is not '<experiment>,<device>,<fd>,<parent pid>'", kWorkerVar, v));
  env.parent = static_cast<pid_t>(parent);
  const char* backend = std::getenv(kBackendVar);
  env.backend = backend ? backend : "";
  return env;
}

namespace {

// Blocks for the next message from the parent; nullopt at end of file.
std::optional<nlohmann::json> read_message(int fd, std::string& buffer) {
  for (;;) {
    if (std::optional<nlohmann::json> m = take_line(buffer))
      return m;
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return std::nullopt;
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

Hello prepare(const WorkerEnvironment& env, const WorkerFactory& make, WorkerSetup& setup) {
  Hello h; // rank 0 and no host: a worker process is known by its slot and pid
  try {
    setup = make(env);
    BRICKDL_CHECK(setup.space && setup.measurer, "a worker factory built no space or measurer");
    h.digest = experiment_digest(*setup.space, setup.experiment.measurement);
    h.target = setup.measurer->target();
    h.backend = setup.measurer->backend();
  } catch (const std::exception& e) {
    h.error = e.what();
    setup = WorkerSetup{};
  }
  return h;
}

} // namespace

int serve_measure_worker(const WorkerEnvironment& env, const WorkerFactory& make) {
  // The tuner may die without a word (SIGKILL): its workers go with it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != env.parent)
    return 0; // already orphaned
  WorkerSetup setup;
  if (!send_line(env.fd, {{"hello", to_json(prepare(env, make, setup))}}))
    return 0;
  std::string buffer;
  while (std::optional<nlohmann::json> m = read_message(env.fd, buffer)) {
    if (m->contains("quit"))
      break;
    if (!m->contains("job"))
      throw InternalError("a measuring worker got an unknown message: " + m->dump());
    nlohmann::json answer = answer_job(m->at("job"), setup.space.get(), setup.measurer.get(),
                                       setup.experiment.measurement.options);
    const bool device_lost = setup.measurer && setup.measurer->device_lost();
    answer["device_lost"] = device_lost;
    if (!send_line(env.fd, {{"result", answer}}))
      break;
    if (device_lost)
      _exit(0); // nothing of a broken CUDA context is torn down; the parent starts a fresh one
  }
  return 0;
}

} // namespace brickdl::distributed
