// The SQLite store's schema and its migrations. The version lives in PRAGMA user_version;
// each step brings the database from version - 1 to version in one transaction, so a
// crash mid-migration leaves the previous version intact.
#pragma once

#include <span>

#include "src/store/sqlite/sqlite_db.h"
#include "trainq/status.h"

namespace trainq::sqlite {

struct Migration {
  int version;      // the version this step produces; steps are numbered 1, 2, ...
  const char* sql;  // may hold several statements
};

// trainq's schema history, oldest first. Append new steps; never edit a released one.
std::span<const Migration> SchemaMigrations();

// Applies the steps of `steps` (ordered, versions 1..N) the database does not have yet.
// kUnavailable if the database is newer than N, naming its schema and the trainq version
// that wrote it (from version 17 on, each step records it) beside this one's.
// Safe against another process migrating at the same time: each step re-reads the
// version under the write lock.
Status Migrate(Db& db, std::span<const Migration> steps);

}  // namespace trainq::sqlite
