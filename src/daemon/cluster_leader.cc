// A cluster's leadership (cluster_leader.h, docs/cluster.md).
#include "src/daemon/cluster_leader.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/spec.h"
#include "src/daemon/node_view.h"
#include "src/os/run_dir.h"

namespace trainq {

using json = nlohmann::json;

std::string NodeStateName(const NodeRecord& r) {
  if (r.lost) return "lost";
  return r.drained ? "drained" : "up";
}

namespace {

// An active attempt's part on one node (a gang has one per node), with its rank.
struct OnNode {
  const Job* job;
  AttemptPart part;
  int rank;
};

// A node as the placement policy sees it: its record's last report (NodeInfo) and, as
// holdings, the store's active attempts there.
NodeState NodeFromRecord(const NodeRecord& r, const std::vector<OnNode>& here) {
  json info = json::parse(r.info, nullptr, false);
  NodeState node;
  node.name = r.name;
  // A lost or drained node gets nothing new; what it holds still counts.
  node.accepts_new = !r.lost && !r.drained;
  node.cpu_slots = info.is_object() ? info.value("cpu_slots", 0) : 0;
  if (info.is_object()) {
    node.features = StringsOf(info, "features");
    node.images = StringsOf(info, "images");
    node.staged = StringsOf(info, "staged");
  }
  UnixMs sampled_at = 0;
  std::string sample_error;
  if (info.is_object() && info.contains("sample_error") && info["sample_error"].is_string() &&
      info.contains("sampled_at") && info["sampled_at"].is_number_integer()) {
    sampled_at = info["sampled_at"].get<UnixMs>();
    sample_error = info["sample_error"].get<std::string>();
  }
  std::map<int, const json*> gpu_info;
  if (info.is_object() && info.contains("gpus") && info["gpus"].is_array()) {
    for (const json& g : info["gpus"]) {
      GpuState gpu;
      gpu.index = g.value("index", 0);
      gpu.uuid = g.value("uuid", "");
      gpu.total_bytes = g.value("total", uint64_t{0});
      gpu.free_bytes = g.value("free", uint64_t{0});
      gpu.foreign_processes = g.value("foreign", 0);
      gpu.model = TextOf(g, "name");
      gpu.label = TextOf(g, "label");
      gpu.sampled_at = sampled_at;
      gpu.sample_error = sample_error;
      node.gpus.push_back(std::move(gpu));
      gpu_info[node.gpus.back().index] = &g;
    }
    if (info.contains("topology") && info["topology"].is_array()) {
      node.topology = info["topology"].get<std::vector<std::vector<int>>>();
    }
  }
  for (const OnNode& on : here) {
    const Job* job = on.job;
    const Attempt& a = *job->current();
    const std::vector<int>& gpus = on.part.gpu_indices;
    node.cpu_slots_used += a.cpus;
    UserUse& use = node.use_by_user[job->spec.user];
    use.gpus += static_cast<int>(gpus.size());
    if (on.rank == 0) ++use.jobs;  // a gang is one job, counted on its master node
    for (GpuState& gpu : node.gpus) {
      if (std::find(gpus.begin(), gpus.end(), gpu.index) == gpus.end()) continue;
      Holding h;
      h.job = job->id;
      h.reserved_bytes = a.reserved_bytes;
      h.exclusive = job->spec.exclusive();
      h.started_at = a.started_at;
      const json* g = gpu_info[gpu.index];
      // What the node saw its processes use; an attempt it has not reported yet (just
      // placed) counts its reservation in full.
      if (g != nullptr && g->value("known", false) && (*g)["used"].is_object()) {
        const json& used = (*g)["used"];
        auto it = used.find(std::to_string(job->id));
        if (it != used.end()) h.used_now = it->get<uint64_t>();
      }
      gpu.holdings.push_back(h);
    }
  }
  return node;
}

}  // namespace

void ClusterLeader::LeadOrFollow() {
  Result<LeaderLease> lease = store_.AcquireLeader(p_.node, config_.leader_lease_ms);
  if (!lease.ok()) {
    // Unreachable: a leader that cannot renew stops scheduling; its fenced writes would be
    // refused anyway once the lease lapses.
    if (leader_) spdlog::warn("leader lease not renewed: {}", lease.status().message());
    leader_ = false;
    majority_.Lost();
    records_.clear();
    return;
  }
  ObserveNodes(lease->now);
  bool was = leader_;
  lease_ = *lease;
  leader_ = lease->mine;
  // A lease that lapsed and was taken again (a slow round, a store restart, or GET
  // /v1/nodes taking it between rounds) has a new epoch: writes fenced with the old one
  // would all be refused while this node goes on believing it leads.
  if (leader_ && (!was || lease->epoch != fenced_epoch_)) {
    spdlog::info("leader of the cluster (epoch {})", lease->epoch);
    store_.SetLeaderFence(p_.node, lease->epoch);
    fenced_epoch_ = lease->epoch;
    p_.scheduler->Reload();
    p_.scheduler->RequestSchedule();
  } else if (!leader_ && was) {
    spdlog::warn("no longer the leader: {} holds the lease (epoch {})", lease->leader,
                 lease->epoch);
  }
  if (leader_) CheckLostNodes(lease->now);
}

void ClusterLeader::ObserveNodes(UnixMs store_now) {
  Result<std::vector<NodeRecord>> nodes = store_.Nodes();
  if (!nodes.ok()) {
    majority_.Lost();
    records_.clear();
    return;
  }
  records_ = std::move(*nodes);
  int up = 0, beating = 0;
  for (const NodeRecord& n : records_) {
    if (n.lost) continue;
    ++up;
    if (store_now - n.heartbeat_at <= times_.alive_ms) ++beating;
  }
  majority_.Observe(store_now, beating, up);
}

void ClusterLeader::CheckLostNodes(UnixMs store_now) {
  bool lapsed = std::any_of(records_.begin(), records_.end(), [&](const NodeRecord& n) {
    return !n.lost && store_now - n.heartbeat_at > config_.node_timeout_ms;
  });
  if (lapsed && !majority_.MayJudge(store_now)) {
    if (!holding_back_) {
      spdlog::warn(
          "nodes whose heartbeat lapsed are not judged lost: fewer than half of the "
          "nodes have heartbeat for node_timeout without a break (the store was away, "
          "or most nodes are); their jobs run on");
    }
    holding_back_ = true;
    return;
  }
  holding_back_ = false;
  for (const NodeRecord& n : records_) {
    if (n.lost || store_now - n.heartbeat_at <= config_.node_timeout_ms) continue;
    Result<std::vector<JobId>> ended =
        store_.MarkNodeLost(n.name, store_now - config_.node_timeout_ms, config_.max_node_failures,
                            config_.lost_node_wait_ms);
    if (!ended.ok()) {
      spdlog::warn("node {}: marking it lost: {}", n.name, ended.status().message());
      continue;
    }
    spdlog::warn("node {} lost: no heartbeat for {} ms; its attempts ended: [{}]", n.name,
                 store_now - n.heartbeat_at, fmt::join(*ended, ","));
    for (JobId id : *ended) {
      p_.deps->ResolveDependents(id);
      p_.job_ended(id);
    }
    p_.scheduler->MarkStale();
    p_.scheduler->RequestSchedule();
  }
}

std::vector<NodeState> ClusterLeader::PassNodes() {
  if (Status st = RefreshView(); !st.ok()) {
    spdlog::warn("cluster view: {}", st.message());
    view_ = {};
  }
  return view_.nodes;
}

RunningUses ClusterLeader::Running() {
  RunningUses running;
  for (const Job& job : view_.active) {
    const Attempt* a = job.current();
    if (a == nullptr) continue;
    running[{job.id, a->n}] = {job.spec.user, static_cast<int>(a->gpu_indices.size()),
                               a->started_at};
  }
  return running;
}

Status ClusterLeader::RefreshView() {
  Result<std::vector<NodeRecord>> records = store_.Nodes();
  if (!records.ok()) return records.status();
  ListQuery query;
  query.states = {JobState::kStarting, JobState::kRunning};
  query.with_attempts = true;
  query.with_env = false;
  Result<std::vector<Job>> active = store_.List(query);
  if (!active.ok()) return active.status();
  View view;
  view.active = std::move(*active);
  std::map<std::string, std::vector<OnNode>> on_node;
  for (const Job& job : view.active) {
    const Attempt* a = job.current();
    if (a == nullptr) continue;
    if (a->master_port > 0) view.ports[a->node].insert(a->master_port);  // node 0's port
    if (a->parts.empty()) {
      on_node[a->node].push_back({&job, *a->PartOn(a->node), 0});
      continue;
    }
    for (size_t r = 0; r < a->parts.size(); ++r) {
      on_node[a->parts[r].node].push_back({&job, a->parts[r], static_cast<int>(r)});
    }
  }
  for (NodeRecord& r : *records) {
    view.nodes.push_back(NodeFromRecord(r, on_node[r.name]));
    view.records.emplace(r.name, std::move(r));
  }
  view_ = std::move(view);
  return Status::Ok();
}

// A MASTER_PORT of `node`'s range that no active attempt there holds, now held in the view;
// kUnavailable (and the job's reason set) when every one is.
Result<int> ClusterLeader::TakePortOn(JobId job, const NodeRecord& node) {
  std::set<int>& held = view_.ports[node.name];
  for (int port = node.master_port_first; port <= node.master_port_last; ++port) {
    if (held.insert(port).second) return port;
  }
  std::pair<JobId, std::string> reason{
      job, fmt::format("waiting for a free MASTER_PORT on node {}: all {} ports of its "
                       "master_port_range are held",
                       node.name, held.size())};
  if (Status st = store_.SetReasons(std::span(&reason, 1)); !st.ok()) {
    spdlog::warn("job {}: {}", job, st.message());
  }
  return Status::Unavailable(reason.second);
}

// A part of attempt `n` of job `job` on `want`: its GPUs' uuids and a run dir on that node.
Result<AttemptPart> ClusterLeader::PartOn(JobId job, int n, const NodeGpus& want) const {
  auto on = view_.records.find(want.node);
  if (on == view_.records.end()) return Status::NotFound("node " + want.node + " is not known");
  AttemptPart part;
  part.node = want.node;
  part.gpu_indices = want.gpu_indices;
  for (const NodeState& ns : view_.nodes) {
    if (ns.name != want.node) continue;
    for (int index : want.gpu_indices) {
      for (const GpuState& g : ns.gpus) {
        if (g.index == index) part.gpu_uuids.push_back(g.uuid);
      }
    }
  }
  part.run_dir = fmt::format("{}/{}/{}", on->second.runs_dir, job, n);
  part.log_path = LogPath(part.run_dir);
  return part;
}

Status ClusterLeader::AddParts(const Job& job, std::span<const NodeGpus> wanted) {
  const Attempt* a = job.current();
  if (a == nullptr || a->parts.empty()) {
    return Status::Invalid(fmt::format("job {} has no running gang to grow", job.id));
  }
  std::vector<AttemptPart> parts = a->parts;
  for (const NodeGpus& want : wanted) {
    Result<AttemptPart> part = PartOn(job.id, a->n, want);
    if (!part.ok()) return part.status();
    part->added_at = p_.clock->Now();
    TRAINQ_RETURN_IF_ERROR(store_.AddPart(job.id, a->n, parts, *part));
    spdlog::info("job {} attempt {}: part {} on node {} (GPUs [{}]) joins its rendezvous", job.id,
                 a->n, parts.size(), part->node, fmt::join(part->gpu_indices, ","));
    parts.push_back(std::move(*part));
  }
  return Status::Ok();
}

Status ClusterLeader::Place(const Job& job, const StartDecision& d) {
  auto rec = view_.records.find(d.node);
  if (rec == view_.records.end()) return Status::NotFound("node " + d.node + " is not known");
  const NodeRecord& node = rec->second;  // part 0's: the master
  int n = job.attempt + 1;
  // Every part: its node's GPUs and a run dir there.
  std::vector<AttemptPart> parts;
  std::vector<NodeGpus> wanted = d.parts;
  if (wanted.empty()) wanted.push_back({d.node, d.gpu_indices});
  for (const NodeGpus& want : wanted) {
    Result<AttemptPart> part = PartOn(job.id, n, want);
    if (!part.ok()) return part.status();
    parts.push_back(std::move(*part));
  }
  Placement p;
  p.node = parts[0].node;
  p.gpu_indices = parts[0].gpu_indices;
  p.gpu_uuids = parts[0].gpu_uuids;
  p.reserved_bytes = d.reserved_bytes;
  p.cpus = d.cpus;
  p.run_dir = parts[0].run_dir;
  p.log_path = parts[0].log_path;
  // An elastic gang keeps its parts from the first, one node included: it may grow (a batch
  // script's range does not: its nodes are fixed once it starts).
  if (parts.size() > 1 || (job.spec.max_nodes > 0 && !job.spec.slurm_env)) {
    p.parts = std::move(parts);
    p.master_addr = node.address;
  }
  if (NeedsMasterPort(job.spec)) {
    Result<int> port = TakePortOn(job.id, node);
    if (!port.ok()) return port.status();
    p.master_port = *port;
  }
  TRAINQ_RETURN_IF_ERROR(store_.StartAttempt(job.id, job.attempt, p, p_.clock->Now()));
  if (p.parts.empty()) {
    spdlog::info("job {} attempt {} placed on node {} (GPUs [{}])", job.id, n, d.node,
                 fmt::join(d.gpu_indices, ","));
  } else {
    std::vector<std::string> where;
    for (const AttemptPart& part : p.parts) {
      where.push_back(fmt::format("{} [{}]", part.node, fmt::join(part.gpu_indices, ",")));
    }
    spdlog::info("job {} attempt {} placed on {} nodes: {}", job.id, n, p.parts.size(),
                 fmt::join(where, ", "));
  }
  p_.deps->ResolveDependents(job.id);
  return Status::Ok();
}

// GET /v1/nodes: every node of the cluster, its GPUs with the memory a job could use there
// now, and its attempts.
Result<json> ClusterLeader::Nodes() {
  UnixMs now = p_.clock->Now();
  PolicyConfig policy = p_.scheduler->Policy();
  json nodes = json::array();
  TRAINQ_RETURN_IF_ERROR(RefreshView());
  Result<LeaderLease> lease = store_.AcquireLeader(p_.node, config_.leader_lease_ms);
  if (lease.ok()) {
    // The call may have taken or renewed the lease: the timer's next round sees it too.
    lease_ = *lease;
  }
  UnixMs store_now = lease.ok() ? lease->now : now;
  std::map<std::string, std::vector<JobId>> jobs_on;
  for (const Job& job : view_.active) {
    if (const Attempt* a = job.current()) jobs_on[a->node].push_back(job.id);
  }
  for (const auto& [name, r] : view_.records) {
    json info = json::parse(r.info, nullptr, false);
    NodeState shown;
    for (const NodeState& ns : view_.nodes) {
      if (ns.name == name) shown = ns;
    }
    nodes.push_back({{"name", name},
                     {"address", r.address},
                     {"state", NodeStateName(r)},
                     {"leader", lease.ok() && lease->leader == name},
                     {"cpu_slots", shown.cpu_slots},
                     {"cpu_slots_used", shown.cpu_slots_used},
                     {"features", shown.features},
                     {"images", shown.images},
                     {"gpus", GpusJson(shown, info, policy, now)},
                     {"jobs", jobs_on[name]},
                     {"heartbeat_at", FormatTime(r.heartbeat_at)},
                     {"heartbeat_age_ms", std::max<int64_t>(0, store_now - r.heartbeat_at)},
                     {"joined_at", FormatTime(r.joined_at)},
                     {"api_url", r.api_url},
                     {"version", r.version}});
  }
  return json{{"cluster", true},
              {"leader", lease.ok() ? json(lease->leader) : json(nullptr)},
              {"epoch", lease.ok() ? lease->epoch : 0},
              {"nodes", std::move(nodes)}};
}

void ClusterLeader::Resign() {
  if (leader_) (void)store_.ResignLeader(p_.node, lease_.epoch);
}

Status ClusterLeader::Preempt(const Job& victim, const ShimControl& control) {
  return store_.RequestStop(
      victim.id, victim.attempt,
      nlohmann::json{
          {"kind", control.stop}, {"reason", control.reason}, {"stop_in_ms", control.stop_in_ms}}
          .dump());
}

}  // namespace trainq
