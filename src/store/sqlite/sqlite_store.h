// The SQLite implementation of Store (docs/architecture.md, "The Store contract"): one database
// file in WAL mode with synchronous=FULL, so an acknowledged write is on disk, and several
// connections (the daemon, the CLI) may share the file. Every state change is one transaction whose
// first statement is a compare-and-set on the job's (state, attempt).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "src/core/deps.h"
#include "src/store/sqlite/sqlite_db.h"
#include "src/store/store.h"

namespace trainq {

namespace sqlite {
struct NewJobEnv;
}  // namespace sqlite

struct SqliteOptions {
  // How long a call waits for another connection's write lock before kUnavailable.
  int busy_timeout_ms = 5000;
  // What a user was told happened (Submit, CancelWaiting, Requeue) is fsync'd before the
  // call returns (synchronous=FULL); the daemon's own transitions are not (NORMAL): a
  // power loss may undo the last of them, which the run dirs' records redo on restart, and
  // the next durable commit syncs them too. false (synchronous=OFF everywhere) is for tests
  // and scratch databases only.
  bool durable = true;
  // The SQLite VFS to open the file through; "" is SQLite's default. Tests name one that
  // simulates a power cut (durability_test.cc).
  std::string vfs = {};
};

// As OpenSqliteStore(path), with options. kUnavailable if the database was written by a
// newer trainq (schema version unknown here); kIo if the file cannot be opened or is not
// a database.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteOptions& options);

// Sets a fresh connection up as the store needs it: busy timeout, WAL, synchronous=NORMAL
// (OFF when !options.durable), foreign keys. Only WAL persists in the file; the rest is
// per connection.
Status ConfigureConnection(sqlite::Db& db, const SqliteOptions& options);

// Thread: one thread at a time (the Store contract); the connection is opened without
// SQLite's own mutexes.
class SqliteStore final : public Store {
 public:
  static Result<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                   const SqliteOptions& options);
  // Takes a connection already configured and migrated; use Open.
  SqliteStore(sqlite::Db db, bool durable) : db_(std::move(db)), durable_(durable) {}

  Result<std::vector<JobId>> Submit(std::span<const JobSpec> specs, UnixMs now) override;
  Result<std::vector<JobId>> IdsForSubmitKey(const std::string& user,
                                             const std::string& key) override;
  Status Backup(const std::string& dest) override { return sqlite::BackupTo(db_, dest); }
  Result<Job> Get(JobId id) override;
  Result<std::vector<Job>> List(const ListQuery& query) override;
  Result<JobId> LastId() override;
  Status StartAttempt(JobId id, int expected_attempt, const Placement& placement,
                      UnixMs now) override;
  Status MarkRunning(JobId id, int attempt, int64_t pid, uint64_t pid_start_ticks,
                     UnixMs now) override;
  Status FinishAttempt(JobId id, int attempt, const AttemptEnd& end) override;
  Status RecordPeak(JobId id, int attempt, uint64_t bytes) override;
  Status AddUsage(JobId id, int attempt, const AttemptUsage& add) override;
  Status CancelWaiting(JobId id, const std::string& reason) override;
  Result<std::vector<Status>> CancelWaitingMany(
      std::span<const std::pair<JobId, std::string>> cancels) override;
  Result<std::vector<JobId>> Forget(std::span<const JobId> ids,
                                    std::span<const AcctRow> summaries) override;
  Result<std::vector<AcctRow>> AcctRecords(const std::string& user, UnixMs since) override;
  Result<UserFootprint> Footprint(const std::string& user) override;
  Status Requeue(JobId id, const std::string& reason, UnixMs now) override;
  Result<std::vector<Job>> Dependents(JobId id) override;
  Status UpdateJob(JobId id, const JobSpec& spec, UnixMs not_before, const std::string& reason,
                   bool running) override;
  Status MoveWaiting(JobId id, JobState from, JobState to, const std::string& reason,
                     UnixMs now) override;
  Status SetReasons(std::span<const std::pair<JobId, std::string>> reasons) override;
  Status AddToken(const TokenRecord& token) override;
  Result<std::vector<TokenRecord>> ListTokens() override;
  Status RevokeToken(const std::string& name, UnixMs now) override;
  Result<std::optional<TokenRecord>> FindTokenByHash(const std::string& hash) override;

 private:
  Result<sqlite::Transaction> BeginWrite();
  // Ok when the compare-and-set changed exactly one job; otherwise kNotFound or a
  // kConflict that says what the job is instead of `expected`.
  Status CheckCas(const Result<int64_t>& changed, JobId id, std::string_view expected);
  Result<std::vector<Job>> SelectJobs(const ListQuery& query);
  // The state a new job starts in, judged from its dependencies as stored now.
  Result<DepDecision> InitialState(const JobSpec& spec);
  Status NameNewGroups(std::span<const JobSpec> specs, const std::vector<JobId>& ids);
  // Where a new job's environment goes; `shared`: the large ones its submit stored so far.
  Result<sqlite::NewJobEnv> StoreEnv(const JobSpec& spec, std::map<std::string, int64_t>& shared);
  Status FillAttempts(std::vector<Job>& jobs);

  sqlite::Db db_;
  bool durable_ = true;
};

}  // namespace trainq
