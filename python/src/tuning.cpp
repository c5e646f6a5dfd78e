// tune() (bindings.h): one tuning run of the driver (search/driver.h), as brickdl-tune runs it
// in process, on a thread of its own. The caller's thread waits with the GIL released, wakes at
// each result and every 100 ms, hands the results to the progress callback (with the GIL, on the
// caller's thread) and checks for signals: a Ctrl-C (KeyboardInterrupt) or an exception of the
// callback asks the driver to stop, which ends the run as `aborted` after the candidate in
// flight, keeping what was measured (as brickdl-tune's first Ctrl-C does).
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include <nanobind/stl/string.h>

#include "core/store/tuning_db.h"
#include "python/src/bindings.h"
#include "search/driver.h"
#include "search/measurers.h"
#include "search/predictor.h"
#include "search/report.h"

namespace brickdl::python {

namespace {

// One measured (or resumed) candidate, copied out of search::MeasureEvent for the caller's
// thread.
struct ProgressEvent {
  int done = 0, fresh = 0, queued = 0, worker = 0;
  bool resumed = false;
  double elapsed_s = 0, budget_s = 0;
  std::string layers, strategy, brick, status, error;
  int threads = 0;
  std::optional<double> median_ms;
};

// What the driver's thread and the caller's share.
struct Job {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<ProgressEvent> events;
  bool done = false;
  std::optional<search::TuneResult> result;
  std::exception_ptr error;
  std::atomic<bool> stop{false};
  std::ostringstream log; // the run's informational lines and warnings (driver thread only)
};

class QueueCallback final : public search::MeasureCallback {
public:
  explicit QueueCallback(Job& job) : job_(job) {}
  void on_result(const search::MeasureEvent& e) override {
    ProgressEvent p;
    p.done = e.done;
    p.fresh = e.fresh;
    p.queued = e.queued;
    p.worker = e.worker;
    p.resumed = e.resumed;
    p.elapsed_s = e.elapsed_s;
    p.budget_s = e.budget_s;
    if (e.group)
      p.layers = e.group->layer_names;
    if (e.candidate) {
      p.strategy = strategy_name(e.candidate->strategy);
      p.brick = e.candidate->strategy == Strategy::kLayerwise ? "" : e.candidate->brick.str();
      p.threads = e.candidate->threads;
    }
    if (e.result) {
      p.status = measure_status_name(e.result->status);
      p.error = e.result->error;
      if (e.result->status == MeasureStatus::kOk && e.result->median_ms > 0)
        p.median_ms = e.result->median_ms;
    }
    {
      const std::lock_guard<std::mutex> lock(job_.mu);
      job_.events.push_back(std::move(p));
    }
    job_.cv.notify_all();
  }

private:
  Job& job_;
};

// The driver's thread: what brickdl-tune's tune_one does for a run in process.
void run_driver(Job& job, const ExperimentConfig& exp, bool fresh, bool use_other_targets) {
  try {
    search::TuneContext ctx;
    ctx.log = search::Logger(&job.log, false);
    const search::MeasuringSetup setup = search::make_measuring(exp, ctx.log);
    const std::unique_ptr<search::Predictor> predictor = search::make_model_predictor(exp.gpu);
    TuningDb db(exp.database);
    QueueCallback queue(job);
    ctx.experiment = exp;
    ctx.predictor = predictor.get();
    ctx.measurer = setup.measurer.get();
    ctx.validate_only = setup.validate_only;
    ctx.db = &db;
    ctx.seed = exp.seed;
    ctx.options.fresh = fresh;
    ctx.options.use_other_targets = use_other_targets;
    ctx.callbacks.push_back(&queue);
    ctx.stop_requested = &job.stop;
    if (setup.measurer)
      ctx.log.info((setup.validate_only ? "validating on " : "measuring on ") +
                   setup.measurer->target() + " (" + setup.measurer->backend() + " backend)");
    search::TuneResult result = search::tune(ctx);
    const std::lock_guard<std::mutex> lock(job.mu);
    job.result = std::move(result);
  } catch (...) {
    const std::lock_guard<std::mutex> lock(job.mu);
    job.error = std::current_exception();
  }
  {
    const std::lock_guard<std::mutex> lock(job.mu);
    job.done = true;
  }
  job.cv.notify_all();
}

nb::dict event_dict(const ProgressEvent& p) {
  nb::dict d;
  d["done"] = p.done;
  d["fresh"] = p.fresh;
  d["queued"] = p.queued;
  d["resumed"] = p.resumed;
  d["worker"] = p.worker;
  d["elapsed_s"] = p.elapsed_s;
  d["budget_s"] = p.budget_s;
  d["layers"] = p.layers;
  d["strategy"] = p.strategy;
  d["brick"] = p.brick;
  d["threads"] = p.threads;
  d["status"] = p.status;
  d["error"] = p.error;
  d["median_ms"] = p.median_ms ? nb::object(nb::float_(*p.median_ms)) : nb::none();
  return d;
}

// Waits (GIL released) until the job is done or has events; takes the events.
std::deque<ProgressEvent> wait_for_events(Job& job, bool* done) {
  nb::gil_scoped_release release;
  std::unique_lock<std::mutex> lock(job.mu);
  job.cv.wait_for(lock, std::chrono::milliseconds(100),
                  [&] { return job.done || !job.events.empty(); });
  std::deque<ProgressEvent> events;
  events.swap(job.events);
  *done = job.done;
  return events;
}

// The caller's side of a run: events to `progress`, signals checked; the first Python error
// (KeyboardInterrupt, or the callback's) stops the driver and is raised once the run ended.
void supervise(Job& job, const nb::object& progress, std::optional<nb::python_error>& raised) {
  bool done = false;
  while (!done) {
    std::deque<ProgressEvent> events = wait_for_events(job, &done);
    for (const ProgressEvent& e : events) {
      if (progress.is_none() || raised)
        continue;
      try {
        progress(event_dict(e));
      } catch (nb::python_error& err) {
        raised.emplace(std::move(err));
        job.stop = true;
      }
    }
    if (!raised && PyErr_CheckSignals() != 0) {
      raised.emplace(); // fetches the KeyboardInterrupt the handler raised
      job.stop = true;
    }
  }
}

nb::dict outcome(const search::TuneResult& result, const std::string& log, bool interrupted) {
  nb::dict out;
  out["run_id"] = result.run_id;
  out["aborted"] = result.aborted;
  out["interrupted"] = interrupted;
  out["report"] = to_python(search::report_json(result.report));
  std::ostringstream text;
  search::print_report(result.report, text);
  out["report_text"] = text.str();
  out["result"] = nb::cast(result);
  out["log"] = log;
  return out;
}

// Runs the tune; returns the outcome (a dict, see outcome()). A KeyboardInterrupt ends the run
// as aborted and is not raised: the outcome says interrupted, and the Python side raises
// brickdl.Interrupted with the plan. An exception of the callback is raised after the run ended.
nb::dict tune(const ExperimentConfig& exp, bool fresh, bool use_other_targets,
              nb::object progress) {
  try { // bad input fails before the run row exists
    search::check_experiment(exp);
    search::check_precision(exp);
  } catch (const UserError& err) {
    rethrow_as_setting(err, nlohmann::json::object());
  }
  Job job;
  std::thread driver;
  {
    nb::gil_scoped_release release;
    driver = std::thread(run_driver, std::ref(job), std::cref(exp), fresh, use_other_targets);
  }
  std::optional<nb::python_error> raised;
  supervise(job, progress, raised);
  {
    nb::gil_scoped_release release;
    driver.join();
  }
  const bool interrupted = raised && raised->matches(PyExc_KeyboardInterrupt);
  if (raised && !interrupted)
    throw std::move(*raised);
  if (job.error)
    std::rethrow_exception(job.error);
  return outcome(*job.result, job.log.str(), interrupted);
}

} // namespace

void bind_tuning(nb::module_& m) {
  m.def(
      "tune",
      [](nb::handle model, bool fresh, bool use_other_targets, nb::object progress) {
        return tune(experiment_config(model), fresh, use_other_targets, std::move(progress));
      },
      nb::arg("model"), nb::arg("fresh") = false, nb::arg("use_other_targets") = false,
      nb::arg("progress") = nb::none());
  nb::class_<search::TuneResult>(m, "TuneResult", "A finished tuning run (brickdl.Plan holds one).")
      .def("write", &search::write_outputs, nb::arg("dir"),
           "Writes plan.json and report.txt into `dir`, as brickdl-tune does.");
}

} // namespace brickdl::python
