#include "src/store/sqlite/sqlite_db.h"

#include <cerrno>
#include <string>
#include <utility>

namespace trainq::sqlite {

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
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
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

Result<Db> Db::Open(const std::string& path, const std::string& vfs) {
  sqlite3* raw = nullptr;
  // NOMUTEX: the Store is used from one thread at a time, so SQLite's own locks are waste.
  int flags =
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
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
