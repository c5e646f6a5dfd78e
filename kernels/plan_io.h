#pragma once
// Plans as JSON, for brickdl-run. Two forms are read:
//
//   [ {"first": 1, "last": 3, "strategy": "padded", "brick": [8, 8, 8], "cb": 0, "nb": 4}, ... ]
//   {"groups": [ {"first_layer": 1, "last_layer": 3, "strategy": "memoized",
//                 "brick": {"d": 8, "h": 8, "w": 8, "cb": 0, "nb": 4}, "threads": 256}, ... ]}
//
// The second is the plan of brickdl-tune's plan.json, which is also read whole (its "plan" key
// holds that object). Layers are ids of the fused graph or layer names; "brick" is [d, h, w]
// or [h, w] (2-D), and may be omitted for layerwise groups. "cb" (channel block) defaults to 0
// (all channels) and "nb" (batch block, images per unit of work) to 1, so files written before
// batch blocks existed still load.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/candidate.h"
#include "core/graph.h"

namespace brickdl::kernels {

// Throws UserError naming `file` and the key (e.g. "groups[2].strategy") of what is wrong.
std::vector<Candidate> parse_plan_json(const std::string& text, const std::string& file,
                                       const Graph& fused);
std::vector<Candidate> load_plan_json(const std::string& path, const Graph& fused);

// What a plan file says it was made for. brickdl-tune's plan.json names its experiment's model,
// batch and precision, and each group's layer names and workload (core/group.h:
// workload_description, which holds the channels and spatial extents of every layer); a plain
// list names none of them (the fields stay empty or 0, and so do those of a group without).
struct PlanOrigin {
  std::string model;
  int batch = 0;
  std::string precision;
  std::vector<std::string> layers;    // per plan entry, as in parse_plan_json's order
  std::vector<std::string> workloads; // per plan entry
};

// Reads the fields above without a graph (so that a run can take the plan's batch). A file that
// is not JSON, or not a plan, gives an empty origin: parse_plan_json says what is wrong with
// it. A field of the wrong type throws UserError naming `file` and the key.
PlanOrigin parse_plan_origin(const std::string& text, const std::string& file);
PlanOrigin load_plan_origin(const std::string& path);

// How `origin` differs from the run of `plan` (parsed from the same file) on `fused`, one
// sentence each: its batch, its precision, and the groups whose workload on `fused` is not the
// one the plan was made for (another model, input size or channel count); empty when the plan
// was made for this graph, or does not say what for.
std::vector<std::string> plan_mismatches(const PlanOrigin& origin, const Graph& fused,
                                         const std::vector<Candidate>& plan);

// The first form above.
nlohmann::json plan_to_json(const std::vector<Candidate>& plan);

} // namespace brickdl::kernels
