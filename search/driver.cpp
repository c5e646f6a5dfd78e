#include "search/driver.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/git_revision.h"
#include "core/store/heartbeat.h"
#include "model/baseline.h"
#include "search/evaluation.h"
#include "search/measurers.h"
#include "search/plan_check.h"
#include "search/plan_validation.h"
#include "search/searcher.h"

namespace brickdl::search {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The command line's overrides of an experiment, as the run's configuration records them.
nlohmann::json overrides_json(const ExperimentOverrides& o) {
  nlohmann::json overrides = nlohmann::json::object();
  if (o.gpu)
    overrides["gpu"] = *o.gpu;
  if (o.precision)
    overrides["precision"] = *o.precision;
  if (o.batch)
    overrides["batch"] = *o.batch;
  if (!o.input_size.empty())
    overrides["input_size"] = o.input_size;
  if (o.calibration)
    overrides["calibration"] = *o.calibration;
  return overrides;
}

nlohmann::json experiment_json(const ExperimentConfig& e) {
  nlohmann::json strategies = nlohmann::json::array();
  for (Strategy s : e.search.strategies)
    strategies.push_back(strategy_name(s));
  nlohmann::json out = {
      {"name", e.name},
      {"model", e.model},
      {"batch", e.batch},
      {"precision", dtype_name(e.precision)},
      {"gpu", e.gpu.name},
      {"seed", e.seed},
      {"search",
       {{"brick_sizes", e.search.brick_sizes},
        {"channel_blocks", e.search.channel_blocks},
        {"max_group_len", e.search.max_group_len},
        {"strategies", strategies},
        {"threads", e.search.threads},
        {"searcher", e.search.searcher},
        {"random_samples", e.search.random_samples},
        {"partitions", e.search.partitions}}},
      {"measurement",
       {{"backend", e.measurement.backend},
        {"top_k", e.measurement.top_k},
        {"warmup", e.measurement.options.warmup},
        {"repetitions", e.measurement.options.repetitions},
        {"budget_s", e.measurement.budget_s},
        {"max_measurements", e.measurement.max_measurements}}},
  };
  // Batch blocks only when the experiment asks for more than one image per unit: a run without
  // them records the configuration it recorded before they existed (the committed result set
  // compares this text); readers take a missing list as [1].
  if (e.search.batch_blocks != std::vector<int>{1})
    out["search"]["batch_blocks"] = e.search.batch_blocks;
  if (e.search.clusters != std::vector<int>{1}) // likewise
    out["search"]["clusters"] = e.search.clusters;
  if (!e.search.brick_depths.empty()) // likewise; readers take a missing list as cubes
    out["search"]["brick_depths"] = e.search.brick_depths;
  if (!e.measurement.plan_check) // likewise; readers take a missing key as true
    out["measurement"]["plan_check"] = false;
  // What the command line changed (readers find a run by its model and these, not only by
  // the experiment's name); absent when nothing.
  if (!e.overrides.empty())
    out["overrides"] = overrides_json(e.overrides);
  // The device calibration over the spec: its measured values, which fields are measured and
  // which the spec's own (brickdl-query show prints its summary); absent without one.
  if (e.calibration)
    out["calibration"] = e.calibration->json();
  return out;
}

PredictionRow prediction_row(const model::Prediction& p, const model::LowerBound& lb) {
  PredictionRow r;
  r.feasible = p.feasible;
  r.reason = p.reason;
  r.time_ms = p.time_ms;
  r.time_dram_ms = p.t_dram_ms;
  r.time_l2_ms = p.t_l2_ms;
  r.time_compute_ms = p.t_compute_ms;
  r.time_atomics_compulsory_ms = p.t_atomic_compulsory_ms;
  r.time_atomics_conflict_ms = p.t_atomic_conflict_ms;
  r.time_other_ms = p.t_launch_ms + p.t_sync_ms;
  r.flops = p.flops;
  r.redundant_flops = p.redundant_flops;
  r.l1_bytes = p.l1_bytes;
  r.l2_bytes = p.l2_bytes;
  r.dram_bytes = p.dram_bytes;
  r.dram_lower_bound = lb.dram_bytes;
  r.atomics_compulsory = p.atomics_compulsory;
  r.atomics_conflict = p.atomics_conflict;
  return r;
}

// Labels of groups: the experiment's named subgraphs and partition groups ("3+3 #2").
std::vector<std::string> group_labels(const SearchSpace& space) {
  std::vector<std::string> labels(space.groups().size());
  auto add = [&](int g, const std::string& l) {
    auto& s = labels[static_cast<size_t>(g)];
    s += (s.empty() ? "" : ", ") + l;
  };
  for (size_t i = 0; i < space.subgraphs().size(); ++i)
    add(space.subgraphs()[i], space.subgraph_names()[i]);
  for (size_t p = 0; p < space.partitions().size(); ++p)
    for (size_t i = 0; i < space.partitions()[p].size(); ++i)
      add(space.partitions()[p][i], fmt::format("{} #{}", space.partition_labels()[p], i + 1));
  return labels;
}

// The database writer: the first callback, so a result is committed before anything else
// reacts to it.
class DbWriter final : public MeasureCallback {
public:
  DbWriter(TuningDb& db, int64_t target_id, int64_t run_id)
      : db_(db), target_id_(target_id), run_id_(run_id) {}
  void on_result(const MeasureEvent& e) override {
    if (!e.resumed)
      db_.put_measurement(e.candidate_id, target_id_, run_id_, *e.result);
  }

private:
  TuningDb& db_;
  int64_t target_id_, run_id_;
};

PlanRow plan_row(int64_t run_id, const std::string& kind, const Plan& plan,
                 const PlanSummary& summary, const Evaluation& ev) {
  PlanRow row;
  row.run_id = run_id;
  row.kind = kind;
  row.json = to_json(summary).dump();
  row.predicted_ms = summary.predicted_ms;
  row.measured_ms = summary.measured_ms;
  row.layerwise_predicted_ms = summary.layerwise_predicted_ms;
  row.layerwise_measured_ms = summary.layerwise_measured_ms;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    row.groups.push_back(PlanGroupRow{ev.at(CandidateRef{s.group, s.candidate}).candidate_id,
                                      summary.groups[i].group.first, summary.groups[i].group.last});
  }
  return row;
}

// Runs the whole pipeline once the run row exists.
class Run {
public:
  Run(TuneContext& ctx, const SearchSpace& space, Searcher& searcher, int64_t run_id,
      int64_t target_id, TuneReport& report)
      : ctx_(ctx), exp_(ctx.experiment), space_(space), searcher_(searcher), run_id_(run_id),
        target_id_(target_id), report_(report) {}

  bool execute(); // false when a stop request ended it

private:
  // The report's subgraph tables and runner-ups of the reported plan, under its cost matrix.
  void explain(const Plan& plan, const CostMatrix& cost) {
    report_.subgraphs = summarize_subgraphs(space_, ev_, cost, plan);
    report_.runner_ups = runner_ups(plan, space_, ev_, cost);
    if (report_.plan_check) // a runner-up the check sent back says so
      for (RunnerUp& u : report_.runner_ups) {
        const std::string why = u.verdict == RunnerUpVerdict::kNone
                                    ? ""
                                    : plan_check_verdict(*report_.plan_check, u.candidate);
        if (!why.empty()) {
          u.verdict = RunnerUpVerdict::kChecked;
          u.checked = why;
        } else if (u.verdict == RunnerUpVerdict::kMissed &&
                   plan_check_changed(*report_.plan_check)) {
          // The plan is not the dynamic program's any more: "missed" would blame the searcher.
          u.verdict = RunnerUpVerdict::kChecked;
          u.checked = fmt::format("a plan with it costs {:.4f} ms less by its groups' times "
                                  "alone, but the plan is what the plan check kept of the "
                                  "dynamic program's plan, not that plan",
                                  -u.plan_loss_ms);
        }
      }
  }
  bool stop_requested() const { return ctx_.stop_requested && ctx_.stop_requested->load(); }
  void store_space();
  // State of the measuring phase.
  struct Measuring {
    std::vector<MeasureCallback*> callbacks; // the database writer first
    Clock::time_point t0;
    int done = 0;       // results recorded (resumed ones included)
    int fresh = 0;      // of which measured now
    int dispatched = 0; // jobs submitted (the budget counts these)
    int64_t next_ticket = 1;
    std::map<int64_t, CandidateRef> tickets; // jobs in flight
    std::set<int64_t> in_flight_ids;         // their database candidate ids, and deferred ones
    std::vector<CandidateRef> deferred;      // claimed by another live tuner (claims below)
    int taken = 0;                           // results another tuner measured for this run
  };
  void measure();
  PlanCheck plan_check(const Plan& plan);
  Plan check_in_model(const Plan& plan, const CostMatrix& cost);
  void dispatch(const CandidateRef& ref, MeasurePool& pool, Measuring& m);
  // Claims (search/driver.cpp, "Sharing a database"): tuners on one database measure each
  // candidate once.
  bool out_of_budget(const CandidateRef& ref, Measuring& m);
  bool claim_or_defer(const CandidateRef& ref, Measuring& m);
  void submit(const CandidateRef& ref, MeasurePool& pool, Measuring& m);
  void take_stored(const CandidateRef& ref, Measuring& m);
  bool revisit_deferred(MeasurePool& pool, Measuring& m);
  void wait_for_deferred(MeasurePool& pool, Measuring& m);
  void collect(const MeasureDone& done, Measuring& m);
  void record(const CandidateRef& ref, const MeasureResult& result, bool resumed, int worker,
              const std::string& measured_on, Measuring& m);
  std::optional<StoredMeasurement> stored_measurement(int64_t candidate_id,
                                                      std::string* measured_on);
  std::string budget_exhausted(double elapsed_s, int fresh) const;
  std::vector<MeasuredCandidate> share(int64_t candidate_id, const MeasureResult& result,
                                       bool resumed, const std::string& measured_on);
  MeasureEvent event(const CandidateRef& ref, const MeasureResult& result, bool resumed,
                     int64_t candidate_id, int done, int fresh, Clock::time_point t0) const;

  TuneContext& ctx_;
  const ExperimentConfig& exp_;
  const SearchSpace& space_;
  Searcher& searcher_;
  int64_t run_id_, target_id_;
  TuneReport& report_;
  Evaluation ev_;
  std::unordered_map<int64_t, std::vector<CandidateRef>> refs_by_id_;
  // Measurements with ids above this one count as another tuner's results for this run: the
  // newest id when the run started with options.fresh (older ones are to be measured again),
  // else 0 (any).
  int64_t measured_after_id_ = 0;
  std::optional<model::PaperUnfusedBaseline> paper_; // the paper's baseline (store_space)
};

// The paper's unfused baseline of the space's graph, when it can be built (an unfused graph
// over a limit of core/limits.h is left out, with a note).
std::optional<model::PaperUnfusedBaseline> paper_baseline(const Graph& fused, const Logger& log) {
  try {
    return model::PaperUnfusedBaseline(fused);
  } catch (const UserError& e) {
    log.info(std::string("the paper's unfused baseline is not predicted: ") + e.what());
    return std::nullopt;
  }
}

// Records the paper's unfused baseline of a workload (the group `g` of the space).
void put_paper_baseline(TuningDb& db, const Predictor& predictor,
                        const model::PaperUnfusedBaseline& paper, const Group& g,
                        int64_t workload_id, const model::LowerBound& bound) {
  Candidate c;
  c.strategy = Strategy::kLayerwise;
  c.group = paper.unfused_group(g);
  const model::Prediction p = predictor.predict(paper.graph(), c);
  db.put_baseline_prediction(workload_id, predictor.gpu_name(), predictor.version(),
                             model::baseline_name(model::BaselineKind::kPaperUnfused),
                             prediction_row(p, bound), p.launches);
}

// The paper's baseline of the whole model: every layer's passes, each layer alone (as the
// layerwise baseline adds its layers up).
double paper_layerwise_ms(const Predictor& predictor, const model::PaperUnfusedBaseline& paper,
                          int layers) {
  double total = 0;
  Candidate c;
  c.strategy = Strategy::kLayerwise;
  for (int id = paper.graph().num_inputs(); id < layers; ++id) {
    c.group = paper.unfused_group({id, id});
    total += predictor.predict(paper.graph(), c).time_ms;
  }
  return total;
}

void Run::store_space() {
  const std::vector<std::string> labels = group_labels(space_);
  TuningDb& db = *ctx_.db;
  paper_ = paper_baseline(space_.graph(), ctx_.log);
  const std::optional<model::PaperUnfusedBaseline>& paper = paper_;
  db.in_transaction([&] {
    std::unordered_map<std::string, int64_t> workloads;
    std::unordered_map<int64_t, bool> predicted;
    for (size_t g = 0; g < space_.groups().size(); ++g) {
      const GroupEntry& e = space_.groups()[g];
      GroupEval& ge = ev_.groups[g];
      auto [it, fresh] = workloads.try_emplace(e.signature, 0);
      if (fresh) {
        int64_t macs = 0;
        for (int id = e.group.first; id <= e.group.last; ++id)
          macs += space_.graph().layer(id).macs;
        it->second = db.workload_id(WorkloadInfo{e.signature, e.group.size(), e.description, macs});
        if (paper)
          put_paper_baseline(db, *ctx_.predictor, *paper, e.group, it->second, ge.lower_bound);
      }
      ge.workload_id = it->second;
      db.add_run_group(run_id_, ge.workload_id, e.group.first, e.group.last, e.layer_names,
                       labels[g]);
      for (size_t i = 0; i < e.candidates.size(); ++i) {
        CandidateEval& ce = ge.candidates[i];
        ce.candidate_id = db.candidate_id(ge.workload_id, e.candidates[i]);
        refs_by_id_[ce.candidate_id].push_back(
            CandidateRef{static_cast<int>(g), static_cast<int>(i)});
        if (predicted.emplace(ce.candidate_id, true).second)
          db.put_prediction(ce.candidate_id, ctx_.predictor->gpu_name(), ctx_.predictor->version(),
                            prediction_row(ce.prediction, ge.lower_bound));
      }
    }
  });
}

std::string Run::budget_exhausted(double elapsed_s, int fresh) const {
  const MeasurementConfig& m = exp_.measurement;
  if (m.budget_s > 0 && elapsed_s >= m.budget_s)
    return fmt::format("the time budget (measurement.budget_s = {} s)", m.budget_s);
  if (m.max_measurements > 0 && fresh >= m.max_measurements)
    return fmt::format("the measurement limit (measurement.max_measurements = {})",
                       m.max_measurements);
  return "";
}

// What the database already has of a candidate: its latest measurement on this target (unless
// options.fresh), else, with options.use_other_targets, on another one (`measured_on` is then
// set to that target's fingerprint).
std::optional<StoredMeasurement> Run::stored_measurement(int64_t candidate_id,
                                                         std::string* measured_on) {
  std::optional<StoredMeasurement> prior;
  if (!ctx_.options.fresh)
    prior = ctx_.db->find_measurement(candidate_id, target_id_);
  if (!prior && ctx_.options.use_other_targets) {
    if (auto other = ctx_.db->find_measurement_on_other_targets(candidate_id, target_id_)) {
      prior = std::move(other->measurement);
      *measured_on = other->target_fingerprint;
    }
  }
  return prior;
}

// The result belongs to the workload: every group with the same signature shares it. Returns
// what the searcher is told.
std::vector<MeasuredCandidate> Run::share(int64_t candidate_id, const MeasureResult& result,
                                          bool resumed, const std::string& measured_on) {
  std::vector<MeasuredCandidate> outcome;
  const double ms = result.status == MeasureStatus::kOk ? result.median_ms : kExcluded;
  for (const CandidateRef& r : refs_by_id_.at(candidate_id)) {
    CandidateEval& other = ev_.at(r);
    other.measurement = result;
    other.resumed = resumed;
    other.measured_on = measured_on;
    outcome.push_back(MeasuredCandidate{r, ms});
  }
  return outcome;
}

MeasureEvent Run::event(const CandidateRef& ref, const MeasureResult& result, bool resumed,
                        int64_t candidate_id, int done, int fresh, Clock::time_point t0) const {
  MeasureEvent ev;
  ev.ref = ref;
  ev.candidate = &space_.candidate(ref);
  ev.group = &space_.group(ref.group);
  ev.result = &result;
  ev.resumed = resumed;
  ev.candidate_id = candidate_id;
  ev.done = done;
  ev.fresh = fresh;
  ev.queued = done + searcher_.queued();
  ev.elapsed_s = seconds_since(t0);
  ev.budget_s = exp_.measurement.budget_s;
  return ev;
}

// Dispatches one proposed candidate: resumed from the database, skipped (budget spent),
// covered by the same workload already in flight, or submitted to the pool.
void Run::dispatch(const CandidateRef& ref, MeasurePool& pool, Measuring& m) {
  CandidateEval& ce = ev_.at(ref);
  const Candidate& cand = space_.candidate(ref);
  // The searcher skips what it was told; a workload measured twice in one run would be a bug
  // (and a UNIQUE violation in the database).
  BRICKDL_CHECK(!ce.measurement, "candidate proposed twice: " << cand.config_str());
  if (m.in_flight_ids.count(ce.candidate_id))
    return; // its result is shared with this group too (share()), which notifies it

  std::string measured_on = report_.target;
  if (std::optional<StoredMeasurement> prior = stored_measurement(ce.candidate_id, &measured_on)) {
    record(ref, prior->result, /*resumed=*/true, /*worker=*/0, measured_on, m);
    return;
  }
  if (out_of_budget(ref, m) || !claim_or_defer(ref, m))
    return;
  submit(ref, pool, m);
}

// Out of budget: the searcher is told the candidate is not measured, and the run keeps going
// only through what the database already has.
bool Run::out_of_budget(const CandidateRef& ref, Measuring& m) {
  const std::string why = budget_exhausted(seconds_since(m.t0), m.dispatched);
  if (why.empty())
    return false;
  report_.stopped_by = why;
  searcher_.notify({MeasuredCandidate{ref, kNotMeasured}});
  return true;
}

void Run::submit(const CandidateRef& ref, MeasurePool& pool, Measuring& m) {
  const MeasureJob job{m.next_ticket++, ref, &space_.graph(), &space_.candidate(ref),
                       exp_.measurement.options};
  m.tickets.emplace(job.ticket, ref);
  m.in_flight_ids.insert(ev_.at(ref).candidate_id);
  ++m.dispatched;
  pool.submit(job);
}

// ---- Sharing a database: claims ---------------------------------------------------------
//
// Before a candidate is measured, the run claims it in the database (TuningDb::claim). A
// candidate another live tuner holds is deferred: the run measures other candidates, and when
// nothing else is left it polls the deferred ones until that tuner's measurement appears
// (taken as a resumed result) or its claim dies with it (taken over and measured here).

// True when the candidate is this run's to measure now.
bool Run::claim_or_defer(const CandidateRef& ref, Measuring& m) {
  const int64_t id = ev_.at(ref).candidate_id;
  const ClaimResult claim = ctx_.db->claim(id, target_id_, run_id_, measured_after_id_);
  if (claim.outcome == ClaimResult::kMeasured) {
    take_stored(ref, m);
    return false;
  }
  if (claim.outcome == ClaimResult::kHeld) {
    m.deferred.push_back(ref);
    m.in_flight_ids.insert(id); // its other groups wait for the same result
    return false;
  }
  if (claim.holder_run_id != 0) {
    ctx_.log.info(fmt::format("taking over {} from run {}, whose tuner is gone",
                              space_.candidate(ref).config_str(), claim.holder_run_id));
  }
  return true;
}

// Another tuner's measurement of the candidate, recorded as resumed.
void Run::take_stored(const CandidateRef& ref, Measuring& m) {
  const int64_t id = ev_.at(ref).candidate_id;
  std::optional<StoredMeasurement> stored = ctx_.db->find_measurement(id, target_id_);
  BRICKDL_CHECK(stored && stored->id > measured_after_id_, "claim saw a measurement of " << id);
  m.in_flight_ids.erase(id);
  ++m.taken;
  record(ref, stored->result, /*resumed=*/true, /*worker=*/0, report_.target, m);
}

// Claims the deferred candidates again while the pool has room; returns whether any moved on
// (taken from the database, submitted, or dropped for the budget).
bool Run::revisit_deferred(MeasurePool& pool, Measuring& m) {
  bool moved = false;
  std::vector<CandidateRef> still;
  for (const CandidateRef& ref : m.deferred) {
    const int64_t id = ev_.at(ref).candidate_id;
    if (pool.in_flight() >= pool.slots() || stop_requested()) {
      still.push_back(ref);
      continue;
    }
    const ClaimResult claim = ctx_.db->claim(id, target_id_, run_id_, measured_after_id_);
    if (claim.outcome == ClaimResult::kHeld) {
      still.push_back(ref);
      continue;
    }
    moved = true;
    m.in_flight_ids.erase(id);
    if (claim.outcome == ClaimResult::kMeasured) {
      take_stored(ref, m);
    } else if (!out_of_budget(ref, m)) {
      ctx_.log.info(fmt::format("measuring {}: the tuner that claimed it is gone",
                                space_.candidate(ref).config_str()));
      submit(ref, pool, m);
    }
  }
  m.deferred = std::move(still);
  return moved;
}

// Nothing in flight and nothing else to propose: poll the deferred candidates.
void Run::wait_for_deferred(MeasurePool& pool, Measuring& m) {
  constexpr auto kPoll = std::chrono::milliseconds(200);
  while (!stop_requested() && !m.deferred.empty() && pool.in_flight() == 0) {
    if (revisit_deferred(pool, m))
      return;
    std::this_thread::sleep_for(kPoll);
  }
}

// A finished job: its result recorded like any other.
void Run::collect(const MeasureDone& done, Measuring& m) {
  const auto it = m.tickets.find(done.ticket);
  BRICKDL_CHECK(it != m.tickets.end(), "a result for unknown job " << done.ticket);
  const CandidateRef ref = it->second;
  m.tickets.erase(it);
  m.in_flight_ids.erase(ev_.at(ref).candidate_id);
  ++m.fresh;
  record(ref, done.result, /*resumed=*/false, done.worker, report_.target, m);
}

// Counts a result, shares it with every group of the same workload, tells the callbacks
// (the database writer first) and then the searcher.
void Run::record(const CandidateRef& ref, const MeasureResult& result, bool resumed, int worker,
                 const std::string& measured_on, Measuring& m) {
  const int64_t candidate_id = ev_.at(ref).candidate_id;
  ++m.done;
  (resumed ? report_.resumed : report_.measured) += 1;
  if (result.status != MeasureStatus::kOk)
    ++report_.failed;
  const std::vector<MeasuredCandidate> outcome = share(candidate_id, result, resumed, measured_on);
  MeasureEvent ev = event(ref, result, resumed, candidate_id, m.done, m.fresh, m.t0);
  ev.worker = worker;
  ev.queued += static_cast<int>(m.tickets.size()); // in flight on workers
  for (auto* cb : m.callbacks)
    cb->on_result(ev);
  searcher_.notify(outcome);
}

// The measuring loop: keeps the pool's slots busy with what the searcher proposes and takes
// results in the order they finish. In process (LocalPool, one slot) this is propose →
// measure → record, one candidate at a time.
void Run::measure() {
  std::optional<LocalPool> local;
  MeasurePool& pool = ctx_.pool ? *ctx_.pool : local.emplace(*ctx_.measurer);
  DbWriter writer(*ctx_.db, target_id_, run_id_);
  Measuring m;
  m.callbacks.push_back(&writer);
  m.callbacks.insert(m.callbacks.end(), ctx_.callbacks.begin(), ctx_.callbacks.end());
  for (auto* cb : m.callbacks)
    cb->on_phase_begin("measure");

  m.t0 = Clock::now();
  measured_after_id_ = ctx_.options.fresh ? ctx_.db->latest_measurement_id() : 0;
  while (!stop_requested()) {
    while (pool.in_flight() < pool.slots() && !stop_requested()) {
      const std::vector<CandidateRef> batch = searcher_.propose(1);
      if (batch.empty())
        break; // done, or the next round waits for results in flight
      dispatch(batch[0], pool, m);
    }
    if (pool.in_flight() == 0 && !m.deferred.empty()) {
      wait_for_deferred(pool, m); // another tuner is measuring what is left
      continue;
    }
    if (pool.in_flight() == 0) {
      BRICKDL_CHECK(stop_requested() || searcher_.pending() == 0,
                    "proposed candidates neither measured nor in flight: " << searcher_.pending());
      break;
    }
    const std::optional<MeasureDone> done = pool.next(ctx_.stop_requested);
    if (!done)
      break; // a stop request: what is still in flight is dropped
    collect(*done, m);
    if (!m.deferred.empty())
      revisit_deferred(pool, m);
  }
  if (m.taken > 0)
    ctx_.log.info(fmt::format("{} candidates were measured by another tuner on this database "
                              "and taken from it",
                              m.taken));
  report_.dropped = pool.in_flight();
  report_.measure_s = seconds_since(m.t0);
  report_.workers = pool.workers();
  for (auto* cb : m.callbacks)
    cb->on_phase_end();
}

// The CPU plan timed inside the whole model against its layerwise baseline
// (search/plan_check.h). A check that cannot run (a candidate taken from another target's
// measurements that this executor cannot run, memory) leaves the plan unchecked, and says so:
// what was measured stays.
PlanCheck Run::plan_check(const Plan& plan) {
  try {
    const std::unique_ptr<PlanTimer> timer =
        make_cpu_plan_timer(space_.graph(), exp_.measurement.cpu_threads, ctx_.seed);
    PlanCheckOptions options;
    options.stop = ctx_.stop_requested;
    return check_plan(space_, plan, *timer, options);
  } catch (const std::exception& e) {
    PlanCheck check;
    check.error = e.what();
    return check;
  }
}

// The plan check's verdict replaces the plan; a loss is a warning.
Plan Run::check_in_model(const Plan& plan, const CostMatrix& cost) {
  ctx_.log.info("plan check: timing the plan's merged groups inside the whole model against "
                "layerwise");
  PlanCheck check = plan_check(plan);
  Plan checked = checked_plan(space_, plan, check, cost);
  if (!check.error.empty())
    ctx_.log.warn("plan check: could not run: " + check.error + "; the plan is unchecked");
  else if (check.interrupted)
    ctx_.log.warn("plan check: interrupted by a stop request; the plan is unchecked");
  else if (check.fell_back)
    ctx_.log.warn(fmt::format("plan check: the plan ran no faster end to end than layerwise "
                              "({} of {} merged groups kept after the per-group check); the plan "
                              "is the layerwise plan",
                              check.merged_groups - check.reverted, check.merged_groups));
  else if (check.reverted > 0)
    ctx_.log.warn(fmt::format("plan check: {} of {} merged group(s) ran no faster inside the "
                              "model than their layers layerwise; they run layerwise",
                              check.reverted, check.merged_groups));
  report_.plan_check = std::move(check);
  return checked;
}

bool Run::execute() {
  const auto t0 = Clock::now();
  ev_ = evaluate(space_, *ctx_.predictor);
  report_.groups = static_cast<int64_t>(space_.groups().size());
  report_.enumerated = space_.enumerated();
  report_.candidates = space_.num_candidates();
  report_.feasible = ev_.feasible_count();
  report_.structural = space_.pruned();
  report_.infeasible = ev_.infeasible;
  ctx_.log.info(fmt::format("model: {} groups, {} candidates, {} feasible ({} model calls, "
                            "{:.2f} s)",
                            report_.groups, report_.candidates, report_.feasible, ev_.model_calls,
                            seconds_since(t0)));
  store_space();

  const CostMatrix predicted = ev_.predicted_costs();
  searcher_.init(space_, predicted);
  const Plan model_plan = searcher_.plan(predicted);
  if (!model_plan.valid())
    throw UserError(fmt::format("experiment '{}': no plan: {}", exp_.name, model_plan.note));
  report_.predicted = summarize(model_plan, space_, ev_);
  if (paper_)
    report_.paper_layerwise_predicted_ms =
        paper_layerwise_ms(*ctx_.predictor, *paper_, space_.graph().size());
  ctx_.db->put_plan(plan_row(run_id_, "predicted", model_plan, report_.predicted, ev_));
  if (stop_requested())
    return false;

  if (ctx_.validate_only && ctx_.measurer) // no GPU for a GPU target: check, do not time
    report_.validation =
        validate_plan(ctx_, space_, ev_, model_plan, run_id_, target_id_, report_.target);
  if ((ctx_.measurer || ctx_.pool) && !ctx_.validate_only) {
    measure();
    // CPU times under a GPU model: only measured merged candidates may enter the plan.
    const CombinedCosts combined =
        combine_costs(space_, predicted, ev_.measured_costs(), report_.backend == "cpu");
    report_.scale = combined.scale;
    Plan final_plan = searcher_.plan(combined.cost);
    BRICKDL_CHECK(final_plan.valid(), "no plan after measuring: " << final_plan.note);
    if (report_.backend == "cpu" && exp_.measurement.plan_check && !stop_requested())
      final_plan = check_in_model(final_plan, combined.cost);
    report_.replanned = summarize(final_plan, space_, ev_);
    ctx_.db->put_plan(plan_row(run_id_, "measured", final_plan, *report_.replanned, ev_));
    explain(final_plan, combined.cost);
    for (const Plan& a : searcher_.alternatives(combined.cost)) {
      report_.alternatives.push_back(a.valid() ? summarize(a, space_, ev_) : PlanSummary{});
      report_.alternatives.back().label = a.label;
    }
  } else {
    explain(model_plan, predicted);
    for (const Plan& a : searcher_.alternatives(predicted)) {
      report_.alternatives.push_back(a.valid() ? summarize(a, space_, ev_) : PlanSummary{});
      report_.alternatives.back().label = a.label;
    }
  }
  return !stop_requested();
}

} // namespace

namespace {

// `name` must be one of a registry's `valid` names; else a UserError where it was given.
void check_registered(const std::string& name, const std::vector<std::string>& valid,
                      SourceLocation where, const std::string& file, const char* key,
                      const char* what) {
  if (std::find(valid.begin(), valid.end(), name) != valid.end())
    return;
  if (where.key.empty())
    where = SourceLocation{file, 0, 0, key};
  throw UserError(where, std::string("unknown ") + what + " '" + name + "'" +
                             did_you_mean(name, valid) + "; valid: " + join_names(valid));
}

SearcherOptions searcher_options(const ExperimentConfig& exp, const SearchSpace& space,
                                 uint64_t seed) {
  SearcherOptions so;
  so.name = space.partitions().empty() ? exp.search.searcher : "partitions";
  if (so.name == "partitions" && space.partitions().empty())
    throw UserError(exp.search.searcher_at.key.empty()
                        ? SourceLocation{exp.file, 0, 0, "search.searcher"}
                        : exp.search.searcher_at,
                    "searcher 'partitions' evaluates the partitions listed in "
                    "search.partitions, and the experiment lists none");
  so.top_k = exp.measurement.top_k;
  so.random_samples = exp.search.random_samples;
  so.seed = seed;
  return so;
}

// What the report says of the run before it starts: experiment, model, target, searcher.
TuneReport report_header(const TuneContext& ctx, const std::string& searcher) {
  const ExperimentConfig& exp = ctx.experiment;
  TuneReport rep;
  rep.experiment = exp.name;
  rep.model = exp.model;
  rep.batch = exp.batch;
  rep.precision = dtype_name(exp.precision);
  rep.gpu_spec = ctx.predictor->gpu_name();
  rep.model_version = ctx.predictor->version();
  if (exp.calibration)
    rep.calibration = exp.calibration->summary();
  if (ctx.pool) {
    rep.backend = ctx.pool->backend();
    rep.target = ctx.pool->target();
  } else {
    rep.backend = ctx.measurer ? ctx.measurer->backend() : "none";
    rep.target = ctx.measurer ? ctx.measurer->target() : "model:" + rep.gpu_spec;
  }
  rep.searcher = searcher;
  return rep;
}

RunInfo run_info(const TuneContext& ctx, const TuneReport& rep) {
  const ExperimentConfig& exp = ctx.experiment;
  RunInfo info;
  info.experiment = exp.name;
  info.experiment_path = exp.file;
  nlohmann::json config = experiment_json(exp);
  if (ctx.options.fresh) // it measures again what the database has (brickdl-query compare)
    config["fresh"] = true;
  info.config_json = config.dump();
  info.model = exp.model;
  info.batch = exp.batch;
  info.precision = rep.precision;
  info.gpu_spec = rep.gpu_spec;
  info.target_fingerprint = rep.target;
  info.backend = rep.backend;
  info.git_revision = brickdl::git_revision();
  return info;
}

} // namespace

void check_names(const ExperimentConfig& exp) {
  check_registered(exp.search.searcher, searcher_names(), exp.search.searcher_at, exp.file,
                   "search.searcher", "searcher");
  check_registered(exp.measurement.backend, backend_names(), exp.measurement.backend_at, exp.file,
                   "measurement.backend", "backend");
}

void check_precision(const ExperimentConfig& exp) {
  // Refused where the backend was chosen, else (the default backend) where the precision was.
  SourceLocation where = exp.measurement.backend_at;
  if (where.key.empty())
    where = exp.precision_at;
  if (where.key.empty())
    where = SourceLocation{exp.file, 0, 0, "measurement.backend"};
  check_backend_precision(exp.measurement.backend, exp.precision, where);
}

void check_experiment(const ExperimentConfig& exp) {
  check_names(exp);
  check_precision(exp);
  const SearchSpace space = SearchSpace::build(fuse_for_inference(exp.graph), exp.search, exp.file);
  make_searcher(searcher_options(exp, space, exp.seed));
}

TuneResult tune(TuneContext& ctx) {
  BRICKDL_CHECK(ctx.predictor != nullptr && ctx.db != nullptr, "tune() needs a predictor and a db");
  const auto t0 = Clock::now();
  const ExperimentConfig& exp = ctx.experiment;

  // Everything that can be wrong with the input is checked before the run row exists.
  check_names(exp);
  check_precision(exp);
  const Graph fused = fuse_for_inference(exp.graph);
  const SearchSpace space = SearchSpace::build(fused, exp.search, exp.file);
  const SearcherOptions so = searcher_options(exp, space, ctx.seed);
  std::unique_ptr<Searcher> searcher = make_searcher(so);
  if (so.name != exp.search.searcher)
    ctx.log.info("search.partitions given: evaluating exactly those partitions");

  TuneResult out;
  TuneReport& rep = out.report;
  rep = report_header(ctx, so.name);
  TuningDb& db = *ctx.db;
  const int64_t target_id = db.target_id(rep.target, rep.backend);
  out.run_id = rep.run_id = db.begin_run(run_info(ctx, rep));
  if (ctx.on_run_started)
    ctx.on_run_started(out.run_id);

  try {
    const RunHeartbeat heartbeat(db, out.run_id); // a sign of life for tuners on other hosts
    Run run(ctx, space, *searcher, out.run_id, target_id, rep);
    out.aborted = !run.execute();
  } catch (...) {
    try {
      db.end_run(out.run_id, "aborted");
    } catch (...) {
      // The original error says more than a failure to record it.
    }
    throw;
  }
  if (out.aborted && rep.stopped_by.empty())
    rep.stopped_by = "a stop request";
  rep.status = out.aborted ? "aborted" : "complete";
  db.end_run(out.run_id, rep.status);
  rep.seconds = seconds_since(t0);
  return out;
}

void write_outputs(const TuneResult& result, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw UserError("cannot create the output folder '" + dir + "': " + ec.message());
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream f(path);
    f << text;
    f.close();
    if (!f)
      throw UserError("cannot write '" + path + "'");
  };
  write("plan.json", report_json(result.report).dump(2) + "\n");
  std::ostringstream os;
  print_report(result.report, os);
  write("report.txt", os.str());
}

} // namespace brickdl::search
