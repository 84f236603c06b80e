// Shared by the placement sources; placement.h is the public API. The policy is split along
// its steps: placement_choice.cc picks GPUs (plain rule and FGD), placement_reasons.cc says
// why a job waits, placement_holds.cc holds GPUs for aged jobs, placement.cc runs the pass.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "src/core/gpu_select.h"
#include "src/core/placement.h"

namespace trainq::placement_internal {

inline uint64_t SatSub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

inline uint64_t SatAdd(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<uint64_t>::max() : sum;
}

// now - then, 0 when `then` is later; computed unsigned so no input can overflow.
inline uint64_t ElapsedMs(UnixMs now, UnixMs then) {
  return now > then ? static_cast<uint64_t>(now) - static_cast<uint64_t>(then) : 0;
}

inline bool HeldExclusively(const GpuState& gpu) {
  return std::any_of(gpu.holdings.begin(), gpu.holdings.end(),
                     [](const Holding& h) { return h.exclusive; });
}

inline int64_t FreeSlots(const NodeState& node) {
  return std::max<int64_t>(0, int64_t{node.cpu_slots} - node.cpu_slots_used);
}

inline bool HostMemFits(const PendingJob& job, const NodeState& node) {
  return node.host_mem_bytes == 0 ||
         job.host_mem_bytes <= SatSub(node.host_mem_bytes, node.host_mem_used);
}

inline UnixMs WaitingSince(const PendingJob& job) {
  return std::max(job.queued_at > 0 ? job.queued_at : job.submitted_at, job.not_before);
}

// Where GPUs are held for one job: (node position, GPU positions in NodeState::gpus) per
// node, in rank order.
using HoldParts = std::vector<std::pair<size_t, std::vector<size_t>>>;

// What makes a GPU closed to a job; the reasons can look past some of them.
enum Ignore : unsigned { kIgnoreNone = 0, kIgnoreHolds = 1, kIgnoreLimits = 2 };

// What one GPU offers any job at a pass's `now`: all LeftAfter reads of its state but the
// job's share.
struct GpuRoom {
  uint64_t usable = 0;            // UsableBytes
  bool held_exclusively = false;  // no job joins it
  bool used = false;              // a trainq job holds it
  int jobs = 0;                   // trainq attempts on it: spread balances them
  // No holding, no foreign process and at most whole_max_used_bytes used: open to exclusive
  // jobs.
  bool free = false;
  uint64_t total = 0;  // GpuState::total_bytes, for shares in percent
};

GpuRoom RoomOf(const GpuState& gpu, const PolicyConfig& config, UnixMs now);

// The memory in use on a GPU that no trainq attempt holds (total - free): what NVML shows used
// by other processes, containers or the driver. 0 where trainq holds it (its jobs' use is
// theirs to count).
uint64_t OthersUse(const GpuState& gpu);

// What any GPU of one node offers at most, from its GPUs' rooms.
struct NodeRoom {
  uint64_t most_usable = 0;  // over GPUs not held exclusively
  uint64_t least_total = 0;  // the smallest GPU's total_bytes: a share is at least its share
  size_t free = 0;           // GPUs with GpuRoom::free
};

// One call's working state: the nodes as given, plus copies of those this pass changed (a
// pass over a large cluster copies only what it touches), and the GPUs held for aged jobs.
class Pass {
 public:
  Pass(std::span<const NodeState> nodes, const PolicyConfig& config, UnixMs now)
      : config(config), now(now), nodes_(nodes) {
    first_gpu_.reserve(nodes.size());
    for (const NodeState& node : nodes) {
      first_gpu_.push_back(total_gpus_);
      size_t allowed = 0;
      for (const GpuState& gpu : node.gpus) allowed += Allowed(gpu) ? 1 : 0;
      max_gpus_ = std::max(max_gpus_, static_cast<int>(node.gpus.size()));
      max_allowed_ = std::max(max_allowed_, static_cast<int>(allowed));
      total_gpus_ += node.gpus.size();
      for (const GpuState& gpu : node.gpus) any_stale_ = any_stale_ || Stale(gpu);
      if (!UserLimited()) continue;
      for (const auto& [user, use] : node.use_by_user) {
        UserUse& sum = use_by_user_[user];
        sum.gpus += use.gpus;
        sum.jobs += use.jobs;
      }
    }
    room_.resize(total_gpus_);
    room_known_.assign(nodes.size(), 0);
    node_room_.resize(nodes.size());
  }

  size_t size() const { return nodes_.size(); }
  const NodeState& node(size_t i) const {
    return copy_of_.empty() || copy_of_[i] < 0 ? nodes_[i] : copies_[copy_of_[i]];
  }
  NodeState& Mutable(size_t i) {
    room_known_[i] = 0;  // the caller changes the node
    if (copy_of_.empty()) copy_of_.assign(nodes_.size(), -1);
    if (copy_of_[i] < 0) {
      copy_of_[i] = static_cast<int32_t>(copies_.size());
      copies_.push_back(nodes_[i]);
    }
    return copies_[copy_of_[i]];
  }

  // RoomOf each of node i's GPUs, in NodeState::gpus order: computed when first asked and
  // again after Mutable(i), so a pass over many nodes reads each GPU's holdings once per
  // change rather than once per job it tries.
  std::span<const GpuRoom> Room(size_t i) const {
    const NodeState& nd = node(i);
    std::span<GpuRoom> room(room_.data() + first_gpu_[i], nd.gpus.size());
    if (!room_known_[i]) {
      NodeRoom& sum = node_room_[i];
      sum = NodeRoom{};
      for (size_t g = 0; g < nd.gpus.size(); ++g) {
        room[g] = RoomOf(nd.gpus[g], config, now);
        if (!room[g].held_exclusively) sum.most_usable = std::max(sum.most_usable, room[g].usable);
        uint64_t total = room[g].total;
        sum.least_total = g == 0 ? total : std::min(sum.least_total, total);
        sum.free += room[g].free ? 1 : 0;
      }
      room_known_[i] = 1;
    }
    return room;
  }
  const NodeRoom& RoomSummary(size_t i) const {
    Room(i);
    return node_room_[i];
  }

  bool Allowed(const GpuState& gpu) const {
    return (config.devices.empty() || std::find(config.devices.begin(), config.devices.end(),
                                                gpu.index) != config.devices.end()) &&
           !Paused(gpu);
  }
  bool Paused(const GpuState& gpu) const {
    return !config.paused_gpus.empty() &&
           std::find(config.paused_gpus.begin(), config.paused_gpus.end(), gpu.index) !=
               config.paused_gpus.end();
  }
  // Its facts are older than the policy trusts: nothing starts there.
  bool Stale(const GpuState& gpu) const { return StaleMs(gpu) > 0; }
  // How far past config.stale_after_ms its facts are, 0 when they are not stale.
  uint64_t StaleMs(const GpuState& gpu) const {
    if (config.stale_after_ms <= 0 || gpu.sampled_at <= 0) return 0;
    uint64_t age = ElapsedMs(now, gpu.sampled_at);
    return age > static_cast<uint64_t>(config.stale_after_ms) ? age : 0;
  }
  bool BelowMaxJobs(const GpuState& gpu) const {
    return config.max_jobs_per_gpu <= 0 ||
           gpu.holdings.size() < static_cast<size_t>(config.max_jobs_per_gpu);
  }
  JobId HeldFor(size_t node, size_t gpu) const {
    if (held_.empty()) return 0;
    auto it = held_.find({node, gpu});
    return it == held_.end() ? 0 : it->second;
  }
  // Whether the job may go to the node at all: it accepts new jobs, and the job's --node
  // and --exclude-node let it.
  bool NodeOpen(const PendingJob& job, size_t n) const {
    const NodeState& nd = node(n);
    if (!nd.accepts_new) return false;
    if (job.nodes_allowed.empty() && job.nodes_excluded.empty() && job.constraints.empty()) {
      return true;
    }
    return NodeClosedText(job, nd).empty();
  }
  // Whether the job's --node, --exclude-node and --constraint let it use the node, taking
  // new jobs or not.
  static bool NodeAllows(const PendingJob& job, const NodeState& nd) {
    auto has = [&nd](const std::vector<std::string>& names) {
      return std::find(names.begin(), names.end(), nd.name) != names.end();
    };
    return (job.nodes_allowed.empty() || has(job.nodes_allowed)) && !has(job.nodes_excluded) &&
           MeetsConstraints(nd.features, job.constraints);
  }
  // Why the job may not go to the node, "" when it may: "drained", "not in --node", ...
  static std::string NodeClosedText(const PendingJob& job, const NodeState& nd) {
    auto has = [&nd](const std::vector<std::string>& names) {
      return std::find(names.begin(), names.end(), nd.name) != names.end();
    };
    if (!job.nodes_allowed.empty() && !has(job.nodes_allowed)) return "node not in its --node";
    if (has(job.nodes_excluded)) return "node excluded by its --exclude-node";
    if (!MeetsConstraints(nd.features, job.constraints)) {
      return fmt::format("node lacks {} (--constraint)",
                         fmt::join(UnmetConstraints(nd.features, job.constraints), ", "));
    }
    if (!nd.accepts_new) return "node takes no new jobs (drained or lost)";
    return "";
  }
  // The GPU is of the job's --gpu-type (any GPU where it gives none).
  static bool TypeOk(const PendingJob& job, const GpuState& gpu) {
    return job.gpu_type.empty() || GpuTypeMatches(job.gpu_type, gpu.model, gpu.label);
  }
  bool Open(const PendingJob& job, size_t node, size_t gpu, unsigned ignore) const {
    return NodeOpen(job, node) && GpuOpen(job, node, gpu, ignore);
  }
  // Open, for a node already known open to the job.
  bool GpuOpen(const PendingJob& job, size_t node, size_t gpu, unsigned ignore) const {
    const GpuState& g = this->node(node).gpus[gpu];
    if (!TypeOk(job, g)) return false;
    if (!(ignore & kIgnoreLimits) && (!Allowed(g) || !BelowMaxJobs(g) || Stale(g))) return false;
    if (ignore & kIgnoreHolds) return true;
    JobId held = HeldFor(node, gpu);
    return held == 0 || held == job.id;
  }

  void Hold(HoldParts parts, JobId job) {
    for (auto& [node, gpus] : parts) {
      std::sort(gpus.begin(), gpus.end());
      for (size_t g : gpus) held_[{node, g}] = job;
    }
    holds_[job] = std::move(parts);
  }
  bool Release(JobId job) {
    auto it = holds_.find(job);
    if (it == holds_.end()) return false;
    for (const auto& [node, gpus] : it->second) {
      for (size_t g : gpus) held_.erase({node, g});
    }
    holds_.erase(it);
    return true;
  }
  bool HoldsFor(JobId job) const { return holds_.count(job) > 0; }
  // Holds kept for preemptors (Hold::preempting).
  void MarkPreempting(JobId job) { preempting_.insert(job); }
  bool Preempting(JobId job) const { return preempting_.count(job) > 0; }
  bool AnyHolds() const { return !held_.empty(); }
  bool AllHeld() const { return held_.size() >= total_gpus_; }
  const std::map<JobId, HoldParts>& holds() const { return holds_; }
  bool Limited() const {
    return !config.devices.empty() || !config.paused_gpus.empty() || config.max_jobs_per_gpu > 0 ||
           any_stale_;
  }

  bool UserLimited() const { return config.max_gpus_per_user > 0 || config.max_jobs_per_user > 0; }
  // What the job's user holds now: the nodes' figures plus this pass's starts.
  UserUse UseOf(const std::string& user) const {
    auto it = use_by_user_.find(user);
    return it == use_by_user_.end() ? UserUse{} : it->second;
  }
  // Whether starting the job would take its user past a per-user limit.
  bool AtUserCap(const PendingJob& job) const {
    if (!UserLimited()) return false;
    UserUse use = UseOf(job.user);
    if (config.max_jobs_per_user > 0 && use.jobs >= config.max_jobs_per_user) return true;
    return config.max_gpus_per_user > 0 && job.gpus > 0 &&
           int64_t{use.gpus} + job.total_gpus() > config.max_gpus_per_user;
  }
  void AddUse(const PendingJob& job) {
    if (!UserLimited()) return;
    UserUse& use = use_by_user_[job.user];
    use.gpus += static_cast<int>(std::max<int64_t>(job.total_gpus(), 0));
    ++use.jobs;
  }

  int max_gpus() const { return max_gpus_; }
  int max_allowed() const { return max_allowed_; }

  const PolicyConfig& config;
  const UnixMs now;

 private:
  std::span<const NodeState> nodes_;
  std::vector<int32_t> copy_of_;                     // node -> index in copies_, -1: unchanged
  std::deque<NodeState> copies_;                     // a deque: references stay valid as it grows
  std::map<std::pair<size_t, size_t>, JobId> held_;  // (node, gpu position) -> job
  std::map<JobId, HoldParts> holds_;
  std::set<JobId> preempting_;
  std::map<std::string, UserUse> use_by_user_;  // summed over nodes; kept only when limited
  int max_gpus_ = 0;
  int max_allowed_ = 0;
  size_t total_gpus_ = 0;
  bool any_stale_ = false;  // some GPU is Stale: reasons say which
  // A cache behind the const Room(): it changes no answer, only when one is computed.
  std::vector<size_t> first_gpu_;  // node -> its first GPU's position in room_
  mutable std::vector<GpuRoom> room_;
  mutable std::vector<char> room_known_;  // node -> room_ and node_room_ are current for it
  mutable std::vector<NodeRoom> node_room_;
};

// A GPU that can take the job, and what would be left on it.
struct GpuPick {
  size_t pos = 0;  // in NodeState::gpus
  bool used = false;
  int jobs = 0;  // trainq attempts on it
  uint64_t left = 0;
};

// Where the job would go on one node.
struct NodeChoice {
  size_t node = 0;
  std::vector<GpuPick> picks;
  // The placement rule's rank, less is better. spread: trainq jobs on the picks, then
  // UINT64_MAX - left (most usable memory left); pack: minus the picks in use, then left.
  int64_t load = 0;
  uint64_t fit = 0;
  uint64_t left = 0;  // usable memory the picks leave, summed
  int worst = 0;      // pairwise topology distance among the picks
  int sum = 0;
};

// What a job asks for, apart from who it is. Within a pass resources only shrink, so once a
// shape does not fit, no later job of that shape fits either, and they share one reason.
// Where it may go is part of its shape (node lists are short, and empty for most jobs).
using Shape = std::tuple<int, std::optional<uint64_t>, std::optional<double>, int, uint64_t, int,
                         std::vector<std::string>, std::vector<std::string>, std::string,
                         std::vector<std::string>>;

inline Shape ShapeOf(const PendingJob& job) {
  return {job.gpus,      job.mem_bytes,     job.mem_percent,    job.cpus,     job.host_mem_bytes,
          job.num_nodes, job.nodes_allowed, job.nodes_excluded, job.gpu_type, job.constraints};
}

// Whether RequestReason has nothing to say: the hot path of a long queue, no string built.
inline bool Placeable(const PendingJob& job, const Pass& p) {
  return !p.config.paused && job.not_before <= p.now && job.gpus >= 0 && job.cpus >= 0 &&
         job.num_nodes >= 1 &&
         (job.num_nodes == 1 || static_cast<size_t>(job.num_nodes) <= p.size()) &&
         (job.gpus == 0 || (job.gpus <= p.max_gpus() && job.gpus <= p.max_allowed()));
}

// ---- placement_choice.cc ----

// What would be left of the GPU's usable memory after the job takes its share; nullopt: it
// does not fit there.
std::optional<uint64_t> LeftAfter(const PendingJob& job, const GpuState& gpu,
                                  const PolicyConfig& config, UnixMs now);
// NeededBytes on a GPU of `total` bytes; it never shrinks as the total grows. Inline, as
// are the next: a choice over many nodes calls them for each GPU.
inline uint64_t NeededOn(const PendingJob& job, uint64_t total) {
  if (job.mem_bytes) return *job.mem_bytes;
  if (job.mem_percent) {
    double pct = std::clamp(*job.mem_percent, 0.0, 100.0);
    if (std::isnan(pct)) return total;
    double bytes = std::ceil(static_cast<double>(total) * pct / 100.0);
    return bytes >= static_cast<double>(total) ? total : static_cast<uint64_t>(bytes);
  }
  return job.gpus > 0 ? total : 0;
}
// LeftAfter from the GPU's room (RoomOf the same GPU at the same time).
inline std::optional<uint64_t> LeftAfter(const PendingJob& job, const GpuRoom& room) {
  if (job.exclusive()) {
    if (!room.free) return std::nullopt;
    return 0;
  }
  if (room.held_exclusively) return std::nullopt;
  uint64_t needed = NeededOn(job, room.total);
  if (room.usable < needed) return std::nullopt;
  return room.usable - needed;
}
// FittingGpus(job, p, n).size() at most, without a look at holds, limits or node lists.
size_t CouldFit(const PendingJob& job, const Pass& p, size_t n);
// The node's GPUs open to the job that fit it, best first: unused, then best fit, then index.
std::vector<GpuPick> FittingGpus(const PendingJob& job, const Pass& p, size_t n,
                                 unsigned ignore = kIgnoreNone);
// Over nodes: closest GPUs, then the same preference as within one (fewer used GPUs, then
// least left over); ties keep node order.
std::optional<NodeChoice> ChooseNode(const PendingJob& job, const Pass& p,
                                     unsigned ignore = kIgnoreNone);
// The job's GPUs on one node, or nullopt where that node cannot take it now (closed to it,
// too few fitting GPUs, CPU slots or host memory).
std::optional<NodeChoice> ChooseOnNode(const PendingJob& job, const Pass& p, size_t n,
                                       unsigned ignore = kIgnoreNone);
// Where a gang goes: num_nodes distinct nodes, best first (placement.h), or nullopt.
std::optional<std::vector<NodeChoice>> ChooseGang(const PendingJob& job, const Pass& p,
                                                  unsigned ignore = kIgnoreNone);
// Where the job goes, one NodeChoice per node in rank order: ChooseGang for a gang, else
// ChooseNode, or the FGD choice where the policy has a workload mix.
std::optional<std::vector<NodeChoice>> Choose(const PendingJob& job, const Pass& p);
// Records the start in the pass's working copies so later jobs of this pass see it.
StartDecision Commit(const PendingJob& job, std::span<const NodeChoice> parts, Pass& p);

// ---- placement_reasons.cc ----

// Why the job waits, in the words a user needs to act on it. Says nothing of per-user
// limits: a reason shared by a shape must not name one user.
std::string WhyWaiting(const PendingJob& job, const Pass& p);
// "waiting: ada has 2 jobs running; max_jobs_per_user = 2", for a job at its user's limit.
std::string UserCapReason(const PendingJob& job, const Pass& p);
// "; waited past the aging limit: GPU 1 held for it", for a job holding GPUs.
std::string HeldNote(const Pass& p, JobId job);
// Why a GPU the job would fit is closed to it; "" when it is open.
std::string ClosedText(const PendingJob& job, const Pass& p, size_t n, size_t i);

// ---- placement_holds.cc ----

// Phase one of a pass: GPUs held for the aged jobs among `order` (placement order).
void HoldForAged(std::span<const PendingJob* const> order, Pass& p, std::span<const Hold> previous);
std::vector<Hold> HoldsInForce(const Pass& p);

}  // namespace trainq::placement_internal
