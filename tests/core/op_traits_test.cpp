// The op-traits table: one row per op, names, the canonical attribute text (part of the
// database's workload keys, so pinned here), the numeric key form, and the JSON form read
// back through the YAML reader.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/graph_builder.h"
#include "core/op_traits.h"
#include "core/yaml_graph.h"

namespace brickdl {
namespace {

constexpr OpKind kAllOps[] = {
    OpKind::kInput,          OpKind::kConv,          OpKind::kBatchNorm, OpKind::kRelu,
    OpKind::kLeakyRelu,      OpKind::kAdd,           OpKind::kConcat,    OpKind::kMaxPool,
    OpKind::kAvgPool,        OpKind::kGlobalAvgPool, OpKind::kUpsample,  OpKind::kFlatten,
    OpKind::kLinear,         OpKind::kConvTranspose, OpKind::kSigmoid,   OpKind::kSilu,
    OpKind::kClip,           OpKind::kMul,           OpKind::kPad,       OpKind::kSlice,
    OpKind::kChannelShuffle, OpKind::kLayerNorm,     OpKind::kHardSwish, OpKind::kHardSigmoid,
    OpKind::kGelu,           OpKind::kChannelMul,
};

TEST(OpTraits, EveryOpHasItsRowAndNameRoundTrips) {
  std::set<std::string> names;
  for (OpKind op : kAllOps) {
    EXPECT_EQ(traits(op).op, op);
    names.insert(op_name(op));
    OpKind back = OpKind::kInput;
    ASSERT_TRUE(parse_op(op_name(op), &back)) << op_name(op);
    EXPECT_EQ(back, op);
  }
  EXPECT_EQ(names.size(), std::size(kAllOps));
  EXPECT_EQ(op_names().size(), std::size(kAllOps));
  OpKind ignored;
  EXPECT_FALSE(parse_op("convolution", &ignored));
}

TEST(OpTraits, RulesFollowFromTheOp) {
  // Windowed ops are exactly the ones with a window attribute; whole-input ops are not
  // brickable; only brickable ops are computed by the generated kernels.
  for (OpKind op : kAllOps) {
    const OpTraits& t = traits(op);
    const bool window_attr = t.has_attribute(Attr::kConvWindow) ||
                             t.has_attribute(Attr::kPoolWindow) ||
                             t.has_attribute(Attr::kAvgPoolWindow);
    // conv_transpose has a conv's window but runs only layer by layer (no receptive rule).
    if (t.brickable)
      EXPECT_EQ(t.windowed(), window_attr) << t.name;
    else
      EXPECT_FALSE(t.windowed()) << t.name;
    if (t.spatial == SpatialRule::kWhole)
      EXPECT_FALSE(t.brickable) << t.name;
    if (t.generated)
      EXPECT_TRUE(t.brickable) << t.name;
    EXPECT_GE(t.min_inputs, op == OpKind::kInput ? 0 : 1) << t.name;
  }
  EXPECT_TRUE(traits(OpKind::kConv).folds_batch_norm);
  EXPECT_TRUE(traits(OpKind::kAdd).takes_epilogue);
  EXPECT_TRUE(traits(OpKind::kLeakyRelu).is_activation);
  EXPECT_EQ(traits(OpKind::kConcat).max_inputs, -1);
}

// A 2-D graph with one layer of every op but the input.
Graph every_op_graph() {
  GraphBuilder b("every_op", TensorShape{1, 8, 1, 8, 8, 2});
  const int c = b.conv2d(b.input(), 8, 3, 2, 1, 2, 2, true, "conv");
  const int n = b.batch_norm(c, "bn");
  const int r = b.relu(n, "relu");
  const int k = b.leaky_relu(r, 0.2f, "leaky");
  const int a = b.add(k, r, "add");
  const int cat = b.concat({a, k}, "cat");
  const int mp = b.max_pool(cat, 3, 1, 1, true, "max");
  const int ap = b.avg_pool(mp, 3, 1, 1, false, "avg");
  const int up0 = b.upsample(ap, 2, true, "up");
  Window tw;
  tw.kernel = {1, 3, 3};
  tw.stride = {1, 2, 2};
  tw.pad = {0, 1, 1};
  const int ct = b.conv_transpose(up0, 16, tw, {0, 1, 1}, 2, true, "deconv");
  const int sg = b.sigmoid(ct, "sig");
  const int sl = b.silu(sg, "silu");
  const int cl = b.clip(sl, -1.0f, 6.0f, "clip");
  const int ml = b.mul(cl, sg, "mul");
  const int sc = b.slice(ml, 2, 14, "slice");
  const int sh = b.channel_shuffle(sc, 3, "shuffle");
  const int ln = b.layer_norm(sh, 1e-6f, "ln");
  const int up = b.pad(ln, {0, 1, 0}, {0, 2, -1}, 0.5f, "pad");
  const int gap = b.global_avg_pool(up, "gap");
  const int fl = b.flatten(gap, "flat");
  b.linear(fl, 10, false, "fc");
  return b.build();
}

TEST(OpTraits, AttributeTextIsTheWorkloadKeyFormat) {
  // Tuning databases share results under signatures made of these strings: a change here
  // orphans every stored result.
  const Graph g = every_op_graph();
  const auto text = [&](const char* name) { return attribute_text(g.layer(g.find(name))); };
  EXPECT_EQ(text("conv"), " k1x3x3 s1x2x2 p0x1x1 d1x2x2 g2 c8 b1");
  EXPECT_EQ(text("bn"), "");
  EXPECT_EQ(text("leaky"), " slope0.2");
  EXPECT_EQ(text("max"), " k1x3x3 s1x1x1 p0x1x1 d1x1x1 ceil");
  EXPECT_EQ(text("avg"), " k1x3x3 s1x1x1 p0x1x1 d1x1x1");
  EXPECT_EQ(text("up"), " x2 bilinear");
  EXPECT_EQ(text("fc"), " c10 b0");
  EXPECT_EQ(text("deconv"), " k1x3x3 s1x2x2 p0x1x1 d1x1x1 op0x1x1 g2 c16 b1");
  EXPECT_EQ(text("clip"), " clip-1:6");
  EXPECT_EQ(text("pad"), " pb0x1x0 pe0x2x-1 v0.5");
  EXPECT_EQ(text("silu"), "");
  EXPECT_EQ(text("slice"), " ch2:14");
  EXPECT_EQ(text("shuffle"), " g3");
  EXPECT_EQ(text("ln"), " eps1e-06");
}

// The canonical text changes with every attribute of the op (so two layers that do
// different work never share a workload signature) and with nothing else.
TEST(OpTraits, AttributeTextChangesWithEveryAttribute) {
  const Graph g = every_op_graph();
  const std::pair<Attr, std::function<void(Layer&)>> changes[] = {
      {Attr::kConvWindow, [](Layer& l) { l.window.dilation[1] += 1; }},
      {Attr::kPoolWindow, [](Layer& l) { l.window.pad[2] += 1; }},
      {Attr::kAvgPoolWindow, [](Layer& l) { l.window.stride[1] += 1; }},
      {Attr::kGroups, [](Layer& l) { l.groups *= 2; }},
      {Attr::kOutChannels, [](Layer& l) { l.out_channels += 1; }},
      {Attr::kOutFeatures, [](Layer& l) { l.out_channels += 1; }},
      {Attr::kBias, [](Layer& l) { l.bias = !l.bias; }},
      {Attr::kCeilMode, [](Layer& l) { l.ceil_mode = !l.ceil_mode; }},
      {Attr::kCountIncludePad, [](Layer& l) { l.count_include_pad = !l.count_include_pad; }},
      {Attr::kScale, [](Layer& l) { l.upsample_scale += 1; }},
      {Attr::kMode, [](Layer& l) { l.bilinear = !l.bilinear; }},
      {Attr::kSlope, [](Layer& l) { l.leaky_slope += 0.25f; }},
      {Attr::kOutputPadding, [](Layer& l) { l.output_pad[2] += 1; }},
      {Attr::kClipRange, [](Layer& l) { l.clip_max += 1.0f; }},
      {Attr::kPads, [](Layer& l) { l.pad_end[1] += 1; }},
      {Attr::kChannelRange, [](Layer& l) { l.slice_begin += 1; }},
      {Attr::kEpsilon, [](Layer& l) { l.epsilon *= 2.0f; }},
  };
  for (const Layer& base : g.layers()) {
    for (const auto& [attr, change] : changes) {
      Layer l = base;
      change(l);
      const bool has = traits(base.op).has_attribute(attr);
      // Windows share their fields: a pool's window change shows in a conv's text too.
      const bool window_field =
          attr == Attr::kConvWindow || attr == Attr::kPoolWindow || attr == Attr::kAvgPoolWindow;
      const bool shows =
          has ||
          (window_field &&
           (traits(base.op).windowed() || traits(base.op).has_attribute(Attr::kConvWindow))) ||
          (attr == Attr::kOutChannels && traits(base.op).has_attribute(Attr::kOutFeatures)) ||
          (attr == Attr::kOutFeatures && traits(base.op).has_attribute(Attr::kOutChannels));
      EXPECT_EQ(attribute_text(l) != attribute_text(base), shows)
          << base.name << " " << static_cast<int>(attr);
    }
  }
}

// Every layer's attribute_json() read back through the YAML reader gives the same layer:
// the JSON keys are the YAML keys, and nothing is lost.
TEST(OpTraits, AttributeJsonReadsBackThroughYaml) {
  const Graph g = every_op_graph();
  std::string yaml = "input: {channels: 8, size: [8, 8]}\nlayers:\n";
  for (const Layer& l : g.layers()) {
    if (l.op == OpKind::kInput)
      continue;
    nlohmann::json j = attribute_json(l);
    // Windows are written as (d, h, w) triples; a 2-D YAML graph takes (h, w).
    for (const char* key :
         {"kernel", "stride", "padding", "dilation", "output_padding", "pad_begin", "pad_end"})
      if (j.contains(key))
        j[key] = {j[key][1], j[key][2]};
    j["op"] = op_name(l.op);
    j["name"] = l.name;
    nlohmann::json inputs = nlohmann::json::array();
    for (int in : l.inputs)
      inputs.push_back(g.layer(in).name);
    j["inputs"] = inputs;
    yaml += "  - " + j.dump() + "\n";
  }
  const Graph back = parse_yaml_graph(yaml, "every_op.yaml");
  ASSERT_EQ(back.size(), g.size());
  for (const Layer& l : g.layers()) {
    const Layer& r = back.layer(l.id);
    EXPECT_EQ(attribute_text(r), attribute_text(l)) << l.name;
    EXPECT_EQ(r.out, l.out) << l.name;
    EXPECT_EQ(r.params, l.params) << l.name;
  }
}

TEST(OpTraits, YamlKeysComeFromTheAttributes) {
  EXPECT_EQ(yaml_layer_keys(OpKind::kRelu), (std::vector<std::string>{"op", "name", "inputs"}));
  const std::vector<std::string> conv = yaml_layer_keys(OpKind::kConv);
  for (Attr a : traits(OpKind::kConv).attributes)
    for (const std::string& k : attribute_keys(a))
      EXPECT_NE(std::find(conv.begin(), conv.end(), k), conv.end()) << k;
  const std::vector<std::string> avg = yaml_layer_keys(OpKind::kAvgPool);
  EXPECT_EQ(std::find(avg.begin(), avg.end(), "dilation"), avg.end());
}

TEST(OpTraits, BrickableNeedsASpatialOutput) {
  GraphBuilder b("flat", TensorShape{2, 4, 1, 4, 4, 2});
  const int f = b.flatten(b.input());
  const int sum = b.add(f, f);
  const Graph g = b.build();
  EXPECT_TRUE(traits(OpKind::kAdd).brickable);
  EXPECT_FALSE(is_brickable(g.layer(sum))); // a flat tensor has no bricks
  EXPECT_FALSE(is_brickable(g.layer(f)));
}

} // namespace
} // namespace brickdl
