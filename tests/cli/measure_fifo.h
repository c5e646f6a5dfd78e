#pragma once
// The test's end of the measurement hook BRICKDL_TEST_MEASURE_FIFO (search/measurers.h): a
// program started with the variable naming this FIFO holds each measurement until the test
// has seen it begin (wait_measuring) and lets it go (release). A test that signals a run while
// it is held knows the run was mid-measurement, not already over (tune_e2e_test.cpp).
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

namespace brickdl::testing {

class MeasureFifo {
public:
  // Makes the FIFO at `path` (replacing whatever was there); ok() says whether it could.
  explicit MeasureFifo(std::string path) : path_(std::move(path)) {
    ::unlink(path_.c_str());
    ok_ = ::mkfifo(path_.c_str(), 0600) == 0;
  }
  ~MeasureFifo() { ::unlink(path_.c_str()); }
  MeasureFifo(const MeasureFifo&) = delete;
  MeasureFifo& operator=(const MeasureFifo&) = delete;

  const std::string& path() const { return path_; }
  bool ok() const { return ok_; }

  // Waits up to `patience` for a measurement to begin: the pid of the process measuring it
  // (held until release()), or -1 when none began.
  pid_t wait_measuring(std::chrono::seconds patience) const {
    // Non-blocking, so that the wait has an end: poll() reports nothing on a FIFO no writer
    // has opened yet (Linux), then the line and the writer's close.
    const int fd = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
      return -1;
    const auto until = std::chrono::steady_clock::now() + patience;
    std::string line;
    while (line.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR)
        continue;
      char chunk[64];
      const ssize_t n = ready > 0 ? ::read(fd, chunk, sizeof(chunk)) : 0;
      if (n <= 0)
        break; // out of patience, or the writer left without a line
      line.append(chunk, static_cast<size_t>(n));
    }
    ::close(fd);
    const std::string mark = "measuring ";
    if (line.rfind(mark, 0) != 0 || line.find('\n') == std::string::npos)
      return -1;
    return static_cast<pid_t>(std::stol(line.substr(mark.size())));
  }

  // Lets the held measurement go: opens the FIFO for writing once its process has opened it
  // for reading, and closes it (its end of file). False when it did not within `patience`.
  bool release(std::chrono::seconds patience) const {
    const auto until = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < until) {
      const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) {
        ::close(fd);
        return true;
      }
      if (errno != ENXIO) // ENXIO: no reader yet
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

private:
  std::string path_;
  bool ok_ = false;
};

} // namespace brickdl::testing
