#pragma once
// Evaluation: what is known about every candidate of a space — the model's prediction, the
// database ids, and the measurement once there is one. Parallel to SearchSpace's indexing.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/measurer.h"
#include "model/cost_model.h"
#include "search/cost_table.h"
#include "search/predictor.h"
#include "search/search_space.h"

namespace brickdl::search {

struct CandidateEval {
  model::Prediction prediction;
  int64_t candidate_id = 0;                 // database row (0 when not stored)
  std::optional<MeasureResult> measurement; // measured in this run or resumed
  bool resumed = false;                     // taken from the database, not measured now
  std::string measured_on;                  // target fingerprint of the measurement
};

struct GroupEval {
  model::LowerBound lower_bound;
  int64_t workload_id = 0; // database row (0 when not stored)
  std::vector<CandidateEval> candidates;
};

// Candidates left out for one kind of reason (reason_class()): how many, and the range each of
// the reason's numbers took, so that the kind keeps its numbers: "padded regions need N KiB"
// over three candidates reads "padded regions need 180–1189 KiB".
struct ReasonTally {
  int64_t count = 0;
  std::vector<std::string> words;           // the text between the numbers (numbers + 1 pieces)
  std::vector<std::string> lowest, highest; // per number, as written in the reasons

  // Counts `reason`, which must be of this tally's kind (the first one sets it).
  void add(const std::string& reason);
  // The kind with each number's range ("180–1189", or "163" when it never varied).
  std::string str() const;
};

// Reason kinds (reason_class()) to their tallies.
using ReasonTallies = std::map<std::string, ReasonTally>;

// Adds `reason` to its kind's tally ("infeasible (no reason given)" for an empty one).
void add_reason(ReasonTallies& tallies, const std::string& reason);
int64_t total_count(const ReasonTallies& tallies);

struct Evaluation {
  std::vector<GroupEval> groups;
  // Candidates the model rejected, by reason_class() of the reason, with their numbers' ranges
  // (the database keeps each reason exactly).
  ReasonTallies infeasible;
  int64_t model_calls = 0; // distinct (workload, configuration) pairs

  CandidateEval& at(CandidateRef r) {
    return groups.at(static_cast<size_t>(r.group)).candidates.at(static_cast<size_t>(r.index));
  }
  const CandidateEval& at(CandidateRef r) const {
    return groups.at(static_cast<size_t>(r.group)).candidates.at(static_cast<size_t>(r.index));
  }
  // Predicted time of feasible candidates, kExcluded for the rest.
  CostMatrix predicted_costs() const;
  // Median of an ok measurement, kExcluded for a failed one, kNotMeasured without one.
  CostMatrix measured_costs() const;
  int64_t feasible_count() const;
};

// A reason with its numbers replaced by "N" ("needs 256 KiB ...; A100-40GB allows 163 KiB" →
// "needs N KiB ...; A100-40GB allows N KiB"), so that counts group by kind. Numbers glued to
// letters (names such as A100-40GB) are kept; a number is digits with at most one decimal
// point followed by a digit ("1..1024" is two numbers).
std::string reason_class(const std::string& reason);

// Predicts every candidate of `space`, once per distinct (workload signature, configuration)
// pair. `progress(done, total)` is called now and then.
Evaluation evaluate(const SearchSpace& space, const Predictor& predictor,
                    const std::function<void(int64_t, int64_t)>& progress = {});

} // namespace brickdl::search
