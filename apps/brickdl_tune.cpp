// brickdl-tune: tunes one experiment — the model's plan, measurements of the most promising
// candidates, the re-planned result — into a tuning database, and writes plan.json and
// report.txt into the experiment's output folder.
//
//   brickdl-tune MODEL.onnx [--batch N] [--target GPU] ...   (an experiment with defaults)
//   brickdl-tune EXPERIMENT.yaml [--describe] [--backend B] [--db PATH] [--out DIR] [--fresh]
//                [--top-k K] [--searcher S] [--max-group-len L] [--use-other-targets]
//                [--quiet] [--progress]
//
// Exit status: 0 done, 2 bad input (UserError), 3 internal error, 130 interrupted.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/run_tool.h"
#include "core/describe.h"
#include "core/error.h"
#include "core/experiment.h"
#include "core/onnx.h"
#include "core/store/tuning_db.h"
#include "model/report.h"
#include "search/driver.h"
#include "search/interrupt.h"
#include "search/measurers.h"
#include "search/predictor.h"
#include "search/progress.h"
#include "search/searcher.h"

namespace {

using namespace brickdl;

struct Args {
  std::string experiment;
  bool describe = false;
  std::optional<std::string> backend, db, out, searcher;
  std::optional<int> top_k, max_group_len, batch;
  std::optional<std::string> target;
  bool fresh = false, use_other_targets = false, quiet = false, progress = false;
};

// Marks a run aborted through a connection of its own (called from the interrupt watcher
// while the main thread may be inside a measurement); a run already ended stays as it is.
// The process exits right after, so a failure is reported here, not thrown.
void mark_aborted(const std::string& db_path, int64_t run_id) {
  try {
    TuningDb db(db_path);
    db.mark_run_aborted(run_id);
  } catch (const std::exception& e) {
    std::cerr << "brickdl-tune: could not mark run " << run_id << " aborted: " << e.what() << '\n';
  }
}

// `brickdl-tune MODEL.onnx`: the experiment `model: MODEL.onnx`, `target: H200` (or --target),
// the file's batch (or --batch), every other key at its default; named after the file.
ExperimentConfig onnx_experiment(const Args& a) {
  const std::string stem = std::filesystem::path(a.experiment).stem().string();
  std::string yaml = fmt::format("name: {}\nmodel: {}\ntarget: {}\n", nlohmann::json(stem).dump(),
                                 nlohmann::json(a.experiment).dump(),
                                 nlohmann::json(a.target.value_or("H200")).dump());
  if (a.batch)
    yaml += fmt::format("batch: {}\n", *a.batch);
  return parse_experiment(yaml, "the command line");
}

// The experiment with the command line's overrides; the registries' names checked.
ExperimentConfig load(const Args& a) {
  if ((a.batch || a.target) && !is_onnx_path(a.experiment))
    throw UserError("--batch and --target apply to an ONNX model (brickdl-tune MODEL.onnx); the "
                    "experiment file " +
                    a.experiment + " sets them itself");
  ExperimentConfig exp =
      is_onnx_path(a.experiment) ? onnx_experiment(a) : load_experiment(a.experiment);
  const auto from_command_line = [](const char* flag) {
    return SourceLocation{"the command line", 0, 0, flag};
  };
  if (a.backend) {
    exp.measurement.backend = *a.backend;
    exp.measurement.backend_at = from_command_line("--backend");
  }
  if (a.db)
    exp.database = *a.db;
  if (a.out)
    exp.output_dir = *a.out;
  if (a.searcher) {
    exp.search.searcher = *a.searcher;
    exp.search.searcher_at = from_command_line("--searcher");
  }
  if (a.top_k)
    exp.measurement.top_k = *a.top_k;
  if (a.max_group_len)
    exp.search.max_group_len = *a.max_group_len;
  search::check_names(exp);
  return exp;
}

int describe(const ExperimentConfig& exp) {
  describe_experiment(exp, std::cout);
  std::cout << '\n';
  model::describe_model(fuse_for_inference(exp.graph), exp.gpu, std::cout);
  return 0;
}

// Prints the report, writes plan.json and report.txt; the exit status of the run.
int finish(const search::TuneResult& result, const ExperimentConfig& exp,
           const search::Logger& log) {
  search::print_report(result.report, std::cout);
  search::write_outputs(result, exp.output_dir);
  log.info("wrote " + exp.output_dir + "/plan.json and report.txt; database " + exp.database +
           " (run " + std::to_string(result.run_id) + ")");
  if (result.aborted) {
    std::cerr << "brickdl-tune: run " << result.run_id << " aborted; what was measured is kept\n";
    return search::InterruptHandler::kExitInterrupted;
  }
  return 0;
}

int run(const Args& a, search::InterruptHandler& interrupt) {
  const ExperimentConfig exp = load(a);
  if (a.describe)
    return describe(exp);

  // Bad input fails here, before a measurer or the database is set up.
  search::check_experiment(exp);
  search::TuneContext ctx;
  ctx.log = search::Logger(&std::cerr, a.quiet);
  const std::unique_ptr<search::Predictor> predictor = search::make_model_predictor(exp.gpu);
  const std::unique_ptr<Measurer> measurer =
      search::make_measurer(exp.measurement.backend, exp.measurement, ctx.log);
  TuningDb db(exp.database);

  search::ProgressBar bar(std::cerr, !a.quiet && (a.progress || search::stderr_is_terminal()));
  search::ProgressCallback progress(bar);
  ctx.experiment = exp;
  ctx.predictor = predictor.get();
  ctx.measurer = measurer.get();
  ctx.db = &db;
  ctx.seed = exp.seed;
  ctx.options.fresh = a.fresh;
  ctx.options.use_other_targets = a.use_other_targets;
  ctx.callbacks.push_back(&progress);
  ctx.stop_requested = &interrupt.requested();
  const std::string db_path = exp.database;
  ctx.on_run_started = [&interrupt, db_path](int64_t run_id) {
    interrupt.set_on_force([db_path, run_id] { mark_aborted(db_path, run_id); });
  };
  if (measurer)
    ctx.log.info("measuring on " + measurer->target() + " (" + measurer->backend() + " backend)");

  const search::TuneResult result = search::tune(ctx);
  interrupt.disarm();
  bar.finish();
  return finish(result, exp, ctx.log);
}

} // namespace

int main(int argc, char** argv) {
  // First, before any thread exists (see search/interrupt.h).
  brickdl::search::InterruptHandler interrupt;

  Args a;
  CLI::App app{"brickdl-tune: tunes merged execution of a CNN over bricks for one experiment"};
  app.add_option("experiment", a.experiment,
                 "experiment YAML file, or an ONNX model (.onnx) tuned with the defaults")
      ->required();
  app.add_option("--batch", a.batch, "with MODEL.onnx: the batch (default: the file's)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--target", a.target, "with MODEL.onnx: the GPU spec (default: H200)");
  app.add_flag("--describe", a.describe,
               "print the experiment, its graph and the model's layer report, then exit");
  // Names are checked against the registries with the experiment's (search::check_names).
  app.add_option("--backend", a.backend,
                 "measuring backend: " + join_names(search::backend_names()));
  app.add_option("--db", a.db, "tuning database (overrides `database`)");
  app.add_option("--out", a.out, "output folder for plan.json and report.txt");
  app.add_flag("--fresh", a.fresh, "measure again what the database already has");
  app.add_option("--top-k", a.top_k, "candidates measured per group of the plan")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--searcher", a.searcher, "searcher: " + join_names(search::searcher_names()));
  app.add_option("--max-group-len", a.max_group_len, "most layers in one group")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--use-other-targets", a.use_other_targets,
               "reuse measurements taken on other targets");
  app.add_flag("--quiet", a.quiet, "no progress and no informational lines");
  app.add_flag("--progress", a.progress, "draw the progress bar even when stderr is no terminal");
  return run_tool("brickdl-tune", app, argc, argv, [&] { return run(a, interrupt); });
}
