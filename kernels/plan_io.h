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

// The first form above.
nlohmann::json plan_to_json(const std::vector<Candidate>& plan);

} // namespace brickdl::kernels
