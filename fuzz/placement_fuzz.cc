// libFuzzer target for the placement policy as the daemon drives it: a WaitingQueue changed
// by random operations (jobs of every shape, priority and user arrive and leave), passes over
// random nodes, starts applied back as holdings. After each pass: no GPU is given more than
// it has usable, exclusive jobs are alone, every job not started has a reason, devices,
// max_jobs_per_gpu and the per-user limits hold (no GPU held for a job at its user's cap), the
// queue's order is PlacedBefore's, and PlaceOrdered over the queue decides exactly as Place over
// the same jobs. Nodes may be drained (accepts_new false) and jobs may name nodes or span
// several (gangs): every start and hold is on nodes open to its job, a gang's parts on
// distinct nodes, part 0 mirrored in the single-node fields. A pass that never ends is
// libFuzzer's timeout.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "src/core/gpu_select.h"
#include "src/core/placement.h"
#include "src/core/waiting_queue.h"

namespace trainq {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
const char* const kUsers[] = {"alice", "bob", "carol", "dave"};

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Whether the job may be placed on the node at all.
bool MayUse(const PendingJob& job, const NodeState& node) {
  return node.accepts_new &&
         (job.nodes_allowed.empty() || Contains(job.nodes_allowed, node.name)) &&
         !Contains(job.nodes_excluded, node.name) &&
         MeetsConstraints(node.features, job.constraints);
}

const NodeState* Find(const std::vector<NodeState>& nodes, const std::string& name) {
  auto it =
      std::find_if(nodes.begin(), nodes.end(), [&](const NodeState& n) { return n.name == name; });
  return it == nodes.end() ? nullptr : &*it;
}

NodeState RandomNode(fuzz::Bytes& in, int n) {
  NodeState node;
  node.name = "node" + std::to_string(n);
  int gpus = static_cast<int>(in.Range(1, 8));
  static const uint64_t kTotals[] = {16 * kGiB, 24 * kGiB, 40 * kGiB, 80 * kGiB};
  for (int i = 0; i < gpus; ++i) {
    GpuState gpu;
    gpu.index = i;
    gpu.uuid = node.name + "-gpu" + std::to_string(i);
    gpu.total_bytes = kTotals[in.U8() % 4];
    gpu.free_bytes =
        gpu.total_bytes - static_cast<uint64_t>(in.Range(0, 64)) * gpu.total_bytes / 64;
    gpu.foreign_processes = in.U8() % 8 == 0 ? 1 : 0;
    gpu.model = in.U8() % 2 == 0 ? "NVIDIA A100-SXM4-80GB" : "Tesla T4";
    if (in.U8() % 8 == 0) gpu.label = "big";
    node.gpus.push_back(gpu);
  }
  node.cpu_slots = static_cast<int>(in.Range(0, 64));
  node.accepts_new = in.U8() % 6 != 0;
  if (in.U8() % 2 == 0) node.features.push_back("ib");
  if (in.U8() % 2 == 0) node.features.push_back("nvlink");
  node.host_mem_bytes = in.U8() % 2 == 0 ? 0 : static_cast<uint64_t>(in.Range(1, 512)) * kGiB;
  if (in.U8() % 2 == 0) {  // a topology
    node.topology.assign(gpus, std::vector<int>(gpus, 0));
    static const int kLevels[] = {0, 10, 20, 30, 40, 50};
    for (int i = 0; i < gpus; ++i) {
      for (int j = i + 1; j < gpus; ++j) {
        node.topology[i][j] = node.topology[j][i] = kLevels[in.U8() % 6];
      }
    }
  }
  return node;
}

PendingJob RandomJob(fuzz::Bytes& in, JobId id, UnixMs now) {
  PendingJob job;
  job.id = id;
  job.gpus = static_cast<int>(in.Range(0, 9));
  switch (in.U8() % 3) {
    case 0:
      break;  // whole GPUs
    case 1:
      job.mem_bytes = static_cast<uint64_t>(in.Range(1, 96)) * kGiB / 2;
      break;
    case 2:
      job.mem_percent = static_cast<double>(in.Range(1, 100));
      break;
  }
  job.cpus = static_cast<int>(in.Range(0, 16));
  // Every priority the API accepts.
  job.priority = static_cast<int>(static_cast<int32_t>(static_cast<uint32_t>(in.U64(4))));
  if (in.U8() % 2 == 0) job.priority = static_cast<int>(in.Range(-2, 2));
  job.submitted_at = now - in.Range(0, 10'000'000);
  job.queued_at = job.submitted_at + in.Range(0, 100);
  job.not_before = in.U8() % 4 == 0 ? now + in.Range(0, 100'000) : 0;
  job.user = kUsers[in.U8() % 4];
  job.host_mem_bytes = in.U8() % 4 == 0 ? static_cast<uint64_t>(in.Range(1, 64)) * kGiB : 0;
  job.num_nodes = in.U8() % 4 == 0 ? static_cast<int>(in.Range(2, 3)) : 1;
  // node0..node2 exist; node3 does not.
  uint8_t lists = in.U8();
  for (int n = 0; n < 4; ++n) {
    std::string name = "node" + std::to_string(n);
    if (lists & (1u << n)) job.nodes_allowed.push_back(name);
    if (lists & (1u << (n + 4))) job.nodes_excluded.push_back(name);
  }
  static const char* const kTypes[] = {"", "", "a100", "t4", "big", "h100"};
  job.gpu_type = kTypes[in.U8() % 6];
  static const char* const kClauses[] = {"ib", "nvlink", "ib|nvlink", "eth"};
  for (uint8_t bits = in.U8() % 16, i = 0; i < 4; ++i) {
    if (bits & (1u << i)) job.constraints.push_back(kClauses[i]);
  }
  return job;
}

PolicyConfig RandomConfig(fuzz::Bytes& in) {
  PolicyConfig config;
  config.headroom_bytes = static_cast<uint64_t>(in.Range(0, 4)) * (256ull << 20);
  config.ramp_up_ms = in.Range(0, 120'000);
  if (in.U8() % 4 == 0) config.devices = {0, 2, 3};
  config.max_jobs_per_gpu = static_cast<int>(in.Range(0, 3));
  config.aging_ms = in.U8() % 4 == 0 ? 0 : in.Range(1, 20'000'000);
  config.max_holds = static_cast<int>(in.Range(0, 3));
  config.max_gpus_per_user = static_cast<int>(in.Range(0, 6));
  config.max_jobs_per_user = static_cast<int>(in.Range(0, 3));
  if (in.U8() % 2 == 0) {
    config.workload = {{.gpus = 1, .fraction = 0.25, .weight = 2},
                       {.gpus = 1, .fraction = 1.0, .weight = 1},
                       {.gpus = 2, .fraction = 1.0, .weight = 1}};
  }
  return config;
}

void CheckOrder(const std::vector<const PendingJob*>& ordered, const WaitingQueue& queue,
                const UsageByUser& usage) {
  FUZZ_CHECK(ordered.size() == queue.size());
  std::set<JobId> seen;
  for (size_t i = 0; i < ordered.size(); ++i) {
    FUZZ_CHECK(seen.insert(ordered[i]->id).second);
    if (i > 0) FUZZ_CHECK(!PlacedBefore(*ordered[i], *ordered[i - 1], usage));
  }
}

// No user's starts take them past a per-user limit, counted from what they held before the
// pass; and no GPU is held for a job whose user is at a limit after it.
void CheckUserLimits(const PlacementResult& result, const std::map<JobId, const PendingJob*>& jobs,
                     const std::vector<NodeState>& nodes, const PolicyConfig& config) {
  std::map<std::string, UserUse> use;
  for (const NodeState& node : nodes) {
    for (const auto& [user, u] : node.use_by_user) {
      use[user].gpus += u.gpus;
      use[user].jobs += u.jobs;
    }
  }
  for (const StartDecision& start : result.starts) {
    const PendingJob& job = *jobs.at(start.job);
    UserUse& u = use[job.user];
    if (config.max_jobs_per_user > 0) FUZZ_CHECK(u.jobs < config.max_jobs_per_user);
    if (config.max_gpus_per_user > 0 && job.gpus > 0) {
      FUZZ_CHECK(u.gpus + job.total_gpus() <= config.max_gpus_per_user);
    }
    u.gpus += static_cast<int>(job.total_gpus());
    ++u.jobs;
  }
  for (const Hold& hold : result.holds) {
    FUZZ_CHECK(jobs.contains(hold.job));
    const PendingJob& job = *jobs.at(hold.job);
    const UserUse& u = use[job.user];
    if (config.max_jobs_per_user > 0) FUZZ_CHECK(u.jobs < config.max_jobs_per_user);
    if (config.max_gpus_per_user > 0) {
      FUZZ_CHECK(u.gpus + job.total_gpus() <= config.max_gpus_per_user);
    }
  }
}

// What a pass gave each GPU: (node, gpu) -> bytes, starts, and whether an exclusive job
// took it.
struct Given {
  std::map<std::pair<std::string, int>, uint64_t> bytes;
  std::map<std::pair<std::string, int>, int> starts_on;
  std::set<std::pair<std::string, int>> exclusive;
};

// One node's part of a start: an open node, its GPUs distinct, allowed and not over-committed.
void CheckPart(const PendingJob& job, const StartDecision& start, const NodeGpus& part,
               const std::vector<NodeState>& nodes, const PolicyConfig& config, UnixMs now,
               Given& pass) {
  FUZZ_CHECK(static_cast<int>(part.gpu_indices.size()) == job.gpus);
  const NodeState* node = Find(nodes, part.node);
  FUZZ_CHECK(node != nullptr);
  FUZZ_CHECK(MayUse(job, *node));
  std::set<int> distinct(part.gpu_indices.begin(), part.gpu_indices.end());
  FUZZ_CHECK(distinct.size() == part.gpu_indices.size());
  for (int index : part.gpu_indices) {
    FUZZ_CHECK(index >= 0 && index < static_cast<int>(node->gpus.size()));
    const GpuState& gpu = node->gpus[index];
    FUZZ_CHECK(GpuTypeMatches(job.gpu_type, gpu.model, gpu.label));
    if (!config.devices.empty()) {
      FUZZ_CHECK(std::count(config.devices.begin(), config.devices.end(), gpu.index) == 1);
    }
    auto key = std::pair(node->name, index);
    FUZZ_CHECK(!pass.exclusive.contains(key));
    int& starts_on = ++pass.starts_on[key];
    if (config.max_jobs_per_gpu > 0) {
      FUZZ_CHECK(static_cast<int>(gpu.holdings.size()) + starts_on <= config.max_jobs_per_gpu);
    }
    if (job.exclusive()) {
      FUZZ_CHECK(gpu.holdings.empty() && gpu.foreign_processes == 0 && starts_on == 1);
      pass.exclusive.insert(key);
      continue;
    }
    for (const Holding& h : gpu.holdings) FUZZ_CHECK(!h.exclusive);
    // One figure per start: the most any of its GPUs needs (GPUs of one job may differ
    // in size when it asks for a percent).
    FUZZ_CHECK(start.reserved_bytes >= NeededBytes(job, gpu));
    pass.bytes[key] += NeededBytes(job, gpu);
    FUZZ_CHECK(pass.bytes[key] <= UsableBytes(gpu, config, now));
  }
}

void CheckPass(const PlacementResult& result, const std::vector<const PendingJob*>& ordered,
               const std::vector<NodeState>& nodes, const PolicyConfig& config, UnixMs now) {
  std::map<JobId, const PendingJob*> jobs;
  for (const PendingJob* job : ordered) jobs[job->id] = job;
  std::set<JobId> decided;
  Given pass;
  for (const StartDecision& start : result.starts) {
    FUZZ_CHECK(jobs.contains(start.job));
    FUZZ_CHECK(decided.insert(start.job).second);
    const PendingJob& job = *jobs[start.job];
    FUZZ_CHECK(job.not_before <= now);
    FUZZ_CHECK(static_cast<int>(start.parts.size()) == job.num_nodes);
    FUZZ_CHECK(start.node == start.parts[0].node);
    FUZZ_CHECK(start.gpu_indices == start.parts[0].gpu_indices);
    std::set<std::string> part_nodes;
    for (const NodeGpus& part : start.parts) {
      FUZZ_CHECK(part_nodes.insert(part.node).second);
      CheckPart(job, start, part, nodes, config, now, pass);
    }
  }
  for (const Hold& hold : result.holds) {
    FUZZ_CHECK(jobs.contains(hold.job));
    const PendingJob& job = *jobs.at(hold.job);
    FUZZ_CHECK(static_cast<int>(hold.parts.size()) == job.num_nodes);
    FUZZ_CHECK(hold.node == hold.parts[0].node);
    std::set<std::string> part_nodes;
    for (const NodeGpus& part : hold.parts) {
      FUZZ_CHECK(part_nodes.insert(part.node).second);
      const NodeState* node = Find(nodes, part.node);
      FUZZ_CHECK(node != nullptr && MayUse(job, *node));
    }
  }
  for (const PlacementResult::Waiting& w : result.waiting) {
    FUZZ_CHECK(jobs.contains(w.job));
    FUZZ_CHECK(decided.insert(w.job).second);
    FUZZ_CHECK(w.reason < result.reason_texts.size());
    FUZZ_CHECK(!result.ReasonOf(w).empty());
  }
  FUZZ_CHECK(decided.size() == jobs.size());
  CheckUserLimits(result, jobs, nodes, config);
}

// Applies the starts as the daemon does: each becomes a holding whose memory is not used yet.
void Apply(const PlacementResult& result, const std::map<JobId, PendingJob>& jobs,
           std::vector<NodeState>& nodes, UnixMs now) {
  for (const StartDecision& start : result.starts) {
    const PendingJob& job = jobs.at(start.job);
    for (const NodeGpus& part : start.parts) {
      auto node_it = std::find_if(nodes.begin(), nodes.end(),
                                  [&](const NodeState& n) { return n.name == part.node; });
      NodeState& node = *node_it;
      for (int index : part.gpu_indices) {
        node.gpus[index].holdings.push_back(Holding{.job = job.id,
                                                    .reserved_bytes = start.reserved_bytes,
                                                    .used_now = std::nullopt,
                                                    .exclusive = job.exclusive(),
                                                    .started_at = now});
      }
      node.cpu_slots_used += start.cpus;
      node.host_mem_used += job.host_mem_bytes;
      UserUse& use = node.use_by_user[job.user];
      use.gpus += job.gpus;
      if (&part == &start.parts.front()) ++use.jobs;  // a gang is one attempt
    }
  }
}

}  // namespace
}  // namespace trainq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainq;
  fuzz::Bytes in(data, size);
  UnixMs now = 1'700'000'000'000;
  std::vector<NodeState> nodes;
  int node_count = static_cast<int>(in.Range(1, 3));
  for (int n = 0; n < node_count; ++n) nodes.push_back(RandomNode(in, n));
  PolicyConfig config = RandomConfig(in);
  UsageByUser usage;
  for (const char* user : kUsers) {
    if (in.U8() % 2 == 0) usage[user] = static_cast<double>(in.Range(0, 1000)) / 10;
  }

  WaitingQueue queue;
  std::map<JobId, PendingJob> copies;  // what Place gets, unordered
  std::vector<Hold> holds;
  JobId next_id = 1;
  for (int op = 0; op < 200 && !in.done(); ++op) {
    switch (in.U8() % 4) {
      case 0:
      case 1: {
        PendingJob job = RandomJob(in, next_id++, now);
        FUZZ_CHECK(queue.emplace(job.id, job));
        FUZZ_CHECK(!queue.emplace(job.id, job));
        copies[job.id] = job;
        break;
      }
      case 2: {  // a job leaves (cancelled)
        if (copies.empty()) break;
        auto it = copies.begin();
        std::advance(it, static_cast<long>(in.U64(2) % copies.size()));
        FUZZ_CHECK(queue.erase(it->first) == 1);
        FUZZ_CHECK(queue.erase(it->first) == 0);
        copies.erase(it);
        break;
      }
      case 3: {  // a pass, then time moves on
        std::vector<const PendingJob*> ordered = queue.Ordered(usage);
        CheckOrder(ordered, queue, usage);
        PlacementResult result = PlaceOrdered(ordered, nodes, config, now, holds);
        CheckPass(result, ordered, nodes, config, now);
        std::vector<PendingJob> unordered;
        for (const auto& [id, job] : copies) unordered.push_back(job);
        PlacementResult same = Place(unordered, nodes, config, now, usage, holds);
        FUZZ_CHECK(same.starts.size() == result.starts.size());
        for (size_t i = 0; i < same.starts.size(); ++i) {
          FUZZ_CHECK(same.starts[i].job == result.starts[i].job);
          FUZZ_CHECK(same.starts[i].gpu_indices == result.starts[i].gpu_indices);
          FUZZ_CHECK(same.starts[i].parts.size() == result.starts[i].parts.size());
        }
        Apply(result, copies, nodes, now);
        for (const StartDecision& start : result.starts) {
          queue.erase(start.job);
          copies.erase(start.job);
        }
        holds = result.holds;
        now += in.Range(0, 4'000'000);
        break;
      }
    }
  }
  return 0;
}
