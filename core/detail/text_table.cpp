#include "core/detail/text_table.h"

#include <algorithm>

#include "core/error.h"

namespace brickdl::detail {

TextTable::TextTable(std::vector<std::string> header, std::string align)
    : header_(std::move(header)), align_(std::move(align)) {
  align_.resize(header_.size(), 'l');
}

void TextTable::add_row(std::vector<std::string> cells) {
  BRICKDL_CHECK(cells.size() == header_.size(),
                "table row has " << cells.size() << " cells, header " << header_.size());
  for (std::string& cell : cells)
    cell = printable(cell); // cells may hold text read from a file
  rows_.push_back(std::move(cells));
}

void TextTable::print(std::ostream& os, const std::string& indent) const {
  std::vector<size_t> width(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) {
    width[c] = header_[c].size();
    for (const auto& row : rows_)
      width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = indent;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c)
        s += "  ";
      const std::string pad(width[c] - cells[c].size(), ' ');
      s += align_[c] == 'r' ? pad + cells[c] : cells[c] + pad;
    }
    s.erase(s.find_last_not_of(' ') + 1);
    os << s << '\n';
  };
  line(header_);
  std::vector<std::string> rule;
  for (size_t w : width)
    rule.emplace_back(w, '-');
  line(rule);
  for (const auto& row : rows_)
    line(row);
}

} // namespace brickdl::detail
