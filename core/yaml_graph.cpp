#include "core/yaml_graph.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "core/detail/yaml_reader.h"
#include "core/graph_builder.h"

namespace brickdl {

namespace {

using detail::YamlValue;

const std::vector<std::string> kCommonKeys = {"op", "name", "inputs"};

// The ops a YAML layer may have: all but the graph input.
std::vector<std::string> layer_op_names() {
  std::vector<std::string> v = op_names();
  v.erase(std::remove(v.begin(), v.end(), std::string(op_name(OpKind::kInput))), v.end());
  return v;
}

// One window attribute: an integer for every spatial dim, or one integer per dim (D, H, W
// order). Fills the slots of `dims` that the input rank uses; 2-D leaves the d slot alone.
void read_window_attr(const YamlValue& v, int rank, int min, const SizeLimit& limit,
                      std::array<int, 3>* dims) {
  const int first = 3 - rank;
  if (v.is_scalar()) {
    const int x = static_cast<int>(v.as_size(min, limit));
    for (int a = first; a < 3; ++a)
      (*dims)[static_cast<size_t>(a)] = x;
    return;
  }
  if (!v.is_seq())
    v.fail("expected an integer or a list of " + std::to_string(rank) + " integers, got " +
           v.describe());
  const std::vector<YamlValue> items = v.items("the value");
  if (static_cast<int>(items.size()) != rank)
    v.fail("expected an integer or a list of " + std::to_string(rank) + " integers (the graph " +
           "input is " + std::to_string(rank) + "-D), got a list of " +
           std::to_string(items.size()));
  for (int a = 0; a < rank; ++a)
    (*dims)[static_cast<size_t>(first + a)] =
        static_cast<int>(items[static_cast<size_t>(a)].as_size(min, limit));
}

// Reads `kernel`, `stride`, `padding`, `dilation` of a conv or pool layer. Pools default their
// stride to the kernel, as PyTorch does.
Window read_window(const YamlValue& m, int rank, bool stride_defaults_to_kernel) {
  Window w;
  read_window_attr(m.require("kernel", "the window extent, e.g. kernel: 3"), rank, 1, kMaxKernel,
                   &w.kernel);
  if (m.has("stride")) {
    read_window_attr(m.get("stride"), rank, 1, kMaxWindowParam, &w.stride);
  } else if (stride_defaults_to_kernel) {
    w.stride = w.kernel;
  }
  if (m.has("padding"))
    read_window_attr(m.get("padding"), rank, 0, kMaxWindowParam, &w.pad);
  if (m.has("dilation"))
    read_window_attr(m.get("dilation"), rank, 1, kMaxWindowParam, &w.dilation);
  return w;
}

// A spatial size [H, W] or [D, H, W].
std::vector<int64_t> read_size(const YamlValue& s, const std::string& what) {
  const std::vector<YamlValue> items = s.items(what);
  if (items.size() != 2 && items.size() != 3)
    s.fail("expected [H, W] or [D, H, W], got a list of " + std::to_string(items.size()));
  std::vector<int64_t> size;
  for (const auto& x : items)
    size.push_back(x.as_size(1, kMaxExtent));
  return size;
}

TensorShape shape_of(int64_t batch, int64_t channels, const std::vector<int64_t>& size) {
  TensorShape t;
  t.n = batch;
  t.c = channels;
  t.spatial_rank = static_cast<int>(size.size());
  t.d = size.size() == 3 ? size[0] : 1;
  t.h = size[size.size() - 2];
  t.w = size[size.size() - 1];
  return t;
}

TensorShape read_input(const YamlValue& g, const YamlGraphOptions& options) {
  const YamlValue in = g.get("input");
  if (in.present())
    in.expect_keys({"channels", "size"}, "the graph input");
  std::vector<int64_t> size = options.input_size;
  if (size.empty()) {
    const YamlValue s = in.present() ? in.require("size", "the spatial size, [H, W] or [D, H, W]")
                                     : g.require("input", "the graph input, e.g. input: "
                                                          "{channels: 3, size: [224, 224]}");
    size = read_size(s, "input.size");
  }
  int64_t channels = options.input_channels;
  if (channels <= 0) {
    const YamlValue c = in.present() ? in.require("channels", "the number of input channels")
                                     : g.require("input", "the graph input, e.g. input: "
                                                          "{channels: 3, size: [224, 224]}");
    channels = c.as_size(1, kMaxChannels);
  }
  BRICKDL_CHECK(size.size() == 2 || size.size() == 3, "input size must have 2 or 3 extents");
  return shape_of(options.batch, channels, size);
}

// One entry of `inputs:` (several runtime inputs): {name, channels, size}, all required; every
// input has the spatial rank of the first.
std::pair<std::string, TensorShape> read_named_input(const YamlValue& v,
                                                     const YamlGraphOptions& options, int rank) {
  v.expect_keys({"name", "channels", "size"}, "a graph input");
  const YamlValue n = v.require("name", "the input's name, which layers' `inputs` use");
  const std::string name = n.as_string();
  if (name.empty())
    n.fail("an input name must not be empty");
  const YamlValue s = v.require("size", "the spatial size, [H, W] or [D, H, W]");
  const std::vector<int64_t> size = read_size(s, "size");
  if (rank > 0 && static_cast<int>(size.size()) != rank)
    s.fail("input '" + name + "' is " + std::to_string(size.size()) + "-D; the first input is " +
           std::to_string(rank) + "-D, and every input must have its rank");
  const int64_t channels =
      v.require("channels", "the number of input channels").as_size(1, kMaxChannels);
  return {name, shape_of(options.batch, channels, size)};
}

class GraphReader {
public:
  GraphReader(const YamlValue& root, const YamlGraphOptions& options)
      : root_(root), options_(options) {}

  Graph read() {
    root_.expect_keys({"name", "input", "inputs", "layers", "outputs"}, "the graph");
    const std::string name = root_.has("name") ? root_.get("name").as_string() : options_.name;
    GraphBuilder builder = root_.has("inputs") ? read_inputs_list(name) : one_input(name);

    const YamlValue layers_node =
        root_.require("layers", "the list of layers, e.g. layers: [{op: conv, ...}, ...]");
    const std::vector<YamlValue> layers = layers_node.items("layers");
    if (layers.empty())
      layers_node.fail("the graph needs at least one layer");
    if (static_cast<int64_t>(layers.size()) > kMaxLayers.max)
      layers_node.fail("the graph has " + std::to_string(layers.size()) +
                       " layers: " + limit_text(kMaxLayers));
    // Explicit names, so an input naming a later layer gets a precise message.
    for (size_t i = 0; i < layers.size(); ++i) {
      if (layers[i].is_map() && layers[i].has("name") && layers[i].get("name").is_scalar())
        later_.emplace(layers[i].get("name").node().Scalar(), static_cast<int>(i) + num_inputs_);
    }
    for (const auto& l : layers)
      read_layer(l, builder);
    if (root_.has("outputs"))
      read_outputs(root_.get("outputs"), builder);
    return builder.build();
  }

private:
  // `input: {channels, size}`: one runtime input, layer 0, named `input`.
  GraphBuilder one_input(const std::string& name) {
    const TensorShape input = read_input(root_, options_);
    rank_ = input.spatial_rank;
    ids_["input"] = 0;
    num_inputs_ = 1;
    return GraphBuilder(name, input, options_.dtype);
  }

  // `inputs: [{name, channels, size}, ...]`: several runtime inputs, layers 0, 1, ..., named
  // as given. The first layer without `inputs` reads the last of them.
  GraphBuilder read_inputs_list(const std::string& name) {
    const YamlValue v = root_.get("inputs");
    if (root_.has("input"))
      v.fail("give `input` (one runtime input) or `inputs` (a list), not both");
    if (!options_.input_size.empty() || options_.input_channels > 0)
      v.fail("input_size and input_channels apply to a graph of one `input`; this graph lists "
             "its inputs, each with its own channels and size");
    const std::vector<YamlValue> items = v.items("inputs");
    if (items.empty())
      v.fail("expected at least one input, e.g. inputs: [{name: x, channels: 3, size: [32, 32]}]");
    std::optional<GraphBuilder> builder;
    for (const YamlValue& item : items) {
      item.expect_map("a graph input");
      const auto [input_name, shape] = read_named_input(item, options_, rank_if_known());
      if (ids_.count(input_name))
        item.get("name").fail("duplicate input name '" + input_name + "'");
      try {
        last_id_ = builder ? builder->add_input(shape, input_name) : 0;
        if (!builder)
          builder.emplace(name, shape, options_.dtype, input_name);
      } catch (const ShapeError& e) {
        throw ShapeError(item.where(), e.bare_message());
      }
      rank_ = shape.spatial_rank;
      ids_[input_name] = last_id_;
      ++num_inputs_;
    }
    return std::move(*builder);
  }

  int rank_if_known() const { return num_inputs_ > 0 ? rank_ : 0; }

  // `outputs: [name, ...]` (or one name): the layers whose outputs leave the graph, in order;
  // without it, the last layer.
  void read_outputs(const YamlValue& v, GraphBuilder& builder) const {
    std::vector<YamlValue> names;
    if (v.is_scalar()) {
      names.push_back(v);
    } else if (v.is_seq()) {
      names = v.items("outputs");
      if (names.empty())
        v.fail("expected at least one layer name");
    } else {
      v.fail("expected a layer name or a list of layer names, got " + v.describe());
    }
    for (const YamlValue& n : names) {
      const std::string s = n.as_string();
      const auto it = ids_.find(s);
      if (it == ids_.end()) {
        std::vector<std::string> known;
        for (const auto& [layer, id] : ids_)
          known.push_back(layer);
        n.fail("unknown output '" + s + "'" + did_you_mean(s, known) +
               "; outputs name layers of the graph");
      }
      try {
        builder.mark_output(it->second);
      } catch (const ShapeError& e) {
        throw ShapeError(n.where(), e.bare_message());
      }
    }
  }

  void read_layer(const YamlValue& m, GraphBuilder& builder) {
    m.expect_map("a layer");
    const YamlValue op_node =
        m.require("op", "the layer's operation, one of: " + join_names(layer_op_names()));
    const std::string op_str = op_node.as_string();
    Layer l;
    if (!parse_op(op_str, &l.op) || l.op == OpKind::kInput) {
      op_node.fail("unknown op '" + op_str + "'" + did_you_mean(op_str, layer_op_names()) +
                   "; valid ops: " + join_names(layer_op_names()));
    }
    m.expect_keys(yaml_layer_keys(l.op), std::string("a ") + op_name(l.op) + " layer");

    if (m.has("name")) {
      const YamlValue n = m.get("name");
      l.name = n.as_string();
      if (l.name.empty())
        n.fail("a layer name must not be empty");
      if (ids_.count(l.name))
        n.fail("duplicate layer name '" + l.name + "'" + used_by(l.name));
    }
    l.inputs = read_inputs(m);
    read_attributes(m, &l);

    int id = 0;
    try {
      id = builder.add_layer(l);
    } catch (const ShapeError& e) {
      throw ShapeError(m.where(), e.bare_message());
    }
    const std::string& final_name = builder.layer(id).name;
    if (ids_.count(final_name)) {
      // Only an automatic name can collide here; explicit ones were checked above.
      m.fail("the automatic name '" + final_name + "' of this layer is already used" +
             used_by(final_name) + "; give the layer a `name`");
    }
    ids_[final_name] = id;
    last_id_ = id;
  }

  std::string used_by(const std::string& name) const {
    const int id = ids_.at(name);
    if (id < num_inputs_)
      return num_inputs_ == 1 ? " (it is the graph input)" : " (it is a graph input)";
    return " (by layer " + std::to_string(id) + ")";
  }

  std::vector<int> read_inputs(const YamlValue& m) const {
    if (!m.has("inputs"))
      return {last_id_};
    const YamlValue v = m.get("inputs");
    std::vector<YamlValue> names;
    if (v.is_scalar()) {
      names.push_back(v);
    } else if (v.is_seq()) {
      names = v.items("inputs");
      if (names.empty())
        v.fail("expected at least one input name");
    } else {
      v.fail("expected a layer name or a list of layer names, got " + v.describe());
    }
    std::vector<int> ids;
    for (const auto& n : names) {
      const std::string s = n.as_string();
      const auto it = ids_.find(s);
      if (it != ids_.end()) {
        ids.push_back(it->second);
        continue;
      }
      const auto later = later_.find(s);
      if (later != later_.end())
        n.fail("input '" + s + "' is layer " + std::to_string(later->second) +
               ", which is not defined yet; inputs must name earlier layers");
      std::vector<std::string> known;
      for (const auto& [name, id] : ids_)
        known.push_back(name);
      n.fail("unknown input '" + s + "'" + did_you_mean(s, known) +
             "; inputs name earlier layers or `input`");
    }
    return ids;
  }

  void read_attributes(const YamlValue& m, Layer* l) const {
    for (Attr a : traits(l->op).attributes)
      read_attribute(m, a, l);
  }

  // Long on purpose: one case per attribute kind, in the order of Attr.
  void read_attribute(const YamlValue& m, Attr a, Layer* l) const {
    switch (a) {
    case Attr::kConvWindow: l->window = read_window(m, rank_, false); break;
    case Attr::kPoolWindow:
    case Attr::kAvgPoolWindow: l->window = read_window(m, rank_, true); break;
    case Attr::kGroups:
      if (m.has("groups"))
        l->groups = static_cast<int>(m.get("groups").as_size(1, kMaxChannels));
      break;
    case Attr::kOutChannels:
      l->out_channels =
          m.require("out_channels", "the number of output channels").as_size(1, kMaxChannels);
      break;
    case Attr::kOutFeatures: {
      if (m.has("out_features") && m.has("out_channels"))
        m.get("out_channels").fail("give out_features or out_channels, not both");
      const YamlValue n = m.has("out_channels")
                              ? m.get("out_channels")
                              : m.require("out_features", "the number of output features");
      l->out_channels = n.as_size(1, kMaxFeatures);
      break;
    }
    // As the zoo builds them: a linear layer has a bias unless told otherwise, a conv not.
    case Attr::kBias:
      l->bias = m.has("bias") ? m.get("bias").as_bool() : l->op == OpKind::kLinear;
      break;
    case Attr::kCeilMode:
      if (m.has("ceil_mode"))
        l->ceil_mode = m.get("ceil_mode").as_bool();
      break;
    case Attr::kCountIncludePad:
      if (m.has("count_include_pad"))
        l->count_include_pad = m.get("count_include_pad").as_bool();
      break;
    case Attr::kScale:
      l->upsample_scale = static_cast<int>(
          m.require("scale", "the integer upsampling factor").as_size(1, kMaxWindowParam));
      break;
    case Attr::kMode: {
      if (!m.has("mode"))
        break;
      const YamlValue mode = m.get("mode");
      const std::string s = mode.as_string();
      if (s != "nearest" && s != "bilinear")
        mode.fail("unknown mode '" + s + "'" + did_you_mean(s, {"nearest", "bilinear"}) +
                  "; valid: nearest, bilinear");
      l->bilinear = s == "bilinear";
      break;
    }
    case Attr::kSlope:
      if (m.has("slope"))
        l->leaky_slope = static_cast<float>(m.get("slope").as_double());
      break;
    case Attr::kOutputPadding:
      if (m.has("output_padding"))
        read_window_attr(m.get("output_padding"), rank_, 0, kMaxWindowParam, &l->output_pad);
      break;
    case Attr::kClipRange:
      if (m.has("min"))
        l->clip_min = static_cast<float>(m.get("min").as_double());
      if (m.has("max"))
        l->clip_max = static_cast<float>(m.get("max").as_double());
      break;
    case Attr::kPads: read_pads(m, l); break;
    case Attr::kChannelRange:
      if (m.has("begin"))
        l->slice_begin = m.get("begin").as_size(0, kMaxChannels);
      l->slice_end =
          m.require("end", "the end of the channel range (exclusive)").as_size(1, kMaxChannels);
      break;
    case Attr::kEpsilon:
      if (m.has("epsilon"))
        l->epsilon = static_cast<float>(m.get("epsilon").as_double(0.0));
      break;
    }
  }

  // pad_begin / pad_end: an integer for every dim or one per dim (negative crops); value.
  void read_pads(const YamlValue& m, Layer* l) const {
    for (const auto& [key, dims] :
         {std::pair{"pad_begin", &l->pad_begin}, std::pair{"pad_end", &l->pad_end}}) {
      if (m.has(key))
        read_window_attr(m.get(key), rank_, -kMaxWindowParam.max, kMaxWindowParam, dims);
    }
    if (m.has("value"))
      l->pad_value = static_cast<float>(m.get("value").as_double());
  }

  const YamlValue& root_;
  const YamlGraphOptions& options_;
  int rank_ = 2;
  int num_inputs_ = 0;
  int last_id_ = 0;
  std::map<std::string, int> ids_;   // names defined so far
  std::map<std::string, int> later_; // explicit names of all layers (1-based position)
};

} // namespace

std::vector<std::string> yaml_layer_keys(OpKind op) {
  std::vector<std::string> keys = kCommonKeys;
  for (Attr a : traits(op).attributes)
    for (auto& k : attribute_keys(a))
      keys.push_back(std::move(k));
  return keys;
}

Graph build_yaml_graph(const YAML::Node& node, const SourceLocation& where,
                       const YamlGraphOptions& options) {
  const YamlValue root(node, where.file, where.key, YAML::Mark::null_mark());
  return GraphReader(root, options).read();
}

Graph parse_yaml_graph(const std::string& yaml_text, const std::string& file,
                       const YamlGraphOptions& options) {
  const YamlValue root = detail::parse_yaml(yaml_text, file);
  return GraphReader(root, options).read();
}

Graph load_yaml_graph(const std::string& path, const YamlGraphOptions& options) {
  const YamlValue root = detail::load_yaml_file(path);
  return GraphReader(root, options).read();
}

} // namespace brickdl
