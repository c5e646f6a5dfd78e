#include "search/evaluation.h"

#include <unordered_map>

namespace brickdl::search {

std::string reason_class(const std::string& reason) {
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  auto is_word = [&](char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
  };
  std::string out;
  size_t i = 0;
  while (i < reason.size()) {
    const bool starts = is_digit(reason[i]) && (i == 0 || !is_word(reason[i - 1]));
    if (!starts) {
      out += reason[i++];
      continue;
    }
    size_t j = i;
    while (j < reason.size() && (is_digit(reason[j]) || reason[j] == '.'))
      ++j;
    while (j > i && reason[j - 1] == '.')
      --j;                                         // a sentence's full stop is not the number's
    if (j < reason.size() && is_word(reason[j])) { // "40GB", "3x3": part of a word
      while (j < reason.size() && is_word(reason[j]))
        ++j;
      out.append(reason, i, j - i);
    } else {
      out += 'N';
    }
    i = j;
  }
  return out;
}

CostMatrix Evaluation::predicted_costs() const {
  CostMatrix m(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (const auto& c : groups[g].candidates)
      m[g].push_back(c.prediction.feasible ? c.prediction.time_ms : kExcluded);
  return m;
}

CostMatrix Evaluation::measured_costs() const {
  CostMatrix m(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (const auto& c : groups[g].candidates) {
      if (!c.measurement) {
        m[g].push_back(kNotMeasured);
      } else if (c.measurement->status != MeasureStatus::kOk) {
        m[g].push_back(kExcluded);
      } else {
        m[g].push_back(c.measurement->median_ms);
      }
    }
  return m;
}

int64_t Evaluation::feasible_count() const {
  int64_t n = 0;
  for (const auto& g : groups)
    for (const auto& c : g.candidates)
      n += c.prediction.feasible ? 1 : 0;
  return n;
}

Evaluation evaluate(const SearchSpace& space, const Predictor& predictor,
                    const std::function<void(int64_t, int64_t)>& progress) {
  Evaluation ev;
  ev.groups.resize(space.groups().size());
  // Repeated blocks share a workload signature: predict each (workload, config) once.
  std::unordered_map<std::string, const model::Prediction*> by_key;
  std::unordered_map<std::string, model::LowerBound> bound_by_workload;
  const int64_t total = space.num_candidates();
  int64_t done = 0;
  for (size_t g = 0; g < space.groups().size(); ++g) {
    const GroupEntry& e = space.groups()[g];
    GroupEval& ge = ev.groups[g];
    auto [bit, fresh_bound] = bound_by_workload.try_emplace(e.signature);
    if (fresh_bound)
      bit->second = predictor.lower_bound(space.graph(), e.group);
    ge.lower_bound = bit->second;
    ge.candidates.resize(e.candidates.size());
    for (size_t i = 0; i < e.candidates.size(); ++i) {
      const std::string key = e.signature + "#" + e.candidates[i].config_str();
      CandidateEval& ce = ge.candidates[i];
      auto [it, fresh] = by_key.try_emplace(key, &ce.prediction);
      if (fresh) {
        ce.prediction = predictor.predict(space.graph(), e.candidates[i]);
        ++ev.model_calls;
      } else {
        ce.prediction = *it->second;
      }
      // Pointers into ge.candidates stay valid: no vector is resized after this point.
      if (!ce.prediction.feasible)
        ++ev.infeasible[ce.prediction.reason.empty() ? std::string("infeasible (no reason given)")
                                                     : reason_class(ce.prediction.reason)];
      ++done;
    }
    if (progress && (g % 16 == 15 || g + 1 == space.groups().size()))
      progress(done, total);
  }
  return ev;
}

} // namespace brickdl::search
