// End to end: brickdl-tune on a small 3-D chain with the CPU backend, killed with SIGKILL
// mid-run and re-run: no result is lost and none is duplicated. Then Ctrl-C (SIGINT) ends a
// run as 'aborted' with exit status 130, and bad input exits with 2. A test that failed keeps its
// folder (its path printed), with the programs' output and the database.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/measure_fifo.h"
#include "tests/cli/spawn.h"

namespace {

namespace fs = std::filesystem;

// How long a test waits for what a tuner does in well under a second on an idle machine.
constexpr std::chrono::seconds kPatience{120};

class TuneE2E : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("brickdl_tune_e2e_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "tune.db").string();
    // Three 3x3x3 convs (+relu) on 20^3 with 4 channels; measure_all measures every feasible
    // candidate of every group, so the expected set is known from the predictions table.
    std::ofstream(dir_ / "chain.yaml") << "name: chain\n"
                                          "model: {zoo: conv_chain, depth: 3, channels: 4, "
                                          "kernel: 3, image: 20, dims: 3}\n"
                                          "batch: 1\n"
                                          "target: {gpu: A100-40GB}\n"
                                          "search:\n"
                                          "  brick_sizes: [4, 8]\n"
                                          "  max_group_len: 3\n"
                                          "  searcher: measure_all\n"
                                          "measurement:\n"
                                          "  backend: cpu\n"
                                          "  warmup: 1\n"
                                          "  repetitions: 3\n"
                                          "  cpu_threads: 1\n"
                                          "database: "
                                       << db_
                                       << "\n"
                                          "output: "
                                       << (dir_ / "out").string() << "\n";
  }
  // A tuner still running (a test that failed before it ended, one held by the measurement
  // hook) is killed; its workers die with it. The folder of a failed test stays.
  void TearDown() override {
    for (const pid_t pid : spawned_)
      if (waitpid(pid, nullptr, WNOHANG) == 0 && kill(pid, SIGKILL) == 0)
        waitpid(pid, nullptr, 0);
    ::unsetenv(kMeasureFifoVar);
    if (HasFailure())
      std::cout << "kept the failed test's folder " << dir_.string() << '\n';
    else
      fs::remove_all(dir_);
  }

  pid_t spawn(std::vector<std::string> args, const std::string& log) {
    args.insert(args.begin(), BRICKDL_TUNE_BIN);
    const pid_t pid = brickdl::testing::spawn_logged(args, (dir_ / (log + ".out")).string(),
                                                     (dir_ / (log + ".err")).string());
    EXPECT_GT(pid, 0) << args[0];
    if (pid > 0)
      spawned_.push_back(pid);
    return pid;
  }

  int wait_status(pid_t pid) {
    const int status = brickdl::testing::wait_for(pid);
    EXPECT_NE(status, -1) << "no child " << pid;
    return status;
  }

  // Tuners started from now on hold each measurement on the returned FIFO (the test hook of
  // search/measurers.h, through their environment; TearDown clears it).
  std::unique_ptr<brickdl::testing::MeasureFifo> hold_measurements() {
    auto fifo = std::make_unique<brickdl::testing::MeasureFifo>((dir_ / "measure.fifo").string());
    EXPECT_TRUE(fifo->ok()) << fifo->path();
    ::setenv(kMeasureFifoVar, fifo->path().c_str(), 1);
    return fifo;
  }

  // Whether `log` says `text` within kPatience.
  bool wait_for_text(const std::string& log, const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (read(log).find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= deadline)
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  int run_to_end(const std::vector<std::string>& args, const std::string& log) {
    const int status = wait_status(spawn(args, log));
    EXPECT_TRUE(WIFEXITED(status)) << read(log + ".err");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string read(const std::string& name) {
    std::ifstream f(dir_ / name);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }

  // First column of every row of `sql` (read-only; -1 rows when the database is not there).
  std::vector<int64_t> column(const std::string& sql) {
    std::vector<int64_t> out;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(db_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      return out;
    }
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK)
      while (sqlite3_step(st) == SQLITE_ROW)
        out.push_back(sqlite3_column_int64(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }
  int64_t scalar(const std::string& sql) {
    const auto v = column(sql);
    return v.empty() ? -1 : v[0];
  }

  // Waits until the running tuner has committed at least `n` measurements in run `run_id`.
  bool wait_for_measurements(pid_t pid, int64_t run_id, int64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (scalar("SELECT COUNT(*) FROM measurements WHERE run_id = " + std::to_string(run_id)) >= n)
        return true;
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid)
        return false; // ended before we got there
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  static constexpr const char* kMeasureFifoVar = "BRICKDL_TEST_MEASURE_FIFO";
  fs::path dir_;
  std::string db_;
  std::vector<pid_t> spawned_; // every tuner started, reaped or not
};

TEST_F(TuneE2E, KilledMidRunLosesAndDuplicatesNothing) {
  const std::string yaml = (dir_ / "chain.yaml").string();
  const pid_t first = spawn({yaml, "--quiet"}, "run1");
  ASSERT_TRUE(wait_for_measurements(first, 1, 1)) << read("run1.err");
  ASSERT_EQ(kill(first, SIGKILL), 0);
  const int st = wait_status(first);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

  const int64_t after_kill = scalar("SELECT COUNT(*) FROM measurements");
  EXPECT_GE(after_kill, 1);
  EXPECT_EQ(scalar("SELECT status = 'running' FROM runs WHERE id = 1"), 1); // never ended

  ASSERT_EQ(run_to_end({yaml, "--quiet"}, "run2"), 0) << read("run2.err");
  EXPECT_EQ(scalar("SELECT status = 'complete' FROM runs WHERE id = 2"), 1);
  // The second tuner saw the first one's process gone and marked its run killed.
  EXPECT_EQ(scalar("SELECT status = 'killed' FROM runs WHERE id = 1"), 1);

  // Every feasible candidate of the groups of run 2 (measure_all), measured exactly once on
  // the CPU target, the killed run's results included.
  const std::vector<int64_t> expected = column(
      "SELECT DISTINCT c.id FROM candidates c JOIN run_groups g ON g.workload_id = c.workload_id "
      "JOIN predictions p ON p.candidate_id = c.id WHERE g.run_id = 2 AND p.feasible = 1 "
      "ORDER BY c.id");
  const std::vector<int64_t> measured =
      column("SELECT candidate_id FROM measurements m JOIN targets t ON t.id = m.target_id "
             "WHERE t.backend = 'cpu' ORDER BY candidate_id");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(measured, expected); // equal lists: nothing missing, nothing twice
  EXPECT_LT(after_kill, static_cast<int64_t>(expected.size())) << "the kill was not mid-run";
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM measurements WHERE run_id = 2"),
            static_cast<int64_t>(expected.size()) - after_kill);
  EXPECT_NE(read("run2.out").find(std::to_string(after_kill) + " from the database"),
            std::string::npos)
      << read("run2.out");
  EXPECT_TRUE(fs::exists(dir_ / "out" / "plan.json"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "report.txt"));
  // Every measured result has its samples.
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM measurements m WHERE m.status = 'ok' AND "
                   "(SELECT COUNT(*) FROM samples s WHERE s.measurement_id = m.id) != 3"),
            0);

  // A third run has nothing left to measure.
  ASSERT_EQ(run_to_end({yaml, "--quiet"}, "run3"), 0) << read("run3.err");
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM measurements WHERE run_id = 3"), 0);
}

// Processes whose environment says they are measuring workers of tuner `parent`.
std::vector<std::string> workers_of(pid_t parent) {
  const std::string mark = ",3," + std::to_string(parent);
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::ifstream f(e.path() / "environ");
    std::string var;
    while (std::getline(f, var, '\0'))
      if (var.rfind("BRICKDL_MEASURE_WORKER=", 0) == 0 && var.ends_with(mark))
        out.push_back(e.path().filename().string());
  }
  return out;
}

// brickdl-tune measuring in a worker process (--worker-process here; the default on the cuda
// backend, distributed/process_pool.h): every feasible candidate measured once, as in process,
// the worker in the report, and a rerun measures nothing.
TEST_F(TuneE2E, AWorkerProcessMeasuresEveryCandidateOnce) {
  const std::string yaml = (dir_ / "chain.yaml").string();
  ASSERT_EQ(run_to_end({yaml, "--worker-process"}, "w1"), 0) << read("w1.err");
  EXPECT_NE(read("w1.err").find("(cpu backend) in a worker process"), std::string::npos)
      << read("w1.err");
  EXPECT_NE(read("w1.out").find("  worker 1 (pid "), std::string::npos) << read("w1.out");
  const std::vector<int64_t> expected = column(
      "SELECT DISTINCT c.id FROM candidates c JOIN run_groups g ON g.workload_id = c.workload_id "
      "JOIN predictions p ON p.candidate_id = c.id WHERE g.run_id = 1 AND p.feasible = 1 "
      "ORDER BY c.id");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(column("SELECT candidate_id FROM measurements WHERE status = 'ok' ORDER BY "
                   "candidate_id"),
            expected);
  ASSERT_EQ(run_to_end({yaml, "--worker-process", "--quiet"}, "w2"), 0) << read("w2.err");
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM measurements WHERE run_id = 2"), 0);
  EXPECT_EQ(run_to_end({yaml, "--worker-process", "--in-process"}, "w3"), 2);
  EXPECT_NE(read("w3.err").find("excludes"), std::string::npos) << read("w3.err");
}

// Whether process `pid` is gone (or a zombie, which runs nothing) within kPatience.
bool ends(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  for (;;) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line) || line.substr(line.rfind(')') + 1).rfind(" Z", 0) == 0)
      return true;
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Whether `pid`, a child of this process, is still running.
bool running(pid_t pid) {
  return waitpid(pid, nullptr, WNOHANG) == 0;
}

// Ctrl-C on a tuner measuring in a worker process ends the run as aborted (130) and leaves no
// worker behind; so does a SIGKILL of the tuner (the worker dies with its parent). The worker
// is held mid-measurement by the test hook when the signal comes.
TEST_F(TuneE2E, NoWorkerProcessOutlivesItsTuner) {
  const std::string yaml = (dir_ / "chain.yaml").string();
  const auto fifo = hold_measurements();
  for (const int sig : {SIGINT, SIGKILL}) {
    SCOPED_TRACE(sig);
    const std::string log = sig == SIGINT ? "k_int" : "k_kill";
    const pid_t pid = spawn({yaml, "--worker-process", "--quiet"}, log);
    const pid_t worker = fifo->wait_measuring(kPatience);
    ASSERT_GT(worker, 0) << "no measurement began\n" << read(log + ".err");
    ASSERT_TRUE(running(pid)) << read(log + ".err");
    ASSERT_EQ(workers_of(pid), std::vector<std::string>{std::to_string(worker)})
        << "the measuring process is not the tuner's one worker";
    ASSERT_EQ(kill(pid, sig), 0);
    const int st = wait_status(pid);
    if (sig == SIGINT) {
      ASSERT_TRUE(WIFEXITED(st)) << read(log + ".err");
      EXPECT_EQ(WEXITSTATUS(st), 130) << read(log + ".err");
      EXPECT_EQ(scalar("SELECT status = 'aborted' FROM runs WHERE id = 1"), 1);
    } else {
      EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << st;
    }
    if (!ends(worker)) {
      ADD_FAILURE() << "worker " << worker << " of " << pid << " is still there";
      kill(worker, SIGKILL); // held by the hook, it would wait forever
    }
    EXPECT_TRUE(workers_of(pid).empty()) << "a worker of " << pid << " is still there";
  }
}

// Ctrl-C while the tuner measures in process, one result committed and the next held by the
// test hook: the run stops after the held measurement (no forced exit), as aborted with 130,
// and keeps what it measured, the held one included.
TEST_F(TuneE2E, InterruptMarksTheRunAbortedAndExits130) {
  const std::string yaml = (dir_ / "chain.yaml").string();
  const auto fifo = hold_measurements();
  const pid_t pid = spawn({yaml, "--quiet"}, "int");
  ASSERT_EQ(fifo->wait_measuring(kPatience), pid) << read("int.err");
  ASSERT_TRUE(fifo->release(kPatience)) << read("int.err");
  ASSERT_EQ(fifo->wait_measuring(kPatience), pid) << read("int.err");
  ASSERT_TRUE(running(pid)) << read("int.err");
  const int64_t committed = scalar("SELECT COUNT(*) FROM measurements WHERE run_id = 1");
  ASSERT_GE(committed, 1);
  ASSERT_EQ(kill(pid, SIGINT), 0);
  // Let the measurement go once the tuner has taken the stop request, so that it stops after
  // it rather than measuring the next.
  ASSERT_TRUE(wait_for_text("int.err", "interrupted: stopping")) << read("int.err");
  ASSERT_TRUE(fifo->release(kPatience)) << read("int.err");
  const int st = wait_status(pid);
  ASSERT_TRUE(WIFEXITED(st)) << read("int.err");
  EXPECT_EQ(WEXITSTATUS(st), 130) << read("int.err");
  EXPECT_EQ(scalar("SELECT status = 'aborted' FROM runs WHERE id = 1"), 1);
  EXPECT_EQ(scalar("SELECT ended_at IS NOT NULL FROM runs WHERE id = 1"), 1);
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM measurements WHERE run_id = 1"), committed + 1);
  EXPECT_EQ(read("int.err").find("exiting now"), std::string::npos) << read("int.err");
}

TEST_F(TuneE2E, SecondInterruptExitsAtOnceAndMarksTheRunAborted) {
  // Larger tensors and more repetitions: each candidate takes long enough that the second
  // Ctrl-C lands while one is in flight, so the process cannot end at a candidate boundary.
  std::string yaml = read("chain.yaml");
  yaml.replace(yaml.find("image: 20"), 9, "image: 40");
  yaml.replace(yaml.find("repetitions: 3"), 14, "repetitions: 20");
  std::ofstream(dir_ / "slow.yaml") << yaml;
  const pid_t pid = spawn({(dir_ / "slow.yaml").string(), "--quiet"}, "int2");
  ASSERT_TRUE(wait_for_measurements(pid, 1, 1)) << read("int2.err");
  ASSERT_EQ(kill(pid, SIGINT), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(kill(pid, SIGINT), 0);
  const int st = wait_status(pid);
  ASSERT_TRUE(WIFEXITED(st)) << read("int2.err");
  EXPECT_EQ(WEXITSTATUS(st), 130) << read("int2.err");
  EXPECT_NE(read("int2.err").find("exiting now"), std::string::npos) << read("int2.err");
  EXPECT_EQ(scalar("SELECT status = 'aborted' FROM runs WHERE id = 1"), 1);
  EXPECT_GE(scalar("SELECT COUNT(*) FROM measurements WHERE run_id = 1"), 1);
}

TEST_F(TuneE2E, BadInputExitsWith2) {
  EXPECT_EQ(run_to_end({(dir_ / "missing.yaml").string()}, "bad1"), 2);
  EXPECT_NE(read("bad1.err").find("missing.yaml"), std::string::npos) << read("bad1.err");
  EXPECT_EQ(run_to_end({(dir_ / "chain.yaml").string(), "--searcher", "dpp"}, "bad2"), 2);
  EXPECT_NE(read("bad2.err").find("did you mean 'dp'"), std::string::npos) << read("bad2.err");
  EXPECT_EQ(run_to_end({(dir_ / "chain.yaml").string(), "--backend", "gpu"}, "bad3"), 2);
  EXPECT_FALSE(fs::exists(db_)) << "bad input must not create the database";
}

// A precision the backend cannot compute is bad input, refused where the backend is chosen;
// the model alone predicts every precision.
TEST_F(TuneE2E, PrecisionTheBackendCannotComputeExitsWith2) {
  std::ofstream(dir_ / "tf32.yaml") << "precision: tf32\n"
                                    << read("chain.yaml"); // backend: cpu on line 11
  EXPECT_EQ(run_to_end({(dir_ / "tf32.yaml").string()}, "tf32"), 2);
  EXPECT_NE(read("tf32.err").find("tf32.yaml:11:"), std::string::npos) << read("tf32.err");
  EXPECT_NE(read("tf32.err")
                .find("backend 'cpu' computes fp32 only; precision 'tf32' runs with "
                      "backend 'cuda' or model-only"),
            std::string::npos)
      << read("tf32.err");
  EXPECT_EQ(run_to_end({(dir_ / "tf32.yaml").string(), "--backend", "cpu"}, "tf32cli"), 2);
  EXPECT_NE(read("tf32cli.err").find("--backend"), std::string::npos) << read("tf32cli.err");
  EXPECT_FALSE(fs::exists(db_)) << "bad input must not create the database";
  EXPECT_EQ(run_to_end({(dir_ / "tf32.yaml").string(), "--describe"}, "tf32describe"), 0)
      << read("tf32describe.err"); // model only
  EXPECT_EQ(run_to_end({(dir_ / "tf32.yaml").string(), "--backend", "none"}, "tf32none"), 0)
      << read("tf32none.err");
}

// Several experiments in one command run one after another, each with its own run and
// outputs (--out DIR: one folder per experiment inside it); two that would write the same
// folder are refused before anything runs.
TEST_F(TuneE2E, SeveralExperimentsRunInTurn) {
  std::string second = read("chain.yaml");
  second.replace(second.find("name: chain"), 11, "name: chain2");
  second.replace(second.find("depth: 3"), 8, "depth: 2");
  std::ofstream(dir_ / "chain2.yaml") << second;
  const std::string a = (dir_ / "chain.yaml").string(), b = (dir_ / "chain2.yaml").string();
  ASSERT_EQ(run_to_end({a, b, "--quiet", "--out", (dir_ / "both").string()}, "two"), 0)
      << read("two.err");
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM runs WHERE status = 'complete'"), 2);
  EXPECT_EQ(scalar("SELECT COUNT(DISTINCT experiment) FROM runs"), 2);
  EXPECT_TRUE(fs::exists(dir_ / "both" / "chain" / "plan.json"));
  EXPECT_TRUE(fs::exists(dir_ / "both" / "chain2" / "report.txt"));
  EXPECT_NE(read("two.out").find("experiment chain2:"), std::string::npos) << read("two.out");

  std::ofstream(dir_ / "same_out.yaml") << read("chain.yaml"); // same `output:` as chain.yaml
  EXPECT_EQ(run_to_end({a, (dir_ / "same_out.yaml").string(), "--quiet"}, "dup"), 2);
  EXPECT_NE(read("dup.err").find("would both write"), std::string::npos) << read("dup.err");
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM runs"), 2) << "nothing may run after a refusal";
  // A bad second experiment is found before the first one runs.
  EXPECT_EQ(run_to_end({a, (dir_ / "missing.yaml").string(), "--quiet"}, "bad"), 2);
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM runs"), 2);
}

TEST_F(TuneE2E, ModelOnlyPrintsThePlanTable) {
  ASSERT_EQ(run_to_end({(dir_ / "chain.yaml").string(), "--backend", "none"}, "none"), 0)
      << read("none.err");
  const std::string out = read("none.out");
  EXPECT_NE(out.find("plan dp (model)"), std::string::npos) << out;
  EXPECT_NE(out.find("end to end (model)"), std::string::npos) << out;
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM measurements"), 0);
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM plans"), 1);
}

// Issue 13, item 8: without a GPU, `backend: auto` fell back to the CPU, measured CPU times and
// re-planned the A100 target with them (CPU milliseconds beside A100 predictions). Now it plans
// from the model for the A100, validates the plan's merged groups on the CPU, says so, and keeps
// CPU times out of the plan and away from the measurements a CPU run would resume.
TEST_F(TuneE2E, AutoWithoutAGpuValidatesTheModelsPlanInsteadOfReplanning) {
  ::setenv("CUDA_VISIBLE_DEVICES", "-1", 1); // no GPU, even on a machine with one
  std::string yaml = read("chain.yaml");
  yaml.replace(yaml.find("searcher: measure_all"), 21, "searcher: dp");
  yaml.replace(yaml.find("backend: cpu"), 12, "backend: auto\n  budget_s: 60\n  top_k: 1");
  std::ofstream(dir_ / "auto.yaml") << yaml;
  ASSERT_EQ(run_to_end({(dir_ / "auto.yaml").string()}, "auto"), 0) << read("auto.err");
  const std::string err = read("auto.err"), out = read("auto.out");
  EXPECT_NE(err.find("planning for A100-40GB from the model; the CPU validates the plan's merged "
                     "groups"),
            std::string::npos)
      << err;
  EXPECT_NE(out.find("validated, not measured: no GPU for A100-40GB"), std::string::npos) << out;
  EXPECT_NE(out.find("plan dp (model)"), std::string::npos) << out;
  EXPECT_EQ(out.find("re-planned"), std::string::npos) << out;
  EXPECT_EQ(out.find("end to end (measured"), std::string::npos) << out;
  // plan.json: the model's plan, for the A100, with its validation and no measured times.
  const std::string plan = read("out/plan.json");
  EXPECT_NE(plan.find("\"plan_for\": \"A100-40GB\""), std::string::npos) << plan;
  EXPECT_NE(plan.find("\"validation\": {"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("\"measured_ms\": 0"), std::string::npos);
  EXPECT_NE(plan.find("\"measured_ms\": null"), std::string::npos) << plan;
  // One plan row (the model's), no "measured" one; every measurement is a single cold run of a
  // merged group stored under the validation target, and none failed validation.
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM plans"), 1);
  const int64_t validated = scalar("SELECT COUNT(*) FROM measurements");
  EXPECT_GT(validated, 0);
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM measurements m JOIN targets t ON t.id = m.target_id "
                   "WHERE t.fingerprint LIKE 'cpu:%#validation'"),
            validated);
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM samples"), validated);
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM measurements WHERE status != 'ok'"), 0);
  // Again: the validations come from the database.
  ASSERT_EQ(run_to_end({(dir_ / "auto.yaml").string()}, "again"), 0) << read("again.err");
  EXPECT_NE(read("again.out").find("(from the database)"), std::string::npos) << read("again.out");
  EXPECT_EQ(scalar("SELECT COUNT(*) FROM measurements"), validated);
  // An explicit CPU backend plans for this CPU, and the report says whose times are whose.
  ASSERT_EQ(run_to_end({(dir_ / "auto.yaml").string(), "--backend", "cpu", "--out",
                        (dir_ / "cpu").string()},
                       "cpu"),
            0)
      << read("cpu.err");
  EXPECT_NE(read("cpu.out").find("re-planned for cpu:"), std::string::npos) << read("cpu.out");
  EXPECT_NE(read("cpu/plan.json").find("\"plan_for\": \"cpu:"), std::string::npos);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
}

} // namespace
