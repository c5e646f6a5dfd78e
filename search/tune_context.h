#pragma once
// TuneContext: everything one tuning run needs, passed as one object (the driver takes no
// long parameter lists), and the callbacks that react to each measurement.
//
//   brickdl-tune ──builds──► TuneContext { experiment, predictor, measurer or pool, database,
//                                          seed, logger, callbacks, stop flag }
//                               │
//                               ▼
//                         tune() (search/driver.h) ──on_result()──► MeasureCallbacks
//                                                                   (database, progress, ...)
#include <atomic>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/experiment.h"
#include "core/measurer.h"
#include "core/store/tuning_db.h"
#include "search/measure_pool.h"
#include "search/predictor.h"
#include "search/search_space.h"

namespace brickdl::search {

// Informational lines of a run, on one stream (stderr in the tools); quiet drops them.
class Logger {
public:
  explicit Logger(std::ostream* out = nullptr, bool quiet = false) : out_(out), quiet_(quiet) {}
  void info(const std::string& line) const {
    if (out_ && !quiet_)
      *out_ << line << '\n' << std::flush;
  }
  // Warnings are shown even when quiet.
  void warn(const std::string& line) const {
    if (out_)
      *out_ << "warning: " << line << '\n' << std::flush;
  }
  bool quiet() const { return quiet_; }

private:
  std::ostream* out_;
  bool quiet_;
};

// One measured (or resumed) candidate, as the callbacks see it.
struct MeasureEvent {
  CandidateRef ref;
  const Candidate* candidate = nullptr;
  const GroupEntry* group = nullptr;
  const MeasureResult* result = nullptr;
  bool resumed = false; // taken from the database instead of measured now
  int64_t candidate_id = 0;
  int worker = 0;       // the MPI rank that measured it (0: in process, or resumed)
  int done = 0;         // candidates handled so far in this run (this one included)
  int fresh = 0;        // of which measured now
  int queued = 0;       // done + proposed and not yet handled (in flight on workers included)
  double elapsed_s = 0; // since the measuring phase began
  double budget_s = 0;  // 0 = none
};

// Reacts to each result as it arrives (STYLE: writing, progress and refits are callbacks, not
// code in the search loop). Called on the driver's thread, in order.
class MeasureCallback {
public:
  virtual ~MeasureCallback() = default;
  virtual void on_phase_begin(const std::string& /*phase*/) {}
  virtual void on_result(const MeasureEvent& event) = 0;
  virtual void on_phase_end() {}
};

struct TuneOptions {
  bool fresh = false;             // re-measure candidates already in the database
  bool use_other_targets = false; // resume from measurements of other targets too
};

struct TuneContext {
  ExperimentConfig experiment;          // with command-line overrides applied
  const Predictor* predictor = nullptr; // required
  Measurer* measurer = nullptr;         // in process; nullptr: model only (backend none)
  // The measurer is not the device the plan is for (backend auto without a GPU): the plan
  // stays the model's and the measurer only validates its merged groups
  // (search/plan_validation.h); its times never re-plan. In process only (no pool).
  bool validate_only = false;
  // Where candidates are measured when set (MPI worker ranks, distributed/); `measurer` is then
  // unused.
  MeasurePool* pool = nullptr;
  TuningDb* db = nullptr; // required: every prediction and result goes there
  uint64_t seed = 1;
  Logger log;
  TuneOptions options;
  std::vector<MeasureCallback*> callbacks; // besides the database writer, which is built in
  // Checked between candidates: when set, the run ends as `aborted` with what it has.
  const std::atomic<bool>* stop_requested = nullptr;
  // Called once the run row exists (the interrupt handler needs its id).
  std::function<void(int64_t run_id)> on_run_started;
};

} // namespace brickdl::search
