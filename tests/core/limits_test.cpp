// Hostile sizes (core/limits.h): every size over a limit is refused where it is given, as a
// UserError naming the file, line, key and the limit; sizes within the limits build graphs
// whose counts cannot overflow.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "core/error.h"
#include "core/experiment.h"
#include "core/graph_builder.h"
#include "core/limits.h"
#include "core/yaml_graph.h"
#include "core/zoo.h"

namespace brickdl {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The UserError of loading `yaml` as an experiment: at `line` and `key`, naming `fragment`.
void expect_refused(const std::string& yaml, int line, const std::string& key,
                    const std::string& fragment) {
  try {
    parse_experiment(yaml, "exp.yaml");
    ADD_FAILURE() << "accepted: " << yaml;
  } catch (const UserError& e) {
    EXPECT_EQ(e.where().file, "exp.yaml") << e.what();
    EXPECT_EQ(e.where().line, line) << e.what();
    EXPECT_EQ(e.where().key, key) << e.what();
    EXPECT_TRUE(contains(e.what(), fragment)) << "'" << fragment << "' not in: " << e.what();
  }
}

const std::string kTarget = "target: H200\n";

TEST(Limits, ZooParametersOverTheLimits) {
  expect_refused("model: {zoo: resnet50, num_classes: 2147483647}\n" + kTarget, 1,
                 "model.num_classes", "features of a flat tensor are limited to 4194304");
  expect_refused("model: {zoo: resnet50, num_classes: 1000000000}\n" + kTarget, 1,
                 "model.num_classes", "limited to 4194304");
  expect_refused("model: {zoo: conv_chain, channels: 1000000, dims: 2}\n" + kTarget, 1,
                 "model.channels", "channels of a tensor are limited to 65536");
  expect_refused("model: {zoo: conv_chain, depth: 100000}\n" + kTarget, 1, "model.depth",
                 "layers of a graph are limited to 2048");
  expect_refused("model: {zoo: conv_chain, kernel: 5000}\n" + kTarget, 1, "model.kernel",
                 "kernel extents are limited to 1024");
  // Within each limit alone, over the weights of a layer: refused at the model.
  expect_refused("model: {zoo: resnet50, num_classes: 4000000}\n" + kTarget, 1, "model",
                 "weights of a layer are limited to 268435456");
}

TEST(Limits, InlineGraphSizesOverTheLimits) {
  const std::string graph = "model:\n"
                            "  input: {channels: 3, size: [32, 32]}\n"
                            "  layers:\n";
  expect_refused(graph + "    - {op: conv, out_channels: 1073741824, kernel: 3}\n" + kTarget, 4,
                 "model.layers[0].out_channels", "channels of a tensor are limited to 65536");
  expect_refused(graph +
                     "    - {op: global_avg_pool}\n    - {op: flatten}\n"
                     "    - {op: linear, out_features: 1000000000}\n" +
                     kTarget,
                 6, "model.layers[2].out_features", "limited to 4194304");
  expect_refused(graph + "    - {op: upsample, scale: 2147483647}\n" + kTarget, 4,
                 "model.layers[0].scale", "limited to 32768");
  // Each attribute within its limit, the output over the extent limit: at the layer.
  expect_refused(graph + "    - {op: upsample, scale: 32768}\n" + kTarget, 4, "model.layers[0]",
                 "spatial extents are limited to 32768");
  expect_refused(
      "model:\n  input: {channels: 3, size: [32, 2147483648]}\n  layers: [{op: relu}]\n" + kTarget,
      2, "model.input.size[1]", "limited to 32768");
}

TEST(Limits, ExperimentSizesOverTheLimits) {
  const std::string base = "model: resnet50\n" + kTarget;
  expect_refused(base + "batch: 2147483648\n", 3, "batch", "expected an integer");
  expect_refused(base + "batch: 100000000\n", 3, "batch", "images in a batch are limited");
  expect_refused(base + "input_size: [224, 2147483648]\n", 3, "input_size[1]",
                 "spatial extents are limited");
  expect_refused(base + "input_channels: 1000000\n", 3, "input_channels", "limited to 65536");
  // Every extent within the limits, the tensor over the element limit.
  expect_refused(base + "batch: 1024\ninput_size: [4096, 4096]\n", 1, "model",
                 "elements of a tensor are limited");
  std::string list;
  for (int i = 0; i < 100; ++i)
    list += (i ? ", " : "") + std::to_string(i);
  expect_refused(base + "search: {channel_blocks: [" + list + "]}\n", 3, "search.channel_blocks",
                 "values in a search list are limited to 64");
  expect_refused(base + "search: {max_group_len: 1000}\n", 3, "search.max_group_len",
                 "layers of a group are limited to 64");
  expect_refused(base + "search: {random_samples: 2147483647}\n", 3, "search.random_samples",
                 "random samples are limited");
  // Each value within its limit, the search over its work limit: 1000 fused layers x groups
  // of 1 to 64 layers x 9 configurations.
  expect_refused("model: {zoo: conv_chain, depth: 1000, dims: 2, image: 8}\n" + kTarget +
                     "search: {max_group_len: 64}\n",
                 3, "search", "candidate layers of a search are limited to 2097152");
}

// The builder checks every graph, whichever loader made it, before its arithmetic can
// overflow: the largest values an int64 attribute can hold are refused, not wrapped.
TEST(Limits, BuilderRefusesOverflowingSizes) {
  GraphBuilder b("g", TensorShape{1, 3, 1, 8, 8, 2});
  EXPECT_THROW(b.conv2d(0, std::numeric_limits<int64_t>::max(), 3), ShapeError);
  EXPECT_THROW(b.conv2d(0, 16, std::numeric_limits<int>::max()), ShapeError);
  const int f = b.flatten(0);
  EXPECT_THROW(b.linear(f, int64_t{1} << 40), ShapeError);
  EXPECT_THROW(GraphBuilder("g", TensorShape{int64_t{1} << 40, 3, 1, 8, 8, 2}), ShapeError);
  EXPECT_THROW(GraphBuilder("g", TensorShape{1, 3, 1, int64_t{1} << 40, int64_t{1} << 40, 2}),
               ShapeError);
  EXPECT_EQ(saturating_mul(int64_t{1} << 40, int64_t{1} << 40),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(saturating_add(std::numeric_limits<int64_t>::max(), 1),
            std::numeric_limits<int64_t>::max());
}

TEST(Limits, ThePapersModelsAreWellWithin) {
  for (const auto& e : zoo()) {
    ZooOptions o;
    o.batch = 64;
    EXPECT_NO_THROW(e.build(o)) << e.name;
  }
  ConvChainOptions c;
  c.image = 224; // Fig 11's 224^3 chain
  EXPECT_NO_THROW(build_conv_chain(c));
}

} // namespace
} // namespace brickdl
