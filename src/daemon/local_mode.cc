// One machine (local_mode.h), and the facts of this node both modes report.
#include "src/daemon/local_mode.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "src/core/version.h"
#include "src/daemon/node_view.h"

namespace trainq {

using json = nlohmann::json;

NodeState ThisNode(const std::string& name, int cpu_slots, const Agent& agent,
                   const GpuSampler& sampler, const NodeLabels& labels) {
  NodeState node;
  node.name = name;
  node.features = labels.features;
  node.images = labels.images;
  node.cpu_slots = cpu_slots;
  for (const auto& [id, live] : agent.live()) {
    node.cpu_slots_used += live.cpus;
    UserUse& use = node.use_by_user[live.user];
    use.gpus += static_cast<int>(live.gpu_indices.size());
    ++use.jobs;
  }
  if (!sampler.snapshot()) return node;
  for (const GpuInfo& info : sampler.snapshot()->gpus) {
    GpuState gpu;
    gpu.index = info.index;
    gpu.uuid = info.uuid;
    gpu.total_bytes = info.total_bytes;
    gpu.free_bytes = info.free_bytes;
    gpu.model = info.name;
    gpu.label = labels.gpu_label;
    if (!sampler.error().empty()) {  // facts are stale only once a sample failed
      gpu.sampled_at = sampler.sampled_at();
      gpu.sample_error = sampler.error();
    }
    std::set<int64_t> ours;
    for (const auto& [id, live] : agent.live()) {
      if (std::find(live.gpu_indices.begin(), live.gpu_indices.end(), info.index) ==
          live.gpu_indices.end()) {
        continue;
      }
      Holding h;
      h.job = id;
      h.reserved_bytes = live.reserved_bytes;
      h.exclusive = live.exclusive;
      h.started_at = live.started_at;
      if (info.processes_known) {
        auto it = live.used_by_gpu.find(info.index);
        h.used_now = it == live.used_by_gpu.end() ? 0 : it->second;
      }
      gpu.holdings.push_back(h);
    }
    for (const GpuProcess& p : info.processes) {
      if (!agent.OwnsGpuProcess(p.pid)) ++gpu.foreign_processes;
    }
    node.gpus.push_back(std::move(gpu));
  }
  node.topology =
      sampler.snapshot()->topology;  // by position, as node.gpus: both in snapshot order
  return node;
}

NodeOffer ThisOffer(const std::string& name, const GpuSampler& sampler, const NodeLabels& labels) {
  NodeOffer offer{name, {}, labels.features};
  if (sampler.snapshot()) {
    for (const GpuInfo& info : sampler.snapshot()->gpus) {
      offer.gpus.emplace_back(info.name, labels.gpu_label);
    }
  }
  return offer;
}

std::string NodeInfo(int cpu_slots, const Agent& agent, const GpuSampler& sampler,
                     const NodeLabels& labels) {
  json gpus = json::array();
  if (sampler.snapshot()) {
    for (const GpuInfo& info : sampler.snapshot()->gpus) {
      json used = json::object();
      int foreign = 0;
      for (const auto& [id, live] : agent.live()) {
        auto it = live.used_by_gpu.find(info.index);
        if (it != live.used_by_gpu.end()) used[std::to_string(id)] = it->second;
      }
      for (const GpuProcess& p : info.processes) {
        if (!agent.OwnsGpuProcess(p.pid)) ++foreign;
      }
      gpus.push_back({{"index", info.index},
                      {"uuid", info.uuid},
                      {"name", info.name},
                      {"label", labels.gpu_label},
                      {"total", info.total_bytes},
                      {"free", info.free_bytes},
                      {"foreign", foreign},
                      {"known", info.processes_known},
                      {"used", std::move(used)}});
    }
  }
  json doc = {{"cpu_slots", cpu_slots},
              {"features", labels.features},
              {"images", labels.images},
              {"gpus", std::move(gpus)},
              // Once a sample failed, the leader must know how old these facts are: this
              // node's clock, as heartbeats are.
              {"sampled_at", sampler.error().empty() ? json(nullptr) : json(sampler.sampled_at())},
              {"sample_error", sampler.error().empty() ? json(nullptr) : json(sampler.error())},
              {"probe", sampler.Describe()},
              {"topology", sampler.snapshot() ? sampler.snapshot()->topology
                                              : std::vector<std::vector<int>>{}}};
  return doc.dump();
}

RunningUses LocalMode::Running() {
  RunningUses running;
  for (const auto& [id, live] : p_.agent->live()) {
    running[{id, live.n}] = {live.user, static_cast<int>(live.gpu_indices.size()), live.started_at};
  }
  return running;
}

Status LocalMode::CancelElsewhere(const Job& job, const std::string& by, std::string* message) {
  (void)by;
  (void)message;
  return Status::Conflict(fmt::format("job {} is not running on this node", job.id));
}

Result<HttpResponse> LocalMode::AskNode(const std::string& node, const std::string& method,
                                        const std::string& path,
                                        const std::map<std::string, std::string>& query,
                                        const std::string& body, std::string_view what) {
  (void)method, (void)path, (void)query, (void)body;
  return Status::NotFound(fmt::format(
      "node: {} is on node '{}'; this machine is node {}, the only one", what, node, p_.node));
}

// GET /v1/nodes: this node alone.
Result<json> LocalMode::Nodes() {
  UnixMs now = p_.clock->Now();
  NodeState local = Node();
  json jobs = json::array();
  for (const auto& [id, live] : p_.agent->live()) jobs.push_back(id);
  json node = {
      {"name", p_.node},
      {"address", p_.address},
      {"state", "up"},
      {"leader", true},
      {"cpu_slots", local.cpu_slots},
      {"cpu_slots_used", local.cpu_slots_used},
      {"features", local.features},
      {"gpus",
       GpusJson(local, json::parse(NodeInfo(p_.cpu_slots(), *p_.agent, *p_.sampler, p_.labels)),
                p_.scheduler->Policy(), now)},
      {"jobs", std::move(jobs)},
      {"heartbeat_at", FormatTime(now)},
      {"heartbeat_age_ms", 0},
      {"version", kVersion}};
  return json{{"cluster", false}, {"leader", p_.node}, {"nodes", json::array({node})}};
}

Status LocalMode::Drain(const std::string& name, bool drain) {
  (void)name;
  (void)drain;
  return Status::Invalid(
      "node: draining a node needs a cluster (store = \"redis://...\" in config.toml, "
      "docs/cluster.md); this daemon is a single machine");
}

Status LocalMode::RemoveNode(const std::string& name) {
  (void)name;
  return Status::Invalid(
      "node: removing a node needs a cluster (store = \"redis://...\" in config.toml, "
      "docs/cluster.md); this daemon is a single machine");
}

Result<json> LocalMode::StoreSeen() {
  return Status::NotFound(
      "cluster: this daemon is a single machine; its store is its own (docs/cluster.md)");
}

namespace {

class NoPeers final : public Shipping {
 public:
  Result<std::string> ServeManifest(const Job&, size_t) override { return Refused(); }
  void ServeChunks(const Job&, size_t, std::string, Answer done) override { done(Refused()); }
  void ServeOutputs(const Job&, int, const std::string&, Answer done) override { done(Refused()); }
  void ServeOutputChunks(JobId, int, std::string, Answer done) override { done(Refused()); }
  void Forget(const Job&) override {}

 private:
  static Status Refused() { return Status::Conflict("this daemon is not a cluster's node"); }
};

}  // namespace

Shipping& NoShipping() {
  static NoPeers none;
  return none;
}

}  // namespace trainq
