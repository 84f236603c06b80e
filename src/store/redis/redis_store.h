// The Redis implementation of ClusterStore (docs/cluster.md, "The Redis store"): jobs and
// attempts as hashes under the target's prefix, one sorted set of ids per state, every
// write one Lua script (src/store/redis/scripts.cc) doing its compare-and-set, its writes
// and its event at once. Durability is Redis's own (appendonly, appendfsync), and with
// store_min_replicas_acked a replica's: Submit, StartAttempt, FinishAttempt and
// CancelWaiting answer Ok only once that many replicas hold the write (WAIT).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "src/store/cluster.h"
#include "src/store/redis/redis_conn.h"

namespace trainq::redis {

// Thread: one thread at a time (the Store contract); Subscribe's thread has its own
// connection.
class RedisStore final : public ClusterStore {
 public:
  explicit RedisStore(RedisTarget target) : conn_(std::move(target)) {}

  // Connects, checks the server's version and loads the scripts (OpenRedisStore).
  Status Open();

  Result<std::vector<JobId>> Submit(std::span<const JobSpec> specs, UnixMs now) override;
  Result<std::vector<JobId>> IdsForSubmitKey(const std::string& user,
                                             const std::string& key) override;
  Status Backup(const std::string& dest) override;
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
  Status Requeue(JobId id, const std::string& reason, UnixMs now) override;
  Result<std::vector<JobId>> Forget(std::span<const JobId> ids,
                                    std::span<const AcctRow> summaries) override;
  Result<std::vector<AcctRow>> AcctRecords(const std::string& user, UnixMs since) override;
  Result<UserFootprint> Footprint(const std::string& user) override;
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

  Result<UnixMs> Heartbeat(const NodeRecord& node) override;
  Result<std::vector<NodeRecord>> Nodes() override;
  Status SetDrained(const std::string& node, bool drained) override;
  Status RemoveNode(const std::string& node) override;
  Result<LeaderLease> AcquireLeader(const std::string& node, int64_t lease_ms) override;
  Status ResignLeader(const std::string& node, int64_t epoch) override;
  void SetLeaderFence(const std::string& node, int64_t epoch) override;
  Result<std::vector<JobId>> MarkNodeLost(const std::string& node, UnixMs lapsed_before,
                                          int max_node_failures, int64_t wait_ms) override;
  Result<std::vector<Job>> ActiveOn(const std::string& node) override;
  Status RequestCancel(JobId id, int attempt, const std::string& by) override;
  Result<std::optional<std::string>> CancelRequested(JobId id, int attempt) override;
  Status RequestStop(JobId id, int attempt, const std::string& stop) override;
  Status AddPart(JobId id, int attempt, std::span<const AttemptPart> before,
                 const AttemptPart& added) override;
  Result<std::string> StopRequested(JobId id, int attempt) override;
  std::unique_ptr<EventSubscription> Subscribe(
      std::function<void(const std::string& event)> on_event) override;
  Status Publish(const std::string& event) override;
  std::unique_ptr<ClusterStore> Another() const override {
    return std::make_unique<RedisStore>(conn_.target());
  }

 private:
  // Runs a script; Ok with its reply when it answered "ok", else the refusal as a Status.
  Result<Reply> Run(const LuaScript& script, std::vector<std::string> args);
  Status RunStatus(const LuaScript& script, std::vector<std::string> args) {
    return Run(script, std::move(args)).status();
  }
  Result<Reply> Command(std::vector<std::string> argv) { return conn_.Command(argv); }
  // `written`, or when it is Ok, whether enough replicas acked it (Connection's
  // WaitForReplicas): for the writes a user is told about. A kConflict is a verdict on what
  // the master holds, which may be this connection's own earlier write that no replica has
  // yet (its WAIT failed, the caller tries again): it stands only once that write is
  // replicated too, else a failover could take away what the verdict was about.
  Status Acked(Status written);
  Status CheckReplicas();
  std::string Key(std::string_view suffix) const {
    return conn_.target().prefix + std::string(suffix);
  }
  // One submit attempt: nullopt when a dependency changed under it (try again).
  Result<std::optional<std::vector<JobId>>> TrySubmit(std::span<const JobSpec> specs, UnixMs now);
  Result<std::vector<Job>> ReadJobs(std::span<const std::string> ids, bool with_attempts);

  Connection conn_;
  std::string fence_;  // "NAME EPOCH" or "" (unfenced)
};

// Jobs as the read scripts return them: an array of {job hash, {attempt hashes}} (nil for
// a missing job, skipped).
Result<std::vector<Job>> JobsFromReply(const redisReply* jobs);

Result<std::unique_ptr<ClusterStore>> OpenRedis(const RedisTarget& target);

}  // namespace trainq::redis
