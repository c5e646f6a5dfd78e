#include "tests/fuzz/mutate.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace brickdl::fuzz {
namespace {

size_t below(std::mt19937_64& rng, size_t n) {
  return n == 0 ? 0 : static_cast<size_t>(rng() % n);
}

bool chance(std::mt19937_64& rng, int percent) {
  return static_cast<int>(rng() % 100) < percent;
}

template <typename T> const T& pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[below(rng, v.size())];
}

std::string huge_string(std::mt19937_64& rng) {
  return std::string(chance(rng, 50) ? 100000 : 4096, static_cast<char>('a' + below(rng, 26)));
}

// ---- YAML ---------------------------------------------------------------------------------

// A place in a YAML tree: the value under `key` of a map, or element `index` of a sequence.
struct YamlSlot {
  YAML::Node parent;
  YAML::Node key; // map slots
  size_t index = 0;
  bool in_map = false;
};

void collect(const YAML::Node& n, std::vector<YamlSlot>& out) {
  if (n.IsMap()) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      out.push_back({n, it->first, 0, true});
      collect(it->second, out);
    }
  } else if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      out.push_back({n, {}, i, false});
      collect(n[i], out);
    }
  }
}

YAML::Node slot_value(const YamlSlot& s) {
  return s.in_map ? s.parent[s.key.Scalar()] : s.parent[s.index];
}

void set_slot(YamlSlot& s, const YAML::Node& v) {
  if (s.in_map)
    s.parent[s.key.Scalar()] = v;
  else
    s.parent[s.index] = v;
}

YAML::Node yaml_value(std::mt19937_64& rng, const YAML::Node& old,
                      const std::vector<std::string>& words) {
  switch (below(rng, 8)) {
  case 0:
  case 1:
  case 2: return YAML::Node(pick_number(rng, old.IsScalar() ? old.Scalar() : ""));
  case 3: return YAML::Node(words.empty() ? std::string("x") : pick(rng, words));
  case 4: {
    YAML::Node seq(YAML::NodeType::Sequence);
    const size_t n = below(rng, 5);
    for (size_t i = 0; i < n; ++i)
      seq.push_back(pick_number(rng, ""));
    return seq;
  }
  case 5: {
    YAML::Node map(YAML::NodeType::Map);
    map[words.empty() ? std::string("x") : pick(rng, words)] = pick_number(rng, "");
    return map;
  }
  case 6: return chance(rng, 50) ? YAML::Node(YAML::NodeType::Null) : YAML::Node(huge_string(rng));
  default:
    return YAML::Node(pick(rng, std::vector<std::string>{"", "true", "false", "~", "-", "[", "{",
                                                         "'", "\"", "\t", "\xff"}));
  }
}

std::string duplicate_line(const std::string& in, std::mt19937_64& rng) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = in.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(in.substr(start, nl - start + 1));
  if (start < in.size())
    lines.push_back(in.substr(start) + "\n");
  if (lines.empty())
    return in;
  const size_t i = below(rng, lines.size());
  const bool remove = chance(rng, 40);
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k)
    if (k != i || !remove)
      out += k == i && !remove ? lines[k] + lines[k] : lines[k];
  return out;
}

// One structural change of the YAML document `root`.
void mutate_yaml_tree(YAML::Node& root, std::mt19937_64& rng,
                      const std::vector<std::string>& words) {
  std::vector<YamlSlot> slots;
  collect(root, slots);
  if (slots.empty())
    return;
  YamlSlot s = pick(rng, slots);
  const size_t op = below(rng, 10);
  if (op < 6) {
    set_slot(s, yaml_value(rng, slot_value(s), words));
  } else if (op == 6 && s.in_map) {
    s.parent.remove(s.key.Scalar());
  } else if (op == 6) {
    YAML::Node seq(YAML::NodeType::Sequence);
    for (size_t i = 0; i < s.parent.size(); ++i)
      if (i != s.index)
        seq.push_back(s.parent[i]);
    s.parent = seq;
  } else if (op == 7 && s.in_map) { // rename the key
    const YAML::Node v = slot_value(s);
    s.parent.remove(s.key.Scalar());
    s.parent[words.empty() ? std::string("x") : pick(rng, words)] = v;
  } else if (op == 7) { // repeat an element
    s.parent.push_back(YAML::Clone(slot_value(s)));
  } else if (op == 8 && s.in_map) { // add a key
    s.parent[words.empty() ? std::string("x") : pick(rng, words)] = yaml_value(rng, {}, words);
  } else {
    set_slot(s, YAML::Clone(slot_value(pick(rng, slots)))); // copy another subtree here
  }
}

// ---- JSON ---------------------------------------------------------------------------------

void collect(const nlohmann::json& j, const nlohmann::json::json_pointer& at,
             std::vector<nlohmann::json::json_pointer>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.push_back(at / it.key());
      collect(it.value(), at / it.key(), out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      out.push_back(at / i);
      collect(j[i], at / i, out);
    }
  }
}

nlohmann::json json_number(std::mt19937_64& rng, const nlohmann::json& old) {
  const std::string text = pick_number(rng, old.is_number() ? old.dump() : "");
  if (text == "NaN")
    return std::numeric_limits<double>::quiet_NaN(); // dumps as null
  const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
  return parsed.is_discarded() ? nlohmann::json(text) : parsed;
}

nlohmann::json json_value(std::mt19937_64& rng, const nlohmann::json& old,
                          const std::vector<std::string>& words) {
  switch (below(rng, 8)) {
  case 0:
  case 1:
  case 2: return json_number(rng, old);
  case 3: return words.empty() ? nlohmann::json("x") : nlohmann::json(pick(rng, words));
  case 4: {
    nlohmann::json a = nlohmann::json::array();
    const size_t n = below(rng, 5);
    for (size_t i = 0; i < n; ++i)
      a.push_back(json_number(rng, nullptr));
    return a;
  }
  case 5: return nlohmann::json::object({{words.empty() ? "x" : pick(rng, words), 1}});
  case 6: return chance(rng, 50) ? nlohmann::json(nullptr) : nlohmann::json(huge_string(rng));
  default: return chance(rng, 50) ? nlohmann::json(true) : nlohmann::json("");
  }
}

void mutate_json_tree(nlohmann::json& root, std::mt19937_64& rng,
                      const std::vector<std::string>& words) {
  std::vector<nlohmann::json::json_pointer> slots;
  collect(root, nlohmann::json::json_pointer(), slots);
  if (slots.empty()) {
    root = json_value(rng, root, words);
    return;
  }
  const nlohmann::json::json_pointer at = pick(rng, slots);
  nlohmann::json& parent = root[at.parent_pointer()];
  const size_t op = below(rng, 10);
  if (op < 6) {
    root[at] = json_value(rng, root[at], words);
  } else if (op == 6 && parent.is_object()) {
    parent.erase(at.back());
  } else if (op == 6) {
    parent.erase(static_cast<size_t>(std::stoul(at.back())));
  } else if (op == 7 && parent.is_array()) {
    parent.push_back(root[at]);
  } else if (op == 7 || op == 8) {
    if (parent.is_object())
      parent[words.empty() ? "x" : pick(rng, words)] = json_value(rng, nullptr, words);
  } else {
    root[at] = nlohmann::json(root[pick(rng, slots)]);
  }
}

} // namespace

const std::vector<std::string>& extreme_numbers() {
  static const std::vector<std::string> v = {"0",
                                             "-1",
                                             "1",
                                             "2",
                                             "3",
                                             "7",
                                             "64",
                                             "255",
                                             "65536",
                                             "1000000",
                                             "2147483647",
                                             "2147483648",
                                             "-2147483648",
                                             "4294967296",
                                             "1073741824",
                                             "1e9",
                                             "1e18",
                                             "1e308",
                                             "-1e308",
                                             "1e-320",
                                             "0.5",
                                             "-0.0",
                                             "NaN",
                                             ".nan",
                                             ".inf",
                                             "-.inf",
                                             "9223372036854775807",
                                             "9223372036854775808",
                                             "-9223372036854775808",
                                             "18446744073709551615",
                                             "184467440737095516150"};
  return v;
}

std::string pick_number(std::mt19937_64& rng, const std::string& number) {
  char* end = nullptr;
  const long long n = number.empty() ? 0 : std::strtoll(number.c_str(), &end, 10);
  if (!number.empty() && end && *end == '\0' && chance(rng, 40)) {
    const long long deltas[] = {-1, 1, 2, -2};
    switch (below(rng, 4)) {
    case 0: return std::to_string(n + deltas[below(rng, 4)]);
    case 1: return std::to_string(n * 2);
    case 2: return std::to_string(n / 2);
    default: return std::to_string(below(rng, 65));
    }
  }
  return pick(rng, extreme_numbers());
}

// Long on purpose: one switch over the byte-level mutations.
std::string mutate_bytes(const std::string& in, std::mt19937_64& rng) {
  std::string s = in;
  if (s.empty())
    return std::string(1, static_cast<char>(rng()));
  const size_t pos = below(rng, s.size());
  switch (below(rng, 9)) {
  case 0: // flip bits
    for (int k = 0, n = 1 + static_cast<int>(below(rng, 8)); k < n; ++k)
      s[below(rng, s.size())] ^= static_cast<char>(1u << below(rng, 8));
    break;
  case 1: { // interesting bytes
    const char bytes[] = {0, 1, 0x7f, static_cast<char>(0x80), static_cast<char>(0xff), '-', '9'};
    s[pos] = bytes[below(rng, sizeof bytes)];
    break;
  }
  case 2: { // an extreme integer of 2, 4 or 8 bytes
    const uint64_t values[] = {0,          0xffffffffffffffffull, 0x7fffffff, 0x80000000,
                               0xffffffff, 0x7fffffffffffffffull, 0xfff0,     1ull << 40};
    const uint64_t v = values[below(rng, std::size(values))];
    const size_t width = size_t{2} << below(rng, 3);
    std::memcpy(&s[pos], &v, std::min(width, s.size() - pos));
    break;
  }
  case 3: // erase a range
    s.erase(pos, 1 + below(rng, std::min<size_t>(64, s.size() - pos)));
    break;
  case 4: // insert random bytes
    s.insert(pos, std::string(1 + below(rng, 16), static_cast<char>(rng())));
    break;
  case 5: // duplicate a range
    s.insert(pos, s.substr(below(rng, s.size()), 1 + below(rng, 256)));
    break;
  case 6: // truncate
    s.resize(pos);
    break;
  case 7: // random bytes over a range (e.g. 64 bytes of a database page)
    for (size_t k = pos; k < std::min(s.size(), pos + 64); ++k)
      s[k] = static_cast<char>(rng());
    break;
  default: // swap two bytes
    std::swap(s[pos], s[below(rng, s.size())]);
    break;
  }
  return s;
}

std::string mutate_yaml(const std::string& in, std::mt19937_64& rng,
                        const std::vector<std::string>& words) {
  if (chance(rng, 8))
    return mutate_bytes(in, rng);
  if (chance(rng, 8))
    return duplicate_line(in, rng);
  try {
    YAML::Node root = YAML::Load(in);
    mutate_yaml_tree(root, rng, words);
    YAML::Emitter out;
    out << root;
    return out.c_str();
  } catch (const std::exception&) { // an earlier byte mutation broke the text: keep at it
    return mutate_bytes(in, rng);
  }
}

std::string mutate_json(const std::string& in, std::mt19937_64& rng,
                        const std::vector<std::string>& words) {
  if (chance(rng, 8))
    return mutate_bytes(in, rng);
  nlohmann::json root = nlohmann::json::parse(in, nullptr, false);
  if (root.is_discarded())
    return mutate_bytes(in, rng);
  mutate_json_tree(root, rng, words);
  return root.dump(chance(rng, 50) ? -1 : 1);
}

} // namespace brickdl::fuzz
