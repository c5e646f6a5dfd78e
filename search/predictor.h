#pragma once
// Predictor: what the search asks of a performance model. The analytic model
// (model::CostModel) is the one the tools use; tests plug in their own.
#include <memory>
#include <string>

#include "core/candidate.h"
#include "core/gpu_spec.h"
#include "core/graph.h"
#include "model/cost_model.h"

namespace brickdl::search {

class Predictor {
public:
  virtual ~Predictor() = default;
  // `graph` is fused. Must be a pure function of the candidate's workload (core/group.h)
  // and configuration: evaluate() calls it once per distinct pair and shares the answer.
  virtual model::Prediction predict(const Graph& graph, const Candidate& candidate) const = 0;
  virtual model::LowerBound lower_bound(const Graph& graph, const Group& group) const = 0;
  virtual std::string version() const = 0;  // stored with every prediction
  virtual std::string gpu_name() const = 0; // the spec it predicts for
};

// The analytic model for `gpu` with its default coefficients.
std::unique_ptr<Predictor> make_model_predictor(const GpuSpec& gpu);

} // namespace brickdl::search
