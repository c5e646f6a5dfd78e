#include "core/store/detail/sqlite.h"

#include "core/error.h"

namespace brickdl::store::detail {

namespace {

std::string database_name(sqlite3* db) {
  const char* file = db ? sqlite3_db_filename(db, "main") : nullptr;
  if (!file || !*file)
    return "the tuning database";
  return std::string("database '") + file + "'";
}

} // namespace

std::string one_line(const std::string& text) {
  std::string out;
  bool blank = false;
  for (const char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      blank = true;
      continue;
    }
    if (blank && !out.empty())
      out += ' ';
    blank = false;
    out += c;
  }
  return out;
}

std::string sqlite_error_text(sqlite3* db, int rc) {
  std::string s = sqlite3_errstr(rc);
  // The connection's message is more specific (names the table, column or constraint), but
  // only when it belongs to this result code.
  if (db && (sqlite3_extended_errcode(db) & 0xff) == (rc & 0xff)) {
    const char* msg = sqlite3_errmsg(db);
    if (msg && s != msg)
      s += std::string(": ") + msg;
  }
  return one_line(s);
}

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, std::string_view what) {
  const std::string where = database_name(db);
  const std::string during = what.empty() ? "" : " while " + std::string(what);
  const std::string detail = " (" + sqlite_error_text(db, rc) + ")";
  switch (rc & 0xff) {
  case SQLITE_BUSY:
  case SQLITE_LOCKED:
    throw LockedError(where + " is locked by another connection" + during +
                      " and stayed locked past the busy timeout" + detail +
                      "; retry when the other tuner or query has finished");
  case SQLITE_NOTADB:
    throw UserError(where + " is not an SQLite database" + detail +
                    "; pass the path of a brickdl tuning database");
  case SQLITE_CORRUPT:
    throw UserError(where + " is corrupt" + during + detail +
                    "; restore it from a copy or start a new database");
  case SQLITE_READONLY:
    throw UserError(where + " is read-only" + during + detail +
                    "; check the file's permissions or write to another database");
  case SQLITE_CANTOPEN:
    throw UserError(where + " cannot be opened" + detail +
                    "; check that the folder exists and is accessible");
  case SQLITE_CONSTRAINT:
    throw ConstraintError(where + " refused a row" + during + detail +
                              ": it is damaged or was written by another program; restore it "
                              "from a copy or start a new database",
                          sqlite_error_text(db, rc));
  case SQLITE_FULL:
  case SQLITE_IOERR:
  case SQLITE_PERM:
  case SQLITE_AUTH:
  case SQLITE_NOLFS: throw UserError(where + ": I/O failed" + during + detail);
  default: throw InternalError("SQLite failed on " + where + during + detail);
  }
}

void Statement::damaged_row(const std::string& what) const {
  throw UserError(database_name(db_) + " is damaged: " + what +
                  ", which brickdl never writes; restore it from a copy, or leave the damaged "
                  "rows out of a new database (brickdl-query export)");
}

void check_sqlite(sqlite3* db, int rc, std::string_view what) {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE)
    return;
  throw_sqlite(db, rc, what);
}

void exec_sql(sqlite3* db, const std::string& sql, std::string_view what) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err); // the same text is available through sqlite3_errmsg
  check_sqlite(db, rc, what);
}

Statement::Statement(sqlite3* db, std::string_view sql, std::string_view what)
    : db_(db), what_(what.empty() ? std::string(sql.substr(0, 60)) : std::string(what)) {
  check_sqlite(db_,
               sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr),
               what_);
  BRICKDL_CHECK(stmt_ != nullptr, "empty SQL statement: " << sql);
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int index, int64_t value) {
  check_sqlite(db_, sqlite3_bind_int64(stmt_, index, value), what_);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  check_sqlite(db_, sqlite3_bind_double(stmt_, index, value), what_);
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  check_sqlite(db_,
               sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                                 SQLITE_TRANSIENT),
               what_);
  return *this;
}

Statement& Statement::bind(int index, std::nullopt_t) {
  check_sqlite(db_, sqlite3_bind_null(stmt_, index), what_);
  return *this;
}

Statement& Statement::bind_column(int index, const Statement& from, int col) {
  check_sqlite(db_, sqlite3_bind_value(stmt_, index, sqlite3_column_value(from.stmt_, col)), what_);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW)
    return true;
  if (rc == SQLITE_DONE)
    return false;
  throw_sqlite(db_, rc, what_);
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  // sqlite3_reset repeats the error of the last step, which step() has already reported.
  sqlite3_reset(stmt_);
  check_sqlite(db_, sqlite3_clear_bindings(stmt_), what_);
}

void Statement::rewind() noexcept {
  sqlite3_reset(stmt_);
}

int Statement::column_count() const {
  return sqlite3_column_count(stmt_);
}

std::string Statement::column_name(int col) const {
  const char* name = sqlite3_column_name(stmt_, col);
  return name ? name : "";
}

bool Statement::is_null(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

int Statement::column_type(int col) const {
  return sqlite3_column_type(stmt_, col);
}

int64_t Statement::int64(int col) const {
  return sqlite3_column_int64(stmt_, col);
}

double Statement::real(int col) const {
  return sqlite3_column_double(stmt_, col);
}

std::string Statement::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  if (!p)
    return "";
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

std::optional<double> Statement::optional_real(int col) const {
  if (is_null(col))
    return std::nullopt;
  return real(col);
}

std::optional<int64_t> Statement::optional_int64(int col) const {
  if (is_null(col))
    return std::nullopt;
  return int64(col);
}

Transaction::Transaction(sqlite3* db, int* depth, std::string_view what)
    : db_(db), depth_(depth), what_(what) {
  outermost_ = *depth_ == 0;
  if (outermost_)
    exec_sql(db_, "BEGIN IMMEDIATE", what_);
  ++*depth_;
}

Transaction::~Transaction() {
  --*depth_;
  if (outermost_ && !done_) {
    // Best effort: a rollback after a failed statement cannot be reported from a destructor,
    // and SQLite has already rolled back when the failure was an I/O or full-disk error.
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void Transaction::commit() {
  BRICKDL_CHECK(!done_, "transaction committed twice");
  if (outermost_)
    exec_sql(db_, "COMMIT", what_);
  done_ = true;
}

} // namespace brickdl::store::detail
