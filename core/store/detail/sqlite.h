#pragma once
// Thin checked wrappers over the SQLite C API, private to the store (core/store/): only its
// .cpp files include this header. Every sqlite3_* call goes through `check_sqlite`, which turns
// a failure into an exception:
//   - UserError for what the user can act on: the file is locked, not a database, corrupt,
//     read-only, unopenable, the disk is full, a row breaks a constraint (ConstraintError:
//     a database that passed its checks and still refuses a row is damaged or was written by
//     another program);
//   - InternalError for what is a bug of brickdl: bad SQL, misuse.
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/error.h"

namespace brickdl::store::detail {

// SQLITE_BUSY / SQLITE_LOCKED past the busy timeout: another connection holds the lock.
class LockedError : public UserError {
public:
  using UserError::UserError;
};

// SQLITE_CONSTRAINT: a row broke a NOT NULL, CHECK, UNIQUE or foreign-key constraint. Merge
// catches it to name the input row.
class ConstraintError : public UserError {
public:
  ConstraintError(const std::string& message, std::string detail)
      : UserError(message), detail_(std::move(detail)) {}
  // SQLite's own words: "SQLITE_CONSTRAINT: CHECK constraint failed: ...".
  const std::string& detail() const { return detail_; }

private:
  std::string detail_;
};

// Throws for `rc` unless it is SQLITE_OK, SQLITE_ROW or SQLITE_DONE. `what` names the
// operation ("inserting a measurement"); the message names the database file.
void check_sqlite(sqlite3* db, int rc, std::string_view what);
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, std::string_view what);

// Runs one or more statements without results (sqlite3_exec), checked.
void exec_sql(sqlite3* db, const std::string& sql, std::string_view what);

// A prepared statement; finalized on destruction. Parameters are 1-based, columns 0-based.
//
//   Statement st(db, "SELECT id FROM targets WHERE fingerprint = ?1", "looking up a target");
//   st.bind_all(fingerprint);
//   if (st.step()) id = st.int64(0);
class Statement {
public:
  Statement(sqlite3* db, std::string_view sql, std::string_view what = "");
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, const std::string& value) {
    return bind(index, std::string_view(value));
  }
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, std::nullopt_t);
  // Binds column `col` of `from`'s current row as it is (type and value), for copying rows.
  Statement& bind_column(int index, const Statement& from, int col);
  template <typename T> Statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind(index, std::nullopt);
  }
  // Binds the arguments to parameters 1..n.
  template <typename... Args> Statement& bind_all(const Args&... args) {
    int index = 0;
    (bind(++index, args), ...);
    return *this;
  }

  // Advances: true when a row is available, false when the statement is done.
  bool step();
  // Runs a statement that returns no rows (or ignores them) to completion.
  void run();
  // Ready to run again with new bindings.
  void reset();
  // Ends the current execution (and the read snapshot it holds) but keeps the bindings; an
  // error of the last step was already reported by step().
  void rewind() noexcept;

  int column_count() const;
  std::string column_name(int col) const;
  bool is_null(int col) const;
  int column_type(
      int col) const; // SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB, SQLITE_NULL
  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const; // "" for NULL
  std::optional<double> optional_real(int col) const;
  std::optional<int64_t> optional_int64(int col) const;
  // Throws UserError naming the database: the current row holds `what`, a value brickdl never
  // writes (a damaged file, or one another program wrote), e.g. "candidate 7 has strategy '1'".
  [[noreturn]] void damaged_row(const std::string& what) const;

private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string what_;
};

// A write transaction (BEGIN IMMEDIATE: takes the write lock up front, waiting for the busy
// timeout, so it never fails half-way on a lock upgrade). Rolled back unless committed.
// Nested use is flat: when `depth` > 0 on entry the outer transaction owns the commit.
class Transaction {
public:
  Transaction(sqlite3* db, int* depth, std::string_view what);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

private:
  sqlite3* db_;
  int* depth_;
  bool outermost_ = false;
  bool done_ = false;
  std::string what_;
};

// The SQLite result code's name and message, for error texts: "SQLITE_BUSY: database is
// locked". On one line (see one_line).
std::string sqlite_error_text(sqlite3* db, int rc);

// `text` on one line: line breaks and the runs of blanks around them become one space (SQLite's
// messages quote multi-line SQL and reports).
std::string one_line(const std::string& text);

} // namespace brickdl::store::detail
