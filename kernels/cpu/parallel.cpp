#include "kernels/cpu/parallel.h"

namespace brickdl::kernels::cpu {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        cpus.push_back(c);
  if (cpus.empty())
    cpus.push_back(0);
  return cpus;
}

namespace {

void pin_to(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  sched_setaffinity(0, sizeof one, &one); // best effort: a refusal leaves the thread unpinned
}

} // namespace

ScopedPinning::ScopedPinning(int threads) {
  CPU_ZERO(&saved_);
  restore_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0;
  const std::vector<int> cpus = allowed_cpus();
#ifdef BRICKDL_OPENMP
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    pin_to(cpus[static_cast<size_t>(omp_get_thread_num()) % cpus.size()]);
    return;
  }
#endif
  (void)threads;
  pin_to(cpus[0]);
}

ScopedPinning::~ScopedPinning() {
  if (restore_)
    sched_setaffinity(0, sizeof saved_, &saved_);
}

} // namespace brickdl::kernels::cpu
