// Inline YAML graphs: shapes, defaults, per-dim windows, and every class of bad input with
// its file, line and column.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/graph.h"
#include "core/yaml_graph.h"

namespace brickdl {
namespace {

// Expects `yaml` to fail with an error of type E at (line, column) whose message contains
// `fragment`; returns the error for further checks.
template <typename E = UserError>
E expect_graph_error(const std::string& yaml, int line, int column, const std::string& fragment,
                     const YamlGraphOptions& options = {}) {
  try {
    parse_yaml_graph(yaml, "g.yaml", options);
  } catch (const E& e) {
    EXPECT_EQ(e.where().file, "g.yaml") << e.what();
    EXPECT_EQ(e.where().line, line) << e.what();
    EXPECT_EQ(e.where().column, column) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "'" << fragment << "' not in: " << e.what();
    return e;
  }
  ADD_FAILURE() << "expected an error containing '" << fragment << "'";
  return E("none");
}

TEST(YamlGraph, ResidualBlockShapesParamsMacs) {
  const std::string yaml = R"(
name: block
input: {channels: 4, size: [16, 16]}
layers:
  - {op: conv, name: a, out_channels: 8, kernel: 3, stride: 2, padding: 1}
  - {op: batch_norm}
  - {op: relu, name: a_relu}
  - {op: conv, name: b, out_channels: 8, kernel: 3, padding: 1, bias: true}
  - {op: conv, name: skip, inputs: input, out_channels: 8, kernel: 1, stride: 2}
  - {op: add, name: sum, inputs: [b, skip]}
)";
  YamlGraphOptions o;
  o.batch = 2;
  const Graph g = parse_yaml_graph(yaml, "g.yaml", o);
  EXPECT_EQ(g.name(), "block");
  ASSERT_EQ(g.size(), 7);
  EXPECT_EQ(g.input_shape(), (TensorShape{2, 4, 1, 16, 16, 2}));
  // a: (16 + 2 - 3) / 2 + 1 = 8; params 8*4*9 = 288; MACs 2*8*64*36.
  const Layer& a = g.layer(g.find("a"));
  EXPECT_EQ(a.out, (TensorShape{2, 8, 1, 8, 8, 2}));
  EXPECT_EQ(a.params, 288);
  EXPECT_EQ(a.macs, int64_t{2} * 8 * 64 * 36);
  EXPECT_FALSE(a.bias); // conv bias defaults to false
  // Unnamed layers get the builder's automatic names.
  EXPECT_EQ(g.layer(2).name, "batch_norm1");
  EXPECT_EQ(g.layer(2).inputs, (std::vector<int>{1}));
  // b reads the previous layer (a_relu); bias adds 8 parameters to 8*8*9.
  const Layer& b = g.layer(g.find("b"));
  EXPECT_EQ(b.inputs, (std::vector<int>{3}));
  EXPECT_EQ(b.params, 8 * 8 * 9 + 8);
  // skip reads the graph input: (16 - 1) / 2 + 1 = 8.
  EXPECT_EQ(g.layer(g.find("skip")).inputs, (std::vector<int>{0}));
  EXPECT_EQ(g.layer(g.find("skip")).out.h, 8);
  EXPECT_EQ(g.layer(g.find("sum")).inputs, (std::vector<int>{4, 5}));
  EXPECT_EQ(g.layer(g.output()).out, (TensorShape{2, 8, 1, 8, 8, 2}));
}

TEST(YamlGraph, ThreeDimensionalPerDimWindows) {
  const std::string yaml = R"(
input: {channels: 3, size: [8, 16, 16]}
layers:
  - {op: conv, out_channels: 4, kernel: [1, 3, 3], stride: [1, 2, 2], padding: [0, 1, 1]}
  - {op: max_pool, kernel: 2}
  - {op: upsample, scale: 2, mode: bilinear}
  - {op: leaky_relu, slope: 0.2}
)";
  const Graph g = parse_yaml_graph(yaml, "g.yaml");
  ASSERT_EQ(g.size(), 5);
  const Layer& c = g.layer(1);
  EXPECT_EQ(c.window.kernel, (std::array<int, 3>{1, 3, 3}));
  EXPECT_EQ(c.window.stride, (std::array<int, 3>{1, 2, 2}));
  EXPECT_EQ(c.window.pad, (std::array<int, 3>{0, 1, 1}));
  // d: 8 (kernel 1); h, w: (16 + 2 - 3) / 2 + 1 = 8.
  EXPECT_EQ(c.out, (TensorShape{1, 4, 8, 8, 8, 3}));
  EXPECT_EQ(c.params, 4 * 3 * 9);
  // A pool's stride defaults to its kernel: 8 / 2 = 4 in every dim.
  EXPECT_EQ(g.layer(2).window.stride, (std::array<int, 3>{2, 2, 2}));
  EXPECT_EQ(g.layer(2).out, (TensorShape{1, 4, 4, 4, 4, 3}));
  EXPECT_TRUE(g.layer(3).bilinear);
  EXPECT_EQ(g.layer(3).out, (TensorShape{1, 4, 8, 8, 8, 3}));
  EXPECT_FLOAT_EQ(g.layer(4).leaky_slope, 0.2f);
}

TEST(YamlGraph, TwoDimensionalScalarWindowLeavesDepthAlone) {
  const Graph g = parse_yaml_graph(
      "input: {channels: 1, size: [10, 10]}\n"
      "layers: [{op: avg_pool, kernel: 3, stride: 1, padding: 1, count_include_pad: false}]\n",
      "g.yaml");
  const Layer& p = g.layer(1);
  EXPECT_EQ(p.window.kernel, (std::array<int, 3>{1, 3, 3}));
  EXPECT_EQ(p.window.pad, (std::array<int, 3>{0, 1, 1}));
  EXPECT_FALSE(p.count_include_pad);
  EXPECT_EQ(p.out, (TensorShape{1, 1, 1, 10, 10, 2}));
}

TEST(YamlGraph, ClassifierHeadAndConcat) {
  const std::string yaml = R"(
input: {channels: 2, size: [4, 4]}
layers:
  - {op: conv, name: x, out_channels: 3, kernel: 1}
  - {op: concat, name: cat, inputs: [input, x]}
  - {op: global_avg_pool}
  - {op: flatten}
  - {op: linear, name: fc, out_features: 7}
  - {op: linear, name: fc2, out_channels: 2, bias: false}
)";
  const Graph g = parse_yaml_graph(yaml, "g.yaml");
  EXPECT_EQ(g.layer(g.find("cat")).out.c, 5);
  const Layer& fc = g.layer(g.find("fc"));
  EXPECT_EQ(fc.out, (TensorShape{1, 7, 1, 1, 1, 0}));
  EXPECT_EQ(fc.params, 5 * 7 + 7); // linear bias defaults to true
  EXPECT_EQ(g.layer(g.find("fc2")).params, 7 * 2);
}

TEST(YamlGraph, OptionsOverrideTheInput) {
  YamlGraphOptions o;
  o.batch = 3;
  o.input_size = {6, 6, 6};
  o.input_channels = 5;
  o.dtype = DType::kF16;
  o.name = "given";
  const Graph g = parse_yaml_graph(
      "input: {channels: 1, size: [10, 10]}\nlayers: [{op: conv, out_channels: 2, kernel: 3}]\n",
      "g.yaml", o);
  EXPECT_EQ(g.name(), "given");
  EXPECT_EQ(g.dtype(), DType::kF16);
  EXPECT_EQ(g.input_shape(), (TensorShape{3, 5, 6, 6, 6, 3}));
  EXPECT_EQ(g.layer(1).out, (TensorShape{3, 2, 4, 4, 4, 3})); // a 3x3x3 kernel now
  // With both overrides the input mapping may be left out.
  EXPECT_EQ(parse_yaml_graph("layers: [{op: relu}]\n", "g.yaml", o).size(), 2);
}

TEST(YamlGraph, LoadsFromAFile) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / "brickdl_yaml_graph_test.yaml";
  std::ofstream(file) << "input: {channels: 3, size: [5, 5]}\nlayers: [{op: global_avg_pool}]\n";
  const Graph g = load_yaml_graph(file.string());
  EXPECT_EQ(g.layer(1).out, (TensorShape{1, 3, 1, 1, 1, 2}));
  std::filesystem::remove(file);
  EXPECT_THROW(load_yaml_graph(file.string()), UserError); // gone: unreadable
}

TEST(YamlGraphErrors, UnknownOpSuggestsTheNearest) {
  const UserError e = expect_graph_error(
      "input: {channels: 1, size: [4, 4]}\nlayers:\n  - {op: convv, out_channels: 1}\n", 3, 10,
      "unknown op 'convv' (did you mean 'conv'?)");
  EXPECT_EQ(e.where().key, "layers[0].op");
  EXPECT_NE(std::string(e.what()).find("global_avg_pool"), std::string::npos);
  // The graph input is not an op a layer may have.
  expect_graph_error("input: {channels: 1, size: [4, 4]}\nlayers: [{op: input}]\n", 2, 15,
                     "unknown op 'input'");
}

TEST(YamlGraphErrors, KeyThatDoesNotApplyToTheOp) {
  const UserError e = expect_graph_error(
      "input: {channels: 1, size: [4, 4]}\nlayers:\n  - op: relu\n    kernel: 3\n", 4, 5,
      "unknown key 'kernel' in a relu layer; valid keys: op, name, inputs");
  EXPECT_EQ(e.where().key, "layers[0].kernel");
  expect_graph_error(
      "input: {channels: 1, size: [4, 4]}\nlayers:\n  - {op: conv, out_chanels: 2, kernel: 1}\n", 3,
      16, "unknown key 'out_chanels' in a conv layer (did you mean 'out_channels'?)");
}

TEST(YamlGraphErrors, WrongTypesAndRanges) {
  const std::string head = "input: {channels: 1, size: [4, 4]}\nlayers:\n";
  expect_graph_error(head + "  - {op: conv, out_channels: two, kernel: 1}\n", 3, 30,
                     "expected an integer >= 1, got 'two'");
  expect_graph_error(head + "  - {op: conv, out_channels: 2, kernel: 0}\n", 3, 41,
                     "expected an integer >= 1, got 0");
  expect_graph_error(head + "  - {op: conv, out_channels: 2, kernel: 1, padding: -1}\n", 3, 53,
                     "expected an integer >= 0, got -1");
  // A 2-D graph takes 2 extents per window attribute, not 3.
  expect_graph_error(head + "  - {op: conv, out_channels: 2, kernel: [1, 3, 3]}\n", 3, 41,
                     "the graph input is 2-D), got a list of 3");
  expect_graph_error(head + "  - {op: conv, out_channels: 2, kernel: 1, bias: maybe}\n", 3, 50,
                     "expected true or false, got 'maybe'");
  expect_graph_error(head + "  - {op: upsample, scale: 2, mode: cubic}\n", 3, 36,
                     "unknown mode 'cubic'");
  expect_graph_error(head + "  - {op: conv, kernel: 1}\n", 3, 5,
                     "missing required key 'out_channels'");
  expect_graph_error(head + "  - relu\n", 3, 5, "expected a layer to be a mapping");
  expect_graph_error("input: {channels: 1, size: [4, 4, 4, 4]}\nlayers: [{op: relu}]\n", 1, 28,
                     "expected [H, W] or [D, H, W], got a list of 4");
  expect_graph_error("input: {channels: 1, size: [4, 4]}\nlayers: []\n", 2, 9,
                     "at least one layer");
}

TEST(YamlGraphErrors, DuplicateAndUnknownLayerNames) {
  const std::string head = "input: {channels: 1, size: [4, 4]}\nlayers:\n";
  expect_graph_error(head + "  - {op: relu, name: a}\n  - {op: relu, name: a}\n", 4, 22,
                     "duplicate layer name 'a' (by layer 1)");
  expect_graph_error(head + "  - {op: relu, name: input}\n", 3, 22,
                     "duplicate layer name 'input' (it is the graph input)");
  const UserError e = expect_graph_error(
      head + "  - {op: relu, name: first}\n  - {op: add, inputs: [first, frist]}\n", 4, 31,
      "unknown input 'frist' (did you mean 'first'?)");
  EXPECT_EQ(e.where().key, "layers[1].inputs[1]");
  expect_graph_error(head + "  - {op: relu, inputs: later}\n  - {op: relu, name: later}\n", 3, 24,
                     "input 'later' is layer 2, which is not defined yet");
  // An automatic name that an explicit name took first.
  expect_graph_error(head + "  - {op: relu, name: relu1}\n  - {op: relu}\n", 4, 5,
                     "automatic name 'relu1' of this layer is already used");
}

TEST(YamlGraphErrors, ShapeErrorPointsAtTheLayer) {
  const std::string yaml =
      "input: {channels: 2, size: [8, 8]}\n"
      "layers:\n"
      "  - {op: conv, name: a, out_channels: 4, kernel: 3, padding: 1}\n"
      "  - {op: conv, name: b, out_channels: 4, kernel: 3, stride: 2, padding: 1}\n"
      "  - name: bad\n"
      "    op: add\n"
      "    inputs: [a, b]\n";
  const ShapeError e = expect_graph_error<ShapeError>(yaml, 5, 5, "layer 'bad' (add)");
  EXPECT_NE(std::string(e.what()).find("1x4x8x8 and 1x4x4x4"), std::string::npos) << e.what();
  EXPECT_EQ(e.where().key, "layers[2]");
  // A window larger than its input; an add with one input.
  expect_graph_error<ShapeError>(
      "input: {channels: 1, size: [4, 4]}\nlayers:\n  - {op: conv, out_channels: 1, kernel: 7}\n",
      3, 5, "does not fit");
  expect_graph_error<ShapeError>(
      "input: {channels: 1, size: [4, 4]}\nlayers:\n  - {op: relu}\n  - {op: add}\n", 4, 5,
      "takes 2 input(s), got 1");
}

TEST(YamlGraphErrors, MissingInputAndSyntax) {
  expect_graph_error("layers: [{op: relu}]\n", 1, 1, "missing required key 'input'");
  expect_graph_error("input: {channels: 1}\nlayers: [{op: relu}]\n", 1, 8,
                     "missing required key 'size'");
  expect_graph_error("input: {channels: 1, size: [4, 4]}\nlayers: [{op: relu}\n", 3, 1,
                     "YAML syntax error");
  expect_graph_error("input: {channels: 1, size: [4, 4]}\nlayer: []\n", 2, 1,
                     "unknown key 'layer' in the graph (did you mean 'layers'?)");
}

} // namespace
} // namespace brickdl
