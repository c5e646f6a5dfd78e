#pragma once
// The worker threads of the CPU benchmarks: BRICKDL_BENCH_THREADS, else every CPU this process
// may use.
#include <cstdlib>

#include "kernels/merged_executor.h"

namespace brickdl::bench {

inline int cpu_bench_threads() {
  const char* t = std::getenv("BRICKDL_BENCH_THREADS");
  return t && std::atoi(t) > 0 ? std::atoi(t) : kernels::usable_cpus();
}

} // namespace brickdl::bench
