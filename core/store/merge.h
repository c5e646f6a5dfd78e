#pragma once
// Merging tuning databases (`brickdl-query merge OUT.db IN.db...`): every row of each input
// is copied into OUT with its ids remapped through natural keys, so merging the same input
// twice adds nothing the second time.
//
//   natural keys   targets: fingerprint       workloads: signature
//                  candidates: (workload, strategy, brick with cb and nb, threads)
//                  runs: (experiment, model, batch, precision, target, git revision, started_at)
//                  measurements: (candidate, target, run)   [the schema's UNIQUE constraint]
//                  predictions: (candidate, gpu spec, model version)
//                  plans: (run, kind, created_at)   baselines: (target, model, batch,
//                  precision, framework, created_at)
//
// Plans' JSON text is copied as it is: ids inside it refer to the input database.
#include <cstdint>
#include <string>
#include <vector>

#include "core/store/tuning_db.h"

namespace brickdl {

struct MergeOptions {
  // Measurements of different targets side by side in OUT (each keeps its target); without
  // this, merging them is refused.
  bool allow_mixed_targets = false;
};

struct MergeStats {
  std::string input;
  int64_t runs_added = 0, runs_present = 0;
  int64_t measurements_added = 0, measurements_present = 0;
  int64_t predictions_added = 0, plans_added = 0, baselines_added = 0;
};

// Copies the inputs into `out` in one transaction: all or nothing. Every input is opened
// (read-only; no write permission needed) and passes SQLite's integrity check before anything
// is written (`out` passed it when opened for writing). Throws UserError when an input cannot
// be read, is damaged, is `out` itself, when OUT and the inputs together hold timings of more
// than one target (validations, "<target>#validation", are no timings) and
// `allow_mixed_targets` is false, or when OUT refuses an input row
// (it breaks a constraint of the schema: the input file and the row are named, and nothing is
// merged; such a row is never skipped silently).
std::vector<MergeStats> merge_databases(TuningDb& out, const std::vector<std::string>& inputs,
                                        const MergeOptions& options = {});

// brickdl-query merge OUT IN...: merge_databases into the file `out`, created when absent; a
// refused merge leaves no new file behind (nor its -wal, -shm or -journal).
std::vector<MergeStats> merge_into(const std::string& out, const std::vector<std::string>& inputs,
                                   const MergeOptions& options = {});

} // namespace brickdl
