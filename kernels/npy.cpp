#include "kernels/npy.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/limits.h"

namespace brickdl::kernels {

namespace {

static_assert(std::endian::native == std::endian::little, "the .npy code assumes little endian");

constexpr char kMagic[] = "\x93NUMPY";

// The extents joined by `sep`: "2x3x4". Strings here are built by appending: GCC 12 reports a
// false -Wrestrict overlap on `"x" + std::to_string(...)` (operator+(const char*, string&&)).
std::string join_dims(const std::vector<int64_t>& shape, const char* sep) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0)
      s += sep;
    s += std::to_string(shape[i]);
  }
  return s;
}

// Python's repr of a shape tuple: "()", "(7,)", "(2, 3)".
std::string shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  s += join_dims(shape, ", ");
  s += shape.size() == 1 ? ",)" : ")";
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

// A header longer than this is refused before it is read: numpy writes a few hundred bytes.
constexpr uint32_t kMaxHeaderBytes = 1 << 20;
const char* const kValidHeader = "a .npy header is {'descr': '<f4' or '<f8', 'fortran_order': "
                                 "False, 'shape': (d0, d1, ...)}";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw UserError(SourceLocation{path, 0, 0, ""}, what);
}

// The header dict of an open .npy file (after magic, version and length), whose size is
// `file_size`; `*data_offset` is where the data starts.
std::string read_header(std::ifstream& f, const std::string& path, uint64_t file_size,
                        uint64_t* data_offset) {
  char magic[6];
  unsigned char version[2];
  f.read(magic, 6);
  f.read(reinterpret_cast<char*>(version), 2);
  if (!f || std::memcmp(magic, kMagic, 6) != 0)
    fail(path, "not a .npy file (bad magic string)");
  uint32_t header_len = 0;
  if (version[0] == 1) {
    uint16_t l16 = 0;
    f.read(reinterpret_cast<char*>(&l16), 2);
    header_len = l16;
  } else if (version[0] == 2 || version[0] == 3) {
    f.read(reinterpret_cast<char*>(&header_len), 4);
  } else {
    fail(path, "unsupported .npy version " + std::to_string(version[0]) + "." +
                   std::to_string(version[1]) + "; valid: 1.0, 2.0, 3.0");
  }
  const uint64_t start = version[0] == 1 ? 10 : 12;
  if (!f)
    fail(path, "truncated .npy header");
  if (header_len > kMaxHeaderBytes)
    fail(path, ".npy header length " + std::to_string(header_len) + " exceeds " +
                   std::to_string(kMaxHeaderBytes) + " bytes");
  if (start + header_len > file_size)
    fail(path, ".npy header length " + std::to_string(header_len) + " runs past the end of the " +
                   std::to_string(file_size) + "-byte file");
  std::string header(header_len, '\0');
  f.read(header.data(), header_len);
  if (!f)
    fail(path, "truncated .npy header");
  *data_offset = start + header_len;
  return header;
}

// A strict reader of the header dict: a Python dict literal with string keys and, as values,
// a string, True / False, or a tuple of non-negative integers.
class HeaderParser {
public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  // Fills descr, fortran_order and shape; each key must appear once, nothing else may.
  void parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool seen[3] = {false, false, false};
    expect('{');
    while (!peek('}')) {
      const std::string key = string_literal();
      expect(':');
      const int k = static_cast<int>(std::find(kKeys, kKeys + 3, key) - kKeys);
      if (k == 3)
        bad("unknown key '" + key + "'");
      if (seen[k])
        bad("key '" + key + "' is given twice");
      seen[k] = true;
      if (k == 0)
        *descr = string_literal();
      else if (k == 1)
        *fortran = boolean();
      else
        *shape = tuple();
      if (!peek('}'))
        expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != s_.size())
      bad("text after the closing brace");
    for (int k = 0; k < 3; ++k)
      if (!seen[k])
        bad(std::string("no '") + kKeys[k] + "' key");
  }

private:
  static constexpr const char* kKeys[3] = {"descr", "fortran_order", "shape"};

  [[noreturn]] void bad(const std::string& what) const {
    fail(path_, "malformed .npy header (" + what + " at byte " + std::to_string(pos_) + "); " +
                    kValidHeader);
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t'))
      ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c))
      bad(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      bad("expected a quoted string");
    const char quote = s_[pos_];
    const size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string::npos)
      bad("unterminated string");
    std::string v = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return v;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::string w = word;
      if (s_.compare(pos_, w.size(), w) == 0) {
        pos_ += w.size();
        return value;
      }
    }
    bad("expected True or False");
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    while (!peek(')')) {
      int64_t d = 0;
      const char* first = s_.data() + pos_;
      const auto [ptr, ec] = std::from_chars(first, s_.data() + s_.size(), d);
      if (ec == std::errc::result_out_of_range)
        bad("a dimension beyond 64 bits");
      if (ec != std::errc() || d < 0)
        bad("expected a non-negative integer dimension");
      pos_ += static_cast<size_t>(ptr - first);
      dims.push_back(d);
      if (!peek(')'))
        expect(',');
    }
    expect(')');
    return dims;
  }

  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

// Values of the product of `shape`, within the tensor limit (core/limits.h).
int64_t element_count(const std::vector<int64_t>& shape, const std::string& path) {
  int64_t count = 1;
  for (int64_t d : shape)
    count = saturating_mul(count, d);
  if (count > kMaxTensorElements.max)
    fail(path, ".npy shape " + shape_tuple(shape) +
                   " has more elements than allowed: " + limit_text(kMaxTensorElements));
  return count;
}

// `count` values of dtype `descr` ('<f4' or '<f8'), as floats.
std::vector<float> read_values(std::ifstream& f, const std::string& descr, int64_t count) {
  std::vector<float> values;
  if (descr == "<f4") {
    values.resize(static_cast<size_t>(count));
    f.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * 4));
  } else {
    std::vector<double> d(static_cast<size_t>(count));
    f.read(reinterpret_cast<char*>(d.data()), static_cast<std::streamsize>(count * 8));
    values.assign(d.begin(), d.end());
  }
  return values;
}

} // namespace

// Everything about the file is checked against its size before any allocation for its data.
NpyArray read_npy(const std::string& path) {
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  std::ifstream f(path, std::ios::binary);
  if (ec || !f)
    fail(path, "cannot open .npy file");
  uint64_t data_offset = 0;
  const std::string header = read_header(f, path, file_size, &data_offset);
  std::string descr;
  bool fortran = false;
  NpyArray a;
  HeaderParser(header, path).parse(&descr, &fortran, &a.shape);
  if (descr != "<f4" && descr != "<f8")
    fail(path, "dtype '" + descr + "' is not supported; valid: '<f4' (float32), '<f8' (float64)");
  if (fortran)
    fail(path, "Fortran-order arrays are not supported (save a C-order array)");
  const int64_t count = element_count(a.shape, path);
  const uint64_t item = descr == "<f4" ? 4 : 8;
  const uint64_t want = static_cast<uint64_t>(count) * item;
  if (file_size - data_offset != want)
    fail(path, "the .npy data of shape " + shape_tuple(a.shape) + " and dtype '" + descr +
                   "' takes " + std::to_string(want) + " bytes, but the file has " +
                   std::to_string(file_size - data_offset) + " after its header");
  a.data = read_values(f, descr, count);
  if (!f)
    fail(path, "error while reading the .npy data");
  return a;
}

Tensor read_npy_tensor(const std::string& path, const TensorShape& shape) {
  return npy_to_tensor(read_npy(path), shape, path);
}

Tensor npy_to_tensor(NpyArray a, const TensorShape& shape, const std::string& path,
                     const std::string& what) {
  const std::vector<int64_t> want = npy_shape(shape);
  if (a.shape != want) {
    const std::string got = join_dims(a.shape, "x");
    throw UserError(path + (what.empty() ? "" : " (" + what + ")") + ": array of shape " +
                    (got.empty() ? "()" : got) + ", expected " + join_dims(want, "x"));
  }
  Tensor t(shape);
  t.values() = std::move(a.data);
  return t;
}

} // namespace brickdl::kernels
