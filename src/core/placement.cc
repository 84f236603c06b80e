#include "src/core/placement.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "trainq/size.h"

namespace trainq {

namespace {

uint64_t SatSub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

uint64_t SatAdd(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<uint64_t>::max() : sum;
}

// at + ms, saturated at the largest time rather than wrapping.
UnixMs SatAddMs(UnixMs at, int64_t ms) {
  return at > std::numeric_limits<UnixMs>::max() - ms ? std::numeric_limits<UnixMs>::max()
                                                      : at + ms;
}

// now - then, 0 when `then` is later; computed unsigned so no input can overflow.
uint64_t ElapsedMs(UnixMs now, UnixMs then) {
  return now > then ? static_cast<uint64_t>(now) - static_cast<uint64_t>(then) : 0;
}

// What a holding may still allocate beyond what the probe already sees as used.
uint64_t Outstanding(const Holding& h, const PolicyConfig& config, UnixMs now) {
  if (h.used_now) return SatSub(h.reserved_bytes, *h.used_now);
  bool ramping_up = config.ramp_up_ms > 0 &&
                    ElapsedMs(now, h.started_at) < static_cast<uint64_t>(config.ramp_up_ms);
  return ramping_up ? h.reserved_bytes : 0;
}

bool HeldExclusively(const GpuState& gpu) {
  return std::any_of(gpu.holdings.begin(), gpu.holdings.end(),
                     [](const Holding& h) { return h.exclusive; });
}

int64_t FreeSlots(const NodeState& node) {
  return std::max<int64_t>(0, int64_t{node.cpu_slots} - node.cpu_slots_used);
}

bool HostMemFits(const PendingJob& job, const NodeState& node) {
  return node.host_mem_bytes == 0 ||
         job.host_mem_bytes <= SatSub(node.host_mem_bytes, node.host_mem_used);
}

std::string Plural(int64_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

UnixMs WaitingSince(const PendingJob& job) {
  return std::max(job.queued_at > 0 ? job.queued_at : job.submitted_at, job.not_before);
}

bool Aged(const PendingJob& job, const PolicyConfig& config, UnixMs now) {
  if (config.aging_ms <= 0 || job.not_before > now) return false;
  return ElapsedMs(now, WaitingSince(job)) > static_cast<uint64_t>(config.aging_ms);
}

// What makes a GPU closed to a job; the reasons can look past some of them.
enum Ignore : unsigned { kIgnoreNone = 0, kIgnoreHolds = 1, kIgnoreLimits = 2 };

// One call's working state: the nodes as given, plus copies of those this pass changed (a
// pass over a large cluster copies only what it touches), and the GPUs held for aged jobs.
class Pass {
 public:
  Pass(std::span<const NodeState> nodes, const PolicyConfig& config, UnixMs now)
      : config(config), now(now), nodes_(nodes) {
    for (const NodeState& node : nodes) {
      size_t allowed = 0;
      for (const GpuState& gpu : node.gpus) allowed += Allowed(gpu) ? 1 : 0;
      max_gpus_ = std::max(max_gpus_, static_cast<int>(node.gpus.size()));
      max_allowed_ = std::max(max_allowed_, static_cast<int>(allowed));
      total_gpus_ += node.gpus.size();
    }
  }

  size_t size() const { return nodes_.size(); }
  const NodeState& node(size_t i) const {
    return copy_of_.empty() || copy_of_[i] < 0 ? nodes_[i] : copies_[copy_of_[i]];
  }
  NodeState& Mutable(size_t i) {
    if (copy_of_.empty()) copy_of_.assign(nodes_.size(), -1);
    if (copy_of_[i] < 0) {
      copy_of_[i] = static_cast<int32_t>(copies_.size());
      copies_.push_back(nodes_[i]);
    }
    return copies_[copy_of_[i]];
  }

  bool Allowed(const GpuState& gpu) const {
    return config.devices.empty() || std::find(config.devices.begin(), config.devices.end(),
                                               gpu.index) != config.devices.end();
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
  bool Open(const PendingJob& job, size_t node, size_t gpu, unsigned ignore) const {
    const GpuState& g = this->node(node).gpus[gpu];
    if (!(ignore & kIgnoreLimits) && (!Allowed(g) || !BelowMaxJobs(g))) return false;
    if (ignore & kIgnoreHolds) return true;
    JobId held = HeldFor(node, gpu);
    return held == 0 || held == job.id;
  }

  void Hold(size_t node, std::vector<size_t> gpus, JobId job) {
    std::sort(gpus.begin(), gpus.end());
    for (size_t g : gpus) held_[{node, g}] = job;
    holds_[job] = {node, std::move(gpus)};
  }
  bool Release(JobId job) {
    auto it = holds_.find(job);
    if (it == holds_.end()) return false;
    for (size_t g : it->second.second) held_.erase({it->second.first, g});
    holds_.erase(it);
    return true;
  }
  bool HoldsFor(JobId job) const { return holds_.count(job) > 0; }
  bool AnyHolds() const { return !held_.empty(); }
  bool AllHeld() const { return held_.size() >= total_gpus_; }
  const std::map<JobId, std::pair<size_t, std::vector<size_t>>>& holds() const { return holds_; }
  bool Limited() const { return !config.devices.empty() || config.max_jobs_per_gpu > 0; }

  int max_gpus() const { return max_gpus_; }
  int max_allowed() const { return max_allowed_; }

  const PolicyConfig& config;
  const UnixMs now;

 private:
  std::span<const NodeState> nodes_;
  std::vector<int32_t> copy_of_;                     // node -> index in copies_, -1: unchanged
  std::deque<NodeState> copies_;                     // a deque: references stay valid as it grows
  std::map<std::pair<size_t, size_t>, JobId> held_;  // (node, gpu position) -> job
  std::map<JobId, std::pair<size_t, std::vector<size_t>>> holds_;
  int max_gpus_ = 0;
  int max_allowed_ = 0;
  size_t total_gpus_ = 0;
};

// A GPU that can take the job, and what would be left on it.
struct GpuPick {
  size_t pos = 0;  // in NodeState::gpus
  bool used = false;
  uint64_t left = 0;
};

// Where the job would go on one node.
struct NodeChoice {
  size_t node = 0;
  std::vector<GpuPick> picks;
  int used_count = 0;
  uint64_t left = 0;
  int worst = 0;  // pairwise topology distance among the picks
  int sum = 0;
};

std::optional<uint64_t> LeftAfter(const PendingJob& job, const GpuState& gpu,
                                  const PolicyConfig& config, UnixMs now) {
  if (job.exclusive()) {
    if (!gpu.holdings.empty() || gpu.foreign_processes != 0) return std::nullopt;
    return 0;
  }
  if (HeldExclusively(gpu)) return std::nullopt;
  uint64_t usable = UsableBytes(gpu, config, now);
  uint64_t needed = NeededBytes(job, gpu);
  if (usable < needed) return std::nullopt;
  return usable - needed;
}

// The node's GPUs open to the job that fit it, best first: unused, then best fit, then index.
std::vector<GpuPick> FittingGpus(const PendingJob& job, const Pass& p, size_t n,
                                 unsigned ignore = kIgnoreNone) {
  std::vector<GpuPick> picks;
  if (job.gpus == 0) return picks;
  const NodeState& node = p.node(n);
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (!p.Open(job, n, i, ignore)) continue;
    std::optional<uint64_t> left = LeftAfter(job, node.gpus[i], p.config, p.now);
    if (left) picks.push_back({i, !node.gpus[i].holdings.empty(), *left});
  }
  std::sort(picks.begin(), picks.end(), [&node](const GpuPick& a, const GpuPick& b) {
    return std::tuple(a.used, a.left, node.gpus[a.pos].index) <
           std::tuple(b.used, b.left, node.gpus[b.pos].index);
  });
  return picks;
}

bool TopologyKnown(const NodeState& node) {
  if (node.topology.size() != node.gpus.size()) return false;
  return std::all_of(
      node.topology.begin(), node.topology.end(),
      [&node](const std::vector<int>& row) { return row.size() == node.gpus.size(); });
}

// Worst and summed pairwise distance of the picks.
std::pair<int, int> Spread(const NodeState& node, std::span<const GpuPick> picks) {
  if (!TopologyKnown(node)) return {0, 0};
  int worst = 0, sum = 0;
  for (size_t i = 0; i < picks.size(); ++i) {
    for (size_t j = i + 1; j < picks.size(); ++j) {
      int d = node.topology[picks[i].pos][picks[j].pos];
      worst = std::max(worst, d);
      sum += d;
    }
  }
  return {worst, sum};
}

NodeChoice Summarise(const NodeState& node, size_t n, std::vector<GpuPick> picks) {
  NodeChoice c{n, std::move(picks), 0, 0, 0, 0};
  for (const GpuPick& pick : c.picks) {
    c.used_count += pick.used ? 1 : 0;
    c.left = SatAdd(c.left, pick.left);
  }
  std::tie(c.worst, c.sum) = Spread(node, c.picks);
  return c;
}

auto ChoiceKey(const NodeChoice& c) { return std::tuple(c.worst, c.sum, c.used_count, c.left); }

// The closest `k` of `picks` (in preference order): every subset of the first few is tried;
// ties keep the earlier one, i.e. the usual preference.
std::vector<GpuPick> ClosestSubset(const NodeState& node, size_t n, std::vector<GpuPick> picks,
                                   size_t k) {
  constexpr size_t kMaxCandidates = 16;  // C(16, 8) subsets at most
  if (picks.size() > kMaxCandidates) picks.resize(kMaxCandidates);
  std::vector<size_t> idx(k);
  std::iota(idx.begin(), idx.end(), 0);
  std::optional<NodeChoice> best;
  std::vector<GpuPick> trial(k);
  while (true) {
    for (size_t i = 0; i < k; ++i) trial[i] = picks[idx[i]];
    NodeChoice c = Summarise(node, n, trial);
    if (!best || ChoiceKey(c) < ChoiceKey(*best)) best = std::move(c);
    size_t i = k;
    while (i > 0 && idx[i - 1] == picks.size() - k + i - 1) --i;
    if (i == 0) break;
    ++idx[i - 1];
    for (size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
  }
  return best->picks;
}

// The job's GPUs on node `n` out of those that fit it (best first): the closest set where
// the topology is known, else the first.
NodeChoice PickOnNode(const PendingJob& job, const NodeState& node, size_t n,
                      std::vector<GpuPick> picks) {
  size_t k = static_cast<size_t>(job.gpus);
  if (k > 1 && picks.size() > k && TopologyKnown(node)) {
    picks = ClosestSubset(node, n, std::move(picks), k);
  } else {
    picks.resize(k);
  }
  return Summarise(node, n, std::move(picks));
}

bool HostFits(const PendingJob& job, const NodeState& node) {
  return FreeSlots(node) >= job.cpus && HostMemFits(job, node);
}

std::optional<NodeChoice> ChooseOnNode(const PendingJob& job, const Pass& p, size_t n,
                                       unsigned ignore = kIgnoreNone) {
  const NodeState& node = p.node(n);
  if (!HostFits(job, node)) return std::nullopt;
  std::vector<GpuPick> picks = FittingGpus(job, p, n, ignore);
  if (picks.size() < static_cast<size_t>(job.gpus)) return std::nullopt;
  return PickOnNode(job, node, n, std::move(picks));
}

// Over nodes: closest GPUs, then the same preference as within one (fewer used GPUs, then
// least left over); ties keep node order.
std::optional<NodeChoice> ChooseNode(const PendingJob& job, const Pass& p,
                                     unsigned ignore = kIgnoreNone) {
  std::optional<NodeChoice> best;
  for (size_t i = 0; i < p.size(); ++i) {
    std::optional<NodeChoice> c = ChooseOnNode(job, p, i, ignore);
    if (c && (!best || ChoiceKey(*c) < ChoiceKey(*best))) best = std::move(c);
  }
  return best;
}

// ---- Fragmentation-aware choice (FGD). ----

double Fraction(uint64_t bytes, uint64_t total) {
  return total == 0 ? 0.0 : std::min(1.0, static_cast<double>(bytes) / static_cast<double>(total));
}

// The node as the fragmentation measure sees it for `job`: GPUs closed to it hold nothing
// free.
void FragView(const PendingJob& job, const Pass& p, size_t n, std::vector<FragGpu>& gpus,
              FragHost& host) {
  const NodeState& node = p.node(n);
  gpus.clear();
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    const GpuState& g = node.gpus[i];
    if (!p.Open(job, n, i, kIgnoreNone) || HeldExclusively(g)) {
      gpus.push_back({0.0, false});
      continue;
    }
    gpus.push_back({Fraction(UsableBytes(g, p.config, p.now), g.total_bytes),
                    g.holdings.empty() && g.foreign_processes == 0});
  }
  host.cpu_free = FreeSlots(node);
  host.mem_enforced = node.host_mem_bytes > 0;
  host.mem_free = SatSub(node.host_mem_bytes, node.host_mem_used);
}

struct FgdCandidate {
  NodeChoice choice;
  double delta = 0;
  double free_after = 0;  // the node's free GPU capacity after: less is a better fit
  int64_t cpu_after = 0;
};

bool FgdBetter(const FgdCandidate& a, const FgdCandidate& b) {
  constexpr double kEps = 1e-9;
  if (a.delta < b.delta - kEps) return true;
  if (a.delta > b.delta + kEps) return false;
  if (a.free_after < b.free_after - kEps) return true;
  if (a.free_after > b.free_after + kEps) return false;
  return std::pair(a.cpu_after, a.choice.left) < std::pair(b.cpu_after, b.choice.left);
}

FgdCandidate Evaluate(const PendingJob& job, const NodeState& node, const FragmentationModel& model,
                      std::span<const FragGpu> before, NodeChoice choice, std::vector<size_t>& pos,
                      std::vector<FragGpu>& after) {
  pos.clear();
  after.clear();
  double free_after = model.FreeTotal();
  for (const GpuPick& pick : choice.picks) {
    pos.push_back(pick.pos);
    after.push_back(
        {job.exclusive() ? 0.0 : Fraction(pick.left, node.gpus[pick.pos].total_bytes), false});
    free_after += after.back().free - before[pick.pos].free;
  }
  FgdCandidate c{std::move(choice), 0, free_after, FreeSlots(node) - job.cpus};
  c.delta = model.After(pos, after, job.cpus, job.host_mem_bytes) - model.Before();
  return c;
}

std::optional<NodeChoice> ChooseNodeFgd(const PendingJob& job, const Pass& p) {
  FragmentationModel model(p.config.workload);
  std::vector<FragGpu> gpus, after;
  std::vector<size_t> pos;
  FragHost host;
  std::optional<FgdCandidate> best;
  auto consider = [&](FgdCandidate c) {
    if (!best || FgdBetter(c, *best)) best = std::move(c);
  };
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    if (job.gpus > static_cast<int>(node.gpus.size()) || !HostFits(job, node)) continue;
    std::vector<GpuPick> picks = FittingGpus(job, p, n);
    if (picks.size() < static_cast<size_t>(job.gpus)) continue;
    FragView(job, p, n, gpus, host);
    model.Prepare(gpus, host);
    if (job.gpus != 1 || job.exclusive()) {
      consider(
          Evaluate(job, node, model, gpus, PickOnNode(job, node, n, std::move(picks)), pos, after));
      continue;
    }
    // A one-GPU share: every GPU it fits is a candidate of its own.
    for (const GpuPick& pick : picks) {
      consider(Evaluate(job, node, model, gpus, Summarise(node, n, {pick}), pos, after));
    }
  }
  if (!best) return std::nullopt;
  return std::move(best->choice);
}

// Records the start in the working copy so later jobs of this pass see it. used_now = 0
// (it holds nothing yet) makes the reservation count in full whatever the ramp-up window.
StartDecision Commit(const PendingJob& job, const NodeChoice& choice, NodeState& node, UnixMs now) {
  StartDecision d{job.id, node.name, {}, 0, job.cpus};
  for (const GpuPick& p : choice.picks) {
    GpuState& gpu = node.gpus[p.pos];
    uint64_t bytes = job.exclusive() ? gpu.total_bytes : NeededBytes(job, gpu);
    gpu.holdings.push_back({job.id, bytes, 0, job.exclusive(), now});
    d.gpu_indices.push_back(gpu.index);
    d.reserved_bytes = std::max(d.reserved_bytes, bytes);
  }
  std::sort(d.gpu_indices.begin(), d.gpu_indices.end());
  node.cpu_slots_used += job.cpus;
  node.host_mem_used = SatAdd(node.host_mem_used, job.host_mem_bytes);
  return d;
}

// ---- Reasons: why a job was not started, in the words a user needs to act on it. ----

// " on node a" where there is more than one node to tell apart.
std::string OnNode(const Pass& p, size_t pos) {
  return p.size() > 1 ? fmt::format(" on node {}", p.node(pos).name) : "";
}

std::string GpuName(const Pass& p, size_t node, const GpuState& gpu) {
  return p.size() > 1 ? fmt::format("{}/GPU {}", p.node(node).name, gpu.index)
                      : fmt::format("GPU {}", gpu.index);
}

std::string NeedText(const PendingJob& job) {
  std::string need = job.mem_bytes ? FormatBytes(*job.mem_bytes)
                                   : fmt::format("{}% of its memory", job.mem_percent.value_or(0));
  return fmt::format("needs {} with {} usable{}", Plural(job.gpus, "GPU"), need,
                     job.gpus > 1 ? " on one node" : "");
}

// The open GPU with the most usable memory that a shared job could join.
std::string BestGpuText(const PendingJob& job, const Pass& p) {
  const GpuState* best = nullptr;
  size_t best_node = 0;
  uint64_t best_usable = 0;
  bool any_open = false;
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      const GpuState& gpu = node.gpus[i];
      if (!p.Open(job, n, i, kIgnoreNone)) continue;
      any_open = true;
      uint64_t usable = UsableBytes(gpu, p.config, p.now);
      if (HeldExclusively(gpu) || (best != nullptr && usable <= best_usable)) continue;
      best = &gpu;
      best_node = n;
      best_usable = usable;
    }
  }
  if (!any_open) return "no GPU is open to it";
  if (best == nullptr) return "every GPU is held by an exclusive job";
  std::string text = fmt::format("best: GPU {} with {}{}", best->index, FormatBytes(best_usable),
                                 OnNode(p, best_node));
  if (job.mem_percent && !job.mem_bytes) {
    text += fmt::format(" (needs {} there)", FormatBytes(NeededBytes(job, *best)));
  }
  return text;
}

std::string LargestGpuNote(const PendingJob& job, const Pass& p) {
  uint64_t largest = 0;
  for (size_t n = 0; n < p.size(); ++n) {
    for (const GpuState& gpu : p.node(n).gpus) largest = std::max(largest, gpu.total_bytes);
  }
  if (!job.mem_bytes || *job.mem_bytes <= largest) return "";
  return fmt::format("; no GPU is that large (largest: {})", FormatBytes(largest));
}

std::string SharedReason(const PendingJob& job, const Pass& p) {
  std::string head = NeedText(job);
  std::string too_large = LargestGpuNote(job, p);
  if (!too_large.empty()) return head + too_large;
  size_t best_node = 0;
  std::vector<GpuPick> best_picks;
  for (size_t n = 0; n < p.size(); ++n) {
    std::vector<GpuPick> picks = FittingGpus(job, p, n);
    if (picks.size() > best_picks.size()) {
      best_node = n;
      best_picks = std::move(picks);
    }
  }
  if (best_picks.empty()) return head + "; " + BestGpuText(job, p);
  std::vector<std::string> gpus;
  for (const GpuPick& pick : best_picks) {
    const GpuState& gpu = p.node(best_node).gpus[pick.pos];
    gpus.push_back(
        fmt::format("GPU {} with {}", gpu.index, FormatBytes(UsableBytes(gpu, p.config, p.now))));
  }
  std::string room;
  if (p.size() > 1) {
    room = fmt::format("at most {} on any node {} room (node {}: ", best_picks.size(),
                       best_picks.size() == 1 ? "has" : "have", p.node(best_node).name);
  } else {
    room = fmt::format("only {} {} room (", best_picks.size(),
                       best_picks.size() == 1 ? "has" : "have");
  }
  return fmt::format("{}; {}{})", head, room, fmt::join(gpus, ", "));
}

std::string TakenBy(const GpuState& gpu) {
  std::vector<std::string> parts;
  if (!gpu.holdings.empty()) {
    std::vector<JobId> ids;
    for (const Holding& h : gpu.holdings) ids.push_back(h.job);
    parts.push_back(fmt::format("job{} {}", ids.size() == 1 ? "" : "s", fmt::join(ids, ", ")));
  }
  if (gpu.foreign_processes > 0) {
    parts.push_back(fmt::format("{} other process{}", gpu.foreign_processes,
                                gpu.foreign_processes == 1 ? "" : "es"));
  }
  return fmt::format("{}", fmt::join(parts, " and "));
}

constexpr size_t kMaxListed = 8;

// "a, b, c, 5 more": lists stay readable on a large cluster.
std::string Listed(std::vector<std::string> items, size_t total) {
  if (total > items.size()) items.push_back(fmt::format("{} more", total - items.size()));
  return fmt::format("{}", fmt::join(items, ", "));
}

std::string ExclusiveReason(const PendingJob& job, const Pass& p) {
  std::string text = fmt::format("needs {} whole GPU{} (no other job or process on {}){}", job.gpus,
                                 job.gpus == 1 ? "" : "s", job.gpus == 1 ? "it" : "them",
                                 job.gpus > 1 ? " on one node" : "");
  size_t most_free = 0;
  size_t most_free_node = 0;
  std::vector<std::string> taken;
  size_t taken_count = 0;
  for (size_t n = 0; n < p.size(); ++n) {
    size_t free = FittingGpus(job, p, n).size();
    if (free > most_free) std::tie(most_free, most_free_node) = std::pair(free, n);
    for (const GpuState& gpu : p.node(n).gpus) {
      if (gpu.holdings.empty() && gpu.foreign_processes == 0) continue;
      if (++taken_count <= kMaxListed) {
        taken.push_back(fmt::format("{} by {}", GpuName(p, n, gpu), TakenBy(gpu)));
      }
    }
  }
  text += most_free == 0 ? "; none is free"
                         : fmt::format("; only {} {} free{}", most_free,
                                       most_free == 1 ? "is" : "are", OnNode(p, most_free_node));
  if (taken_count > 0) text += "; taken: " + Listed(std::move(taken), taken_count);
  return text;
}

// Called when some node has the GPUs the job needs but none also has its CPU slots (or host
// memory).
std::string HostReason(const PendingJob& job, const Pass& p) {
  if (p.size() == 0) return fmt::format("needs {}; no node is up", Plural(job.cpus, "CPU slot"));
  size_t best = p.size();
  bool mem_short = true;
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    if (FittingGpus(job, p, n).size() < static_cast<size_t>(job.gpus)) continue;
    if (FreeSlots(node) >= job.cpus && !HostMemFits(job, node)) continue;
    mem_short = false;
    if (best == p.size() || FreeSlots(node) > FreeSlots(p.node(best))) best = n;
  }
  if (mem_short) {
    return fmt::format("needs {} of host memory; no node where its GPUs fit has it free",
                       FormatBytes(job.host_mem_bytes));
  }
  std::string head = fmt::format("needs {}", Plural(job.cpus, "CPU slot"));
  const NodeState& node = p.node(best);
  if (p.size() == 1) {
    return fmt::format("{}; {} of {} free", head, FreeSlots(node), node.cpu_slots);
  }
  return fmt::format("{}; the most free{}: {} of {}, on node {}", head,
                     job.gpus > 0 ? " where its GPUs fit" : "", FreeSlots(node), node.cpu_slots,
                     node.name);
}

bool GpusFitSomewhere(const PendingJob& job, const Pass& p) {
  for (size_t n = 0; n < p.size(); ++n) {
    if (FittingGpus(job, p, n).size() >= static_cast<size_t>(job.gpus)) return true;
  }
  return false;
}

std::string AllowlistText(const PolicyConfig& config) {
  return fmt::format("the device allowlist ({})", fmt::join(config.devices, ","));
}

// Whether RequestReason has nothing to say: the hot path of a long queue, no string built.
bool Placeable(const PendingJob& job, const Pass& p) {
  return job.not_before <= p.now && job.gpus >= 0 && job.cpus >= 0 &&
         (job.gpus == 0 || (job.gpus <= p.max_gpus() && job.gpus <= p.max_allowed()));
}

// Reasons that need no look at the GPUs' state; "" when there is none.
std::string RequestReason(const PendingJob& job, const Pass& p) {
  if (job.not_before > p.now) {
    uint64_t ms = ElapsedMs(job.not_before, p.now);
    uint64_t secs = ms / 1000 + (ms % 1000 != 0 ? 1 : 0);
    return fmt::format("retrying after out of memory in {}s", secs);
  }
  if (job.gpus < 0 || job.cpus < 0) {
    return fmt::format("asks for {} and {}; cannot be placed", Plural(job.gpus, "GPU"),
                       Plural(job.cpus, "CPU slot"));
  }
  int largest = p.max_gpus();
  if (job.gpus > 0 && largest == 0)
    return fmt::format("needs {}; no node has GPUs", Plural(job.gpus, "GPU"));
  if (job.gpus > largest) {
    return fmt::format("needs {}; the largest node has {}", Plural(job.gpus, "GPU"), largest);
  }
  if (job.gpus > p.max_allowed()) {
    return fmt::format("needs {}; {} leaves {} on any node", Plural(job.gpus, "GPU"),
                       AllowlistText(p.config), p.max_allowed());
  }
  return "";
}

// Why a GPU the job would fit is closed to it; "" when it is open.
std::string ClosedText(const PendingJob& job, const Pass& p, size_t n, size_t i) {
  const GpuState& gpu = p.node(n).gpus[i];
  if (!p.Allowed(gpu)) return "not in the device allowlist";
  if (!p.BelowMaxJobs(gpu)) {
    return fmt::format("has {} (max-jobs-per-gpu {})", Plural(gpu.holdings.size(), "job"),
                       p.config.max_jobs_per_gpu);
  }
  JobId held = p.HeldFor(n, i);
  if (held != 0 && held != job.id) return fmt::format("held for job {}", held);
  return "";
}

// "; GPU 2 held for job 7, GPU 3 not in the device allowlist": the GPUs the job would fit
// but may not use, when limits or holds close some.
std::string ClosedNote(const PendingJob& job, const Pass& p) {
  if (job.gpus <= 0 || (!p.Limited() && !p.AnyHolds())) return "";
  std::vector<std::string> closed;
  size_t count = 0;
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      std::string why = ClosedText(job, p, n, i);
      if (why.empty() || !LeftAfter(job, node.gpus[i], p.config, p.now)) continue;
      if (++count <= kMaxListed) closed.push_back(GpuName(p, n, node.gpus[i]) + " " + why);
    }
  }
  return count == 0 ? "" : "; would fit but closed: " + Listed(std::move(closed), count);
}

std::string WhyWaiting(const PendingJob& job, const Pass& p) {
  std::string reason = RequestReason(job, p);
  if (!reason.empty()) return reason;
  if (job.gpus == 0 || GpusFitSomewhere(job, p)) return HostReason(job, p);
  std::string why = job.exclusive() ? ExclusiveReason(job, p) : SharedReason(job, p);
  return why + ClosedNote(job, p);
}

std::string HeldNote(const Pass& p, JobId job) {
  const auto& [n, gpus] = p.holds().at(job);
  std::vector<std::string> names;
  for (size_t g : gpus) names.push_back(GpuName(p, n, p.node(n).gpus[g]));
  return fmt::format("; waited past the aging limit: {} held for it", fmt::join(names, ", "));
}

// ---- Starvation protection: GPUs held for jobs that waited past the aging limit. ----

// How far a GPU is from taking the job, smaller first: for an exclusive job the jobs and
// processes in the way, then bytes short; for a shared one the other way round. nullopt:
// never (the job is larger than the GPU).
std::optional<std::pair<uint64_t, uint64_t>> Distance(const PendingJob& job, const GpuState& gpu,
                                                      const PolicyConfig& config, UnixMs now) {
  uint64_t capacity = SatSub(gpu.total_bytes, config.headroom_bytes);
  uint64_t needed = job.exclusive() ? capacity : NeededBytes(job, gpu);
  if (needed > capacity) return std::nullopt;
  uint64_t short_by = SatSub(needed, UsableBytes(gpu, config, now));
  uint64_t in_the_way =
      gpu.holdings.size() + static_cast<uint64_t>(std::max(0, gpu.foreign_processes));
  if (job.exclusive()) return std::pair(in_the_way, short_by);
  return std::pair(short_by, in_the_way);
}

// GPUs on node `n` the job may hold (allowed, not held for an earlier job, large enough),
// nearest first.
std::vector<std::pair<std::pair<uint64_t, uint64_t>, size_t>> HoldCandidates(const PendingJob& job,
                                                                             const Pass& p,
                                                                             size_t n) {
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, size_t>> out;
  const NodeState& node = p.node(n);
  if (node.cpu_slots < job.cpus) return out;
  if (node.host_mem_bytes > 0 && job.host_mem_bytes > node.host_mem_bytes) return out;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    const GpuState& gpu = node.gpus[i];
    if (!p.Allowed(gpu) || p.HeldFor(n, i) != 0) continue;
    if (auto d = Distance(job, gpu, p.config, p.now)) out.emplace_back(*d, i);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The previous hold, if it is still a valid choice.
std::optional<std::pair<size_t, std::vector<size_t>>> KeptHold(const PendingJob& job, const Pass& p,
                                                               std::span<const Hold> previous) {
  auto prev = std::find_if(previous.begin(), previous.end(),
                           [&job](const Hold& h) { return h.job == job.id; });
  if (prev == previous.end() || prev->gpu_indices.size() != static_cast<size_t>(job.gpus)) {
    return std::nullopt;
  }
  for (size_t n = 0; n < p.size(); ++n) {
    if (p.node(n).name != prev->node) continue;
    auto candidates = HoldCandidates(job, p, n);
    std::vector<size_t> gpus;
    for (int index : prev->gpu_indices) {
      auto c = std::find_if(candidates.begin(), candidates.end(), [&](const auto& cand) {
        return p.node(n).gpus[cand.second].index == index;
      });
      if (c == candidates.end()) return std::nullopt;
      gpus.push_back(c->second);
    }
    return std::pair(n, gpus);
  }
  return std::nullopt;
}

// Where the job would fit soonest: the node whose nearest GPUs are least short of it.
std::optional<std::pair<size_t, std::vector<size_t>>> ChooseHold(const PendingJob& job,
                                                                 const Pass& p) {
  std::optional<std::pair<size_t, std::vector<size_t>>> best;
  std::pair<uint64_t, uint64_t> best_cost;
  size_t k = static_cast<size_t>(job.gpus);
  for (size_t n = 0; n < p.size(); ++n) {
    auto candidates = HoldCandidates(job, p, n);
    if (candidates.size() < k) continue;
    std::pair<uint64_t, uint64_t> cost{0, 0};
    std::vector<size_t> gpus;
    for (size_t i = 0; i < k; ++i) {
      cost.first = SatAdd(cost.first, candidates[i].first.first);
      cost.second = SatAdd(cost.second, candidates[i].first.second);
      gpus.push_back(candidates[i].second);
    }
    if (!best || cost < best_cost) std::tie(best, best_cost) = std::pair(std::pair(n, gpus), cost);
  }
  return best;
}

// What a job asks for, apart from who it is. Within a pass resources only shrink, so once a
// shape does not fit, no later job of that shape fits either, and they share one reason.
using Shape = std::tuple<int, std::optional<uint64_t>, std::optional<double>, int, uint64_t>;

Shape ShapeOf(const PendingJob& job) {
  return {job.gpus, job.mem_bytes, job.mem_percent, job.cpus, job.host_mem_bytes};
}

std::optional<NodeChoice> Choose(const PendingJob& job, const Pass& p) {
  return p.config.workload.empty() ? ChooseNode(job, p) : ChooseNodeFgd(job, p);
}

// Phase one: in placement order, each aged job gets GPUs held for it, so no job placed
// before it in this pass or later ones takes them: its previous hold while still valid, else
// the GPUs it would use now, else those where it would fit soonest.
void HoldForAged(std::span<const PendingJob* const> order, Pass& p,
                 std::span<const Hold> previous) {
  if (p.config.aging_ms <= 0) return;
  std::set<Shape> hopeless;  // holds only shrink what is left to hold
  int blocking = 0;          // holds for jobs that cannot start now
  for (const PendingJob* job : order) {
    if (p.AllHeld()) return;
    if (job->gpus <= 0 || !Aged(*job, p.config, p.now) || !Placeable(*job, p)) continue;
    Shape shape = ShapeOf(*job);
    if (hopeless.count(shape)) continue;
    // Past max_holds, an aged job is held for only where it starts now: every GPU held
    // idle for a job that cannot start yet is lost to backfill, and holding for a whole
    // backlog of aged jobs idles the cluster (the Philly replay in docs/scheduling.md).
    bool capped = p.config.max_holds > 0 && blocking >= p.config.max_holds;
    std::optional<std::pair<size_t, std::vector<size_t>>> hold;
    if (!capped) hold = KeptHold(*job, p, previous);
    bool starts_now = false;
    if (!hold) {
      if (std::optional<NodeChoice> now = ChooseNode(*job, p)) {
        std::vector<size_t> gpus;
        for (const GpuPick& pick : now->picks) gpus.push_back(pick.pos);
        hold = std::pair(now->node, std::move(gpus));
        starts_now = true;
      }
    }
    if (!hold && !capped) hold = ChooseHold(*job, p);
    if (!hold) {  // once capped, a shape that cannot start now never will in this phase
      hopeless.insert(shape);
      continue;
    }
    if (!starts_now) ++blocking;
    p.Hold(hold->first, hold->second, job->id);
  }
}

std::vector<Hold> HoldsInForce(const Pass& p) {
  std::vector<Hold> holds;
  for (const auto& [job, where] : p.holds()) {
    Hold h{job, p.node(where.first).name, {}};
    for (size_t g : where.second) h.gpu_indices.push_back(p.node(where.first).gpus[g].index);
    std::sort(h.gpu_indices.begin(), h.gpu_indices.end());
    holds.push_back(std::move(h));
  }
  return holds;
}

// A job left waiting, with the shape its reason is shared by (-1: a reason of its own).
struct Waiter {
  const PendingJob* job;
  JobId id;  // a copy: explaining a long queue then touches only this array
  int shape;
};

// The distinct shapes of a pass, numbered; a long queue has few, often in runs.
class Shapes {
 public:
  int Index(const PendingJob& job) {
    Shape shape = ShapeOf(job);
    if (last_ >= 0 && shapes_[last_] == shape) return last_;
    auto [it, added] = index_.try_emplace(shape, static_cast<int>(shapes_.size()));
    if (added) shapes_.push_back(shape);
    return last_ = it->second;
  }
  size_t size() const { return shapes_.size(); }

 private:
  std::map<Shape, int> index_;
  std::vector<Shape> shapes_;
  int last_ = -1;
};

// Phase two: start what fits, in order; returns the jobs left waiting.
std::vector<Waiter> StartWhatFits(std::span<const PendingJob* const> order, Pass& p,
                                  PlacementResult& result, Shapes& shapes) {
  std::vector<Waiter> waiting;
  waiting.reserve(order.size());
  std::vector<char> failed;  // by shape: keeps a pass over a long queue of alike jobs linear
  for (const PendingJob* job : order) {
    if (!Placeable(*job, p)) {
      waiting.push_back({job, job->id, -1});
      continue;
    }
    bool holder = p.AnyHolds() && p.HoldsFor(job->id);
    int shape = shapes.Index(*job);
    if (failed.size() < shapes.size()) failed.resize(shapes.size(), 0);
    std::optional<NodeChoice> choice;
    if (holder || !failed[shape]) choice = Choose(*job, p);
    if (!choice) {
      if (!holder) failed[shape] = 1;
      waiting.push_back({job, job->id, holder ? -1 : shape});
      continue;
    }
    result.starts.push_back(Commit(*job, *choice, p.Mutable(choice->node), p.now));
    // Its other held GPUs open up again: shapes that failed may fit now.
    if (holder && p.Release(job->id)) std::fill(failed.begin(), failed.end(), 0);
  }
  return waiting;
}

// Explained against the pass's final state: what a user sees until the next pass. A job
// that did not fit earlier in the pass fits no better now, as a pass only takes resources.
void ExplainWaiting(std::span<const Waiter> waiting, const Pass& p, size_t shape_count,
                    PlacementResult& result) {
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> explained(shape_count, kNone);
  result.waiting.reserve(waiting.size());
  auto add = [&result](std::string text) {
    result.reason_texts.push_back(std::move(text));
    return static_cast<uint32_t>(result.reason_texts.size() - 1);
  };
  for (const Waiter& w : waiting) {
    if (w.shape < 0) {
      std::string why = WhyWaiting(*w.job, p);
      if (p.HoldsFor(w.job->id)) why += HeldNote(p, w.job->id);
      result.waiting.push_back({w.job->id, add(std::move(why))});
      continue;
    }
    uint32_t& reason = explained[w.shape];
    if (reason == kNone) reason = add(WhyWaiting(*w.job, p));
    result.waiting.push_back({w.id, reason});
  }
}

PlacementResult Run(std::span<const PendingJob* const> order, Pass& p,
                    std::span<const Hold> previous) {
  PlacementResult result;
  HoldForAged(order, p, previous);
  Shapes shapes;
  std::vector<Waiter> waiting = StartWhatFits(order, p, result, shapes);
  ExplainWaiting(waiting, p, shapes.size(), result);
  result.holds = HoldsInForce(p);
  return result;
}

std::vector<const PendingJob*> InOrder(std::span<const PendingJob> jobs, const UsageByUser& usage) {
  std::vector<const PendingJob*> order;
  order.reserve(jobs.size());
  for (const PendingJob& j : jobs) order.push_back(&j);
  std::stable_sort(order.begin(), order.end(), [&usage](const PendingJob* a, const PendingJob* b) {
    return PlacedBefore(*a, *b, usage);
  });
  return order;
}

double UsageOf(const UsageByUser& usage, const std::string& user) {
  auto it = usage.find(user);
  return it == usage.end() ? 0.0 : it->second;
}

void FairShareStanding(const PendingJob& job, std::span<const PendingJob> jobs,
                       const UsageByUser& usage, Explanation& e) {
  e.user = job.user;
  e.user_gpu_hours = UsageOf(usage, job.user);
  std::set<std::string> users;
  for (const PendingJob& j : jobs) users.insert(j.user);
  e.users_waiting = static_cast<int>(users.size());
  e.user_rank = 1 + static_cast<int>(std::count_if(users.begin(), users.end(), [&](const auto& u) {
                  return UsageOf(usage, u) < e.user_gpu_hours;
                }));
}

std::vector<GpuExplanation> GpusFor(const PendingJob& job, const Pass& p) {
  std::vector<GpuExplanation> out;
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      const GpuState& gpu = node.gpus[i];
      GpuExplanation g;
      g.node = node.name;
      g.index = gpu.index;
      g.usable_bytes = UsableBytes(gpu, p.config, p.now);
      g.total_bytes = gpu.total_bytes;
      for (const Holding& h : gpu.holdings) g.jobs.push_back(h.job);
      g.foreign_processes = gpu.foreign_processes;
      g.closed = ClosedText(job, p, n, i);
      g.fits = job.gpus > 0 && g.closed.empty() && LeftAfter(job, gpu, p.config, p.now).has_value();
      g.held_for = p.HeldFor(n, i);
      out.push_back(std::move(g));
    }
  }
  return out;
}

}  // namespace

uint64_t UsableBytes(const GpuState& gpu, const PolicyConfig& config, UnixMs now) {
  uint64_t outstanding = 0;
  for (const Holding& h : gpu.holdings)
    outstanding = SatAdd(outstanding, Outstanding(h, config, now));
  return SatSub(SatSub(gpu.free_bytes, outstanding), config.headroom_bytes);
}

uint64_t NeededBytes(const PendingJob& job, const GpuState& gpu) {
  if (job.mem_bytes) return *job.mem_bytes;
  if (job.mem_percent) {
    double pct = std::clamp(*job.mem_percent, 0.0, 100.0);
    if (std::isnan(pct)) return gpu.total_bytes;
    double total = static_cast<double>(gpu.total_bytes);
    double bytes = std::ceil(total * pct / 100.0);
    return bytes >= total ? gpu.total_bytes : static_cast<uint64_t>(bytes);
  }
  return job.gpus > 0 ? gpu.total_bytes : 0;
}

bool PlacedBefore(const PendingJob& a, const PendingJob& b, const UsageByUser& usage) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.user != b.user) {
    double ua = UsageOf(usage, a.user), ub = UsageOf(usage, b.user);
    if (ua != ub) return ua < ub;
  }
  return std::pair(a.submitted_at, a.id) < std::pair(b.submitted_at, b.id);
}

PlacementResult PlaceOrdered(std::span<const PendingJob* const> ordered,
                             std::span<const NodeState> nodes, const PolicyConfig& config,
                             UnixMs now, std::span<const Hold> previous_holds) {
  Pass pass(nodes, config, now);
  return Run(ordered, pass, previous_holds);
}

PlacementResult Place(std::span<const PendingJob> jobs, std::span<const NodeState> nodes,
                      const PolicyConfig& config, UnixMs now, const UsageByUser& usage,
                      std::span<const Hold> previous_holds) {
  std::vector<const PendingJob*> order = InOrder(jobs, usage);
  return PlaceOrdered(order, nodes, config, now, previous_holds);
}

Explanation Explain(JobId id, std::span<const PendingJob> jobs, std::span<const NodeState> nodes,
                    const PolicyConfig& config, UnixMs now, const UsageByUser& usage,
                    std::span<const Hold> previous_holds) {
  Explanation e;
  e.job = id;
  std::vector<const PendingJob*> order = InOrder(jobs, usage);
  auto at =
      std::find_if(order.begin(), order.end(), [id](const PendingJob* j) { return j->id == id; });
  if (at == order.end()) return e;
  const PendingJob& job = **at;
  e.waiting = true;
  e.ahead = static_cast<int>(at - order.begin());
  e.position = e.ahead + 1;
  FairShareStanding(job, jobs, usage, e);
  Pass pass(nodes, config, now);
  HoldForAged(order, pass, previous_holds);
  e.gpus = GpusFor(job, pass);
  PlacementResult result;
  Shapes shapes;
  std::vector<Waiter> waiting = StartWhatFits(order, pass, result, shapes);
  ExplainWaiting(waiting, pass, shapes.size(), result);
  e.holds = HoldsInForce(pass);
  e.would_start = std::any_of(result.starts.begin(), result.starts.end(),
                              [id](const StartDecision& d) { return d.job == id; });
  for (const PlacementResult::Waiting& w : result.waiting) {
    if (w.job == id) e.reason = result.ReasonOf(w);
  }
  return e;
}

std::vector<std::pair<JobId, std::string>> PlacementResult::Reasons() const {
  std::vector<std::pair<JobId, std::string>> out;
  out.reserve(waiting.size());
  for (const Waiting& w : waiting) out.emplace_back(w.job, ReasonOf(w));
  return out;
}

UnixMs NextPassDue(std::span<const PendingJob* const> waiting, std::span<const NodeState> nodes,
                   const PolicyConfig& config, UnixMs now) {
  UnixMs next = 0;
  auto consider = [&](UnixMs at) {
    if (at > now && (next == 0 || at < next)) next = at;
  };
  for (const PendingJob* job : waiting) {
    consider(job->not_before);
    // Aged() is strict: one millisecond past the limit.
    if (config.aging_ms > 0) consider(SatAddMs(SatAddMs(WaitingSince(*job), config.aging_ms), 1));
  }
  if (waiting.empty() || config.ramp_up_ms <= 0) return next;
  for (const NodeState& node : nodes) {
    for (const GpuState& gpu : node.gpus) {
      for (const Holding& h : gpu.holdings) {
        if (!h.used_now) consider(SatAddMs(h.started_at, config.ramp_up_ms));
      }
    }
  }
  return next;
}

}  // namespace trainq
