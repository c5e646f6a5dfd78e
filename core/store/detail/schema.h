#pragma once
// The schema of a tuning database on one connection: what a file holds (classify), creating
// the current schema, migrating an older one forward, and checking that the tables and columns
// of the current schema are all there. Private to the store (TuningDb's constructor uses it).
#include <sqlite3.h>

#include <string>

namespace brickdl::store::detail {

// The schema version of the database on `db`, read without writing anything; -1 for a new
// (empty) file. Throws UserError, naming `path`, for a foreign, damaged or newer database.
int classify(sqlite3* db, const std::string& path);

// Creates the current schema with its meta rows (schema.sql) in an empty database.
void create_schema(sqlite3* db);

// Migrates a database of schema version `from_version` to the current one, in place. Throws
// UserError naming `path` when the file lacks what that version has (damaged, or not brickdl's).
void migrate(sqlite3* db, int from_version, const std::string& path);

// A private in-memory copy of `db`, migrated from `from_version` to the current version: how a
// read-only connection reads an older file without writing it. The caller closes the copy.
sqlite3* migrated_copy(sqlite3* db, int from_version, const std::string& path);

// Every table and column the current schema has must be there (extra ones are tolerated).
// Throws UserError naming `path` otherwise.
void verify_schema(sqlite3* db, const std::string& path);

} // namespace brickdl::store::detail
