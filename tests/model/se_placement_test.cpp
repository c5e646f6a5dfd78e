// results/model/se_placement.md (benchmarks/se_placement_report; docs/kernels.md, "Where the SE
// vector is computed"): the committed file is what the report writes now; each block's
// placement choice agrees with the two plans' times recomputed here through the public model
// API; and docs/kernels.md quotes the file's figures and its hand count of traffic.
//
// The recomputation shares no code with the report: the search lists, the graph and the GPU
// spec come from experiments/efficientnet_b0.yaml through the experiment loader, a block's
// layers from their names, and plan B's recomputing kernel from the Prediction's documented
// roofline terms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/candidate.h"
#include "core/experiment.h"
#include "core/graph_builder.h"
#include "core/op_traits.h"
#include "model/cost_model.h"

namespace brickdl {
namespace {

const std::string kResults = std::string(BRICKDL_SOURCE_DIR) + "/results/model/se_placement.md";
const std::string kDocs = std::string(BRICKDL_SOURCE_DIR) + "/docs/kernels.md";
const char* const kRegenerate =
    "regenerate it with `build/benchmarks/se_placement_report > results/model/se_placement.md` "
    "and update docs/kernels.md's figures (\"Where the SE vector is computed\") to match";

std::string slurp(const std::string& path) {
  std::ifstream is(path);
  std::stringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

// The report's stdout with `args`; fails the test when it does not exit 0.
std::string run_report(const std::string& args = "") {
  const std::string cmd = std::string(BRICKDL_SE_PLACEMENT_BIN) + " " + args;
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr) << cmd;
  if (p == nullptr)
    return "";
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << cmd;
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);)
    out.push_back(line);
  return out;
}

// The cells of a markdown table row, trimmed.
std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::istringstream is(row);
  std::string cell;
  std::getline(is, cell, '|'); // before the first bar
  while (std::getline(is, cell, '|')) {
    const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
    out.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
  }
  return out;
}

// Runs of whitespace as one space, so that a phrase is found across the docs' line breaks.
std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n';
    if (!(space && !out.empty() && out.back() == ' '))
      out += space ? ' ' : c;
  }
  return out;
}

// One row of the per-block table: gpu, precision, block, microseconds, B / A, faster.
struct Row {
  std::string gpu, precision, block;
  double layerwise = 0, a = 0, b = 0, ratio = 0;
  std::string faster;
};

std::vector<Row> block_rows(const std::string& report) {
  std::vector<Row> rows;
  for (const std::string& line : lines_of(report)) {
    const std::vector<std::string> c = cells(line);
    if (c.size() != 8 || c[2].rfind("features.", 0) != 0)
      continue;
    rows.push_back({c[0], c[1], c[2], std::stod(c[3]), std::stod(c[4]), std::stod(c[5]),
                    std::stod(c[6]), c[7]});
  }
  return rows;
}

// The summary table ("All 16 blocks"), header included: its lines from `header` to the first
// line that is not a table row.
std::vector<std::string> summary_table(const std::vector<std::string>& lines) {
  const std::string header = "| gpu | precision | layerwise | A | B | layerwise / A | B / A |";
  std::vector<std::string> out;
  for (const std::string& l : lines) {
    if (out.empty() && l != header)
      continue;
    if (l.rfind("|", 0) != 0)
      break;
    out.push_back(l);
  }
  return out;
}

// ---- the two plans, recomputed ------------------------------------------------------------

// A block's three parts by layer id in the fused graph: group 1 = its first layer .. the layer
// before the global pool (D's producer); the SE = the pool .. the layer before the multiply;
// group 2 = the multiply .. its last layer.
struct BlockParts {
  Group group1, se, group2;
};

BlockParts block_parts(const Graph& g, const std::string& block) {
  const std::string prefix = block + ".";
  int first = -1, last = -1, pool = -1, mul = -1;
  for (const Layer& l : g.layers()) {
    if (l.name.rfind(prefix, 0) != 0)
      continue;
    first = first < 0 ? l.id : first;
    last = l.id;
    if (l.op == OpKind::kGlobalAvgPool)
      pool = l.id;
    if (l.op == OpKind::kChannelMul)
      mul = l.id;
  }
  EXPECT_TRUE(first >= 0 && first < pool && pool < mul && mul <= last) << block;
  return {{first, pool - 1}, {pool, mul - 1}, {mul, last}};
}

// The predicted time of plan B's recomputing kernel from a prediction of group 1: the same
// kernel without its output's writes, which leave the DRAM term with its write bytes and the
// L2 term with the output bytes (cost_model.h, Prediction).
double without_output_ms(const model::Prediction& p) {
  const double dram = p.dram_bytes > 0 ? p.t_dram_ms * (1 - p.dram_write_bytes / p.dram_bytes) : 0;
  const double l2 = p.l2_bytes > 0 ? p.t_l2_ms * (1 - p.bytes_output / p.l2_bytes) : 0;
  return std::max({dram, l2, p.t_compute_ms}) + p.t_atomic_compulsory_ms + p.t_atomic_conflict_ms +
         p.t_launch_ms + p.t_sync_ms;
}

// The smallest predicted time of any feasible candidate of `group` over the experiment's
// search lists; `drop_output`: as plan B's recomputing kernel.
double fastest_ms(const model::CostModel& m, const Graph& g, const Group& group,
                  const SearchSpaceConfig& space, bool drop_output) {
  double best = INFINITY;
  const auto consider = [&](const Candidate& c) {
    const model::Prediction p = m.predict(g, c);
    if (p.feasible)
      best = std::min(best, drop_output ? without_output_ms(p) : p.time_ms);
  };
  for (Strategy s : space.strategies)
    for (int t : space.threads) {
      if (s == Strategy::kLayerwise) {
        consider(Candidate{group, BrickShape{}, s, t});
        continue;
      }
      for (int e : space.brick_sizes)
        for (int cb : space.channel_blocks)
          for (int nb : space.batch_blocks)
            consider(Candidate{group, BrickShape{1, e, e, cb, nb, 1}, s, t});
    }
  return best;
}

// Plan B's merged block: the block without its SE, the gate s a second graph input.
Graph block_with_gate(const Graph& g, const BlockParts& b) {
  const Layer& mul = g.layer(b.group2.first);
  const int x = g.layer(b.group1.first).inputs[0], gate = mul.inputs[1];
  GraphBuilder gb("se_placement_test_block", g.layer(x).out, g.dtype());
  std::map<int, int> to_new{{x, gb.input()}, {gate, gb.add_input(g.layer(gate).out, "s")}};
  for (int id = b.group1.first; id <= b.group2.last; ++id) {
    if (id >= b.se.first && id <= b.se.last)
      continue;
    Layer l = g.layer(id);
    for (int& in : l.inputs)
      in = to_new.at(in);
    to_new[id] = gb.add_layer(l);
  }
  return gb.build();
}

struct Plans {
  double a_us = 0, b_us = 0, se_us = 0;
};

Plans plans(const model::CostModel& m, const Graph& g, const std::string& block,
            const SearchSpaceConfig& space) {
  const BlockParts b = block_parts(g, block);
  const double se = fastest_ms(m, g, b.se, space, false);
  const double a =
      fastest_ms(m, g, b.group1, space, false) + se + fastest_ms(m, g, b.group2, space, false);
  const Graph merged = block_with_gate(g, b);
  const double bb =
      fastest_ms(m, g, b.group1, space, true) + se +
      fastest_ms(m, merged, Group{merged.num_inputs(), merged.size() - 1}, space, false);
  return {a * 1e3, bb * 1e3, se * 1e3};
}

ExperimentConfig experiment(const std::string& gpu, const std::string& precision) {
  ExperimentOverrides o;
  o.gpu = gpu;
  o.precision = precision;
  return load_experiment(std::string(BRICKDL_SOURCE_DIR) + "/experiments/efficientnet_b0.yaml", o);
}

// ---- the tests ------------------------------------------------------------------------------

TEST(SePlacementReport, CommittedFileIsWhatTheReportWritesNow) {
  const std::vector<std::string> now = lines_of(run_report()),
                                 committed = lines_of(slurp(kResults));
  ASSERT_FALSE(committed.empty()) << kResults << " is missing or empty; " << kRegenerate;
  for (size_t i = 0; i < std::max(now.size(), committed.size()); ++i) {
    const std::string n = i < now.size() ? now[i] : "(no line)";
    const std::string c = i < committed.size() ? committed[i] : "(no line)";
    ASSERT_EQ(c, n) << "results/model/se_placement.md line " << i + 1
                    << " differs from the report's output (expected: the committed line; "
                       "actual: the report's); "
                    << kRegenerate;
  }
}

// Every row's A, B and choice against the two plans recomputed here. Both choices occur
// (B in the first blocks, A from stage 3 on), so a report that always printed one, or picked
// the slower plan, fails.
TEST(SePlacementReport, EachBlocksChoiceIsTheFasterOfTheRecomputedPlans) {
  const std::vector<Row> rows = block_rows(slurp(kResults));
  ASSERT_EQ(rows.size(), 64u) << "16 blocks x 2 GPUs x 2 precisions in " << kResults;
  std::map<std::string, int> chosen;
  std::map<std::pair<std::string, std::string>, ExperimentConfig> configs;
  for (const Row& r : rows) {
    SCOPED_TRACE(fmt::format("{} {} {}", r.gpu, r.precision, r.block));
    auto at = configs.find({r.gpu, r.precision});
    if (at == configs.end())
      at = configs.emplace(std::pair{r.gpu, r.precision}, experiment(r.gpu, r.precision)).first;
    const ExperimentConfig& cfg = at->second;
    const Plans p =
        plans(model::CostModel(cfg.gpu), fuse_for_inference(cfg.graph), r.block, cfg.search);
    // The file rounds to 0.01 us.
    EXPECT_NEAR(r.a, p.a_us, 0.0051);
    EXPECT_NEAR(r.b, p.b_us, 0.0051);
    const std::string faster = p.b_us < p.a_us ? "B" : "A";
    EXPECT_EQ(r.faster, faster) << "A " << p.a_us << " us, B " << p.b_us << " us";
    ++chosen[r.faster];
  }
  EXPECT_GT(chosen["A"], 0);
  EXPECT_GT(chosen["B"], 0);
}

// docs/kernels.md's table is the file's summary; its "A is the choice" is what the totals say,
// and the totals are the blocks' sums; its ratios quoted in words are the file's.
TEST(SePlacementReport, DocsQuoteTheFile) {
  const std::string file = slurp(kResults), docs = slurp(kDocs), docs_flat = one_line(docs);
  const std::vector<std::string> table = summary_table(lines_of(file));
  ASSERT_EQ(table.size(), 6u) << "header, rule and 4 rows in " << kResults;
  EXPECT_EQ(summary_table(lines_of(docs)), table)
      << "docs/kernels.md's table of all 16 blocks is not the file's summary; " << kRegenerate;

  const std::vector<Row> rows = block_rows(file);
  for (size_t i = 2; i < table.size(); ++i) {
    const std::vector<std::string> c = cells(table[i]);
    ASSERT_EQ(c.size(), 7u) << table[i];
    double a = 0, b = 0;
    for (const Row& r : rows)
      if (r.gpu == c[0] && r.precision == c[1])
        a += r.a, b += r.b;
    EXPECT_NEAR(std::stod(c[3]), a, 0.1) << table[i]; // 16 rows rounded to 0.01, total to 0.1
    EXPECT_NEAR(std::stod(c[4]), b, 0.1) << table[i];
    EXPECT_LT(std::stod(c[3]), std::stod(c[4])) << "A is not the faster in total: " << table[i];
  }
  EXPECT_NE(docs_flat.find("**A is the choice**"), std::string::npos);

  // B wins only in stages 1 and 2; the ratios the prose quotes.
  double lo1 = INFINITY, hi1 = 0, lo3 = INFINITY, hi3 = 0;
  std::map<std::string, double> b21;
  for (const Row& r : rows) {
    const int stage = r.block[9] - '0'; // features.S.B
    if (r.faster == "B")
      EXPECT_LE(stage, 2) << r.gpu << " " << r.precision << " " << r.block;
    if (r.block == "features.1.0")
      lo1 = std::min(lo1, r.ratio), hi1 = std::max(hi1, r.ratio);
    if (stage >= 3)
      lo3 = std::min(lo3, r.ratio), hi3 = std::max(hi3, r.ratio);
    if (r.block == "features.2.1")
      b21[r.gpu + " " + r.precision] = r.ratio;
  }
  for (const std::string& quote :
       {fmt::format("features.1.0: B / A {:.2f}–{:.2f}", lo1, hi1),
        fmt::format("features.2.1: {:.2f} in A100 tf32, {:.2f} in H200 tf32, {:.2f} / {:.2f} in "
                    "bf16",
                    b21["A100-40GB tf32"], b21["H200 tf32"], b21["A100-40GB bf16"],
                    b21["H200 bf16"]),
        fmt::format("loses from stage 3 on ({:.3f}–{:.3f})", lo3, hi3)})
    EXPECT_NE(docs_flat.find(quote), std::string::npos)
        << "docs/kernels.md does not say \"" << quote << "\" (the file's ratios)";
}

// The SE's cost on the H200 that the prose quotes, from the recomputed SE groups.
TEST(SePlacementReport, DocsQuoteTheSeCostOnTheH200) {
  double lo = INFINITY, hi = 0;
  for (const char* precision : {"tf32", "bf16"}) {
    const ExperimentConfig cfg = experiment("H200", precision);
    const model::CostModel m(cfg.gpu);
    const Graph g = fuse_for_inference(cfg.graph);
    for (const Row& r : block_rows(slurp(kResults)))
      if (r.gpu == "H200" && r.precision == precision) {
        const BlockParts b = block_parts(g, r.block);
        const double se = fastest_ms(m, g, b.se, cfg.search, false) * 1e3;
        lo = std::min(lo, se), hi = std::max(hi, se);
      }
  }
  const std::string quote = fmt::format("cost {:.1f}–{:.1f} µs per block on the H200", lo, hi);
  EXPECT_NE(one_line(slurp(kDocs)).find(quote), std::string::npos)
      << "docs/kernels.md does not say \"" << quote << "\"";
}

std::string thousands(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<size_t>(i), ",");
  return s;
}

// The hand count of stage 2's second block (24 → 144 → 24 channels, 56×56, fp32, one image)
// from the graph's tensor sizes: A moves X and D (group 1), D and the pooled vector (the pool),
// D, s, X for the residual and the output (group 2); B moves X and the pooled vector (the
// recomputing kernel), X twice, s and the output (the merged block). B moves fewer bytes and
// computes expand + depthwise twice.
TEST(SePlacementReport, DocsHandCountOfStage2sSecondBlock) {
  ExperimentOverrides o;
  o.batch = 1;
  o.precision = "fp32";
  const Graph g = fuse_for_inference(
      load_experiment(std::string(BRICKDL_SOURCE_DIR) + "/experiments/efficientnet_b0.yaml", o)
          .graph);
  const BlockParts b = block_parts(g, "features.2.1");
  const int64_t x = g.output_bytes(g.layer(b.group1.first).inputs[0]);
  const int64_t d = g.output_bytes(b.group1.last);
  const int64_t pooled = g.output_bytes(b.se.first);
  const int64_t s = g.output_bytes(g.layer(b.group2.first).inputs[1]);
  const int64_t out = g.output_bytes(b.group2.last);
  const int64_t a = (x + d) + (d + pooled) + (d + s + x + out);
  const int64_t bb = (x + pooled) + (2 * x + s + out);
  EXPECT_LT(bb, a);
  int64_t recomputed_macs = 0;
  for (int id = b.group1.first; id <= b.group1.last; ++id)
    recomputed_macs += g.layer(id).macs;
  const std::string docs = one_line(slurp(kDocs));
  for (const std::string& quote :
       {fmt::format("X and the output {} B each, D {} B, s {} B", thousands(x), thousands(d),
                    thousands(s)),
        fmt::format("A moves {} B and B {} B", thousands(a), thousands(bb)),
        fmt::format("({:.1f} MFLOP more", 2.0 * recomputed_macs / 1e6)})
    EXPECT_NE(docs.find(quote), std::string::npos)
        << "docs/kernels.md does not say \"" << quote << "\"";
  EXPECT_EQ(x, out);
}

} // namespace
} // namespace brickdl
