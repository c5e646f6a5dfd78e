// Golden output of the graph report, and the experiment header.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>

#include "core/describe.h"
#include "core/experiment.h"
#include "core/git_revision.h"
#include "core/graph_builder.h"
#include "core/yaml_graph.h"

namespace brickdl {
namespace {

const char* const kSmallGraph = R"(
input: {channels: 3, size: [8, 8]}
layers:
  - {op: conv, name: c1, out_channels: 4, kernel: 3, padding: 1}
  - {op: batch_norm, name: bn1}
  - {op: relu, name: r1}
  - {op: max_pool, name: pool, kernel: 2}
  - {op: conv, name: c2, out_channels: 4, kernel: [1, 3], padding: [0, 1], bias: true}
  - {op: add, name: sum, inputs: [pool, c2]}
  - {op: global_avg_pool, name: gap}
  - {op: flatten, name: flat}
  - {op: linear, name: fc, out_features: 10}
)";

// Expected values worked out by hand (batch 2, fp32):
//   c1   2x4x8x8, params 4*3*9 = 108, MACs 2*4*64*27 = 13,824, 2*4*64*4 B = 2.0 KB
//   bn1  params 2*4 = 8;  pool 2x2/2 -> 2x4x4x4, 2*4*16*4 = 512 B
//   c2   1x3 kernel, padding (0, 1) -> 2x4x4x4, params 4*4*3 + 4 = 52, MACs 2*4*16*12 = 1,536
//   fc   params 4*10 + 10 = 50, MACs 2*4*10 = 80, 2*10*4 = 80 B
//   totals: params 108 + 8 + 52 + 50 = 218, MACs 15,440; activations (the input excluded)
//   3*2048 + 3*512 + 2*32 + 80 = 7,824 B = 0.008 MB; weights 218*4 = 872 B = 0.001 MB.
const char* const kSmallGraphReport =
    "id  layer  op                          inputs  output   params    MACs  out bytes\n"
    "---------------------------------------------------------------------------------\n"
    " 0  input  input                       -       2x3x8x8       0       0     1.5 KB\n"
    " 1  c1     conv 3x3/1 p1 d1 g1         0       2x4x8x8     108  13,824     2.0 KB\n"
    " 2  bn1    batch_norm                  1       2x4x8x8       8       0     2.0 KB\n"
    " 3  r1     relu                        2       2x4x8x8       0       0     2.0 KB\n"
    " 4  pool   max_pool 2x2/2 p0           3       2x4x4x4       0       0      512 B\n"
    " 5  c2     conv 1x3/1 p0,1 d1 g1 bias  4       2x4x4x4      52   1,536      512 B\n"
    " 6  sum    add                         4,5     2x4x4x4       0       0      512 B\n"
    " 7  gap    global_avg_pool             6       2x4x1x1       0       0       32 B\n"
    " 8  flat   flatten                     7       2x4           0       0       32 B\n"
    " 9  fc     linear bias                 8       2x10         50      80       80 B\n"
    "total: 9 layers, 218 params, 15,440 MACs (0.000 GMACs, 0.000 GFLOPs), activations "
    "0.008 MB, weights 0.001 MB (fp32)\n";

TEST(Describe, GraphGolden) {
  YamlGraphOptions o;
  o.batch = 2;
  const Graph g = parse_yaml_graph(kSmallGraph, "small.yaml", o);
  std::ostringstream os;
  describe_graph(g, os);
  EXPECT_EQ(os.str(), kSmallGraphReport);
}

TEST(Describe, FusedOpsShowTheirEpilogues) {
  YamlGraphOptions o;
  o.batch = 2;
  const Graph f = fuse_for_inference(parse_yaml_graph(kSmallGraph, "small.yaml", o));
  // c1 absorbed bn1 and r1; the add has no activation to absorb.
  EXPECT_EQ(describe_op(f.layer(f.find("c1"))), "conv 3x3/1 p1 d1 g1 +bn +relu");
  EXPECT_EQ(describe_op(f.layer(f.find("sum"))), "add");
}

TEST(Describe, OpAttributes) {
  GraphBuilder b("t", TensorShape{1, 4, 16, 32, 32, 3});
  Window w;
  w.kernel = {7, 7, 7};
  w.stride = {1, 2, 2};
  w.pad = {3, 3, 3};
  const int c = b.conv(b.input(), 8, w, 2, false, "c");
  EXPECT_EQ(describe_op(b.layer(c)), "conv 7x7x7/1,2,2 p3 d1 g2");
  const int d = b.conv3d(c, 8, 3, 1, 2, 2);
  EXPECT_EQ(describe_op(b.layer(d)), "conv 3x3x3/1 p2 d2 g1");
  Window pw;
  pw.kernel = {3, 3, 3};
  pw.stride = {2, 2, 2};
  pw.pad = {1, 1, 1};
  const int p = b.avg_pool(d, pw, false, true);
  EXPECT_EQ(describe_op(b.layer(p)), "avg_pool 3x3x3/2 p1 ceil excl_pad");
  EXPECT_EQ(describe_op(b.layer(b.upsample(p, 2, true))), "upsample x2 bilinear");
  EXPECT_EQ(describe_op(b.layer(b.leaky_relu(p, 0.1f))), "leaky_relu 0.1");
}

TEST(Describe, ExperimentHeaderThenGraph) {
  std::string yaml = R"(
name: tiny
batch: 2
precision: fp16
target: {gpu: A100-40GB, sm_count: 100}
search: {brick_sizes: [4, 8], strategies: [padded, memoized], max_group_len: 3}
measurement: {backend: none, budget_s: 30}
model:
)";
  // The same graph as above, indented under `model:`.
  std::istringstream in(kSmallGraph);
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      yaml += "  " + line + "\n";
  const ExperimentConfig e = parse_experiment(yaml, "tiny.yaml");
  std::ostringstream os;
  describe_experiment(e, os);
  const std::string out = os.str();
  const auto has_line = [&](const std::string& l) {
    return out.find("\n" + l + "\n") != std::string::npos || out.rfind(l + "\n", 0) == 0;
  };
  EXPECT_TRUE(has_line("experiment   tiny (tiny.yaml)")) << out;
  EXPECT_TRUE(has_line("model        custom (inline graph)")) << out;
  EXPECT_TRUE(has_line("graph        9 layers, input 2x3x8x8, output 2x10")) << out;
  EXPECT_TRUE(has_line("batch        2")) << out;
  EXPECT_TRUE(has_line("precision    fp16")) << out;
  EXPECT_TRUE(has_line("database     brickdl.db")) << out;
  EXPECT_TRUE(has_line("output       out/tiny")) << out;
  EXPECT_NE(out.find("target       A100-40GB: 100 SMs, DRAM 1555 GB/s 40 GB, L2 40 MiB"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("overridden by the experiment: sm_count"), std::string::npos) << out;
  EXPECT_TRUE(has_line(
      "search       searcher dp; bricks 4, 8; channel blocks 0; batch blocks 1; clusters 1; "
      "strategies padded, memoized; max group 3; threads 256"))
      << out;
  EXPECT_NE(out.find("measurement  backend none;"), std::string::npos) << out;
  EXPECT_NE(out.find("budget 30 s"), std::string::npos) << out;
  // The graph table follows at fp16: the input is 2*3*64*2 B = 768 B.
  EXPECT_NE(out.find(" 0  input  input                       -       2x3x8x8       0       0"
                     "      768 B\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("weights 0.000 MB (fp16)"), std::string::npos) << out; // 436 B
}

// The revision a tuning run records: a short hash, marked when the build held uncommitted
// changes, or "unknown" outside a checkout (core/git_revision.h).
TEST(GitRevision, IsAShortHashOrUnknown) {
  const std::string r = git_revision();
  EXPECT_TRUE(r == "unknown" || std::regex_match(r, std::regex("[0-9a-f]{12}(\\+dirty)?"))) << r;
}

} // namespace
} // namespace brickdl
