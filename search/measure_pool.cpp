#include "search/measure_pool.h"

#include <chrono>

#include "core/error.h"

namespace brickdl::search {

void LocalPool::submit(const MeasureJob& job) {
  BRICKDL_CHECK(!job_, "LocalPool::submit with a job in flight");
  job_ = job;
}

std::optional<MeasureDone> LocalPool::next(const std::atomic<bool>* /*stop*/) {
  // The job runs now, whatever `stop` says: a stop request ends the run after the candidate
  // in flight (search/interrupt.h), and here it is in flight once submitted.
  if (!job_)
    return std::nullopt;
  const MeasureJob job = *std::exchange(job_, std::nullopt);
  const auto t0 = std::chrono::steady_clock::now();
  MeasureDone done;
  done.ticket = job.ticket;
  done.result = measurer_.measure(*job.graph, *job.candidate, job.options);
  done.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return done;
}

} // namespace brickdl::search
