#include "core/detail/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace brickdl::detail {

double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  const size_t m = values.size() / 2;
  return values.size() % 2 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

std::vector<double> ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> r(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]])
      ++j;
    for (size_t k = i; k <= j; ++k)
      r[order[k]] = 0.5 * static_cast<double>(i + j) + 1.0;
    i = j + 1;
  }
  return r;
}

std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b) {
  BRICKDL_CHECK(a.size() == b.size(),
                "spearman of vectors of sizes " << a.size() << " and " << b.size());
  if (a.size() < 2)
    return std::nullopt;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double mean = (static_cast<double>(a.size()) + 1) / 2; // of the ranks 1 .. n
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0)
    return std::nullopt;
  return sab / std::sqrt(saa * sbb);
}

} // namespace brickdl::detail
