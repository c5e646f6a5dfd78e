#pragma once
// Threads of the CPU kernels: OpenMP (the runtime oneDNN uses too, so the two share one pool of
// threads), or std::thread where the build has no OpenMP (ThreadSanitizer builds).
//
//   parallel_units(count, threads, fn)   fn(unit, thread) for unit < count, dynamic schedule
//   ScopedPinning pin(threads)           pins thread t of the pool to the t-th CPU this process
//                                        may use; the caller's own affinity is restored after
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <vector>

#include <sched.h>

#include "kernels/detail/parallel.h"

#ifdef BRICKDL_OPENMP
#include <omp.h>
#endif

namespace brickdl::kernels::cpu {

// Units [0, count) over `threads` threads (dynamic: uneven units balance). The first exception
// is rethrown on the caller's thread after all ended.
template <typename F> void parallel_units(int64_t count, int threads, F&& fn) {
#ifdef BRICKDL_OPENMP
  if (threads <= 1 || count <= 1) {
    for (int64_t i = 0; i < count; ++i)
      fn(i, 0);
    return;
  }
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t i = 0; i < count; ++i) {
    if (failed.load(std::memory_order_relaxed))
      continue;
    try {
      fn(i, omp_get_thread_num());
    } catch (...) {
#pragma omp critical(brickdl_parallel_units)
      {
        if (!error)
          error = std::current_exception();
      }
      failed.store(true, std::memory_order_relaxed);
    }
  }
  if (error)
    std::rethrow_exception(error);
#else
  kernels::detail::parallel_for(count, threads, std::forward<F>(fn));
#endif
}

// The CPUs this process may run on, in order (its affinity mask).
std::vector<int> allowed_cpus();

// Pins the threads of the pool to the allowed CPUs (thread t to CPU t mod their number) for its
// lifetime; restores the calling thread's mask when destroyed. Does nothing for threads <= 1
// beyond pinning the caller.
class ScopedPinning {
public:
  explicit ScopedPinning(int threads);
  ~ScopedPinning();
  ScopedPinning(const ScopedPinning&) = delete;
  ScopedPinning& operator=(const ScopedPinning&) = delete;

private:
  cpu_set_t saved_;
  bool restore_ = false;
};

} // namespace brickdl::kernels::cpu
