// The tuning database target: brickdl-query's reads, merge from and into a damaged database,
// and brickdl-tune --db into it.
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>

#include <sqlite3.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.h"
#include "core/store/merge.h"
#include "core/store/print.h"
#include "core/store/queries.h"
#include "core/store/tuning_db.h"
#include "tests/fuzz/mutate.h"
#include "tests/fuzz/targets.h"

namespace brickdl::fuzz {
namespace {

namespace fs = std::filesystem;

// A tiny experiment (the seeds' runs).
constexpr const char* kExperiment = R"(name: fuzz_db
model: {zoo: conv_chain, depth: 2, channels: 2, kernel: 3, image: 8, dims: 2}
batch: 1
target: {gpu: A100-40GB}
search: {brick_sizes: [4], max_group_len: 2}
measurement: {backend: cpu, warmup: 0, repetitions: 2, top_k: 2, cpu_threads: 1}
)";

void remove_db(const std::string& path) {
  for (const char* s : {"", "-wal", "-shm", "-journal"})
    fs::remove(path + s);
}

// The clean seed database (the parent writes it before any case runs; merged into mutants).
std::string clean_seed_path() {
  return scratch_dir() + "/db-seed.db";
}

// The first column of every row `sql` returns, as text.
std::vector<std::string> column_of(sqlite3* db, const std::string& sql) {
  std::vector<std::string> out;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK)
    while (sqlite3_step(st) == SQLITE_ROW)
      if (const unsigned char* v = sqlite3_column_text(st, 0))
        out.emplace_back(reinterpret_cast<const char*>(v));
  sqlite3_finalize(st);
  return out;
}

// The SQL of one change to table `t`: a row deleted, the table dropped, or cells of a random
// column set to an extreme or wrong-typed value.
std::string damage_sql(sqlite3* db, const std::string& t, std::mt19937_64& rng) {
  const std::vector<std::string> values = {"NULL",
                                           "-1",
                                           "0",
                                           "9223372036854775807",
                                           "-9223372036854775808",
                                           "1e308",
                                           "'x'",
                                           "''",
                                           "X'00ff'",
                                           "'nan'",
                                           "2147483648",
                                           "zeroblob(100000)",
                                           "printf('%.100000c', 'x')",
                                           "'running'",
                                           "'padded'"};
  switch (rng() % 6) {
  case 0:
    return fmt::format("DELETE FROM \"{}\" WHERE rowid IN (SELECT rowid FROM \"{}\" ORDER BY "
                       "rowid LIMIT 1 OFFSET {});",
                       t, t, rng() % 4);
  case 1: return fmt::format("DROP TABLE \"{}\";", t);
  default: {
    const std::vector<std::string> cols =
        column_of(db, "SELECT name FROM pragma_table_info('" + t + "')");
    if (cols.empty())
      return "";
    return fmt::format("UPDATE \"{}\" SET \"{}\" = {} WHERE rowid IN (SELECT rowid FROM \"{}\" "
                       "ORDER BY rowid LIMIT {} OFFSET {});",
                       t, cols[rng() % cols.size()], values[rng() % values.size()], t,
                       1 + rng() % 3, rng() % 3);
  }
  }
}

// One change through SQLite itself (damage_sql), with constraints and foreign keys not
// enforced, as a foreign writer would not. Returns false when SQLite refused (the caller
// mutates bytes instead).
bool mutate_sql(const std::string& path, std::mt19937_64& rng) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    return false;
  }
  const std::vector<std::string> tables =
      column_of(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  std::string sql = "PRAGMA foreign_keys = OFF; PRAGMA ignore_check_constraints = ON; ";
  if (!tables.empty())
    sql += damage_sql(db, tables[rng() % tables.size()], rng);
  const bool ok =
      sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK &&
      sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE);", nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
}

size_t page_size(const std::string& db) {
  if (db.size() < 100)
    return 4096;
  const size_t p = (static_cast<unsigned char>(db[16]) << 8) | static_cast<unsigned char>(db[17]);
  return p == 1 ? 65536 : (p >= 512 ? p : 4096);
}

// One change of pages or bytes, the way a disk or a careless copy damages a file.
std::string mutate_pages(std::string db, std::mt19937_64& rng) {
  const size_t ps = page_size(db);
  const size_t pages = std::max<size_t>(1, db.size() / ps);
  switch (rng() % 6) {
  case 0: { // 64 random bytes in the middle third (issue 13, item 1)
    const size_t third = db.size() / 3;
    const size_t at = third + rng() % std::max<size_t>(1, third);
    for (size_t k = at; k < std::min(db.size(), at + 64); ++k)
      db[k] = static_cast<char>(rng());
    return db;
  }
  case 1: { // a page zeroed
    const size_t p = rng() % pages;
    std::fill(db.begin() + static_cast<std::ptrdiff_t>(p * ps),
              db.begin() + static_cast<std::ptrdiff_t>(std::min(db.size(), (p + 1) * ps)), 0);
    return db;
  }
  case 2: { // a page copied over another
    const size_t a = rng() % pages, b = rng() % pages;
    if ((a + 1) * ps <= db.size() && (b + 1) * ps <= db.size())
      db.replace(b * ps, ps, db.substr(a * ps, ps));
    return db;
  }
  case 3: // truncated at a page boundary (or not)
    db.resize(rng() % 2 ? (rng() % pages) * ps : rng() % db.size());
    return db;
  case 4: // the header
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k)
      db[rng() % std::min<size_t>(100, db.size())] = static_cast<char>(rng());
    return db;
  default: return mutate_bytes(db, rng);
  }
}

// Runs one step of db_body: a UserError is noted, anything else says which step threw.
template <typename F> void step(const char* name, bool& user_error, F&& f) {
  try {
    f();
  } catch (const UserError&) {
    user_error = true;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(name) + ": " + e.what());
  }
}

void read_queries(const std::string& path) {
  TuningDb db(path, TuningDb::Mode::kReadOnly);
  std::ostringstream os;
  const auto runs = query::runs(db);
  query::print_runs(runs, db.path(), os);
  const auto best = query::best(db, {});
  query::print_best(best, os);
  os << query::json_text(query::best_json(best), -1);
  for (size_t i = 0; i < runs.size() && i < 3; ++i)
    query::print_run(query::run_details(db, runs[i].id), os);
  if (runs.size() >= 2) {
    try { // a run without timings (model only, a validation) is refused: a user error
      for (bool own_only : {false, true})
        query::print_comparison(query::compare_runs(db, runs.front().id, runs.back().id, own_only),
                                os);
    } catch (const UserError&) {
    }
  }
  const auto sets = query::accuracy(db, {});
  query::print_accuracy(sets, true, os);
  os << query::json_text(query::accuracy_json(sets), -1);
  const auto table = query::export_measurements(db, std::nullopt, true);
  query::print_export(table, query::ExportFormat::kCsv, os);
  query::print_export(table, query::ExportFormat::kJson, os);
}

} // namespace

std::vector<FuzzInput> db_seeds() {
  // seeds/tuning_db/cpu_and_model_runs.sqlite (a CPU-measured and a model-only run of kExperiment,
  // schema version 2) is the clean database merged into every mutant.
  const std::string clean = read_file(std::string(BRICKDL_SOURCE_DIR) +
                                      "/tests/fuzz/seeds/tuning_db/cpu_and_model_runs.sqlite");
  std::ofstream(clean_seed_path(), std::ios::binary | std::ios::trunc) << clean;
  // A model-only run written by this build (the current schema).
  const std::string path = scratch_dir() + "/db-model-only.db";
  remove_db(path);
  tune_model_only(parse_experiment(kExperiment, "fuzz_db.yaml"), path);
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE);", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return {{read_file(path), "a database with a model-only run"}};
}

std::string mutate_db(const std::string& in, std::mt19937_64& rng) {
  if (rng() % 5 < 2) {
    const std::string path = scratch_dir() + "/db-mutating.db";
    remove_db(path);
    std::ofstream(path, std::ios::binary) << in;
    if (mutate_sql(path, rng)) {
      std::string out = read_file(path);
      remove_db(path);
      return out;
    }
    remove_db(path);
  }
  return mutate_pages(in, rng);
}

void db_body(const FuzzInput& in) {
  const std::string path = write_case_file(in.bytes, ".db");
  for (const char* s : {"-wal", "-shm", "-journal"})
    fs::remove(path + s);
  const std::string out = path + ".merged.db";
  bool user_error = false;
  step("read-only queries", user_error, [&] { read_queries(path); });
  step("merge from it", user_error, [&] {
    remove_db(out);
    TuningDb merged(out);
    merge_databases(merged, {path});
  });
  step("merge into it", user_error, [&] {
    TuningDb db(path);
    merge_databases(db, {clean_seed_path()});
  });
  step("tune into it", user_error,
       [&] { tune_model_only(parse_experiment(kExperiment, "fuzz_db.yaml"), path); });
  remove_db(out);
  remove_db(path);
  fs::remove_all(path + ".out");
  if (user_error)
    throw UserError("a step refused the database (exit 2)");
}

} // namespace brickdl::fuzz
