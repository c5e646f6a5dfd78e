#pragma once
// Tuning on many devices with MPI: `mpirun -np N brickdl-tune EXP.yaml [more.yaml ...]`.
//
//   rank 0 ── the driver (search/driver.h), unchanged: search, model, database, report
//     │        its MeasurePool is a Workers::pool() instead of a measurer in process
//     ├── rank 1 ── serve(): its own measurer, on GPU (its index among the node's workers,
//     │             modulo the GPUs it sees; two workers on one GPU: the second is refused)
//     ├── rank 2 ── serve()          or the CPU backend where the node has no GPU
//     └── ...
//
// Dynamic dispatch: a free worker gets the next candidate, results come back as they finish
// (distributed/protocol.h has the messages). Only rank 0 touches the database, so a killed rank
// loses at most the candidates in flight, and rerunning the command resumes from the database.
// Every wait polls (1 ms sleeps) instead of blocking in MPI: an idle worker takes no CPU from
// a measuring one, and a stop request (SIGINT/SIGTERM, which mpirun sends every rank on
// Ctrl-C or when a rank dies) is seen at once.
//
// Built without MPI (no libopenmpi-dev), Session's constructor throws a UserError saying so.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/experiment.h"
#include "distributed/protocol.h"
#include "search/measure_pool.h"

namespace brickdl::distributed {

bool built_with_mpi();

// MPI for the lifetime of the object.
class Session {
public:
  // MPI_Init_thread (funneled: only the main thread calls MPI). Throws UserError when
  // brickdl was built without MPI.
  Session(int* argc, char*** argv);
  // MPI_Finalize, unless abort() or leave() was called.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const;
  int size() const;
  const std::string& host() const;
  // This worker's index among the worker ranks of its node (rank 0 not counted): the GPU
  // ordinal it measures on (modulo the GPUs it sees).
  int local_worker_index() const;
  // Ends every rank of the job (MPI_Abort), e.g. when workers are still measuring and rank 0
  // must stop now.
  [[noreturn]] void abort(int code);
  // The job is being torn down (a signal): exit without MPI_Finalize, which would wait for
  // ranks that are gone.
  void leave();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Rank 0's side: the worker ranks.
class Workers {
public:
  explicit Workers(Session& session);
  ~Workers();
  int count() const; // the worker ranks (size - 1)

  // Every worker loads experiment `index` (its command line's index-th) and builds its
  // search space and measurer; their answers in rank order. Returns early (fewer answers)
  // when `stop` is set.
  std::vector<Hello> prepare(int index, const std::atomic<bool>* stop);
  // A pool over the ranks of `group`, which must have been prepared for the experiment being
  // tuned. `hellos` (prepare()'s answer) names their hosts.
  std::unique_ptr<search::MeasurePool> pool(const TargetGroup& group,
                                            const std::vector<Hello>& hellos);
  // Jobs sent and not answered (all pools).
  int busy() const;
  // Tells every worker to exit. Returns false when some are still measuring (their results
  // would never be read): the caller should Session::abort() instead of finalizing.
  bool quit();

  struct State; // shared with the pools (mpi.cpp)

private:
  std::shared_ptr<State> state_;
};

// A worker rank's loop: serves rank 0 until kQuit (returns 0) or a stop request (returns
// 130). `load(i)` is experiment i as this rank reads it from the same command line.
using ExperimentLoader = std::function<ExperimentConfig(int index)>;
int serve(Session& session, const ExperimentLoader& load, const std::atomic<bool>& stop);

} // namespace brickdl::distributed
