#pragma once
// Golden-output checks of the CLI tests: an output is compared with tests/cli/golden/<name>.
// Under BRICKDL_UPDATE_GOLDEN=1 the file is written instead and the check fails, naming the
// file: a rewritten golden file is a change to review (git diff), never a pass; then rerun
// without the variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace brickdl::testing {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void expect_golden(const std::string& name, const std::string& actual) {
  const std::filesystem::path golden =
      std::filesystem::path(BRICKDL_SOURCE_DIR) / "tests/cli/golden" / name;
  if (std::getenv("BRICKDL_UPDATE_GOLDEN")) {
    const bool existed = std::filesystem::exists(golden);
    const bool same = existed && read_file(golden) == actual;
    std::ofstream(golden, std::ios::binary | std::ios::trunc) << actual;
    ADD_FAILURE() << "rewrote tests/cli/golden/" << name
                  << (same      ? " (unchanged)"
                      : existed ? " (changed)"
                                : " (new)")
                  << ": review the diff and rerun without BRICKDL_UPDATE_GOLDEN";
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(golden)) << golden << " is missing (BRICKDL_UPDATE_GOLDEN=1)";
  EXPECT_EQ(actual, read_file(golden)) << "output differs from " << golden;
}

} // namespace brickdl::testing
