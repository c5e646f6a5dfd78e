// `mpirun --oversubscribe -np 3 brickdl-tune` on the CPU backend (rank 0 tunes, two workers
// measure): the database holds what a one-process run of the same experiment holds; a worker
// killed mid-run loses at most its candidate in flight and a rerun completes with nothing
// measured twice; Ctrl-C (SIGINT to mpirun) ends the run as aborted with no rank left; a worker
// of another target is refused, or tunes its own target with --each-target. Skipped, with the
// reason, when brickdl was built without MPI.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/spawn.h"

namespace {

namespace fs = std::filesystem;

// What the database holds, as text rows of `sql` (columns joined by '|').
std::vector<std::string> rows(const std::string& db_path, const std::string& sql) {
  std::vector<std::string> out;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return out;
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const unsigned char* v = sqlite3_column_text(st, i);
        row += std::string(i ? "|" : "") + (v ? reinterpret_cast<const char*>(v) : "NULL");
      }
      out.push_back(row);
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

int64_t scalar(const std::string& db_path, const std::string& sql) {
  const auto r = rows(db_path, sql);
  return r.empty() ? -1 : std::stoll(r[0]);
}

// Candidates as "workload signature|strategy|brick|cb|bn|threads": comparable across databases.
const char* kCandidateKey =
    "w.signature || '|' || c.strategy || '|' || c.bd || 'x' || c.bh || 'x' || c.bw || '|' || "
    "c.cb || '|' || c.bn || '|' || c.threads";

class TuneMpi : public ::testing::Test {
protected:
  void SetUp() override {
    if (std::string(BRICKDL_MPIEXEC).empty())
      GTEST_SKIP() << BRICKDL_NO_MPI_REASON;
    if (geteuid() == 0) { // Open MPI refuses root unless told
      setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    dir_ = fs::temp_directory_path() /
           ("brickdl_tune_mpi_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A 3-D conv chain on the CPU backend, one thread per measurement.
  std::string experiment(const std::string& name, const std::string& searcher, int image,
                         int repetitions, int top_k = 3) {
    const fs::path path = dir_ / (name + ".yaml");
    std::ofstream(path) << "name: " << name << "\n"
                        << "model: {zoo: conv_chain, depth: 4, channels: 4, kernel: 3, image: "
                        << image << ", dims: 3}\n"
                        << "batch: 1\n"
                           "target: {gpu: A100-40GB}\n"
                           "search:\n"
                           "  brick_sizes: [4, 8]\n"
                           "  max_group_len: 3\n"
                           "  searcher: "
                        << searcher << "\n"
                        << "measurement:\n"
                           "  backend: cpu\n"
                           "  top_k: "
                        << top_k
                        << "\n"
                           "  warmup: 1\n"
                           "  repetitions: "
                        << repetitions << "\n"
                        << "  cpu_threads: 1\n";
    return path.string();
  }

  // mpirun --oversubscribe -np N brickdl-tune ARGS; np = 0: mpirun ARGS (MPMD); np = 1:
  // brickdl-tune ARGS in one process, no mpirun.
  pid_t spawn(std::vector<std::string> args, const std::string& log, int np = 3) {
    if (np != 0)
      args.insert(args.begin(), BRICKDL_TUNE_BIN);
    if (np > 1)
      args.insert(args.begin(), {"--oversubscribe", "-np", std::to_string(np)});
    if (np != 1)
      args.insert(args.begin(), BRICKDL_MPIEXEC);
    const pid_t pid = brickdl::testing::spawn_logged(args, (dir_ / (log + ".out")).string(),
                                                     (dir_ / (log + ".err")).string());
    EXPECT_GT(pid, 0) << args[0];
    return pid;
  }

  int wait_status(pid_t pid) {
    const int status = brickdl::testing::wait_for(pid);
    EXPECT_NE(status, -1) << "no child " << pid;
    return status;
  }

  int run_to_end(const std::vector<std::string>& args, const std::string& log, int np = 3) {
    const int status = wait_status(spawn(args, log, np));
    EXPECT_TRUE(WIFEXITED(status)) << read(log + ".err");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  int run_plain(std::vector<std::string> args, const std::string& log) {
    args.push_back("--quiet");
    return run_to_end(args, log, 1);
  }

  std::string read(const std::string& name) {
    std::ifstream f(dir_ / name);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }

  // Waits until run `run_id` has at least `n` measurements (false: the job ended first).
  bool wait_for_measurements(pid_t pid, const std::string& db, int64_t run_id, int64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      if (scalar(db,
                 "SELECT COUNT(*) FROM measurements WHERE run_id = " + std::to_string(run_id)) >= n)
        return true;
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid)
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  // "pid (rank r)" of each.
  static std::string describe(const std::vector<std::pair<pid_t, int>>& ranks) {
    std::string out;
    for (const auto& [pid, rank] : ranks)
      out += std::to_string(pid) + " (rank " + std::to_string(rank) + ") ";
    return out;
  }

  // True when no rank of `needle`'s job is alive within 10 s of mpirun's exit (a rank that is
  // still exiting when mpirun returns is not one left running).
  bool all_ranks_gone(const std::string& needle) {
    for (int i = 0; i < 200 && !live_ranks(needle).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return live_ranks(needle).empty();
  }

  // Live (not zombie) processes whose command line mentions `needle`, with their MPI rank.
  std::vector<std::pair<pid_t, int>> live_ranks(const std::string& needle) {
    std::vector<std::pair<pid_t, int>> out;
    for (const auto& entry : fs::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos)
        continue;
      std::ifstream stat(entry.path() / "stat");
      std::string pid_s, comm, state;
      stat >> pid_s >> comm >> state;
      if (state == "Z" || state.empty())
        continue;
      std::ifstream cmd(entry.path() / "cmdline");
      const std::string cmdline((std::istreambuf_iterator<char>(cmd)),
                                std::istreambuf_iterator<char>());
      if (cmdline.find(needle) == std::string::npos ||
          cmdline.find(BRICKDL_TUNE_BIN) != 0) // brickdl-tune itself, not mpirun
        continue;
      std::ifstream env(entry.path() / "environ");
      std::string var;
      int rank = -1;
      while (std::getline(env, var, '\0'))
        if (var.rfind("OMPI_COMM_WORLD_RANK=", 0) == 0)
          rank = std::atoi(var.c_str() + 21);
      out.emplace_back(static_cast<pid_t>(std::stol(name)), rank);
    }
    return out;
  }

  fs::path dir_;
};

TEST_F(TuneMpi, HoldsWhatOneProcessRunHolds) {
  const std::string yaml = experiment("same", "dp", 16, 3, 8);
  const std::string one = (dir_ / "one.db").string(), mpi = (dir_ / "mpi.db").string();
  // One process (plain, no mpirun), then three ranks.
  ASSERT_EQ(run_plain({yaml, "--db", one, "--out", (dir_ / "out1").string()}, "one"), 0)
      << read("one.err");
  ASSERT_EQ(run_to_end({yaml, "--db", mpi, "--out", (dir_ / "out3").string()}, "mpi"), 0)
      << read("mpi.err");

  const std::string candidates = std::string("SELECT ") + kCandidateKey +
                                 " FROM candidates c JOIN workloads w ON w.id = c.workload_id "
                                 "ORDER BY 1";
  const std::string measured = std::string("SELECT ") + kCandidateKey + " || '|' || m.status " +
                               "FROM measurements m JOIN candidates c ON c.id = m.candidate_id " +
                               "JOIN workloads w ON w.id = c.workload_id ORDER BY 1";
  const std::string predicted_plan = "SELECT json FROM plans WHERE kind = 'predicted'";
  ASSERT_GE(rows(one, measured).size(), 8u);
  EXPECT_EQ(rows(mpi, candidates), rows(one, candidates));
  EXPECT_EQ(rows(mpi, measured), rows(one, measured)); // the same candidates, each once
  EXPECT_EQ(rows(mpi, predicted_plan), rows(one, predicted_plan));
  EXPECT_EQ(rows(mpi, "SELECT status FROM runs"), std::vector<std::string>{"complete"});

  // The re-planned result follows from the measurements as in one process: a plain run on a
  // copy of the MPI database resumes every measurement and plans the same groups.
  const std::string copy = (dir_ / "copy.db").string();
  fs::copy_file(mpi, copy);
  for (const char* suffix : {"-wal", "-shm"})
    if (fs::exists(mpi + suffix))
      fs::copy_file(mpi + suffix, copy + suffix);
  ASSERT_EQ(run_plain({yaml, "--db", copy, "--out", (dir_ / "outc").string()}, "copy"), 0)
      << read("copy.err");
  EXPECT_EQ(scalar(copy, "SELECT COUNT(*) FROM measurements WHERE run_id = 2"), 0);
  EXPECT_EQ(rows(copy, "SELECT json FROM plans WHERE kind = 'measured' AND run_id = 2"),
            rows(mpi, "SELECT json FROM plans WHERE kind = 'measured'"));

  // Both workers took part; the report says how many each measured.
  const std::string report = read("mpi.out");
  EXPECT_NE(report.find("rank 1 ("), std::string::npos) << report;
  EXPECT_NE(report.find("rank 2 ("), std::string::npos) << report;
  const std::string plan_json = [&] {
    std::ifstream f(dir_ / "out3" / "plan.json");
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }();
  EXPECT_NE(plan_json.find("\"workers\""), std::string::npos);
  EXPECT_NE(read("mpi.err").find("with 2 worker rank(s): 1, 2"), std::string::npos)
      << read("mpi.err");
}

TEST_F(TuneMpi, KilledWorkerLosesOnlyItsCandidateAndRerunCompletes) {
  // measure_all over larger tensors: every feasible candidate, each taking long enough that
  // the kill lands mid-run.
  const std::string yaml = experiment("kill", "measure_all", 32, 15);
  const std::string db = (dir_ / "kill.db").string();
  const std::vector<std::string> args{yaml,     "--db", db, "--out", (dir_ / "out").string(),
                                      "--quiet"};
  const pid_t job = spawn(args, "run1");
  ASSERT_TRUE(wait_for_measurements(job, db, 1, 2)) << read("run1.err");
  pid_t victim = -1;
  for (const auto& [pid, rank] : live_ranks(yaml))
    if (rank == 2)
      victim = pid;
  ASSERT_GT(victim, 0) << "worker rank 2 not found";
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  const int st = wait_status(job);
  EXPECT_FALSE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "mpirun must report the dead rank";
  EXPECT_TRUE(all_ranks_gone(yaml)) << "ranks outlived the job: " << describe(live_ranks(yaml));
  const int64_t after_kill = scalar(db, "SELECT COUNT(*) FROM measurements");

  ASSERT_EQ(run_to_end(args, "run2"), 0) << read("run2.err");
  EXPECT_EQ(scalar(db, "SELECT status = 'complete' FROM runs WHERE id = 2"), 1);
  const std::vector<std::string> expected =
      rows(db, "SELECT DISTINCT c.id FROM candidates c JOIN run_groups g ON g.workload_id = "
               "c.workload_id JOIN predictions p ON p.candidate_id = c.id WHERE g.run_id = 2 AND "
               "p.feasible = 1 ORDER BY c.id");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(rows(db, "SELECT candidate_id FROM measurements ORDER BY candidate_id"), expected);
  EXPECT_LT(after_kill, static_cast<int64_t>(expected.size())) << "the kill was not mid-run";
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM measurements WHERE run_id = 2"),
            static_cast<int64_t>(expected.size()) - after_kill);
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM measurements m WHERE m.status = 'ok' AND "
                       "(SELECT COUNT(*) FROM samples s WHERE s.measurement_id = m.id) != 15"),
            0);
}

TEST_F(TuneMpi, InterruptAbortsTheRunAndEndsEveryRank) {
  const std::string yaml = experiment("int", "measure_all", 32, 15);
  const std::string db = (dir_ / "int.db").string();
  const pid_t job = spawn({yaml, "--db", db, "--out", (dir_ / "out").string(), "--quiet"}, "int");
  ASSERT_TRUE(wait_for_measurements(job, db, 1, 1)) << read("int.err");
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(job, SIGINT), 0);
  wait_status(job);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_TRUE(all_ranks_gone(yaml)) << "ranks outlived the job: " << describe(live_ranks(yaml));
  EXPECT_EQ(rows(db, "SELECT status, ended_at IS NOT NULL FROM runs"),
            std::vector<std::string>{"aborted|1"})
      << read("int.err");
  EXPECT_NE(read("int.err").find("run 1 aborted"), std::string::npos) << read("int.err");
}

TEST_F(TuneMpi, WorkerOfAnotherTargetIsRefusedOrTunesItsOwn) {
  const std::string yaml = experiment("tag", "dp", 16, 3);
  const std::string db = (dir_ / "tag.db").string();
  // MPMD: ranks 0-2 untagged, rank 3 tagged as another machine.
  const auto job = [&](bool each) {
    std::vector<std::string> one{BRICKDL_TUNE_BIN,        yaml,     "--db", db, "--out",
                                 (dir_ / "out").string(), "--quiet"};
    if (each)
      one.push_back("--each-target");
    std::vector<std::string> argv{"--oversubscribe", "-np", "3"};
    argv.insert(argv.end(), one.begin(), one.end());
    argv.insert(argv.end(), {":", "-np", "1", "-x", "BRICKDL_TARGET_TAG=other"});
    argv.insert(argv.end(), one.begin(), one.end());
    return argv;
  };
  ASSERT_EQ(run_to_end(job(false), "refuse", 0), 0) << read("refuse.err");
  EXPECT_NE(read("refuse.err").find("rank 3 ("), std::string::npos) << read("refuse.err");
  EXPECT_NE(read("refuse.out").find("refused: measures target cpu:"), std::string::npos)
      << read("refuse.out");
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM targets WHERE fingerprint LIKE '%#other'"), 0);

  ASSERT_EQ(run_to_end(job(true), "each", 0), 0) << read("each.err");
  // The tagged target got a run of its own, measured by rank 3 alone; the first is resumed.
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM runs r JOIN targets t ON t.id = r.target_id WHERE "
                       "t.fingerprint LIKE '%#other' AND r.status = 'complete'"),
            1);
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM measurements m JOIN targets t ON t.id = m.target_id "
                       "WHERE t.fingerprint LIKE '%#other'"),
            scalar(db, "SELECT COUNT(*) FROM measurements m JOIN targets t ON t.id = m.target_id "
                       "WHERE t.fingerprint NOT LIKE '%#other'"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "plan.json"));
  bool subfolder = false;
  for (const auto& e : fs::directory_iterator(dir_ / "out"))
    subfolder = subfolder || (e.is_directory() && fs::exists(e.path() / "plan.json"));
  EXPECT_TRUE(subfolder) << "the second target's outputs go to a subfolder";
}

TEST_F(TuneMpi, AutoWithoutAGpuOnTheWorkersIsRefusedWithWhatWouldWork) {
  // A plain run validates such an experiment instead of timing it (CPU times never re-plan a
  // GPU target); worker ranks cannot, so the job stops with exit 2 and says what would work.
  const std::string cpu_yaml = experiment("auto", "dp", 8, 1);
  std::ifstream in(cpu_yaml);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("backend: cpu");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 12, "backend: auto");
  const std::string yaml = (dir_ / "auto_backend.yaml").string();
  std::ofstream(yaml) << text;
  const std::string db = (dir_ / "auto.db").string();
  const std::vector<std::string> argv{
      "--oversubscribe", "-np", "3",    "-x", "CUDA_VISIBLE_DEVICES=-1",
      BRICKDL_TUNE_BIN,  yaml,  "--db", db,   "--quiet"};
  EXPECT_EQ(run_to_end(argv, "auto", 0), 2) << read("auto.err");
  EXPECT_NE(read("auto.err").find("backend 'auto' found no GPU"), std::string::npos)
      << read("auto.err");
  EXPECT_NE(read("auto.err").find("set measurement.backend to 'cpu'"), std::string::npos)
      << read("auto.err");
  if (fs::exists(db)) // refused before or after the database was opened: nothing measured
    EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM measurements"), 0);
}

} // namespace
