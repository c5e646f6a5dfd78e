// ProcessPool (distributed/process_pool.h) under planted faults: a tune of about forty
// candidates measured by two worker processes of tests/distributed/fault_worker.cpp, where
// five candidates segfault, abort, exit, hang, or answer with a launch error and report the
// device lost. That device loss is the test worker's own flag (its Measurer::device_lost): what
// is checked is the pool's reaction to a worker that reports one, not the CUDA measurer's
// device-lost path, which only the GPU test at the end runs. The tune completes; exactly those
// five are recorded, with their statuses (crashed, timeout, launch_error) and reasons; every
// other candidate is measured once, as a clean in-process tune measures it; and a rerun on the
// same database measures nothing. Also: a worker that cannot measure is refused with its own
// words, and one that dies before it is ready is said. On a GPU (skipped without one): the CUDA
// measurer in worker processes meets a trapping and an endless kernel.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/experiment.h"
#include "core/store/tuning_db.h"
#include "distributed/process_pool.h"
#include "distributed/protocol.h"
#include "kernels/cpu_measurer.h"
#include "kernels/cuda/cuda_measurer.h"
#include "search/driver.h"
#include "search/predictor.h"
#include "tests/distributed/fault_plan.h"

namespace brickdl::distributed {
namespace {

namespace fs = std::filesystem;

constexpr const char* kExperiment = R"(name: faults
model:
  name: resblock
  input: {channels: 8, size: [16, 16]}
  layers:
    - {op: conv, name: conv1, out_channels: 8, kernel: 3, padding: 1}
    - {op: relu, name: relu1}
    - {op: conv, name: conv2, out_channels: 8, kernel: 3, padding: 1}
    - {op: add, name: add, inputs: [conv2, input]}
    - {op: relu, name: relu2}
batch: 1
precision: fp32
target: {gpu: A100-40GB}
search:
  searcher: measure_all
  brick_sizes: [4, 8, 16]
  strategies: [layerwise, padded, memoized]
  threads: [256]
measurement:
  backend: cpu
  warmup: 0
  repetitions: 2
  cpu_threads: 1
  # No cache sweep between repetitions: these tests are about faults, and under ThreadSanitizer
  # each sweep of twice the last-level cache takes long enough to pass the 7 s watchdog.
  flush_l2: false
  timeout_s: 1
seed: 1
)";

// The same resblock on the cuda backend, fewer candidates (each is an NVRTC compile).
constexpr const char* kDeviceSearch = R"(search:
  searcher: measure_all
  brick_sizes: [8]
  strategies: [layerwise, padded]
  threads: [256]
measurement:
  backend: cuda
  warmup: 1
  repetitions: 3
  collect_counters: false
  timeout_s: 1
seed: 1
)";

// The worker program: beside this test's binary in a device bundle, else where it was built.
std::string fault_worker() {
  if (fs::exists(BRICKDL_FAULT_WORKER))
    return BRICKDL_FAULT_WORKER;
  return (fs::read_symlink("/proc/self/exe").parent_path() / "fault_measure_worker").string();
}

// key → "status|error" of every measurement in `db_path`.
std::map<std::string, std::string> measurements(const std::string& db_path) {
  std::map<std::string, std::string> out;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  const std::string sql = std::string("SELECT ") + testing::kCandidateKeySql +
                          ", m.status, m.error FROM measurements m JOIN candidates c ON c.id = "
                          "m.candidate_id JOIN workloads w ON w.id = c.workload_id";
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const std::string key = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    const std::string row = std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 1))) +
                            "|" + reinterpret_cast<const char*>(sqlite3_column_text(st, 2));
    EXPECT_TRUE(out.emplace(key, row).second) << "measured twice: " << key;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

class ProcessPoolFaults : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("brickdl_process_pool_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    use_experiment(kExperiment);
  }
  void use_experiment(const std::string& text) {
    yaml_ = (dir_ / "faults.yaml").string();
    std::ofstream(yaml_) << text;
    exp_ = load_experiment(yaml_);
    space_ = std::make_unique<search::SearchSpace>(
        search::SearchSpace::build(fuse_for_inference(exp_.graph), exp_.search, exp_.file));
  }
  void TearDown() override {
    unsetenv("BRICKDL_TEST_FAULTS");
    fs::remove_all(dir_);
  }

  ProcessPoolOptions options(int per_device) const {
    ProcessPoolOptions o;
    o.argv = {fault_worker(), yaml_};
    o.backend = exp_.measurement.backend;
    o.per_device = per_device;
    o.digest = experiment_digest(*space_, exp_.measurement);
    o.grace_s = 5; // a hang costs 2 x timeout_s (1 s) + 5 s
    return o;
  }

  // One tune of the experiment into `db_path`, measured by `pool` (nullptr: in process).
  search::TuneResult tune(const std::string& db_path, search::MeasurePool* pool) {
    kernels::CpuMeasurer local(1);
    const std::unique_ptr<search::Predictor> predictor = search::make_model_predictor(exp_.gpu);
    TuningDb db(db_path);
    search::TuneContext ctx;
    ctx.experiment = exp_;
    ctx.predictor = predictor.get();
    ctx.measurer = pool ? nullptr : &local;
    ctx.pool = pool;
    ctx.db = &db;
    return search::tune(ctx);
  }

  // Five of the cleanly measured candidates, spread over their sorted keys, get a fault each
  // (BRICKDL_TEST_FAULTS for the workers); key → the status each must be recorded with.
  std::map<std::string, std::string> plant_faults(const std::map<std::string, std::string>& clean) {
    const std::vector<std::string> keys = testing::candidate_keys(*space_);
    const std::vector<std::pair<std::string, std::string>> plan = {{"segv", "crashed"},
                                                                   {"abort", "crashed"},
                                                                   {"exit", "crashed"},
                                                                   {"hang", "timeout"},
                                                                   {"sticky", "launch_error"}};
    std::vector<std::string> measured_keys;
    for (const auto& [key, row] : clean)
      measured_keys.push_back(key);
    std::map<std::string, std::string> expected; // key → status
    std::string faults;
    for (size_t k = 0; k < plan.size(); ++k) {
      const std::string& key =
          measured_keys[(2 * k + 1) * measured_keys.size() / (2 * plan.size())];
      const size_t index =
          static_cast<size_t>(std::lower_bound(keys.begin(), keys.end(), key) - keys.begin());
      EXPECT_EQ(keys.at(index), key);
      faults += (faults.empty() ? "" : ",") + plan[k].first + ":" + std::to_string(index);
      expected[key] = plan[k].second;
    }
    setenv("BRICKDL_TEST_FAULTS", faults.c_str(), 1);
    return expected;
  }

  fs::path dir_;
  std::string yaml_;
  ExperimentConfig exp_;
  std::unique_ptr<search::SearchSpace> space_;
};

// The cpu backend's workers: the device loss is reported by the worker program (fault "sticky").
TEST_F(ProcessPoolFaults, CrashesHangsAndAReportedDeviceLossAreRecordedAndTheRestMeasuredOnce) {
  // What a clean run measures, in process.
  const std::string clean_db = (dir_ / "clean.db").string();
  ASSERT_FALSE(tune(clean_db, nullptr).aborted);
  const std::map<std::string, std::string> clean = measurements(clean_db);
  ASSERT_GE(clean.size(), 25u);
  for (const auto& [key, row] : clean)
    ASSERT_EQ(row.substr(0, 3), "ok|") << key;

  const std::map<std::string, std::string> expected = plant_faults(clean);

  const std::string db_path = (dir_ / "faults.db").string();
  ProcessPool pool(options(2), nullptr);
  EXPECT_EQ(pool.slots(), 2);
  const search::TuneResult result = tune(db_path, &pool);
  EXPECT_FALSE(result.aborted);
  EXPECT_EQ(result.report.failed, 5);
  // Every fault ended its worker: each was started again for its slot's next job, or its slot
  // had none left.
  EXPECT_EQ(pool.restarts() + (pool.slots() - pool.running()), 5);

  const std::map<std::string, std::string> got = measurements(db_path);
  EXPECT_EQ(got.size(), clean.size()) << "a candidate was lost or added";
  for (const auto& [key, row] : got) {
    ASSERT_TRUE(clean.count(key)) << "not measured by the clean run: " << key;
    const auto planted = expected.find(key);
    if (planted == expected.end()) {
      EXPECT_EQ(row.substr(0, 3), "ok|") << key << ": " << row;
      continue;
    }
    EXPECT_EQ(row.substr(0, row.find('|')), planted->second) << key << ": " << row;
    EXPECT_NE(row.find("a fresh worker measures the next"), std::string::npos) << row;
  }
  for (const auto& [key, status] : expected)
    EXPECT_TRUE(got.count(key)) << "the planted fault was not recorded: " << key;

  // A rerun on the same database has nothing to measure (a recorded failure is a result).
  ProcessPool again(options(1), nullptr);
  const search::TuneResult rerun = tune(db_path, &again);
  EXPECT_FALSE(rerun.aborted);
  EXPECT_EQ(rerun.report.measured, 0);
  EXPECT_EQ(rerun.report.resumed, static_cast<int>(clean.size()));
  EXPECT_EQ(measurements(db_path).size(), got.size());
  EXPECT_EQ(again.restarts(), 0);
}

TEST_F(ProcessPoolFaults, AWorkerThatCannotMeasureIsRefusedWithItsOwnWords) {
  ProcessPoolOptions o = options(1);
  o.argv[1] = (dir_ / "missing.yaml").string(); // the worker cannot load its experiment
  try {
    ProcessPool pool(o, nullptr);
    FAIL() << "a worker without its experiment was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.yaml"), std::string::npos) << e.what();
  }
}

TEST_F(ProcessPoolFaults, AnotherSearchSpaceIsRefused) {
  ProcessPoolOptions o = options(1);
  o.digest = "not-the-digest";
  EXPECT_THROW(ProcessPool(o, nullptr), InternalError);
}

TEST_F(ProcessPoolFaults, AWorkerThatDiesBeforeItIsReadyIsSaid) {
  ProcessPoolOptions o = options(1);
  o.argv = {"/bin/sh", "-c", "exit 9"};
  try {
    ProcessPool pool(o, nullptr);
    FAIL() << "a worker that exited was accepted";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("exited with status 9 before it was ready"),
              std::string::npos)
        << e.what();
  }
}

// On a GPU: a kernel that writes to an illegal address (a sticky error: launch_error) and one
// that never returns (timeout) each cost their candidate and their worker process; the CUDA
// measurer in the worker reports the device lost instead of resetting it, a fresh worker
// measures the rest, and a rerun measures nothing.
TEST_F(ProcessPoolFaults, OnTheGpuATrapAndAnEndlessKernelCostOneCandidateEach) {
  if (!cuda::cuda_device_available())
    GTEST_SKIP() << "no GPU: " << cuda::cuda_unavailable_reason();
  std::string text = kExperiment;
  use_experiment(text.substr(0, text.find("search:")) + kDeviceSearch);
  // Two padded candidates (one generated kernel each, which the fault replaces) of the tiny
  // block: feasible on any GPU.
  std::vector<std::string> padded;
  for (const std::string& key : testing::candidate_keys(*space_))
    if (key.find("|padded|") != std::string::npos)
      padded.push_back(key);
  ASSERT_GE(padded.size(), 2u);
  const std::vector<std::string> keys = testing::candidate_keys(*space_);
  const auto index = [&](const std::string& key) {
    return std::to_string(std::lower_bound(keys.begin(), keys.end(), key) - keys.begin());
  };
  setenv("BRICKDL_TEST_FAULTS",
         ("trap:" + index(padded[0]) + ",endless:" + index(padded[1])).c_str(), 1);
  ProcessPoolOptions o = options(1);
  const std::string db_path = (dir_ / "gpu.db").string();
  ProcessPool pool(o, nullptr);
  const search::TuneResult result = tune(db_path, &pool);
  EXPECT_FALSE(result.aborted);
  EXPECT_EQ(result.report.failed, 2);
  const std::map<std::string, std::string> got = measurements(db_path);
  for (const auto& [key, row] : got) {
    const std::string status = row.substr(0, row.find('|'));
    if (key == padded[0] || key == padded[1]) {
      EXPECT_EQ(status, key == padded[0] ? "launch_error" : "timeout") << row;
      EXPECT_NE(row.find("the device is lost with its worker process"), std::string::npos) << row;
    } else {
      EXPECT_EQ(status, "ok") << key << ": " << row;
    }
  }
  EXPECT_TRUE(got.count(padded[0]) && got.count(padded[1]));
  ProcessPool again(options(1), nullptr);
  EXPECT_EQ(tune(db_path, &again).report.measured, 0);
}

} // namespace
} // namespace brickdl::distributed
