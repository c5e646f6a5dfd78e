#pragma once
// The in-plan check of a CPU plan: the tuner never hands back a plan that runs slower than its
// own layerwise baseline without having measured it so. Candidates are measured alone (their
// group's inputs cold or warm, as the experiment says); inside a whole model the caches hold
// what the layers before left there, oneDNN fuses across the group's edges, and the threads
// meet at other barriers. So after re-planning, a measuring CPU run times the plan itself:
//
//   step 1, per group   the tuned plan (its merged groups)  ┐ interleaved rounds (the order
//                       the layerwise plan, split into one   │ swapped every round), the same
//                       segment per merged group's layers   ┘ inputs and weights (seeded)
//                       → a merged group whose median segment time is not below its layers'
//                         layerwise median goes back to layerwise ("reverted")
//   step 2, end to end  the plan left after step 1 against the whole layerwise plan (unsplit:
//                       oneDNN's fusions where they apply), interleaved the same way
//                       → not faster by the median: the layerwise plan is returned
//                         ("fell back")
//
// A step runs `min_rounds` rounds, and more (up to `max_rounds`) while its time stays within
// `budget_s`; the first round of each plan is preceded by one untimed warm-up run. The
// outputs of every run are the plan executor's own (kernels/plan_executor.h), whose merged
// groups the measurer validated before their times counted.
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/candidate.h"
#include "core/graph.h"
#include "search/plan.h"
#include "search/search_space.h"

namespace brickdl::search {

// One timed run of a plan: the time of each segment (by its first layer) and end to end.
struct PlanRunTimes {
  std::vector<int> segment_first, segment_last; // graph layer ids, in run order
  std::vector<double> segment_ms;
  double end_to_end_ms = 0;
};

// Runs whole plans of one graph (the CPU plan executor; tests give their own).
class PlanTimer {
public:
  virtual ~PlanTimer() = default;
  // Makes `plan` (merged candidates; every other layer layerwise) ready to run, its layerwise
  // runs split at `segment_starts` (kernels::PlanOptions::segment_starts); returns a handle.
  virtual int prepare(const std::vector<Candidate>& plan,
                      const std::vector<int>& segment_starts) = 0;
  // `warmup` untimed runs of a prepared plan, then one timed run.
  virtual PlanRunTimes run(int handle, int warmup) = 0;
  virtual void release(int handle) = 0;        // its memory (packed parameters) is freed
  virtual std::string description() const = 0; // "2 threads, 16 lanes, layerwise on onednn"
};

// The CPU plan executor as a PlanTimer: seeded random inputs and weights (their values do not
// change a CPU's times), the layerwise layers through oneDNN, `threads` pinned threads (0: the
// CPUs this process may use).
std::unique_ptr<PlanTimer> make_cpu_plan_timer(const Graph& graph, int threads, uint64_t seed);

struct PlanCheckOptions {
  int min_rounds = 3;
  int max_rounds = 9;
  double budget_s = 20; // per step: further rounds only while the step took less
  // Checked between runs: when set, the check ends unfinished (PlanCheck::interrupted) and the
  // plan is returned as it was.
  const std::atomic<bool>* stop = nullptr;
};

struct PlanCheckGroup {
  int step = 0;                     // index in the tuned plan
  std::string layers;               // "first .. last" (names)
  Candidate merged;                 // the plan's candidate
  std::string candidate;            // "padded 4x4"
  std::vector<double> merged_ms;    // its segment in the tuned plan
  std::vector<double> layerwise_ms; // its layers' segment in the split layerwise plan
  bool kept = true;
};

struct PlanCheck {
  std::string how;                    // PlanTimer::description()
  int merged_groups = 0;              // in the tuned plan
  std::vector<PlanCheckGroup> groups; // step 1, one per merged group, in plan order
  int reverted = 0;                   // groups of step 1 that went back to layerwise
  std::vector<double> tuned_ms;       // step 1, end to end: the tuned plan
  std::vector<double> checked_ms;     // step 2, end to end: the plan left after step 1
  std::vector<double> layerwise_ms;   // step 2, end to end: the whole layerwise plan
  bool fell_back = false;             // step 2 found no gain: the layerwise plan is returned
  bool interrupted = false;           // a stop request ended it: the plan is unchecked
  std::string error;                  // why it could not run (\"\": it ran); the plan is unchecked
  double seconds = 0;
  // The steps of the tuned plan (indices) that stay merged in the returned plan.
  std::vector<int> kept_steps;
};

// Checks `plan` (of `space`) with `timer`. A plan without merged groups is not run (an empty
// check: merged_groups 0).
PlanCheck check_plan(const SearchSpace& space, const Plan& plan, PlanTimer& timer,
                     const PlanCheckOptions& options = {});

// The plan to return: `plan` with every merged step not in check.kept_steps replaced by its
// layers' layerwise steps, or the layerwise plan when the check fell back; costed under `cost`.
// The label says what the check changed.
Plan checked_plan(const SearchSpace& space, const Plan& plan, const PlanCheck& check,
                  const CostMatrix& cost);

// True when the check changed the plan (a group reverted, or the layerwise plan returned).
inline bool plan_check_changed(const PlanCheck& c) {
  return !c.interrupted && c.error.empty() && (c.reverted > 0 || c.fell_back);
}

// What the check said of `candidate` when it was a merged group of the checked plan and the
// returned plan runs its layers layerwise ("" otherwise): why a runner-up the plan costs as a
// gain is not in the plan.
std::string plan_check_verdict(const PlanCheck& check, const Candidate& candidate);

// A few lines for the report (print_report) and the object plan.json holds.
void print_plan_check(const PlanCheck& check, std::ostream& os);
nlohmann::json plan_check_json(const PlanCheck& check);

} // namespace brickdl::search
