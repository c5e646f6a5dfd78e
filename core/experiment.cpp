#include "core/experiment.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/detail/yaml_reader.h"
#include "core/error.h"
#include "core/onnx.h"
#include "core/yaml_graph.h"
#include "core/zoo.h"

namespace brickdl {

namespace {

using detail::YamlValue;

const std::vector<std::string> kTopKeys = {"name",           "model",     "batch",    "input_size",
                                           "input_channels", "precision", "target",   "search",
                                           "measurement",    "seed",      "database", "output"};
const std::vector<std::string> kSearchKeys = {"brick_sizes", "channel_blocks", "batch_blocks",
                                              "clusters",    "max_group_len",  "strategies",
                                              "threads",     "searcher",       "random_samples",
                                              "partitions",  "subgraphs",      "brick_depths"};
const std::vector<std::string> kMeasurementKeys = {
    "backend",  "warmup",           "repetitions",      "top_k",       "counters",
    "flush_l2", "collect_counters", "timeout_s",        "cpu_threads", "rtol",
    "atol",     "budget_s",         "max_measurements", "plan_check"};
const std::vector<std::string> kZooKeys = {"zoo", "num_classes"};
const std::vector<std::string> kConvChainKeys = {"zoo",        "depth", "channels", "kernel",
                                                 "image",      "dims",  "stride",   "dilation",
                                                 "batch_norm", "relu"};
const std::vector<std::string> kInlineGraphKeys = {"name", "input", "inputs", "layers", "outputs"};
constexpr const char* kConvChain = "conv_chain";

// Brick extents: powers of two from 1 to 64, so bricks tile the power-of-two extents common in
// CNNs. 64 bounds the space (a 64^3 fp32 brick is 1 MiB, far beyond any on-chip memory);
// whether a size fits a given group on a given GPU is the model's call, not the loader's.
constexpr int kMaxBrick = static_cast<int>(kMaxBrickExtent.max);
constexpr int kMinThreads = 32;
constexpr int kMaxThreads = 1024;

const char* const kMinimalExample =
    "a minimal experiment is:\n  model: resnet50\n  batch: 8\n  target: {gpu: A100-40GB}";

bool is_power_of_two(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}

// Reads a name from `valid`; an unknown one fails with a suggestion and the valid names.
std::string read_choice(const YamlValue& v, const std::vector<std::string>& valid,
                        const std::string& what) {
  const std::string s = v.as_string();
  if (std::find(valid.begin(), valid.end(), s) == valid.end())
    v.fail("unknown " + what + " '" + s + "'" + did_you_mean(s, valid) +
           "; valid: " + join_names(valid));
  return s;
}

// A name that another module's registry checks later: non-empty; `*where` records its place.
std::string read_name(const YamlValue& v, SourceLocation* where) {
  const std::string s = v.as_string();
  if (s.empty())
    v.fail("expected a name, got an empty string");
  *where = v.where();
  return s;
}

// A non-empty list of unique integers, each checked by `check` (which fails on the item).
template <typename Check>
std::vector<int> read_unique_ints(const YamlValue& v, const std::string& what, Check check) {
  const std::vector<YamlValue> items = v.items(what);
  if (items.empty())
    v.fail("expected at least one value in " + what);
  if (static_cast<int64_t>(items.size()) > kMaxSearchValues.max)
    v.fail(what + " has " + std::to_string(items.size()) +
           " values: " + limit_text(kMaxSearchValues));
  std::vector<int> out;
  for (const auto& item : items) {
    const int x = item.as_int();
    check(item, x);
    if (std::find(out.begin(), out.end(), x) != out.end())
      item.fail(std::to_string(x) + " is listed twice in " + what);
    out.push_back(x);
  }
  return out;
}

// ---- target --------------------------------------------------------------------------------

// A GpuSpec field that an experiment may set by name.
struct GpuField {
  const char* name;
  double GpuSpec::*real = nullptr;
  int GpuSpec::*integer = nullptr;
  bool required_for_custom = true; // false: the field has a sensible default
  bool may_be_zero = false;        // costs that a study may switch off
};

const std::vector<GpuField>& gpu_fields() {
  static const std::vector<GpuField> fields = {
      {"dram_bandwidth_gbs", &GpuSpec::dram_bandwidth_gbs},
      {"dram_gb", &GpuSpec::dram_gb},
      {"l2_bytes", &GpuSpec::l2_bytes},
      {"l2_bandwidth_gbs", &GpuSpec::l2_bandwidth_gbs},
      {"smem_per_sm_bytes", &GpuSpec::smem_per_sm_bytes},
      {"smem_per_block_bytes", &GpuSpec::smem_per_block_bytes},
      {"smem_bandwidth_gbs", &GpuSpec::smem_bandwidth_gbs, nullptr, false, true},
      {"registers_per_sm", nullptr, &GpuSpec::registers_per_sm},
      {"registers_per_thread_max", nullptr, &GpuSpec::registers_per_thread_max, false},
      {"sm_count", nullptr, &GpuSpec::sm_count},
      {"max_threads_per_sm", nullptr, &GpuSpec::max_threads_per_sm},
      {"max_threads_per_block", nullptr, &GpuSpec::max_threads_per_block, false},
      {"fp32_tflops", &GpuSpec::fp32_tflops},
      {"tf32_tflops", &GpuSpec::tf32_tflops},
      {"bf16_tflops", &GpuSpec::bf16_tflops},
      {"fp16_tflops", &GpuSpec::fp16_tflops},
      {"mma_sync_fraction", &GpuSpec::mma_sync_fraction, nullptr, false},
      {"wgmma_fraction", &GpuSpec::wgmma_fraction, nullptr, false, true},
      {"max_cluster", nullptr, &GpuSpec::max_cluster, false},
      {"launch_overhead_us", &GpuSpec::launch_overhead_us, nullptr, true, true},
      {"atomic_ns", &GpuSpec::atomic_ns, nullptr, true, true},
  };
  return fields;
}

std::vector<std::string> target_keys() {
  std::vector<std::string> keys = {"gpu", "source", "calibration"};
  for (const auto& f : gpu_fields())
    keys.emplace_back(f.name);
  return keys;
}

// The spec `gpu:` names: a named spec, or an empty "custom" one once every required field
// is present in `t`.
GpuSpec base_spec(const YamlValue& t, const YamlValue& gpu) {
  std::vector<std::string> valid_gpus = gpu_spec_names();
  valid_gpus.push_back("custom");
  const std::string g = gpu.as_string();
  if (g != "custom") {
    const GpuSpec* named = find_gpu_spec(g);
    if (!named)
      gpu.fail("unknown GPU '" + g + "'" + did_you_mean(g, valid_gpus) +
               "; valid: " + join_names(valid_gpus));
    return *named;
  }
  GpuSpec spec;
  spec.name = "custom";
  spec.source = "given in " + (t.file().empty() ? std::string("the experiment") : t.file());
  std::vector<std::string> required;
  for (const auto& f : gpu_fields())
    if (f.required_for_custom)
      required.emplace_back(f.name);
  for (const auto& name : required) {
    if (!t.has(name))
      t.fail("gpu: custom needs every GPU field; missing '" + name +
             "'; required: " + join_names(required));
  }
  return spec;
}

// Applies the GpuSpec fields `t` gives; returns their names.
std::vector<std::string> override_fields(const YamlValue& t, GpuSpec* spec) {
  std::vector<std::string> overridden;
  for (const auto& f : gpu_fields()) {
    if (!t.has(f.name))
      continue;
    const YamlValue v = t.get(f.name);
    if (f.real) {
      spec->*f.real = v.as_double(0, !f.may_be_zero);
    } else {
      spec->*f.integer = v.as_int(1);
    }
    overridden.emplace_back(f.name);
  }
  return overridden;
}

// `explicit_fields` (optional) receives the GpuSpec fields the target sets itself.
GpuSpec read_target(const YamlValue& root, std::vector<std::string>* explicit_fields = nullptr) {
  std::vector<std::string> valid_gpus = gpu_spec_names();
  valid_gpus.push_back("custom");
  const YamlValue t = root.require("target", "the GPU the experiment targets, e.g. target: "
                                             "{gpu: A100-40GB}; named GPUs: " +
                                                 join_names(gpu_spec_names()));
  // `target: H200` is shorthand for `target: {gpu: H200}`.
  if (t.is_scalar()) {
    const std::string g = t.as_string();
    const GpuSpec* spec = find_gpu_spec(g);
    if (!spec)
      t.fail("unknown GPU '" + g + "'" + did_you_mean(g, gpu_spec_names()) +
             "; valid: " + join_names(gpu_spec_names()));
    return *spec;
  }
  t.expect_keys(target_keys(), "target");
  GpuSpec spec = base_spec(t, t.require("gpu", "a named GPU (" + join_names(valid_gpus) + ")"));
  const std::vector<std::string> overridden = override_fields(t, &spec);
  if (explicit_fields)
    *explicit_fields = overridden;
  if (t.has("source"))
    spec.source = t.get("source").as_string();
  if (spec.name != "custom" && !overridden.empty())
    spec.source += "; overridden by the experiment: " + join_names(overridden);
  if (spec.smem_per_block_bytes > spec.smem_per_sm_bytes)
    t.fail(fmt::format("smem_per_block_bytes ({:g}) exceeds smem_per_sm_bytes ({:g})",
                       spec.smem_per_block_bytes, spec.smem_per_sm_bytes));
  if (spec.max_threads_per_block > spec.max_threads_per_sm)
    t.fail(fmt::format("max_threads_per_block ({}) exceeds max_threads_per_sm ({})",
                       spec.max_threads_per_block, spec.max_threads_per_sm));
  return spec;
}

// ---- model ---------------------------------------------------------------------------------

std::vector<std::string> model_names() {
  std::vector<std::string> names = zoo_names();
  if (std::find(names.begin(), names.end(), kConvChain) == names.end())
    names.emplace_back(kConvChain);
  return names;
}

std::string overrides_note(const ExperimentConfig& cfg) {
  std::string s;
  if (!cfg.input_size.empty()) {
    std::vector<int> v(cfg.input_size.begin(), cfg.input_size.end());
    s += " with input_size " + detail::list_str(v);
  }
  if (cfg.input_channels > 0)
    s += (s.empty() ? " with" : " and") + std::string(" input_channels ") +
         std::to_string(cfg.input_channels);
  return s;
}

Graph read_conv_chain(const YamlValue& m, const ExperimentConfig& cfg,
                      const YamlValue& input_size_node) {
  ConvChainOptions o;
  o.batch = cfg.batch;
  o.dtype = cfg.precision;
  if (m.is_map()) {
    if (m.has("depth"))
      o.depth = static_cast<int>(m.get("depth").as_size(1, kMaxLayers));
    if (m.has("channels"))
      o.channels = m.get("channels").as_size(1, kMaxChannels);
    if (m.has("kernel"))
      o.kernel = static_cast<int>(m.get("kernel").as_size(1, kMaxKernel));
    if (m.has("image"))
      o.image = m.get("image").as_size(1, kMaxExtent);
    if (m.has("dims")) {
      const YamlValue d = m.get("dims");
      o.dims = d.as_int(2, 3);
    }
    if (m.has("stride"))
      o.stride = static_cast<int>(m.get("stride").as_size(1, kMaxWindowParam));
    if (m.has("dilation"))
      o.dilation = static_cast<int>(m.get("dilation").as_size(1, kMaxWindowParam));
    if (m.has("batch_norm"))
      o.batch_norm = m.get("batch_norm").as_bool();
    if (m.has("relu"))
      o.relu = m.get("relu").as_bool();
  }
  if (!cfg.input_size.empty()) {
    // input_size overrides model.image and model.dims, as brickdl-run --input-size does.
    if (m.is_map() && m.has("dims") && o.dims != static_cast<int>(cfg.input_size.size()))
      input_size_node.fail("model.dims is " + std::to_string(o.dims) + ", but input_size has " +
                           std::to_string(cfg.input_size.size()) + " extents");
    o.input_size = cfg.input_size;
  }
  if (cfg.input_channels > 0)
    o.channels = cfg.input_channels;
  return build_conv_chain(o);
}

// Errors of the zoo builders carry no position; the loader's own errors do.
bool has_location(const UserError& e) {
  return !e.where().file.empty() || e.where().line > 0;
}

void read_inline_graph(const YamlValue& m, ExperimentConfig* cfg) {
  if (!m.has("layers") && !m.has("input") && !m.has("inputs")) {
    m.fail("expected `zoo: <name>` (a zoo model with parameters) or an inline graph with "
           "`input:` and `layers:`");
  }
  m.expect_keys(kInlineGraphKeys, "an inline graph");
  YamlGraphOptions o;
  o.name = cfg->name.empty() ? std::string("custom") : cfg->name;
  o.batch = cfg->batch;
  o.dtype = cfg->precision;
  o.input_size = cfg->input_size;
  o.input_channels = cfg->input_channels;
  cfg->model = "custom";
  cfg->graph = build_yaml_graph(m.node(), SourceLocation{m.file(), 0, 0, m.path()}, o);
}

// The zoo name of `model:` (a name, or {zoo: name, ...parameters}), checked.
std::string zoo_model_name(const YamlValue& m) {
  const YamlValue name_node = m.is_map() ? m.get("zoo") : m;
  if (!name_node.is_scalar())
    name_node.fail("expected a zoo model name (" + join_names(model_names()) +
                   ") or a mapping, got " + name_node.describe());
  const std::string name = name_node.as_string();
  const std::vector<std::string> names = model_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    name_node.fail("unknown model '" + name + "'" + did_you_mean(name, names) +
                   "; valid: " + join_names(names));
  if (m.is_map())
    m.expect_keys(name == kConvChain ? kConvChainKeys : kZooKeys,
                  "the parameters of model " + name);
  return name;
}

Graph build_zoo_graph(const YamlValue& m, const std::string& name, const ExperimentConfig& cfg,
                      const YamlValue& input_size_node) {
  ZooOptions o;
  o.batch = cfg.batch;
  o.dtype = cfg.precision;
  o.input_size = cfg.input_size;
  o.input_channels = cfg.input_channels;
  if (m.is_map() && m.has("num_classes"))
    o.num_classes = m.get("num_classes").as_size(1, kMaxFeatures);
  if (!cfg.input_size.empty()) {
    // Learn the model's rank from its default build, so a 3-D size for a 2-D model gets a
    // clear message instead of whatever the builder makes of it.
    ZooOptions plain;
    plain.dtype = cfg.precision;
    const int rank = build_zoo_model(name, plain).input_shape().spatial_rank;
    if (rank != static_cast<int>(cfg.input_size.size()))
      input_size_node.fail("model " + name + " is " + std::to_string(rank) +
                           "-D; input_size needs " + std::to_string(rank) + " extents (" +
                           (rank == 3 ? "[D, H, W]" : "[H, W]") + ")");
  }
  return build_zoo_model(name, o);
}

// A path the experiment gives, relative to `base` (the experiment file's folder; empty for the
// working directory) unless absolute.
std::filesystem::path resolve(const std::filesystem::path& base, const std::string& given) {
  const std::filesystem::path path(given);
  return path.is_relative() ? base / path : path;
}

// `model: path.onnx`, relative to `base`. The file's batch and input size unless the experiment
// gives them (a dynamic one must be given); its channels are the model's own.
void read_onnx_model(const YamlValue& root, const YamlValue& m, const std::filesystem::path& base,
                     ExperimentConfig* cfg) {
  const std::string given = m.as_string();
  const std::filesystem::path path = resolve(base, given);
  OnnxImportOptions o;
  o.name = cfg->name.empty() ? path.stem().string() : cfg->name;
  o.batch = root.has("batch") || cfg->overrides.batch ? cfg->batch : 0;
  o.input_size = cfg->input_size;
  o.dtype = cfg->precision;
  cfg->model = given;
  try {
    OnnxModel model = import_onnx(path.string(), o);
    cfg->graph = std::move(model.graph);
  } catch (const UserError& e) {
    // The importer's messages start with the file; a message that does not is prefixed. A
    // missing file says where a relative path was looked for.
    const std::string& why = e.bare_message();
    std::string note;
    if (path != given && !std::filesystem::exists(path))
      note = fmt::format(" ('{}' is relative to the experiment file's folder, {})", given,
                         base.string());
    throw UserError(m.where(),
                    (why.rfind(path.string() + ":", 0) == 0 ? why : "model " + given + ": " + why) +
                        note);
  }
  cfg->batch = cfg->graph.batch();
  if (cfg->input_channels > 0 && cfg->graph.num_inputs() > 1)
    root.get("input_channels")
        .fail(fmt::format("model {} has {} runtime inputs; input_channels applies to a model of "
                          "one (and cannot change an ONNX model's weights)",
                          given, cfg->graph.num_inputs()));
  if (cfg->input_channels > 0 && cfg->input_channels != cfg->graph.input_shape().c)
    root.get("input_channels")
        .fail(fmt::format("model {} takes {} input channels; input_channels cannot change an "
                          "ONNX model's weights",
                          given, cfg->graph.input_shape().c));
}

// Builds the graph of `model:`; every error carries the position of the model (or, for a
// rank mismatch, of input_size).
void read_model(const YamlValue& root, const std::filesystem::path& base, ExperimentConfig* cfg) {
  const YamlValue m = root.require("model", "a zoo model name (" + join_names(model_names()) +
                                                "), an ONNX file (path.onnx) or an inline graph");
  if (m.is_map() && !m.has("zoo")) {
    read_inline_graph(m, cfg);
    return;
  }
  if (m.is_scalar() && is_onnx_path(m.as_string())) {
    read_onnx_model(root, m, base, cfg);
    return;
  }
  const std::string name = zoo_model_name(m);
  cfg->model = name;
  const YamlValue input_size_node = root.get("input_size");
  try {
    cfg->graph = name == kConvChain ? read_conv_chain(m, *cfg, input_size_node)
                                    : build_zoo_graph(m, name, *cfg, input_size_node);
  } catch (const ShapeError& e) {
    if (has_location(e))
      throw;
    throw ShapeError(m.where(),
                     "model " + name + overrides_note(*cfg) + " does not fit: " + e.bare_message());
  } catch (const UserError& e) {
    if (has_location(e))
      throw;
    throw UserError(m.where(), "model " + name + overrides_note(*cfg) + ": " + e.bare_message());
  }
}

// ---- search --------------------------------------------------------------------------------

void read_partitions(const YamlValue& v, const ExperimentConfig& cfg, SearchSpaceConfig* search) {
  // Partitions split the fused graph (batch-norms and activations folded), the graph the
  // search partitions; the inputs (layer 0, or several) are in no group.
  const Graph fused = fuse_for_inference(cfg.graph);
  const int layers = fused.size() - fused.num_inputs();
  const std::vector<YamlValue> items = v.items("search.partitions");
  for (const auto& p : items) {
    const std::vector<YamlValue> groups = p.items("a partition (a list of group lengths)");
    if (groups.empty())
      p.fail("a partition needs at least one group length");
    std::vector<int> lengths;
    int sum = 0;
    for (const auto& g : groups) {
      lengths.push_back(g.as_int(1));
      sum += lengths.back();
    }
    if (sum != layers)
      p.fail("partition " + detail::list_str(lengths) + " covers " + std::to_string(sum) +
             " layers, but the fused graph has " + std::to_string(layers) +
             " (batch-norms and activations folded, the inputs not counted)");
    search->partitions.push_back(lengths);
  }
}

void read_subgraphs(const YamlValue& v, const ExperimentConfig& cfg, SearchSpaceConfig* search) {
  std::vector<std::string> layer_names;
  for (const auto& l : cfg.graph.layers())
    layer_names.push_back(l.name);
  const auto find_layer = [&](const YamlValue& n) {
    const std::string s = n.as_string();
    const int id = cfg.graph.find(s);
    if (id < 0)
      n.fail("no layer named '" + s + "' in model " + cfg.model + did_you_mean(s, layer_names) +
             " (brickdl-tune --describe lists the layers)");
    if (id == 0)
      n.fail("the graph input is not a layer a subgraph can hold");
    return id;
  };
  std::set<std::string> names;
  for (const auto& s : v.items("search.subgraphs")) {
    s.expect_keys({"name", "first", "last"}, "a subgraph");
    SearchSpaceConfig::Subgraph sub;
    const YamlValue first = s.require("first", "the name of the subgraph's first layer");
    const YamlValue last = s.require("last", "the name of the subgraph's last layer");
    const int a = find_layer(first);
    const int b = find_layer(last);
    if (a > b)
      last.fail("layer '" + last.as_string() + "' (layer " + std::to_string(b) +
                ") comes before first layer '" + first.as_string() + "' (layer " +
                std::to_string(a) + ")");
    sub.first = first.as_string();
    sub.last = last.as_string();
    sub.name = s.has("name") ? s.get("name").as_string() : sub.first + ".." + sub.last;
    if (!names.insert(sub.name).second)
      (s.has("name") ? s.get("name") : s).fail("duplicate subgraph name '" + sub.name + "'");
    search->subgraphs.push_back(sub);
  }
}

// search.brick_sizes, brick_depths, channel_blocks, batch_blocks and clusters: the lists a brick
// is built from.
void read_brick_lists(const YamlValue& v, SearchSpaceConfig* s) {
  if (v.has("brick_sizes")) {
    s->brick_sizes = read_unique_ints(
        v.get("brick_sizes"), "search.brick_sizes", [](const YamlValue& item, int x) {
          if (!is_power_of_two(x) || x > kMaxBrick)
            item.fail("a brick size must be a power of two from 1 to " + std::to_string(kMaxBrick) +
                      " (1, 2, 4, 8, 16, 32, 64), got " + std::to_string(x));
        });
  }
  if (v.has("brick_depths")) {
    s->brick_depths = read_unique_ints(
        v.get("brick_depths"), "search.brick_depths", [](const YamlValue& item, int x) {
          if (!is_power_of_two(x) || x > kMaxBrick)
            item.fail("a brick depth must be a power of two from 1 to " +
                      std::to_string(kMaxBrick) + " (1, 2, 4, 8, 16, 32, 64), got " +
                      std::to_string(x));
        });
  }
  if (v.has("channel_blocks")) {
    s->channel_blocks = read_unique_ints(
        v.get("channel_blocks"), "search.channel_blocks", [](const YamlValue& item, int x) {
          if (x < 0 || x > kMaxChannels.max)
            item.fail("a channel block must be >= 0 (0 = all channels) and <= " +
                      std::to_string(kMaxChannels.max) + ", got " + std::to_string(x));
        });
  }
  if (v.has("batch_blocks")) {
    s->batch_blocks = read_unique_ints(
        v.get("batch_blocks"), "search.batch_blocks", [](const YamlValue& item, int x) {
          if (x < 1 || x > kMaxBatchBlock)
            item.fail("a batch block (images per unit of work) must be an integer from 1 to " +
                      std::to_string(kMaxBatchBlock) + ", got " + std::to_string(x));
        });
  }
  if (v.has("clusters")) {
    s->clusters =
        read_unique_ints(v.get("clusters"), "search.clusters", [](const YamlValue& item, int x) {
          if (x < 1 || x > kMaxCluster)
            item.fail("a thread block cluster (CTAs per unit) must be an integer from 1 to " +
                      std::to_string(kMaxCluster) + ", got " + std::to_string(x));
        });
  }
}

// The work of a search of `s`, bounded (kMaxSearchWork): fused layers x (1 + ... + longest
// group) x configurations, an upper bound of the layers of the candidates the space holds.
void check_search_size(const YamlValue& v, const ExperimentConfig& cfg,
                       const SearchSpaceConfig& s) {
  const Graph fused = fuse_for_inference(cfg.graph);
  const int64_t layers = fused.size() - fused.num_inputs();
  const int64_t lengths = std::min<int64_t>(s.max_group_len, layers);
  int64_t bricked = 0;
  for (Strategy st : s.strategies)
    bricked += st == Strategy::kLayerwise ? 0 : 1;
  const int64_t depths = std::max<int64_t>(1, static_cast<int64_t>(s.brick_depths.size()));
  const int64_t configs = int64_t{1} + bricked * static_cast<int64_t>(s.brick_sizes.size()) *
                                           depths * static_cast<int64_t>(s.channel_blocks.size()) *
                                           static_cast<int64_t>(s.batch_blocks.size()) *
                                           static_cast<int64_t>(s.clusters.size()) *
                                           static_cast<int64_t>(s.threads.size());
  const int64_t work = saturating_mul(saturating_mul(layers, lengths * (lengths + 1) / 2), configs);
  if (work > kMaxSearchWork.max)
    v.fail(fmt::format("this search may predict {} candidate layers ({} fused layers x groups of "
                       "1 to {} layers x {} configurations): {}; shorten the search lists or "
                       "max_group_len",
                       work, layers, lengths, configs, limit_text(kMaxSearchWork)));
}

SearchSpaceConfig read_search(const YamlValue& root, const ExperimentConfig& cfg) {
  SearchSpaceConfig s;
  const YamlValue v = root.get("search");
  if (!v.present())
    return s;
  v.expect_keys(kSearchKeys, "search");
  read_brick_lists(v, &s);
  if (v.has("max_group_len"))
    s.max_group_len = static_cast<int>(v.get("max_group_len").as_size(1, kMaxGroupLength));
  if (v.has("strategies")) {
    const YamlValue list = v.get("strategies");
    const std::vector<YamlValue> items = list.items("search.strategies");
    if (items.empty())
      list.fail("expected at least one strategy (" + join_names(strategy_names()) + ")");
    s.strategies.clear();
    const std::vector<std::string> valid = strategy_names();
    for (const auto& item : items) {
      Strategy st;
      parse_strategy(read_choice(item, valid, "strategy"), &st);
      if (std::find(s.strategies.begin(), s.strategies.end(), st) != s.strategies.end())
        item.fail(std::string(strategy_name(st)) + " is listed twice in search.strategies");
      s.strategies.push_back(st);
    }
  }
  if (v.has("threads")) {
    s.threads =
        read_unique_ints(v.get("threads"), "search.threads", [](const YamlValue& item, int x) {
          if (x < kMinThreads || x > kMaxThreads || x % 32 != 0)
            item.fail("threads per block must be a multiple of 32 from 32 to 1024, got " +
                      std::to_string(x));
        });
  }
  if (v.has("searcher"))
    s.searcher = read_name(v.get("searcher"), &s.searcher_at);
  if (v.has("random_samples"))
    s.random_samples = static_cast<int>(v.get("random_samples").as_size(1, kMaxRandomSamples));
  if (v.has("partitions"))
    read_partitions(v.get("partitions"), cfg, &s);
  if (v.has("subgraphs"))
    read_subgraphs(v.get("subgraphs"), cfg, &s);
  check_search_size(v, cfg, s);
  return s;
}

// ---- measurement ---------------------------------------------------------------------------

MeasurementConfig read_measurement(const YamlValue& root, uint64_t seed) {
  MeasurementConfig m;
  m.options.seed = seed;
  const YamlValue v = root.get("measurement");
  if (!v.present())
    return m;
  v.expect_keys(kMeasurementKeys, "measurement");
  MeasureOptions& o = m.options;
  if (v.has("backend"))
    m.backend = read_name(v.get("backend"), &m.backend_at);
  if (v.has("warmup"))
    o.warmup = v.get("warmup").as_int(0);
  if (v.has("repetitions"))
    o.repetitions = v.get("repetitions").as_int(1);
  if (v.has("top_k"))
    m.top_k = v.get("top_k").as_int(1);
  if (v.has("counters")) {
    for (const auto& c : v.get("counters").items("measurement.counters")) {
      const std::string name = c.as_string();
      if (name.empty())
        c.fail("a counter name must not be empty");
      m.counters.push_back(name);
    }
  }
  if (v.has("flush_l2"))
    o.flush_l2 = v.get("flush_l2").as_bool();
  if (v.has("collect_counters"))
    o.collect_counters = v.get("collect_counters").as_bool();
  if (v.has("timeout_s"))
    o.timeout_s = v.get("timeout_s").as_double(0, true);
  if (v.has("cpu_threads"))
    m.cpu_threads = v.get("cpu_threads").as_int(0);
  if (v.has("rtol"))
    o.rtol = v.get("rtol").as_double(0, true);
  if (v.has("atol"))
    o.atol = v.get("atol").as_double(0);
  if (v.has("budget_s"))
    m.budget_s = v.get("budget_s").as_double(0);
  if (v.has("max_measurements"))
    m.max_measurements = v.get("max_measurements").as_int(0);
  if (v.has("plan_check"))
    m.plan_check = v.get("plan_check").as_bool();
  return m;
}

// ---- the whole file ------------------------------------------------------------------------

// ---- command-line overrides ----------------------------------------------------------------

SourceLocation flag_location(const char* flag) {
  return SourceLocation{"the command line", 0, 0, flag};
}

// Applies the batch, precision and input size of `o` (checked as the file's would be).
void apply_overrides(const ExperimentOverrides& o, ExperimentConfig* cfg) {
  if (o.batch) {
    if (*o.batch < 1 || *o.batch > kMaxBatch.max)
      throw UserError(flag_location("--batch"),
                      fmt::format("the batch must be 1 to {}, got {}", kMaxBatch.max, *o.batch));
    cfg->batch = *o.batch;
  }
  if (o.precision) {
    if (!parse_dtype(*o.precision, &cfg->precision))
      throw UserError(flag_location("--precision"), "unknown precision '" + *o.precision + "'" +
                                                        did_you_mean(*o.precision, dtype_names()) +
                                                        "; valid: " + join_names(dtype_names()));
    cfg->precision_at = flag_location("--precision");
  }
  if (!o.input_size.empty()) {
    if (o.input_size.size() != 2 && o.input_size.size() != 3)
      throw UserError(flag_location("--input-size"),
                      fmt::format("expected H,W or D,H,W, got {} values", o.input_size.size()));
    for (int64_t x : o.input_size)
      if (x < 1 || x > kMaxExtent.max)
        throw UserError(flag_location("--input-size"),
                        fmt::format("each extent must be 1 to {}, got {}", kMaxExtent.max, x));
    cfg->input_size = o.input_size;
  }
}

// The GPU spec `--target` names; the file's own target (and its fields) is not read.
GpuSpec override_target(const std::string& name) {
  const GpuSpec* spec = find_gpu_spec(name);
  if (!spec)
    throw UserError(flag_location("--target"), "unknown GPU '" + name + "'" +
                                                   did_you_mean(name, gpu_spec_names()) +
                                                   "; valid: " + join_names(gpu_spec_names()));
  return *spec;
}

// The device calibration of the target (--calibration, relative to the working directory, else
// target.calibration, relative to `base`, unless --target replaced the file's target), applied
// over cfg->gpu for the experiment's precision. `explicit_fields`: the GpuSpec fields the target
// sets itself, which keep their values.
void read_calibration(const YamlValue& root, const ExperimentOverrides& o,
                      const std::vector<std::string>& explicit_fields,
                      const std::filesystem::path& base, ExperimentConfig* cfg) {
  std::string path, given_by;
  SourceLocation at;
  if (o.calibration) {
    path = *o.calibration;
    given_by = "--calibration";
    at = flag_location("--calibration");
    if (path.empty())
      throw UserError(at, "expected the path of a calibration file, got an empty one");
  } else if (!o.gpu && root.get("target").is_map() && root.get("target").has("calibration")) {
    const YamlValue v = root.get("target").get("calibration");
    path = v.as_string();
    if (path.empty())
      v.fail("expected the path of a calibration file, got an empty one");
    given_by = "target.calibration";
    at = v.where();
    // Relative to the experiment file, as an ONNX model is: the two travel together.
    path = resolve(base, path).lexically_normal().string();
  } else {
    return;
  }
  const GpuCalibration cal = read_gpu_calibration(path, at);
  AppliedCalibration applied =
      apply_gpu_calibration(cal, cfg->precision, explicit_fields, &cfg->gpu);
  applied.file = o.calibration ? *o.calibration : root.get("target").get("calibration").as_string();
  applied.given_by = given_by;
  cfg->calibration = std::move(applied);
}

// The output folder: `output`, else out/<name>; with overrides, "-<their values>" appended (a
// run with other values does not overwrite the file's own).
std::string output_folder(const YamlValue& root, const std::string& name,
                          const ExperimentOverrides& overrides) {
  std::string dir = "out/" + name;
  if (root.has("output")) {
    dir = root.get("output").as_string();
    if (dir.empty())
      root.get("output").fail("the output folder must not be empty");
  }
  if (!overrides.empty()) { // a run with other values does not overwrite the file's own
    std::string suffix;     // "H200, tf32, batch 8" → "-H200-tf32-batch-8"
    for (char c : overrides.describe()) {
      const bool keep = std::isalnum(static_cast<unsigned char>(c)) != 0;
      if (keep || suffix.empty() || suffix.back() != '-')
        suffix += keep ? c : '-';
    }
    while (!suffix.empty() && suffix.back() == '-')
      suffix.pop_back();
    dir += "-" + suffix;
  }
  return dir;
}

// The experiment of `root`; the paths it gives (an ONNX model, a calibration) are relative to
// `base`.
ExperimentConfig read_experiment(const YamlValue& root, const ExperimentOverrides& overrides,
                                 const std::filesystem::path& base) {
  if (!root.present())
    root.fail(std::string("the experiment is empty; ") + kMinimalExample);
  if (!root.is_map())
    root.fail("expected the experiment to be a mapping (key: value), got " + root.describe() +
              "; " + kMinimalExample);
  root.expect_keys(kTopKeys, "the experiment");

  ExperimentConfig cfg;
  cfg.file = root.file();
  if (root.has("name")) {
    cfg.name = root.get("name").as_string();
    if (cfg.name.empty())
      root.get("name").fail("the name must not be empty");
  } else {
    cfg.name = std::filesystem::path(cfg.file).stem().string();
  }
  if (root.has("batch"))
    cfg.batch = static_cast<int>(root.get("batch").as_size(1, kMaxBatch));
  if (root.has("precision")) {
    const YamlValue p = root.get("precision");
    const std::string s = p.as_string();
    if (!parse_dtype(s, &cfg.precision))
      p.fail("unknown precision '" + s + "'" + did_you_mean(s, dtype_names()) +
             "; valid: " + join_names(dtype_names()));
    cfg.precision_at = p.where();
  }
  if (root.has("input_size")) {
    const YamlValue s = root.get("input_size");
    const std::vector<YamlValue> items = s.items("input_size");
    if (items.size() != 2 && items.size() != 3)
      s.fail("expected [H, W] or [D, H, W], got a list of " + std::to_string(items.size()));
    for (const auto& x : items)
      cfg.input_size.push_back(x.as_size(1, kMaxExtent));
  }
  if (root.has("input_channels"))
    cfg.input_channels = root.get("input_channels").as_size(1, kMaxChannels);
  apply_overrides(overrides, &cfg);
  cfg.overrides = overrides;

  read_model(root, base, &cfg);
  if (cfg.name.empty())
    cfg.name = cfg.model;

  std::vector<std::string> explicit_fields;
  cfg.gpu = overrides.gpu ? override_target(*overrides.gpu) : read_target(root, &explicit_fields);
  read_calibration(root, overrides, explicit_fields, base, &cfg);
  cfg.search = read_search(root, cfg);
  if (root.has("seed"))
    cfg.seed = root.get("seed").as_uint64();
  cfg.measurement = read_measurement(root, cfg.seed);
  if (root.has("database")) {
    cfg.database = root.get("database").as_string();
    if (cfg.database.empty())
      root.get("database").fail("the database path must not be empty");
  }
  cfg.output_dir = output_folder(root, cfg.name, overrides);
  return cfg;
}

} // namespace

ExperimentConfig load_experiment(const std::string& path, const ExperimentOverrides& overrides) {
  return read_experiment(detail::load_yaml_file(path), overrides,
                         std::filesystem::path(path).parent_path());
}

ExperimentConfig parse_experiment(const std::string& yaml_text, const std::string& file,
                                  const ExperimentOverrides& overrides) {
  return read_experiment(detail::parse_yaml(yaml_text, file), overrides,
                         std::filesystem::path(file).parent_path());
}

std::string ExperimentOverrides::describe() const {
  std::vector<std::string> parts;
  if (gpu)
    parts.push_back(*gpu);
  if (precision)
    parts.push_back(*precision);
  if (batch)
    parts.push_back("batch " + std::to_string(*batch));
  if (!input_size.empty()) {
    std::vector<int> v(input_size.begin(), input_size.end());
    parts.push_back("input_size " + detail::list_str(v));
  }
  if (calibration)
    parts.push_back("calibration " + std::filesystem::path(*calibration).stem().string());
  return join_names(parts);
}

std::vector<std::string> experiment_keys() {
  return kTopKeys;
}

std::vector<std::string> search_keys() {
  return kSearchKeys;
}

std::vector<std::string> measurement_keys() {
  return kMeasurementKeys;
}

bool is_zoo_name(const std::string& arg) {
  const std::vector<std::string> names = zoo_names();
  return std::find(names.begin(), names.end(), arg) != names.end() && !std::filesystem::exists(arg);
}

std::string bare_model_yaml(const BareModel& m) {
  const bool onnx = is_onnx_path(m.model);
  const std::string name = onnx ? std::filesystem::path(m.model).stem().string() : m.model;
  // JSON strings are YAML flow scalars: any path or name is quoted safely.
  std::string yaml = fmt::format("name: {}\n", nlohmann::json(name).dump());
  if (m.num_classes && !onnx)
    yaml += fmt::format("model: {{zoo: {}, num_classes: {}}}\n", nlohmann::json(m.model).dump(),
                        *m.num_classes);
  else
    yaml += fmt::format("model: {}\n", nlohmann::json(m.model).dump());
  if (m.input_channels)
    yaml += fmt::format("input_channels: {}\n", *m.input_channels);
  return yaml + "target: H200\n";
}

ExperimentConfig parse_bare_model(const std::string& yaml_text, const BareModel& model,
                                  const ExperimentOverrides& overrides) {
  const std::string here = "the experiment of " + model.model;
  try {
    // The model's path is the caller's (the command line's, Python's): relative to the working
    // directory. `here` names the text in messages only; no folder of it is a base.
    ExperimentConfig exp =
        read_experiment(detail::parse_yaml(yaml_text, here), overrides, std::filesystem::path());
    exp.output_dir = "out/" + exp.name; // the defaults are the model's: no override suffix
    return exp;
  } catch (const UserError& e) {
    if (e.where().file != here)
      throw;
    // `model`'s own errors start with the model; another key's name it (model.num_classes).
    const std::string& key = e.where().key;
    throw UserError(e.where(), e.bare_message(),
                    key.empty() || key == "model" ? e.bare_message()
                                                  : "key '" + key + "': " + e.bare_message());
  }
}

} // namespace brickdl
