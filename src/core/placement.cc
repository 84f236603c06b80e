#include "src/core/placement.h"

#include <algorithm>
#include <set>
#include <map>
#include <cmath>
#include <limits>
#include <numeric>
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

std::string Plural(int64_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

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

// The node's GPUs that fit the job, best first: unused GPUs, then best fit, then index.
std::vector<GpuPick> FittingGpus(const PendingJob& job, const NodeState& node,
                                 const PolicyConfig& config, UnixMs now) {
  std::vector<GpuPick> picks;
  if (job.gpus == 0) return picks;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    std::optional<uint64_t> left = LeftAfter(job, node.gpus[i], config, now);
    if (left) picks.push_back({i, !node.gpus[i].holdings.empty(), *left});
  }
  std::sort(picks.begin(), picks.end(), [&node](const GpuPick& a, const GpuPick& b) {
    return std::tuple(a.used, a.left, node.gpus[a.pos].index) <
           std::tuple(b.used, b.left, node.gpus[b.pos].index);
  });
  return picks;
}

std::optional<NodeChoice> ChooseOnNode(const PendingJob& job, const NodeState& node,
                                       size_t node_pos, const PolicyConfig& config, UnixMs now) {
  if (FreeSlots(node) < job.cpus) return std::nullopt;
  std::vector<GpuPick> picks = FittingGpus(job, node, config, now);
  if (picks.size() < static_cast<size_t>(job.gpus)) return std::nullopt;
  picks.resize(static_cast<size_t>(job.gpus));
  NodeChoice choice{node_pos, std::move(picks), 0, 0};
  for (const GpuPick& p : choice.picks) {
    choice.used_count += p.used ? 1 : 0;
    choice.left = SatAdd(choice.left, p.left);
  }
  return choice;
}

// Over nodes the same preference as within one: fewer used GPUs, then least left over;
// ties keep node order.
std::optional<NodeChoice> ChooseNode(const PendingJob& job, std::span<const NodeState> nodes,
                                     const PolicyConfig& config, UnixMs now) {
  std::optional<NodeChoice> best;
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::optional<NodeChoice> c = ChooseOnNode(job, nodes[i], i, config, now);
    if (c &&
        (!best || std::pair(c->used_count, c->left) < std::pair(best->used_count, best->left))) {
      best = std::move(c);
    }
  }
  return best;
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
  return d;
}

std::vector<size_t> PlacementOrder(std::span<const PendingJob> jobs) {
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [jobs](size_t a, size_t b) {
    const PendingJob& x = jobs[a];
    const PendingJob& y = jobs[b];
    return std::tuple(-static_cast<int64_t>(x.priority), x.submitted_at, x.id) <
           std::tuple(-static_cast<int64_t>(y.priority), y.submitted_at, y.id);
  });
  return order;
}

// ---- Reasons: why a job was not started, in the words a user needs to act on it. ----

// " on node a" where there is more than one node to tell apart.
std::string OnNode(std::span<const NodeState> nodes, size_t pos) {
  return nodes.size() > 1 ? fmt::format(" on node {}", nodes[pos].name) : "";
}

std::string GpuName(std::span<const NodeState> nodes, size_t node, const GpuState& gpu) {
  return nodes.size() > 1 ? fmt::format("{}/GPU {}", nodes[node].name, gpu.index)
                          : fmt::format("GPU {}", gpu.index);
}

std::string NeedText(const PendingJob& job) {
  std::string need = job.mem_bytes ? FormatBytes(*job.mem_bytes)
                                   : fmt::format("{}% of its memory", job.mem_percent.value_or(0));
  return fmt::format("needs {} with {} usable{}", Plural(job.gpus, "GPU"), need,
                     job.gpus > 1 ? " on one node" : "");
}

// The GPU with the most usable memory that a shared job could join.
std::string BestGpuText(const PendingJob& job, std::span<const NodeState> nodes,
                        const PolicyConfig& config, UnixMs now) {
  const GpuState* best = nullptr;
  size_t best_node = 0;
  uint64_t best_usable = 0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (const GpuState& gpu : nodes[n].gpus) {
      uint64_t usable = UsableBytes(gpu, config, now);
      if (HeldExclusively(gpu) || (best != nullptr && usable <= best_usable)) continue;
      best = &gpu;
      best_node = n;
      best_usable = usable;
    }
  }
  if (best == nullptr) return "every GPU is held by an exclusive job";
  std::string text = fmt::format("best: GPU {} with {}{}", best->index, FormatBytes(best_usable),
                                 OnNode(nodes, best_node));
  if (job.mem_percent && !job.mem_bytes) {
    text += fmt::format(" (needs {} there)", FormatBytes(NeededBytes(job, *best)));
  }
  return text;
}

std::string LargestGpuNote(const PendingJob& job, std::span<const NodeState> nodes) {
  uint64_t largest = 0;
  for (const NodeState& node : nodes) {
    for (const GpuState& gpu : node.gpus) largest = std::max(largest, gpu.total_bytes);
  }
  if (!job.mem_bytes || *job.mem_bytes <= largest) return "";
  return fmt::format("; no GPU is that large (largest: {})", FormatBytes(largest));
}

std::string SharedReason(const PendingJob& job, std::span<const NodeState> nodes,
                         const PolicyConfig& config, UnixMs now) {
  std::string head = NeedText(job);
  std::string too_large = LargestGpuNote(job, nodes);
  if (!too_large.empty()) return head + too_large;
  size_t best_node = 0;
  std::vector<GpuPick> best_picks;
  for (size_t n = 0; n < nodes.size(); ++n) {
    std::vector<GpuPick> picks = FittingGpus(job, nodes[n], config, now);
    if (picks.size() > best_picks.size()) {
      best_node = n;
      best_picks = std::move(picks);
    }
  }
  if (best_picks.empty()) return head + "; " + BestGpuText(job, nodes, config, now);
  std::vector<std::string> gpus;
  for (const GpuPick& p : best_picks) {
    const GpuState& gpu = nodes[best_node].gpus[p.pos];
    gpus.push_back(
        fmt::format("GPU {} with {}", gpu.index, FormatBytes(UsableBytes(gpu, config, now))));
  }
  std::string room;
  if (nodes.size() > 1) {
    room = fmt::format("at most {} on any node {} room (node {}: ", best_picks.size(),
                       best_picks.size() == 1 ? "has" : "have", nodes[best_node].name);
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

std::string ExclusiveReason(const PendingJob& job, std::span<const NodeState> nodes,
                            const PolicyConfig& config, UnixMs now) {
  constexpr size_t kMaxListed = 8;
  std::string text = fmt::format("needs {} whole GPU{} (no other job or process on {}){}", job.gpus,
                                 job.gpus == 1 ? "" : "s", job.gpus == 1 ? "it" : "them",
                                 job.gpus > 1 ? " on one node" : "");
  size_t most_free = 0;
  size_t most_free_node = 0;
  std::vector<std::string> taken;
  for (size_t n = 0; n < nodes.size(); ++n) {
    size_t free = FittingGpus(job, nodes[n], config, now).size();
    if (free > most_free) std::tie(most_free, most_free_node) = std::pair(free, n);
    for (const GpuState& gpu : nodes[n].gpus) {
      std::string by = TakenBy(gpu);
      if (!by.empty()) taken.push_back(fmt::format("{} by {}", GpuName(nodes, n, gpu), by));
    }
  }
  text += most_free == 0
              ? "; none is free"
              : fmt::format("; only {} {} free{}", most_free, most_free == 1 ? "is" : "are",
                            OnNode(nodes, most_free_node));
  if (taken.size() > kMaxListed) {
    size_t more = taken.size() - kMaxListed;
    taken.resize(kMaxListed);
    taken.push_back(fmt::format("{} more", more));
  }
  if (!taken.empty()) text += fmt::format("; taken: {}", fmt::join(taken, ", "));
  return text;
}

// Called when some node has the GPUs the job needs but none also has its CPU slots.
std::string CpuReason(const PendingJob& job, std::span<const NodeState> nodes,
                      const PolicyConfig& config, UnixMs now) {
  std::string head = fmt::format("needs {}", Plural(job.cpus, "CPU slot"));
  if (nodes.empty()) return head + "; no node is up";
  size_t best = nodes.size();
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (FittingGpus(job, nodes[n], config, now).size() < static_cast<size_t>(job.gpus)) continue;
    if (best == nodes.size() || FreeSlots(nodes[n]) > FreeSlots(nodes[best])) best = n;
  }
  const NodeState& node = nodes[best];
  if (nodes.size() == 1) {
    return fmt::format("{}; {} of {} free", head, FreeSlots(node), node.cpu_slots);
  }
  return fmt::format("{}; the most free{}: {} of {}, on node {}", head,
                     job.gpus > 0 ? " where its GPUs fit" : "", FreeSlots(node), node.cpu_slots,
                     node.name);
}

bool GpusFitSomewhere(const PendingJob& job, std::span<const NodeState> nodes,
                      const PolicyConfig& config, UnixMs now) {
  return std::any_of(nodes.begin(), nodes.end(), [&](const NodeState& node) {
    return FittingGpus(job, node, config, now).size() >= static_cast<size_t>(job.gpus);
  });
}

// Reasons that need no look at the GPUs' state; "" when there is none.
std::string RequestReason(const PendingJob& job, std::span<const NodeState> nodes, UnixMs now) {
  if (job.not_before > now) {
    uint64_t ms = ElapsedMs(job.not_before, now);
    uint64_t secs = ms / 1000 + (ms % 1000 != 0 ? 1 : 0);
    return fmt::format("retrying after out of memory in {}s", secs);
  }
  if (job.gpus < 0 || job.cpus < 0) {
    return fmt::format("asks for {} and {}; cannot be placed", Plural(job.gpus, "GPU"),
                       Plural(job.cpus, "CPU slot"));
  }
  int largest = MaxGpusPerNode(nodes);
  if (job.gpus > 0 && largest == 0)
    return fmt::format("needs {}; no node has GPUs", Plural(job.gpus, "GPU"));
  if (job.gpus > largest) {
    return fmt::format("needs {}; the largest node has {}", Plural(job.gpus, "GPU"), largest);
  }
  return "";
}

std::string WhyWaiting(const PendingJob& job, std::span<const NodeState> nodes,
                       const PolicyConfig& config, UnixMs now) {
  std::string reason = RequestReason(job, nodes, now);
  if (!reason.empty()) return reason;
  if (job.gpus == 0 || GpusFitSomewhere(job, nodes, config, now))
    return CpuReason(job, nodes, config, now);
  if (job.exclusive()) return ExclusiveReason(job, nodes, config, now);
  return SharedReason(job, nodes, config, now);
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

namespace {

// What a job asks for, apart from who it is. Within a pass resources only shrink, so once a
// shape does not fit, no later job of that shape fits either, and they share one reason.
using Shape = std::tuple<int, std::optional<uint64_t>, std::optional<double>, int>;

Shape ShapeOf(const PendingJob& job) { return {job.gpus, job.mem_bytes, job.mem_percent, job.cpus}; }

}  // namespace

PlacementResult Place(std::span<const PendingJob> jobs, std::span<const NodeState> nodes,
                      const PolicyConfig& config, UnixMs now, const UsageByUser& /*usage*/,
                      std::span<const Hold> /*previous_holds*/) {
  std::vector<NodeState> work(nodes.begin(), nodes.end());
  PlacementResult result;
  std::vector<size_t> waiting;
  std::set<Shape> failed;  // keeps a pass over a long queue of alike jobs linear
  for (size_t i : PlacementOrder(jobs)) {
    const PendingJob& job = jobs[i];
    std::optional<NodeChoice> choice;
    bool placeable = RequestReason(job, work, now).empty();
    if (placeable && !failed.count(ShapeOf(job))) choice = ChooseNode(job, work, config, now);
    if (choice) {
      result.starts.push_back(Commit(job, *choice, work[choice->node], now));
      continue;
    }
    waiting.push_back(i);
    if (placeable) failed.insert(ShapeOf(job));
  }
  // Explained against the pass's final state: what a user sees until the next pass. A job
  // that did not fit earlier in the pass fits no better now, as a pass only takes resources.
  std::map<Shape, std::string> explained;
  for (size_t i : waiting) {
    const PendingJob& job = jobs[i];
    if (!RequestReason(job, work, now).empty()) {
      result.reasons.emplace_back(job.id, WhyWaiting(job, work, config, now));
      continue;
    }
    auto [it, fresh] = explained.try_emplace(ShapeOf(job));
    if (fresh) it->second = WhyWaiting(job, work, config, now);
    result.reasons.emplace_back(job.id, it->second);
  }
  return result;
}

int MaxGpusPerNode(std::span<const NodeState> nodes) {
  size_t most = 0;
  for (const NodeState& node : nodes) most = std::max(most, node.gpus.size());
  return static_cast<int>(most);
}

}  // namespace trainq
