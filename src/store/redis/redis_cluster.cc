// The cluster half of the Redis store: nodes, the leader lease, lost nodes, cancels made
// on another node, events.
#include <fmt/format.h>

#include "src/store/redis/records.h"
#include "src/store/redis/redis_store.h"
#include "src/store/redis/scripts.h"

namespace trainq::redis {

namespace {

std::string Num(int64_t v) { return std::to_string(v); }

Status CheckNodeName(const std::string& name) {
  if (name.empty() || name.size() > 64 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
          std::string::npos) {
    return Status::Invalid("node_name: expected 1 to 64 letters, digits, '.', '_' or '-', got '" +
                           name + "'");
  }
  return Status::Ok();
}

int64_t IntOf(const redisReply* r) {
  if (r->type == REDIS_REPLY_INTEGER) return r->integer;
  return std::atoll(std::string(Text(r)).c_str());
}

}  // namespace

Result<UnixMs> RedisStore::Heartbeat(const NodeRecord& n) {
  TRAINQ_RETURN_IF_ERROR(CheckNodeName(n.name));
  Result<Reply> r =
      Run(HeartbeatScript(), {n.name, n.address, n.api_url, n.runs_dir, Num(n.master_port_first),
                              Num(n.master_port_last), n.info, n.version});
  if (!r.ok()) return r.status();
  return IntOf((*r)->element[1]);
}

Result<std::vector<NodeRecord>> RedisStore::Nodes() {
  Result<Reply> names = Command({"SMEMBERS", Key("nodes")});
  if (!names.ok()) return names.status();
  std::vector<std::string> sorted;
  for (size_t i = 0; i < (*names)->elements; ++i) sorted.emplace_back(Text((*names)->element[i]));
  std::sort(sorted.begin(), sorted.end());
  std::vector<NodeRecord> nodes;
  for (const std::string& name : sorted) {
    Result<Reply> h = Command({"HGETALL", Key("node:" + name)});
    if (!h.ok()) return h.status();
    if ((*h)->elements == 0) continue;  // removed meanwhile
    Result<NodeRecord> node = ReadNode(h->get());
    if (!node.ok()) return node.status();
    nodes.push_back(std::move(*node));
  }
  return nodes;
}

Status RedisStore::SetDrained(const std::string& node, bool drained) {
  return RunStatus(SetDrainedScript(), {node, drained ? "1" : "0"});
}

Status RedisStore::RemoveNode(const std::string& node) {
  return RunStatus(RemoveNodeScript(), {node});
}

Result<LeaderLease> RedisStore::AcquireLeader(const std::string& node, int64_t lease_ms) {
  TRAINQ_RETURN_IF_ERROR(CheckNodeName(node));
  if (lease_ms <= 0) return Status::Invalid("leader_lease: expected a positive duration");
  Result<Reply> r = Run(AcquireLeaderScript(), {node, Num(lease_ms)});
  if (!r.ok()) return r.status();
  const redisReply* a = r->get();
  LeaderLease lease;
  lease.leader = std::string(Text(a->element[1]));
  lease.epoch = IntOf(a->element[2]);
  lease.mine = IntOf(a->element[3]) == 1;
  lease.now = IntOf(a->element[4]);
  return lease;
}

Status RedisStore::ResignLeader(const std::string& node, int64_t epoch) {
  return RunStatus(ResignLeaderScript(), {node, Num(epoch)});
}

void RedisStore::SetLeaderFence(const std::string& node, int64_t epoch) {
  fence_ = epoch == 0 ? std::string() : fmt::format("{} {}", node, epoch);
}

Result<std::vector<JobId>> RedisStore::MarkNodeLost(const std::string& node, UnixMs lapsed_before,
                                                    int max_node_failures, int64_t wait_ms) {
  Result<Reply> r = Run(MarkNodeLostScript(),
                        {fence_, node, Num(lapsed_before), Num(max_node_failures), Num(wait_ms)});
  if (!r.ok()) return r.status();
  std::vector<JobId> ids;
  const redisReply* ended = (*r)->element[1];
  for (size_t i = 0; i < ended->elements; ++i) ids.push_back(IntOf(ended->element[i]));
  return ids;
}

Result<std::vector<Job>> RedisStore::ActiveOn(const std::string& node) {
  Result<Reply> ids = Command({"ZRANGE", Key("active:" + node), "0", "-1"});
  if (!ids.ok()) return ids.status();
  std::vector<std::string> list;
  for (size_t i = 0; i < (*ids)->elements; ++i) list.emplace_back(Text((*ids)->element[i]));
  if (list.empty()) return std::vector<Job>{};
  Result<std::vector<Job>> jobs = ReadJobs(list, true);
  if (!jobs.ok()) return jobs;
  std::erase_if(*jobs, [&](const Job& job) {
    return !IsActive(job.state) || !job.current() || !job.current()->PartOn(node);
  });
  return jobs;
}

Status RedisStore::RequestCancel(JobId id, int attempt, const std::string& by) {
  return RunStatus(RequestCancelScript(), {Num(id), Num(attempt), "", by});
}

Status RedisStore::RequestStop(JobId id, int attempt, const std::string& stop) {
  return RunStatus(RequestCancelScript(), {Num(id), Num(attempt), stop});
}

Result<std::string> RedisStore::StopRequested(JobId id, int attempt) {
  Result<Reply> r = Command({"HGET", Key(fmt::format("att:{}:{}", id, attempt)), "stop"});
  if (!r.ok()) return r.status();
  return std::string(Text(r->get()));
}

Result<std::optional<std::string>> RedisStore::CancelRequested(JobId id, int attempt) {
  Result<Reply> r = Command({"HGET", Key(fmt::format("att:{}:{}", id, attempt)), "cancel"});
  if (!r.ok()) return r.status();
  if (r->get()->type == REDIS_REPLY_NIL) return std::optional<std::string>();
  // "1": asked by a daemon that did not say who.
  std::string by(Text(r->get()));
  return std::optional<std::string>(by == "1" ? "" : by);
}

Status RedisStore::Publish(const std::string& event) {
  return Command({"PUBLISH", Key("events"), event}).status();
}

Result<std::unique_ptr<ClusterStore>> OpenRedis(const RedisTarget& target) {
  auto store = std::make_unique<RedisStore>(target);
  TRAINQ_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<ClusterStore>(std::move(store));
}

}  // namespace trainq::redis

namespace trainq {

Result<std::unique_ptr<ClusterStore>> OpenRedisStore(const RedisTarget& target) {
  return redis::OpenRedis(target);
}

}  // namespace trainq
