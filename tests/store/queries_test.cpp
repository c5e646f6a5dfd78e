// Tests of the read side of the store: queries (core/store/queries.h) return typed rows, and
// printing (core/store/print.h) works from rows alone, without a database. The full text of
// brickdl-query's output is checked by the golden tests in tests/cli/.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/store/print.h"
#include "core/store/queries.h"
#include "core/store/tuning_db.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

class StoreQueries : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "brickdl-queries-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = (dir_ / "t.db").string();
    TuningDb db(path_);
    db.set_clock([] { return std::string("2024-01-01T00:00:00.000Z"); });
    RunInfo info;
    info.experiment = "chain";
    info.model = "custom";
    info.gpu_spec = "A100-40GB";
    info.target_fingerprint = "cpu:test";
    info.backend = "cpu";
    run_ = db.begin_run(info);
    w_ = db.workload_id({"sig", 2, "conv3x3 | conv3x3", 100});
    const int64_t w = w_;
    db.add_run_group(run_, w, 1, 2, "conv1 .. conv2", "subgraph 1");
    Candidate c;
    c.strategy = Strategy::kPadded;
    c.brick = BrickShape{1, 8, 8, 0};
    c.threads = 128;
    candidate_ = db.candidate_id(w, c);
    MeasureResult r;
    r.samples_ms = {2.0, 1.0, 3.0};
    r.summarize();
    r.counters = {{"flops", 10}};
    db.put_measurement(candidate_, db.target_id("cpu:test", "cpu"), run_, r);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path dir_;
  std::string path_;
  int64_t run_ = 0, candidate_ = 0, w_ = 0;
};

TEST_F(StoreQueries, RunsAndRunDetailsAreTypedRows) {
  TuningDb db(path_, TuningDb::Mode::kReadOnly);
  const auto runs = query::runs(db);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].id, run_);
  EXPECT_EQ(runs[0].status, "running");
  EXPECT_FALSE(runs[0].ended_at.has_value());
  EXPECT_EQ(runs[0].measurements, 1);

  const query::RunDetails d = query::run_details(db, run_);
  EXPECT_EQ(d.run.target, "cpu:test");
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].label, "subgraph 1");
  EXPECT_EQ(d.groups[0].measurements, 1);
  ASSERT_TRUE(d.groups[0].best.has_value());
  EXPECT_EQ(d.groups[0].best->candidate.id, candidate_);
  EXPECT_EQ(d.groups[0].best->candidate.config(), "padded 8x8 t128");
  EXPECT_DOUBLE_EQ(d.groups[0].best->spread.median_ms, 2.0);
  ASSERT_EQ(d.statuses.size(), 1u);
  EXPECT_EQ(d.statuses[0].status, "ok");
  EXPECT_TRUE(d.errors.empty());
  EXPECT_TRUE(d.plans.empty());
  EXPECT_THROW(query::run_details(db, run_ + 1), UserError);
  EXPECT_THROW(query::compare_runs(db, run_, run_ + 1), UserError);
}

TEST_F(StoreQueries, ExportKeepsSqliteTypesAndAsksForSamplesOnlyWhenNeeded) {
  TuningDb db(path_, TuningDb::Mode::kReadOnly);
  const query::ExportTable without = query::export_measurements(db, std::nullopt, false);
  ASSERT_EQ(without.rows.size(), 1u);
  ASSERT_FALSE(without.columns.empty());
  EXPECT_EQ(without.columns.front(), "measurement_id");
  EXPECT_EQ(without.rows[0].cells.size(), without.columns.size());
  EXPECT_TRUE(std::holds_alternative<int64_t>(without.rows[0].cells[0]));
  EXPECT_TRUE(without.rows[0].samples_ms.empty());
  EXPECT_EQ(without.rows[0].counters.at("flops"), 10);
  EXPECT_EQ(without.counter_names, (std::set<std::string>{"flops"}));
  EXPECT_EQ(without.rows[0].candidate.config(), "padded 8x8 t128");

  const query::ExportTable with = query::export_measurements(db, run_, true);
  ASSERT_EQ(with.rows.size(), 1u);
  EXPECT_EQ(with.rows[0].samples_ms, (std::vector<double>{2.0, 1.0, 3.0}));
  EXPECT_TRUE(query::export_measurements(db, run_ + 1, true).rows.empty());
}

// The cell of `column` in row `row`.
query::Cell cell_at(const query::ExportTable& table, size_t row, const std::string& column) {
  const auto it = std::find(table.columns.begin(), table.columns.end(), column);
  EXPECT_NE(it, table.columns.end()) << column;
  if (it == table.columns.end())
    return nullptr;
  return table.rows.at(row).cells.at(static_cast<size_t>(it - table.columns.begin()));
}

// Predictions of run_ (A100-40GB): the padded candidate by two model versions, a layerwise one
// infeasible, and an H200 prediction that only a second run (H200) shows. The workload also
// occurs later in run_ (layers 4-5): its first group names it.
class StorePredictions : public StoreQueries {
protected:
  void SetUp() override {
    StoreQueries::SetUp();
    TuningDb db(path_);
    db.set_clock([] { return std::string("2024-01-01T00:00:00.000Z"); });
    db.add_run_group(run_, w_, 4, 5, "conv4 .. conv5", "subgraph 2");
    layerwise_ = db.candidate_id(w_, Candidate{});
    PredictionRow p;
    p.time_ms = 1.5;
    p.dram_bytes = 4096;
    p.atomics_conflict = 3;
    db.put_prediction(candidate_, "A100-40GB", "v1", p);
    p.time_ms = 1.25;
    db.put_prediction(candidate_, "A100-40GB", "v2", p);
    p.time_ms = 0.5;
    db.put_prediction(candidate_, "H200", "v1", p);
    p.feasible = false;
    p.reason = "too big";
    db.put_prediction(layerwise_, "A100-40GB", "v1", p);
    RunInfo info;
    info.experiment = "chain";
    info.model = "custom";
    info.gpu_spec = "H200";
    info.target_fingerprint = "model:H200";
    info.backend = "none";
    run2_ = db.begin_run(info);
    db.add_run_group(run2_, w_, 1, 2, "a .. b");
  }

  int64_t layerwise_ = 0, run2_ = 0;
};

TEST_F(StorePredictions, ExportHasTheRunsGpuSpecPerModelVersion) {
  TuningDb db(path_, TuningDb::Mode::kReadOnly);
  const query::ExportTable all = query::export_predictions(db, std::nullopt);
  const std::vector<std::string> columns{
      // the run, workload, group, candidate and key of the prediction
      "run", "workload_id", "signature", "description", "layers", "first_layer", "last_layer",
      "candidate_id", "strategy", "bd", "bh", "bw", "cb", "bn", "cl", "threads", "gpu_spec",
      "model_version", "feasible", "reason",
      // the rest of the predictions table, in its order
      "time_ms", "time_dram_ms", "time_l2_ms", "time_compute_ms", "time_atomics_compulsory_ms",
      "time_atomics_conflict_ms", "time_other_ms", "flops", "redundant_flops", "l1_bytes",
      "l2_bytes", "dram_bytes", "dram_lower_bound", "atomics_compulsory", "atomics_conflict"};
  EXPECT_EQ(all.columns, columns);
  ASSERT_EQ(all.rows.size(), 4u);
  EXPECT_TRUE(all.counter_names.empty());
  auto at = [&](size_t row, const std::string& column) { return cell_at(all, row, column); };
  // run_: the padded candidate by v1 and v2, then the layerwise one (a later id); then run2_.
  const std::vector<std::tuple<int64_t, int64_t, std::string, std::string, double>> expected{
      {run_, candidate_, "A100-40GB", "v1", 1.5},
      {run_, candidate_, "A100-40GB", "v2", 1.25},
      {run_, layerwise_, "A100-40GB", "v1", 0.5},
      {run2_, candidate_, "H200", "v1", 0.5}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [run, candidate, spec, version, time] = expected[i];
    EXPECT_EQ(at(i, "run"), query::Cell(run)) << i;
    EXPECT_EQ(at(i, "candidate_id"), query::Cell(candidate)) << i;
    EXPECT_EQ(at(i, "gpu_spec"), query::Cell(spec)) << i;
    EXPECT_EQ(at(i, "model_version"), query::Cell(version)) << i;
    EXPECT_EQ(at(i, "time_ms"), query::Cell(time)) << i;
    EXPECT_EQ(at(i, "workload_id"), query::Cell(w_)) << i;
    EXPECT_EQ(all.rows[i].cells.size(), all.columns.size());
    EXPECT_TRUE(all.rows[i].counters.empty() && all.rows[i].samples_ms.empty());
  }
}

TEST_F(StorePredictions, RowsNameTheWorkloadsFirstGroupAndTheCandidate) {
  TuningDb db(path_, TuningDb::Mode::kReadOnly);
  const query::ExportTable all = query::export_predictions(db, std::nullopt);
  ASSERT_EQ(all.rows.size(), 4u);
  auto at = [&](size_t row, const std::string& column) { return cell_at(all, row, column); };
  EXPECT_EQ(at(0, "layers"), query::Cell(std::string("conv1 .. conv2")));
  EXPECT_EQ(at(0, "first_layer"), query::Cell(int64_t{1}));
  EXPECT_EQ(at(0, "last_layer"), query::Cell(int64_t{2}));
  EXPECT_EQ(at(0, "signature"), query::Cell(std::string("sig")));
  EXPECT_EQ(at(0, "description"), query::Cell(std::string("conv3x3 | conv3x3")));
  EXPECT_EQ(at(0, "strategy"), query::Cell(std::string("padded")));
  EXPECT_EQ(at(0, "feasible"), query::Cell(int64_t{1}));
  EXPECT_EQ(at(0, "dram_bytes"), query::Cell(4096.0));
  EXPECT_EQ(at(0, "atomics_conflict"), query::Cell(3.0));
  EXPECT_EQ(all.rows[0].candidate.config(), "padded 8x8 t128");
  EXPECT_EQ(at(2, "feasible"), query::Cell(int64_t{0}));
  EXPECT_EQ(at(2, "reason"), query::Cell(std::string("too big")));
  EXPECT_EQ(all.rows[2].candidate.config(), "layerwise");
  EXPECT_EQ(at(3, "layers"), query::Cell(std::string("a .. b")));
}

TEST_F(StorePredictions, ExportOfOneRunAndOfAnUnknownRun) {
  TuningDb db(path_, TuningDb::Mode::kReadOnly);
  const query::ExportTable all = query::export_predictions(db, std::nullopt);
  EXPECT_EQ(query::export_predictions(db, run_).rows.size(), 3u);
  const query::ExportTable second = query::export_predictions(db, run2_);
  ASSERT_EQ(second.rows.size(), 1u);
  EXPECT_EQ(second.columns, all.columns);
  ASSERT_EQ(all.rows.size(), 4u);
  EXPECT_EQ(second.rows[0].cells, all.rows[3].cells);
  try {
    query::export_predictions(db, run2_ + 1);
    ADD_FAILURE() << "no UserError for an unknown run";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no run " + std::to_string(run2_ + 1)), std::string::npos)
        << e.what();
  }
}

TEST(StorePrint, PrintsRowsWithoutADatabase) {
  std::ostringstream empty;
  query::print_runs({}, "some.db", empty);
  EXPECT_EQ(empty.str(), "no runs in 'some.db'\n");

  query::RunRow r;
  r.id = 7;
  r.experiment = "chain";
  r.model = "custom";
  r.precision = "fp32";
  r.target = "cpu:test";
  r.status = "running";
  r.started_at = "2024-01-01T00:00:00.000Z";
  r.measurements = 3;
  std::ostringstream table;
  query::print_runs({r}, "some.db", table);
  EXPECT_NE(table.str().find("chain"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("running"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find(" -"), std::string::npos) << "no end time: " << table.str();

  query::Comparison c;
  c.only_a = 2;
  std::ostringstream compare;
  query::print_comparison(c, compare);
  EXPECT_NE(compare.str().find("no workload has an ok measurement in both runs (2 only in A, "
                               "0 only in B)"),
            std::string::npos)
      << compare.str();
}

} // namespace
} // namespace brickdl
