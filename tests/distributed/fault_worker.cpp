// A measuring worker program for tests only (process_pool_test.cpp): the backend's measurer,
// except on the candidates BRICKDL_TEST_FAULTS names (tests/distributed/fault_plan.h).
//   cpu   the worker process segfaults, aborts, exits, hangs, or reports a sticky device error
//         and sets its own device_lost flag, as the CUDA measurer reports a lost device in a
//         worker (Measurer::device_lost; simulated: no CUDA code runs);
//   cuda  (a GPU) the CUDA measurer, in a worker's mode (no reset in place), runs a planted
//         kernel instead of the candidate's: `trap` writes to an illegal address, `endless`
//         never returns.
// It is a program of the test tree: no brickdl tool can select it.
//
//   BRICKDL_MEASURE_WORKER=... fault_measure_worker EXPERIMENT.yaml    (started by ProcessPool)
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>

#include "core/experiment.h"
#include "distributed/process_pool.h"
#include "kernels/cpu_measurer.h"
#include "kernels/cuda/cuda_measurer.h"
#include "tests/distributed/fault_plan.h"

namespace {

using namespace brickdl;
using testing::Fault;

// The kernel a planted GPU fault runs instead of the candidate's.
std::string planted_source(Fault f) {
  const std::string head =
      "#include \"kernels.cuh\"\n"
      "extern \"C\" __global__ void brickdl_group(const brickdl::dev::KernelArgs a) {\n";
  if (f == Fault::kTrap)
    return head + "  *reinterpret_cast<volatile int*>(16) = 1;\n}\n";
  return head + "  volatile int spin = 1;\n  while (spin) {}\n}\n";
}

class FaultMeasurer final : public Measurer {
public:
  FaultMeasurer(const search::SearchSpace& space, const std::map<size_t, Fault>& faults,
                const std::string& backend, const MeasurementConfig& config)
      : plant_(std::make_shared<std::string>()) {
    if (backend == "cuda") {
      cuda::CudaMeasurerOptions o;
      o.device = config.device;
      o.recover_in_process = false;
      o.edit_plan = [plant = plant_](cuda::KernelPlan& p) {
        if (!plant->empty())
          p.source = *plant;
      };
      inner_ = cuda::make_cuda_measurer(o);
    } else {
      inner_ = std::make_unique<kernels::CpuMeasurer>(config.cpu_threads);
    }
    const std::vector<std::string> keys = testing::candidate_keys(space);
    for (const search::GroupEntry& g : space.groups()) {
      for (const Candidate& c : g.candidates) {
        const auto at = std::lower_bound(keys.begin(), keys.end(), testing::candidate_key(g, c));
        if (auto f = faults.find(static_cast<size_t>(at - keys.begin())); f != faults.end())
          faults_[&c] = f->second;
      }
    }
  }
  std::string target() const override { return inner_->target(); }
  std::string backend() const override { return inner_->backend(); }
  bool device_lost() const override { return lost_ || inner_->device_lost(); }

  MeasureResult measure(const Graph& graph, const Candidate& c,
                        const MeasureOptions& options) override {
    const auto f = faults_.find(&c);
    if (f == faults_.end())
      return inner_->measure(graph, c, options);
    switch (f->second) {
    case Fault::kSegv: std::raise(SIGSEGV); break;
    case Fault::kAbort: std::abort();
    case Fault::kExit: std::_Exit(7);
    case Fault::kHang:
      for (;;)
        pause(); // until the watchdog's SIGKILL
    case Fault::kSticky: break;
    case Fault::kTrap:
    case Fault::kEndless: {
      *plant_ = planted_source(f->second);
      MeasureResult r = inner_->measure(graph, c, options);
      plant_->clear();
      return r;
    }
    }
    MeasureResult r;
    r.status = MeasureStatus::kLaunchError;
    r.error = "an illegal memory access was encountered (planted)";
    lost_ = true;
    return r;
  }

private:
  std::shared_ptr<std::string> plant_;
  std::unique_ptr<Measurer> inner_;
  std::map<const Candidate*, Fault> faults_;
  bool lost_ = false;
};

} // namespace

int main(int argc, char** argv) {
  try {
    const std::optional<distributed::WorkerEnvironment> env = distributed::worker_environment();
    if (!env || argc != 2) {
      std::cerr << "usage: BRICKDL_MEASURE_WORKER=... fault_measure_worker EXPERIMENT.yaml "
                   "(started by the process-pool test)\n";
      return 2;
    }
    const char* faults = std::getenv("BRICKDL_TEST_FAULTS");
    return distributed::serve_measure_worker(*env, [&](const distributed::WorkerEnvironment& e) {
      distributed::WorkerSetup s;
      s.experiment = load_experiment(argv[1]);
      s.space = std::make_unique<search::SearchSpace>(search::SearchSpace::build(
          fuse_for_inference(s.experiment.graph), s.experiment.search, s.experiment.file));
      MeasurementConfig config = s.experiment.measurement;
      config.device = e.device;
      s.measurer = std::make_unique<FaultMeasurer>(
          *s.space, testing::parse_faults(faults ? faults : ""), e.backend, config);
      return s;
    });
  } catch (const std::exception& e) {
    std::cerr << "fault_measure_worker: " << e.what() << '\n';
    return 3;
  }
}
