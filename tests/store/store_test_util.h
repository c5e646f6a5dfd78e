#pragma once
// Helpers shared by the store's tests: temporary folders, raw SQLite connections for setting up
// and checking files, and small runs, candidates and results.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/store/tuning_db.h"

namespace brickdl::store_test {

namespace fs = std::filesystem;

class TempDir {
public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "brickdl-store-XXXXXX").string();
    BRICKDL_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
  fs::path path_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A raw connection of its own (the store lends none), for setting up files the store must cope
// with and for checking rows.
class RawDb {
public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
  }
  ~RawDb() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }
  // The first column of the first row, as text ("" when no row or NULL).
  std::string scalar(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    std::string out;
    if (st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
  }
  int64_t count(const std::string& table) {
    return std::stoll(scalar("SELECT count(*) FROM " + table));
  }
  sqlite3* connection() { return db_; }

private:
  sqlite3* db_ = nullptr;
};

inline RunInfo test_run(const std::string& target = "cpu:test") {
  RunInfo r;
  r.experiment = "chain";
  r.model = "custom";
  r.batch = 1;
  r.gpu_spec = "A100-40GB";
  r.target_fingerprint = target;
  r.backend = "cpu";
  r.git_revision = "abc";
  return r;
}

inline Candidate memoized(int brick, int threads = 256) {
  Candidate c;
  c.strategy = Strategy::kMemoized;
  c.brick = BrickShape{brick, brick, brick, 0};
  c.threads = threads;
  return c;
}

inline MeasureResult ok_result(std::vector<double> samples) {
  MeasureResult r;
  r.samples_ms = std::move(samples);
  r.summarize();
  r.max_rel_error = 1e-6;
  r.counters = {{"flops", 1000}, {"bytes_loaded", 64}};
  return r;
}

inline std::function<std::string()> fixed_clock() {
  auto tick = std::make_shared<int>(0);
  return [tick] { return "2024-01-01T00:00:0" + std::to_string((*tick)++ % 10) + ".000Z"; };
}

} // namespace brickdl::store_test
