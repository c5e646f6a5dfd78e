#pragma once
// The faults the process-pool test plants (process_pool_test.cpp) and its worker program
// commits (fault_worker.cpp): which candidate, and what happens to its worker process.
//
//   BRICKDL_TEST_FAULTS="segv:3,abort:11,hang:19,sticky:27,exit:35"
//
// names a candidate by its index among the search space's candidate keys, sorted; a key is
// what identifies the candidate in the tuning database (workload signature, strategy, brick,
// channel / batch block, cluster, threads; layerwise candidates by their workload alone).
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "search/search_space.h"

namespace brickdl::testing {

// On the cpu backend the worker commits each fault itself. On the cuda backend two more
// plant a kernel through CudaMeasurerOptions::edit_plan: `trap` writes to an illegal address
// (a sticky error), `endless` never returns (a kernel still running after its time-out).
enum class Fault { kSegv, kAbort, kExit, kHang, kSticky, kTrap, kEndless };

inline std::string candidate_key(const search::GroupEntry& g, const Candidate& c) {
  if (c.strategy == Strategy::kLayerwise)
    return g.signature + "|layerwise";
  return fmt::format("{}|{}|{}x{}x{}|{}|{}|{}|{}", g.signature, strategy_name(c.strategy),
                     c.brick.d, c.brick.h, c.brick.w, c.brick.cb, c.brick.nb, c.brick.cl,
                     c.threads);
}

// The same key, from the database (alias w: workloads, c: candidates).
inline constexpr const char* kCandidateKeySql =
    "CASE WHEN c.strategy = 'layerwise' THEN w.signature || '|layerwise' ELSE "
    "w.signature || '|' || c.strategy || '|' || c.bd || 'x' || c.bh || 'x' || c.bw || '|' || "
    "c.cb || '|' || c.bn || '|' || c.cl || '|' || c.threads END";

// Every candidate key of `space`, sorted, once each.
inline std::vector<std::string> candidate_keys(const search::SearchSpace& space) {
  std::set<std::string> keys;
  for (const search::GroupEntry& g : space.groups())
    for (const Candidate& c : g.candidates)
      keys.insert(candidate_key(g, c));
  return {keys.begin(), keys.end()};
}

inline const std::map<std::string, Fault>& fault_names() {
  static const std::map<std::string, Fault> names = {
      {"segv", Fault::kSegv},      {"abort", Fault::kAbort},   {"exit", Fault::kExit},
      {"hang", Fault::kHang},      {"sticky", Fault::kSticky}, {"trap", Fault::kTrap},
      {"endless", Fault::kEndless}};
  return names;
}

// "kind:index,..." → index → fault; throws std::invalid_argument on anything else.
inline std::map<size_t, Fault> parse_faults(const std::string& text) {
  std::map<size_t, Fault> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos || !fault_names().count(item.substr(0, colon)))
      throw std::invalid_argument("bad fault '" + item +
                                  "': kind:index, kind one of segv, "
                                  "abort, exit, hang, sticky, trap, endless");
    out[std::stoul(item.substr(colon + 1))] = fault_names().at(item.substr(0, colon));
  }
  return out;
}

} // namespace brickdl::testing
