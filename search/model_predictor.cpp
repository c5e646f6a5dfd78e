#include "search/predictor.h"

namespace brickdl::search {

namespace {

class ModelPredictor final : public Predictor {
public:
  explicit ModelPredictor(const GpuSpec& gpu) : model_(gpu) {}
  model::Prediction predict(const Graph& graph, const Candidate& candidate) const override {
    return model_.predict(graph, candidate);
  }
  model::LowerBound lower_bound(const Graph& graph, const Group& group) const override {
    return model_.lower_bound(graph, group);
  }
  std::string version() const override { return model::CostModel::version(); }
  std::string gpu_name() const override { return model_.gpu().name; }

private:
  model::CostModel model_;
};

} // namespace

std::unique_ptr<Predictor> make_model_predictor(const GpuSpec& gpu) {
  return std::make_unique<ModelPredictor>(gpu);
}

} // namespace brickdl::search
