#include "core/error.h"

#include <algorithm>
#include <cstdint>
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

namespace {

// The length of the well-formed UTF-8 character at text[i] that is no control (U+0080 to
// U+009F are C1 controls), or 0.
size_t utf8_char_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = byte(i);
  size_t n = 0;
  uint32_t cp = 0;
  if (b >= 0xc2 && b <= 0xdf) {
    n = 2;
    cp = b & 0x1fu;
  } else if (b >= 0xe0 && b <= 0xef) {
    n = 3;
    cp = b & 0x0fu;
  } else if (b >= 0xf0 && b <= 0xf4) {
    n = 4;
    cp = b & 0x07u;
  } else {
    return 0;
  }
  if (i + n > text.size())
    return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0u) != 0x80u)
      return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3fu);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  const bool bad = cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f);
  return overlong || bad ? 0 : n;
}

} // namespace

std::string printable(std::string_view text, bool keep_newlines) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b >= 0x20 && b < 0x7f) {
      out += static_cast<char>(b);
      ++i;
    } else if (b == '\n') {
      out += keep_newlines ? "\n" : "\\n";
      ++i;
    } else if (b == '\t') {
      out += "\\t";
      ++i;
    } else if (const size_t n = b >= 0x80 ? utf8_char_length(text, i) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xfu];
      ++i;
    }
  }
  return out;
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
