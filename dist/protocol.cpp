#include "dist/protocol.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "core/error.h"

namespace brickdl::dist {

nlohmann::json to_json(const Hello& h) {
  return {{"rank", h.rank},       {"host", h.host},     {"target", h.target},
          {"backend", h.backend}, {"digest", h.digest}, {"error", h.error}};
}

Hello hello_from_json(const nlohmann::json& j) {
  try {
    Hello h;
    h.rank = j.at("rank").get<int>();
    h.host = j.at("host").get<std::string>();
    h.target = j.at("target").get<std::string>();
    h.backend = j.at("backend").get<std::string>();
    h.digest = j.at("digest").get<std::string>();
    h.error = j.at("error").get<std::string>();
    return h;
  } catch (const nlohmann::json::exception& e) {
    throw InternalError(std::string("malformed hello from a worker: ") + e.what());
  }
}

nlohmann::json to_json(const MeasureResult& r) {
  return {{"status", measure_status_name(r.status)},
          {"error", r.error},
          {"samples_ms", r.samples_ms},
          {"median_ms", r.median_ms},
          {"min_ms", r.min_ms},
          {"max_ms", r.max_ms},
          {"p25_ms", r.p25_ms},
          {"p75_ms", r.p75_ms},
          {"max_rel_error", r.max_rel_error},
          {"counters", r.counters}};
}

MeasureResult result_from_json(const nlohmann::json& j) {
  try {
    MeasureResult r;
    const std::string status = j.at("status").get<std::string>();
    if (!parse_measure_status(status, &r.status))
      throw InternalError("a worker sent an unknown measurement status '" + status + "'");
    r.error = j.at("error").get<std::string>();
    r.samples_ms = j.at("samples_ms").get<std::vector<double>>();
    r.median_ms = j.at("median_ms").get<double>();
    r.min_ms = j.at("min_ms").get<double>();
    r.max_ms = j.at("max_ms").get<double>();
    r.p25_ms = j.at("p25_ms").get<double>();
    r.p75_ms = j.at("p75_ms").get<double>();
    r.max_rel_error = j.at("max_rel_error").get<double>();
    r.counters = j.at("counters").get<std::map<std::string, double>>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw InternalError(std::string("malformed result from a worker: ") + e.what());
  }
}

std::string space_digest(const search::SearchSpace& space) {
  // FNV-1a over every group's signature and candidates: stable across processes and builds
  // (std::hash is not).
  uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](const std::string& s) {
    for (unsigned char c : s)
      h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull; // separator
  };
  for (const search::GroupEntry& g : space.groups()) {
    mix(g.signature);
    for (const Candidate& c : g.candidates)
      mix(c.config_str());
  }
  return fmt::format("{:016x}/{}", h, space.num_candidates());
}

namespace {

// Why a worker that answered cannot take part, before targets are compared.
std::string own_refusal(const Hello& h, const std::string& digest) {
  if (!h.error.empty())
    return h.error;
  if (h.digest != digest)
    return fmt::format("built a different search space (digest {} here, {} on rank 0): the "
                       "experiment or brickdl differs on its node",
                       h.digest, digest);
  return "";
}

} // namespace

Assignment assign_workers(const std::vector<Hello>& hellos, const std::string& digest,
                          bool each_target) {
  Assignment out;
  std::vector<TargetGroup> groups; // in order of their lowest rank
  for (const Hello& h : hellos) {
    if (const std::string why = own_refusal(h, digest); !why.empty()) {
      out.refused.emplace_back(h.rank, why);
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const TargetGroup& g) { return g.target == h.target; });
    if (it == groups.end())
      it = groups.insert(groups.end(), TargetGroup{h.target, h.backend, {}});
    it->ranks.push_back(h.rank);
  }
  for (TargetGroup& g : groups)
    std::sort(g.ranks.begin(), g.ranks.end());
  std::stable_sort(groups.begin(), groups.end(), [](const TargetGroup& a, const TargetGroup& b) {
    if (a.ranks.size() != b.ranks.size())
      return a.ranks.size() > b.ranks.size();
    return a.ranks.front() < b.ranks.front();
  });
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i == 0 || each_target) {
      out.runs.push_back(groups[i]);
      continue;
    }
    for (int r : groups[i].ranks)
      out.refused.emplace_back(
          r, fmt::format("measures target {}, not the run's target {} (--each-target tunes "
                         "every target in turn)",
                         groups[i].target, groups[0].target));
  }
  std::sort(out.refused.begin(), out.refused.end());
  return out;
}

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (*end == '\0' && n >= 0 && n < (1 << 24)) ? static_cast<int>(n) : -1;
}

} // namespace

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
    if (const int n = env_int(name); n > 0)
      return n;
  return 0;
}

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const int n = env_int(name); n >= 0)
      return n;
  return 0;
}

} // namespace brickdl::dist
