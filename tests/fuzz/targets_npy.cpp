// The .npy target: brickdl-run --input FILE reads it with read_npy_tensor.
#include <cstring>
#include <filesystem>

#include "kernels/npy.h"
#include "tests/fuzz/mutate.h"
#include "tests/fuzz/targets.h"

namespace brickdl::fuzz {
namespace {

// The shape brickdl-run would ask of the file: that of the seeds' first tensor.
const TensorShape kShape{1, 3, 1, 8, 8, 2};

// A .npy file taken apart: format version, header text, data.
struct NpyParts {
  int major = 1, minor = 0;
  std::string header, data;
};

std::string header_text(const std::string& descr, bool fortran, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

// The file: magic, version, header length (2 bytes in version 1, else 4), header padded with
// spaces to a multiple of 64 and ended by a newline, data. `length` overrides the length field.
std::string encode(const NpyParts& p, int64_t length = -1) {
  const size_t prefix = 8 + (p.major == 1 ? 2 : 4);
  std::string h = p.header;
  while ((prefix + h.size() + 1) % 64 != 0)
    h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(p.major);
  out += static_cast<char>(p.minor);
  const uint64_t len = length >= 0 ? static_cast<uint64_t>(length) : h.size();
  for (size_t i = 0; i < prefix - 8; ++i)
    out += static_cast<char>((len >> (8 * i)) & 0xff);
  return out + h + p.data;
}

bool decode(const std::string& file, NpyParts& p) {
  if (file.size() < 10 || file.compare(0, 6, "\x93NUMPY") != 0)
    return false;
  p.major = static_cast<unsigned char>(file[6]);
  p.minor = static_cast<unsigned char>(file[7]);
  const size_t width = p.major == 1 ? 2 : 4;
  if (file.size() < 8 + width)
    return false;
  size_t len = 0;
  for (size_t i = 0; i < width; ++i)
    len |= static_cast<size_t>(static_cast<unsigned char>(file[8 + i])) << (8 * i);
  if (8 + width + len > file.size())
    return false;
  p.header = file.substr(8 + width, len);
  while (!p.header.empty() && (p.header.back() == ' ' || p.header.back() == '\n'))
    p.header.pop_back();
  p.data = file.substr(8 + width + len);
  return true;
}

std::string floats(size_t n, bool as_double) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const double v = 0.25 * static_cast<double>(i % 13) - 1.0;
    const float f = static_cast<float>(v);
    out.append(as_double ? reinterpret_cast<const char*>(&v) : reinterpret_cast<const char*>(&f),
               as_double ? sizeof v : sizeof f);
  }
  return out;
}

std::string random_shape(std::mt19937_64& rng) {
  const std::vector<std::string> dims = {"0",
                                         "1",
                                         "3",
                                         "8",
                                         "-1",
                                         "2147483648",
                                         "4611686018427387904",
                                         "9223372036854775807",
                                         "18446744073709551616",
                                         "512",
                                         "1e3",
                                         "x",
                                         ""};
  const size_t rank = rng() % 7;
  std::string s = "(";
  for (size_t i = 0; i < rank; ++i)
    s += dims[rng() % dims.size()] + (rank == 1 || rng() % 2 ? "," : ", ");
  return s + ")";
}

// Long on purpose: one switch over the structure-aware mutations of a .npy file.
std::string mutate_structure(NpyParts p, std::mt19937_64& rng) {
  const std::vector<std::string> descrs = {"<f4", "<f8", ">f4", "<i4",  "|u1",   "<f2",
                                           "<c8", "O",   "",    "<f16", "<f4<f4"};
  int64_t length = -1;
  switch (rng() % 8) {
  case 0: p.header = header_text("<f4", false, random_shape(rng)); break;
  case 1: p.header = header_text(descrs[rng() % descrs.size()], false, "(1, 3, 8, 8)"); break;
  case 2: p.header = header_text("<f4", true, "(1, 3, 8, 8)"); break;
  case 3: { // damage the header text: a key, a brace, a quote gone
    const std::vector<std::string> cuts = {"'shape'", "'descr'", "}", "{", "'", "(", ")", ","};
    const std::string& cut = cuts[rng() % cuts.size()];
    if (const size_t at = p.header.find(cut); at != std::string::npos)
      p.header.erase(at, rng() % 2 ? cut.size() : p.header.size() - at);
    break;
  }
  case 4: {
    const int64_t lengths[] = {0, 1, 0xffff, 0x7fffffff, 0xfffffff0, 63, 70};
    length = lengths[rng() % std::size(lengths)];
    p.major = rng() % 2 ? 1 : 2;
    break;
  }
  case 5: {
    const int majors[] = {0, 1, 2, 3, 255};
    p.major = majors[rng() % std::size(majors)];
    break;
  }
  case 6: p.data.resize(rng() % 2 ? p.data.size() / 2 : p.data.size() + 4 + rng() % 64); break;
  default: p.header = mutate_bytes(p.header, rng); break;
  }
  return encode(p, length);
}

} // namespace

std::vector<FuzzInput> npy_seeds() {
  std::vector<FuzzInput> seeds;
  const auto add = [&](const char* origin, const char* descr, const std::string& shape, size_t n,
                       int major) {
    NpyParts p;
    p.major = major;
    p.header = header_text(descr, false, shape);
    p.data = floats(n, std::strcmp(descr, "<f8") == 0);
    seeds.push_back({encode(p), origin});
  };
  add("float32 (1, 3, 8, 8)", "<f4", "(1, 3, 8, 8)", 192, 1);
  add("float64 (1, 3, 8, 8)", "<f8", "(1, 3, 8, 8)", 192, 1);
  add("version 2, float32 (1, 3, 8, 8)", "<f4", "(1, 3, 8, 8)", 192, 2);
  add("float32 (2, 5)", "<f4", "(2, 5)", 10, 1);
  add("float32 (1, 2, 4, 4, 4)", "<f4", "(1, 2, 4, 4, 4)", 128, 1);
  add("float32 scalar ()", "<f4", "()", 1, 1);
  return seeds;
}

std::string mutate_npy(const std::string& in, std::mt19937_64& rng) {
  NpyParts p;
  if (rng() % 3 == 0 || !decode(in, p))
    return mutate_bytes(in, rng);
  return mutate_structure(p, rng);
}

void npy_body(const FuzzInput& in) {
  const std::string path = write_case_file(in.bytes, ".npy");
  kernels::read_npy(path);
  kernels::read_npy_tensor(path, kShape);
  std::filesystem::remove(path);
}

} // namespace brickdl::fuzz
