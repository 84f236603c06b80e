// A thin RAII layer over the SQLite C API for the SQLite store: one connection, a cache
// of prepared statements, transactions, and the one function that turns SQLite result
// codes into Status.
// Thread: like the Store, a Db is used from one thread at a time.
#pragma once

#include <sqlite3.h>

#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "trainq/status.h"

namespace trainq::sqlite {

// The only mapping from SQLite to Status. BUSY and LOCKED (another connection holds the
// lock past the busy timeout) are kUnavailable: the caller may retry later. FULL (and an
// IOERR whose system error is ENOSPC or EDQUOT) is kNoSpace, "disk full in DIR: ..." with
// the database's directory. IOERR and the other file-level failures (CANTOPEN, READONLY,
// PERM, CORRUPT, NOTADB) are kIo. Everything else (constraint, misuse, ...) is kInternal.
// Message: "what: sqlite message"; `db` may be null (the message then comes from the code
// alone).
Status SqliteStatus(sqlite3* db, int rc, std::string_view what);

// PRAGMA quick_check: kIo naming `path`, what SQLite found and how to recover when the
// database is damaged. Reads every page, so it runs once, when the store opens.
class Db;
Status QuickCheck(Db& db, const std::string& path);

// Copies the database of `db` to `dest` with SQLite's online backup API: a consistent
// snapshot while the database stays in use. Written to `dest`.tmp (0600) and renamed over
// `dest` once complete and synced.
Status BackupTo(Db& db, const std::string& dest);

// One use of a prepared statement: bind (1-based), step, read columns (0-based).
// Destruction resets the statement and clears its bindings, so a cached statement never
// holds a read snapshot or a lock between uses. A bind failure is reported by Step/Run.
class Query {
 public:
  Query(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Query(Query&& other) noexcept;
  Query& operator=(Query&&) = delete;
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  ~Query();

  // Unsigned values are stored bit for bit as SQLite's signed 64-bit integers.
  template <std::integral T>
  Query& Bind(int index, T value) {
    return BindInt64(index, static_cast<int64_t>(value));
  }
  template <std::floating_point T>
  Query& Bind(int index, T value) {
    return BindDouble(index, static_cast<double>(value));
  }
  Query& Bind(int index, std::string_view text);
  Query& Bind(int index, const std::string& text) { return Bind(index, std::string_view(text)); }
  Query& Bind(int index, const char* text) { return Bind(index, std::string_view(text)); }
  Query& BindNull(int index);
  // nullopt binds NULL.
  template <class T>
  Query& Bind(int index, const std::optional<T>& value) {
    return value ? Bind(index, *value) : BindNull(index);
  }
  // Binds each argument in turn from index 1.
  template <class... Args>
  Query& BindAll(const Args&... args) {
    int index = 0;
    (Bind(++index, args), ...);
    (void)index;  // unused when there are no arguments
    return *this;
  }

  // true: a row is ready to read; false: the statement is done.
  Result<bool> Step();
  // Steps to the end, ignoring rows; for INSERT/UPDATE/DELETE.
  Status Run();

  bool IsNull(int col) const;
  int64_t Int64(int col) const;
  int Int(int col) const { return static_cast<int>(Int64(col)); }
  uint64_t Uint64(int col) const { return static_cast<uint64_t>(Int64(col)); }
  double Double(int col) const;
  std::string Text(int col) const;
  std::optional<int64_t> OptInt64(int col) const;
  std::optional<double> OptDouble(int col) const;

 private:
  Query& BindInt64(int index, int64_t value);
  Query& BindDouble(int index, double value);
  Query& Check(int rc, int index);

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  Status bind_status_;
};

// One connection. Statements are prepared once and cached by their SQL text for the
// life of the connection (finalized before the connection closes).
class Db {
 public:
  // Opens or creates the database file (not its directory) through the named VFS ("" for
  // SQLite's default; the durability test names a fault-injecting one). A file it creates
  // through the default VFS is 0600 whatever the umask (its WAL takes the same mode).
  // `read_only`: never creates or writes the file.
  static Result<Db> Open(const std::string& path, const std::string& vfs = "",
                         bool read_only = false);

  Db(Db&&) noexcept = default;
  Db& operator=(Db&&) noexcept = default;
  ~Db() = default;

  sqlite3* handle() const { return handle_.get(); }
  // Runs SQL that returns no rows needed by the caller (may be several statements).
  Status Exec(const char* sql);
  // A cached statement, ready to bind. kInternal if the same statement is already in use.
  Result<Query> Prepare(std::string_view sql);
  // The first column of the first row as an integer (PRAGMA reads).
  Result<int64_t> QueryInt(std::string_view sql);
  Result<std::string> QueryText(std::string_view sql);
  // Prepares (cached), binds `args` from index 1 and runs `sql` to the end; returns the
  // number of rows it changed.
  template <class... Args>
  Result<int64_t> Run(std::string_view sql, const Args&... args) {
    Result<Query> query = Prepare(sql);
    if (!query.ok()) return query.status();
    query->BindAll(args...);
    TRAINQ_RETURN_IF_ERROR(query->Run());
    return Changes();
  }
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t Changes() const;
  int64_t LastInsertRowid() const;

 private:
  struct CloseDb {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };
  struct FinalizeStmt {
    void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
  };
  using StmtPtr = std::unique_ptr<sqlite3_stmt, FinalizeStmt>;

  explicit Db(sqlite3* handle) : handle_(handle) {}

  // Declared before the statements: members are destroyed in reverse order, so every
  // statement is finalized before the connection closes.
  std::unique_ptr<sqlite3, CloseDb> handle_;
  std::map<std::string, StmtPtr, std::less<>> statements_;
};

// A transaction that rolls back unless committed. kWrite takes the write lock at BEGIN
// (BEGIN IMMEDIATE): a read-then-write transaction can then never fail half-way with
// SQLITE_BUSY because another connection wrote in between; waiting is bounded by the
// busy timeout. kRead gives a consistent snapshot for several SELECTs.
class Transaction {
 public:
  enum class Kind { kRead, kWrite };

  static Result<Transaction> Begin(Db& db, Kind kind);

  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // Durable on return when the connection runs with synchronous=FULL.
  Status Commit();

 private:
  explicit Transaction(Db* db) : db_(db) {}

  Db* db_;  // null once committed or rolled back
};

// Raises synchronous to FULL for one write a user is told about and lowers it again
// afterwards. SQLite reads the level at commit but lets it change only outside a
// transaction, so the guard must outlive the transaction it covers.
class FullSyncScope {
 public:
  FullSyncScope(Db& db, bool durable) : db_(durable ? &db : nullptr) {}
  FullSyncScope(const FullSyncScope&) = delete;
  FullSyncScope& operator=(const FullSyncScope&) = delete;
  ~FullSyncScope() {
    // Failing to lower it only keeps later commits synced: safe.
    if (raised_) (void)db_->Exec("PRAGMA synchronous = NORMAL");
  }
  Status Raise() {
    if (!db_) return Status::Ok();
    TRAINQ_RETURN_IF_ERROR(db_->Exec("PRAGMA synchronous = FULL"));
    raised_ = true;
    return Status::Ok();
  }

 private:
  Db* db_;
  bool raised_ = false;
};

}  // namespace trainq::sqlite
