#include "src/store/sqlite/sqlite_db.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "src/os/permissions.h"
#include "src/os/run_dir.h"

namespace trainq::sqlite {

// What to do about a damaged database, said wherever SQLite finds the damage.
constexpr std::string_view kDamagedAdvice =
    "; stop trainqd and restore a backup made with 'trainq daemon backup PATH' (copy it over "
    "this file and remove the -wal and -shm files beside it), or move the file away to start "
    "an empty queue (docs/operations.md)";

namespace {

// SQLite reports ENOSPC as SQLITE_FULL but EDQUOT (and ENOSPC from some calls) as an
// IOERR; the errno of its last failed system call tells them apart.
bool DiskFull(sqlite3* db, int rc) {
  if ((rc & 0xff) == SQLITE_FULL) return true;
  if ((rc & 0xff) != SQLITE_IOERR || db == nullptr) return false;
  int err = sqlite3_system_errno(db);
  return err == ENOSPC || err == EDQUOT;
}

// "disk full in DIR": the directory a user must free space in.
std::string DiskFullPrefix(sqlite3* db) {
  const char* file = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
  std::string path = file != nullptr ? file : "";
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "disk full: ";
  return "disk full in " + (slash == 0 ? std::string("/") : path.substr(0, slash)) + ": ";
}

}  // namespace

Status SqliteStatus(sqlite3* db, int rc, std::string_view what) {
  if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB) {
    // The statement that met the damage says nothing useful; the file does.
    const char* file = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
    return Status::Io(
        fmt::format("database {} is damaged ({}){}", file != nullptr && *file ? file : "file",
                    db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc), kDamagedAdvice));
  }
  std::string message(what);
  message += ": ";
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (DiskFull(db, rc)) return Status::NoSpace(DiskFullPrefix(db) + message);
  switch (rc & 0xff) {  // the primary code; extended codes refine it
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(std::move(message));
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return Status::Io(std::move(message));
    default:
      return Status::Internal(std::move(message));
  }
}

// --- Query ---

Query::Query(Query&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      bind_status_(std::move(other.bind_status_)) {}

Query::~Query() {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Query& Query::Check(int rc, int index) {
  if (rc != SQLITE_OK && bind_status_.ok()) {
    bind_status_ = SqliteStatus(db_, rc, "binding parameter " + std::to_string(index));
  }
  return *this;
}

Query& Query::BindInt64(int index, int64_t value) {
  return Check(sqlite3_bind_int64(stmt_, index, value), index);
}

Query& Query::BindDouble(int index, double value) {
  return Check(sqlite3_bind_double(stmt_, index, value), index);
}

Query& Query::Bind(int index, std::string_view text) {
  return Check(
      sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
}

Query& Query::BindNull(int index) { return Check(sqlite3_bind_null(stmt_, index), index); }

Result<bool> Query::Step() {
  if (!bind_status_.ok()) return bind_status_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(db_, rc, sqlite3_sql(stmt_));
}

Status Query::Run() {
  for (;;) {
    Result<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
  }
}

bool Query::IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

int64_t Query::Int64(int col) const { return sqlite3_column_int64(stmt_, col); }

double Query::Double(int col) const { return sqlite3_column_double(stmt_, col); }

std::string Query::Text(int col) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  if (text == nullptr) return {};
  return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

std::optional<int64_t> Query::OptInt64(int col) const {
  if (IsNull(col)) return std::nullopt;
  return Int64(col);
}

std::optional<double> Query::OptDouble(int col) const {
  if (IsNull(col)) return std::nullopt;
  return Double(col);
}

// --- Db ---

Result<Db> Db::Open(const std::string& path, const std::string& vfs, bool read_only) {
  if (!read_only && vfs.empty() && !path.empty() && path[0] != ':' && path.rfind("file:", 0)) {
    // Created 0600 whatever the umask: the file holds jobs' environments and token digests,
    // and SQLite gives its WAL and shared-memory files the database file's mode.
    (void)CreateNewFile(path, "");  // kConflict: it is there already
  }
  sqlite3* raw = nullptr;
  // NOMUTEX: the Store is used from one thread at a time, so SQLite's own locks are waste.
  int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
              SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, vfs.empty() ? nullptr : vfs.c_str());
  Db db(raw);  // owns the handle even when opening failed
  if (rc != SQLITE_OK) return SqliteStatus(raw, rc, "opening " + path);
  return db;
}

Status Db::Exec(const char* sql) {
  int rc = sqlite3_exec(handle(), sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(handle(), rc, sql);
  return Status::Ok();
}

Result<Query> Db::Prepare(std::string_view sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* raw = nullptr;
    int rc = sqlite3_prepare_v3(handle(), sql.data(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
    if (rc != SQLITE_OK) return SqliteStatus(handle(), rc, "preparing " + std::string(sql));
    it = statements_.emplace(std::string(sql), StmtPtr(raw)).first;
  } else if (sqlite3_stmt_busy(it->second.get())) {
    // A caller still steps through this statement; resetting it under them would lose rows.
    return Status::Internal("statement already in use: " + std::string(sql));
  }
  return Query(handle(), it->second.get());
}

Result<int64_t> Db::QueryInt(std::string_view sql) {
  Result<Query> query = Prepare(sql);
  if (!query.ok()) return query.status();
  Result<bool> row = query->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Internal("no row from " + std::string(sql));
  return query->Int64(0);
}

Result<std::string> Db::QueryText(std::string_view sql) {
  Result<Query> query = Prepare(sql);
  if (!query.ok()) return query.status();
  Result<bool> row = query->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Internal("no row from " + std::string(sql));
  return query->Text(0);
}

int64_t Db::Changes() const { return sqlite3_changes64(handle()); }

int64_t Db::LastInsertRowid() const { return sqlite3_last_insert_rowid(handle()); }

Status QuickCheck(Db& db, const std::string& path) {
  Result<std::string> verdict = db.QueryText("PRAGMA quick_check(5)");
  if (!verdict.ok()) return verdict.status();
  if (*verdict == "ok") return Status::Ok();
  return Status::Io(
      fmt::format("database {} is damaged (quick_check: {}){}", path, *verdict, kDamagedAdvice));
}

Status BackupTo(Db& db, const std::string& dest) {
  std::string tmp = dest + ".tmp";
  (void)RemoveFile(tmp);
  mode_t old_mask = SetUmask(077);  // the copy holds every job's environment
  sqlite3* out = nullptr;
  int rc = sqlite3_open_v2(tmp.c_str(), &out, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  SetUmask(old_mask);
  std::unique_ptr<sqlite3, decltype(&sqlite3_close_v2)> close(out, &sqlite3_close_v2);
  if (rc != SQLITE_OK)
    return Status::Io(fmt::format("backup: cannot create {}: {}", tmp,
                                  out ? sqlite3_errmsg(out) : sqlite3_errstr(rc)));
  sqlite3_backup* backup = sqlite3_backup_init(out, "main", db.handle(), "main");
  if (backup == nullptr) {
    return Status::Io(fmt::format("backup to {}: {}", tmp, sqlite3_errmsg(out)));
  }
  rc = sqlite3_backup_step(backup, -1);  // all pages in one step: the daemon's loop waits
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) {
    (void)RemoveFile(tmp);
    return SqliteStatus(out, rc, "backup to " + tmp);
  }
  // The copy is a plain rollback-journal database with synchronous=FULL: close syncs it.
  close.reset();
  if (Status renamed = RenameFile(tmp, dest); !renamed.ok()) {
    (void)RemoveFile(tmp);
    return Status::Io("backup: " + renamed.message());
  }
  return Status::Ok();
}

// --- Transaction ---

Result<Transaction> Transaction::Begin(Db& db, Kind kind) {
  TRAINQ_RETURN_IF_ERROR(db.Exec(kind == Kind::kWrite ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED"));
  return Transaction(&db);
}

Transaction::~Transaction() {
  // Nothing to report to: the caller already returns the error that skipped Commit.
  if (db_ != nullptr && sqlite3_get_autocommit(db_->handle()) == 0) {
    sqlite3_exec(db_->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

Status Transaction::Commit() {
  Status status = db_->Exec("COMMIT");
  if (status.ok()) db_ = nullptr;  // on failure the destructor rolls back
  return status;
}

}  // namespace trainq::sqlite
