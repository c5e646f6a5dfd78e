// The text targets: experiment YAML, inline graphs, plan JSON.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>

#include "core/describe.h"
#include "core/error.h"
#include "core/gpu_spec.h"
#include "core/store/tuning_db.h"
#include "core/yaml_graph.h"
#include "kernels/plan_executor.h"
#include "kernels/plan_io.h"
#include "kernels/weights.h"
#include "model/report.h"
#include "search/driver.h"
#include "search/predictor.h"
#include "search/report.h"
#include "tests/fuzz/targets.h"

namespace brickdl::fuzz {
namespace {

namespace fs = std::filesystem;

constexpr int kTuneLayers = 40; // larger graphs are described, not tuned, in a case

std::string case_stem() {
  return scratch_dir() + "/case-" + std::to_string(getpid());
}

// The graph plan_json's plans are for: the yaml_graph seed residual_2d, fused.
const Graph& plan_graph() {
  static const Graph g = fuse_for_inference(load_yaml_graph(
      std::string(BRICKDL_SOURCE_DIR) + "/tests/fuzz/seeds/yaml_graph/residual_2d.yaml"));
  return g;
}

// Runs `plan` on `fused` with seeded inputs and weights (brickdl-run).
void run_plan(const Graph& fused, const std::vector<Candidate>& plan) {
  kernels::validate_plan(fused, plan);
  const kernels::Tensor input = kernels::random_tensor(fused.input_shape(), 1);
  const kernels::ModelWeights weights = kernels::model_weights(fused, 1);
  kernels::execute_plan(fused, plan, input, weights, kernels::ExecOptions{2});
}

ExperimentConfig graph_experiment(const Graph& g, std::vector<Strategy> strategies) {
  ExperimentConfig exp;
  exp.name = "fuzz_graph";
  exp.model = "custom";
  exp.graph = g;
  exp.batch = g.batch();
  exp.gpu = *find_gpu_spec("A100-40GB");
  exp.search.brick_sizes = {4, 8};
  exp.search.strategies = std::move(strategies);
  exp.measurement.backend = "none";
  return exp;
}

} // namespace

std::string write_case_file(const std::string& bytes, const std::string& suffix) {
  const std::string path = case_stem() + suffix;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

void tune_model_only(ExperimentConfig exp, const std::string& db_path) {
  exp.database = db_path;
  exp.output_dir = db_path + ".out";
  exp.measurement.backend = "none";
  exp.measurement.backend_at = SourceLocation{"the command line", 0, 0, "--backend"};
  search::check_names(exp);
  search::check_experiment(exp);
  const auto predictor = search::make_model_predictor(exp.gpu);
  TuningDb db(db_path);
  int tick = 0; // fixed times: the same input makes the same database
  db.set_clock([&tick] { return fmt::format("2027-01-01T00:00:{:02}.000Z", tick++ % 60); });
  search::TuneContext ctx;
  ctx.experiment = exp;
  ctx.predictor = predictor.get();
  ctx.db = &db;
  ctx.seed = exp.seed;
  const search::TuneResult result = search::tune(ctx);
  std::ostringstream os;
  search::print_report(result.report, os);
  search::write_outputs(result, exp.output_dir);
}

bool small_enough_to_run(const Graph& fused) {
  int64_t elements = 0;
  for (const Layer& l : fused.layers())
    elements += l.out.numel();
  return elements <= 400000 && fused.total_macs() <= 20000000 && fused.total_params() <= 1000000;
}

void experiment_body(const FuzzInput& in) {
  // Named as if it sat in experiments/, so that relative paths (ONNX models) resolve there.
  ExperimentConfig exp =
      parse_experiment(in.bytes, std::string(BRICKDL_SOURCE_DIR) + "/experiments/fuzz_case.yaml");
  search::check_names(exp);
  std::ostringstream os; // --describe
  describe_experiment(exp, os);
  const Graph fused = fuse_for_inference(exp.graph);
  model::describe_model(fused, exp.gpu, os);
  if (fused.size() <= kTuneLayers) { // --backend none
    const std::string db = case_stem() + ".db";
    tune_model_only(exp, db);
    for (const char* s : {"", "-wal", "-shm"})
      fs::remove(db + s);
    fs::remove_all(db + ".out");
  }
}

void yaml_graph_body(const FuzzInput& in) {
  const Graph g = parse_yaml_graph(in.bytes, "graph.yaml");
  std::ostringstream os;
  describe_graph(g, os);
  const Graph fused = fuse_for_inference(g);
  model::describe_model(fused, *find_gpu_spec("A100-40GB"), os);
  if (fused.size() > kTuneLayers)
    return;
  const std::string db = case_stem() + ".db";
  tune_model_only(
      graph_experiment(g, {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized}), db);
  if (small_enough_to_run(fused)) // brickdl-run --plan plan.json
    run_plan(fused, kernels::load_plan_json(db + ".out/plan.json", fused));
  for (const char* s : {"", "-wal", "-shm"})
    fs::remove(db + s);
  fs::remove_all(db + ".out");
}

std::vector<FuzzInput> plan_seeds() {
  std::vector<FuzzInput> seeds;
  const Graph& g = plan_graph();
  const std::vector<std::pair<const char*, std::vector<Strategy>>> variants = {
      {"dp", {Strategy::kLayerwise, Strategy::kPadded, Strategy::kMemoized}},
      {"padded", {Strategy::kPadded}},
      {"memoized", {Strategy::kMemoized}}};
  for (const auto& [name, strategies] : variants) {
    const std::string db = scratch_dir() + "/plan-seed-" + name + ".db";
    Graph unfused = load_yaml_graph(std::string(BRICKDL_SOURCE_DIR) +
                                    "/tests/fuzz/seeds/yaml_graph/residual_2d.yaml");
    tune_model_only(graph_experiment(unfused, strategies), db);
    const std::string text = read_file(db + ".out/plan.json");
    seeds.push_back({text, std::string("plan.json of residual_2d, ") + name});
    const auto plan = kernels::parse_plan_json(text, "plan.json", g);
    seeds.push_back(
        {kernels::plan_to_json(plan).dump(1), std::string("plan list of residual_2d, ") + name});
  }
  return seeds;
}

void plan_body(const FuzzInput& in) {
  const Graph& g = plan_graph();
  run_plan(g, kernels::parse_plan_json(in.bytes, "plan.json", g));
}

} // namespace brickdl::fuzz
