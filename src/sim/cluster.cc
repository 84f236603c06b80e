#include "src/sim/cluster.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "src/core/workload_mix.h"

namespace trainq::sim {

PendingJob ToPending(const TraceJob& job, JobId id) {
  PendingJob p;
  p.id = id;
  p.gpus = job.gpus;
  if (job.gpus > 0 && job.gpu_milli < 1000) {
    p.mem_percent = job.gpu_milli / 10.0;
  } else if (job.gpus > 0 && job.gpu_mem_bytes) {
    p.mem_bytes = job.gpu_mem_bytes;
  }
  p.cpus = job.cpu_milli.value_or(0);
  p.host_mem_bytes = job.host_mem_bytes.value_or(0);
  p.user = job.user;
  p.submitted_at = job.submit_ms;
  return p;
}

Cluster::Cluster(std::span<const NodeSpec> specs) : specs_(specs.begin(), specs.end()) {
  nodes_.reserve(specs.size());
  for (const NodeSpec& s : specs) {
    NodeState n;
    n.name = s.name;
    for (int g = 0; g < s.gpus; ++g) {
      n.gpus.push_back({g, "", s.gpu_mem_bytes, s.gpu_mem_bytes + kRoundingSlackBytes, 0, {}});
    }
    n.cpu_slots = s.cpu_milli > 0 ? s.cpu_milli : kUnlimitedCpu;
    n.host_mem_bytes = s.host_mem_bytes;
    by_name_.emplace(s.name, nodes_.size());
    nodes_.push_back(std::move(n));
    total_gpus_ += s.gpus;
    max_gpus_ = std::max(max_gpus_, s.gpus);
  }
}

size_t Cluster::Find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nodes_.size() : it->second;
}

uint64_t Cluster::ReservedBytes(const PendingJob& job, size_t node) const {
  const NodeSpec& s = specs_[node];
  if (job.exclusive()) return s.gpu_mem_bytes;
  GpuState probe;
  probe.total_bytes = s.gpu_mem_bytes;
  return NeededBytes(job, probe);
}

void Cluster::Start(const PendingJob& job, size_t node, std::span<const int> gpu_pos) {
  NodeState& n = nodes_[node];
  uint64_t bytes = ReservedBytes(job, node);
  for (int g : gpu_pos) {
    // used_now = 0: the reservation counts in full, as for a job that has not allocated yet.
    n.gpus[size_t(g)].holdings.push_back({job.id, bytes, 0, job.exclusive(), 0});
  }
  n.cpu_slots_used += job.cpus;
  n.host_mem_used += job.host_mem_bytes;
  UserUse& use = n.use_by_user[job.user];
  use.gpus += static_cast<int>(gpu_pos.size());
  ++use.jobs;
}

void Cluster::Finish(const PendingJob& job, size_t node, std::span<const int> gpu_pos) {
  NodeState& n = nodes_[node];
  for (int g : gpu_pos) {
    std::vector<Holding>& h = n.gpus[size_t(g)].holdings;
    auto it = std::find_if(h.begin(), h.end(), [&](const Holding& x) { return x.job == job.id; });
    if (it != h.end()) h.erase(it);
  }
  n.cpu_slots_used -= job.cpus;
  n.host_mem_used -= job.host_mem_bytes;
  auto use = n.use_by_user.find(job.user);
  if (use == n.use_by_user.end()) return;
  use->second.gpus -= static_cast<int>(gpu_pos.size());
  if (--use->second.jobs <= 0) n.use_by_user.erase(use);  // a node keeps only its users
}

bool Cluster::Idle(size_t node) const {
  const NodeState& n = nodes_[node];
  return n.cpu_slots_used == 0 && n.host_mem_used == 0 &&
         std::all_of(n.gpus.begin(), n.gpus.end(),
                     [](const GpuState& g) { return g.holdings.empty(); });
}

bool Cluster::HostFits(const PendingJob& job, size_t node) const {
  const NodeState& n = nodes_[node];
  if (int64_t{n.cpu_slots} - n.cpu_slots_used < job.cpus) return false;
  return n.host_mem_bytes == 0 || n.host_mem_used + job.host_mem_bytes <= n.host_mem_bytes;
}

bool Cluster::FitsEmpty(const PendingJob& job) const {
  for (size_t i = 0; i < specs_.size(); ++i) {
    const NodeSpec& s = specs_[i];
    if (s.gpus < job.gpus || nodes_[i].cpu_slots < job.cpus) continue;
    if (s.host_mem_bytes != 0 && s.host_mem_bytes < job.host_mem_bytes) continue;
    if (job.gpus > 0 && !job.exclusive() && ReservedBytes(job, i) > s.gpu_mem_bytes) continue;
    return true;
  }
  return false;
}

uint64_t Cluster::HeldBytes(size_t node, int gpu_pos) const {
  uint64_t sum = 0;
  for (const Holding& h : nodes_[node].gpus[size_t(gpu_pos)].holdings) sum += h.reserved_bytes;
  return sum;
}

}  // namespace trainq::sim

namespace trainq::sim {

std::vector<PolicyConfig::WorkloadClass> WorkloadMix(std::span<const TraceJob> jobs) {
  // A class is a whole request as the FGD reference sees it: GPUs, share of each and CPU.
  // FGD counts a node's free GPUs as lost to a class whose CPU no longer fits there, not
  // only to one whose GPU share does not.
  std::vector<RequestShape> shapes;
  shapes.reserve(jobs.size());
  for (const TraceJob& j : jobs) shapes.push_back({j.gpus, j.gpu_milli, j.cpu_milli.value_or(0)});
  return trainq::WorkloadMix(shapes);
}

}  // namespace trainq::sim
