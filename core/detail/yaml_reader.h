#pragma once
// YamlValue: a yaml-cpp node together with the file and key path it came from, so that every
// read can throw a UserError naming file, line, column and key ("search.brick_sizes[2]").
// Shared by the experiment loader (core/experiment.cpp) and the inline-graph loader
// (core/yaml_graph.cpp); not part of the public interface.
//
// Reads are strict: an integer is a plain decimal integer (no 0x, no octal, no 8.0), a
// number is a decimal integer or float, a boolean is true/false (yes/no/on/off accepted as
// YAML 1.1 spells them). A mapping read with expect_keys() rejects unknown and repeated keys.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "core/limits.h"

namespace brickdl::detail {

class YamlValue {
public:
  // `mark` is where the value is reported when the node itself has no position (a missing
  // or null value): the position of its key, or of the enclosing mapping.
  YamlValue(YAML::Node node, std::string file, std::string path, YAML::Mark mark);

  const YAML::Node& node() const { return node_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; } // "" at the document root
  SourceLocation where() const;
  [[noreturn]] void fail(const std::string& message) const;

  bool present() const { return node_.IsDefined() && !node_.IsNull(); }
  bool is_map() const { return node_.IsMap(); }
  bool is_seq() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }
  // "a mapping", "a list", "'abc'", "nothing": what was found, for "expected X, got Y".
  std::string describe() const;

  // Mappings. expect_map() fails unless this is a mapping; expect_keys() also rejects any key
  // not in `valid` (suggesting the nearest) and any key given twice. `what` names the mapping
  // in messages ("search", "layer 'conv1'").
  void expect_map(const std::string& what) const;
  void expect_keys(const std::vector<std::string>& valid, const std::string& what) const;
  // Whether the mapping has `key`, even with no value (`batch:`), which the typed reads then
  // reject as "got nothing".
  bool has(const std::string& key) const;
  // The value of `key`; when absent, a value that is not present() and reports at this
  // mapping's position.
  YamlValue get(const std::string& key) const;
  // The value of `key`, or a "missing required key" error explaining `hint`.
  YamlValue require(const std::string& key, const std::string& hint) const;
  // Keys in file order with their values.
  std::vector<std::pair<std::string, YamlValue>> entries() const;

  // Sequences. items() fails unless this is a list.
  std::vector<YamlValue> items(const std::string& what) const;

  // Scalars; each fails with "expected ..., got ..." or a range message.
  std::string as_string() const;
  int64_t as_int64(int64_t min = std::numeric_limits<int64_t>::min(),
                   int64_t max = std::numeric_limits<int64_t>::max()) const;
  int as_int(int min = std::numeric_limits<int>::min(),
             int max = std::numeric_limits<int>::max()) const;
  // An integer in [min, limit.max]; above it, the message names the limit (core/limits.h).
  int64_t as_size(int64_t min, const SizeLimit& limit) const;
  uint64_t as_uint64() const;
  // A finite number >= min (> min when `exclusive`).
  double as_double(double min = -std::numeric_limits<double>::infinity(),
                   bool exclusive = false) const;
  bool as_bool() const;
  // A list of integers in [min, max]; `allow_scalar` also accepts a single integer.
  std::vector<int> as_int_list(int min, int max, bool allow_scalar = false) const;

private:
  YAML::Node node_;
  std::string file_;
  std::string path_;
  YAML::Mark mark_;
};

// Parses YAML text; a syntax error becomes a UserError at yaml-cpp's line and column.
YamlValue parse_yaml(const std::string& text, const std::string& file);
// Reads and parses a file; an unreadable file is a UserError naming it.
YamlValue load_yaml_file(const std::string& path);

// "[1, 2, 3]" for messages.
std::string list_str(const std::vector<int>& v);

} // namespace brickdl::detail
