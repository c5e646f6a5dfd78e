// brickdl-tune: tunes experiments — the model's plan, measurements of the most promising
// candidates, the re-planned result — into a tuning database, and writes plan.json and
// report.txt into each experiment's output folder. Several experiments run one after another.
//
//   brickdl-tune MODEL.onnx [--batch N] [--target GPU] ...   (an experiment with defaults)
//   brickdl-tune ZOO_NAME [--batch N] [--target GPU] ...     (the same for a zoo model)
//   brickdl-tune EXPERIMENT.yaml [more.yaml ...] [--target GPU] [--precision P] [--batch N]
//                [--input-size H,W | D,H,W] [--calibration FILE] [--describe] [--backend B] [--db
//                PATH]
//                [--out DIR] [--fresh] [--top-k K] [--searcher S] [--max-group-len L]
//                [--use-other-targets] [--quiet] [--progress] [--in-process | --worker-process]
//   mpirun -np N brickdl-tune EXPERIMENT.yaml ... [--each-target]
//                rank 0 tunes, ranks 1..N-1 measure (distributed/mpi.h)
//
// A plain run measures the cuda backend in a worker process (distributed/process_pool.h): this
// program started again with BRICKDL_MEASURE_WORKER set, which survives for the tuner what a
// candidate may do to its process (a crash, a hang, a sticky CUDA error). --in-process
// measures in the tuner itself (debugging); --worker-process uses a worker for cpu too.
//
// Exit status: 0 done, 2 bad input (UserError), 3 internal error, 130 interrupted.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "apps/run_tool.h"
#include "core/describe.h"
#include "core/error.h"
#include "core/experiment.h"
#include "core/onnx.h"
#include "core/store/tuning_db.h"
#include "distributed/mpi.h"
#include "distributed/process_pool.h"
#include "model/report.h"
#include "search/driver.h"
#include "search/interrupt.h"
#include "search/measurers.h"
#include "search/predictor.h"
#include "search/progress.h"
#include "search/report.h"
#include "search/searcher.h"

namespace {

using namespace brickdl;

struct Args {
  std::vector<std::string> experiments;
  bool describe = false;
  std::optional<std::string> backend, db, out, searcher;
  std::optional<int> top_k, max_group_len;
  ExperimentOverrides overrides; // --target, --precision, --batch, --input-size, --calibration
  bool fresh = false, use_other_targets = false, quiet = false, progress = false;
  bool each_target = false;
  bool in_process = false, worker_process = false;
  std::vector<std::string> self_argv; // how a worker process is started: this program again
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

// `brickdl-tune MODEL.onnx` or `brickdl-tune ZOO_NAME`: the model's bare experiment
// (core/experiment.h bare_model_yaml: `target: H200` unless --target, the file's batch unless
// --batch, every other key at its default), named after the file or the zoo model. Its errors
// name the model, never the experiment written here.
ExperimentConfig bare_experiment(const Args& a, const std::string& model) {
  const BareModel bare{model, std::nullopt, std::nullopt};
  return parse_bare_model(bare_model_yaml(bare), bare, a.overrides);
}

// The experiment at `path` with the command line's overrides; the registries' names checked.
ExperimentConfig load(const Args& a, const std::string& path) {
  ExperimentConfig exp = is_onnx_path(path) || is_zoo_name(path)
                             ? bare_experiment(a, path)
                             : load_experiment(path, a.overrides);
  const auto from_command_line = [](const char* flag) {
    return SourceLocation{"the command line", 0, 0, flag};
  };
  if (a.backend) {
    exp.measurement.backend = *a.backend;
    exp.measurement.backend_at = from_command_line("--backend");
  }
  if (a.db)
    exp.database = *a.db;
  if (a.out) // several experiments: one folder each inside it
    exp.output_dir = a.experiments.size() > 1 ? *a.out + "/" + exp.name : *a.out;
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

// Every experiment of the command line, loaded and checked before any is tuned: two that
// would write the same output folder are refused.
std::vector<ExperimentConfig> load_all(const Args& a) {
  std::vector<ExperimentConfig> out;
  for (size_t i = 0; i < a.experiments.size(); ++i) {
    out.push_back(load(a, a.experiments[i]));
    for (size_t j = 0; j < i; ++j)
      if (out[j].output_dir == out[i].output_dir)
        throw UserError(fmt::format("{} and {} would both write {}: give them different names "
                                    "or `output:` folders",
                                    a.experiments[j], a.experiments[i], out[i].output_dir));
    if (!a.describe)
      search::check_experiment(out.back()); // bad input fails before anything is set up
  }
  return out;
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

// Where one tuning run measures: a measurer in this process, or a pool of MPI worker ranks
// (with the workers that were refused for it, for the report); neither: model only.
struct MeasureSite {
  Measurer* measurer = nullptr;
  search::MeasurePool* pool = nullptr;
  std::vector<search::WorkerStats> refused;
  bool validate_only = false; // the measurer only validates the model's plan (no GPU)
};

// Tunes `exp` once, measuring at `site`.
int tune_one(const Args& a, const ExperimentConfig& exp, const MeasureSite& site,
             search::InterruptHandler& interrupt) {
  search::TuneContext ctx;
  ctx.log = search::Logger(&std::cerr, a.quiet);
  const std::unique_ptr<search::Predictor> predictor = search::make_model_predictor(exp.gpu);
  TuningDb db(exp.database);

  search::ProgressBar bar(std::cerr, !a.quiet && (a.progress || search::stderr_is_terminal()));
  search::ProgressCallback progress(bar);
  ctx.experiment = exp;
  ctx.predictor = predictor.get();
  ctx.measurer = site.measurer;
  ctx.validate_only = site.validate_only;
  ctx.pool = site.pool;
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
  if (site.measurer)
    ctx.log.info((site.validate_only ? "validating on " : "measuring on ") +
                 site.measurer->target() + " (" + site.measurer->backend() + " backend)");

  search::TuneResult result = search::tune(ctx);
  interrupt.disarm();
  bar.finish();
  auto& workers = result.report.workers;
  workers.insert(workers.end(), site.refused.begin(), site.refused.end());
  std::sort(workers.begin(), workers.end(),
            [](const auto& x, const auto& y) { return x.rank < y.rank; });
  return finish(result, exp, ctx.log);
}

// A folder name for a target fingerprint ("cpu:AMD EPYC" → "cpu-AMD-EPYC").
std::string target_slug(const std::string& target) {
  std::string out;
  for (char c : target)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' ? c : '-';
  return out;
}

std::string host_of(const std::vector<distributed::Hello>& hellos, int rank) {
  for (const distributed::Hello& h : hellos)
    if (h.rank == rank)
      return h.host;
  return "?";
}

// Tunes experiment `index` on the MPI worker ranks: every worker prepares it and reports its
// target; the target most workers share is tuned by them (every target in turn with
// --each-target, each in a subfolder of the output named after it); the rest are refused.
int tune_on_workers(const Args& a, const ExperimentConfig& exp, int index,
                    distributed::Workers& workers, search::InterruptHandler& interrupt) {
  const search::Logger log(&std::cerr, a.quiet);
  const std::string digest = distributed::experiment_digest(
      search::SearchSpace::build(fuse_for_inference(exp.graph), exp.search, exp.file),
      exp.measurement);
  const std::vector<distributed::Hello> hellos = workers.prepare(index, &interrupt.requested());
  if (interrupt.requested())
    return search::InterruptHandler::kExitInterrupted;
  const distributed::Assignment assignment =
      distributed::assign_workers(hellos, digest, a.each_target);
  std::vector<search::WorkerStats> refused;
  std::string reasons;
  for (const auto& [rank, why] : assignment.refused) {
    const std::string host = host_of(hellos, rank);
    log.warn(
        fmt::format("rank {} ({}) refused for experiment '{}': {}", rank, host, exp.name, why));
    refused.push_back(search::WorkerStats{rank, host, "", 0, 0, 0, why});
    reasons += fmt::format("; rank {}: {}", rank, why);
  }
  if (assignment.runs.empty())
    throw UserError(
        fmt::format("experiment '{}': no worker rank can measure it{}", exp.name, reasons));
  for (size_t k = 0; k < assignment.runs.size(); ++k) {
    const distributed::TargetGroup& group = assignment.runs[k];
    ExperimentConfig e = exp;
    if (k > 0)
      e.output_dir += "/" + target_slug(group.target);
    const std::unique_ptr<search::MeasurePool> pool = workers.pool(group, hellos);
    MeasureSite site{nullptr, pool.get(), refused};
    for (const distributed::TargetGroup& other : assignment.runs) // the other targets' ranks
      if (&other != &group)
        for (int r : other.ranks)
          site.refused.push_back(search::WorkerStats{r, host_of(hellos, r), other.target, 0, 0, 0,
                                                     "tunes its own target " + other.target});
    log.info(fmt::format("measuring on {} ({} backend) with {} worker rank(s): {}", group.target,
                         group.backend, group.ranks.size(), fmt::join(group.ranks, ", ")));
    if (const int status = tune_one(a, e, site, interrupt); status != 0)
      return status;
  }
  return 0;
}

// The backend a plain run measures `exp` with in a worker process, or "" to measure in this
// process: cuda unless --in-process; cpu (named, not auto's fallback) with --worker-process.
std::string worker_backend(const Args& a, const ExperimentConfig& exp) {
  if (a.in_process || exp.measurement.backend == "none")
    return "";
  std::string why_not;
  const std::string backend = search::resolve_backend(exp.measurement.backend, &why_not);
  if (backend == "cuda" || (a.worker_process && exp.measurement.backend == "cpu"))
    return backend;
  return "";
}

// Tunes experiment `index` measuring in a worker process of `backend` (distributed/
// process_pool.h): a candidate that crashes, hangs or leaves the device unusable is recorded
// with its status, and a fresh worker takes the next.
int tune_in_worker(const Args& a, const ExperimentConfig& exp, int index,
                   const std::string& backend, search::InterruptHandler& interrupt) {
  distributed::ProcessPoolOptions o;
  o.argv = a.self_argv;
  o.experiment = index;
  o.backend = backend;
  o.devices = {exp.measurement.device};
  o.digest = distributed::experiment_digest(
      search::SearchSpace::build(fuse_for_inference(exp.graph), exp.search, exp.file),
      exp.measurement);
  distributed::ProcessPool pool(std::move(o), &interrupt.requested());
  if (interrupt.requested())
    return search::InterruptHandler::kExitInterrupted;
  search::Logger(&std::cerr, a.quiet)
      .info("measuring on " + pool.target() + " (" + pool.backend() +
            " backend) in a worker process, started afresh after a crash, a hang or a lost "
            "device (--in-process: in this process)");
  return tune_one(a, exp, MeasureSite{nullptr, &pool, {}, false}, interrupt);
}

// A measuring worker process (BRICKDL_MEASURE_WORKER set by the tuner that started it): the
// experiment of the same command line, its search space and a measurer that leaves a lost
// device to the process's end.
int serve_as_worker(const Args& a, const distributed::WorkerEnvironment& env) {
  return distributed::serve_measure_worker(env, [&a](const distributed::WorkerEnvironment& e) {
    distributed::WorkerSetup s;
    s.experiment = load(a, a.experiments.at(static_cast<size_t>(e.experiment)));
    s.space = std::make_unique<search::SearchSpace>(search::SearchSpace::build(
        fuse_for_inference(s.experiment.graph), s.experiment.search, s.experiment.file));
    MeasurementConfig config = s.experiment.measurement;
    config.device = e.device;
    config.recover_in_process = false;
    s.measurer = search::make_measurer(e.backend, config, search::Logger(&std::cerr, true));
    if (!s.measurer)
      throw UserError("backend '" + e.backend + "' measures nothing");
    return s;
  });
}

// Every experiment of the command line in turn, measured in this process or, with
// `workers`, on the MPI worker ranks. Stops at the first that does not end with 0.
int run_experiments(const Args& a, search::InterruptHandler& interrupt,
                    distributed::Workers* workers) {
  const std::vector<ExperimentConfig> experiments = load_all(a);
  if (a.each_target && !workers)
    search::Logger(&std::cerr, a.quiet)
        .warn("--each-target applies under mpirun (worker ranks of several targets); one "
              "process measures one target");
  for (size_t i = 0; i < experiments.size(); ++i) {
    const ExperimentConfig& exp = experiments[i];
    if (a.describe) {
      if (i > 0)
        std::cout << '\n';
      describe(exp);
      continue;
    }
    int status = 0;
    if (workers && exp.measurement.backend != "none") {
      status = tune_on_workers(a, exp, static_cast<int>(i), *workers, interrupt);
    } else if (const std::string backend = worker_backend(a, exp); !backend.empty()) {
      status = tune_in_worker(a, exp, static_cast<int>(i), backend, interrupt);
    } else {
      const search::MeasuringSetup setup =
          search::make_measuring(exp, search::Logger(&std::cerr, a.quiet));
      status = tune_one(a, exp, MeasureSite{setup.measurer.get(), nullptr, {}, setup.validate_only},
                        interrupt);
    }
    if (status != 0)
      return status;
  }
  return 0;
}

// Rank 0 of an MPI job: tunes, then lets the workers go. A stop request (mpirun forwards
// Ctrl-C as SIGTERM to every rank) leaves without MPI_Finalize; an error with workers still
// measuring ends the whole job (MPI_Abort) once it is printed.
int run_rank0(const Args& a, distributed::Session& session, search::InterruptHandler& interrupt) {
  distributed::Workers workers(session);
  int status = 0;
  try {
    status = run_experiments(a, interrupt, &workers);
  } catch (const std::exception& e) {
    if (!interrupt.requested() && workers.quit())
      throw; // printed by run_tool; the workers are leaving
    std::cerr << "brickdl-tune: " << (dynamic_cast<const UserError*>(&e) ? "" : "internal ")
              << "error: " << e.what() << '\n';
    session.abort(dynamic_cast<const UserError*>(&e) ? kExitUserError : kExitInternalError);
  }
  if (interrupt.requested()) {
    session.leave();
    return search::InterruptHandler::kExitInterrupted;
  }
  if (!workers.quit()) {
    std::cerr << "brickdl-tune: " << workers.busy() << " worker rank(s) still measuring; ending "
              << "the job\n";
    session.abort(status == 0 ? kExitInternalError : status);
  }
  return status;
}

// A worker rank of an MPI job: measures what rank 0 sends until it says quit. A worker's own
// internal error ends the whole job (rank 0 would wait for its result forever).
int run_worker(const Args& a, distributed::Session& session, search::InterruptHandler& interrupt) {
  try {
    const int status = distributed::serve(
        session, [&a](int i) { return load(a, a.experiments.at(static_cast<size_t>(i))); },
        interrupt.requested());
    if (status != 0)
      session.leave();
    return status;
  } catch (const std::exception& e) {
    std::cerr << "brickdl-tune (rank " << session.rank() << ", " << session.host()
              << "): internal error: " << e.what() << '\n';
    session.abort(kExitInternalError);
  }
}

// Under an MPI launcher with more than one rank: rank 0 tunes, the others measure.
int run_mpi(const Args& a, search::InterruptHandler& interrupt, std::streambuf* worker_stderr) {
  distributed::Session session(nullptr, nullptr);
  if (session.rank() == 0) {
    interrupt.set_notice("interrupted: stopping now; candidates in flight on worker ranks are "
                         "dropped");
    return run_rank0(a, session, interrupt);
  }
  std::cerr.rdbuf(worker_stderr); // the command line parsed: a worker's own errors show
  return run_worker(a, session, interrupt);
}

// The command line's options, into `a`.
void add_options(CLI::App& app, Args& a) {
  app.add_option("experiment", a.experiments,
                 "experiment YAML files (tuned in turn), or ONNX models (.onnx) or zoo model "
                 "names (resnet50, ...) tuned with the defaults")
      ->required();
  app.add_option("--target", a.overrides.gpu,
                 "the GPU spec to plan for, over the experiment's `target` (" +
                     join_names(gpu_spec_names()) + "; MODEL.onnx: default H200)");
  app.add_option("--precision", a.overrides.precision,
                 "over the experiment's `precision`: " + join_names(dtype_names()));
  app.add_option("--batch", a.overrides.batch,
                 "over the experiment's `batch` (MODEL.onnx: default the file's)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--input-size", a.overrides.input_size,
                 "over the experiment's `input_size`: H,W or D,H,W")
      ->delimiter(',')
      ->expected(2, 3);
  app.add_option("--calibration", a.overrides.calibration,
                 "a device calibration (brickdl-calibrate's JSON, docs/calibration.md) over the "
                 "target's spec, over the experiment's `target.calibration`");
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
  app.add_flag("--each-target", a.each_target,
               "under mpirun: tune every target the worker ranks measure, one after another "
               "(default: the target most of them share; the others are refused)");
  auto* in_process = app.add_flag("--in-process", a.in_process,
                                  "measure the cuda backend in this process, not in a worker "
                                  "process (debugging: a crash or a sticky CUDA error then ends "
                                  "or resets the whole run)");
  app.add_flag("--worker-process", a.worker_process,
               "measure the cpu backend in a worker process too (the cuda backend always is, "
               "unless --in-process)")
      ->excludes(in_process);
}

} // namespace

int main(int argc, char** argv) {
  // First, before any thread exists (see search/interrupt.h).
  brickdl::search::InterruptHandler interrupt;
  // Under mpirun every rank parses the same command line: only rank 0 reports its mistakes.
  const bool under_mpi = distributed::launcher_world_size() > 1;
  std::streambuf* const stderr_buf = std::cerr.rdbuf();
  if (under_mpi && distributed::launcher_rank() > 0) {
    std::cout.rdbuf(nullptr);
    std::cerr.rdbuf(nullptr);
    interrupt.set_notice(""); // mpirun stops every rank at once: rank 0 says it
  }

  Args a;
  CLI::App app{"brickdl-tune: tunes merged execution of a CNN over bricks for experiments"};
  add_options(app, a);
  app.footer("The closing report's columns:\n" + search::report_legend());
  a.self_argv.assign(argv, argv + argc);
  a.self_argv[0] = std::filesystem::read_symlink("/proc/self/exe").string();
  return run_tool("brickdl-tune", app, argc, argv, [&] {
    if (const std::optional<distributed::WorkerEnvironment> env = distributed::worker_environment())
      return serve_as_worker(a, *env);
    return under_mpi ? run_mpi(a, interrupt, stderr_buf) : run_experiments(a, interrupt, nullptr);
  });
}
