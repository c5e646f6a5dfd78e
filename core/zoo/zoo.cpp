#include "core/zoo.h"

#include "core/error.h"

namespace brickdl {

const std::vector<ZooEntry>& zoo() {
  static const std::vector<ZooEntry> entries;
  return entries;
}

std::vector<std::string> zoo_names() {
  std::vector<std::string> v;
  for (const auto& e : zoo()) v.push_back(e.name);
  return v;
}

Graph build_zoo_model(const std::string& name, const ZooOptions& options) {
  for (const auto& e : zoo())
    if (e.name == name) return e.build(options);
  throw UserError("unknown model '" + name + "'" + did_you_mean(name, zoo_names()) +
                  "; valid: " + join_names(zoo_names()));
}

Graph build_conv_chain(const ConvChainOptions&) { throw UserError("not yet"); }

}  // namespace brickdl
