#include "search/evaluation.h"

#include <cstdlib>
#include <string>
#include <unordered_map>

namespace brickdl::search {

namespace {

// A reason cut at its numbers: words[0] numbers[0] words[1] ... numbers[n-1] words[n].
struct SplitReason {
  std::vector<std::string> words{std::string()};
  std::vector<std::string> numbers;
};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_word(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
}

// The end of the number starting at `i`: digits, and a decimal point with digits after it.
size_t number_end(const std::string& s, size_t i) {
  size_t j = i;
  while (j < s.size() && is_digit(s[j]))
    ++j;
  if (j + 1 < s.size() && s[j] == '.' && is_digit(s[j + 1])) {
    ++j;
    while (j < s.size() && is_digit(s[j]))
      ++j;
  }
  return j;
}

SplitReason split_numbers(const std::string& reason) {
  SplitReason out;
  size_t i = 0;
  while (i < reason.size()) {
    if (!is_digit(reason[i]) || (i > 0 && is_word(reason[i - 1]))) {
      out.words.back() += reason[i++];
      continue;
    }
    size_t j = number_end(reason, i);
    if (j < reason.size() && is_word(reason[j])) { // "40GB", "3x3": part of a word
      while (j < reason.size() && is_word(reason[j]))
        ++j;
      out.words.back().append(reason, i, j - i);
    } else {
      out.numbers.push_back(reason.substr(i, j - i));
      out.words.emplace_back();
    }
    i = j;
  }
  return out;
}

// strtod: a number too large for a double reads as infinity instead of throwing.
double value(const std::string& number) {
  return std::strtod(number.c_str(), nullptr);
}

} // namespace

std::string reason_class(const std::string& reason) {
  const SplitReason s = split_numbers(reason);
  std::string out = s.words[0];
  for (size_t k = 0; k < s.numbers.size(); ++k)
    out += "N" + s.words[k + 1];
  return out;
}

void ReasonTally::add(const std::string& reason) {
  SplitReason s = split_numbers(reason);
  if (count++ == 0) {
    words = std::move(s.words);
    lowest = s.numbers;
    highest = std::move(s.numbers);
    return;
  }
  for (size_t k = 0; k < s.numbers.size() && k < lowest.size(); ++k) {
    const double v = value(s.numbers[k]);
    if (v < value(lowest[k]))
      lowest[k] = s.numbers[k];
    if (v > value(highest[k]))
      highest[k] = s.numbers[k];
  }
}

std::string ReasonTally::str() const {
  std::string out = words.empty() ? std::string() : words[0];
  for (size_t k = 0; k < lowest.size() && k + 1 < words.size(); ++k) {
    out += lowest[k] == highest[k] ? lowest[k] : lowest[k] + "\u2013" + highest[k];
    out += words[k + 1];
  }
  return out;
}

void add_reason(ReasonTallies& tallies, const std::string& reason) {
  const std::string r = reason.empty() ? std::string("infeasible (no reason given)") : reason;
  tallies[reason_class(r)].add(r);
}

int64_t total_count(const ReasonTallies& tallies) {
  int64_t n = 0;
  for (const auto& [kind, t] : tallies)
    n += t.count;
  return n;
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
        add_reason(ev.infeasible, ce.prediction.reason);
      ++done;
    }
    if (progress && (g % 16 == 15 || g + 1 == space.groups().size()))
      progress(done, total);
  }
  return ev;
}

} // namespace brickdl::search
