#include "kernels/npy.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace brickdl::kernels {

namespace {

static_assert(std::endian::native == std::endian::little, "the .npy code assumes little endian");

constexpr char kMagic[] = "\x93NUMPY";

// Python's repr of a shape tuple: "()", "(7,)", "(2, 3)".
std::string shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Value of `key` in the header dict, as its raw text ("'<f4'", "False", "(2, 3)").
std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  const std::string quoted = "'" + key + "'";
  const size_t k = header.find(quoted);
  if (k == std::string::npos)
    throw UserError(path + ": .npy header has no '" + key + "' key");
  size_t v = header.find(':', k + quoted.size());
  if (v == std::string::npos)
    throw UserError(path + ": malformed .npy header");
  ++v;
  while (v < header.size() && header[v] == ' ')
    ++v;
  size_t e = v;
  if (header[v] == '(') {
    e = header.find(')', v);
    if (e == std::string::npos)
      throw UserError(path + ": malformed .npy shape");
    return header.substr(v, e - v + 1);
  }
  while (e < header.size() && header[e] != ',' && header[e] != '}')
    ++e;
  std::string s = header.substr(v, e - v);
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

} // namespace

std::vector<int64_t> npy_shape(const TensorShape& s) {
  if (s.spatial_rank == 0)
    return {s.n, s.c};
  if (s.spatial_rank == 3)
    return {s.n, s.c, s.d, s.h, s.w};
  return {s.n, s.c, s.h, s.w};
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<float>& data) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  BRICKDL_CHECK(count == static_cast<int64_t>(data.size()),
                "shape of " << count << " elements for " << data.size() << " values");
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_tuple(shape) + ", }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of
  // 64 bytes and ended by a newline.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f)
    throw UserError(path + ": cannot open for writing");
  f.write(kMagic, 6);
  const char version[2] = {1, 0};
  f.write(version, 2);
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(data.data()),
          static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!f)
    throw UserError(path + ": write failed");
}

void write_npy(const std::string& path, const Tensor& t) {
  write_npy(path, npy_shape(t.shape()), t.values());
}

namespace {

// The header dict of an open .npy file (after magic, version and length).
std::string read_header(std::ifstream& f, const std::string& path) {
  char magic[6];
  unsigned char version[2];
  f.read(magic, 6);
  f.read(reinterpret_cast<char*>(version), 2);
  if (!f || std::memcmp(magic, kMagic, 6) != 0)
    throw UserError(path + ": not a .npy file (bad magic string)");
  uint32_t header_len = 0;
  if (version[0] == 1) {
    uint16_t l16 = 0;
    f.read(reinterpret_cast<char*>(&l16), 2);
    header_len = l16;
  } else if (version[0] == 2 || version[0] == 3) {
    f.read(reinterpret_cast<char*>(&header_len), 4);
  } else {
    throw UserError(path + ": unsupported .npy version " + std::to_string(version[0]));
  }
  std::string header(header_len, '\0');
  f.read(header.data(), header_len);
  if (!f)
    throw UserError(path + ": truncated .npy header");
  return header;
}

// The extents of a shape tuple ("(2, 3)", "(7,)", "()").
std::vector<int64_t> parse_shape(const std::string& tuple, const std::string& path) {
  std::vector<int64_t> shape;
  std::istringstream ts(tuple.substr(1, tuple.size() - 2));
  std::string item;
  while (std::getline(ts, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos)
      continue;
    size_t used = 0;
    int64_t d = -1;
    try {
      d = std::stoll(item, &used);
    } catch (const std::exception&) {
    }
    if (d < 0 ||
        item.find_first_not_of(' ', item.find_first_not_of(' ') + used) != std::string::npos)
      throw UserError(path + ": malformed .npy shape " + tuple);
    shape.push_back(d);
  }
  return shape;
}

// `count` values of dtype `descr` ('<f4' or '<f8'), as floats.
std::vector<float> read_values(std::ifstream& f, const std::string& descr, int64_t count,
                               const std::string& path) {
  std::vector<float> values;
  if (descr == "'<f4'") {
    values.resize(static_cast<size_t>(count));
    f.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * 4));
  } else if (descr == "'<f8'") {
    std::vector<double> d(static_cast<size_t>(count));
    f.read(reinterpret_cast<char*>(d.data()), static_cast<std::streamsize>(count * 8));
    values.assign(d.begin(), d.end());
  } else {
    throw UserError(path + ": dtype " + descr +
                    " is not supported; valid: '<f4' (float32), "
                    "'<f8' (float64)");
  }
  if (!f)
    throw UserError(path + ": truncated .npy data (" + std::to_string(count) + " values expected)");
  return values;
}

} // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw UserError(path + ": cannot open .npy file");
  const std::string header = read_header(f, path);
  const std::string descr = dict_value(header, "descr", path);
  if (dict_value(header, "fortran_order", path) != "False")
    throw UserError(path + ": Fortran-order arrays are not supported (save a C-order array)");
  NpyArray a;
  a.shape = parse_shape(dict_value(header, "shape", path), path);
  int64_t count = 1;
  for (int64_t d : a.shape)
    count *= d;
  a.data = read_values(f, descr, count, path);
  return a;
}

Tensor read_npy_tensor(const std::string& path, const TensorShape& shape) {
  NpyArray a = read_npy(path);
  const std::vector<int64_t> want = npy_shape(shape);
  if (a.shape != want) {
    std::string got;
    for (size_t i = 0; i < a.shape.size(); ++i)
      got += (i ? "x" : "") + std::to_string(a.shape[i]);
    std::string w;
    for (size_t i = 0; i < want.size(); ++i)
      w += (i ? "x" : "") + std::to_string(want[i]);
    throw UserError(path + ": array of shape " + (got.empty() ? "()" : got) + ", expected " + w);
  }
  Tensor t(shape);
  t.values() = std::move(a.data);
  return t;
}

} // namespace brickdl::kernels
