// Tests of a tuning database shared and mistreated: damaged files are never written into,
// read-only files are read, runs whose process is gone read `killed`, tuners claim candidates,
// and many processes may create one new file at once.
#include <grp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/store/heartbeat.h"
#include "core/store/merge.h"
#include "core/store/queries.h"
#include "core/store/tuning_db.h"
#include "tests/store/store_test_util.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;
using namespace brickdl::store_test;

// A database with one complete run, a workload, 40 candidates and their measurements (enough
// rows for several pages per table), closed (no -wal left).
void make_tuned(const std::string& path) {
  TuningDb db(path);
  const int64_t run = db.begin_run(test_run());
  const int64_t target = db.target_id("cpu:test", "cpu");
  const int64_t w = db.workload_id({"sig", 1, "conv", 10});
  for (int i = 0; i < 40; ++i) {
    const int64_t c = db.candidate_id(w, memoized(4, 32 + i));
    db.put_measurement(c, target, run, ok_result({1.0 + i, 2.0, 3.0}));
  }
  db.end_run(run, "complete");
}

// Overwrites the last 64 bytes of the page `page` (1-based) of a closed database.
void damage_page(const std::string& path, int64_t page) {
  std::string bytes = read_bytes(path);
  const size_t end = static_cast<size_t>(page) * 4096;
  ASSERT_LE(end, bytes.size());
  for (size_t i = end - 64; i < end; ++i)
    bytes[i] = static_cast<char>(0xFF);
  write_bytes(path, bytes);
}

int64_t root_page(const std::string& path, const std::string& table) {
  RawDb raw(path);
  return std::stoll(raw.scalar("SELECT rootpage FROM sqlite_master WHERE name = '" + table + "'"));
}

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

// --- 1. Damaged databases are never written into ----------------------------------------

TEST(DamagedDatabase, IsRefusedForWritingAndLeftAsItWas) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  make_tuned(path);
  damage_page(path, root_page(path, "samples"));
  const std::string before = read_bytes(path);
  const std::string msg = what_of([&] { TuningDb db(path); });
  EXPECT_NE(msg.find("'" + path + "' is damaged: SQLite's integrity_check reports: "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("restore it from a copy"), std::string::npos) << msg;
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_FALSE(fs::exists(path + "-wal"));
  // Read-only opens still read what is intact.
  TuningDb ro(path, TuningDb::Mode::kReadOnly);
  EXPECT_EQ(query::runs(ro).size(), 1u);
}

// The tuner's get-or-insert: the row it just inserted is gone when it looks it up (here a
// trigger of another program deletes it; an index that no longer matches its table does the
// same). That was an internal error ("check 'id.has_value()' failed").
TEST(DamagedDatabase, ARowMissingAfterItsInsertIsAUserError) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  TuningDb db(path);
  RawDb raw(path);
  raw.exec("CREATE TRIGGER vanish AFTER INSERT ON workloads BEGIN "
           "DELETE FROM workloads WHERE id = new.id; END");
  const std::string msg = what_of([&] { db.workload_id({"sig", 1, "", 0}); });
  EXPECT_NE(msg.find("'" + path + "' is damaged: the workload just recorded is not found"),
            std::string::npos)
      << msg;
}

TEST(DamagedDatabase, AConstraintFailureMidRunIsAUserErrorNamingTheFile) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  TuningDb db(path);
  RawDb raw(path);
  raw.exec("CREATE TRIGGER refuse BEFORE INSERT ON workloads BEGIN "
           "SELECT RAISE(ABORT, 'refused by another program'); END");
  const std::string msg = what_of([&] { db.workload_id({"sig", 1, "", 0}); });
  EXPECT_NE(msg.find("database '" + path + "' refused a row"), std::string::npos) << msg;
  EXPECT_NE(msg.find("refused by another program"), std::string::npos) << msg;
}

TEST(DamagedDatabase, MergeNamesTheInputRowThatBreaksACheckConstraint) {
  TempDir dir;
  const std::string in = dir.file("in.db"), out_path = dir.file("out.db");
  make_tuned(in);
  {
    RawDb raw(in);
    raw.exec("PRAGMA ignore_check_constraints = 1");
    raw.exec("UPDATE measurements SET status = 'bogus' WHERE id = 3");
  }
  TuningDb out(out_path);
  const std::string msg = what_of([&] { merge_databases(out, {in}); });
  EXPECT_NE(msg.find("'" + in + "': measurements id 3 breaks the schema's constraints"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("CHECK constraint failed"), std::string::npos) << msg;
  RawDb check(out_path);
  EXPECT_EQ(check.count("runs"), 0); // nothing merged
}

TEST(DamagedDatabase, MergeRefusesADamagedInputOrOutput) {
  TempDir dir;
  const std::string in = dir.file("in.db"), good = dir.file("good.db");
  make_tuned(in);
  make_tuned(good);
  damage_page(in, root_page(in, "samples"));
  {
    TuningDb out(dir.file("out.db"));
    const std::string msg = what_of([&] { merge_databases(out, {good, in}); });
    EXPECT_NE(msg.find("'" + in + "' is damaged"), std::string::npos) << msg;
    RawDb check(out.path());
    EXPECT_EQ(check.count("runs"), 0);
  }
  const std::string msg = what_of([&] { TuningDb out(in); });
  EXPECT_NE(msg.find("'" + in + "' is damaged"), std::string::npos) << msg;
}

// --- 2. Read-only databases are read -----------------------------------------------------

// Runs `body` in a child process that cannot write where permission bits forbid it: as root
// (who ignores them) the child drops to the `nobody` user first. Returns the child's exit
// status; skips the test when privileges cannot be dropped.
int run_unprivileged(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 &&
        (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0 || geteuid() == 0))
      _exit(77);
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      fprintf(stderr, "child: %s\n", e.what());
    }
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A folder of read-only files, itself read-only (and readable by everyone).
void make_read_only(const std::string& folder) {
  for (const auto& e : fs::directory_iterator(folder))
    chmod(e.path().c_str(), 0444);
  chmod(folder.c_str(), 0555);
}

TEST(ReadOnlyDatabase, IsReadAndMergedFromAReadOnlyFolder) {
  TempDir dir, outdir;
  chmod(fs::path(dir.file("")).parent_path().c_str(), 0755);
  chmod(fs::path(outdir.file("")).parent_path().c_str(), 0777);
  const std::string path = dir.file("t.db"), out = outdir.file("out.db");
  make_tuned(path);
  make_read_only(fs::path(path).parent_path());
  const int code = run_unprivileged([&] {
    TuningDb db(path, TuningDb::Mode::kReadOnly);
    if (query::runs(db).size() != 1 || query::export_measurements(db, {}, false).rows.size() != 40)
      return 3;
    TuningDb merged(out);
    const auto stats = merge_databases(merged, {path});
    return stats.at(0).measurements_added == 40 ? 0 : 4;
  });
  chmod(fs::path(path).parent_path().c_str(), 0755);
  if (code == 77)
    GTEST_SKIP() << "cannot drop root privileges to test permission bits";
  EXPECT_EQ(code, 0);
  EXPECT_EQ(read_bytes(path).substr(0, 16), std::string("SQLite format 3") + '\0');
}

// Committed transactions still in the write-ahead log cannot be read without creating the
// -shm file: refused with a message saying so, never read as if they did not exist.
TEST(ReadOnlyDatabase, RefusesAWriteAheadLogItCannotRead) {
  TempDir dir, src;
  chmod(fs::path(dir.file("")).parent_path().c_str(), 0755);
  const std::string path = dir.file("t.db");
  make_tuned(src.file("t.db"));
  {
    // Copy the database while a writer keeps its last transaction in the log.
    RawDb writer(src.file("t.db"));
    writer.exec("PRAGMA wal_autocheckpoint = 0");
    writer.exec("INSERT INTO targets (fingerprint, backend) VALUES ('cpu:late', 'cpu')");
    fs::copy_file(src.file("t.db"), path);
    fs::copy_file(src.file("t.db-wal"), path + "-wal");
  }
  make_read_only(fs::path(path).parent_path());
  std::string msg;
  const int code = run_unprivileged([&] {
    const std::string m = what_of([&] { TuningDb db(path, TuningDb::Mode::kReadOnly); });
    return m.find("write-ahead log '" + path + "-wal' holds") != std::string::npos ? 0 : 5;
  });
  chmod(fs::path(path).parent_path().c_str(), 0755);
  if (code == 77)
    GTEST_SKIP() << "cannot drop root privileges to test permission bits";
  EXPECT_EQ(code, 0);
}

// --- 3. Runs whose process is gone read `killed` -----------------------------------------

// A run begun by a child process that exits without ending it; returns its id.
int64_t run_of_a_dead_process(const std::string& path) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int64_t run = 0;
    try {
      TuningDb db(path);
      run = db.begin_run(test_run());
    } catch (const std::exception&) {
    }
    (void)!write(fds[1], &run, sizeof(run));
    _exit(0); // no end_run: as if killed
  }
  close(fds[1]);
  int64_t run = 0;
  EXPECT_EQ(read(fds[0], &run, sizeof(run)), static_cast<ssize_t>(sizeof(run)));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return run;
}

std::string shown_status_of(const std::string& path, int64_t run) {
  TuningDb ro(path, TuningDb::Mode::kReadOnly);
  for (const query::RunRow& r : query::runs(ro))
    if (r.id == run)
      return r.status;
  return "(no run)";
}

TEST(RunLiveness, ARunWhoseProcessIsGoneIsKilledAndMarkedSoByTheNextTuner) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  const int64_t dead = run_of_a_dead_process(path);
  ASSERT_GT(dead, 0);
  EXPECT_EQ(shown_status_of(path, dead), "killed");
  {
    TuningDb ro(path, TuningDb::Mode::kReadOnly);
    EXPECT_EQ(query::run_details(ro, dead).run.status, "killed");
  }
  TuningDb db(path);
  const int64_t live = db.begin_run(test_run());
  EXPECT_EQ(shown_status_of(path, live), "running");
  RawDb raw(path);
  EXPECT_EQ(raw.scalar("SELECT status FROM runs WHERE id = " + std::to_string(dead)), "killed");
  EXPECT_EQ(
      raw.scalar("SELECT ended_at = heartbeat_at FROM runs WHERE id = " + std::to_string(dead)),
      "1");
  EXPECT_EQ(raw.scalar("SELECT status FROM runs WHERE id = " + std::to_string(live)), "running");
}

TEST(RunLiveness, AReusedPidIsAnotherProcess) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  TuningDb db(path);
  const int64_t run = db.begin_run(test_run());
  EXPECT_EQ(shown_status_of(path, run), "running");
  RawDb raw(path);
  raw.exec("UPDATE runs SET process_start = process_start || '0'"); // started at another time
  EXPECT_EQ(shown_status_of(path, run), "killed");
}

TEST(RunLiveness, ARunOnAnotherHostIsStaleWithoutARecentHeartbeat) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  TuningDb db(path);
  const int64_t run = db.begin_run(test_run());
  RawDb raw(path);
  raw.exec("UPDATE runs SET host = 'elsewhere', pid = 1");
  EXPECT_EQ(shown_status_of(path, run), "running"); // heartbeat: now
  raw.exec("UPDATE runs SET heartbeat_at = '2020-01-01T00:00:00.000Z'");
  EXPECT_EQ(shown_status_of(path, run), "stale?");
  // A new tuner on this host cannot know: the run stays `running` in the table.
  db.begin_run(test_run());
  EXPECT_EQ(raw.scalar("SELECT status FROM runs WHERE id = " + std::to_string(run)), "running");
}

TEST(RunLiveness, TheHeartbeatRefreshesARunningRun) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  TuningDb db(path);
  db.set_clock([] { return std::string("2020-01-01T00:00:00.000Z"); });
  const int64_t run = db.begin_run(test_run());
  RawDb raw(path);
  EXPECT_EQ(raw.scalar("SELECT heartbeat_at FROM runs"), "2020-01-01T00:00:00.000Z");
  {
    RunHeartbeat beat(db, run, /*period_ms=*/10);
    for (int i = 0; i < 500 && beat.beats() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_GT(beat.beats(), 0);
  }
  EXPECT_GT(raw.scalar("SELECT heartbeat_at FROM runs"), "2021");
  db.end_run(run, "complete");
  db.heartbeat(run); // an ended run keeps its heartbeat
  EXPECT_EQ(raw.scalar("SELECT status FROM runs"), "complete");
}

// --- 4. Claims, and many openers of one new file -----------------------------------------

TEST(Claims, ALiveRunHoldsItsClaimUntilItRecordsTheMeasurement) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  TuningDb a(path), b(path);
  const int64_t run_a = a.begin_run(test_run()), run_b = b.begin_run(test_run());
  const int64_t target = a.target_id("cpu:test", "cpu");
  const int64_t c = a.candidate_id(a.workload_id({"sig", 1, "", 0}), memoized(8));
  EXPECT_EQ(a.claim(c, target, run_a, 0).outcome, ClaimResult::kClaimed);
  EXPECT_EQ(a.claim(c, target, run_a, 0).outcome, ClaimResult::kClaimed); // its own
  const ClaimResult held = b.claim(c, target, run_b, 0);
  EXPECT_EQ(held.outcome, ClaimResult::kHeld);
  EXPECT_EQ(held.holder_run_id, run_a);
  const int64_t m = a.put_measurement(c, target, run_a, ok_result({1.0}));
  EXPECT_EQ(b.claim(c, target, run_b, 0).outcome, ClaimResult::kMeasured);
  // A fresh run wants measurements newer than its start: this one is not.
  EXPECT_EQ(b.claim(c, target, run_b, m).outcome, ClaimResult::kClaimed);
  EXPECT_EQ(a.claim(c, target, run_a, m).outcome, ClaimResult::kHeld);
  b.end_run(run_b, "complete"); // ending a run releases its claims
  EXPECT_EQ(a.claim(c, target, run_a, m).outcome, ClaimResult::kClaimed);
  RawDb raw(path);
  EXPECT_EQ(raw.count("claims"), 1);
}

TEST(Claims, AClaimOfADeadProcessIsTakenOverAndItsRunMarkedKilled) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  const int64_t dead = run_of_a_dead_process(path);
  TuningDb db(path);
  const int64_t target = db.target_id("cpu:test", "cpu");
  const int64_t c = db.candidate_id(db.workload_id({"sig", 1, "", 0}), memoized(8));
  RawDb raw(path);
  raw.exec("INSERT INTO claims VALUES (" + std::to_string(c) + ", " + std::to_string(target) +
           ", " + std::to_string(dead) + ", 'x')");
  // A run of this process (begun before the dead one would be marked by begin_run).
  raw.exec("INSERT INTO runs (experiment, model, batch, precision, gpu_spec, target_id, "
           "git_revision, started_at, status) SELECT experiment, model, batch, precision, "
           "gpu_spec, target_id, git_revision, started_at, 'running' FROM runs");
  const int64_t mine = std::stoll(raw.scalar("SELECT max(id) FROM runs"));
  const ClaimResult r = db.claim(c, target, mine, 0);
  EXPECT_EQ(r.outcome, ClaimResult::kClaimed);
  EXPECT_EQ(r.holder_run_id, dead);
  EXPECT_EQ(raw.scalar("SELECT status FROM runs WHERE id = " + std::to_string(dead)), "killed");
  EXPECT_EQ(raw.scalar("SELECT run_id FROM claims"), std::to_string(mine));
}

// Many processes opening one new database file at the same moment all succeed. (Before: the
// WAL switch of all but one failed at once with "database is locked", and the failed opener
// removed the file the others were using: "disk I/O error".)
TEST(Concurrency, ManyProcessesCreatingOneNewDatabaseAllSucceed) {
  TempDir dir;
  constexpr int kProcesses = 8, kRounds = 25;
  int failures = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = dir.file("new" + std::to_string(round) + ".db");
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    std::vector<pid_t> children;
    for (int p = 0; p < kProcesses; ++p) {
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        close(go[1]);
        char c;
        (void)!read(go[0], &c, 1); // everyone starts when the pipe closes
        int code = 0;
        try {
          TuningDb db(path);
          db.workload_id({"sig", 1, "", 0});
        } catch (const std::exception& e) {
          fprintf(stderr, "opener: %s\n", e.what());
          code = 1;
        }
        _exit(code);
      }
      children.push_back(pid);
    }
    close(go[0]);
    close(go[1]);
    for (pid_t pid : children) {
      int status = 0;
      waitpid(pid, &status, 0);
      failures += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    }
    RawDb raw(path);
    EXPECT_EQ(raw.count("workloads"), 1);
  }
  EXPECT_EQ(failures, 0) << "of " << kProcesses * kRounds << " openers";
}

} // namespace
} // namespace brickdl
