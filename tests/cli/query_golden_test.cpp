// Golden tests of `brickdl-query`: a small database is built through TuningDb with fixed
// values and timestamps, the binary is run, and its output is compared with
// tests/cli/golden/*. After an intended change of the output, regenerate the files with
//   BRICKDL_UPDATE_GOLDEN=1 <build>/tests/cli/query_cli_tests
// (it fails, naming each file it rewrote), review the diff and rerun without the variable. A
// golden file only records what the tool printed; each test also checks numbers derived by
// hand from the fixture or from another command's output.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/store/tuning_db.h"
#include "tests/cli/golden.h"

namespace brickdl {
namespace {

using brickdl::testing::expect_golden;
using brickdl::testing::read_file;

namespace fs = std::filesystem;

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

// One row of a CSV: the header's names to the cell's text.
using CsvRow = std::map<std::string, std::string>;

// The rows of `text`, a CSV with a header (RFC 4180: a quoted cell may hold commas, doubled
// quotes and newlines); parsed here, not by the code under test.
std::vector<CsvRow> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> records(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    std::string& cell = records.back().back();
    if (quoted && ch == '"' && i + 1 < text.size() && text[i + 1] == '"') {
      cell += '"';
      ++i;
    } else if (ch == '"') {
      quoted = !quoted;
    } else if (!quoted && ch == ',') {
      records.back().emplace_back();
    } else if (!quoted && ch == '\n') {
      records.emplace_back(1);
    } else {
      cell += ch;
    }
  }
  if (records.back() == std::vector<std::string>(1))
    records.pop_back(); // the empty record after the last newline
  std::vector<CsvRow> rows;
  for (size_t r = 1; r < records.size(); ++r) {
    EXPECT_EQ(records[r].size(), records[0].size()) << "CSV record " << r;
    CsvRow row;
    for (size_t c = 0; c < records[0].size() && c < records[r].size(); ++c)
      row[records[0][c]] = records[r][c];
    rows.push_back(std::move(row));
  }
  return rows;
}

double number(const CsvRow& row, const std::string& column) {
  return std::stod(row.at(column));
}

// The median of `samples`, computed here.
double median_of(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
}

// The cells of a text table's row: split at runs of two or more spaces (a cell holds single
// spaces at most), leading spaces dropped.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  const std::regex gap(" {2,}");
  const std::string trimmed = line.substr(std::min(line.find_first_not_of(' '), line.size()));
  for (std::sregex_token_iterator it(trimmed.begin(), trimmed.end(), gap, -1), end; it != end; ++it)
    out.push_back(*it);
  return out;
}

// The lines of `text` after the one starting with `heading` and `skip` more (the table's
// header lines), up to the first line that does not start with `indent` then a non-space.
std::vector<std::string> table_rows(const std::string& text, const std::string& heading, int skip,
                                    const std::string& indent) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && line.rfind(heading, 0) != 0) {
  }
  for (int i = 0; i < skip && std::getline(in, line); ++i) {
  }
  while (std::getline(in, line) && line.rfind(indent, 0) == 0 && line.size() > indent.size() &&
         line[indent.size()] != ' ')
    out.push_back(line);
  return out;
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
  // Each measured row against the export: its time the least median of the workload's ok
  // timings on its target (W1: run 2's padded 1.25, not run 1's 1.5), its candidate that
  // row's, its layerwise time the least layerwise median, its speedup layerwise / time.
  const auto best = nlohmann::json::parse(r.out);
  const std::vector<CsvRow> rows = parse_csv(query("--db " + db_ + " export --format csv").out);
  int measured = 0;
  for (const auto& b : best) {
    if (b.at("source") != "measured")
      continue;
    ++measured;
    const std::string workload = std::to_string(b.at("workload").at("id").get<int64_t>());
    double least = std::numeric_limits<double>::infinity(), layerwise = least;
    std::string candidate;
    for (const CsvRow& row : rows) {
      if (row.at("workload_id") != workload || row.at("target") != b.at("target") ||
          row.at("status") != "ok" || row.at("measurement_kind") != "timing")
        continue;
      const double median = number(row, "median_ms");
      if (median < least) {
        least = median;
        candidate = row.at("candidate_id");
      }
      if (row.at("strategy") == "layerwise")
        layerwise = std::min(layerwise, median);
    }
    EXPECT_DOUBLE_EQ(b.at("time_ms").get<double>(), least) << "workload " << workload;
    EXPECT_EQ(std::to_string(b.at("candidate").at("id").get<int64_t>()), candidate);
    EXPECT_DOUBLE_EQ(b.at("layerwise_ms").get<double>(), layerwise) << "workload " << workload;
    EXPECT_DOUBLE_EQ(b.at("speedup_vs_layerwise").get<double>(), layerwise / least)
        << "workload " << workload;
  }
  EXPECT_EQ(measured, 2);
  // W3, predicted only, by hand from the fixture's predictions: the least feasible time 0.016
  // (two images per unit; the infeasible 0.010 is no candidate), layerwise 0.025: 1.5625x.
  const auto w3 = std::find_if(best.begin(), best.end(), [](const auto& b) {
    return b.at("workload").at("id") == 3 && b.at("source") == "predicted";
  });
  ASSERT_NE(w3, best.end()) << r.out;
  EXPECT_DOUBLE_EQ(w3->at("time_ms").get<double>(), 0.016);
  EXPECT_EQ(w3->at("candidate").at("brick").at("nb"), 2);
  EXPECT_DOUBLE_EQ(w3->at("layerwise_ms").get<double>(), 0.025);
  EXPECT_DOUBLE_EQ(w3->at("speedup_vs_layerwise").get<double>(), 0.025 / 0.016);
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
  // By hand from the fixture: one row per measurement written (5 in run 1, 2 in run 2); an ok
  // one's median, extremes and sample count those of the samples stored (e.g. run 1's padded
  // 1.25 1.5 1.5 1.75: median 1.5), a failed one none; each row's prediction the one stored
  // for its candidate, its DRAM part half of it.
  const std::vector<CsvRow> rows = parse_csv(r.out);
  ASSERT_EQ(rows.size(), 7u) << r.out;
  struct Stats {
    double median, min, max;
    int n;
  };
  const std::map<std::string, Stats> ok = {{"1", {2.175, 2.0, 2.5, 4}},
                                           {"2", {1.5, 1.25, 1.75, 4}},
                                           {"4", {0.75, 0.7, 0.8, 3}},
                                           {"6", {1.25, 1.0, 1.5, 5}},
                                           {"7", {0.9, 0.8, 1.0, 3}}};
  const std::map<std::string, double> predicted = {
      {"1", 0.030}, {"2", 0.020}, {"3", 0.018}, {"4", 0.015}, {"5", 0.012}};
  std::map<std::string, int> per_run;
  for (const CsvRow& row : rows) {
    const std::string id = row.at("measurement_id");
    ++per_run[row.at("run_id")];
    if (const auto it = ok.find(id); it != ok.end()) {
      EXPECT_EQ(row.at("status"), "ok") << id;
      EXPECT_DOUBLE_EQ(number(row, "median_ms"), it->second.median) << "measurement " << id;
      EXPECT_DOUBLE_EQ(number(row, "min_ms"), it->second.min) << "measurement " << id;
      EXPECT_DOUBLE_EQ(number(row, "max_ms"), it->second.max) << "measurement " << id;
      EXPECT_EQ(std::stoi(row.at("num_samples")), it->second.n) << "measurement " << id;
    } else {
      EXPECT_NE(row.at("status"), "ok") << id;
      EXPECT_EQ(row.at("median_ms"), "") << id;
      EXPECT_EQ(row.at("num_samples"), "0") << id;
    }
    const double t = predicted.at(row.at("candidate_id"));
    EXPECT_DOUBLE_EQ(number(row, "pred_time_ms"), t) << "measurement " << id;
    EXPECT_DOUBLE_EQ(number(row, "pred_time_dram_ms"), t / 2) << "measurement " << id;
  }
  EXPECT_EQ(per_run, (std::map<std::string, int>{{"1", 5}, {"2", 2}}));
}

TEST_F(QueryCli, ExportJson) {
  const Result r = query("--db " + db_ + " export --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("export.json", r.out);
  // The JSON against the CSV export, row by row: the same values; and against its own samples:
  // as many as num_samples, their median (computed here) the median_ms, their extremes the
  // min_ms and max_ms.
  const auto json = nlohmann::json::parse(r.out);
  const std::vector<CsvRow> rows = parse_csv(query("--db " + db_ + " export --format csv").out);
  ASSERT_EQ(json.size(), rows.size());
  ASSERT_EQ(json.size(), 7u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& j = json[i];
    const CsvRow& c = rows[i];
    const std::string id = c.at("measurement_id");
    EXPECT_EQ(std::to_string(j.at("measurement_id").get<int64_t>()), id);
    EXPECT_EQ(std::to_string(j.at("candidate_id").get<int64_t>()), c.at("candidate_id")) << id;
    EXPECT_EQ(j.at("status"), c.at("status")) << id;
    const auto samples = j.at("samples_ms").get<std::vector<double>>();
    EXPECT_EQ(std::to_string(samples.size()), c.at("num_samples")) << "measurement " << id;
    if (c.at("status") == "ok") {
      EXPECT_DOUBLE_EQ(j.at("median_ms").get<double>(), number(c, "median_ms")) << id;
      EXPECT_DOUBLE_EQ(median_of(samples), number(c, "median_ms")) << "measurement " << id;
      EXPECT_DOUBLE_EQ(*std::min_element(samples.begin(), samples.end()), number(c, "min_ms"))
          << "measurement " << id;
      EXPECT_DOUBLE_EQ(*std::max_element(samples.begin(), samples.end()), number(c, "max_ms"))
          << "measurement " << id;
    } else {
      EXPECT_TRUE(j.at("median_ms").is_null()) << id;
    }
    for (const char* part : {"time_ms", "time_dram_ms", "flops", "dram_bytes"})
      EXPECT_DOUBLE_EQ(j.at("prediction").at(part).get<double>(),
                       number(c, std::string("pred_") + part))
          << "measurement " << id << " " << part;
    for (const auto& [column, value] : c)
      if (column.rfind("counter.", 0) == 0 && !value.empty())
        EXPECT_DOUBLE_EQ(j.at("counters").at(column.substr(8)).get<double>(), std::stod(value))
            << "measurement " << id << " " << column;
  }
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
  // Each run's measurements are its rows in the export (the fixture wrote 5 in run 1, 2 in
  // run 2); its status the one the fixture ended it with.
  std::map<std::string, int> exported;
  for (const CsvRow& row : parse_csv(query("--db " + db_ + " export --format csv").out))
    ++exported[row.at("run_id")];
  EXPECT_EQ(exported, (std::map<std::string, int>{{"1", 5}, {"2", 2}}));
  std::map<std::string, int> listed;
  std::map<std::string, std::string> status;
  for (const std::string& line : table_rows(r.out, "id ", 1, " ")) {
    const std::vector<std::string> row = cells(line);
    ASSERT_EQ(row.size(), 11u) << line;
    listed[row[0]] = std::stoi(row[10]);
    status[row[0]] = row[7];
  }
  EXPECT_EQ(listed, exported);
  EXPECT_EQ(status, (std::map<std::string, std::string>{{"1", "complete"}, {"2", "aborted"}}));
}

TEST_F(QueryCli, ShowRun) {
  const Result r = query("--db " + db_ + " show 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("show.txt", r.out);
  // The groups' table against run 1's rows of the export: a group's measured count is its
  // workload's rows; its best the least ok median among them (W1's 1.5: run 2's 1.25 is
  // another run's); predicted_ms that candidate's prediction; meas/pred their ratio
  // (1.5 / 0.02 = 75). The fixture's groups: layers 1-2 W1, 3 and 4 W2, 5-6 W3.
  std::vector<CsvRow> rows;
  for (const CsvRow& row : parse_csv(query("--db " + db_ + " export --format csv").out))
    if (row.at("run_id") == "1")
      rows.push_back(row);
  ASSERT_EQ(rows.size(), 5u);
  const std::map<std::string, std::string> workload = {
      {"1-2", "1"}, {"3-3", "2"}, {"4-4", "2"}, {"5-6", "3"}};
  const std::vector<std::string> groups = table_rows(r.out, "groups (", 2, "  ");
  ASSERT_EQ(groups.size(), 4u) << r.out;
  for (const std::string& line : groups) {
    const std::vector<std::string> row = cells(line);
    ASSERT_GE(row.size(), 6u) << line;
    const std::string& layers = row[0];
    const size_t n = row.size();
    int count = 0;
    const CsvRow* best = nullptr;
    for (const CsvRow& m : rows) {
      if (m.at("workload_id") != workload.at(layers))
        continue;
      ++count;
      if (m.at("status") == "ok" && (!best || number(m, "median_ms") < number(*best, "median_ms")))
        best = &m;
    }
    EXPECT_EQ(row[n - 5], std::to_string(count)) << line;
    if (!best) {
      EXPECT_EQ(row[n - 3], "-") << line;
      continue;
    }
    const double median = number(*best, "median_ms"), predicted = number(*best, "pred_time_ms");
    EXPECT_EQ(row[n - 4], best->at("config")) << line;
    EXPECT_NEAR(std::stod(row[n - 3]), median, 5e-5) << line;
    EXPECT_NEAR(std::stod(row[n - 2]), predicted, 5e-5) << line;
    EXPECT_NEAR(std::stod(row[n - 1]), median / predicted, 1e-3 * median / predicted) << line;
  }
  // "measurements (5): <status> <count>, ..." counts the run's rows by status.
  std::map<std::string, int> statuses;
  for (const CsvRow& m : rows)
    ++statuses[m.at("status")];
  std::string counts;
  for (const auto& [name, count] : statuses)
    counts += (counts.empty() ? "" : ", ") + name + " " + std::to_string(count);
  EXPECT_NE(r.out.find("\nmeasurements (5): " + counts + "\n"), std::string::npos) << counts << "\n"
                                                                                   << r.out;
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

// ---- the answers a user asks for (one golden output per question) --------------------------
//
// A 4-layer network `net` tuned four ways into one database:
//   run 1  CPU-measured (cpu:Test CPU), model spec A100-40GB: the layers layerwise
//          (conv1 1.0 ms, conv2 2.0, conv3 = conv1's workload, conv4 0.5), conv1 .. conv2
//          padded 2.5 / memoized 2.8, conv3 .. conv4 padded 1.2. The merged workloads have no
//          layerwise candidate of their own: their layerwise time is their layers' added up.
//   run 2  the same again: it measures conv3 .. conv4 memoized (1.1) and resumes the rest.
//   run 3  a validation of the A100 plan on the CPU (cpu:Test CPU#validation): its check of
//          conv1 .. conv2 took 6966.9009 ms, a number that must never show as a time.
//   run 4  model only for the H200 (`--target H200`, recorded as an override).
// Predictions for the A100 (and the H200 at half the time), with the paper's unfused baseline
// of the single layers.
class AnswersCli : public QueryCli {
protected:
  void SetUp() override {
    QueryCli::SetUp();
    answers_ = (dir_ / "answers.db").string();
    build_answers(answers_);
  }
  Result ask(const std::string& args) const { return query("--db " + answers_ + " " + args); }

  struct Net {
    int64_t conv = 0, conv2 = 0, conv4 = 0, c12 = 0, c34 = 0; // workloads
    int64_t lw_conv = 0, lw_conv2 = 0, lw_conv4 = 0;          // layerwise candidates
    int64_t pad12 = 0, memo12 = 0, pad34 = 0, memo34 = 0;     // merged candidates
  };

  static Candidate brick(Strategy s, int edge) {
    Candidate c;
    c.strategy = s;
    if (s != Strategy::kLayerwise) {
      c.brick = BrickShape{1, edge, edge, 0};
      c.threads = 256;
    }
    return c;
  }

  static void add_net(TuningDb& db, int64_t run, Net& n) {
    n.conv = db.workload_id({"net.conv", 1, "conv3x3 8->8 16x16 +relu", 1});
    n.conv2 = db.workload_id({"net.conv2", 1, "conv3x3 8->16 16x16 +relu", 2});
    n.conv4 = db.workload_id({"net.conv4", 1, "conv1x1 8->8 16x16", 1});
    n.c12 = db.workload_id({"net.c12", 2, "conv3x3 8->8 16x16 +relu | conv3x3 8->16 16x16", 3});
    n.c34 = db.workload_id({"net.c34", 2, "conv3x3 8->8 16x16 +relu | conv1x1 8->8 16x16", 2});
    const std::pair<int64_t, std::pair<int, int>> groups[] = {{n.conv, {1, 1}},  {n.c12, {1, 2}},
                                                              {n.conv2, {2, 2}}, {n.conv, {3, 3}},
                                                              {n.c34, {3, 4}},   {n.conv4, {4, 4}}};
    const char* names[] = {"conv1", "conv1 .. conv2", "conv2", "conv3", "conv3 .. conv4", "conv4"};
    for (size_t i = 0; i < std::size(groups); ++i)
      db.add_run_group(run, groups[i].first, groups[i].second.first, groups[i].second.second,
                       names[i], groups[i].first == n.c12 ? "subgraph A" : "");
    n.lw_conv = db.candidate_id(n.conv, brick(Strategy::kLayerwise, 0));
    n.lw_conv2 = db.candidate_id(n.conv2, brick(Strategy::kLayerwise, 0));
    n.lw_conv4 = db.candidate_id(n.conv4, brick(Strategy::kLayerwise, 0));
    n.pad12 = db.candidate_id(n.c12, brick(Strategy::kPadded, 8));
    n.memo12 = db.candidate_id(n.c12, brick(Strategy::kMemoized, 8));
    n.pad34 = db.candidate_id(n.c34, brick(Strategy::kPadded, 4));
    n.memo34 = db.candidate_id(n.c34, brick(Strategy::kMemoized, 4));
  }

  // A100 times; the H200 predicts half of each. Bytes: the CPU executor's loads + stores equal
  // the L1 bytes predicted for the merged candidates, not for conv2 (+25%).
  static void predict_net(TuningDb& db, const Net& n) {
    const std::pair<int64_t, double> times[] = {
        {n.lw_conv, 0.010}, {n.lw_conv2, 0.020}, {n.lw_conv4, 0.005}, {n.pad12, 0.022},
        {n.memo12, 0.025},  {n.pad34, 0.014},    {n.memo34, 0.012}};
    for (const auto& [c, t] : times) {
      for (const auto& [spec, scale] : {std::pair{"A100-40GB", 1.0}, {"H200", 0.5}}) {
        PredictionRow p;
        p.time_ms = t * scale;
        p.time_dram_ms = p.time_ms / 2;
        p.l1_bytes = 1000 * t / 0.001;
        p.dram_bytes = p.l1_bytes / 2;
        db.put_prediction(c, spec, "analytic-1", p);
      }
    }
    for (const auto& [w, t] : {std::pair{n.conv, 0.018}, {n.conv2, 0.030}, {n.conv4, 0.009}}) {
      PredictionRow p;
      p.time_ms = t;
      db.put_baseline_prediction(w, "A100-40GB", "analytic-1", "paper-unfused", p, 4);
    }
  }

  static RunInfo net_run(const std::string& target, const std::string& spec) {
    RunInfo info;
    info.experiment = "net";
    info.experiment_path = "experiments/net.yaml";
    info.model = "net";
    info.gpu_spec = spec;
    info.target_fingerprint = target;
    info.backend = target.rfind("model:", 0) == 0 ? "none" : "cpu";
    info.git_revision = "0123456789ab";
    return info;
  }

  // Samples around `median` whose median is exactly it; `loaded`: the executor's byte counts.
  static MeasureResult timed(double median, double bytes) {
    return ok({median * 0.9, median, median * 1.1},
              {{"bytes_loaded", bytes * 0.75}, {"bytes_stored", bytes * 0.25}});
  }

  static void build_answers(const std::string& path) {
    TuningDb db(path);
    auto tick = std::make_shared<int>(0);
    db.set_clock([tick] {
      const int t = (*tick)++;
      return fmt::format("2024-05-01T09:{:02}:{:02}.000Z", t / 60, t % 60);
    });
    const std::string cpu = "cpu:Test CPU";
    const int64_t run1 = db.begin_run(net_run(cpu, "A100-40GB"));
    const int64_t t_cpu = db.target_id(cpu, "cpu");
    Net n;
    add_net(db, run1, n);
    predict_net(db, n);
    for (const auto& [c, ms, bytes] : {std::tuple{n.lw_conv, 1.0, 10000.0},
                                       {n.lw_conv2, 2.0, 25000.0},
                                       {n.lw_conv4, 0.5, 5000.0},
                                       {n.pad12, 2.5, 22000.0},
                                       {n.memo12, 2.8, 25000.0},
                                       {n.pad34, 1.2, 14000.0}})
      db.put_measurement(c, t_cpu, run1, timed(ms, bytes));
    PlanRow plan;
    plan.run_id = run1;
    plan.kind = "measured";
    plan.json = "{}";
    plan.predicted_ms = 0.037;
    plan.measured_ms = 4.2;
    plan.layerwise_predicted_ms = 0.045;
    plan.layerwise_measured_ms = 4.5;
    plan.groups = {{n.pad12, 1, 2}, {n.pad34, 3, 4}};
    db.put_plan(plan);
    db.end_run(run1, "complete");

    const int64_t run2 = db.begin_run(net_run(cpu, "A100-40GB"));
    add_net(db, run2, n);
    db.put_measurement(n.memo34, t_cpu, run2, timed(1.1, 12000));
    db.end_run(run2, "complete");

    const int64_t run3 = db.begin_run(net_run(cpu + "#validation", "A100-40GB"));
    add_net(db, run3, n);
    db.put_measurement(n.pad12, db.target_id(cpu + "#validation", "cpu"), run3, ok({6966.9009}));
    db.end_run(run3, "complete");

    RunInfo h200 = net_run("model:H200", "H200");
    h200.config_json = R"({"gpu":"H200","overrides":{"gpu":"H200"}})";
    const int64_t run4 = db.begin_run(h200);
    add_net(db, run4, n);
    db.end_run(run4, "complete");
  }

  std::string answers_;
};

// "How much faster than layerwise is each group?", with no column mixing a CPU time, an A100
// prediction and an H200 prediction, and no validation as a time. Hand-checked:
//   CPU: conv1 .. conv2 padded 2.5 ms; its layers 1.0 + 2.0 = 3.0 ms ('+'): 1.20x.
//        conv3 .. conv4 memoized 1.1 ms (run 2) beats padded 1.2; layers 1.0 + 0.5: 1.36x.
//   A100: conv1 .. conv2 padded 0.022 against 0.010 + 0.020 = 0.030: 1.36x; the paper's
//         baseline 0.018 + 0.030 = 0.048: 2.18x. conv3 .. conv4 memoized 0.012 against
//         0.015: 1.25x, paper 0.027: 2.25x.
//   H200: half of every A100 number, the same speedups, no paper baseline (none stored).
TEST_F(AnswersCli, BestGivesEveryGroupItsLayerwiseSpeedupPerSource) {
  const Result r = ask("best");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("answers_best.txt", r.out);
  EXPECT_EQ(r.out.find("6966"), std::string::npos) << "a validation shown as a time";
  const size_t a100 = r.out.find("predicted by the model for A100-40GB");
  const size_t h200 = r.out.find("predicted by the model for H200");
  ASSERT_TRUE(a100 != std::string::npos && h200 != std::string::npos) << r.out;
  const std::string cpu = r.out.substr(0, a100), on_a100 = r.out.substr(a100, h200 - a100),
                    on_h200 = r.out.substr(h200);
  expect_line(cpu, "subgraph A: conv1 .. conv2", {"padded 8x8", " 2.5000 ", "3.0000+", "1.20x"});
  expect_line(cpu, "conv3 .. conv4", {"memoized 4x4", " 1.1000 ", "1.5000+", "1.36x"});
  expect_line(on_a100, "subgraph A: conv1 .. conv2",
              {"padded 8x8", " 0.0220 ", "0.0300+", "1.36x", "0.0480", "2.18x", "yes"});
  expect_line(on_a100, "conv3 .. conv4",
              {"memoized 4x4", " 0.0120 ", "0.0150+", "1.25x", "0.0270", "2.25x"});
  expect_line(on_h200, "subgraph A: conv1 .. conv2",
              {"padded 8x8", " 0.0110 ", "0.0150+", "1.36x"});
  EXPECT_EQ(on_h200.substr(0, on_h200.find("\n\n")).find("paper_lw_ms"), std::string::npos)
      << "no paper baseline stored";
}

// The one-line question: the best brick and strategy for one layer on one GPU.
TEST_F(AnswersCli, BestForOneLayerOnOneGpu) {
  const Result r = ask("best --model net --gpu H200 --precision fp32 --layer conv4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("answers_best_layer.txt", r.out);
  EXPECT_EQ(r.out.find("conv1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("measured ("), std::string::npos) << "only the H200's predictions";
  EXPECT_EQ(r.out.find("A100"), std::string::npos) << r.out;
}

// "What did the model predict, and what was measured?": per candidate and per target, with
// the error, the scale between a GPU model and CPU times, and the rank correlation.
// Hand-checked: measured / predicted = 100 for every layerwise candidate and conv1 .. conv2
// memoized (2.8 / 0.025 = 112), 113.6 padded (2.5 / 0.022); median of the seven ratios 100
// (1.0/.010, 2.0/.020, .5/.005, 2.5/.022, 2.8/.025, 1.2/.014, 1.1/.012 → 100, 100, 100,
// 113.6, 112, 85.7, 91.7); conv2's bytes -20% (predicted 20000 against 25000 counted), every
// other candidate's exact: a median bytes error of 0, the worst 20%.
TEST_F(AnswersCli, PredictedVersusMeasured) {
  Result r = ask("accuracy");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("answers_accuracy.txt", r.out);
  EXPECT_NE(r.out.find("measured/predicted median 100;"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("#validation"), std::string::npos);
  r = ask("accuracy --json");
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["time"]["n"], 7);
  EXPECT_EQ(j[0]["bytes"]["n"], 7);
  EXPECT_DOUBLE_EQ(j[0]["bytes"]["median_error"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j[0]["bytes"]["worst_error"].get<double>(), 0.2);
}

// `compare` of a run that resumed most of its measurements: counted, and its best taken from
// what it stood on (conv1 .. conv2 from run 1; conv3 .. conv4 its own memoized 1.1 ms).
TEST_F(AnswersCli, CompareCountsResumedMeasurements) {
  Result r = ask("compare 1 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("answers_compare.txt", r.out);
  EXPECT_NE(r.out.find("1 ok measurements of its own, 6 resumed"), std::string::npos) << r.out;
  r = ask("compare 1 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("run 3 has no timings (validated (CPU)"), std::string::npos) << r.err;
  r = ask("compare 1 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("run 4 has no timings (model only"), std::string::npos) << r.err;
}

// A validation run shows what it checked, never a time; a run with overrides says so.
TEST_F(AnswersCli, ShowLabelsValidationsAndOverrides) {
  Result r = ask("show 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("answers_show_validation.txt", r.out);
  EXPECT_EQ(r.out.find("6966"), std::string::npos);
  r = ask("show 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("answers_show_overrides.txt", r.out);
  expect_line(r.out, "overrides", {"gpu H200", "(from the command line)"});
  r = ask("runs");
  expect_golden("answers_runs.txt", r.out);
}

// Text from a damaged or crafted file reaches the terminal escaped: an experiment name with
// ESC sequences, and a strategy with a byte that is no UTF-8 in an error message.
TEST_F(AnswersCli, TextFromTheFileIsPrintedEscaped) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(answers_.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "UPDATE runs SET experiment = 'net' || char(27) || '[2J' WHERE id = 1",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  Result r = ask("runs");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_NE(r.out.find("net\\x1b[2J"), std::string::npos) << r.out;
  ASSERT_EQ(sqlite3_open(answers_.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "PRAGMA ignore_check_constraints = 1; UPDATE candidates SET strategy = "
                         "'p' || CAST(x'8a' AS TEXT) || 'dded' WHERE strategy = 'padded'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  r = ask("best");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("strategy 'p\\x8added'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\x8a'), std::string::npos);
}

// `predictions` on a database brickdl-tune wrote (--backend none: the model only): the header,
// and a row per prediction of a run's workloads for its GPU spec, as counted here in SQL of
// our own.
TEST(PredictionsCli, OneRowPerPredictionOfARunsWorkloadsForItsSpec) {
  std::string tmpl = (fs::temp_directory_path() / "brickdl-predictions-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  const std::string db = (dir / "tune.db").string(), yaml = (dir / "chain.yaml").string();
  std::ofstream(yaml) << "name: chain\n"
                         "model: {zoo: conv_chain, depth: 3, channels: 4, kernel: 3, image: 20, "
                         "dims: 3}\n"
                         "batch: 1\n"
                         "target: {gpu: A100-40GB}\n"
                         "search: {brick_sizes: [4, 8], max_group_len: 3, searcher: dp}\n"
                         "database: "
                      << db << "\noutput: " << (dir / "out").string() << "\n";
  auto run = [&](const std::string& cmd) {
    const int status = std::system(
        (cmd + " > '" + (dir / "out.txt").string() + "' 2> '" + (dir / "err.txt").string() + "'")
            .c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\n"
                                                               << read_file(dir / "err.txt");
    return read_file(dir / "out.txt");
  };
  run(fmt::format("'{}' '{}' --backend none --quiet", BRICKDL_TUNE_BIN, yaml));
  const std::string csv = run(fmt::format("'{}' --db '{}' predictions", BRICKDL_QUERY_BIN, db));
  const std::string json =
      run(fmt::format("'{}' --db '{}' predictions --format json", BRICKDL_QUERY_BIN, db));

  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw,
                               "SELECT count(*) FROM runs r JOIN predictions p ON p.gpu_spec = "
                               "r.gpu_spec JOIN candidates c ON c.id = p.candidate_id WHERE "
                               "c.workload_id IN (SELECT workload_id FROM run_groups WHERE "
                               "run_id = r.id)",
                               -1, &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  const int64_t expected = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(raw);

  EXPECT_GT(expected, 0);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "run,workload_id,signature,description,layers,first_layer,last_layer,candidate_id,"
            "strategy,bd,bh,bw,cb,bn,cl,threads,config,gpu_spec,model_version,feasible,reason,"
            "time_ms,time_dram_ms,time_l2_ms,time_compute_ms,time_atomics_compulsory_ms,"
            "time_atomics_conflict_ms,time_other_ms,flops,redundant_flops,l1_bytes,l2_bytes,"
            "dram_bytes,dram_lower_bound,atomics_compulsory,atomics_conflict");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), expected + 1) << csv;
  EXPECT_EQ(nlohmann::json::parse(json).size(), static_cast<size_t>(expected));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

} // namespace
} // namespace brickdl
