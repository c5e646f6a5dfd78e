#include "core/error.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace brickdl {

std::string SourceLocation::str() const {
  std::string s = file.empty() ? std::string("<input>") : file;
  if (line > 0) {
    s += ":" + std::to_string(line);
    if (column > 0)
      s += ":" + std::to_string(column);
  }
  return s;
}

std::string UserError::format(const SourceLocation& where, const std::string& message) {
  std::string s = where.str() + ": ";
  if (!where.key.empty())
    s += "key '" + where.key + "': ";
  return s + message;
}

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& valid) {
  int best = std::numeric_limits<int>::max();
  std::string best_name;
  for (const auto& v : valid) {
    const int d = edit_distance(word, v);
    if (d < best) {
      best = d;
      best_name = v;
    }
  }
  // Accept a suggestion when at most a third of the letters differ (and at least 1 may).
  const int limit = std::max<int>(2, static_cast<int>(word.size()) / 3);
  if (!best_name.empty() && best <= limit)
    return " (did you mean '" + best_name + "'?)";
  return "";
}

std::string did_you_mean(const std::string& word, const std::initializer_list<const char*>& valid) {
  return did_you_mean(word, std::vector<std::string>(valid.begin(), valid.end()));
}

std::string join_names(const std::vector<std::string>& names, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i)
      s += sep;
    s += names[i];
  }
  return s;
}

namespace detail {
void check_failed(const char* cond, const char* file, int line, const std::string& msg) {
  std::string s =
      std::string("check '") + cond + "' failed at " + file + ":" + std::to_string(line);
  if (!msg.empty())
    s += ": " + msg;
  throw InternalError(s);
}
} // namespace detail

} // namespace brickdl
