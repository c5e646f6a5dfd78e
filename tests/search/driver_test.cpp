#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/graph_builder.h"
#include "core/group.h"
#include "core/store/tuning_db.h"
#include "search/driver.h"
#include "search/plan.h"
#include "search/plan_check.h"
#include "search/progress.h"
#include "search/searcher.h"
#include "tests/search/test_graphs.h"

namespace brickdl::search {
namespace {

namespace fs = std::filesystem;
using testing::FakePredictor;

// A measurer that runs nothing: time = 10 × a hash-derived value, memoized candidates of
// groups longer than 2 fail to "compile". Counts its calls.
class FakeMeasurer final : public Measurer {
public:
  explicit FakeMeasurer(std::string target = "cpu:fake") : target_(std::move(target)) {}
  std::string target() const override { return target_; }
  std::string backend() const override { return "cpu"; }
  MeasureResult measure(const Graph& g, const Candidate& c, const MeasureOptions&) override {
    ++calls;
    measured.push_back(workload_signature(g, c.group) + "#" + c.config_str());
    MeasureResult r;
    if (c.strategy == Strategy::kMemoized && c.group.size() > 2) {
      r.status = MeasureStatus::kCompileError;
      r.error = "fake: too long";
      return r;
    }
    const double t =
        1.0 + static_cast<double>(std::hash<std::string>{}(measured.back()) % 1000) / 100.0;
    r.samples_ms = {t, t * 1.1, t * 0.9};
    r.summarize();
    r.counters["flops"] = 42;
    return r;
  }
  int calls = 0;
  std::vector<std::string> measured;

private:
  std::string target_;
};

// Two identical residual blocks and a conv: repeated workloads share measurements.
Graph two_block_graph() {
  GraphBuilder b("blocks", TensorShape{1, 8, 1, 16, 16, 2});
  int x = b.input();
  for (int i = 0; i < 2; ++i) {
    const int y = b.relu(b.conv2d(x, 8, 3, 1, 1));
    x = b.relu(b.add(b.conv2d(y, 8, 3, 1, 1), x));
  }
  b.conv2d(x, 8, 1);
  return b.build();
}

ExperimentConfig experiment(const Graph& g) {
  ExperimentConfig e;
  e.name = "unit";
  e.model = "custom";
  e.graph = g;
  e.gpu.name = "FakeGPU";
  e.search.brick_sizes = {4, 8};
  e.search.max_group_len = 3;
  e.measurement.top_k = 2;
  // The fake measurer's times are not what the plan executor runs: the in-plan check
  // (search/plan_check.h) would re-time its plans for real. It has tests of its own, below.
  e.measurement.plan_check = false;
  return e;
}

class DriverTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("brickdl_driver_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_path_ = (dir_ / "t.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  TuneResult run(const ExperimentConfig& e, Measurer* m, TuneOptions o = {},
                 std::vector<MeasureCallback*> cbs = {}, const std::atomic<bool>* stop = nullptr) {
    TuningDb db(db_path_);
    TuneContext ctx;
    ctx.experiment = e;
    ctx.predictor = &model_;
    ctx.measurer = m;
    ctx.db = &db;
    ctx.options = o;
    ctx.callbacks = std::move(cbs);
    ctx.stop_requested = stop;
    return tune(ctx);
  }

  TuneResult run_pool(const ExperimentConfig& e, MeasurePool* pool,
                      std::vector<MeasureCallback*> cbs = {},
                      const std::atomic<bool>* stop = nullptr) {
    TuningDb db(db_path_);
    TuneContext ctx;
    ctx.experiment = e;
    ctx.predictor = &model_;
    ctx.pool = pool;
    ctx.db = &db;
    ctx.callbacks = std::move(cbs);
    ctx.stop_requested = stop;
    return tune(ctx);
  }

  // Every measurement of the database as "signature#config status", sorted.
  std::multiset<std::string> measured_rows() {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(db_path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    const char* sql =
        "SELECT w.signature, c.strategy || ' ' || c.bd || 'x' || c.bh || 'x' || c.bw || "
        "' cb' || c.cb || ' bn' || c.bn || ' t' || c.threads, m.status FROM "
        "measurements m JOIN candidates c ON c.id = m.candidate_id JOIN workloads w "
        "ON w.id = c.workload_id";
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK);
    std::multiset<std::string> rows;
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < 3; ++i)
        row +=
            std::string(i ? " " : "") + reinterpret_cast<const char*>(sqlite3_column_text(st, i));
      rows.insert(row);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rows;
  }

  int64_t count(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(db_path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    int64_t n = -1;
    if (sqlite3_step(st) == SQLITE_ROW)
      n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
  }

  fs::path dir_;
  std::string db_path_;
  FakePredictor model_{5, 0, 7};
};

TEST_F(DriverTest, ModelOnlyStoresPredictionsAndThePlan) {
  const ExperimentConfig e = experiment(two_block_graph());
  const TuneResult r = run(e, nullptr);
  EXPECT_FALSE(r.aborted);
  EXPECT_EQ(r.report.status, "complete");
  EXPECT_EQ(r.report.target, "model:FakeGPU");
  EXPECT_FALSE(r.report.replanned.has_value());
  // One prediction per distinct candidate row; the two blocks share their workloads.
  const int64_t candidates = count("SELECT COUNT(*) FROM candidates");
  EXPECT_EQ(count("SELECT COUNT(*) FROM predictions"), candidates);
  EXPECT_LT(candidates, r.report.candidates);
  EXPECT_EQ(count("SELECT COUNT(*) FROM run_groups"), r.report.groups);
  EXPECT_EQ(count("SELECT COUNT(*) FROM plans WHERE kind = 'predicted'"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM runs WHERE status = 'complete'"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM measurements"), 0);
  // The reported plan is the dynamic program's over the model's predictions.
  const SearchSpace sp = SearchSpace::build(fuse_for_inference(e.graph), e.search);
  const Plan dp = dp_plan(sp, evaluate(sp, model_).predicted_costs());
  ASSERT_EQ(r.report.predicted.groups.size(), dp.steps.size());
  EXPECT_DOUBLE_EQ(r.report.predicted.predicted_ms, dp.cost_ms);
  EXPECT_EQ(count("SELECT COUNT(*) FROM plan_groups"), static_cast<int64_t>(dp.steps.size()));
  // Infeasible candidates are counted with their reason.
  int64_t infeasible = 0;
  for (const auto& [reason, tally] : r.report.infeasible)
    if (reason == "fake: too much shared memory")
      infeasible = tally.count;
  EXPECT_EQ(infeasible, r.report.candidates - r.report.feasible);
  EXPECT_GT(infeasible, 0);
}

TEST_F(DriverTest, MeasuresResumesAndKeepsTargetsApart) {
  const ExperimentConfig e = experiment(two_block_graph());
  FakeMeasurer m;
  const TuneResult first = run(e, &m);
  ASSERT_GT(m.calls, 0);
  EXPECT_EQ(first.report.measured, m.calls);
  EXPECT_EQ(first.report.resumed, 0);
  ASSERT_TRUE(first.report.replanned.has_value());
  // A workload is measured once: shared blocks are not measured twice.
  EXPECT_EQ(std::set<std::string>(m.measured.begin(), m.measured.end()).size(), m.measured.size());
  EXPECT_EQ(count("SELECT COUNT(*) FROM measurements"), m.calls);
  EXPECT_EQ(count("SELECT COUNT(*) FROM samples"), 3 * count("SELECT COUNT(*) FROM measurements "
                                                             "WHERE status = 'ok'"));
  EXPECT_EQ(count("SELECT COUNT(*) FROM plans WHERE kind = 'measured'"), 1);
  EXPECT_GT(count("SELECT COUNT(*) FROM measurements WHERE status = 'compile_error'"), 0);
  // The layerwise baseline of every layer was measured, so measured totals exist.
  ASSERT_TRUE(first.report.replanned->layerwise_measured_ms.has_value());

  // Same database, same target: nothing is measured again.
  FakeMeasurer again;
  const TuneResult second = run(e, &again);
  EXPECT_EQ(again.calls, 0);
  EXPECT_EQ(second.report.resumed, first.report.measured);
  EXPECT_DOUBLE_EQ(*second.report.replanned->layerwise_measured_ms,
                   *first.report.replanned->layerwise_measured_ms);
  EXPECT_EQ(count("SELECT COUNT(*) FROM measurements"), m.calls);

  // --fresh measures again (a new run's rows).
  FakeMeasurer fresh;
  TuneOptions o;
  o.fresh = true;
  run(e, &fresh, o);
  EXPECT_EQ(fresh.calls, m.calls);

  // Another target does not reuse them, unless asked.
  FakeMeasurer other("cpu:other");
  run(e, &other, TuneOptions{false, true});
  EXPECT_EQ(other.calls, 0);
  FakeMeasurer other2("cpu:other");
  run(e, &other2);
  EXPECT_EQ(other2.calls, m.calls);
  // Per target and run, one row per candidate.
  EXPECT_EQ(count("SELECT COUNT(*) FROM (SELECT candidate_id, target_id, run_id, COUNT(*) AS n "
                  "FROM measurements GROUP BY 1, 2, 3 HAVING n > 1)"),
            0);
}

TEST_F(DriverTest, BudgetStopsMeasuringAndResumeContinues) {
  ExperimentConfig e = experiment(two_block_graph());
  e.measurement.max_measurements = 3;
  FakeMeasurer m;
  const TuneResult r = run(e, &m);
  EXPECT_EQ(m.calls, 3);
  EXPECT_NE(r.report.stopped_by.find("max_measurements = 3"), std::string::npos)
      << r.report.stopped_by;
  EXPECT_EQ(r.report.status, "complete");
  ASSERT_TRUE(r.report.replanned.has_value()); // re-planned with what it has
  // The next run takes those 3 from the database and measures 3 more.
  FakeMeasurer m2;
  const TuneResult r2 = run(e, &m2);
  EXPECT_EQ(m2.calls, 3);
  EXPECT_EQ(r2.report.resumed, 3);
  std::set<std::string> all(m.measured.begin(), m.measured.end());
  all.insert(m2.measured.begin(), m2.measured.end());
  EXPECT_EQ(all.size(), 6u);
}

// Stops after two results, as Ctrl-C would.
class StopAfter final : public MeasureCallback {
public:
  StopAfter(std::atomic<bool>* flag, int n) : flag_(flag), n_(n) {}
  void on_result(const MeasureEvent& e) override {
    if (e.done >= n_)
      *flag_ = true;
  }

private:
  std::atomic<bool>* flag_;
  int n_;
};

TEST_F(DriverTest, StopRequestAbortsAndKeepsResults) {
  const ExperimentConfig e = experiment(two_block_graph());
  std::atomic<bool> stop{false};
  StopAfter cb(&stop, 2);
  FakeMeasurer m;
  const TuneResult r = run(e, &m, {}, {&cb}, &stop);
  EXPECT_TRUE(r.aborted);
  EXPECT_EQ(r.report.status, "aborted");
  EXPECT_EQ(m.calls, 2);
  EXPECT_EQ(count("SELECT COUNT(*) FROM runs WHERE status = 'aborted'"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM measurements"), 2);
}

TEST_F(DriverTest, ProgressEventsCountUp) {
  class Recorder final : public MeasureCallback {
  public:
    void on_result(const MeasureEvent& e) override {
      done.push_back(e.done);
      EXPECT_GE(e.queued, e.done);
      EXPECT_NE(e.result, nullptr);
    }
    std::vector<int> done;
  } rec;
  FakeMeasurer m;
  run(experiment(two_block_graph()), &m, {}, {&rec});
  ASSERT_EQ(static_cast<int>(rec.done.size()), m.calls);
  for (size_t i = 0; i < rec.done.size(); ++i)
    EXPECT_EQ(rec.done[i], static_cast<int>(i) + 1);
}

TEST_F(DriverTest, WritesPlanJsonAndReport) {
  FakeMeasurer m;
  const TuneResult r = run(experiment(two_block_graph()), &m);
  const fs::path out = dir_ / "out";
  write_outputs(r, out.string());
  std::ifstream f(out / "plan.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["experiment"], "unit");
  EXPECT_EQ(j["run_id"], r.run_id);
  const auto& groups = j["plan"]["groups"];
  ASSERT_EQ(groups.size(), r.report.replanned->groups.size());
  int covered = 0;
  for (const auto& g : groups)
    covered += g["last_layer"].get<int>() - g["first_layer"].get<int>() + 1;
  EXPECT_EQ(covered, fuse_for_inference(two_block_graph()).size() - 1);
  std::ifstream t(out / "report.txt");
  const std::string text((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("pred ms"), std::string::npos);
  EXPECT_NE(text.find("end to end (model)"), std::string::npos);
}

// Merged candidates measured 100x faster than layerwise: the re-planned plan merges where it
// can, and a CPU run checks it inside the whole model (real runs of the plan executor, so the
// verdicts are not known here; what they must agree with is).
TEST_F(DriverTest, ACpuPlanIsCheckedInsideTheModelAndTheReportSaysSo) {
  class MergedFast final : public Measurer {
  public:
    std::string target() const override { return "cpu:fake"; }
    std::string backend() const override { return "cpu"; }
    MeasureResult measure(const Graph&, const Candidate& c, const MeasureOptions&) override {
      MeasureResult r;
      const double t = c.strategy == Strategy::kLayerwise ? 1.0 : 0.01;
      r.samples_ms = {t, t, t};
      r.summarize();
      return r;
    }
  } m;
  ExperimentConfig e = experiment(two_block_graph());
  e.measurement.cpu_threads = 2;
  auto merged_in = [](const PlanSummary& p) {
    int n = 0;
    for (const PlanGroupSummary& g : p.groups)
      n += g.candidate.strategy == Strategy::kLayerwise ? 0 : 1;
    return n;
  };
  // Unchecked, for comparison.
  const TuneResult unchecked = run(e, &m);
  EXPECT_FALSE(unchecked.report.plan_check.has_value());
  const int merged = merged_in(*unchecked.report.replanned);
  ASSERT_GT(merged, 0);

  e.measurement.plan_check = true;
  const TuneResult r = run(e, &m);
  ASSERT_TRUE(r.report.plan_check.has_value());
  const PlanCheck& c = *r.report.plan_check;
  EXPECT_EQ(c.merged_groups, merged);
  ASSERT_EQ(c.groups.size(), static_cast<size_t>(merged));
  int kept = 0;
  for (const PlanCheckGroup& g : c.groups) {
    EXPECT_GE(g.merged_ms.size(), 3u);
    EXPECT_EQ(g.merged_ms.size(), g.layerwise_ms.size());
    kept += g.kept ? 1 : 0;
  }
  EXPECT_EQ(kept + c.reverted, merged);
  EXPECT_EQ(merged_in(*r.report.replanned),
            c.fell_back ? 0 : static_cast<int>(c.kept_steps.size()));
  EXPECT_EQ(static_cast<int>(c.kept_steps.size()), c.fell_back ? 0 : kept);
  EXPECT_NE(c.how.find("2 pinned threads"), std::string::npos);
  // The database's measured plan is the checked one.
  EXPECT_EQ(count("SELECT COUNT(*) FROM plan_groups pg JOIN plans p ON p.id = pg.plan_id "
                  "WHERE p.kind = 'measured' AND p.run_id = " +
                  std::to_string(r.run_id)),
            static_cast<int64_t>(r.report.replanned->groups.size()));
  const fs::path out = dir_ / "out";
  write_outputs(r, out.string());
  std::ifstream f(out / "plan.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["plan_check"]["merged_groups"], merged);
  EXPECT_EQ(j["plan_check"]["groups"].size(), static_cast<size_t>(merged));
  std::ifstream t(out / "report.txt");
  const std::string text((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("plan check (plan executor, 2 pinned threads"), std::string::npos) << text;
}

TEST_F(DriverTest, BatchBlocksReachTheDatabaseAndTheRunsConfiguration) {
  GraphBuilder b("batch4", TensorShape{4, 8, 1, 16, 16, 2});
  b.relu(b.conv2d(b.relu(b.conv2d(b.input(), 8, 3, 1, 1)), 8, 3, 1, 1));
  ExperimentConfig e = experiment(b.build());
  e.batch = 4;
  e.search.batch_blocks = {1, 2, 8}; // 8 acts as the batch, 4
  run(e, nullptr);
  const int64_t merged = count("SELECT COUNT(*) FROM candidates WHERE bn = 1 AND "
                               "strategy <> 'layerwise'");
  EXPECT_GT(merged, 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM candidates WHERE bn = 2"), merged);
  EXPECT_EQ(count("SELECT COUNT(*) FROM candidates WHERE bn = 4"), merged);
  EXPECT_EQ(count("SELECT COUNT(*) FROM candidates WHERE bn = 8"), 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM candidates WHERE bn <> 1 AND strategy = 'layerwise'"), 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM predictions"), count("SELECT COUNT(*) FROM candidates"));
  EXPECT_EQ(count("SELECT COUNT(*) FROM runs WHERE instr(config_json, "
                  "'\"batch_blocks\":[1,2,8]') > 0"),
            1);
  // Without batch blocks the configuration reads as it did before they existed.
  db_path_ = (dir_ / "without.db").string();
  run(experiment(two_block_graph()), nullptr);
  EXPECT_EQ(count("SELECT COUNT(*) FROM runs WHERE instr(config_json, 'batch_blocks') > 0"), 0);
}

// A pool of `slots` fake workers that finish their jobs out of order: next() returns the job
// whose ticket hashes lowest, so results arrive in an order unrelated to submission.
class ScrambledPool final : public MeasurePool {
public:
  explicit ScrambledPool(int slots) : slots_(slots) {}
  std::string target() const override { return measurer.target(); }
  std::string backend() const override { return "cpu"; }
  int slots() const override { return slots_; }
  int in_flight() const override { return static_cast<int>(jobs_.size()); }
  void submit(const MeasureJob& job) override {
    EXPECT_LT(in_flight(), slots_);
    max_in_flight = std::max(max_in_flight, in_flight() + 1);
    jobs_.push_back(job);
  }
  std::optional<MeasureDone> next(const std::atomic<bool>* stop) override {
    if (jobs_.empty() || (stop && *stop))
      return std::nullopt;
    auto it = std::min_element(jobs_.begin(), jobs_.end(), [](const auto& a, const auto& b) {
      return std::hash<int64_t>{}(a.ticket * 7919) % 97 <
             std::hash<int64_t>{}(b.ticket * 7919) % 97;
    });
    const MeasureJob job = *it;
    jobs_.erase(it);
    MeasureDone d;
    d.ticket = job.ticket;
    d.result = measurer.measure(*job.graph, *job.candidate, job.options);
    d.worker = 1 + static_cast<int>(job.ticket % slots_);
    ++stats_[d.worker];
    return d;
  }
  std::vector<WorkerStats> workers() const override {
    std::vector<WorkerStats> out;
    for (const auto& [rank, n] : stats_)
      out.push_back(WorkerStats{rank, "fake", target(), n, 0, 0, ""});
    return out;
  }
  FakeMeasurer measurer;
  int max_in_flight = 0;

private:
  int slots_;
  std::vector<MeasureJob> jobs_;
  std::map<int, int> stats_;
};

// Parallel workers measure exactly what one process measures, and plan the same, for every
// searcher (topk's later rounds wait for every result of the round before).
TEST_F(DriverTest, OutOfOrderWorkersMeasureAndPlanAsOneProcess) {
  for (const char* searcher : {"dp", "topk", "measure_all"}) {
    SCOPED_TRACE(searcher);
    ExperimentConfig e = experiment(two_block_graph());
    e.search.searcher = searcher;
    FakeMeasurer m;
    const TuneResult one = run(e, &m);
    const std::multiset<std::string> rows_one = measured_rows();
    fs::remove(db_path_);

    ScrambledPool pool(3);
    const TuneResult par = run_pool(e, &pool);
    EXPECT_EQ(pool.max_in_flight, 3);
    EXPECT_EQ(measured_rows(), rows_one);
    EXPECT_EQ(pool.measurer.calls, m.calls);
    EXPECT_EQ(par.report.measured, one.report.measured);
    ASSERT_TRUE(par.report.replanned && one.report.replanned);
    EXPECT_EQ(to_json(*par.report.replanned), to_json(*one.report.replanned));
    EXPECT_EQ(to_json(par.report.predicted), to_json(one.report.predicted));
    // The report counts each worker's results.
    int by_workers = 0;
    for (const WorkerStats& w : par.report.workers)
      by_workers += w.measured;
    EXPECT_EQ(by_workers, par.report.measured);
    EXPECT_EQ(report_json(par.report)["workers"].size(), par.report.workers.size());
    EXPECT_FALSE(report_json(one.report).contains("workers"));
    fs::remove(db_path_);
  }
}

// A stop request with jobs in flight drops them (counted) and the run is aborted; the next
// run measures the rest, nothing twice. The budget counts jobs as they are dispatched.
TEST_F(DriverTest, PoolStopDropsJobsInFlightAndResumeCompletes) {
  const ExperimentConfig e = experiment(two_block_graph());
  FakeMeasurer m;
  run(e, &m);
  const std::multiset<std::string> expected = measured_rows();
  fs::remove(db_path_);

  std::atomic<bool> stop{false};
  StopAfter cb(&stop, 4);
  ScrambledPool pool(3);
  const TuneResult r = run_pool(e, &pool, {&cb}, &stop);
  EXPECT_TRUE(r.aborted);
  EXPECT_EQ(r.report.measured, 4);
  EXPECT_EQ(r.report.dropped, 2); // slots refilled after the 3rd result; 4th result stops
  EXPECT_EQ(count("SELECT COUNT(*) FROM measurements"), 4);

  ScrambledPool rest(3);
  const TuneResult r2 = run_pool(e, &rest);
  EXPECT_FALSE(r2.aborted);
  EXPECT_EQ(r2.report.resumed + r2.report.measured, m.calls);
  EXPECT_EQ(measured_rows(), expected); // the union, each once

  fs::remove(db_path_);
  ExperimentConfig capped = e;
  capped.measurement.max_measurements = 5;
  ScrambledPool budget(3);
  const TuneResult r3 = run_pool(capped, &budget);
  EXPECT_EQ(budget.measurer.calls, 5);
  EXPECT_NE(r3.report.stopped_by.find("max_measurements = 5"), std::string::npos);
}

// A FakeMeasurer that takes `delay` per candidate, so that two tuners overlap.
class SlowMeasurer final : public Measurer {
public:
  explicit SlowMeasurer(std::chrono::milliseconds delay) : delay_(delay) {}
  std::string target() const override { return inner.target(); }
  std::string backend() const override { return inner.backend(); }
  MeasureResult measure(const Graph& g, const Candidate& c, const MeasureOptions& o) override {
    std::this_thread::sleep_for(delay_);
    return inner.measure(g, c, o);
  }
  FakeMeasurer inner;

private:
  std::chrono::milliseconds delay_;
};

// Two tuners (threads, one connection each) on one database share the work: every candidate
// is measured once, by one of them, and both plans see every result.
TEST_F(DriverTest, TwoTunersOnOneDatabaseMeasureEachCandidateOnce) {
  ExperimentConfig e = experiment(two_block_graph());
  e.search.searcher = "measure_all";
  { TuningDb create(db_path_); } // both open an existing file
  SlowMeasurer a(std::chrono::milliseconds(5)), b(std::chrono::milliseconds(5));
  TuneResult ra, rb;
  std::thread other([&] { rb = run(e, &b); });
  ra = run(e, &a);
  other.join();
  const std::multiset<std::string> rows = measured_rows();
  const std::set<std::string> distinct(rows.begin(), rows.end());
  EXPECT_EQ(rows.size(), distinct.size()) << "a candidate was measured twice";
  EXPECT_EQ(a.inner.calls + b.inner.calls, static_cast<int>(distinct.size()));
  // Each run has every result: its own measurements plus those taken from the other.
  EXPECT_EQ(ra.report.measured + ra.report.resumed, rb.report.measured + rb.report.resumed);
  EXPECT_EQ(ra.report.measured + rb.report.measured, static_cast<int64_t>(distinct.size()));
  EXPECT_EQ(ra.report.status, "complete");
  EXPECT_EQ(rb.report.status, "complete");
}

// A claim left by a tuner whose process is gone is taken over, and the candidate measured.
TEST_F(DriverTest, AClaimOfADeadTunerIsTakenOver) {
  ExperimentConfig e = experiment(two_block_graph());
  FakeMeasurer first;
  run(e, &first); // the candidates exist; now pretend a dead process claimed every one
  const int measured = first.calls;
  ASSERT_GT(measured, 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    try {
      TuningDb db(db_path_);
      RunInfo info;
      info.experiment = "dead";
      info.model = "custom";
      info.gpu_spec = "FakeGPU";
      info.target_fingerprint = "cpu:fake";
      info.backend = "cpu";
      const int64_t run = db.begin_run(info);
      const int64_t target = db.target_id("cpu:fake", "cpu");
      sqlite3* raw = nullptr;
      sqlite3_open(db_path_.c_str(), &raw);
      sqlite3_busy_timeout(raw, 5000);
      const std::string sql = "INSERT INTO claims SELECT DISTINCT candidate_id, " +
                              std::to_string(target) + ", " + std::to_string(run) +
                              ", 'x' FROM measurements";
      code = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK ? 0 : 1;
      sqlite3_close(raw);
    } catch (const std::exception&) {
      code = 2;
    }
    _exit(code); // gone without ending its run
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  FakeMeasurer second;
  TuneOptions fresh;
  fresh.fresh = true;
  const TuneResult r = run(e, &second, fresh);
  EXPECT_EQ(second.calls, measured); // every dead claim taken over, nothing waited for
  EXPECT_EQ(r.report.status, "complete");
}

TEST(PlanSummaryJson, WritesTheBatchBlockWhenAboveOne) {
  PlanSummary s;
  for (int nb : {1, 4}) {
    PlanGroupSummary g;
    g.group = Group{1, 2};
    g.candidate.strategy = Strategy::kPadded;
    g.candidate.brick = BrickShape{1, 8, 8, 16, nb};
    s.groups.push_back(g);
  }
  const nlohmann::json j = to_json(s);
  EXPECT_FALSE(j["groups"][0]["brick"].contains("nb"));
  EXPECT_EQ(j["groups"][0]["brick"]["cb"], 16);
  EXPECT_EQ(j["groups"][1]["brick"]["nb"], 4);
}

TEST(Progress, LineAndDurations) {
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(65), "1:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(progress_line("measure", 5, 20, "1 resumed", 42, 83, 8),
            "measure [##......] 5/20  1 resumed  0:42 elapsed  ETA 1:23");
  EXPECT_EQ(progress_line("measure", 20, 20, "", 60, 0, 4), "measure [####] 20/20  1:00 elapsed");
}

} // namespace
} // namespace brickdl::search
