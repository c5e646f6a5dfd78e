// The report of `brickdl-tune --backend none` (search/report.h): a golden test on a small inline
// graph, the arithmetic of its counts, its runner-ups and its legend, checked in code too; and
// the two ResNet-50 experiments users asked about: the seven named subgraphs of Figs 8-9, and a
// runner-up for every group of experiments/resnet50.yaml that stays layerwise.
//
// After an intended change of the report, regenerate the golden file with
//   BRICKDL_UPDATE_GOLDEN=1 <build>/tests/cli/tune_report_tests
// (it fails, naming each file it rewrote), review the diff and rerun without the variable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/golden.h"
#include "tests/cli/spawn.h"

namespace {

namespace fs = std::filesystem;
using brickdl::testing::expect_golden;
using brickdl::testing::read_file;
using nlohmann::json;

// A bottleneck block (as ResNet-50's layer2.1: 512 channels on 28x28, batch 8) then two 1x1
// convs of 3072 channels, too wide for any brick's shared memory on the A100, and a classifier.
// Bricks 4, 8, 32, 64 (64 repeats 32, which covers 28x28); channel blocks 0 and 4096 (4096
// repeats 0, all channels). Fused, its 9 layers are a1 a2 a3 sum(+relu) w1 w2 gap flat fc.
constexpr const char* kExperiment = R"(name: report_golden
model:
  input: {channels: 512, size: [28, 28]}
  layers:
    - {op: conv, name: a1, out_channels: 128, kernel: 1}
    - {op: relu}
    - {op: conv, name: a2, out_channels: 128, kernel: 3, padding: 1}
    - {op: relu}
    - {op: conv, name: a3, out_channels: 512, kernel: 1}
    - {op: add, name: sum, inputs: [input, a3]}
    - {op: relu, name: out1}
    - {op: conv, name: w1, out_channels: 3072, kernel: 1}
    - {op: conv, name: w2, out_channels: 3072, kernel: 1}
    - {op: global_avg_pool, name: gap}
    - {op: flatten, name: flat}
    - {op: linear, name: fc, out_features: 10}
batch: 8
target: {gpu: A100-40GB}
search:
  brick_sizes: [4, 8, 32, 64]
  channel_blocks: [0, 4096]
  max_group_len: 4
  subgraphs:
    - {name: "bottleneck", first: a1, last: a3}
    - {name: "wide pair", first: w1, last: w2}
)";

class TuneReport : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("brickdl_tune_report_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs brickdl-tune on `experiment` with --backend none into `name`/; its stdout.
  std::string tune(const std::string& experiment, const std::string& name) {
    const fs::path out = dir_ / (name + ".out"), err = dir_ / (name + ".err");
    const pid_t pid = brickdl::testing::spawn_logged(
        {BRICKDL_TUNE_BIN, experiment, "--backend", "none", "--quiet", "--db",
         (dir_ / (name + ".db")).string(), "--out", (dir_ / name).string()},
        out.string(), err.string());
    EXPECT_GT(pid, 0);
    const int status = brickdl::testing::wait_for(pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(err);
    return read_file(out);
  }
  json plan_json(const std::string& name) {
    return json::parse(read_file(dir_ / name / "plan.json"));
  }

  fs::path dir_;
};

int64_t sum_counts(const json& reasons) {
  int64_t n = 0;
  for (const json& r : reasons)
    n += r.at("count").get<int64_t>();
  return n;
}

// The lines of `text` from the one starting with `first` up to the next empty line.
std::vector<std::string> block(const std::string& text, const std::string& first) {
  std::vector<std::string> out;
  const size_t at = text.find(first);
  if (at == std::string::npos)
    return out;
  std::istringstream in(text.substr(at));
  for (std::string line; std::getline(in, line) && !line.empty();)
    out.push_back(line);
  return out;
}

// The header's counts add up, in the text as in plan.json: enumerated = never built + built,
// built = feasible + infeasible, and each list of reasons sums to its total.
void expect_counts_add_up(const std::string& text, const json& space) {
  std::smatch m;
  const std::regex head(R"(space: \d+ groups; (\d+) candidates enumerated = (\d+) never built )"
                        R"(\(structurally pruned\) \+ (\d+) built and predicted)");
  ASSERT_TRUE(std::regex_search(text, m, head)) << text;
  const int64_t enumerated = std::stoll(m[1]), never = std::stoll(m[2]), built = std::stoll(m[3]);
  EXPECT_EQ(enumerated, never + built);
  const std::regex split(R"(built \((\d+)\) = (\d+) feasible \+ (\d+) infeasible)");
  ASSERT_TRUE(std::regex_search(text, m, split)) << text;
  const int64_t feasible = std::stoll(m[2]), infeasible = std::stoll(m[3]);
  EXPECT_EQ(std::stoll(m[1]), built);
  EXPECT_EQ(feasible + infeasible, built);
  // The reason lines under each total ("  <count>  <reason>") sum to it.
  int64_t listed_never = 0, listed_infeasible = 0;
  bool under_built = false;
  for (const std::string& line : block(text, "space: ")) {
    under_built = under_built || line.rfind("  built (", 0) == 0;
    if (std::regex_match(line, m, std::regex(R"(\s+(\d+)  \S.*)")))
      (under_built ? listed_infeasible : listed_never) += std::stoll(m[1]);
  }
  EXPECT_EQ(listed_never, never);
  EXPECT_EQ(listed_infeasible, infeasible);
  EXPECT_EQ(space.at("enumerated").get<int64_t>(), enumerated);
  EXPECT_EQ(space.at("never_built").get<int64_t>(), never);
  EXPECT_EQ(space.at("candidates").get<int64_t>(), built);
  EXPECT_EQ(space.at("feasible").get<int64_t>(), feasible);
  EXPECT_EQ(space.at("infeasible").get<int64_t>(), infeasible);
  EXPECT_EQ(sum_counts(space.at("never_built_reasons")), never);
  EXPECT_EQ(sum_counts(space.at("infeasible_reasons")), space.at("infeasible").get<int64_t>());
}

// The counts of kExperiment by hand. Groups of <= 4 layers with one output: a1 a2 a3 sum w1 w2
// gap flat fc alone, [a1..a2] [a1..a3] [a1..sum] [a2..a3] [a2..sum] [a3..sum] [a2..w1] [a3..w1]
// [sum..w1] [a3..w2] [sum..w2] [w1..w2] = 21 (multi-layer groups with gap, flat or fc could only
// run layerwise and are left out). Each lists 2 strategies x 4 bricks x 2 channel blocks = 16
// merged configurations, singletons 1 layerwise more: 21 x 16 + 9 = 345 enumerated. gap, flat,
// fc have no bricks: 3 x 16 never built. The 18 others build bricks 4, 8, 32 with all channels:
// 18 x 2 x 3 = 108 built (+ 9 layerwise = 117); brick 64 repeats 32 (18 x 2 x 2 = 72) and block
// 4096 repeats 0 (18 x 2 x 3 = 108).
void expect_hand_counts(const json& space) {
  EXPECT_EQ(space.at("groups"), 21);
  EXPECT_EQ(space.at("enumerated"), 345);
  EXPECT_EQ(space.at("candidates"), 117);
  std::map<std::string, int64_t> never;
  for (const json& r : space.at("never_built_reasons"))
    never[r.at("reason").get<std::string>().substr(0, 12)] = r.at("count");
  EXPECT_EQ(never, (std::map<std::string, int64_t>{
                       {"a layer with", 48}, {"brick larger", 72}, {"channel bloc", 108}}));
  // Model reasons keep their numbers: a range, never "N".
  for (const json& r : space.at("infeasible_reasons")) {
    const std::string reason = r.at("reason");
    EXPECT_EQ(reason.find(" N "), std::string::npos) << reason;
    EXPECT_NE(reason.find("KiB of shared memory per block; A100-40GB allows 163 KiB"),
              std::string::npos)
        << reason;
  }
}

// The subgraphs come first, named; the wide pair (3072 channels) has no feasible merged
// candidate, and the report says why with the counts of the strategy's candidates (one group,
// bricks 4, 8, 32).
void expect_subgraphs(const std::string& out, const json& plan) {
  const size_t bottleneck = out.find("\nbottleneck: a1 .. a3"), wide = out.find("\nwide pair: "),
               plan_at = out.find("\nplan dp (model):");
  EXPECT_LT(bottleneck, wide);
  EXPECT_LT(wide, plan_at);
  ASSERT_EQ(plan.at("subgraphs").size(), 2u);
  EXPECT_EQ(plan.at("subgraphs")[1].at("name"), "wide pair");
  for (int s : {1, 2}) {
    const json& row = plan.at("subgraphs")[1].at("strategies")[s];
    EXPECT_TRUE(row.at("best").is_null()) << row;
    EXPECT_EQ(sum_counts(row.at("reasons")), row.at("candidates").get<int64_t>());
    EXPECT_EQ(row.at("candidates"), 3);
  }
}

// Every layerwise group of the plan has a runner-up (plan.json "runner_ups", aligned with
// plan.groups), merged groups none; the text says the same. Returns the verdicts seen.
std::set<std::string> expect_runner_ups(const std::string& out, const json& plan) {
  std::set<std::string> verdicts;
  const json& groups = plan.at("plan").at("groups");
  const json& ups = plan.at("runner_ups");
  EXPECT_EQ(ups.size(), groups.size());
  for (size_t i = 0; i < groups.size() && i < ups.size(); ++i) {
    const json &g = groups[i], &r = ups[i];
    EXPECT_FALSE(g.contains("runner_up")) << "brickdl-run --plan reads plan.groups";
    if (g.at("strategy") != "layerwise") {
      EXPECT_TRUE(r.is_null()) << g;
      continue;
    }
    if (!r.is_object()) {
      ADD_FAILURE() << "no runner-up for " << g;
      continue;
    }
    EXPECT_EQ(r.at("step"), i);
    EXPECT_EQ(r.at("layer"), g.at("layers"));
    verdicts.insert(r.at("verdict").get<std::string>());
    EXPECT_NE(out.find(g.at("layers").get<std::string>() + ": " + r.at("text").get<std::string>()),
              std::string::npos)
        << r.at("text");
    if (r.at("verdict") == "none" && r.at("merged_candidates").get<int64_t>() > 0)
      EXPECT_EQ(sum_counts(r.at("reasons")), r.at("merged_candidates").get<int64_t>()) << r;
    if (r.at("verdict") == "slower")
      EXPECT_GE(r.at("cost_ms").get<double>(), r.at("layerwise_cost_ms").get<double>()) << r;
    if (r.at("verdict") == "neighbour")
      EXPECT_FALSE(r.at("rivals").empty()) << r;
  }
  return verdicts;
}

// The legend explains every column of the plan table and of the subgraph tables.
void expect_legend(const std::string& out) {
  std::string legend;
  for (const std::string& l : block(out, "legend ("))
    legend += l + "\n";
  for (const char* column :
       {"#",        "layers",  "strategy", "brick",    "pred ms",       "meas ms",  "lw pred",
        "lw meas",  "speedup", "*",        "DRAM MB",  "bound MB",      "xbound",   "pred spd",
        "meas spd", "L1 /lw",  "L2 /lw",   "DRAM /lw", "meas DRAM /lw", "runner-up"})
    EXPECT_NE(legend.find(column), std::string::npos) << column;
}

TEST_F(TuneReport, SmallGraphGolden) {
  std::ofstream(dir_ / "report.yaml") << kExperiment;
  std::string out = tune((dir_ / "report.yaml").string(), "small");
  const json plan = plan_json("small");
  expect_counts_add_up(out, plan.at("space"));
  expect_hand_counts(plan.at("space"));
  expect_subgraphs(out, plan);
  // This plan holds all three kinds of losses.
  EXPECT_EQ(expect_runner_ups(out, plan), (std::set<std::string>{"slower", "neighbour", "none"}));
  expect_legend(out);
  // Golden: the text, with the run's wall time masked.
  out = std::regex_replace(out, std::regex(R"(\) in [0-9.]+ s;)"), ") in <s> s;");
  expect_golden("tune_report.txt", out);
}

// "Writing a first inline-graph experiment": the example in experiments/ tunes as it is, its
// subgraph named in the report, merged into one group.
TEST_F(TuneReport, InlineGraphExampleGolden) {
  const fs::path exp = fs::path(BRICKDL_SOURCE_DIR) / "experiments/inline_resblock.yaml";
  std::string out = tune(exp.string(), "inline");
  EXPECT_NE(out.find("the block: conv1 .. add"), std::string::npos) << out;
  const json plan = plan_json("inline").at("plan");
  ASSERT_EQ(plan.at("groups").size(), 1u);
  // The compulsory traffic by hand: the input and the output once, 2 x 16 x 32 x 32 fp32 each
  // (131072 bytes), and both convs' weights and biases (batch-norms folded in) once,
  // 2 x (16 x 16 x 3 x 3 + 16) x 4 = 18560 bytes: 280704 bytes, "0.28" MB in the plan's row.
  constexpr double kBound = 2 * 131072 + 18560;
  EXPECT_DOUBLE_EQ(plan.at("dram_lower_bound").get<double>(), kBound);
  EXPECT_DOUBLE_EQ(plan.at("groups")[0].at("dram_lower_bound").get<double>(), kBound);
  std::smatch m;
  const std::regex row(R"(\n  1  conv1 \.\. add  +(\w+) +\S+ +([0-9.]+) +- +([0-9.]+) +- +)"
                       R"(([0-9.]+)\* +([0-9.]+) +([0-9.]+) +([0-9.]+)\n)");
  ASSERT_TRUE(std::regex_search(out, m, row)) << out;
  EXPECT_EQ(m[6].str(), "0.28") << m[0];
  // Speedups are layerwise / plan, from plan.json's unrounded times: the row's, and the end
  // to end line's.
  const double pred = plan.at("predicted_ms"), lw = plan.at("layerwise_predicted_ms");
  EXPECT_NEAR(std::stod(m[4]), lw / pred, 0.005) << m[0];
  EXPECT_NEAR(std::stod(m[7]), plan.at("dram_bytes").get<double>() / kBound, 0.005) << m[0];
  const std::regex end_to_end(R"(end to end \(model\): plan [0-9.]+ ms, layerwise [0-9.]+ ms, )"
                              R"(speedup ([0-9.]+)x)");
  ASSERT_TRUE(std::regex_search(out, m, end_to_end)) << out;
  EXPECT_NEAR(std::stod(m[1]), lw / pred, 0.0005) << m[0];
  EXPECT_GT(lw, pred) << "the merged block is predicted faster than its layers";
  out = std::regex_replace(out, std::regex(R"(\) in [0-9.]+ s;)"), ") in <s> s;");
  expect_golden("tune_inline_resblock.txt", out);
}

// "brickdl-tune experiments/fig8_resnet50_subgraphs.yaml --backend none never names the 7
// subgraphs": each is named, in the experiment's order, before the plan.
TEST_F(TuneReport, ResNet50SubgraphsAreNamedFirst) {
  const fs::path exp = fs::path(BRICKDL_SOURCE_DIR) / "experiments/fig8_resnet50_subgraphs.yaml";
  const std::string yaml = read_file(exp);
  std::vector<std::string> names;
  const std::regex name_re(R"re(\{name: "([^"]+)", first: )re");
  for (auto it = std::sregex_iterator(yaml.begin(), yaml.end(), name_re);
       it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  ASSERT_EQ(names.size(), 7u);
  const std::string out = tune(exp.string(), "fig8");
  size_t at = 0;
  for (const std::string& n : names) {
    const size_t next = out.find("\n" + n + ": layer", at);
    ASSERT_NE(next, std::string::npos) << n << "\n" << out;
    at = next + 1;
  }
  EXPECT_LT(at, out.find("\nplan dp (model):"));
  const json plan = plan_json("fig8");
  ASSERT_EQ(plan.at("subgraphs").size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(plan.at("subgraphs")[i].at("name"), names[i]);
    EXPECT_EQ(plan.at("subgraphs")[i].at("strategies").size(), 3u); // layerwise, padded, memoized
  }
}

// "Why does layer3.0 stay layerwise?": every layerwise group of the plan has a runner-up, in
// plan.json and in the report's section, layer3.0.conv1's among them.
TEST_F(TuneReport, ResNet50LayerwiseGroupsHaveRunnerUps) {
  const std::string out =
      tune((fs::path(BRICKDL_SOURCE_DIR) / "experiments/resnet50.yaml").string(), "r50");
  const json plan = plan_json("r50");
  expect_counts_add_up(out, plan.at("space"));
  EXPECT_FALSE(expect_runner_ups(out, plan).empty());
  const std::vector<std::string> section = block(out, "why these groups stay layerwise");
  int layerwise = 0;
  bool layer3_0 = false;
  for (size_t i = 0; i < plan.at("plan").at("groups").size(); ++i) {
    const json& g = plan.at("plan").at("groups")[i];
    if (g.at("strategy") != "layerwise")
      continue;
    ++layerwise;
    const json& r = plan.at("runner_ups").at(i);
    ASSERT_TRUE(r.is_object()) << g;
    const std::string step = "#" + std::to_string(i + 1);
    const std::string line = step + std::string(step.size() < 4 ? 4 - step.size() : 0, ' ') + " " +
                             g.at("layers").get<std::string>() + ": " +
                             r.at("text").get<std::string>();
    EXPECT_NE(std::find(section.begin(), section.end(), "  " + line), section.end()) << line;
    if (g.at("layers") == "layer3.0.conv1") {
      layer3_0 = true;
      EXPECT_NE(r.at("verdict"), "none") << r; // it has merged candidates: the report names one
      EXPECT_NE(r.at("layers").get<std::string>().find("layer3.0.conv1"), std::string::npos) << r;
    }
  }
  EXPECT_GT(layerwise, 0);
  EXPECT_EQ(static_cast<int>(section.size()), layerwise + 1); // the heading, one line per group
  EXPECT_TRUE(layer3_0) << "layer3.0.conv1 is no longer a layerwise group of the plan";
}

} // namespace
