// The Store: where jobs and attempts live (docs/architecture.md). Shaped so that a Redis
// backend can implement it without changing callers: ids come from the store, every
// transition is a compare-and-set on (state, attempt), leadership is a lease.
// Thread: a Store is used from one thread at a time. Every call is bounded (busy
// timeouts) and reports failure as a Status; none throws.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "src/core/acct.h"
#include "src/core/auth.h"
#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

struct ListQuery {
  std::vector<JobState> states{};  // empty: every state
  JobId after_id = 0;              // paging: only ids greater than this
  int limit = 0;                   // 0: no limit
  std::string user{};              // "": every user's jobs
  JobId group = 0;                 // 0: every job; else only this group's
  bool with_attempts = false;      // fill Job::attempts
  bool with_env = true;            // false: JobSpec::env left empty (listings, the scheduler)
  // Only jobs with at least one attempt (the fair share's ledger: a million jobs that never
  // started have nothing to add to it). Needs with_attempts.
  bool only_started = false;
  // Only what the scheduler places by: id, state, request (gpus, memory, cpus, nodes,
  // group), user, priority, times, reason and attempt count; a store may leave the rest
  // (command, cwd, environment, dependencies, record, notifications) empty, and SQLite does:
  // it reads a million queued jobs at a restart.
  bool placement_only = false;
};

// Where a placed attempt runs; written by StartAttempt.
struct Placement {
  std::string node;
  std::vector<int> gpu_indices;
  std::vector<std::string> gpu_uuids;
  uint64_t reserved_bytes = 0;  // per GPU
  int cpus = 0;
  std::string run_dir;
  std::string log_path;
  int master_port = 0;  // multi-GPU attempts: the MASTER_PORT they hold; 0: none
  // A gang (cluster stores only): every node's part in rank order, part 0 the same as the
  // fields above; empty for one node. master_addr: part 0's node_address.
  std::vector<AttemptPart> parts{};
  std::string master_addr{};
};

// How an attempt ended; written by FinishAttempt.
struct AttemptEnd {
  JobState attempt_state = JobState::kFailed;  // succeeded, failed or cancelled
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool oom = false;
  UnixMs ended_at = 0;
  std::string end_reason;
  // What becomes of the job: a done state, or kQueued to retry (with not_before).
  JobState job_state = JobState::kFailed;
  UnixMs not_before = 0;
  std::string job_reason;
  // A gang's part `part` of `parts` (cluster stores): a part that succeeded is only noted
  // until every part has; one that did not ends the whole attempt. -1: not a gang.
  int part = -1;
  int parts = 0;
  // A node that cannot run the job at all (its --cwd is missing there; cluster stores):
  // added to the job's nodes_excluded, so it is placed elsewhere. "": none.
  std::string exclude_node{};
  // The size of the log this end leaves on its node, added to the attempt's log_bytes (a
  // gang's parts each add theirs): what the user's stored bytes count of logs (Footprint).
  uint64_t log_bytes = 0;
};

// What one user keeps in the store, judged against the per-user caps
// (max_waiting_jobs_per_user, max_stored_bytes_per_user) before a submit is stored.
struct UserFootprint {
  int64_t waiting_jobs = 0;   // queued or blocked
  uint64_t stored_bytes = 0;  // the jobs' records and the logs their attempts left
};

// An API token as stored: never the token itself, only its SHA-256 (docs/operations.md,
// "Tokens"). A revoked token is kept (listed as revoked); its name may be used again.
struct TokenRecord {
  std::string name;  // CheckTokenName's form; unique among tokens not revoked
  std::string hash;  // SHA-256 of the token, 64 lowercase hex digits
  Role role = Role::kRead;
  std::string user;  // whose jobs it submits and reads
  UnixMs created_at = 0;
  UnixMs expires_at = 0;  // 0: never
  UnixMs revoked_at = 0;  // 0: not revoked
  std::string created_by;
  // In a cluster: the cluster key's HMAC of the fields above but revoked_at (ClusterKey::
  // SignToken); a token whose signature does not hold is refused. "" in a single store.
  std::string signature;
};

// What every backend checks before it records an end: the attempt ends in a done state, and
// the job goes where an attempt's end may take it. kInvalid naming the state otherwise.
Status CheckAttemptEnd(const AttemptEnd& end);
// Whether `hash` has a stored token's form: 64 lowercase hex digits (SHA-256).
bool IsTokenDigest(const std::string& hash);
// An environment encoded this large or larger is stored once per submit and shared by the
// submit's jobs that carry it (a batch, an array); smaller ones stay in each job's record.
inline constexpr size_t kSharedEnvBytes = 1024;
// What a new job's record takes in a store, for Footprint: its variable fields, plus a
// fixed allowance for the rest, plus `env_bytes` (0 when its environment is shared with a
// job stored before it).
uint64_t RecordBytes(const JobSpec& spec, size_t env_bytes);

class Store {
 public:
  virtual ~Store() = default;

  // Stores all specs in one durable transaction (fsync'd before return) with fresh ids, in
  // order; ids are never reused, even after deletion or restart. Specs whose group is
  // negative (kNewGroup) are stored in a new group named by the first id stored with that
  // same negative value in this call. A job without
  // dependencies is stored queued. One with dependencies (spec.after, spec.after_any) is
  // stored as DecideDeps (src/core/deps.h) judges it from its dependencies' states in the
  // same transaction: blocked with the reason naming the open ones, queued when all are
  // satisfied, or cancelled when an --after dependency already failed. kInvalid naming the
  // field and id ("after: no job 99", prefixed "jobs[2]: " in a batch) when a dependency
  // does not exist (a job may only wait for jobs stored before it); nothing is stored then.
  virtual Result<std::vector<JobId>> Submit(std::span<const JobSpec> specs, UnixMs now) = 0;

  // The ids of the jobs `user` submitted with Idempotency-Key `key`, in order; empty when
  // none.
  virtual Result<std::vector<JobId>> IdsForSubmitKey(const std::string& user,
                                                     const std::string& key) = 0;

  // A consistent copy of the whole store at `dest` (a file the caller names), made while the
  // store stays in use; `dest` is replaced only once the copy is complete. kIo on failure.
  virtual Status Backup(const std::string& dest) = 0;

  // One job with all its attempts. kNotFound if there is no such id.
  virtual Result<Job> Get(JobId id) = 0;
  // The highest id of a stored job (0: none): a job with a higher id is newer than this call.
  virtual Result<JobId> LastId() = 0;
  virtual Result<std::vector<Job>> List(const ListQuery& query) = 0;

  // queued -> starting: creates attempt (expected_attempt + 1) with the placement.
  // kConflict if the job is not queued or its attempt number is not expected_attempt.
  virtual Status StartAttempt(JobId id, int expected_attempt, const Placement& placement,
                              UnixMs now) = 0;
  // starting -> running for the current attempt `attempt`: records the shim's pid.
  virtual Status MarkRunning(JobId id, int attempt, int64_t pid, uint64_t pid_start_ticks,
                             UnixMs now) = 0;
  // starting|running -> end.job_state for attempt `attempt` (which must be current);
  // the attempt takes end.attempt_state. kConflict otherwise. Queued again, the job's
  // queued_at becomes end.ended_at.
  virtual Status FinishAttempt(JobId id, int attempt, const AttemptEnd& end) = 0;
  // Raises the attempt's recorded peak GPU memory if `bytes` is higher.
  virtual Status RecordPeak(JobId id, int attempt, uint64_t bytes) = 0;
  // Adds `add` to the attempt's usage (Attempt::usage); kNotFound without that attempt.
  virtual Status AddUsage(JobId id, int attempt, const AttemptUsage& add) = 0;

  // queued|blocked -> cancelled. kConflict if the job is in another state.
  virtual Status CancelWaiting(JobId id, const std::string& reason) = 0;
  // CancelWaiting of many jobs, each with its reason: each job's Status in its place
  // (kConflict, kNotFound as CancelWaiting's). A request that cancels thousands of jobs
  // should pay for one durable transaction, not one each: a store that can overrides this
  // (SQLite: one transaction; an error of the store itself then changes nothing). The
  // default calls CancelWaiting for each in turn.
  virtual Result<std::vector<Status>> CancelWaitingMany(
      std::span<const std::pair<JobId, std::string>> cancels) {
    std::vector<Status> out;
    for (const auto& [id, reason] : cancels) out.push_back(CancelWaiting(id, reason));
    return out;
  }
  // succeeded|failed|cancelled -> queued (the next attempt gets a new number), queued_at
  // `now`.
  virtual Status Requeue(JobId id, const std::string& reason, UnixMs now) = 0;
  // The blocked jobs waiting on `id` (listing it in after or after_any), in id order,
  // without attempts. Empty when none.
  virtual Result<std::vector<Job>> Dependents(JobId id) = 0;
  // `trainq clean`: forgets the jobs among `ids` that ended (succeeded, failed, cancelled),
  // their attempts with them, in one durable transaction; others are left as they are. The
  // ids forgotten, in the order given; an id is never given to a new job again. A store
  // that cannot forget says so (kInvalid) and forgets nothing.
  // `summaries`: empty, or one accounting row per id (AcctOf), kept for each job forgotten
  // so `trainq acct` still counts it (AcctRecords).
  virtual Result<std::vector<JobId>> Forget(std::span<const JobId> ids,
                                            std::span<const AcctRow> summaries) = 0;
  // The accounting rows Forget kept: `user`'s ("" every user's) whose job ended at `since` or
  // later, in id order.
  virtual Result<std::vector<AcctRow>> AcctRecords(const std::string& user, UnixMs since) = 0;
  // How many jobs `user` has waiting and how many bytes their kept jobs take: each job's
  // record (an environment shared by several jobs counts once, on the job that stored it)
  // plus the log_bytes of its attempts' ends.
  virtual Result<UserFootprint> Footprint(const std::string& user) = 0;
  // Resolves a job's dependencies: blocked -> queued or cancelled, or queued -> blocked
  // (a retried job whose dependencies are open again), with `reason`. A compare-and-set
  // on the state `from`: kConflict if the job is in another state (someone resolved it
  // first), kInvalid for any other pair of states. A job moved to queued is queued at `now`.
  virtual Status MoveWaiting(JobId id, JobState from, JobState to, const std::string& reason,
                             UnixMs now) = 0;
  // `trainq update`/`hold`/`release`: a waiting job (queued|blocked; `running` false) takes
  // `spec`'s name, gpus, mem_bytes, mem_percent, cpus, priority, time_limit_ms, after and
  // after_any, and `not_before` (kHeldNotBefore: held) and `reason`; a starting|running job
  // (`running` true) its name and priority only. kConflict if the job is in another state.
  // The job stays in its state: a caller that changed its dependencies judges them again.
  virtual Status UpdateJob(JobId id, const JobSpec& spec, UnixMs not_before,
                           const std::string& reason, bool running) = 0;
  // Reasons the scheduler wrote for waiting jobs; ids no longer waiting are skipped.
  virtual Status SetReasons(std::span<const std::pair<JobId, std::string>> reasons) = 0;

  // Tokens. Writes are durable before they return, like a submit. AddToken: kInvalid for a
  // name not of CheckTokenName's form or a hash that is not 64 hex digits; kConflict naming
  // it when a token of that name exists and is not revoked.
  virtual Status AddToken(const TokenRecord& token) = 0;
  // Every token, revoked ones included, oldest first.
  virtual Result<std::vector<TokenRecord>> ListTokens() = 0;
  // Marks the token named `name` revoked at `now`; kNotFound naming it when no token of that
  // name is live.
  virtual Status RevokeToken(const std::string& name, UnixMs now) = 0;
  // The token whose hash is `hash`, revoked or expired or not (the caller judges); nullopt
  // when none.
  virtual Result<std::optional<TokenRecord>> FindTokenByHash(const std::string& hash) = 0;
};

// Opens (creating if absent) the SQLite store at `path`: WAL, schema migrations.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path);
// Whether the SQLite database at `path` (if there is one) is whole: PRAGMA quick_check on a
// read-only connection, changing nothing. Ok when there is no file; kIo naming the file and
// the way back when it is damaged. For `trainqd --check-config`, before a daemon starts.
Status CheckSqliteFile(const std::string& path);

}  // namespace trainq
