#pragma once
// MeasurePool: where the driver sends candidates to be measured, and where results come back.
//
//   driver ──submit(job)──► MeasurePool ─┬─ LocalPool: one Measurer in this process, one job
//          ◄──next()───────┘             │   at a time (brickdl-tune --in-process, the cpu
//                                        │   backend)
//                                        ├─ distributed::ProcessPool: worker processes on this
//                                        │   machine, one job each, each replaced when it dies,
//                                        │   hangs or loses its device (the cuda backend's
//                                        │   default; distributed/process_pool.h)
//                                        └─ distributed::MpiPool: worker ranks, one job each
//                                            (mpirun -np N brickdl-tune, distributed/mpi.h)
//
// The driver keeps up to slots() jobs in flight and takes results in the order they finish,
// so a slow or failing candidate holds only its own worker. A candidate's outcome is a
// MeasureResult whatever happens to it (a worker's exception becomes a failed result); an
// exception out of the pool means the pool itself is broken.
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/measurer.h"
#include "search/report.h"
#include "search/search_space.h"

namespace brickdl::search {

struct MeasureJob {
  int64_t ticket = 0; // the driver's handle, returned with the result
  CandidateRef ref;   // in the driver's search space (remote workers rebuild the same space)
  const Graph* graph = nullptr;
  const Candidate* candidate = nullptr;
  MeasureOptions options;
};

struct MeasureDone {
  int64_t ticket = 0;
  MeasureResult result;
  int worker = 0;    // who measured it: an MPI rank, 0 in process
  double wall_s = 0; // the job's wall time on its worker
};

class MeasurePool {
public:
  virtual ~MeasurePool() = default;
  virtual std::string target() const = 0;  // the fingerprint every result is measured on
  virtual std::string backend() const = 0; // "cpu" or "cuda"
  virtual int slots() const = 0;           // jobs that may be in flight at once (>= 1)
  virtual int in_flight() const = 0;       // submitted and not yet returned by next()
  // Starts a job; call only while in_flight() < slots().
  virtual void submit(const MeasureJob& job) = 0;
  // The next job to finish; blocks until one does. nullopt when `stop` is set first (jobs
  // still running are abandoned: their results never come back), or when nothing is in flight.
  virtual std::optional<MeasureDone> next(const std::atomic<bool>* stop) = 0;
  // Per-worker counts for the report; empty for an in-process pool.
  virtual std::vector<WorkerStats> workers() const { return {}; }
};

// A Measurer in this process: submit() holds the one job, next() measures it.
class LocalPool final : public MeasurePool {
public:
  explicit LocalPool(Measurer& measurer) : measurer_(measurer) {}
  std::string target() const override { return measurer_.target(); }
  std::string backend() const override { return measurer_.backend(); }
  int slots() const override { return 1; }
  int in_flight() const override { return job_ ? 1 : 0; }
  void submit(const MeasureJob& job) override;
  std::optional<MeasureDone> next(const std::atomic<bool>* stop) override;

private:
  Measurer& measurer_;
  std::optional<MeasureJob> job_;
};

} // namespace brickdl::search
