#include "kernels/plan_io.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/group.h"

namespace brickdl::kernels {

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& key, const std::string& what) {
  SourceLocation at;
  at.file = file;
  at.key = key;
  throw UserError(at, what);
}

int layer_ref(const json& v, const std::string& file, const std::string& key, const Graph& g) {
  int id = -1;
  if (v.is_number_integer()) {
    id = v.get<int>();
  } else if (v.is_string()) {
    id = g.find(v.get<std::string>());
    if (id < 0) {
      std::vector<std::string> names;
      for (const Layer& l : g.layers())
        names.push_back(l.name);
      fail(file, key,
           "no layer named '" + v.get<std::string>() + "' in the fused graph" +
               did_you_mean(v.get<std::string>(), names));
    }
  } else {
    fail(file, key, "expected a layer id (integer) or a layer name (string)");
  }
  if (id < std::max(g.num_inputs(), 1) || id >= g.size())
    fail(file, key,
         "layer " + std::to_string(id) + " is not in " +
             std::to_string(std::max(g.num_inputs(), 1)) + ".." + std::to_string(g.size() - 1) +
             (g.num_inputs() > 1 ? " (layer ids of the fused graph; 0.." +
                                       std::to_string(g.num_inputs() - 1) + " are the inputs)"
                                 : " (layer ids of the fused graph; 0 is the input)"));
  return id;
}

// An integer in [min, INT_MAX]: 2^31 is refused, not read as -2147483648.
int positive(const json& v, const std::string& file, const std::string& key, int min) {
  if (!v.is_number_integer() || v.get<int64_t>() < min ||
      v.get<int64_t>() > std::numeric_limits<int>::max())
    fail(file, key,
         "expected an integer from " + std::to_string(min) + " to " +
             std::to_string(std::numeric_limits<int>::max()) + ", got " + v.dump());
  return v.get<int>();
}

// A batch block: images per unit of work, 1 to kMaxBatchBlock.
int batch_block(const json& v, const std::string& file, const std::string& key) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxBatchBlock)
    fail(file, key,
         "expected a batch block (images per unit of work), an integer from 1 to " +
             std::to_string(kMaxBatchBlock) + ", got " + v.dump());
  return v.get<int>();
}

// Unknown keys are errors, except the report fields of brickdl-tune's plan.json (times, bytes).
void check_keys(const json& e, const std::string& file, const std::string& at) {
  static const std::vector<std::string> kKeys = {"first",    "last",   "first_layer", "last_layer",
                                                 "strategy", "brick",  "cb",          "nb",
                                                 "cl",       "threads"};
  for (const auto& [k, v] : e.items()) {
    if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end() && k != "layers" &&
        k != "workload" && k.find("_ms") == std::string::npos &&
        k.find("dram") == std::string::npos && k.find("_bytes") == std::string::npos)
      fail(file, at + "." + k,
           "unknown key" + did_you_mean(k, kKeys) + "; valid: " + join_names(kKeys));
  }
}

// "first" / "last" (or brickdl-tune's "first_layer" / "last_layer"), in order.
Group parse_layers(const json& e, const std::string& file, const std::string& at, const Graph& g) {
  const auto get = [&](const char* a, const char* b) -> const json* {
    if (e.contains(a))
      return &e.at(a);
    if (e.contains(b))
      return &e.at(b);
    fail(file, at + "." + a, std::string("missing key '") + a + "'");
  };
  Group group;
  group.first = layer_ref(*get("first", "first_layer"), file, at + ".first", g);
  group.last = layer_ref(*get("last", "last_layer"), file, at + ".last", g);
  if (group.last < group.first)
    fail(file, at + ".last",
         "last (" + std::to_string(group.last) + ") comes before first (" +
             std::to_string(group.first) + ")");
  return group;
}

// "brick": [d, h, w], [h, w] or {d, h, w, cb, nb, cl}; sets the extents (and cb, nb, cl) of
// `brick`.
void parse_brick(const json& b, const std::string& file, const std::string& bk, bool three_d,
                 BrickShape& brick) {
  if (b.is_array() && b.size() == 2 && three_d)
    fail(file, bk, "a 3-D model needs a brick [d, h, w], got [h, w]");
  if (b.is_array() && (b.size() == 3 || b.size() == 2)) {
    const size_t h = b.size() - 2; // index of h
    brick.d = b.size() == 3 ? positive(b[0], file, bk + "[0]", 1) : 1;
    brick.h = positive(b[h], file, bk + "[" + std::to_string(h) + "]", 1);
    brick.w = positive(b[h + 1], file, bk + "[" + std::to_string(h + 1) + "]", 1);
  } else if (b.is_array()) {
    fail(file, bk, "expected [d, h, w] or [h, w]");
  } else if (b.is_object()) {
    brick.d = b.contains("d") ? positive(b.at("d"), file, bk + ".d", 1) : 1;
    if (!b.contains("h") || !b.contains("w"))
      fail(file, bk, "expected keys h and w (and d)");
    brick.h = positive(b.at("h"), file, bk + ".h", 1);
    brick.w = positive(b.at("w"), file, bk + ".w", 1);
    if (b.contains("cb"))
      brick.cb = positive(b.at("cb"), file, bk + ".cb", 0);
    if (b.contains("nb"))
      brick.nb = batch_block(b.at("nb"), file, bk + ".nb");
    if (b.contains("cl"))
      brick.cl = positive(b.at("cl"), file, bk + ".cl", 1);
  } else {
    fail(file, bk, "expected [d, h, w], [h, w] or {d, h, w, cb, nb, cl}");
  }
}

Candidate parse_entry(const json& e, const std::string& file, const std::string& at,
                      const Graph& g) {
  if (!e.is_object())
    fail(file, at, "expected an object {first, last, strategy, brick, cb, nb, cl}");
  check_keys(e, file, at);
  Candidate c;
  c.group = parse_layers(e, file, at, g);
  if (!e.contains("strategy") || !e.at("strategy").is_string() ||
      !parse_strategy(e.at("strategy").get<std::string>(), &c.strategy))
    fail(file, at + ".strategy", "expected one of: layerwise, padded, memoized");
  const bool three_d = g.layer(c.group.last).out.spatial_rank == 3;
  if (e.contains("brick")) {
    parse_brick(e.at("brick"), file, at + ".brick", three_d, c.brick);
  } else if (c.strategy != Strategy::kLayerwise) {
    fail(file, at + ".brick",
         std::string("missing key 'brick' for strategy ") + strategy_name(c.strategy) + " (e.g. " +
             (three_d ? "[8, 8, 8]" : "[8, 8]") + ")");
  }
  if (e.contains("cb"))
    c.brick.cb = positive(e.at("cb"), file, at + ".cb", 0);
  if (e.contains("nb"))
    c.brick.nb = batch_block(e.at("nb"), file, at + ".nb");
  if (e.contains("cl"))
    c.brick.cl = positive(e.at("cl"), file, at + ".cl", 1);
  const std::string brick_bad = brick_problem(c.brick, three_d ? 3 : 2); // core/candidate.h
  if (!brick_bad.empty())
    fail(file, at + ".brick", brick_bad);
  if (e.contains("threads"))
    c.threads = positive(e.at("threads"), file, at + ".threads", 1);
  return c;
}

} // namespace

std::vector<Candidate> parse_plan_json(const std::string& text, const std::string& file,
                                       const Graph& g) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    SourceLocation at;
    at.file = file;
    at.line = 1;
    at.column = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++at.line;
        at.column = 1;
      } else {
        ++at.column;
      }
    }
    throw UserError(at, std::string("not valid JSON: ") + e.what());
  }
  const json* list = &doc;
  std::string prefix;
  if (doc.is_object()) {
    // brickdl-tune's plan.json holds the chosen plan under "plan"; a bare plan object has
    // "groups" at the top.
    const json* obj = &doc;
    if (doc.contains("plan") && doc.at("plan").is_object()) {
      obj = &doc.at("plan");
      prefix = "plan.";
    }
    if (!obj->contains("groups"))
      fail(file, prefix + "groups",
           "expected a list of groups, {\"groups\": [...]} or brickdl-tune's plan.json");
    list = &obj->at("groups");
    prefix += "groups";
  }
  if (!list->is_array())
    fail(file, prefix, "expected a list of groups");
  std::vector<Candidate> plan;
  for (size_t i = 0; i < list->size(); ++i)
    plan.push_back(parse_entry((*list)[i], file, prefix + "[" + std::to_string(i) + "]", g));
  return plan;
}

std::vector<Candidate> load_plan_json(const std::string& path, const Graph& fused) {
  std::ifstream f(path);
  if (!f)
    throw UserError(path + ": cannot open the plan file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_plan_json(ss.str(), path, fused);
}

namespace {

// The string at `key` of `obj`, "" when absent; another type is an error.
std::string optional_text(const json& obj, const char* key, const std::string& file,
                          const std::string& at, const char* what) {
  if (!obj.contains(key))
    return "";
  if (!obj.at(key).is_string())
    fail(file, at + key,
         std::string("expected ") + what + " (a string), got " + obj.at(key).dump());
  return obj.at(key).get<std::string>();
}

// The list of groups, as parse_plan_json finds it (nullptr for a bare list: it names nothing),
// and the key prefix of its entries.
const json* origin_groups(const json& doc, std::string& prefix) {
  const json* obj = &doc;
  if (doc.contains("plan") && doc.at("plan").is_object()) {
    obj = &doc.at("plan");
    prefix = "plan.";
  }
  prefix += "groups";
  if (!obj->contains("groups") || !obj->at("groups").is_array())
    return nullptr;
  return &obj->at("groups");
}

} // namespace

PlanOrigin parse_plan_origin(const std::string& text, const std::string& file) {
  PlanOrigin o;
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    return o;
  o.model = optional_text(doc, "model", file, "", "the model's name");
  if (doc.contains("batch"))
    o.batch = positive(doc.at("batch"), file, "batch", 1);
  o.precision = optional_text(doc, "precision", file, "", "a precision");
  std::string prefix;
  const json* groups = origin_groups(doc, prefix);
  if (groups == nullptr)
    return o;
  for (size_t i = 0; i < groups->size(); ++i) {
    const json& e = (*groups)[i];
    const std::string at = prefix + "[" + std::to_string(i) + "].";
    o.layers.push_back(e.is_object() ? optional_text(e, "layers", file, at, "layer names") : "");
    o.workloads.push_back(e.is_object() ? optional_text(e, "workload", file, at, "a workload")
                                        : "");
  }
  return o;
}

PlanOrigin load_plan_origin(const std::string& path) {
  std::ifstream f(path);
  if (!f)
    throw UserError(path + ": cannot open the plan file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_plan_origin(ss.str(), path);
}

std::vector<std::string> plan_mismatches(const PlanOrigin& origin, const Graph& g,
                                         const std::vector<Candidate>& plan) {
  std::vector<std::string> out;
  if (origin.batch > 0 && origin.batch != g.batch())
    out.push_back("it was made for batch " + std::to_string(origin.batch) + ", this run is batch " +
                  std::to_string(g.batch()));
  if (!origin.precision.empty() && origin.precision != dtype_name(g.dtype()))
    out.push_back("it was made for precision " + origin.precision + ", this run is " +
                  dtype_name(g.dtype()));
  // The groups whose layers here are not the workload the plan chose them for: the first one
  // named, the others counted.
  size_t differ = 0;
  std::string first;
  for (size_t k = 0; k < plan.size() && k < origin.workloads.size(); ++k) {
    const std::string here = workload_description(g, plan[k].group);
    if (origin.workloads[k].empty() || origin.workloads[k] == here)
      continue;
    if (differ++ == 0)
      first = "group " + std::to_string(k) + " (layers " + std::to_string(plan[k].group.first) +
              ".." + std::to_string(plan[k].group.last) + ", " +
              group_layer_names(g, plan[k].group) + ") was made for '" + origin.workloads[k] +
              "', this run's graph has '" + here + "' there";
  }
  if (differ > 0)
    out.push_back(first +
                  (differ > 1 ? " (and " + std::to_string(differ - 1) + " more groups)" : "") +
                  ": another model, input size or channel count");
  return out;
}

nlohmann::json plan_to_json(const std::vector<Candidate>& plan) {
  json list = json::array();
  for (const Candidate& c : plan) {
    json e = {
        {"first", c.group.first}, {"last", c.group.last}, {"strategy", strategy_name(c.strategy)}};
    if (c.strategy != Strategy::kLayerwise) {
      e["brick"] = {c.brick.d, c.brick.h, c.brick.w};
      e["cb"] = c.brick.cb;
      e["nb"] = c.brick.nb;
      if (c.brick.cl != 1)
        e["cl"] = c.brick.cl;
    }
    list.push_back(std::move(e));
  }
  return list;
}

} // namespace brickdl::kernels
