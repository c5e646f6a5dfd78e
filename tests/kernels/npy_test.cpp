// .npy headers from hostile files: every malformed or lying header is a UserError naming the
// file and what is valid, refused before any allocation for the data it claims.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "kernels/npy.h"

namespace brickdl::kernels {
namespace {

namespace fs = std::filesystem;

class NpyFile {
public:
  NpyFile() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (fs::temp_directory_path() / (std::string("brickdl_npy_test_") + info->name() + ".npy"))
                .string();
  }
  ~NpyFile() { fs::remove(path_); }
  const std::string& path() const { return path_; }

  // Version 1.0 (or 2.0 with a 4-byte length), `header` as given, then `data_bytes` zeros.
  void write(const std::string& header, size_t data_bytes, int version = 1) const {
    std::ofstream f(path_, std::ios::binary);
    f.write("\x93NUMPY", 6);
    const char v[2] = {static_cast<char>(version), 0};
    f.write(v, 2);
    write_length(f, static_cast<uint32_t>(header.size()), version);
    f << header << std::string(data_bytes, '\0');
  }
  // A header length field of `length` followed by `body` (which need not be that long).
  void write_raw_length(uint32_t length, const std::string& body, int version) const {
    std::ofstream f(path_, std::ios::binary);
    f.write("\x93NUMPY", 6);
    const char v[2] = {static_cast<char>(version), 0};
    f.write(v, 2);
    write_length(f, length, version);
    f << body;
  }

private:
  static void write_length(std::ofstream& f, uint32_t length, int version) {
    if (version == 1) {
      const uint16_t l = static_cast<uint16_t>(length);
      f.write(reinterpret_cast<const char*>(&l), 2);
    } else {
      f.write(reinterpret_cast<const char*>(&length), 4);
    }
  }
  std::string path_;
};

std::string header(const std::string& shape, const std::string& descr = "'<f4'",
                   const std::string& fortran = "False") {
  return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n";
}

// The message of the UserError read_npy throws for `file`; fails the test when there is none.
std::string refusal(const NpyFile& file) {
  try {
    read_npy(file.path());
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(file.path()), std::string::npos) << what;
    return what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a UserError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "accepted";
  return "";
}

void expect_refusal(const NpyFile& file, const std::string& fragment) {
  const std::string what = refusal(file);
  EXPECT_NE(what.find(fragment), std::string::npos) << what;
}

TEST(NpyHostile, WellFormedFilesStillRead) {
  NpyFile f;
  f.write(header("(2, 3)"), 24);
  EXPECT_EQ(read_npy(f.path()).shape, (std::vector<int64_t>{2, 3}));
  f.write(header("(7,)", "'<f8'"), 56, 2);
  EXPECT_EQ(read_npy(f.path()).data.size(), 7u);
  f.write("{\"descr\":\"<f4\",\"shape\":(),\"fortran_order\":False}", 4);
  EXPECT_EQ(read_npy(f.path()).data.size(), 1u);
}

// 192 bytes claiming 1.6 GB of data: refused from the file size, before allocating.
TEST(NpyHostile, ShapeLargerThanTheFile) {
  NpyFile f;
  f.write(header("(1, 3, 512, 512, 512)"), 192 - 10 - header("(1, 3, 512, 512, 512)").size());
  EXPECT_EQ(fs::file_size(f.path()), 192u);
  expect_refusal(f, "takes 1610612736 bytes, but the file has");
}

TEST(NpyHostile, HugeHeaderLength) {
  NpyFile f;
  f.write_raw_length(0xFFFFFFF0u, header("(1,)"), 2);
  expect_refusal(f, "header length 4294967280 exceeds 1048576 bytes");
  f.write_raw_length(4000, header("(1,)"), 1);
  expect_refusal(f, "runs past the end");
}

TEST(NpyHostile, MalformedDicts) {
  NpyFile f;
  for (const std::string h :
       {"{'descr': '<f4', 'fortran_order': False, 'shape':}", "{'descr': '<f4'",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", "'descr': '<f4'",
        "{'descr': '<f4', 'fortran_order': False}", "{'descr': <f4, 'fortran_order': False}",
        "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}",
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} trailing",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}", ""}) {
    SCOPED_TRACE(h);
    f.write(h, 4);
    expect_refusal(f, "malformed .npy header");
  }
}

TEST(NpyHostile, BadDescrAndFortranOrder) {
  NpyFile f;
  f.write(header("(1,)", "'<i4'"), 4);
  expect_refusal(f, "valid: '<f4' (float32), '<f8' (float64)");
  f.write(header("(1,)", "'<f4'", "True"), 4);
  expect_refusal(f, "Fortran-order");
}

TEST(NpyHostile, BadDimensions) {
  NpyFile f;
  f.write(header("(-1,)"), 4);
  expect_refusal(f, "non-negative integer dimension");
  f.write(header("(99999999999999999999,)"), 4);
  expect_refusal(f, "beyond 64 bits");
  // 2^40 · 2^40 overflows int64; 2^40 alone is above the tensor limit.
  f.write(header("(1099511627776, 1099511627776)"), 4);
  expect_refusal(f, "more elements than allowed");
  f.write(header("(1099511627776,)"), 4);
  expect_refusal(f, "more elements than allowed");
}

TEST(NpyHostile, TruncatedOrOverlongData) {
  NpyFile f;
  f.write(header("(2, 3)"), 23);
  expect_refusal(f, "takes 24 bytes, but the file has 23");
  f.write(header("(2, 3)"), 25);
  expect_refusal(f, "takes 24 bytes, but the file has 25");
  f.write_raw_length(20, "{'de", 1);
  expect_refusal(f, "runs past the end");
}

TEST(NpyHostile, BadVersionAndMagic) {
  NpyFile f;
  f.write(header("(1,)"), 4, 9);
  expect_refusal(f, "unsupported .npy version 9.0");
  {
    std::ofstream o(f.path(), std::ios::binary);
    o << "\x93NUM";
  }
  expect_refusal(f, "bad magic");
}

} // namespace
} // namespace brickdl::kernels
