#include "kernels/cpu/cache_flush.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace brickdl::kernels::cpu {

int64_t last_level_cache_bytes() {
  int64_t bytes = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  bytes = std::max<int64_t>(bytes, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
  bytes = std::max<int64_t>(bytes, sysconf(_SC_LEVEL2_CACHE_SIZE));
#endif
  return bytes > 0 ? bytes : int64_t{32} << 20;
}

double flush_caches(int threads) {
  static const std::vector<double> sweep(
      static_cast<size_t>(2 * last_level_cache_bytes() / static_cast<int64_t>(sizeof(double))),
      1.0);
  const int64_t chunks = 64, n = static_cast<int64_t>(sweep.size());
  std::vector<double> sums(static_cast<size_t>(chunks), 0.0);
  parallel_units(chunks, threads, [&](int64_t c, int) {
    double s = 0;
    for (int64_t i = c * n / chunks; i < (c + 1) * n / chunks; i += 8) // one read per line
      s += sweep[static_cast<size_t>(i)];
    sums[static_cast<size_t>(c)] = s;
  });
  double total = 0;
  for (double s : sums)
    total += s;
  return total;
}

} // namespace brickdl::kernels::cpu
