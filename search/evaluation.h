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

struct Evaluation {
  std::vector<GroupEval> groups;
  // Candidates the model rejected, by reason_class() of the reason (the database keeps each
  // reason exactly).
  std::map<std::string, int64_t> infeasible;
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
// letters (names such as A100-40GB) are kept.
std::string reason_class(const std::string& reason);

// Predicts every candidate of `space`, once per distinct (workload signature, configuration)
// pair. `progress(done, total)` is called now and then.
Evaluation evaluate(const SearchSpace& space, const Predictor& predictor,
                    const std::function<void(int64_t, int64_t)>& progress = {});

} // namespace brickdl::search
