#pragma once
// Measurer: runs one candidate of a graph on a backend and returns what it saw.
//
//   search driver ──measure(graph, candidate, options)──► Measurer ──► MeasureResult
//                                                          ├─ CpuMeasurer   (kernels/)
//                                                          ├─ CudaMeasurer  (kernels/, CUPTI)
//                                                          └─ none: no measurer at all
//
// A candidate that fails (compile error, launch failure, time-out, wrong result) is a result
// with a status, never an exception that ends the run. Exceptions are for broken setups.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/candidate.h"
#include "core/graph.h"

namespace brickdl {

// kCrashed: the worker process measuring the candidate died (a signal, an abort, an exit)
// before it answered (distributed/process_pool.h); in process there is no such status.
enum class MeasureStatus {
  kOk,
  kCompileError,
  kLaunchError,
  kTimeout,
  kWrongResult,
  kUnsupported,
  kCrashed
};
const char* measure_status_name(MeasureStatus s);
bool parse_measure_status(const std::string& s, MeasureStatus* out);

struct MeasureOptions {
  int warmup = 3;
  int repetitions = 10;
  bool flush_l2 = true; // cold runs (GPU)
  bool collect_counters = true;
  double timeout_s = 60;
  uint64_t seed = 1;  // random inputs and weights
  double rtol = 1e-4; // validation against the reference
  double atol = 1e-5;
};

struct MeasureResult {
  MeasureStatus status = MeasureStatus::kOk;
  std::string error;              // why, when status != kOk
  std::vector<double> samples_ms; // one per repetition, in run order
  double median_ms = 0;
  double min_ms = 0, max_ms = 0; // spread
  double p25_ms = 0, p75_ms = 0;
  double max_rel_error = 0; // validation against the reference
  // Counters by name: CUPTI metric names on a GPU ("dram__bytes_read.sum", ...), and the
  // CPU executor's own counts ("flops", "bricks_computed", "memo_claims", "memo_hits",
  // "memo_conflicts", "bytes_loaded", "bytes_stored", ...).
  std::map<std::string, double> counters;

  // Fills median/min/max/p25/p75 from samples_ms.
  void summarize();
};

// Appended to a target by a measurer that only validates a GPU plan on the CPU
// ("cpu:<model>#validation", search/measurers.h): its results are checks, never times.
// brickdl-query, merge and the figure scripts tell them apart by this suffix.
inline constexpr const char* kValidationTargetSuffix = "#validation";

class Measurer {
public:
  virtual ~Measurer() = default;
  // "cpu:<processor model>" or "gpu:<name>/sm<cc>/<driver>/<cuda>/<cudnn>": results never mix
  // targets silently.
  virtual std::string target() const = 0;
  virtual std::string backend() const = 0; // "cpu" or "cuda"
  virtual MeasureResult measure(const Graph& graph, const Candidate& candidate,
                                const MeasureOptions& options) = 0;
  // True after a failure that left this process's device unusable (a sticky CUDA error, or a
  // kernel still running) and that the measurer did not repair in place: a later result would
  // be wrong. A measuring worker process (distributed/process_pool.h) reports the failed
  // candidate, exits and is started afresh, as CUDA's documentation asks for these errors; in
  // process the CUDA measurer resets the device instead (kernels/cuda/cuda_measurer.h).
  virtual bool device_lost() const { return false; }
};

} // namespace brickdl
