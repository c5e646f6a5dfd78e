#pragma once
// CUPTI measurement (CUDA-free interface; cupti_profiler.cu, or a stub without CUPTI).
//
//   kernel durations: Activity API (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL records, GPU
//                     timestamps, no replay) around the timed repetitions
//   counters:         Range Profiler (cupti_range_profiler.h), one user range around one run
//                     of the candidate, user replay: the run is repeated once per pass the
//                     metrics need; evaluated with the profiler host API (cupti_profiler_host.h)
//
// Counters distort time (replay, serialization), so they are always a separate pass. The host
// API needs no GPU: metric names can be checked against a chip ("GH100", "GA100") anywhere.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace brickdl::cuda {

struct KernelRecord {
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;
  double ms() const { return static_cast<double>(end_ns - start_ns) * 1e-6; }
};

class CuptiProfiler {
public:
  static bool is_supported(); // false when built without CUPTI
  // DRAM bytes read / written, L2 and L1 bytes, SM cycles, FP32 instructions (FFMA, FADD,
  // FMUL, thread level), global atomics (L1 requests and set accesses, L2 requests).
  static std::vector<std::string> default_metrics();
  // Host-only (no GPU): the metrics of `metrics` that `chip` does not know, and the replay
  // passes the known ones need. Throw CudaError for an unknown chip.
  static std::vector<std::string> unknown_metrics(const std::string& chip,
                                                  const std::vector<std::string>& metrics);
  static int passes(const std::string& chip, const std::vector<std::string>& metrics);

  // On `device` (its primary context must be current: the CUDA runtime initialised).
  explicit CuptiProfiler(int device);
  ~CuptiProfiler();
  CuptiProfiler(const CuptiProfiler&) = delete;
  CuptiProfiler& operator=(const CuptiProfiler&) = delete;

  const std::string& chip() const;

  // Kernel records of everything launched between begin and end (end synchronizes, flushes).
  void begin_kernel_records();
  std::vector<KernelRecord> end_kernel_records();

  // Values of `metrics` for one run: per pass, prepare() (outside the range, e.g. an L2
  // flush) then work() inside the range; work() must launch the same kernels every time and
  // synchronize. Unknown metrics throw CudaError.
  std::map<std::string, double> collect(const std::vector<std::string>& metrics,
                                        const std::function<void()>& prepare,
                                        const std::function<void()>& work);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace brickdl::cuda
