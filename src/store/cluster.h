// What a store shared by several nodes adds to Store (docs/cluster.md): the nodes and their
// heartbeats, the leader lease with its fencing epoch, the events that wake the leader and
// the agents, and the writes only a cluster makes (a lost node's attempts, a cancel that
// another node carries out). Redis implements it (src/store/redis/); the embedded SQLite
// store, one machine, does not.
//
// Time: heartbeats, leases and "lost" are judged by the store's clock (Redis TIME), never
// by a node's, so nodes whose clocks disagree still agree on who is alive.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/store/store.h"

namespace trainq {

// One node as it registered and last heartbeat.
struct NodeRecord {
  std::string name;      // node_name: letters, digits, '.', '_', '-'
  std::string address;   // node_address: what peers and MASTER_ADDR use
  std::string api_url;   // where peers reach its API ("https://10.0.0.7:7070"); "" none
  std::string runs_dir;  // where its attempts' run dirs are made
  int master_port_first = 0;
  int master_port_last = 0;
  // The node's own view, as the daemon encoded it (JSON: GPUs, CPU slots, per-attempt
  // GPU use); opaque to the store.
  std::string info;
  std::string version;      // trainq version of its daemon
  bool drained = false;     // an admin drained it: nothing new is placed there
  bool lost = false;        // the leader found its heartbeat lapsed; cleared when it beats again
  UnixMs joined_at = 0;     // store clock, first heartbeat since it was last lost or new
  UnixMs heartbeat_at = 0;  // store clock, the latest heartbeat
};

struct LeaderLease {
  std::string leader;  // the node holding the lease; "" none
  int64_t epoch = 0;   // the fencing epoch of the holder's term
  bool mine = false;   // whether the caller holds it (just taken or renewed)
  UnixMs now = 0;      // the store's clock at the call
};

// Events: a short text published on the cluster's channel by the store's own writes, so
// a write and its event cannot part. Kinds (first word): "submit", "placed NODE",
// "end JOB", "cancel NODE JOB", "node NAME", "requeue JOB", "leader NAME".
class EventSubscription {
 public:
  virtual ~EventSubscription() = default;
};

class ClusterStore : public Store {
 public:
  // Registers or updates `node` (everything but drained, lost, joined_at and heartbeat_at,
  // which the store keeps) and stamps heartbeat_at with the store's clock. A node marked
  // lost beats again: lost is cleared and joined_at set; its old attempts stay ended.
  // Publishes "node NAME" when info changed or the node (re)joined. Returns the store's
  // clock. kInvalid for a bad name.
  virtual Result<UnixMs> Heartbeat(const NodeRecord& node) = 0;
  // Every node ever registered, by name.
  virtual Result<std::vector<NodeRecord>> Nodes() = 0;
  // kNotFound naming it when no node has that name.
  virtual Status SetDrained(const std::string& node, bool drained) = 0;
  // Forgets a node that is lost and runs nothing; kConflict when it is up or runs attempts.
  virtual Status RemoveNode(const std::string& node) = 0;

  // Takes the leader lease for `node` when nobody holds it (a new epoch from INCR), or
  // renews it when `node` holds it (same epoch); otherwise reports the holder. The lease
  // lapses `lease_ms` after the last take or renewal.
  virtual Result<LeaderLease> AcquireLeader(const std::string& node, int64_t lease_ms) = 0;
  // Gives the lease up at once (a daemon stopping), if `node` holds it in `epoch`.
  virtual Status ResignLeader(const std::string& node, int64_t epoch) = 0;
  // From now on StartAttempt, SetReasons and MarkNodeLost made through this
  // object succeed only while the lease is held by `node` in `epoch`; otherwise they are
  // kConflict with "not the leader: ..." and change nothing. epoch 0: unfenced (tests).
  virtual void SetLeaderFence(const std::string& node, int64_t epoch) = 0;

  // The leader's judgement of a node whose heartbeat is older than `lapsed_before` (store
  // clock): marks it lost and ends each of its active attempts with attempt state failed,
  // end reason "node NAME lost". The job is queued again (queued_at = the store's clock,
  // reason "node NAME lost; queued again (node failure K of MAX)") while its count of node
  // failures is at most `max_node_failures`, else failed ("node NAME lost; K node failures,
  // max_node_failures = MAX"). Node failures do not count as OOM retries. Returns the ids
  // of the jobs it ended; none (and no change) when the node beat since. Leader-fenced.
  // A job queued again this way waits `wait_ms` (not_before) with its attempt marked lost:
  // until then, an end the node reports for that attempt (FinishAttempt, the node was only
  // frozen and its job ended meanwhile) is taken as the attempt's real end, and the job
  // goes where that end takes it instead of running again.
  virtual Result<std::vector<JobId>> MarkNodeLost(const std::string& node, UnixMs lapsed_before,
                                                  int max_node_failures, int64_t wait_ms = 0) = 0;

  // The jobs with an active (starting or running) attempt placed on `node` (a gang's part
  // there included), with attempts:
  // what that node's agent must run or watch.
  virtual Result<std::vector<Job>> ActiveOn(const std::string& node) = 0;

  // Asks the node running attempt `attempt` of job `id` to stop it (a cancel the user `by`
  // made on another node): keeps `by` as the attempt's cancel and publishes "cancel NODE JOB" for
  // every node of its parts.
  // kConflict when the attempt is not current and active.
  virtual Status RequestCancel(JobId id, int attempt, const std::string& by) = 0;
  // Who asked to cancel that attempt ("" when not known); nullopt: no cancel was asked.
  virtual Result<std::optional<std::string>> CancelRequested(JobId id, int attempt) = 0;
  // Asks the node running that attempt to stop it with a warning (a preemption the leader
  // decided): keeps `stop` (the node's ShimControl as JSON, src/os/run_dir.h) with the attempt
  // and publishes "cancel NODE JOB", as RequestCancel does. kConflict as RequestCancel.
  virtual Status RequestStop(JobId id, int attempt, const std::string& stop) = 0;
  // The stop requested for that attempt; "" for none.
  virtual Result<std::string> StopRequested(JobId id, int attempt) = 0;
  // An elastic gang grows (docs/workflow.md, "Elastic gangs"): `added` becomes the last part
  // of attempt `attempt` of job `id`, starting or running, whose parts must still be on the
  // nodes of `before`, in order; publishes "placed NODE" for its node, whose agent starts it.
  // Leader-fenced. kConflict when the attempt is no longer current and active, or its parts
  // changed meanwhile.
  virtual Status AddPart(JobId id, int attempt, std::span<const AttemptPart> before,
                         const AttemptPart& added) = 0;

  // Subscribes to the cluster's events on a connection of its own. `on_event` runs on a
  // thread the subscription owns (post it to your loop), once per event, and once with
  // "reconnected" once subscribed, first and after each reconnect (events published before
  // may have been missed: poll).
  // Connection failures are retried with backoff and logged; never throws. The
  // subscription ends when the returned object is destroyed.
  virtual std::unique_ptr<EventSubscription> Subscribe(
      std::function<void(const std::string& event)> on_event) = 0;
  // Another handle on the same store with a connection of its own (made at its first call),
  // for another thread: a node's liveness thread heartbeats through it while the event loop
  // is busy. Thread: may be called from any thread; the handle is then that thread's.
  virtual std::unique_ptr<ClusterStore> Another() const = 0;
  // Publishes an event that no write carries ("node NAME" for a GPU change without a
  // heartbeat, say).
  virtual Status Publish(const std::string& event) = 0;
};

// One server's address: a Redis or a Sentinel.
struct RedisAddress {
  std::string host;
  int port = 0;
};

// Where a cluster's store is and how to reach it: `store = "redis://..."` in config.toml, or
// "redis+sentinel://..." for a Redis whose master Sentinel picks (docs/cluster.md, "Redis
// with failover").
struct RedisTarget {
  std::string host;  // redis://: the server; redis+sentinel://: "" (the sentinels say)
  int port = 6379;
  std::string user;      // ACL user; "" the default user
  std::string password;  // "" none; also from store_password_file
  int db = 0;
  std::string prefix = "trainq:";  // every key under it
  int timeout_ms = 2000;           // connect and each command
  // redis+sentinel://: asked in turn which server is the master named `master_name`, at
  // every (re)connect. Empty for redis://.
  std::vector<RedisAddress> sentinels;
  std::string master_name;
  // The sentinels' own password (store_sentinel_password_file), sent as AUTH USER PASSWORD
  // with `user` (AUTH PASSWORD without one); "" when the sentinels ask for none.
  std::string sentinel_password;
  // Writes that tell a user something (a submit, a start, an end, a cancel) are followed by
  // WAIT for this many replicas; fewer within wait_ms make the call kUnavailable. 0: none.
  int min_replicas_acked = 0;
  int wait_ms = 1000;  // below timeout_ms, so WAIT answers before the socket gives up
};

// Parses "redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]" and
// "redis+sentinel://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]" (sentinels'
// port 26379 by default); kInvalid naming `store` and the accepted form otherwise.
// Percent-escapes in USER and PASSWORD are decoded.
Result<RedisTarget> ParseRedisUrl(const std::string& url);

// Connects (and authenticates) to Redis (with sentinels, to the master they name, checked
// with ROLE), loads the scripts, checks the server is 7.0 or
// later and, with its AOF on, that a restart would replay the store's writes
// (src/store/redis/durability.h; kInvalid naming the fix otherwise). Logs a warning when the
// AOF is off. kUnavailable naming host:port when it cannot be reached, kUnauthenticated when
// the credentials are refused.
Result<std::unique_ptr<ClusterStore>> OpenRedisStore(const RedisTarget& target);

}  // namespace trainq
