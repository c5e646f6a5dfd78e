// Experiment (bindings.h): the Python Model's C++ side. A zoo model or an ONNX file becomes the
// bare experiment `brickdl-tune MODEL` makes (core/experiment.h parse_bare_model), an
// experiment file is loaded as brickdl-tune loads it; settings (tune's keywords) are applied the
// way the command line's flags are, or set as keys of the experiment's YAML and parsed again, so
// every value is checked by the experiment parser with its messages.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <yaml-cpp/yaml.h>

#include "core/describe.h"
#include "core/error.h"
#include "core/onnx.h"
#include "core/zoo.h"
#include "model/report.h"
#include "python/src/bindings.h"
#include "search/driver.h"

namespace brickdl::python {

namespace {

// Keys of tune(**settings) that act as brickdl-tune's flags of the same meaning.
const std::vector<std::string> kFlagSettings = {"target",      "precision", "batch", "input_size",
                                                "calibration", "backend",   "db",    "out"};

// What the Python side keeps besides the experiment: the settings given so far, as JSON (flag
// settings and the YAML keys set over the experiment).
struct Settings {
  ExperimentOverrides overrides;
  nlohmann::json keys = nlohmann::json::object(); // {"search": {...}, "measurement": {...}, ...}
  std::optional<std::string> backend, db, out;
};

// An experiment as the Python Model holds it (bound as brickdl._brickdl.Experiment): the loaded
// experiment, how to load it again, and the settings given so far.
struct Model {
  ExperimentConfig config;
  BareModel bare;          // a zoo model or an ONNX file: bare.model set; an experiment file: empty
  std::string source_yaml; // the text it was parsed from (bare models)
  std::string kind;        // "zoo", "onnx" or "experiment"
  Settings settings;
};

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f)
    throw UserError("cannot read the experiment file '" + path + "'");
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

// `yaml_text` with the keys of `keys` set over it (sections merged key by key).
std::string with_keys(const std::string& yaml_text, const nlohmann::json& keys) {
  YAML::Node root = YAML::Load(yaml_text);
  for (const auto& [key, value] : keys.items()) {
    if (value.is_object()) {
      for (const auto& [sub, v] : value.items())
        root[key][sub] = YAML::Load(v.dump()); // JSON is YAML
    } else {
      root[key] = YAML::Load(value.dump());
    }
  }
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

// The setting a UserError at `key` ("search.top_k", "seed") came from, or "".
std::string setting_of(const nlohmann::json& keys, const std::string& at) {
  for (const auto& [key, value] : keys.items()) {
    if (!value.is_object()) {
      if (at == key)
        return key;
      continue;
    }
    for (const auto& [sub, v] : value.items()) {
      const std::string dotted = key + "." + sub;
      if (at.rfind(dotted, 0) == 0)
        return sub;
    }
  }
  return "";
}

// A flag of brickdl-tune as the keyword of tune() that plays its part ("--input-size" →
// "input_size").
std::string keyword_of_flag(const std::string& flag) {
  std::string k = flag.rfind("--", 0) == 0 ? flag.substr(2) : flag;
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

} // namespace

void rethrow_as_setting(const UserError& err, const nlohmann::json& keys) {
  std::string name;
  if (err.where().file == "the command line")
    name = keyword_of_flag(err.where().key);
  else
    name = setting_of(keys, err.where().key);
  if (name.empty())
    throw err;
  throw UserError(SourceLocation{"brickdl.tune()", 0, 0, name}, err.bare_message());
}

namespace {

// The experiment parsed again with `s` over it.
ExperimentConfig reload(const Model& e, const Settings& s) {
  if (!e.bare.model.empty())
    return parse_bare_model(with_keys(e.source_yaml, s.keys), e.bare, s.overrides);
  if (s.keys.empty())
    return load_experiment(e.config.file, s.overrides);
  return parse_experiment(with_keys(read_text(e.config.file), s.keys), e.config.file, s.overrides);
}

// The flag-like settings of `j` into `s`.
void flag_settings(const nlohmann::json& j, Settings& s) {
  const auto str = [&](const char* key) { return j.at(key).get<std::string>(); };
  if (j.contains("target"))
    s.overrides.gpu = str("target");
  if (j.contains("precision"))
    s.overrides.precision = str("precision");
  if (j.contains("batch"))
    s.overrides.batch = j.at("batch").get<int>();
  if (j.contains("input_size"))
    s.overrides.input_size = j.at("input_size").get<std::vector<int64_t>>();
  if (j.contains("calibration"))
    s.overrides.calibration = str("calibration");
  if (j.contains("backend"))
    s.backend = str("backend");
  if (j.contains("db"))
    s.db = str("db");
  if (j.contains("out"))
    s.out = str("out");
}

// tune(**settings) as JSON, over `base`. Unknown keys are refused with the valid ones.
Settings merge_settings(const Settings& base, const nlohmann::json& j) {
  Settings s = base;
  const std::vector<std::string> search = search_keys(), measurement = measurement_keys();
  std::vector<std::string> valid = kFlagSettings;
  valid.push_back("seed");
  for (const auto* keys : {&search, &measurement})
    for (const std::string& k : *keys)
      if (std::find(valid.begin(), valid.end(), k) == valid.end())
        valid.push_back(k);
  for (const auto& [key, value] : j.items()) {
    if (std::find(kFlagSettings.begin(), kFlagSettings.end(), key) != kFlagSettings.end())
      continue;
    if (key == "seed")
      s.keys["seed"] = value;
    else if (std::find(search.begin(), search.end(), key) != search.end())
      s.keys["search"][key] = value;
    else if (std::find(measurement.begin(), measurement.end(), key) != measurement.end())
      s.keys["measurement"][key] = value;
    else
      throw UserError("brickdl.tune(): unknown setting '" + key + "'" + did_you_mean(key, valid) +
                      "; valid: " + join_names(valid));
  }
  try {
    flag_settings(j, s);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(std::string("brickdl.tune(): a setting has the wrong type: ") + e.what());
  }
  return s;
}

Model with_settings(const Model& base, const std::string& settings_json) {
  Model m = base;
  m.settings = merge_settings(base.settings, parse_json(settings_json, "the settings"));
  try {
    ExperimentConfig c = reload(base, m.settings);
    if (m.settings.backend) {
      c.measurement.backend = *m.settings.backend;
      c.measurement.backend_at = SourceLocation{"the command line", 0, 0, "--backend"};
    }
    if (m.settings.db)
      c.database = *m.settings.db;
    if (m.settings.out)
      c.output_dir = *m.settings.out;
    search::check_names(c);
    m.config = std::move(c);
  } catch (const UserError& err) {
    rethrow_as_setting(err, m.settings.keys);
  }
  return m;
}

Model bare_model(const BareModel& bare, const std::string& kind, const nlohmann::json& flags) {
  Model m;
  m.bare = bare;
  m.kind = kind;
  m.source_yaml = bare_model_yaml(bare);
  flag_settings(flags, m.settings);
  m.config = parse_bare_model(m.source_yaml, bare, m.settings.overrides);
  return m;
}

Model zoo_model(const std::string& name, std::optional<int> batch,
                const std::vector<int64_t>& input_size, std::optional<int64_t> input_channels,
                std::optional<int64_t> num_classes) {
  const std::vector<std::string> names = zoo_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw UserError("unknown zoo model '" + name + "'" + did_you_mean(name, names) +
                    "; the zoo: " + join_names(names));
  nlohmann::json flags = nlohmann::json::object();
  if (batch)
    flags["batch"] = *batch;
  if (!input_size.empty())
    flags["input_size"] = input_size;
  return bare_model(BareModel{name, num_classes, input_channels}, "zoo", flags);
}

Model onnx_model(const std::string& path, std::optional<int> batch) {
  if (!is_onnx_path(path))
    throw UserError("'" + path + "' is no ONNX file name (it must end in .onnx)");
  nlohmann::json flags = nlohmann::json::object();
  if (batch)
    flags["batch"] = *batch;
  return bare_model(BareModel{path, std::nullopt, std::nullopt}, "onnx", flags);
}

Model file_model(const std::string& path) {
  Model m;
  m.kind = "experiment";
  m.config = load_experiment(path);
  search::check_names(m.config);
  return m;
}

nlohmann::json shape_json(const TensorShape& s) {
  if (s.spatial_rank == 0)
    return {s.n, s.c};
  if (s.spatial_rank == 2)
    return {s.n, s.c, s.h, s.w};
  return {s.n, s.c, s.d, s.h, s.w};
}

// The layers of the model's graph (unfused as loaded, or fused as tuned) as rows.
nlohmann::json describe_rows(const Model& m, bool fused) {
  const Graph g = fused ? fuse_for_inference(m.config.graph) : m.config.graph;
  nlohmann::json rows = nlohmann::json::array();
  for (const Layer& l : g.layers()) {
    std::vector<std::string> inputs;
    for (int id : l.inputs)
      inputs.push_back(g.layer(id).name);
    rows.push_back({{"id", l.id},
                    {"name", l.name},
                    {"op", op_name(l.op)},
                    {"attributes", describe_op(l)},
                    {"inputs", inputs},
                    {"shape", shape_json(l.out)},
                    {"params", l.params},
                    {"macs", l.macs},
                    {"out_bytes", g.output_bytes(l.id)}});
  }
  return rows;
}

// brickdl-tune --describe's text.
std::string describe_text(const Model& m) {
  std::ostringstream os;
  describe_experiment(m.config, os);
  os << '\n';
  model::describe_model(fuse_for_inference(m.config.graph), m.config.gpu, os);
  return os.str();
}

nb::object input_shapes(const Model& m) {
  const Graph& g = m.config.graph;
  nlohmann::json shapes = nlohmann::json::object();
  for (int id : g.inputs())
    shapes[g.layer(id).name] = shape_json(g.layer(id).out);
  return to_python(shapes);
}

} // namespace

const ExperimentConfig& experiment_config(nb::handle model) {
  return nb::cast<const Model&>(model).config;
}

void bind_models(nb::module_& m) {
  nb::class_<Model>(m, "Experiment",
                    "A model with its experiment (brickdl.Model wraps one): read-only.")
      .def_prop_ro("name", [](const Model& x) { return x.config.name; })
      .def_prop_ro("model", [](const Model& x) { return x.config.model; })
      .def_prop_ro("kind", [](const Model& x) { return x.kind; })
      .def_prop_ro("file", [](const Model& x) { return x.config.file; })
      .def_prop_ro("batch", [](const Model& x) { return x.config.batch; })
      .def_prop_ro("precision", [](const Model& x) { return dtype_name(x.config.precision); })
      .def_prop_ro("gpu", [](const Model& x) { return x.config.gpu.name; })
      .def_prop_ro("backend", [](const Model& x) { return x.config.measurement.backend; })
      .def_prop_ro("database", [](const Model& x) { return x.config.database; })
      .def_prop_ro("output_dir", [](const Model& x) { return x.config.output_dir; })
      .def_prop_ro("layers", [](const Model& x) { return x.config.graph.size(); })
      .def_prop_ro("inputs", &input_shapes)
      .def(
          "describe_rows",
          [](const Model& x, bool fused) { return to_python(describe_rows(x, fused)); },
          nb::arg("fused") = false)
      .def("describe_text", &describe_text)
      .def("with_settings", &with_settings, nb::arg("settings_json"));
  m.def("zoo_model", &zoo_model, nb::arg("name"), nb::arg("batch") = nb::none(),
        nb::arg("input_size") = std::vector<int64_t>{}, nb::arg("input_channels") = nb::none(),
        nb::arg("num_classes") = nb::none());
  m.def("onnx_model", &onnx_model, nb::arg("path"), nb::arg("batch") = nb::none());
  m.def("experiment_model", &file_model, nb::arg("path"));
  m.def("zoo_names", &zoo_names);
}

} // namespace brickdl::python
