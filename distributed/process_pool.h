#pragma once
// ProcessPool: candidates measured in worker processes on this machine, each replaced when it
// dies, hangs or loses its device. The default for the cuda backend (brickdl-tune
// --in-process measures in the tuner's own process instead, for debugging).
//
//   driver ──submit(job)──► ProcessPool ──socket──► worker process 1: the same program started
//          ◄──next()───────┘    │                  again with BRICKDL_MEASURE_WORKER set; it
//                               │                  builds the experiment's search space and a
//                               │                  measurer, then serve_measure_worker()
//                               └──socket──► worker process 2 ... (per_device on each GPU)
//
// Why processes: after an illegal address, an illegal instruction or a trap the CUDA context
// is unusable and CUDA's documentation says the process must end; a hung kernel stops only
// with its process; a crash in a generated kernel's host path ends its process. In a worker
// each of these costs one candidate, recorded with a status and a reason:
//   crashed        the worker died (a signal, an abort, an exit) before it answered
//   timeout        no answer within the job's watchdog, 2·timeout_s + grace_s: killed
//   launch_error / timeout with the device lost: the measurer's own verdict, after which its
//                  device is unusable (Measurer::device_lost): the worker ends
// and the next candidate goes to a fresh worker. Only the driver writes the database, so
// nothing recorded is lost, and a rerun resumes from it (a recorded failure is not measured
// again unless --fresh).
//
// The protocol, one JSON object per line on a Unix socket pair (the worker's end is its fd 3):
//   worker ── {"hello": Hello} ────────────────────► (distributed/protocol.h; `error` set when
//                                                      it cannot measure: no GPU, bad input)
//   parent ── {"job": {ticket, group, index}} ─────►
//   worker ── {"result": {ticket, wall_s, result | error, device_lost}} ──►
//   parent ── {"quit": true} ──────────────────────► (end of file does the same)
// Workers rebuild the search space from the experiment, as MPI ranks do (distributed/mpi.h), and
// prove it with the same digest (experiment_digest); a job is three numbers.
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/experiment.h"
#include "core/measurer.h"
#include "search/measure_pool.h"
#include "search/search_space.h"

namespace brickdl::distributed {

// What a worker process is told through its environment (BRICKDL_MEASURE_WORKER and friends).
struct WorkerEnvironment {
  int experiment = 0;  // which experiment of the command line to measure
  int device = 0;      // GPU ordinal
  std::string backend; // the parent's resolved backend ("cuda", "cpu")
  int fd = 3;          // the socket to the parent
  pid_t parent = 0;    // the tuner; the worker ends when it is gone
};

// This process's WorkerEnvironment when it was started as a measuring worker, else nullopt.
// Throws InternalError when the variables are present but malformed.
std::optional<WorkerEnvironment> worker_environment();

// What a worker measures with, built in the worker from its environment.
struct WorkerSetup {
  ExperimentConfig experiment;
  std::unique_ptr<search::SearchSpace> space;
  std::unique_ptr<Measurer> measurer;
};
using WorkerFactory = std::function<WorkerSetup(const WorkerEnvironment&)>;

// A worker process's whole life: says hello (with the factory's error if it throws), then
// measures jobs until told to quit or the parent is gone. After a result with the device lost
// it exits at once (_exit: nothing of a broken CUDA context is torn down). Returns the exit
// status (0).
int serve_measure_worker(const WorkerEnvironment& env, const WorkerFactory& make);

struct ProcessPoolOptions {
  // The worker program and its arguments (argv[0] a path); it must call
  // serve_measure_worker() when worker_environment() says so.
  std::vector<std::string> argv;
  int experiment = 0;          // passed on in WorkerEnvironment
  std::string backend;         // passed on in WorkerEnvironment
  std::vector<int> devices{0}; // GPU ordinals, per_device workers on each
  int per_device = 1;
  std::string digest;           // the experiment_digest every worker must report ("": any)
  double grace_s = 30;          // a job's watchdog: 2·timeout_s + grace_s (compiles included)
  double start_timeout_s = 300; // a worker that has not said hello by then is broken
};

class ProcessPool final : public search::MeasurePool {
public:
  // Starts every worker and waits for each one's hello. Throws UserError with a worker's own
  // error when it cannot measure (no GPU, a bad experiment, another digest), InternalError when
  // one dies or stays silent before it is ready; returns early (no workers) when `stop` is set.
  ProcessPool(ProcessPoolOptions options, const std::atomic<bool>* stop);
  // Tells idle workers to quit, kills the busy ones (their results would never be read) and
  // any that has not left within 5 s, and reaps them all.
  ~ProcessPool() override;
  ProcessPool(const ProcessPool&) = delete;
  ProcessPool& operator=(const ProcessPool&) = delete;

  std::string target() const override { return target_; }
  std::string backend() const override { return backend_; }
  int slots() const override { return static_cast<int>(workers_.size()); }
  int in_flight() const override;
  void submit(const search::MeasureJob& job) override;
  std::optional<search::MeasureDone> next(const std::atomic<bool>* stop) override;
  std::vector<search::WorkerStats> workers() const override;
  // Workers started again after one died, hung or lost its device.
  int restarts() const { return restarts_; }
  // Worker processes alive now (a lost one is started again only when a job needs its slot).
  int running() const;

  struct Worker; // one child process (process_pool.cpp)

private:
  using Clock = std::chrono::steady_clock;
  void start(Worker& w, const std::atomic<bool>* stop);
  void check_hello(Worker& w, const nlohmann::json& hello);
  search::MeasureDone answered(Worker& w, const nlohmann::json& message);
  search::MeasureDone lost(Worker& w, MeasureStatus status, const std::string& why);
  std::optional<search::MeasureDone> take_buffered();

  ProcessPoolOptions opt_;
  std::string target_, backend_;
  std::vector<std::unique_ptr<Worker>> workers_;
  int restarts_ = 0;
};

} // namespace brickdl::distributed
