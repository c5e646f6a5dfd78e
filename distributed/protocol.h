#pragma once
// What rank 0 and the worker ranks of an MPI tuning job say to each other, and the decisions
// rank 0 takes on what they answer. No MPI in here: the transport is distributed/mpi.h; this part
// is tested on its own.
//
//   rank 0                                   worker rank r
//     ── kPrepare {experiment} ───────────►    loads experiment i (same command line), builds
//                                              its search space and its measurer
//     ◄── kHello {target, backend, digest, host, error} ──
//     ── kJob {ticket, group, index} ─────►    measures space.candidate({group, index})
//     ◄── kResult {ticket, wall_s, result | error} ──
//     ── kQuit ───────────────────────────►    exits (MPI_Finalize)
//
// Messages are JSON text. Workers rebuild the search space from the experiment instead of
// receiving graphs, so a job is three numbers; the space digest proves both sides built the
// same space with the same measurement settings (a different file or version on a node is
// refused, not measured). Non-finite numbers travel as "nan", "inf", "-inf".
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/experiment.h"
#include "core/measurer.h"
#include "search/search_space.h"

namespace brickdl::distributed {

enum Tag : int { kPrepare = 1, kHello = 2, kJob = 3, kResult = 4, kQuit = 5 };

// A worker's answer to kPrepare.
struct Hello {
  int rank = 0;
  std::string host;
  std::string target;  // the measurer's fingerprint ("" when it failed)
  std::string backend; // "cpu" or "cuda"
  std::string digest;  // experiment_digest() of what it built
  std::string error;   // why it cannot measure this experiment ("" when it can)
  std::string device;  // the GPU it measures on (PCI bus id); "" on the CPU backend
};

nlohmann::json to_json(const Hello& h);
Hello hello_from_json(const nlohmann::json& j);

nlohmann::json to_json(const MeasureResult& r);
// Throws InternalError on a malformed message.
MeasureResult result_from_json(const nlohmann::json& j);

// A worker's answer to a job {ticket, group, index} of `space`: {ticket, wall_s, result}, or
// {ticket, wall_s, error} when there is no measurer, no such candidate, or the measurer threw
// (a broken setup, not a failing candidate). MPI ranks and worker processes answer alike.
nlohmann::json answer_job(const nlohmann::json& job, const search::SearchSpace* space,
                          Measurer* measurer, const MeasureOptions& options);

// A digest of a search space's groups and candidates: equal on every rank that built the
// same space from the same experiment.
std::string space_digest(const search::SearchSpace& space);
// A digest of the measurement settings that shape a result (warmup, repetitions, L2 flush,
// counters, time-out, seed, tolerances, CPU threads); not the backend, which each node
// resolves for itself, nor what only rank 0 uses (top_k, budgets).
std::string measurement_digest(const MeasurementConfig& measurement);
// space_digest + measurement_digest: what a worker must share with rank 0 to measure for it.
std::string experiment_digest(const search::SearchSpace& space,
                              const MeasurementConfig& measurement);

// One target of an experiment and the worker ranks that measure it.
struct TargetGroup {
  std::string target, backend;
  std::vector<int> ranks; // ascending
};

// How rank 0 splits the workers of one experiment:
//   runs     the targets to tune, in order: the one most workers measure (ties: the lowest
//            rank's) first; every other one too when `each_target`, else none
//   refused  rank → why it measures nothing (its own error, a different experiment digest, a
//            GPU (host, device) a lower rank already measures on, or a target not tuned)
struct Assignment {
  std::vector<TargetGroup> runs;
  std::vector<std::pair<int, std::string>> refused;
};
Assignment assign_workers(const std::vector<Hello>& hellos, const std::string& digest,
                          bool each_target);

// The MPI launcher's view of this process, from its environment (Open MPI, PMIx, MPICH/PMI):
// the number of ranks (0 when no launcher started it) and this process's rank.
int launcher_world_size();
int launcher_rank();

} // namespace brickdl::distributed
