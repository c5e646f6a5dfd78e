// Golden tests of `brickdl-query`: a small database is built through TuningDb with fixed
// values and timestamps, the binary is run, and its output is compared with
// tests/cli/golden/*. After an intended change of the output, regenerate the files with
//   BRICKDL_UPDATE_GOLDEN=1 <build>/tests/cli/query_cli_tests
// and review the diff.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "core/store/tuning_db.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Result {
  int exit_code = -1;
  std::string out, err;
};

class QueryCli : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "brickdl-query-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    db_ = (dir_ / "tuning.db").string();
    build_database(db_, "cpu:Test CPU @ 2.0GHz");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Runs brickdl-query with `args` (already shell-quoted where needed).
  Result query(const std::string& args) const {
    const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
    const std::string cmd =
        fmt::format("'{}' {} > '{}' 2> '{}'", BRICKDL_QUERY_BIN, args, out.string(), err.string());
    const int status = std::system(cmd.c_str());
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }

  // Compares with tests/cli/golden/<name>, or rewrites it under BRICKDL_UPDATE_GOLDEN=1.
  static void expect_golden(const std::string& name, const std::string& actual) {
    const fs::path golden = fs::path(BRICKDL_SOURCE_DIR) / "tests/cli/golden" / name;
    if (std::getenv("BRICKDL_UPDATE_GOLDEN")) {
      std::ofstream(golden, std::ios::binary | std::ios::trunc) << actual;
      return;
    }
    ASSERT_TRUE(fs::exists(golden)) << golden << " is missing (BRICKDL_UPDATE_GOLDEN=1)";
    EXPECT_EQ(actual, read_file(golden)) << "output differs from " << golden;
  }

  // The fixture database: one target, two runs of a 6-layer chain with three workloads.
  //   W1 = layers 1-2 (measured: layerwise, padded ok; memoized wrong result)
  //   W2 = layers 3 and 4 (the same workload twice; layerwise ok, memoized compile error)
  //   W3 = layers 5-6 (predicted only; best: padded with two images per unit, nb = 2)
  // Run 2 re-measures W1 padded (faster) and W2 layerwise (slower), for `compare`.
  // Workload and candidate ids of the fixture.
  struct Ids {
    int64_t target = 0, run1 = 0, w1 = 0, w2 = 0, w3 = 0;
    int64_t w1_lw = 0, w1_pad = 0, w1_memo = 0, w2_lw = 0, w2_memo = 0;
    int64_t w3_lw = 0, w3_pad = 0, w3_memo = 0, w3_pad_n2 = 0;
  };

  static RunInfo run_info(const std::string& target) {
    RunInfo info;
    info.experiment = "chain3d";
    info.experiment_path = "experiments/chain3d.yaml";
    info.config_json = R"({"search":{"brick_sizes":[4,8],"max_group_len":2},"batch":1})";
    info.model = "conv_chain";
    info.batch = 1;
    info.precision = "fp32";
    info.gpu_spec = "A100-40GB";
    info.target_fingerprint = target;
    info.backend = "cpu";
    info.git_revision = "0123456789ab";
    return info;
  }

  static void add_workloads(TuningDb& db, Ids& id) {
    id.w1 = db.workload_id({"conv3d(3,3,k3,p1)+relu;conv3d(3,3,k3,p1)+relu@1x3x16^3:fp32", 2,
                            "conv3x3x3 3->3 16^3 +relu | conv3x3x3 3->3 16^3 +relu", 2 * 331776});
    id.w2 = db.workload_id({"conv3d(3,3,k3,p1)@1x3x16^3:fp32", 1, "conv3x3x3 3->3 16^3", 331776});
    id.w3 = db.workload_id(
        {"conv3d(3,3,k3,p1)+relu;add@1x3x16^3:fp32", 2, "conv3x3x3 3->3 16^3 +relu | add", 331776});
    db.add_run_group(id.run1, id.w1, 1, 2, "conv1 .. conv2", "subgraph 1");
    db.add_run_group(id.run1, id.w2, 3, 3, "conv3");
    db.add_run_group(id.run1, id.w2, 4, 4, "conv4");
    db.add_run_group(id.run1, id.w3, 5, 6, "conv5 .. add6");
    auto candidate = [](Strategy s, int b) {
      Candidate c;
      c.strategy = s;
      c.brick = BrickShape{b, b, b, 0};
      c.threads = 128;
      return c;
    };
    id.w1_lw = db.candidate_id(id.w1, candidate(Strategy::kLayerwise, 8));
    id.w1_pad = db.candidate_id(id.w1, candidate(Strategy::kPadded, 8));
    id.w1_memo = db.candidate_id(id.w1, candidate(Strategy::kMemoized, 8));
    id.w2_lw = db.candidate_id(id.w2, candidate(Strategy::kLayerwise, 4));
    id.w2_memo = db.candidate_id(id.w2, candidate(Strategy::kMemoized, 4));
    id.w3_lw = db.candidate_id(id.w3, candidate(Strategy::kLayerwise, 4));
    id.w3_pad = db.candidate_id(id.w3, candidate(Strategy::kPadded, 8));
    id.w3_memo = db.candidate_id(id.w3, candidate(Strategy::kMemoized, 16));
    Candidate two_images = candidate(Strategy::kPadded, 8);
    two_images.brick.nb = 2;
    id.w3_pad_n2 = db.candidate_id(id.w3, two_images);
  }

  static void add_predictions(TuningDb& db, const Ids& id) {
    auto predict = [&](int64_t c, double t, bool feasible = true) {
      PredictionRow p;
      p.feasible = feasible;
      p.reason = feasible ? "" : "shared memory 300 KiB > 227 KiB";
      p.time_ms = t;
      p.time_dram_ms = t / 2;
      p.time_compute_ms = t / 4;
      p.time_other_ms = 0.005;
      p.flops = 1.5e6;
      p.dram_bytes = 196608;
      p.dram_lower_bound = 98304;
      db.put_prediction(c, "A100-40GB", "analytic-1", p);
    };
    predict(id.w1_lw, 0.030);
    predict(id.w1_pad, 0.020);
    predict(id.w1_memo, 0.018);
    predict(id.w2_lw, 0.015);
    predict(id.w2_memo, 0.012);
    predict(id.w3_lw, 0.025);
    predict(id.w3_pad, 0.0175);
    predict(id.w3_memo, 0.010, /*feasible=*/false); // faster but infeasible: never the best
    predict(id.w3_pad_n2, 0.016);                   // W3's best: two images per unit
  }

  static MeasureResult ok(std::vector<double> samples,
                          std::map<std::string, double> counters = {}) {
    MeasureResult r;
    r.samples_ms = std::move(samples);
    r.summarize();
    r.max_rel_error = 2.5e-7;
    r.counters = std::move(counters);
    return r;
  }

  // Run 1's measurements and its measured plan.
  static void measure_run1(TuningDb& db, const Ids& id) {
    db.put_measurement(id.w1_lw, id.target, id.run1, ok({2.0, 2.25, 2.1, 2.5}, {{"flops", 1.5e6}}));
    db.put_measurement(id.w1_pad, id.target, id.run1,
                       ok({1.5, 1.75, 1.25, 1.5}, {{"flops", 1.75e6}, {"bytes_loaded", 262144}}));
    MeasureResult wrong;
    wrong.status = MeasureStatus::kWrongResult;
    wrong.error = "max relative error 0.5 > rtol 1e-4 at output[0,1,2,3,4]";
    wrong.max_rel_error = 0.5;
    db.put_measurement(id.w1_memo, id.target, id.run1, wrong);
    db.put_measurement(id.w2_lw, id.target, id.run1, ok({0.75, 0.8, 0.7}));
    MeasureResult compile;
    compile.status = MeasureStatus::kCompileError;
    compile.error = "too many resources requested for launch,\n\"memoized\" kernel";
    db.put_measurement(id.w2_memo, id.target, id.run1, compile);
    PlanRow plan;
    plan.run_id = id.run1;
    plan.kind = "measured";
    plan.json = R"({"groups":3})";
    plan.predicted_ms = 0.0625;
    plan.measured_ms = 3.75;
    plan.layerwise_predicted_ms = 0.085;
    plan.layerwise_measured_ms = 4.5;
    plan.groups = {{id.w1_pad, 1, 2}, {id.w2_lw, 3, 3}, {id.w2_lw, 4, 4}, {id.w3_pad, 5, 6}};
    db.put_plan(plan);
  }

  // The fixture database: one target, two runs of a 6-layer chain with three workloads.
  //   W1 = layers 1-2 (measured: layerwise, padded ok; memoized wrong result)
  //   W2 = layers 3 and 4 (the same workload twice; layerwise ok, memoized compile error)
  //   W3 = layers 5-6 (predicted only; best: padded with two images per unit, nb = 2)
  // Run 2 re-measures W1 padded (faster) and W2 layerwise (slower), for `compare`. The clock
  // ticks once per stamped write, so the order of the writes is part of the golden output.
  static void build_database(const std::string& path, const std::string& target) {
    TuningDb db(path);
    auto tick = std::make_shared<int>(0);
    db.set_clock([tick] {
      const int t = (*tick)++;
      return fmt::format("2024-03-01T10:{:02}:{:02}.000Z", t / 60, t % 60);
    });
    RunInfo info = run_info(target);
    Ids id;
    id.run1 = db.begin_run(info);
    id.target = db.target_id(target, "cpu");
    add_workloads(db, id);
    add_predictions(db, id);
    measure_run1(db, id);
    db.end_run(id.run1, "complete");

    info.git_revision = "fedcba987654";
    // Run 2 measures again what run 1 measured: it was tuned with --fresh.
    info.config_json =
        R"({"search":{"brick_sizes":[4,8],"max_group_len":2},"batch":1,"fresh":true})";
    const int64_t run2 = db.begin_run(info);
    db.add_run_group(run2, id.w1, 1, 2, "conv1 .. conv2", "subgraph 1");
    db.add_run_group(run2, id.w2, 3, 3, "conv3");
    db.put_measurement(id.w1_pad, id.target, run2, ok({1.25, 1.0, 1.5, 1.25, 1.0}));
    db.put_measurement(id.w2_lw, id.target, run2, ok({0.9, 1.0, 0.8}));
    db.end_run(run2, "aborted");
  }

  fs::path dir_;
  std::string db_;
};

// The line of `text` containing `key` contains every one of `parts`.
void expect_line(const std::string& text, const std::string& key,
                 const std::vector<std::string>& parts) {
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << key << " not in\n" << text;
  const size_t begin = text.rfind('\n', at) + 1; // npos + 1 == 0 on the first line
  const std::string line = text.substr(begin, text.find('\n', at) - begin);
  for (const auto& part : parts)
    EXPECT_NE(line.find(part), std::string::npos) << part << " not in\n" << line;
}

TEST_F(QueryCli, BestTable) {
  const Result r = query("--db " + db_ + " best");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("best.txt", r.out);
  // Hand-checked: W1's best is padded (run 2's median 1.25 beats run 1's 1.5; layerwise
  // 2.175 / 1.25 = 1.74x); W3 was never measured, so it has no row among the CPU times, only
  // among the predictions: the best feasible one (padded with two images per unit 0.016, not
  // the infeasible memoized 0.010; 0.025 / 0.016 = 1.56x).
  const size_t predicted = r.out.find("predicted by the model for A100-40GB");
  ASSERT_NE(predicted, std::string::npos) << r.out;
  const std::string cpu = r.out.substr(0, predicted), model = r.out.substr(predicted);
  ASSERT_EQ(cpu.find("measured (CPU) on cpu:Test CPU @ 2.0GHz"), 0u) << r.out;
  expect_line(cpu, "subgraph 1: conv1 .. conv2",
              {"padded 8x8x8 t128", " 1.2500 ", "2.1750", "1.74x"});
  expect_line(cpu, "conv3 (x2)", {"layerwise", " 0.7500 ", "1.00x"});
  EXPECT_EQ(cpu.find("conv5 .. add6"), std::string::npos) << "a prediction among CPU times";
  expect_line(model, "conv5 .. add6", {"padded 8x8x8/n2 t128", " 0.0160 ", "0.0250", "1.56x"});
  expect_line(model, "subgraph 1: conv1 .. conv2", {"memoized 8x8x8 t128", " 0.0180 ", "1.67x"});
}

TEST_F(QueryCli, BestJson) {
  const Result r = query("best --json --db " + db_); // --db after the subcommand works too
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("best.json", r.out);
}

TEST_F(QueryCli, BestFilters) {
  Result r = query("--db " + db_ + " best --model resnet50");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("no groups match"), std::string::npos);
  r = query("--db " + db_ + " best --gpu a100-40gb --precision fp32 --batch 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string all = query("--db " + db_ + " best").out;
  EXPECT_EQ(r.out, all);
  // --target and --source choose sections: the CPU times alone, the predictions alone.
  const std::string cpu = query("--db " + db_ + " best --target 'Test CPU'").out;
  EXPECT_EQ(cpu, query("--db " + db_ + " best --source measured").out);
  const std::string model = query("--db " + db_ + " best --target model:A100").out;
  EXPECT_EQ(model, query("--db " + db_ + " best --source predicted").out);
  EXPECT_EQ(cpu.find("predicted by the model"), std::string::npos) << cpu;
  EXPECT_EQ(model.find("measured (CPU)"), std::string::npos) << model;
  EXPECT_NE(model.find("conv5 .. add6"), std::string::npos) << model;
  EXPECT_NE(all.find(cpu.substr(0, cpu.find("\n\ngroup:"))), std::string::npos);
  // --layer: the groups that contain that layer (conv3's own group, not conv4 of the same
  // workload, not conv1 .. conv2).
  r = query("--db " + db_ + " best --layer conv3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_line(r.out, "  conv3  layerwise", {"0.7500", "1.00x", "yes"});
  expect_line(r.out, "  conv3  memoized 4x4x4 t128", {"0.0120", "1.25x", "yes"});
  EXPECT_EQ(r.out.find("(x2)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("conv1 .. conv2"), std::string::npos) << r.out;
  EXPECT_NE(query("--db " + db_ + " best --layer conv9").out.find("no groups match"),
            std::string::npos);
  r = query("--db " + db_ + " best --batch 8");
  EXPECT_NE(r.out.find("no groups match"), std::string::npos);
}

TEST_F(QueryCli, ExportCsv) {
  const Result r = query("--db " + db_ + " export --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("export.csv", r.out);
}

TEST_F(QueryCli, ExportJson) {
  const Result r = query("--db " + db_ + " export --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("export.json", r.out);
}

TEST_F(QueryCli, ExportOneRunToAFile) {
  const std::string out = (dir_ / "run2.csv").string();
  const Result r = query("--db " + db_ + " export --run 2 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const std::string csv = read_file(out);
  // Header + the two measurements of run 2 (ids 6 and 7).
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
  EXPECT_EQ(csv.find("\n6,2,"), csv.find('\n')) << csv;
}

TEST_F(QueryCli, Runs) {
  const Result r = query("--db " + db_ + " runs");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("runs.txt", r.out);
}

TEST_F(QueryCli, ShowRun) {
  const Result r = query("--db " + db_ + " show 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("show.txt", r.out);
}

TEST_F(QueryCli, Compare) {
  const Result r = query("--db " + db_ + " compare 1 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("compare.txt", r.out);
  // W1: 1.25 / 1.5 = 0.833; W2: 0.9 / 0.75 = 1.2; geometric mean sqrt(0.833 * 1.2) = 1.0.
  EXPECT_NE(r.out.find("0.833"), std::string::npos);
  EXPECT_NE(r.out.find("1.200"), std::string::npos);
  EXPECT_NE(r.out.find("geometric mean B/A 1.000"), std::string::npos);
}

TEST_F(QueryCli, MergeIsIdempotentAndKeepsEveryRow) {
  const std::string out = (dir_ / "merged.db").string();
  Result r = query("merge " + out + " " + db_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("runs +2 (0 already present), measurements +7 (0 already present), "
                       "predictions +9, plans +1"),
            std::string::npos)
      << r.out;
  r = query("merge " + out + " " + db_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("runs +0 (2 already present), measurements +0 (7 already present), "
                       "predictions +0, plans +0"),
            std::string::npos)
      << r.out;
  // Merged into an empty database, the rows keep their order, so the export is identical.
  EXPECT_EQ(query("--db " + out + " export --format json").out,
            query("--db " + db_ + " export --format json").out);
}

TEST_F(QueryCli, MergeRefusesMixedTargets) {
  const std::string other = (dir_ / "h200.db").string();
  build_database(other, "gpu:NVIDIA H200/sm90/drv570/cuda13.0/cudnn9");
  const std::string out = (dir_ / "merged.db").string();
  Result r = query("merge " + out + " " + db_ + " " + other);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("refusing to merge measurements of different targets"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--allow-mixed-targets"), std::string::npos);
  EXPECT_FALSE(fs::exists(out)) << "a refused merge creates no database";

  r = query("merge --allow-mixed-targets " + out + " " + db_ + " " + other);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Both inputs' workloads and candidates are shared; runs and measurements are not.
  r = query("--db " + out + " runs");
  EXPECT_NE(r.out.find("gpu:NVIDIA H200"), std::string::npos);
  const std::string json = query("--db " + out + " export --format json").out;
  size_t rows = 0;
  for (size_t at = json.find("\"measurement_id\""); at != std::string::npos;
       at = json.find("\"measurement_id\"", at + 1))
    ++rows;
  EXPECT_EQ(rows, 2u * 7u);
}

TEST_F(QueryCli, BadInputExitsWith2) {
  Result r = query("--db " + (dir_ / "missing.db").string() + " runs");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no tuning database at"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "missing.db"));

  r = query("--db " + db_ + " best --precision fp64");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fp64"), std::string::npos) << r.err;

  r = query("--db " + db_ + " best --no-such-flag");
  EXPECT_EQ(r.exit_code, 2);
  r = query("--db " + db_); // no subcommand
  EXPECT_EQ(r.exit_code, 2);
  r = query("--db " + db_ + " export --format xml");
  EXPECT_EQ(r.exit_code, 2);

  r = query("--db " + db_ + " show 99");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no run 99"), std::string::npos) << r.err;

  const std::string garbage = (dir_ / "garbage.db").string();
  std::ofstream(garbage) << std::string(4096, 'x');
  r = query("--db " + garbage + " best");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not an SQLite database"), std::string::npos) << r.err;

  r = query("merge " + db_ + " " + db_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is the output database itself"), std::string::npos) << r.err;
}

// A merge input with a row that breaks a CHECK constraint (written past it, as a damaged file
// or another program would): refused with exit 2 naming the input and the row, OUT not created.
// It was an internal error (exit 3).
TEST_F(QueryCli, MergeNamesAnInputRowThatBreaksAConstraint) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "PRAGMA ignore_check_constraints = 1; UPDATE measurements SET status = "
                         "'bogus' WHERE id = (SELECT max(id) FROM measurements)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  const std::string out = (dir_ / "merged.db").string();
  const Result r = query("merge " + out + " " + db_);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("'" + db_ + "': measurements id 7 breaks the schema's constraints"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  EXPECT_FALSE(fs::exists(out));
}

} // namespace
} // namespace brickdl
