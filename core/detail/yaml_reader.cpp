#include "core/detail/yaml_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace brickdl::detail {

namespace {

// Range text for messages: ">= 1", "in [1, 64]", "" for no bound.
template <typename T> std::string range_str(T min, T max) {
  const bool has_min = min != std::numeric_limits<T>::min();
  const bool has_max = max != std::numeric_limits<T>::max();
  if (has_min && has_max)
    return " in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (has_min)
    return " >= " + std::to_string(min);
  if (has_max)
    return " <= " + std::to_string(max);
  return "";
}

// Plain decimal integer, optionally signed; nothing else on the line.
bool parse_integer(const std::string& s, int64_t* out) {
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (first != last && *first == '+')
    ++first;
  if (first == last)
    return false;
  const auto [ptr, ec] = std::from_chars(first, last, *out);
  return ec == std::errc() && ptr == last;
}

bool parse_number(const std::string& s, double* out) {
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (first != last && *first == '+')
    ++first;
  if (first == last)
    return false;
  const auto [ptr, ec] = std::from_chars(first, last, *out, std::chars_format::general);
  return ec == std::errc() && ptr == last && std::isfinite(*out);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// yaml-cpp marks are 0-based; a null mark has line -1.
bool valid_mark(const YAML::Mark& m) {
  return m.line >= 0 && m.column >= 0;
}

} // namespace

YamlValue::YamlValue(YAML::Node node, std::string file, std::string path, YAML::Mark mark)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)), mark_(mark) {}

SourceLocation YamlValue::where() const {
  // A null value's own mark points past it (at the next token), so use the key's.
  YAML::Mark m = mark_;
  if (present() && valid_mark(node_.Mark()))
    m = node_.Mark();
  SourceLocation loc;
  loc.file = file_;
  if (valid_mark(m)) {
    loc.line = m.line + 1;
    loc.column = m.column + 1;
  }
  loc.key = path_;
  return loc;
}

void YamlValue::fail(const std::string& message) const {
  throw UserError(where(), message);
}

std::string YamlValue::describe() const {
  if (!present())
    return "nothing";
  if (node_.IsMap())
    return "a mapping";
  if (node_.IsSequence())
    return "a list";
  std::string s = node_.Scalar();
  if (s.size() > 40)
    s = s.substr(0, 37) + "...";
  return "'" + s + "'";
}

void YamlValue::expect_map(const std::string& what) const {
  if (!node_.IsMap())
    fail("expected " + what + " to be a mapping (key: value), got " + describe());
}

void YamlValue::expect_keys(const std::vector<std::string>& valid, const std::string& what) const {
  expect_map(what);
  std::set<std::string> seen;
  for (const auto& kv : node_) {
    const YAML::Node& k = kv.first;
    const std::string key = k.IsScalar() ? k.Scalar() : std::string("<not a name>");
    const std::string key_path = path_.empty() ? key : path_ + "." + key;
    const YamlValue at_key(k, file_, key_path, valid_mark(k.Mark()) ? k.Mark() : mark_);
    if (std::find(valid.begin(), valid.end(), key) == valid.end())
      at_key.fail("unknown key '" + key + "' in " + what + did_you_mean(key, valid) +
                  "; valid keys: " + join_names(valid));
    if (!seen.insert(key).second)
      at_key.fail("key '" + key + "' is given twice in " + what);
  }
}

bool YamlValue::has(const std::string& key) const {
  return get(key).node().IsDefined();
}

YamlValue YamlValue::get(const std::string& key) const {
  const std::string key_path = path_.empty() ? key : path_ + "." + key;
  if (node_.IsMap()) {
    for (const auto& kv : node_) {
      if (kv.first.IsScalar() && kv.first.Scalar() == key) {
        const YAML::Mark m = valid_mark(kv.first.Mark()) ? kv.first.Mark() : mark_;
        return YamlValue(kv.second, file_, key_path, m);
      }
    }
  }
  const YAML::Mark m = valid_mark(node_.Mark()) ? node_.Mark() : mark_;
  return YamlValue(YAML::Node(YAML::NodeType::Undefined), file_, key_path, m);
}

YamlValue YamlValue::require(const std::string& key, const std::string& hint) const {
  YamlValue v = get(key);
  if (!v.present()) {
    if (v.node().IsDefined())
      v.fail("key '" + key + "' has no value; " + hint);
    v.fail("missing required key '" + key + "'; " + hint);
  }
  return v;
}

std::vector<std::pair<std::string, YamlValue>> YamlValue::entries() const {
  std::vector<std::pair<std::string, YamlValue>> out;
  if (!node_.IsMap())
    return out;
  for (const auto& kv : node_) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    const YAML::Mark m = valid_mark(kv.first.Mark()) ? kv.first.Mark() : mark_;
    out.emplace_back(key, YamlValue(kv.second, file_, path_.empty() ? key : path_ + "." + key, m));
  }
  return out;
}

std::vector<YamlValue> YamlValue::items(const std::string& what) const {
  if (!node_.IsSequence())
    fail("expected " + what + " to be a list, got " + describe());
  std::vector<YamlValue> out;
  const YAML::Mark parent = valid_mark(node_.Mark()) ? node_.Mark() : mark_;
  for (size_t i = 0; i < node_.size(); ++i) {
    const YAML::Node item = node_[i];
    const YAML::Mark m = valid_mark(item.Mark()) ? item.Mark() : parent;
    out.emplace_back(item, file_, path_ + "[" + std::to_string(i) + "]", m);
  }
  return out;
}

namespace {

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF). Strings from experiment files end up in JSON (run configs, reports), which holds
// UTF-8 only; a file in Latin-1 or a stray byte gives other bytes.
bool is_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80             ? 0
                  : (c & 0xE0) == 0xC0 ? 1
                  : (c & 0xF0) == 0xE0 ? 2
                  : (c & 0xF8) == 0xF0 ? 3
                                       : -1;
    if (n < 0 || i + n >= s.size())
      return false;
    uint32_t cp = n == 0 ? c : c & (0x3F >> n);
    for (int k = 1; k <= n; ++k) {
      const auto t = static_cast<unsigned char>(s[i + k]);
      if ((t & 0xC0) != 0x80)
        return false;
      cp = (cp << 6) | (t & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

} // namespace

std::string YamlValue::as_string() const {
  if (!present() || !node_.IsScalar())
    fail("expected a string, got " + describe());
  if (!is_utf8(node_.Scalar()))
    fail("expected UTF-8 text, got bytes that are not UTF-8 (a file saved in another encoding?)");
  return node_.Scalar();
}

int64_t YamlValue::as_int64(int64_t min, int64_t max) const {
  int64_t v = 0;
  if (!present() || !node_.IsScalar() || !parse_integer(node_.Scalar(), &v))
    fail("expected an integer" + range_str(min, max) + ", got " + describe());
  if (v < min || v > max)
    fail("expected an integer" + range_str(min, max) + ", got " + std::to_string(v));
  return v;
}

int YamlValue::as_int(int min, int max) const {
  int64_t v = 0;
  if (!present() || !node_.IsScalar() || !parse_integer(node_.Scalar(), &v))
    fail("expected an integer" + range_str(min, max) + ", got " + describe());
  if (v < min || v > max)
    fail("expected an integer" + range_str(min, max) + ", got " + node_.Scalar());
  return static_cast<int>(v);
}

int64_t YamlValue::as_size(int64_t min, const SizeLimit& limit) const {
  const int64_t v = as_int64(min);
  if (v > limit.max)
    fail("expected an integer" + range_str(min, limit.max) + ", got " + node_.Scalar() + ": " +
         limit_text(limit));
  return v;
}

uint64_t YamlValue::as_uint64() const {
  uint64_t v = 0;
  const std::string s = present() && node_.IsScalar() ? node_.Scalar() : std::string();
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
    fail("expected an integer >= 0, got " + describe());
  return v;
}

double YamlValue::as_double(double min, bool exclusive) const {
  double v = 0;
  const bool bounded = std::isfinite(min);
  std::ostringstream bound;
  if (bounded)
    bound << (exclusive ? " > " : " >= ") << min;
  if (!present() || !node_.IsScalar() || !parse_number(node_.Scalar(), &v))
    fail("expected a number" + bound.str() + ", got " + describe());
  if (bounded && (exclusive ? v <= min : v < min))
    fail("expected a number" + bound.str() + ", got " + node_.Scalar());
  return v;
}

bool YamlValue::as_bool() const {
  if (present() && node_.IsScalar()) {
    const std::string s = lower(node_.Scalar());
    if (s == "true" || s == "yes" || s == "on")
      return true;
    if (s == "false" || s == "no" || s == "off")
      return false;
  }
  fail("expected true or false, got " + describe());
}

std::vector<int> YamlValue::as_int_list(int min, int max, bool allow_scalar) const {
  if (allow_scalar && present() && node_.IsScalar())
    return {as_int(min, max)};
  if (!node_.IsSequence())
    fail(std::string("expected a list of integers") + (allow_scalar ? " (or one integer)" : "") +
         ", got " + describe());
  std::vector<int> out;
  for (const auto& item : items("the value"))
    out.push_back(item.as_int(min, max));
  return out;
}

YamlValue parse_yaml(const std::string& text, const std::string& file) {
  try {
    YAML::Node root = YAML::Load(text);
    return YamlValue(root, file, "", YAML::Mark::null_mark());
  } catch (const YAML::Exception& e) {
    SourceLocation loc{file, 0, 0, ""};
    if (valid_mark(e.mark)) {
      loc.line = e.mark.line + 1;
      loc.column = e.mark.column + 1;
    }
    throw UserError(loc, "YAML syntax error: " + e.msg);
  }
}

YamlValue load_yaml_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UserError(SourceLocation{path, 0, 0, ""}, "is a directory, not a YAML file");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UserError(SourceLocation{path, 0, 0, ""},
                    std::string("cannot read the file: ") + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw UserError(SourceLocation{path, 0, 0, ""}, "error while reading the file");
  return parse_yaml(text.str(), path);
}

std::string list_str(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

} // namespace brickdl::detail
