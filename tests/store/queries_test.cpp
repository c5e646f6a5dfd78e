// Tests of the read side of the store: queries (core/store/queries.h) return typed rows, and
// printing (core/store/print.h) works from rows alone, without a database. The full text of
// brickdl-query's output is checked by the golden tests in tests/cli/.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <variant>

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
    const int64_t w = db.workload_id({"sig", 2, "conv3x3 | conv3x3", 100});
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
  int64_t run_ = 0, candidate_ = 0;
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
