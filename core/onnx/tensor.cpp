// TensorProto reading and writing for the ONNX importer, exporter and node tests.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/onnx/proto.h"

namespace brickdl {

namespace onnx_detail {

int64_t element_count(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

std::vector<int64_t> onnx_dims(const TensorShape& s, int rank) {
  switch (rank) {
  case 1: return {s.numel()};
  case 2: return {s.n, s.c * s.spatial()};
  case 3: return {s.n, s.c, s.w};
  case 4: return {s.n, s.c, s.h, s.w};
  default: return {s.n, s.c, s.d, s.h, s.w};
  }
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw UserError(path + ": cannot open the file");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

namespace {

template <typename T>
void from_raw(const std::string& raw, size_t count, const std::string& where,
              std::vector<float>* out) {
  if (raw.size() != count * sizeof(T))
    throw UserError(fmt::format("{}: raw data of {} bytes for {} values of {} bytes", where,
                                raw.size(), count, sizeof(T)));
  out->resize(count);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    (*out)[i] = static_cast<float>(v);
  }
}

template <typename Field> void from_typed(const Field& f, std::vector<float>* out) {
  out->reserve(static_cast<size_t>(f.size()));
  for (const auto v : f)
    out->push_back(static_cast<float>(v));
}

// The values of `t` (n of them when raw) as floats, whatever their element type.
void values_from_proto(const onnx::TensorProto& t, size_t n, const std::string& where,
                       std::vector<float>* values) {
  const bool raw = t.has_raw_data();
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    raw ? from_raw<float>(t.raw_data(), n, where, values) : from_typed(t.float_data(), values);
    break;
  case onnx::TensorProto::DOUBLE:
    raw ? from_raw<double>(t.raw_data(), n, where, values) : from_typed(t.double_data(), values);
    break;
  case onnx::TensorProto::INT32:
    raw ? from_raw<int32_t>(t.raw_data(), n, where, values) : from_typed(t.int32_data(), values);
    break;
  case onnx::TensorProto::INT64:
    raw ? from_raw<int64_t>(t.raw_data(), n, where, values) : from_typed(t.int64_data(), values);
    break;
  // The narrow integer types and bool keep their typed values in int32_data.
  case onnx::TensorProto::BOOL:
  case onnx::TensorProto::UINT8:
    raw ? from_raw<uint8_t>(t.raw_data(), n, where, values) : from_typed(t.int32_data(), values);
    break;
  case onnx::TensorProto::INT8:
    raw ? from_raw<int8_t>(t.raw_data(), n, where, values) : from_typed(t.int32_data(), values);
    break;
  case onnx::TensorProto::INT16:
    raw ? from_raw<int16_t>(t.raw_data(), n, where, values) : from_typed(t.int32_data(), values);
    break;
  case onnx::TensorProto::UINT16:
    raw ? from_raw<uint16_t>(t.raw_data(), n, where, values) : from_typed(t.int32_data(), values);
    break;
  case onnx::TensorProto::UINT32:
    raw ? from_raw<uint32_t>(t.raw_data(), n, where, values) : from_typed(t.uint64_data(), values);
    break;
  case onnx::TensorProto::UINT64:
    raw ? from_raw<uint64_t>(t.raw_data(), n, where, values) : from_typed(t.uint64_data(), values);
    break;
  default:
    throw UserError(fmt::format(
        "{}: element type {} is not supported (float, double, bool and the integer types)", where,
        onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t.data_type()))));
  }
}

} // namespace

OnnxTensor tensor_from_proto(const onnx::TensorProto& t, const std::string& where) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw UserError(where + ": its external data was not loaded");
  OnnxTensor out;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: break;
  default: out.integer = true; // bool and the integer types (others are refused below)
  }
  int64_t count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && count > (int64_t{1} << 40) / d))
      throw UserError(
          fmt::format("{}: dims [{}] are out of range", where, fmt::join(t.dims(), ", ")));
    out.dims.push_back(d);
    count *= d;
  }
  const auto n = static_cast<size_t>(count);
  values_from_proto(t, n, where, &out.values);
  if (out.values.size() != n)
    throw UserError(fmt::format("{}: {} values for dims [{}] ({} values)", where, out.values.size(),
                                fmt::join(out.dims, ", "), n));
  return out;
}

namespace {

// ONNX's external data entries of `t`: location, offset, length (checksum is not checked).
struct ExternalData {
  std::string location;
  int64_t offset = 0, length = -1;
};

ExternalData external_entries(const onnx::TensorProto& t, const std::string& where) {
  ExternalData e;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") {
      e.location = kv.value();
      continue;
    }
    if (kv.key() != "offset" && kv.key() != "length")
      continue;
    int64_t v = -1;
    try {
      size_t used = 0;
      v = std::stoll(kv.value(), &used);
      if (used != kv.value().size())
        v = -1;
    } catch (const std::exception&) {
    }
    if (v < 0)
      throw UserError(fmt::format("{}: external data {} '{}' is not a non-negative integer", where,
                                  kv.key(), kv.value()));
    (kv.key() == "offset" ? e.offset : e.length) = v;
  }
  if (e.location.empty())
    throw UserError(where + ": external data without a location");
  return e;
}

} // namespace

void load_external_data(onnx::TensorProto* t, const std::string& dir, const std::string& where) {
  namespace fs = std::filesystem;
  if (t->data_location() != onnx::TensorProto::EXTERNAL)
    return;
  const ExternalData e = external_entries(*t, where);
  const fs::path rel = fs::path(e.location).lexically_normal();
  if (rel.is_absolute() || rel.empty() || *rel.begin() == "..")
    throw UserError(fmt::format("{}: external data location '{}' must be a path inside the "
                                "model's folder",
                                where, e.location));
  const fs::path file = fs::path(dir) / rel;
  std::ifstream f(file, std::ios::binary | std::ios::ate);
  if (!f)
    throw UserError(fmt::format("{}: cannot open its external data file {}", where, file.string()));
  const auto size = static_cast<int64_t>(f.tellg());
  const int64_t length = e.length >= 0 ? e.length : size - e.offset;
  if (e.offset > size || length < 0 || e.offset + length > size)
    throw UserError(fmt::format("{}: external data file {} has {} bytes; the tensor's are "
                                "[{}, {})",
                                where, file.string(), size, e.offset, e.offset + length));
  std::string bytes(static_cast<size_t>(length), '\0');
  f.seekg(e.offset);
  if (!f.read(bytes.data(), length))
    throw UserError(fmt::format("{}: cannot read external data file {}", where, file.string()));
  t->set_raw_data(std::move(bytes));
  t->clear_external_data();
  t->set_data_location(onnx::TensorProto::DEFAULT);
}

onnx::TensorProto tensor_to_proto(const std::string& name, const std::vector<int64_t>& dims,
                                  const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims)
    t.add_dims(d);
  t.set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return t;
}

} // namespace onnx_detail

bool is_onnx_path(const std::string& path) {
  constexpr std::string_view kSuffix = ".onnx";
  return path.size() > kSuffix.size() &&
         path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

OnnxTensor read_onnx_tensor(const std::string& path) {
  const std::string bytes = onnx_detail::read_file(path);
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes))
    throw UserError(path + ": not a serialized ONNX TensorProto");
  return onnx_detail::tensor_from_proto(t, path);
}

void write_onnx_tensor(const std::string& path, const OnnxTensor& t, const std::string& name) {
  const onnx::TensorProto p = onnx_detail::tensor_to_proto(name, t.dims, t.values);
  std::ofstream f(path, std::ios::binary);
  if (!f || !p.SerializeToOstream(&f))
    throw UserError(path + ": cannot write the tensor");
}

} // namespace brickdl
