// Tests of the tuning database (core/store/tuning_db.h): round trips, get-or-insert, atomic
// writes, concurrent writers, migrations, and the refusals that leave a file untouched.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "core/error.h"
#include "core/store/merge.h"
#include "core/store/tuning_db.h"
#include "tests/store/store_test_util.h"

namespace brickdl {
namespace {

namespace fs = std::filesystem;
using namespace brickdl::store_test;

TEST(TuningDb, FreshDatabaseIsTheCurrentVersionInWalMode) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  {
    TuningDb db(path);
    EXPECT_EQ(db.schema_version(), kStoreSchemaVersion);
    EXPECT_EQ(db.mode(), TuningDb::Mode::kReadWrite);
  }
  RawDb raw(path);
  EXPECT_EQ(raw.scalar("SELECT value FROM meta WHERE key = 'application'"), "brickdl");
  EXPECT_EQ(raw.scalar("SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(kStoreSchemaVersion));
  EXPECT_EQ(raw.scalar("PRAGMA journal_mode"), "wal");
  // Reopening (read-write and read-only) accepts it and writes no second meta row.
  TuningDb again(path);
  TuningDb ro(path, TuningDb::Mode::kReadOnly);
  EXPECT_EQ(ro.schema_version(), kStoreSchemaVersion);
  EXPECT_EQ(raw.count("meta"), 2);
}

TEST(TuningDb, ReadOnlyOpenLeavesTheFolderAsItWas) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  { TuningDb db(path); }
  const std::string before = read_bytes(path);
  {
    TuningDb ro(path, TuningDb::Mode::kReadOnly);
    EXPECT_EQ(ro.schema_version(), kStoreSchemaVersion);
  }
  EXPECT_EQ(read_bytes(path), before);
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"t.db"}); // no -wal / -shm left behind
}

TEST(TuningDb, SchemaIsTheEmbeddedSqlFile) {
  std::ifstream in(std::string(BRICKDL_SOURCE_DIR) + "/core/store/schema.sql");
  const std::string file((std::istreambuf_iterator<char>(in)), {});
  EXPECT_FALSE(file.empty());
  EXPECT_EQ(std::string(store_schema_sql()), file);
  // The version is the one the file states in its meta statement (read by CMake).
  const std::string stated = "('schema_version', '" + std::to_string(kStoreSchemaVersion) + "')";
  EXPECT_NE(file.find(stated), std::string::npos) << stated;
}

TEST(TuningDb, GetOrInsertReturnsTheSameIds) {
  TempDir dir;
  TuningDb db(dir.file("t.db"));
  const int64_t t1 = db.target_id("cpu:a", "cpu");
  EXPECT_EQ(db.target_id("cpu:a", "cpu"), t1);
  EXPECT_NE(db.target_id("cpu:b", "cpu"), t1);

  const int64_t w1 = db.workload_id({"sig-1", 2, "conv | relu", 100});
  EXPECT_EQ(db.workload_id({"sig-1", 2, "ignored on lookup", 0}), w1);
  const int64_t w2 = db.workload_id({"sig-2", 1, "", 0});
  EXPECT_NE(w1, w2);

  const int64_t c8 = db.candidate_id(w1, memoized(8));
  EXPECT_EQ(db.candidate_id(w1, memoized(8)), c8);
  EXPECT_NE(db.candidate_id(w1, memoized(16)), c8);
  EXPECT_NE(db.candidate_id(w1, memoized(8, 128)), c8);
  EXPECT_NE(db.candidate_id(w2, memoized(8)), c8);
  Candidate padded = memoized(8);
  padded.strategy = Strategy::kPadded;
  EXPECT_NE(db.candidate_id(w1, padded), c8);

  // Layerwise ignores brick and threads: one row per workload.
  Candidate lw1, lw2;
  lw2.brick = BrickShape{1, 32, 32, 16};
  lw2.threads = 64;
  EXPECT_EQ(db.candidate_id(w1, lw1), db.candidate_id(w1, lw2));
  RawDb raw(db.path());
  EXPECT_EQ(raw.scalar("SELECT bh || ',' || bn || ',' || threads FROM candidates "
                       "WHERE strategy = 'layerwise'"),
            "0,1,0");
  EXPECT_EQ(raw.count("candidates"), 6);
  EXPECT_EQ(raw.count("targets"), 2);
  EXPECT_EQ(raw.count("workloads"), 2);
}

TEST(TuningDb, BatchBlocksAreDifferentCandidates) {
  TempDir dir;
  TuningDb db(dir.file("t.db"));
  const int64_t w = db.workload_id({"sig", 1, "", 0});
  Candidate c = memoized(8);
  const int64_t n1 = db.candidate_id(w, c);
  c.brick.nb = 4;
  const int64_t n4 = db.candidate_id(w, c);
  EXPECT_NE(n4, n1);
  EXPECT_EQ(db.candidate_id(w, c), n4);
  c.brick.nb = 2;
  EXPECT_NE(db.candidate_id(w, c), n4);
  c.brick.nb = 1;
  EXPECT_EQ(db.candidate_id(w, c), n1);
  // Layerwise has no brick: its batch block is ignored like the extents.
  Candidate lw;
  const int64_t l1 = db.candidate_id(w, lw);
  lw.brick.nb = 8;
  EXPECT_EQ(db.candidate_id(w, lw), l1);
  RawDb raw(db.path());
  EXPECT_EQ(raw.scalar("SELECT group_concat(bn, ',') FROM (SELECT bn FROM candidates "
                       "WHERE strategy = 'memoized' ORDER BY id)"),
            "1,4,2");
  EXPECT_EQ(raw.scalar("SELECT bn FROM candidates WHERE strategy = 'layerwise'"), "1");
}

// Long on purpose: one run's life through every table in order; the fixed clock numbers the
// writes, so the steps cannot be split into separate tests.
TEST(TuningDb, RunsMeasurementsAndPlansRoundTrip) {
  TempDir dir;
  TuningDb db(dir.file("t.db"));
  db.set_clock(fixed_clock());
  const int64_t run = db.begin_run(test_run());
  const int64_t target = db.target_id("cpu:test", "cpu");
  const int64_t w = db.workload_id({"sig", 3, "", 0});
  db.add_run_group(run, w, 1, 3, "a .. c", "subgraph 1");
  db.add_run_group(run, w, 1, 3, "a .. c", "subgraph 1"); // same group again: ignored
  const int64_t c = db.candidate_id(w, memoized(8));
  db.put_prediction(c, "A100-40GB", "m1", PredictionRow{.time_ms = 2.0});
  db.put_prediction(c, "A100-40GB", "m1", PredictionRow{.time_ms = 3.0}); // replaces

  EXPECT_FALSE(db.find_measurement(c, target).has_value());
  const MeasureResult r = ok_result({1.0, 4.0, 2.0, 3.0});
  const int64_t m = db.put_measurement(c, target, run, r);
  auto got = db.find_measurement(c, target);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->id, m);
  EXPECT_EQ(got->run_id, run);
  EXPECT_EQ(got->result.status, MeasureStatus::kOk);
  EXPECT_EQ(got->result.samples_ms, (std::vector<double>{1.0, 4.0, 2.0, 3.0})); // run order
  EXPECT_DOUBLE_EQ(got->result.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(got->result.min_ms, 1.0);
  EXPECT_DOUBLE_EQ(got->result.max_ms, 4.0);
  EXPECT_DOUBLE_EQ(got->result.p25_ms, 1.75); // quantile at position 0.75 of 1,2,3,4
  EXPECT_DOUBLE_EQ(got->result.max_rel_error, 1e-6);
  EXPECT_EQ(got->result.counters, r.counters);
  EXPECT_FALSE(db.find_measurement(c, db.target_id("cpu:other", "cpu")).has_value());

  // A later run's failed measurement is now the latest; it stores no times.
  const int64_t run2 = db.begin_run(test_run());
  MeasureResult failed;
  failed.status = MeasureStatus::kCompileError;
  failed.error = "nvrtc: too many registers";
  db.put_measurement(c, target, run2, failed);
  got = db.find_measurement(c, target);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->run_id, run2);
  EXPECT_EQ(got->result.status, MeasureStatus::kCompileError);
  EXPECT_EQ(got->result.error, "nvrtc: too many registers");
  EXPECT_TRUE(got->result.samples_ms.empty());

  PlanRow plan;
  plan.run_id = run;
  plan.json = "{}";
  plan.predicted_ms = 3.0;
  plan.layerwise_predicted_ms = 4.0;
  plan.groups = {{c, 1, 3}, {c, 4, 6}};
  const int64_t p = db.put_plan(plan);
  db.end_run(run, "complete");

  RawDb raw(db.path());
  EXPECT_EQ(raw.scalar("SELECT time_ms FROM predictions"), "3.0");
  EXPECT_EQ(raw.count("predictions"), 1);
  EXPECT_EQ(raw.count("run_groups"), 1);
  EXPECT_EQ(raw.count("samples"), 4);
  EXPECT_EQ(raw.count("counters"), 2);
  EXPECT_EQ(raw.scalar("SELECT median_ms IS NULL AND max_rel_error IS NULL FROM measurements "
                       "WHERE status = 'compile_error'"),
            "1");
  EXPECT_EQ(raw.scalar("SELECT group_concat(first_layer, ',') FROM plan_groups WHERE plan_id = " +
                       std::to_string(p)),
            "1,4");
  EXPECT_EQ(raw.scalar("SELECT measured_ms IS NULL FROM plans"), "1");
  // The fixed clock: begin_run 0, put_measurement 1, begin_run 2, put_measurement 3,
  // put_plan 4, end_run 5.
  EXPECT_EQ(raw.scalar("SELECT status || ' ' || started_at || ' ' || ended_at FROM runs "
                       "WHERE id = " +
                       std::to_string(run)),
            "complete 2024-01-01T00:00:00.000Z 2024-01-01T00:00:05.000Z");
  EXPECT_EQ(raw.scalar("SELECT status || ' ' || (ended_at IS NULL) FROM runs WHERE id = " +
                       std::to_string(run2)),
            "running 1");
  EXPECT_THROW(db.end_run(run2, "finished"), InternalError);
}

TEST(TuningDb, MeasurementIsAllOrNothing) {
  TempDir dir;
  TuningDb db(dir.file("t.db"));
  const int64_t run = db.begin_run(test_run());
  const int64_t target = db.target_id("cpu:test", "cpu");
  const int64_t c = db.candidate_id(db.workload_id({"sig", 1, "", 0}), memoized(8));
  // Make the last insert of put_measurement (a counter) fail after the measurement row and
  // its samples went in: nothing of it may remain. (The trigger is written through a connection
  // of its own; the store's connection sees the schema change.)
  RawDb raw(db.path());
  raw.exec("CREATE TRIGGER fail_counter BEFORE INSERT ON counters "
           "WHEN NEW.name = 'zz_boom' BEGIN SELECT RAISE(ABORT, 'injected'); END");
  MeasureResult r = ok_result({1, 2, 3});
  r.counters["zz_boom"] = 1;
  // A row refused by the file (here another program's trigger) is the user's to act on.
  EXPECT_THROW(db.put_measurement(c, target, run, r), UserError);
  EXPECT_EQ(raw.count("measurements"), 0);
  EXPECT_EQ(raw.count("samples"), 0);
  EXPECT_EQ(raw.count("counters"), 0);
  // The connection is still usable afterwards.
  r.counters.erase("zz_boom");
  db.put_measurement(c, target, run, r);
  EXPECT_EQ(raw.count("measurements"), 1);
  EXPECT_EQ(raw.count("counters"), 2);
}

TEST(TuningDb, InTransactionCommitsTogetherOrNotAtAll) {
  TempDir dir;
  TuningDb db(dir.file("t.db"));
  RawDb raw(db.path());
  EXPECT_THROW(db.in_transaction([&] {
    db.workload_id({"a", 1, "", 0});
    db.workload_id({"b", 1, "", 0});
    EXPECT_EQ(raw.count("workloads"), 0); // not visible to others before the commit
    throw UserError("stop");
  }),
               UserError);
  EXPECT_EQ(raw.count("workloads"), 0);
  db.in_transaction([&] {
    db.workload_id({"a", 1, "", 0});
    db.workload_id({"b", 1, "", 0});
  });
  EXPECT_EQ(raw.count("workloads"), 2);
}

TEST(TuningDb, ReadOnlyConnectionRefusesWrites) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  { TuningDb db(path); }
  TuningDb ro(path, TuningDb::Mode::kReadOnly);
  EXPECT_THROW(ro.begin_run(test_run()), InternalError);
  EXPECT_THROW(ro.workload_id({"new", 1, "", 0}), InternalError);
}

TEST(TuningDb, MarkRunAbortedChangesOnlyARunningRun) {
  TempDir dir;
  TuningDb db(dir.file("t.db"));
  db.set_clock(fixed_clock());
  const int64_t running = db.begin_run(test_run());
  const int64_t complete = db.begin_run(test_run());
  db.end_run(complete, "complete");
  RawDb raw(db.path());
  const std::string ended_before =
      raw.scalar("SELECT ended_at FROM runs WHERE id = " + std::to_string(complete));

  // Another connection (as the interrupt watcher uses) marks the running run.
  TuningDb other(db.path());
  EXPECT_TRUE(other.mark_run_aborted(running));
  EXPECT_EQ(raw.scalar("SELECT status FROM runs WHERE id = " + std::to_string(running)), "aborted");
  EXPECT_NE(raw.scalar("SELECT ended_at FROM runs WHERE id = " + std::to_string(running)), "");
  // Twice, an ended run and an unknown run: nothing changes.
  EXPECT_FALSE(other.mark_run_aborted(running));
  EXPECT_FALSE(other.mark_run_aborted(complete));
  EXPECT_FALSE(other.mark_run_aborted(999));
  EXPECT_EQ(raw.scalar("SELECT status FROM runs WHERE id = " + std::to_string(complete)),
            "complete");
  EXPECT_EQ(raw.scalar("SELECT ended_at FROM runs WHERE id = " + std::to_string(complete)),
            ended_before);
  TuningDb ro(db.path(), TuningDb::Mode::kReadOnly);
  EXPECT_THROW(ro.mark_run_aborted(running), InternalError);
}

TEST(TuningDb, MarkRunAbortedReportsALockedDatabase) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  int64_t run = 0;
  {
    TuningDb db(path);
    run = db.begin_run(test_run());
  }
  TuningDb db(path, TuningDb::Mode::kReadWrite, /*busy_timeout_ms=*/100);
  RawDb holder(path);
  holder.exec("BEGIN IMMEDIATE");
  EXPECT_THROW(db.mark_run_aborted(run), UserError);
  holder.exec("ROLLBACK");
  EXPECT_EQ(holder.scalar("SELECT status FROM runs"), "running");
  EXPECT_TRUE(db.mark_run_aborted(run));
}

TEST(TuningDb, FindsTheLatestMeasurementOnOtherTargets) {
  TempDir dir;
  TuningDb db(dir.file("t.db"));
  const int64_t own = db.target_id("cpu:own", "cpu");
  const int64_t a = db.target_id("cpu:a", "cpu");
  const int64_t b = db.target_id("cpu:b", "cpu");
  const int64_t run = db.begin_run(test_run("cpu:own"));
  const int64_t w = db.workload_id({"sig", 1, "", 0});
  const int64_t c = db.candidate_id(w, memoized(8));
  const int64_t unmeasured = db.candidate_id(w, memoized(4));
  EXPECT_FALSE(db.find_measurement_on_other_targets(c, own).has_value());

  db.put_measurement(c, a, run, ok_result({1.0}));
  const int64_t latest = db.put_measurement(c, b, run, ok_result({2.0, 4.0}));
  const int64_t own_id = db.put_measurement(c, own, run, ok_result({3.0}));
  // The latest of the other targets' measurements (not the own target's, though newer).
  auto found = db.find_measurement_on_other_targets(c, own);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->measurement.id, latest);
  EXPECT_EQ(found->target_fingerprint, "cpu:b");
  EXPECT_EQ(found->measurement.run_id, run);
  EXPECT_EQ(found->measurement.result.samples_ms, (std::vector<double>{2.0, 4.0}));
  EXPECT_EQ(found->measurement.result.counters.at("flops"), 1000);
  // From target b's side, the latest other one is the own target's.
  found = db.find_measurement_on_other_targets(c, b);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->measurement.id, own_id);
  EXPECT_EQ(found->target_fingerprint, "cpu:own");
  EXPECT_FALSE(db.find_measurement_on_other_targets(unmeasured, own).has_value());
}

// Two tuner processes writing the same database at once, with the same workloads and
// candidates: every row of both is there afterwards, and the shared rows exist once.
TEST(TuningDb, TwoProcessesWritingConcurrentlyLoseNothing) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  { TuningDb db(path); } // closed before forking: no connection crosses fork()
  constexpr int kPerProcess = 150;
  std::vector<pid_t> children;
  for (int p = 0; p < 2; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        TuningDb db(path);
        const int64_t run = db.begin_run(test_run());
        const int64_t target = db.target_id("cpu:test", "cpu");
        for (int i = 0; i < kPerProcess; ++i) {
          // Both processes use the same 7 workloads and 150 candidates (one per i).
          const int64_t w = db.workload_id({"sig-" + std::to_string(i % 7), 1, "", 0});
          const int64_t c = db.candidate_id(w, memoized(4 << (i % 3), 32 + i));
          db.put_measurement(c, target, run, ok_result({1.0 + i, 2.0, 3.0}));
          db.add_run_group(run, w, i, i, "layer");
        }
        db.end_run(run, "complete");
      } catch (const std::exception& e) {
        fprintf(stderr, "child %d: %s\n", p, e.what());
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  RawDb raw(path);
  EXPECT_EQ(raw.count("runs"), 2);
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM runs WHERE status = 'complete'"), "2");
  EXPECT_EQ(raw.count("measurements"), 2 * kPerProcess);
  EXPECT_EQ(raw.count("samples"), 2 * kPerProcess * 3);
  EXPECT_EQ(raw.count("counters"), 2 * kPerProcess * 2);
  EXPECT_EQ(raw.count("run_groups"), 2 * kPerProcess);
  EXPECT_EQ(raw.count("targets"), 1);
  EXPECT_EQ(raw.count("workloads"), 7);
  EXPECT_EQ(raw.count("candidates"), kPerProcess);
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM (SELECT run_id, count(*) AS n FROM measurements "
                       "GROUP BY run_id HAVING n = " +
                       std::to_string(kPerProcess) + ")"),
            "2");
}

// --- Refusals: a clear UserError, and the file exactly as it was -------------------------

// Opens `path` and expects a UserError containing `expected`, with the file's bytes and the
// folder's entries unchanged.
void expect_refused(const std::string& path, TuningDb::Mode mode, const std::string& expected,
                    int busy_timeout_ms = TuningDb::kDefaultBusyTimeoutMs) {
  const fs::path folder = fs::path(path).parent_path();
  const std::string before = read_bytes(path);
  std::set<std::string> entries_before;
  for (const auto& e : fs::directory_iterator(folder))
    entries_before.insert(e.path().string());
  try {
    TuningDb db(path, mode, busy_timeout_ms);
    ADD_FAILURE() << "opening " << path << " did not throw";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos)
        << "names the file: " << e.what();
  }
  EXPECT_EQ(read_bytes(path), before);
  std::set<std::string> entries_after;
  for (const auto& e : fs::directory_iterator(folder))
    entries_after.insert(e.path().string());
  EXPECT_EQ(entries_after, entries_before);
}

TEST(TuningDbRefuses, GarbageFile) {
  TempDir dir;
  const std::string path = dir.file("garbage.db");
  std::string garbage;
  for (int i = 0; i < 8192; ++i)
    garbage += static_cast<char>((i * 7919) % 251);
  write_bytes(path, garbage);
  expect_refused(path, TuningDb::Mode::kReadWrite, "is not an SQLite database");
  expect_refused(path, TuningDb::Mode::kReadOnly, "is not an SQLite database");
}

TEST(TuningDbRefuses, CorruptDatabase) {
  TempDir dir;
  const std::string path = dir.file("corrupt.db");
  {
    TuningDb db(path);
    db.workload_id({"sig", 1, "", 0});
  }
  // Keep the 100-byte file header (still "SQLite format 3") and overwrite the rest of the
  // first page, which holds the table of tables.
  std::string bytes = read_bytes(path);
  ASSERT_GT(bytes.size(), 4096u);
  for (size_t i = 100; i < 4096; ++i)
    bytes[i] = static_cast<char>(0xA5 ^ (i & 0xff));
  write_bytes(path, bytes);
  expect_refused(path, TuningDb::Mode::kReadWrite, "corrupt");
  expect_refused(path, TuningDb::Mode::kReadOnly, "corrupt");
}

TEST(TuningDbRefuses, ForeignDatabase) {
  TempDir dir;
  const std::string path = dir.file("foreign.db");
  {
    RawDb raw(path);
    raw.exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)");
    raw.exec("INSERT INTO users (name) VALUES ('x')");
  }
  expect_refused(path, TuningDb::Mode::kReadWrite, "another application (tables: users");
  expect_refused(path, TuningDb::Mode::kReadOnly, "another application");
  // A `meta` table of its own, without brickdl's rows, is foreign too.
  {
    RawDb raw(path);
    raw.exec("CREATE TABLE meta (key TEXT, value TEXT)");
    raw.exec("INSERT INTO meta VALUES ('application', 'other')");
  }
  expect_refused(path, TuningDb::Mode::kReadWrite, "another application");
}

TEST(TuningDbRefuses, NewerSchemaVersion) {
  TempDir dir;
  const std::string path = dir.file("newer.db");
  { TuningDb db(path); }
  {
    RawDb raw(path);
    raw.exec("UPDATE meta SET value = '" + std::to_string(kStoreSchemaVersion + 1) +
             "' WHERE key = 'schema_version'");
  }
  expect_refused(path, TuningDb::Mode::kReadWrite,
                 "newer brickdl (schema version " + std::to_string(kStoreSchemaVersion + 1));
  expect_refused(path, TuningDb::Mode::kReadOnly, "newer brickdl");
}

TEST(TuningDbRefuses, LockedPastTheBusyTimeout) {
  TempDir dir;
  const std::string path = dir.file("locked.db");
  { TuningDb db(path); }
  RawDb holder(path);
  holder.exec("BEGIN IMMEDIATE");
  holder.exec("INSERT INTO targets (fingerprint, backend) VALUES ('cpu:holder', 'cpu')");
  expect_refused(path, TuningDb::Mode::kReadWrite, "is locked", /*busy_timeout_ms=*/100);
  // A connection opened before the lock fails its write the same way, and writes nothing.
  holder.exec("ROLLBACK");
  TuningDb db(path, TuningDb::Mode::kReadWrite, 100);
  holder.exec("BEGIN IMMEDIATE");
  EXPECT_THROW(db.workload_id({"sig", 1, "", 0}), UserError);
  holder.exec("COMMIT");
  EXPECT_EQ(holder.count("workloads"), 0);
  // Once the lock is gone the same connection writes.
  db.workload_id({"sig", 1, "", 0});
  EXPECT_EQ(holder.count("workloads"), 1);
}

TEST(TuningDbRefuses, ReadOnlyMissingFileCreatesNothing) {
  TempDir dir;
  const std::string path = dir.file("missing.db");
  EXPECT_THROW(TuningDb(path, TuningDb::Mode::kReadOnly), UserError);
  EXPECT_FALSE(fs::exists(path));
  // Read-write into a folder that does not exist: an error, and no file anywhere.
  const std::string nested = dir.file("no/such/folder/t.db");
  EXPECT_THROW(TuningDb{nested}, UserError);
  EXPECT_FALSE(fs::exists(dir.file("no")));
}

TEST(TuningDbRefuses, EmptyFileReadOnly) {
  TempDir dir;
  const std::string path = dir.file("empty.db");
  write_bytes(path, "");
  expect_refused(path, TuningDb::Mode::kReadOnly, "empty SQLite file");
  // Read-write turns an empty file into a new database.
  TuningDb db(path);
  EXPECT_EQ(db.schema_version(), kStoreSchemaVersion);
}

// --- Migrations -----------------------------------------------------------------------

// A version-1 database, created from a frozen copy of version 1's schema script
// (tests/store/schema_v1.sql), with a run, four candidates whose ids have a gap (a migration
// must keep them: predictions, measurements and plans refer to them), a prediction, a
// measurement and a plan.
void make_version1(const std::string& path) {
  std::ifstream in(std::string(BRICKDL_SOURCE_DIR) + "/tests/store/schema_v1.sql");
  const std::string v1((std::istreambuf_iterator<char>(in)), {});
  ASSERT_NE(v1.find("('schema_version', '1')"), std::string::npos);
  RawDb raw(path);
  raw.exec(v1);
  raw.exec("INSERT INTO targets (fingerprint, backend) VALUES ('cpu:old', 'cpu')");
  raw.exec("INSERT INTO workloads (signature, num_layers) VALUES ('sig', 1)");
  raw.exec("INSERT INTO candidates (id, workload_id, strategy, bd, bh, bw, cb, threads) VALUES "
           "(1, 1, 'padded', 1, 8, 8, 0, 256), (2, 1, 'layerwise', 0, 0, 0, 0, 0), "
           "(5, 1, 'memoized', 1, 8, 8, 0, 256), (7, 1, 'memoized', 1, 4, 4, 16, 128)");
  raw.exec("INSERT INTO runs (experiment, model, batch, precision, gpu_spec, target_id, "
           "git_revision, started_at, status) VALUES ('e', 'm', 1, 'fp32', 'A100-40GB', 1, "
           "'r', '2023-01-01T00:00:00Z', 'complete')");
  raw.exec("INSERT INTO measurements (candidate_id, target_id, run_id, status, median_ms, "
           "created_at) VALUES (1, 1, 1, 'ok', 1.5, '2023-01-01T00:00:01Z')");
  raw.exec("INSERT INTO predictions VALUES (5, 'A100-40GB', 'analytic-1', 1, '', 0.5, 0.1, 0.1, "
           "0.2, 0, 0, 0.1, 1e6, 0, 0, 0, 4096, 2048, 0, 0)");
  raw.exec("INSERT INTO plans (run_id, kind, json, predicted_ms, layerwise_predicted_ms, "
           "created_at) VALUES (1, 'predicted', '{}', 0.5, 0.7, '2023-01-01T00:00:02Z')");
  raw.exec("INSERT INTO plan_groups VALUES (1, 0, 7, 1, 1)");
}

// A version-0 database: version 1's tables without measurements.max_rel_error, with version
// 1's rows.
void make_version0(const std::string& path) {
  make_version1(path);
  RawDb raw(path);
  raw.exec("ALTER TABLE measurements DROP COLUMN max_rel_error");
  raw.exec("UPDATE meta SET value = '0' WHERE key = 'schema_version'");
}

std::map<std::string, std::set<std::string>> columns_of(const std::string& path) {
  RawDb raw(path);
  std::map<std::string, std::set<std::string>> out;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(raw.connection(),
                     "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p "
                     "WHERE m.type = 'table'",
                     -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) {
    out[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))].insert(
        reinterpret_cast<const char*>(sqlite3_column_text(st, 1)));
  }
  sqlite3_finalize(st);
  return out;
}

TEST(TuningDbMigration, Version0IsMigratedInPlaceKeepingRows) {
  TempDir dir;
  const std::string old_path = dir.file("v0.db");
  const std::string fresh_path = dir.file("fresh.db");
  make_version0(old_path);
  { TuningDb fresh(fresh_path); }
  ASSERT_NE(columns_of(old_path), columns_of(fresh_path));
  {
    TuningDb db(old_path);
    EXPECT_EQ(db.schema_version(), kStoreSchemaVersion);
    // The old row is there, and the new column can be written.
    const int64_t target = db.target_id("cpu:old", "cpu");
    auto m = db.find_measurement(1, target);
    ASSERT_TRUE(m.has_value());
    EXPECT_DOUBLE_EQ(m->result.median_ms, 1.5);
    EXPECT_EQ(m->result.max_rel_error, 0);
    const int64_t run = db.begin_run(test_run("cpu:old"));
    MeasureResult r = ok_result({2.0});
    r.max_rel_error = 0.25;
    db.put_measurement(1, target, run, r);
    EXPECT_DOUBLE_EQ(db.find_measurement(1, target)->result.max_rel_error, 0.25);
  }
  // Same tables and columns as a database created at the current version.
  EXPECT_EQ(columns_of(old_path), columns_of(fresh_path));
  RawDb raw(old_path);
  EXPECT_EQ(raw.scalar("SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(kStoreSchemaVersion));
}

TEST(TuningDbMigration, ReadOnlyMigratesAnInMemoryCopyAndLeavesTheFile) {
  TempDir dir;
  const std::string path = dir.file("v0.db");
  make_version0(path);
  const std::string before = read_bytes(path);
  {
    TuningDb ro(path, TuningDb::Mode::kReadOnly);
    EXPECT_EQ(ro.schema_version(), kStoreSchemaVersion);
    RawDb check(path); // the file itself still says version 0
    EXPECT_EQ(check.scalar("SELECT value FROM meta WHERE key = 'schema_version'"), "0");
    auto m = ro.find_measurement(1, 1);
    ASSERT_TRUE(m.has_value());
    EXPECT_DOUBLE_EQ(m->result.median_ms, 1.5);
  }
  EXPECT_EQ(read_bytes(path), before);
}

// The candidates, in id order, as "id:strategy:bd,bh,bw:cb:bn:threads".
std::string candidate_rows(RawDb& raw) {
  return raw.scalar("SELECT group_concat(r, ' ') FROM (SELECT id || ':' || strategy || ':' || "
                    "bd || ',' || bh || ',' || bw || ':' || cb || ':' || bn || ':' || threads "
                    "AS r FROM candidates ORDER BY id)");
}

// Long on purpose: the migrated file is checked table by table, then written through the new
// key; splitting it would rebuild the fixture for each look.
TEST(TuningDbMigration, Version1GainsTheBatchBlockKeepingIdsAndRows) {
  TempDir dir;
  const std::string old_path = dir.file("v1.db");
  const std::string fresh_path = dir.file("fresh.db");
  make_version1(old_path);
  { TuningDb fresh(fresh_path); }
  ASSERT_NE(columns_of(old_path), columns_of(fresh_path));
  Candidate padded;
  padded.strategy = Strategy::kPadded;
  padded.brick = BrickShape{1, 8, 8, 0};
  {
    TuningDb db(old_path);
    EXPECT_EQ(db.schema_version(), kStoreSchemaVersion);
    // Old candidates keep their ids and read back with nb = 1 ...
    const int64_t w = db.workload_id({"sig", 1, "", 0});
    EXPECT_EQ(db.candidate_id(w, padded), 1);
    EXPECT_EQ(db.candidate_id(w, Candidate{}), 2); // layerwise
    const int64_t target = db.target_id("cpu:old", "cpu");
    ASSERT_TRUE(db.find_measurement(1, target).has_value());
    EXPECT_DOUBLE_EQ(db.find_measurement(1, target)->result.median_ms, 1.5);
    // ... and a batch block makes a new candidate, not a clash with the old key.
    padded.brick.nb = 4;
    const int64_t n4 = db.candidate_id(w, padded);
    EXPECT_EQ(n4, 8);
    EXPECT_EQ(db.candidate_id(w, padded), n4);
    padded.brick.nb = 1;
    EXPECT_EQ(db.candidate_id(w, padded), 1);
    // So does a thread block cluster (schema version 4).
    padded.brick.cl = 8;
    EXPECT_EQ(db.candidate_id(w, padded), 9);
    padded.brick.cl = 1;
    EXPECT_EQ(db.candidate_id(w, padded), 1);
  }
  EXPECT_EQ(columns_of(old_path), columns_of(fresh_path));
  RawDb raw(old_path);
  EXPECT_EQ(raw.scalar("SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(kStoreSchemaVersion));
  // Its runs keep their ids and statuses, with no owner recorded (host '').
  EXPECT_EQ(raw.scalar("SELECT id || ':' || status || ':' || host || ':' || "
                       "coalesce(heartbeat_at, '-') FROM runs"),
            "1:complete::-");
  EXPECT_EQ(candidate_rows(raw), "1:padded:1,8,8:0:1:256 2:layerwise:0,0,0:0:1:0 "
                                 "5:memoized:1,8,8:0:1:256 7:memoized:1,4,4:16:1:128 "
                                 "8:padded:1,8,8:0:4:256 9:padded:1,8,8:0:1:256");
  EXPECT_EQ(raw.scalar("SELECT group_concat(cl, ',') FROM (SELECT cl FROM candidates ORDER BY "
                       "id)"),
            "1,1,1,1,1,8");
  // Every row that refers to a candidate still finds it.
  EXPECT_EQ(raw.count("predictions"), 1);
  EXPECT_EQ(raw.count("plan_groups"), 1);
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM pragma_foreign_key_check"), "0");
  EXPECT_EQ(raw.scalar("SELECT c.bh FROM predictions p JOIN candidates c ON c.id = "
                       "p.candidate_id"),
            "8");
  EXPECT_EQ(raw.scalar("SELECT c.cb FROM plan_groups g JOIN candidates c ON c.id = "
                       "g.candidate_id"),
            "16");
  // The unique key holds bn, the index is back, and bn < 1 is refused.
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM sqlite_master WHERE name = "
                       "'candidates_by_workload'"),
            "1");
  EXPECT_EQ(raw.scalar("SELECT sql LIKE '%UNIQUE (workload_id, strategy, bd, bh, bw, cb, bn, "
                       "cl, threads)%' FROM sqlite_master WHERE name = 'candidates'"),
            "1");
  EXPECT_NE(sqlite3_exec(raw.connection(),
                         "INSERT INTO candidates (workload_id, strategy, bd, bh, bw, cb, bn, "
                         "threads) VALUES (1, 'padded', 1, 8, 8, 0, 0, 256)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
}

TEST(TuningDbMigration, ReadOnlyVersion1ReadsBatchBlockOne) {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  make_version1(path);
  const std::string before = read_bytes(path);
  {
    TuningDb ro(path, TuningDb::Mode::kReadOnly);
    EXPECT_EQ(ro.schema_version(), kStoreSchemaVersion);
    Candidate memo;
    memo.strategy = Strategy::kMemoized;
    memo.brick = BrickShape{1, 4, 4, 16};
    memo.threads = 128;
    EXPECT_EQ(ro.candidate_id(1, memo), 7); // found: nothing to write
    memo.brick.nb = 2;
    EXPECT_THROW(ro.candidate_id(1, memo), InternalError); // new: read-only refuses to add it
  }
  EXPECT_EQ(read_bytes(path), before);
}

TEST(TuningDbMigration, MergeCarriesBatchBlocksAndReadsVersion1Inputs) {
  TempDir dir;
  const std::string v1 = dir.file("v1.db"), nb4 = dir.file("nb4.db"), out = dir.file("out.db");
  make_version1(v1);
  {
    // The same workload and configuration as v1's candidate 1, but four images per unit.
    TuningDb db(nb4);
    const int64_t w = db.workload_id({"sig", 1, "", 0});
    Candidate c;
    c.strategy = Strategy::kPadded;
    c.brick = BrickShape{1, 8, 8, 0, 4};
    const int64_t run = db.begin_run(test_run("cpu:old"));
    db.put_measurement(db.candidate_id(w, c), db.target_id("cpu:old", "cpu"), run,
                       ok_result({0.5}));
  }
  const std::string v1_before = read_bytes(v1);
  TuningDb db(out);
  merge_databases(db, {v1, nb4});
  EXPECT_EQ(read_bytes(v1), v1_before); // an old input is read through a migrated copy
  RawDb raw(out);
  EXPECT_EQ(raw.scalar("SELECT group_concat(strategy || ':' || bh || ':' || bn, ' ') FROM "
                       "(SELECT * FROM candidates ORDER BY id)"),
            "padded:8:1 layerwise:0:1 memoized:8:1 memoized:4:1 padded:8:4");
  EXPECT_EQ(raw.scalar("SELECT group_concat(x, ' ') FROM (SELECT c.bn || '=' || m.median_ms AS x "
                       "FROM measurements m JOIN candidates c ON c.id = m.candidate_id "
                       "ORDER BY m.id)"),
            "1=1.5 4=0.5");
}

TEST(TuningDbMigration, DamagedBrickdlDatabaseIsRefused) {
  TempDir dir;
  const std::string path = dir.file("damaged.db");
  { TuningDb db(path); }
  {
    RawDb raw(path);
    raw.exec("DROP TABLE plan_groups");
  }
  expect_refused(path, TuningDb::Mode::kReadWrite, "table 'plan_groups' is missing");
}

} // namespace
} // namespace brickdl
