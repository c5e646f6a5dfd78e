#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/graph_builder.h"
#include "core/group.h"
#include "core/store/tuning_db.h"
#include "search/driver.h"
#include "search/plan.h"
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
  for (const auto& [reason, n] : r.report.pruned)
    if (reason == "fake: too much shared memory")
      infeasible = n;
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
