#include "src/store/sqlite/sqlite_store.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "src/core/state_machine.h"
#include "src/os/system.h"
#include "src/store/sqlite/rows.h"
#include "src/store/sqlite/schema.h"

namespace trainq {

using sqlite::Db;
using sqlite::FullSyncScope;
using sqlite::Query;
using sqlite::Transaction;

namespace {

// "state IN ('starting', 'running')": the compare-and-set condition of `move`, from the one
// table of moves (src/core/state_machine.h).
std::string FromStates(Move move) {
  std::string sql = "state IN (";
  std::span<const JobState> from = MoveFrom(move);
  for (size_t i = 0; i < from.size(); ++i) {
    sql += fmt::format("{}'{}'", i ? ", " : "", StateName(from[i]));
  }
  return sql + ")";
}

std::string Expected(Move move) { return StatesText(MoveFrom(move)); }

template <class T>
Status Take(Result<T> decoded, T& out) {
  if (!decoded.ok()) return decoded.status();
  out = std::move(decoded).value();
  return Status::Ok();
}

Result<std::vector<Job>> ReadJobs(Query& select, bool with_env = true) {
  std::vector<Job> jobs;
  for (;;) {
    Result<bool> row = select.Step();
    if (!row.ok()) return row.status();
    if (!*row) return jobs;
    Result<Job> job = sqlite::ReadJob(select, with_env);
    if (!job.ok()) return job.status();
    jobs.push_back(std::move(job).value());
  }
}

}  // namespace

Status ConfigureConnection(Db& db, const SqliteOptions& options) {
  int rc = sqlite3_busy_timeout(db.handle(), options.busy_timeout_ms);
  if (rc != SQLITE_OK) return sqlite::SqliteStatus(db.handle(), rc, "setting busy_timeout");
  // NORMAL: in WAL mode it keeps the database consistent across a power loss, losing at
  // most the last commits; writes a user is told about switch to FULL (CommitDurably).
  // Each fsync costs milliseconds on common disks, and a job's life has several commits.
  TRAINQ_RETURN_IF_ERROR(
      db.Exec(options.durable ? "PRAGMA synchronous = NORMAL" : "PRAGMA synchronous = OFF"));
  Result<std::string> mode = db.QueryText("PRAGMA journal_mode = WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") return Status::Io("the database cannot use WAL (journal_mode " + *mode + ")");
  return db.Exec("PRAGMA foreign_keys = ON");
}

// A database whose pages `clean` freed gives them back to the disk (Forget): that needs
// auto_vacuum = INCREMENTAL, which a database made before it had takes only through one
// VACUUM (instant on a new file, once on an old one).
Status UseIncrementalVacuum(Db& db, const std::string& path) {
  Result<int64_t> mode = db.QueryInt("PRAGMA auto_vacuum");
  if (!mode.ok()) return mode.status();
  if (*mode == 2) return Status::Ok();
  TRAINQ_RETURN_IF_ERROR(db.Exec("PRAGMA auto_vacuum = INCREMENTAL"));
  Status st = db.Exec("VACUUM");
  if (!st.ok())
    return Status(st.code(), path + ": switching to incremental vacuum: " + st.message());
  return Status::Ok();
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                       const SqliteOptions& options) {
  Result<Db> db = Db::Open(path, options.vfs);
  if (!db.ok()) return db.status();
  TRAINQ_RETURN_IF_ERROR(ConfigureConnection(*db, options));
  TRAINQ_RETURN_IF_ERROR(sqlite::QuickCheck(*db, path));
  TRAINQ_RETURN_IF_ERROR(UseIncrementalVacuum(*db, path));
  Status migrated = sqlite::Migrate(*db, sqlite::SchemaMigrations());
  if (!migrated.ok()) return Status(migrated.code(), path + ": " + migrated.message());
  return std::make_unique<SqliteStore>(std::move(db).value(), options.durable);
}

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteOptions& options) {
  Result<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path, options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(store).value());
}

Status CheckSqliteFile(const std::string& path) {
  if (!FileExists(path)) return Status::Ok();
  Result<Db> db = Db::Open(path, "", /*read_only=*/true);
  if (!db.ok()) return db.status();
  sqlite3_busy_timeout(db->handle(), 2000);
  Status st = sqlite::QuickCheck(*db, path);
  // Held by a daemon that is starting (another client started it): it checks the file itself
  // when it opens it, and reports damage there.
  if (st.code() == Code::kUnavailable) return Status::Ok();
  return st;
}

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path) {
  return OpenSqliteStore(path, SqliteOptions{});
}

Result<Transaction> SqliteStore::BeginWrite() {
  return Transaction::Begin(db_, Transaction::Kind::kWrite);
}

Status SqliteStore::CheckCas(const Result<int64_t>& changed, JobId id, std::string_view expected) {
  if (!changed.ok()) return changed.status();
  if (*changed == 1) return Status::Ok();
  Result<Query> query = db_.Prepare("SELECT state, attempt FROM jobs WHERE id = ?1");
  if (!query.ok()) return query.status();
  Result<bool> row = query->BindAll(id).Step();
  if (!row.ok()) return row.status();
  std::string job = "job " + std::to_string(id);
  if (!*row) return Status::NotFound("no " + job);
  return Status::Conflict(job + " is " + query->Text(0) + " with attempt " +
                          std::to_string(query->Int64(1)) + ", not " + std::string(expected));
}

// --- Submit and reads ---

Result<std::vector<JobId>> SqliteStore::Submit(std::span<const JobSpec> specs, UnixMs now) {
  std::vector<JobId> ids;
  if (specs.empty()) return ids;
  ids.reserve(specs.size());
  FullSyncScope full_sync(db_, durable_);
  TRAINQ_RETURN_IF_ERROR(full_sync.Raise());
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  std::map<std::string, int64_t> shared_envs;  // a large env's text -> its row in envs
  const JobSpec* previous = nullptr;
  Result<sqlite::NewJobEnv> env = Status::Internal("no environment yet");
  for (size_t i = 0; i < specs.size(); ++i) {
    const JobSpec& spec = specs[i];
    Result<DepDecision> start = InitialState(spec);
    if (!start.ok()) {
      std::string where = specs.size() > 1 ? "jobs[" + std::to_string(i) + "]: " : "";
      return Status(start.status().code(), where + start.status().message());
    }
    // A batch's jobs share one environment (EnvVars): encoded once, not once a job.
    if (previous == nullptr || !spec.env.SharedWith(previous->env)) {
      env = StoreEnv(spec, shared_envs);
    } else if (env.ok()) {
      env->stored_bytes = RecordBytes(spec, env->env_id != 0 ? 0 : env->text.size());
    }
    previous = &spec;
    if (!env.ok()) return env.status();
    Result<Query> insert = db_.Prepare(sqlite::InsertJobSql());
    if (!insert.ok()) return insert.status();
    TRAINQ_RETURN_IF_ERROR(sqlite::BindNewJob(*insert, spec, now, SubmitStart(spec, *start), *env));
    TRAINQ_RETURN_IF_ERROR(insert->Run());
    ids.push_back(db_.LastInsertRowid());
  }
  TRAINQ_RETURN_IF_ERROR(NameNewGroups(specs, ids));
  TRAINQ_RETURN_IF_ERROR(txn->Commit());
  return ids;
}

// A small environment stays in the job's row; a large one is stored once per submit.
Result<sqlite::NewJobEnv> SqliteStore::StoreEnv(const JobSpec& spec,
                                                std::map<std::string, int64_t>& shared) {
  Result<std::string> text = sqlite::EncodeEnv(spec.env.list());
  if (!text.ok()) return text.status();
  sqlite::NewJobEnv env;
  if (text->size() < kSharedEnvBytes) {
    env.stored_bytes = RecordBytes(spec, text->size());
    env.text = std::move(text).value();
    return env;
  }
  auto found = shared.find(*text);
  if (found != shared.end()) {
    env.env_id = found->second;
    env.stored_bytes = RecordBytes(spec, 0);
    return env;
  }
  Result<int64_t> added = db_.Run("INSERT INTO envs (body) VALUES (?1)", *text);
  if (!added.ok()) return added.status();
  env.env_id = db_.LastInsertRowid();
  env.stored_bytes = RecordBytes(spec, text->size());
  shared.emplace(std::move(text).value(), env.env_id);
  return env;
}

// The jobs just stored with a negative group (a new group's tag) join the group named by
// the first of them with the same tag.
Status SqliteStore::NameNewGroups(std::span<const JobSpec> specs, const std::vector<JobId>& ids) {
  std::map<JobId, JobId> first;  // tag -> its first id
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].group < 0) first.try_emplace(specs[i].group, ids[i]);
  }
  for (const auto& [tag, id] : first) {
    Result<Query> update =
        db_.Prepare("UPDATE jobs SET grp = ?1 WHERE grp = ?3 AND id BETWEEN ?1 AND ?2");
    if (!update.ok()) return update.status();
    TRAINQ_RETURN_IF_ERROR(update->BindAll(id, ids.back(), tag).Run());
  }
  return Status::Ok();
}

Result<std::vector<JobId>> SqliteStore::IdsForSubmitKey(const std::string& user,
                                                        const std::string& key) {
  Result<Query> select =
      db_.Prepare("SELECT id FROM jobs WHERE submit_key = ?1 AND user = ?2 ORDER BY id");
  if (!select.ok()) return select.status();
  select->BindAll(key, user);
  std::vector<JobId> ids;
  for (;;) {
    Result<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) return ids;
    ids.push_back(select->Int64(0));
  }
}

Result<DepDecision> SqliteStore::InitialState(const JobSpec& spec) {
  if (!spec.has_deps()) return DepDecision{};
  std::vector<DepState> deps;
  auto read = [&](JobId id, const char* field) -> Status {
    Result<Query> select = db_.Prepare("SELECT state, reason FROM jobs WHERE id = ?1");
    if (!select.ok()) return select.status();
    Result<bool> row = select->BindAll(id).Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Invalid(std::string(field) + ": no job " + std::to_string(id));
    DepState d{id, true, JobState::kQueued, select->Text(1)};
    TRAINQ_RETURN_IF_ERROR(Take(sqlite::DecodeState(select->Text(0)), d.state));
    deps.push_back(std::move(d));
    return Status::Ok();
  };
  for (JobId id : spec.after) TRAINQ_RETURN_IF_ERROR(read(id, "after"));
  for (JobId id : spec.after_any) TRAINQ_RETURN_IF_ERROR(read(id, "after_any"));
  return DecideDeps(spec, deps);
}

Result<Job> SqliteStore::Get(JobId id) {
  // One snapshot for both reads, so the job and its attempts agree.
  Result<Transaction> txn = Transaction::Begin(db_, Transaction::Kind::kRead);
  if (!txn.ok()) return txn.status();
  Result<Query> select = db_.Prepare(sqlite::GetJobSql());
  if (!select.ok()) return select.status();
  Result<std::vector<Job>> jobs = ReadJobs(select->BindAll(id));
  if (!jobs.ok()) return jobs.status();
  if (jobs->empty()) return Status::NotFound("no job " + std::to_string(id));
  TRAINQ_RETURN_IF_ERROR(FillAttempts(*jobs));
  TRAINQ_RETURN_IF_ERROR(txn->Commit());
  return std::move(jobs->front());
}

Result<std::vector<Job>> SqliteStore::List(const ListQuery& query) {
  Result<Transaction> txn = Transaction::Begin(db_, Transaction::Kind::kRead);
  if (!txn.ok()) return txn.status();
  Result<std::vector<Job>> jobs = SelectJobs(query);
  if (!jobs.ok()) return jobs;
  if (query.with_attempts) TRAINQ_RETURN_IF_ERROR(FillAttempts(*jobs));
  TRAINQ_RETURN_IF_ERROR(txn->Commit());
  return jobs;
}

Result<std::vector<Job>> SqliteStore::SelectJobs(const ListQuery& query) {
  std::vector<JobState> states = query.states;
  std::sort(states.begin(), states.end());
  states.erase(std::unique(states.begin(), states.end()), states.end());
  // Each state alone, in id order from the (state, id) index (ListJobsSql); merged by id.
  auto select = [&](std::optional<JobState> state) -> Result<std::vector<Job>> {
    Result<Query> q =
        db_.Prepare(sqlite::ListJobsSql(state.has_value(), query.with_env, query.placement_only));
    if (!q.ok()) return q.status();
    q->Bind(1, query.after_id).Bind(2, query.limit > 0 ? int64_t{query.limit} : int64_t{-1});
    q->Bind(10, query.user).Bind(11, query.group).Bind(12, query.only_started ? 1 : 0);
    if (state) q->Bind(3, sqlite::StateText(*state));
    return ReadJobs(*q, query.with_env && !query.placement_only);
  };
  if (states.empty()) return select(std::nullopt);
  std::vector<Job> out;
  for (JobState state : states) {
    Result<std::vector<Job>> some = select(state);
    if (!some.ok()) return some.status();
    auto middle = static_cast<std::ptrdiff_t>(out.size());
    out.insert(out.end(), std::make_move_iterator(some->begin()),
               std::make_move_iterator(some->end()));
    std::inplace_merge(out.begin(), out.begin() + middle, out.end(),
                       [](const Job& a, const Job& b) { return a.id < b.id; });
    if (query.limit > 0 && out.size() > static_cast<size_t>(query.limit)) {
      out.erase(out.begin() + query.limit, out.end());
    }
  }
  return out;
}

// One query for the attempts of all `jobs` (sorted by id, as listed), merged in order.
Status SqliteStore::FillAttempts(std::vector<Job>& jobs) {
  if (jobs.empty()) return Status::Ok();
  bool single = jobs.size() == 1;
  Result<Query> select =
      db_.Prepare(single ? sqlite::AttemptsOfJobSql() : sqlite::AttemptsOfJobsSql());
  if (!select.ok()) return select.status();
  if (single) {
    select->Bind(1, jobs.front().id);
  } else {
    nlohmann::json ids = nlohmann::json::array();
    for (const Job& job : jobs) ids.push_back(job.id);
    select->Bind(1, ids.dump());
  }
  auto next = jobs.begin();
  for (;;) {
    Result<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    JobId job_id = 0;
    Result<Attempt> attempt = sqlite::ReadAttempt(*select, &job_id);
    if (!attempt.ok()) return attempt.status();
    while (next != jobs.end() && next->id < job_id) ++next;
    if (next == jobs.end() || next->id != job_id) {
      return Status::Internal("attempt of job " + std::to_string(job_id) + " out of order");
    }
    next->attempts.push_back(std::move(attempt).value());
  }
}

// --- Transitions: each a compare-and-set on (state, attempt) in one transaction ---

Status SqliteStore::StartAttempt(JobId id, int expected_attempt, const Placement& placement,
                                 UnixMs now) {
  Result<std::string> indices = sqlite::EncodeInts(placement.gpu_indices);
  Result<std::string> uuids = sqlite::EncodeStrings(placement.gpu_uuids, "gpu_uuids");
  if (!indices.ok()) return indices.status();
  if (!uuids.ok()) return uuids.status();
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  TRAINQ_RETURN_IF_ERROR(
      CheckCas(db_.Run("UPDATE jobs SET state = 'starting', attempt = attempt + 1, reason = '' "
                       "WHERE id = ?1 AND attempt = ?2 AND " +
                           FromStates(Move::kStart),
                       id, expected_attempt),
               id, Expected(Move::kStart) + " with attempt " + std::to_string(expected_attempt)));
  Result<int64_t> inserted = db_.Run(
      "INSERT INTO attempts (job_id, n, state, node, gpu_indices, gpu_uuids, reserved_bytes, "
      "cpus, run_dir, log_path, started_at, master_port) "
      "VALUES (?, ?, 'starting', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      id, expected_attempt + 1, placement.node, *indices, *uuids, placement.reserved_bytes,
      placement.cpus, placement.run_dir, placement.log_path, now, placement.master_port);
  if (!inserted.ok()) return inserted.status();
  return txn->Commit();
}

Status SqliteStore::MarkRunning(JobId id, int attempt, int64_t pid, uint64_t pid_start_ticks,
                                UnixMs /*now*/) {
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  TRAINQ_RETURN_IF_ERROR(
      CheckCas(db_.Run("UPDATE jobs SET state = 'running' "
                       "WHERE id = ?1 AND attempt = ?2 AND " +
                           FromStates(Move::kRun),
                       id, attempt),
               id, Expected(Move::kRun) + " with attempt " + std::to_string(attempt)));
  Result<int64_t> updated = db_.Run(
      "UPDATE attempts SET state = 'running', pid = ?3, pid_start_ticks = ?4 "
      "WHERE job_id = ?1 AND n = ?2",
      id, attempt, pid, pid_start_ticks);
  if (!updated.ok()) return updated.status();
  if (*updated != 1) return Status::Internal("job " + std::to_string(id) + " lacks its attempt");
  return txn->Commit();
}

Status SqliteStore::FinishAttempt(JobId id, int attempt, const AttemptEnd& end) {
  TRAINQ_RETURN_IF_ERROR(CheckAttemptEnd(end));
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  TRAINQ_RETURN_IF_ERROR(
      CheckCas(db_.Run("UPDATE jobs SET state = ?3, reason = ?4, not_before = ?5, "
                       "queued_at = CASE WHEN ?3 = 'queued' THEN ?6 ELSE queued_at END "
                       "WHERE id = ?1 AND attempt = ?2 AND " +
                           FromStates(Move::kFinish),
                       id, attempt, sqlite::StateText(end.job_state), end.job_reason,
                       end.not_before, end.ended_at),
               id, Expected(Move::kFinish) + " with attempt " + std::to_string(attempt)));
  Result<int64_t> updated = db_.Run(
      "UPDATE attempts SET state = ?3, ended_at = ?4, exit_code = ?5, signal = ?6, oom = ?7, "
      "end_reason = ?8, log_bytes = log_bytes + ?9 WHERE job_id = ?1 AND n = ?2",
      id, attempt, sqlite::StateText(end.attempt_state), end.ended_at, end.exit_code, end.signal,
      end.oom, end.end_reason, end.log_bytes);
  if (!updated.ok()) return updated.status();
  if (*updated != 1) return Status::Internal("job " + std::to_string(id) + " lacks its attempt");
  return txn->Commit();
}

Result<JobId> SqliteStore::LastId() {
  Result<Query> q = db_.Prepare("SELECT COALESCE(MAX(id), 0) FROM jobs");
  if (!q.ok()) return q.status();
  Result<bool> row = q->Step();
  if (!row.ok()) return row.status();
  return static_cast<JobId>(q->Int64(0));
}

Result<UserFootprint> SqliteStore::Footprint(const std::string& user) {
  Result<Transaction> txn = Transaction::Begin(db_, Transaction::Kind::kRead);
  if (!txn.ok()) return txn.status();
  UserFootprint out;
  Result<Query> jobs = db_.Prepare(
      "SELECT COUNT(*) FILTER (WHERE state IN ('queued', 'blocked')), COALESCE(SUM(stored_bytes), "
      "0) "
      "FROM jobs WHERE user = ?1");
  if (!jobs.ok()) return jobs.status();
  Result<bool> row = jobs->BindAll(user).Step();
  if (!row.ok()) return row.status();
  out.waiting_jobs = jobs->Int64(0);
  out.stored_bytes = static_cast<uint64_t>(jobs->Int64(1));
  Result<Query> logs = db_.Prepare(
      "SELECT COALESCE(SUM(log_bytes), 0) FROM attempts WHERE job_id IN (SELECT id FROM jobs WHERE "
      "user = ?1)");
  if (!logs.ok()) return logs.status();
  row = logs->BindAll(user).Step();
  if (!row.ok()) return row.status();
  out.stored_bytes += static_cast<uint64_t>(logs->Int64(0));
  return out;
}

Status SqliteStore::RecordPeak(JobId id, int attempt, uint64_t bytes) {
  Result<int64_t> updated = db_.Run(
      "UPDATE attempts SET peak_mem_bytes = MAX(peak_mem_bytes, ?3) "
      "WHERE job_id = ?1 AND n = ?2",
      id, attempt, bytes);
  if (!updated.ok()) return updated.status();
  if (*updated != 1) {
    return Status::NotFound("job " + std::to_string(id) + " has no attempt " +
                            std::to_string(attempt));
  }
  return Status::Ok();
}

Status SqliteStore::AddUsage(JobId id, int attempt, const AttemptUsage& add) {
  Result<int64_t> updated = db_.Run(
      "UPDATE attempts SET held_gpu_ms = held_gpu_ms + ?3, util_known_ms = util_known_ms + ?4, "
      "busy_gpu_ms = busy_gpu_ms + ?5, mem_byte_s = mem_byte_s + ?6 WHERE job_id = ?1 AND n = ?2",
      id, attempt, add.held_gpu_ms, add.util_known_ms, add.busy_gpu_ms, add.mem_byte_s);
  if (!updated.ok()) return updated.status();
  if (*updated != 1) {
    return Status::NotFound("job " + std::to_string(id) + " has no attempt " +
                            std::to_string(attempt));
  }
  return Status::Ok();
}

Status SqliteStore::CancelWaiting(JobId id, const std::string& reason) {
  FullSyncScope full_sync(db_, durable_);
  TRAINQ_RETURN_IF_ERROR(full_sync.Raise());
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  TRAINQ_RETURN_IF_ERROR(CheckCas(db_.Run("UPDATE jobs SET state = 'cancelled', reason = ?2 "
                                          "WHERE id = ?1 AND " +
                                              FromStates(Move::kCancelWaiting),
                                          id, reason),
                                  id, Expected(Move::kCancelWaiting)));
  return txn->Commit();
}

Result<std::vector<Status>> SqliteStore::CancelWaitingMany(
    std::span<const std::pair<JobId, std::string>> cancels) {
  FullSyncScope full_sync(db_, durable_);
  TRAINQ_RETURN_IF_ERROR(full_sync.Raise());
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  std::vector<Status> out;
  for (const auto& [id, reason] : cancels) {
    Status st = CheckCas(db_.Run("UPDATE jobs SET state = 'cancelled', reason = ?2 WHERE id = ?1 "
                                 "AND " +
                                     FromStates(Move::kCancelWaiting),
                                 id, reason),
                         id, Expected(Move::kCancelWaiting));
    // A job that no longer waits is that job's answer; anything else is the store's failure.
    if (st.code() != Code::kOk && st.code() != Code::kConflict && st.code() != Code::kNotFound) {
      return st;
    }
    out.push_back(std::move(st));
  }
  TRAINQ_RETURN_IF_ERROR(txn->Commit());
  return out;
}

Result<std::vector<JobId>> SqliteStore::Forget(std::span<const JobId> ids,
                                               std::span<const AcctRow> summaries) {
  FullSyncScope full_sync(db_, durable_);
  TRAINQ_RETURN_IF_ERROR(full_sync.Raise());
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  std::vector<JobId> gone;
  std::set<int64_t> envs;  // shared environments the forgotten jobs used
  for (size_t i = 0; i < ids.size(); ++i) {
    JobId id = ids[i];
    Result<Query> env = db_.Prepare(
        "SELECT env_id FROM jobs WHERE id = ?1 AND state IN ('succeeded', 'failed', 'cancelled')");
    if (!env.ok()) return env.status();
    Result<bool> row = env->BindAll(id).Step();
    if (!row.ok()) return row.status();
    if (!*row) continue;
    if (env->Int64(0) != 0) envs.insert(env->Int64(0));
    Result<int64_t> n = db_.Run("DELETE FROM jobs WHERE id = ?1", id);
    if (!n.ok()) return n.status();
    // Foreign keys are not enforced on this connection: the attempts go by hand.
    Result<int64_t> attempts = db_.Run("DELETE FROM attempts WHERE job_id = ?1", id);
    if (!attempts.ok()) return attempts.status();
    if (!summaries.empty()) {
      const AcctRow& row = summaries[i];
      Result<int64_t> kept =
          db_.Run("INSERT OR REPLACE INTO acct (id, user, ended_at, row) VALUES (?1, ?2, ?3, ?4)",
                  id, row.user, row.ended_at, AcctToJson(row).dump());
      if (!kept.ok()) return kept.status();
    }
    gone.push_back(id);
  }
  for (int64_t env : envs) {
    Result<int64_t> n = db_.Run(
        "DELETE FROM envs WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE env_id = ?1)",
        env);
    if (!n.ok()) return n.status();
  }
  TRAINQ_RETURN_IF_ERROR(txn->Commit());
  // What was forgotten leaves the file too, and the WAL that recorded it: `clean` is how a
  // user gives back the disk their jobs took.
  if (!gone.empty()) {
    TRAINQ_RETURN_IF_ERROR(db_.Exec("PRAGMA incremental_vacuum"));
    TRAINQ_RETURN_IF_ERROR(db_.Exec("PRAGMA wal_checkpoint(TRUNCATE)"));
  }
  return gone;
}

Result<std::vector<AcctRow>> SqliteStore::AcctRecords(const std::string& user, UnixMs since) {
  Result<Query> q = db_.Prepare(
      "SELECT row FROM acct WHERE (?1 = '' OR user = ?1) AND ended_at >= ?2 ORDER BY id");
  if (!q.ok()) return q.status();
  q->BindAll(user, since);
  std::vector<AcctRow> out;
  for (;;) {
    Result<bool> row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    Result<AcctRow> r = AcctFromJson(q->Text(0));
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

Status SqliteStore::Requeue(JobId id, const std::string& reason, UnixMs now) {
  FullSyncScope full_sync(db_, durable_);
  TRAINQ_RETURN_IF_ERROR(full_sync.Raise());
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  TRAINQ_RETURN_IF_ERROR(
      CheckCas(db_.Run("UPDATE jobs SET state = 'queued', reason = ?2, not_before = 0, "
                       "queued_at = ?3 WHERE id = ?1 AND " +
                           FromStates(Move::kRequeue),
                       id, reason, now),
               id, Expected(Move::kRequeue)));
  return txn->Commit();
}

Result<std::vector<Job>> SqliteStore::Dependents(JobId id) {
  Result<Query> select = db_.Prepare(sqlite::DependentsSql());
  if (!select.ok()) return select.status();
  return ReadJobs(select->BindAll(id));
}

Status SqliteStore::MoveWaiting(JobId id, JobState from, JobState to, const std::string& reason,
                                UnixMs now) {
  if (!MoveAllowed(Move::kResolve, from, to) && !MoveAllowed(Move::kBlock, from, to)) {
    return Status::Invalid(fmt::format("dependencies cannot move a job from {} to {}",
                                       StateName(from), StateName(to)));
  }
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  Result<int64_t> changed = db_.Run(
      "UPDATE jobs SET state = ?3, reason = ?4, "
      "queued_at = CASE WHEN ?3 = 'queued' THEN ?5 ELSE queued_at END "
      "WHERE id = ?1 AND state = ?2",
      id, sqlite::StateText(from), sqlite::StateText(to), reason, now);
  TRAINQ_RETURN_IF_ERROR(CheckCas(changed, id, std::string(StateName(from))));
  return txn->Commit();
}

Status SqliteStore::UpdateJob(JobId id, const JobSpec& spec, UnixMs not_before,
                              const std::string& reason, bool running) {
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  Result<Query> update = db_.Prepare(sqlite::UpdateJobSql(running));
  if (!update.ok()) return update.status();
  TRAINQ_RETURN_IF_ERROR(sqlite::BindUpdate(*update, id, spec, not_before, reason, running));
  TRAINQ_RETURN_IF_ERROR(update->Run());
  TRAINQ_RETURN_IF_ERROR(CheckCas(Result<int64_t>(db_.Changes()), id,
                                  running ? "starting or running" : "queued or blocked"));
  return txn->Commit();
}

Status SqliteStore::SetReasons(std::span<const std::pair<JobId, std::string>> reasons) {
  if (reasons.empty()) return Status::Ok();
  Result<Transaction> txn = BeginWrite();
  if (!txn.ok()) return txn.status();
  for (const auto& [id, reason] : reasons) {
    Result<int64_t> updated = db_.Run(
        "UPDATE jobs SET reason = ?2 WHERE id = ?1 AND state IN ('queued', 'blocked')", id, reason);
    if (!updated.ok()) return updated.status();
  }
  return txn->Commit();
}

}  // namespace trainq
