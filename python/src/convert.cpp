// nlohmann::json ↔ Python objects (bindings.h).
#include "core/error.h"
#include "python/src/bindings.h"

namespace brickdl::python {

nb::object to_python(const nlohmann::json& value) {
  using T = nlohmann::json::value_t;
  switch (value.type()) {
  case T::null:
  case T::discarded: return nb::none();
  case T::boolean: return nb::bool_(value.get<bool>());
  case T::number_integer: return nb::int_(value.get<int64_t>());
  case T::number_unsigned: return nb::int_(value.get<uint64_t>());
  case T::number_float: return nb::float_(value.get<double>());
  case T::string: return nb::str(value.get_ref<const std::string&>().c_str());
  case T::array: {
    nb::list out;
    for (const auto& item : value)
      out.append(to_python(item));
    return out;
  }
  case T::object: {
    nb::dict out;
    for (const auto& [key, item] : value.items())
      out[nb::str(key.c_str())] = to_python(item);
    return out;
  }
  case T::binary: break;
  }
  throw InternalError("to_python: a JSON binary value has no Python form");
}

nlohmann::json parse_json(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(what + " is not JSON: " + e.what());
  }
}

} // namespace brickdl::python
