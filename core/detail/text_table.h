#pragma once
// A plain-text table for terminal output: columns padded to their widest cell, separated by
// two spaces, a dashed rule under the header. Cells are ASCII (widths count bytes); a cell's
// control bytes and bytes that are no UTF-8 are shown escaped (printable(), core/error.h).
#include <ostream>
#include <string>
#include <vector>

namespace brickdl::detail {

class TextTable {
public:
  // `align` has one letter per column: 'l' (text) or 'r' (numbers); missing letters are 'l'.
  explicit TextTable(std::vector<std::string> header, std::string align = "");
  void add_row(std::vector<std::string> cells);
  size_t num_rows() const { return rows_.size(); }
  // Each line starts with `indent`; trailing spaces are trimmed.
  void print(std::ostream& os, const std::string& indent = "") const;

private:
  std::vector<std::string> header_;
  std::string align_;
  std::vector<std::vector<std::string>> rows_;
};

} // namespace brickdl::detail
