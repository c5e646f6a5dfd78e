#include "distributed/protocol.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/hash.h"

namespace brickdl::distributed {

nlohmann::json answer_job(const nlohmann::json& job, const search::SearchSpace* space,
                          Measurer* measurer, const MeasureOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::json out = {{"ticket", job.value("ticket", int64_t{-1})}};
  try {
    if (!measurer || !space)
      throw InternalError("a job before a successful prepare");
    const search::CandidateRef ref{job.at("group").get<int>(), job.at("index").get<int>()};
    if (ref.group < 0 || ref.group >= static_cast<int>(space->groups().size()) || ref.index < 0 ||
        ref.index >= static_cast<int>(space->group(ref.group).candidates.size()))
      throw InternalError(fmt::format("no candidate {}/{} in this space", ref.group, ref.index));
    out["result"] = to_json(measurer->measure(space->graph(), space->candidate(ref), options));
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  out["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

nlohmann::json to_json(const Hello& h) {
  return {{"rank", h.rank},     {"host", h.host},   {"target", h.target}, {"backend", h.backend},
          {"digest", h.digest}, {"error", h.error}, {"device", h.device}};
}

Hello hello_from_json(const nlohmann::json& j) {
  try {
    Hello h;
    h.rank = j.at("rank").get<int>();
    h.host = j.at("host").get<std::string>();
    h.target = j.at("target").get<std::string>();
    h.device = j.at("device").get<std::string>();
    h.backend = j.at("backend").get<std::string>();
    h.digest = j.at("digest").get<std::string>();
    h.error = j.at("error").get<std::string>();
    return h;
  } catch (const nlohmann::json::exception& e) {
    throw InternalError(std::string("malformed hello from a worker: ") + e.what());
  }
}

namespace {

// JSON has no NaN or infinity (nlohmann writes null): they travel as "nan", "inf", "-inf",
// since a wrong result's error is infinite (kernels/validation.cpp).
nlohmann::json number(double v) {
  if (std::isfinite(v))
    return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

double number_from(const nlohmann::json& j) {
  if (j.is_number())
    return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "nan")
      return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf" || s == "-inf")
      return s == "inf" ? std::numeric_limits<double>::infinity()
                        : -std::numeric_limits<double>::infinity();
  }
  throw InternalError("a worker sent " + j.dump() + " where a number belongs");
}

} // namespace

nlohmann::json to_json(const MeasureResult& r) {
  nlohmann::json samples = nlohmann::json::array();
  for (double v : r.samples_ms)
    samples.push_back(number(v));
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& [name, v] : r.counters)
    counters[name] = number(v);
  return {{"status", measure_status_name(r.status)},
          {"error", r.error},
          {"samples_ms", samples},
          {"median_ms", number(r.median_ms)},
          {"min_ms", number(r.min_ms)},
          {"max_ms", number(r.max_ms)},
          {"p25_ms", number(r.p25_ms)},
          {"p75_ms", number(r.p75_ms)},
          {"max_rel_error", number(r.max_rel_error)},
          {"counters", counters}};
}

MeasureResult result_from_json(const nlohmann::json& j) {
  try {
    MeasureResult r;
    const std::string status = j.at("status").get<std::string>();
    if (!parse_measure_status(status, &r.status))
      throw InternalError("a worker sent an unknown measurement status '" + status + "'");
    r.error = j.at("error").get<std::string>();
    const nlohmann::json& samples = j.at("samples_ms");
    if (!samples.is_array())
      throw InternalError("a worker sent samples_ms that are no list");
    for (const nlohmann::json& v : samples)
      r.samples_ms.push_back(number_from(v));
    r.median_ms = number_from(j.at("median_ms"));
    r.min_ms = number_from(j.at("min_ms"));
    r.max_ms = number_from(j.at("max_ms"));
    r.p25_ms = number_from(j.at("p25_ms"));
    r.p75_ms = number_from(j.at("p75_ms"));
    r.max_rel_error = number_from(j.at("max_rel_error"));
    const nlohmann::json& counters = j.at("counters");
    if (!counters.is_object())
      throw InternalError("a worker sent counters that are no object");
    for (const auto& [name, v] : counters.items())
      r.counters[name] = number_from(v);
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw InternalError(std::string("malformed result from a worker: ") + e.what());
  }
}

std::string space_digest(const search::SearchSpace& space) {
  // FNV-1a: stable across processes and builds (std::hash is not).
  uint64_t h = kFnvOffsetBasis;
  for (const search::GroupEntry& g : space.groups()) {
    h = fnv1a_field(h, g.signature);
    for (const Candidate& c : g.candidates)
      h = fnv1a_field(h, c.config_str());
  }
  return fmt::format("{:016x}/{}", h, space.num_candidates());
}

std::string measurement_digest(const MeasurementConfig& m) {
  const MeasureOptions& o = m.options;
  nlohmann::json j = {{"warmup", o.warmup},       {"repetitions", o.repetitions},
                      {"flush_l2", o.flush_l2},   {"collect_counters", o.collect_counters},
                      {"timeout_s", o.timeout_s}, {"seed", o.seed},
                      {"rtol", o.rtol},           {"atol", o.atol},
                      {"counters", m.counters},   {"cpu_threads", m.cpu_threads}};
  return fmt::format("{:08x}", fnv1a(j.dump()) & 0xffffffffull);
}

std::string experiment_digest(const search::SearchSpace& space, const MeasurementConfig& m) {
  return space_digest(space) + "+" + measurement_digest(m);
}

namespace {

// Why a worker that answered cannot take part, before targets are compared.
std::string own_refusal(const Hello& h, const std::string& digest) {
  if (!h.error.empty())
    return h.error;
  if (h.digest != digest)
    return fmt::format("read a different experiment (digest {} on rank {}, {} on rank 0: "
                       "search space + measurement settings): the experiment file or brickdl "
                       "differs on its node",
                       h.digest, h.rank, digest);
  return "";
}

} // namespace

Assignment assign_workers(const std::vector<Hello>& hellos, const std::string& digest,
                          bool each_target) {
  Assignment out;
  std::vector<TargetGroup> groups;                            // in order of their lowest rank
  std::map<std::pair<std::string, std::string>, int> devices; // (host, device) → first rank
  std::vector<Hello> by_rank = hellos;
  std::sort(by_rank.begin(), by_rank.end(),
            [](const Hello& a, const Hello& b) { return a.rank < b.rank; });
  for (const Hello& h : by_rank) {
    if (const std::string why = own_refusal(h, digest); !why.empty()) {
      out.refused.emplace_back(h.rank, why);
      continue;
    }
    if (!h.device.empty()) {
      const auto [it, first] = devices.emplace(std::make_pair(h.host, h.device), h.rank);
      if (!first) {
        out.refused.emplace_back(
            h.rank, fmt::format("would share GPU {} of {} with rank {}: start at most one "
                                "worker rank per GPU",
                                h.device, h.host, it->second));
        continue;
      }
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

// The variable as a count: decimal digits only (no sign, no blanks), below 2^24; else -1.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v || std::strlen(v) > 8)
    return -1;
  int n = 0;
  for (const char* c = v; *c; ++c) {
    if (*c < '0' || *c > '9')
      return -1;
    n = n * 10 + (*c - '0');
  }
  return n < (1 << 24) ? n : -1;
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

} // namespace brickdl::distributed
