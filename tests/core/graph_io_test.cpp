// Graphs of several runtime inputs and outputs: the IR and its builder (inputs first, outputs
// named and ordered, every bad declaration refused), fusion that keeps an output read inside a
// group, the group rules around an output before a group's last layer, and YAML `inputs:` /
// `outputs:` with their refusals at file:line.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/graph.h"
#include "core/graph_builder.h"
#include "core/group.h"
#include "core/yaml_graph.h"

namespace brickdl {
namespace {

TensorShape shape2d(int64_t n, int64_t c, int64_t h, int64_t w) {
  TensorShape s;
  s.n = n;
  s.c = c;
  s.h = h;
  s.w = w;
  return s;
}

// p3 (8 channels, 16x16) and p4 (16 channels, 8x8): p4 upsampled and concatenated with p3
// into one head, p4 alone into another; `mid` (a relu of p3's conv) is an output too.
Graph two_head_graph() {
  GraphBuilder b("neck", shape2d(2, 8, 16, 16), DType::kF32, "p3");
  const int p4 = b.add_input(shape2d(2, 16, 8, 8), "p4");
  const int c3 = b.conv2d(b.input(), 8, 3, 1, 1, 1, 1, false, "c3");
  const int mid = b.relu(c3, "mid");
  const int up = b.upsample(p4, 2, false, "up");
  const int cat = b.concat({mid, up}, "cat");
  const int head3 = b.conv2d(cat, 4, 1, 1, 0, 1, 1, false, "head3");
  const int head4 = b.conv2d(p4, 4, 1, 1, 0, 1, 1, false, "head4");
  b.mark_output(head3, "out3");
  b.mark_output(mid);
  b.mark_output(head4, "out4");
  return b.build();
}

template <typename F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_has(const std::string& text, const std::string& fragment) {
  EXPECT_NE(text.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << text;
}

TEST(GraphIo, InputsComeFirstAndOutputsKeepTheirOrderAndNames) {
  const Graph g = two_head_graph();
  EXPECT_EQ(g.num_inputs(), 2);
  EXPECT_EQ(g.inputs(), (std::vector<int>{0, 1}));
  EXPECT_TRUE(g.is_input(1));
  EXPECT_FALSE(g.is_input(2));
  EXPECT_EQ(g.layer(0).name, "p3");
  EXPECT_EQ(g.layer(1).name, "p4");
  const int head3 = g.find("head3"), mid = g.find("mid"), head4 = g.find("head4");
  EXPECT_EQ(g.outputs(), (std::vector<int>{head3, mid, head4}));
  EXPECT_EQ(g.output_refs()[0].name, "out3");
  EXPECT_EQ(g.output_refs()[1].name, "mid"); // default: the layer's name
  EXPECT_EQ(g.output_refs()[2].name, "out4");
  EXPECT_TRUE(g.is_output(mid));
  EXPECT_FALSE(g.is_output(g.find("cat")));
  EXPECT_EQ(g.batch(), 2);
  // The callers of one input / one output are told this graph is not one.
  EXPECT_THROW(g.output(), InternalError);
  EXPECT_THROW(g.input_shape(), InternalError);
}

TEST(GraphIo, OneInputGraphsKeepTheirDefaults) {
  GraphBuilder b("one", shape2d(1, 3, 8, 8));
  b.relu(b.conv2d(b.input(), 4, 3, 1, 1));
  const Graph g = b.build();
  EXPECT_EQ(g.num_inputs(), 1);
  EXPECT_EQ(g.output(), g.size() - 1);
  EXPECT_EQ(g.output_refs()[0].name, g.layer(g.size() - 1).name);
  EXPECT_EQ(g.input_shape(), shape2d(1, 3, 8, 8));
}

TEST(GraphIo, BadInputsAndOutputsAreRefusedByName) {
  {
    GraphBuilder b("g", shape2d(2, 3, 8, 8), DType::kF32, "x");
    const std::string e = error_of([&] { b.add_input(shape2d(3, 3, 8, 8), "y"); });
    expect_has(e, "input 'y'");
    expect_has(e, "same batch");
  }
  {
    GraphBuilder b("g", shape2d(2, 3, 8, 8), DType::kF32, "x");
    expect_has(error_of([&] { b.add_input(shape2d(2, 3, 8, 8), "x"); }),
               "two inputs are named 'x'");
    expect_has(error_of([&] { b.add_input(shape2d(2, 0, 8, 8), "z"); }), "input 'z'");
  }
  {
    GraphBuilder b("g", shape2d(1, 3, 8, 8), DType::kF32, "x");
    b.relu(b.input(), "r");
    expect_has(error_of([&] { b.add_input(shape2d(1, 3, 8, 8), "late"); }),
               "comes after computed layers");
  }
  {
    GraphBuilder b("g", shape2d(1, 3, 8, 8), DType::kF32, "x");
    const int y = b.add_input(shape2d(1, 3, 8, 8), "y");
    const int r = b.relu(y, "r");
    const int s = b.add(b.input(), r, "s");
    expect_has(error_of([&] { b.mark_output(y); }), "an output must be computed by a layer");
    b.mark_output(r, "out");
    expect_has(error_of([&] { b.mark_output(r, "again"); }), "are both layer 'r'");
    expect_has(error_of([&] { b.mark_output(s, "out"); }), "two outputs are named 'out'");
    Layer in;
    in.op = OpKind::kInput;
    in.out = shape2d(1, 3, 8, 8);
    expect_has(error_of([&] { b.add_layer(in); }), "declared with add_input");
  }
}

TEST(GraphIo, FusionKeepsAnOutputThatALaterActivationReads) {
  // conv -> relu where the conv's own (pre-relu) value is an output: the relu must not fold.
  GraphBuilder b("g", shape2d(1, 3, 8, 8), DType::kF32, "x");
  const int y = b.add_input(shape2d(1, 4, 8, 8), "y");
  const int c = b.conv2d(b.input(), 4, 3, 1, 1, 1, 1, false, "c");
  const int r = b.relu(c, "r");
  const int s = b.add(r, y, "s");
  const int c2 = b.conv2d(s, 4, 1, 1, 0, 1, 1, false, "c2");
  const int r2 = b.relu(c2, "r2");
  b.mark_output(r2, "final");
  b.mark_output(c, "pre");
  const Graph f = fuse_for_inference(b.build());
  EXPECT_EQ(f.num_inputs(), 2);
  EXPECT_EQ(f.layer(1).name, "y");
  ASSERT_GE(f.find("r"), 0) << "the relu after an output was folded away";
  EXPECT_EQ(f.layer(f.find("c")).activation, Activation::kNone);
  // r2 folds into c2: the output moves onto c2 and keeps its name.
  EXPECT_LT(f.find("r2"), 0);
  ASSERT_EQ(f.outputs().size(), 2u);
  EXPECT_EQ(f.outputs()[0], f.find("c2"));
  EXPECT_EQ(f.output_refs()[0].name, "final");
  EXPECT_EQ(f.outputs()[1], f.find("c"));
  EXPECT_EQ(f.output_refs()[1].name, "pre");
}

TEST(GraphIo, GroupsStartAfterTheInputsAndAnInnerOutputBlocksBricks) {
  const Graph g = fuse_for_inference(two_head_graph());
  const int c3 = g.find("c3"), up = g.find("up"), head3 = g.find("head3");
  // Layer 1 is an input: no group holds it.
  EXPECT_FALSE(is_valid_group(g, Group{1, 2}));
  expect_has(group_invalid_reason(g, Group{1, 2}), "layers 2..");
  // c3 (with the folded relu, the output "mid") read by cat inside [c3, head3].
  ASSERT_EQ(up, c3 + 1);
  const Group whole{c3, head3};
  ASSERT_TRUE(is_valid_group(g, whole)) << group_invalid_reason(g, whole);
  expect_has(brick_blocker(g, whole), "graph output inside the group");
  // The same layers without an output inside are brickable, and their keys differ.
  EXPECT_EQ(brick_blocker(g, Group{up, head3}), "");
  EXPECT_NE(workload_signature(g, whole).find("| outputs L0"), std::string::npos)
      << workload_signature(g, whole);
  EXPECT_EQ(workload_signature(g, Group{up, head3}).find("outputs"), std::string::npos);
}

TEST(GraphIoYaml, InputsAndOutputsAreRead) {
  const Graph g = parse_yaml_graph(R"(
inputs:
  - {name: p3, channels: 8, size: [16, 16]}
  - {name: p4, channels: 16, size: [8, 8]}
layers:
  - {op: upsample, name: up, inputs: p4, scale: 2}
  - {op: concat, name: cat, inputs: [p3, up]}
  - {op: conv, name: head3, out_channels: 4, kernel: 1, inputs: cat}
  - {op: conv, name: head4, out_channels: 4, kernel: 1, inputs: p4}
  - {op: relu, name: tail}
outputs: [head3, tail]
)",
                                   "g.yaml");
  EXPECT_EQ(g.num_inputs(), 2);
  EXPECT_EQ(g.layer(1).out, shape2d(1, 16, 8, 8));
  EXPECT_EQ(g.layer(g.find("tail")).inputs, (std::vector<int>{g.find("head4")}));
  EXPECT_EQ(g.outputs(), (std::vector<int>{g.find("head3"), g.find("tail")}));
  // The first layer without `inputs` reads the last input; one output may be a scalar.
  const Graph h = parse_yaml_graph(R"(
inputs:
  - {name: a, channels: 2, size: [4, 4]}
  - {name: b, channels: 3, size: [4, 4]}
layers:
  - {op: relu, name: r}
  - {op: concat, name: c, inputs: [a, r]}
outputs: r
)",
                                   "g.yaml");
  EXPECT_EQ(h.layer(h.find("r")).inputs, (std::vector<int>{1}));
  EXPECT_EQ(h.outputs(), (std::vector<int>{h.find("r")}));
}

// Expects `yaml` to be refused at `line` with `fragment` in the message.
void expect_refused(const std::string& yaml, int line, const std::string& fragment,
                    const YamlGraphOptions& options = {}) {
  try {
    parse_yaml_graph(yaml, "g.yaml", options);
    ADD_FAILURE() << "accepted: " << yaml;
  } catch (const UserError& e) {
    EXPECT_EQ(e.where().file, "g.yaml") << e.what();
    EXPECT_EQ(e.where().line, line) << e.what();
    expect_has(e.what(), fragment);
  }
}

TEST(GraphIoYaml, BadInputsAndOutputsAreRefusedAtTheirLine) {
  const std::string layers = "layers:\n  - {op: relu, name: r}\n";
  expect_refused("input: {channels: 3, size: [4, 4]}\ninputs:\n  - {name: a, channels: 3, size: "
                 "[4, 4]}\n" +
                     layers,
                 3, "not both");
  expect_refused("inputs: []\n" + layers, 1, "at least one input");
  expect_refused("inputs:\n  - {name: a, channels: 3, size: [4, 4]}\n  - {name: a, channels: 3, "
                 "size: [4, 4]}\n" +
                     layers,
                 3, "duplicate input name 'a'");
  expect_refused("inputs:\n  - {name: a, channels: 3, size: [4, 4]}\n  - {name: b, channels: 3, "
                 "size: [2, 4, 4]}\n" +
                     layers,
                 3, "every input must have its rank");
  expect_refused("inputs:\n  - {name: a, size: [4, 4]}\n" + layers, 2, "channels");
  expect_refused("inputs:\n  - {name: a, channels: 3, size: [4, 4], batch: 2}\n" + layers, 2,
                 "batch");
  const std::string two = "inputs:\n  - {name: a, channels: 3, size: [4, 4]}\n  - {name: b, "
                          "channels: 3, size: [4, 4]}\n" +
                          layers;
  expect_refused(two + "outputs: [r, nope]\n", 6, "unknown output 'nope'");
  expect_refused(two + "outputs: [a]\n", 6, "an output must be computed by a layer");
  expect_refused(two + "outputs: [r, r]\n", 6, "are both layer 'r'");
  expect_refused(two + "outputs: []\n", 6, "at least one layer name");
  expect_refused(two + "outputs: {r: 1}\n", 6, "a layer name or a list");
  YamlGraphOptions sized;
  sized.input_size = {8, 8};
  expect_refused(two, 2, "apply to a graph of one `input`", sized);
}

} // namespace
} // namespace brickdl
