#pragma once
// parallel_for: items [0, count) handed out one at a time (an atomic counter, so uneven items
// balance) to `threads` workers; worker t calls fn(item, t). threads <= 1 runs inline.
// The first exception thrown by a worker is rethrown on the caller's thread after all join.
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace brickdl::kernels::detail {

template <typename F> void parallel_for(int64_t count, int threads, F&& fn) {
  if (threads <= 1 || count <= 1) {
    for (int64_t i = 0; i < count; ++i)
      fn(i, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto work = [&](int t) {
    try {
      for (int64_t i = next.fetch_add(1, std::memory_order_relaxed);
           i < count && !failed.load(std::memory_order_relaxed);
           i = next.fetch_add(1, std::memory_order_relaxed))
        fn(i, t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error)
        error = std::current_exception();
      failed.store(true, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t)
    pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool)
    th.join();
  if (error)
    std::rethrow_exception(error);
}

} // namespace brickdl::kernels::detail
