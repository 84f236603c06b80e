// Reasons: why a job was not started, in the words a user needs to act on it.
#include <fmt/format.h>

#include "src/core/duration.h"
#include "src/core/placement_internal.h"
#include "trainq/size.h"

namespace trainq::placement_internal {

namespace {

std::string Plural(int64_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// " on node a" where there is more than one node to tell apart.
std::string OnNode(const Pass& p, size_t pos) {
  return p.size() > 1 ? fmt::format(" on node {}", p.node(pos).name) : "";
}

std::string GpuName(const Pass& p, size_t node, const GpuState& gpu) {
  return p.size() > 1 ? fmt::format("{}/GPU {}", p.node(node).name, gpu.index)
                      : fmt::format("GPU {}", gpu.index);
}

// What the job calls a GPU: "GPU", or its --gpu-type ("A100").
std::string GpuNoun(const PendingJob& job) {
  return job.gpu_type.empty() ? "GPU" : GpuTypeShown(job.gpu_type);
}

std::string NeedText(const PendingJob& job) {
  std::string need = job.mem_bytes ? FormatBytes(*job.mem_bytes)
                                   : fmt::format("{}% of its memory", job.mem_percent.value_or(0));
  return fmt::format("needs {} with {} usable{}", Plural(job.gpus, GpuNoun(job)), need,
                     job.gpus > 1 ? " on one node" : "");
}

// FittingGpus(job, p, n).size(), with no list built where the node's room says 0.
size_t FittingCount(const PendingJob& job, const Pass& p, size_t n) {
  return CouldFit(job, p, n) == 0 ? 0 : FittingGpus(job, p, n).size();
}

// The open GPU with the most usable memory that a shared job could join.
std::string BestGpuText(const PendingJob& job, const Pass& p) {
  const GpuState* best = nullptr;
  size_t best_node = 0;
  uint64_t best_usable = 0;
  bool any_open = false;
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    std::span<const GpuRoom> room = p.Room(n);
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      const GpuState& gpu = node.gpus[i];
      if (!p.Open(job, n, i, kIgnoreNone)) continue;
      any_open = true;
      uint64_t usable = room[i].usable;
      if (room[i].held_exclusively || (best != nullptr && usable <= best_usable)) continue;
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
    if (CouldFit(job, p, n) <= best_picks.size()) continue;  // it cannot have more
    std::vector<GpuPick> picks = FittingGpus(job, p, n);
    if (picks.size() > best_picks.size()) {
      best_node = n;
      best_picks = std::move(picks);
    }
  }
  if (best_picks.empty()) return head + "; " + BestGpuText(job, p);
  std::sort(best_picks.begin(), best_picks.end(),  // listed by index, as `trainq gpus` does
            [](const GpuPick& a, const GpuPick& b) { return a.pos < b.pos; });
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

// Which of a whole GPU's tests the GPU fails: a trainq job on it, another process, or memory
// in use by others (NVML lists no process for memory held from another container).
std::string TakenBy(const GpuState& gpu, const PolicyConfig& config) {
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
  uint64_t others = OthersUse(gpu);
  if (parts.empty() && others > config.whole_max_used_bytes) {
    return fmt::format("with {} in use by others (whole_gpu_max_used = {})", FormatBytes(others),
                       FormatBytes(config.whole_max_used_bytes));
  }
  return "by " + fmt::format("{}", fmt::join(parts, " and "));
}

constexpr size_t kMaxListed = 8;

// "a, b, c, 5 more": lists stay readable on a large cluster.
std::string Listed(std::vector<std::string> items, size_t total) {
  if (total > items.size()) items.push_back(fmt::format("{} more", total - items.size()));
  return fmt::format("{}", fmt::join(items, ", "));
}

std::string ExclusiveReason(const PendingJob& job, const Pass& p) {
  std::string text = fmt::format("needs {} whole {}{} (no other job or process on {}){}", job.gpus,
                                 GpuNoun(job), job.gpus == 1 ? "" : "s",
                                 job.gpus == 1 ? "it" : "them", job.gpus > 1 ? " on one node" : "");
  size_t most_free = 0;
  size_t most_free_node = 0;
  std::vector<std::string> taken;
  size_t taken_count = 0;
  for (size_t n = 0; n < p.size(); ++n) {
    size_t free = FittingCount(job, p, n);
    if (free > most_free) std::tie(most_free, most_free_node) = std::pair(free, n);
    std::span<const GpuRoom> room = p.Room(n);
    for (size_t i = 0; i < room.size(); ++i) {
      const GpuState& gpu = p.node(n).gpus[i];
      if (room[i].free || !Pass::TypeOk(job, gpu)) continue;
      if (++taken_count <= kMaxListed) {
        taken.push_back(fmt::format("{} {}", GpuName(p, n, gpu), TakenBy(gpu, p.config)));
      }
    }
  }
  if (!job.gpu_type.empty()) {  // the type census (TypeCensus) says which are taken, and by what
    return most_free == 0
               ? text
               : text + fmt::format("; only {} {} free{}", most_free, most_free == 1 ? "is" : "are",
                                    OnNode(p, most_free_node));
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
    if (!p.NodeOpen(job, n)) continue;
    if (FittingCount(job, p, n) < static_cast<size_t>(job.gpus)) continue;
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
  // What to change, where a slot count is what holds the job.
  constexpr std::string_view kRaise = " (raise cpu_slots: trainq config set cpu-slots N)";
  if (p.size() == 1) {
    return fmt::format("{}; {} of {} free{}", head, FreeSlots(node), node.cpu_slots, kRaise);
  }
  return fmt::format("{}; the most free{}: {} of {}, on node {}{}", head,
                     job.gpus > 0 ? " where its GPUs fit" : "", FreeSlots(node), node.cpu_slots,
                     node.name, kRaise);
}

bool GpusFitSomewhere(const PendingJob& job, const Pass& p) {
  for (size_t n = 0; n < p.size(); ++n) {
    if (p.NodeOpen(job, n) && FittingCount(job, p, n) >= static_cast<size_t>(job.gpus)) {
      return true;
    }
  }
  return false;
}

std::string AllowlistText(const PolicyConfig& config) {
  std::vector<std::string> parts;
  if (!config.devices.empty()) {
    parts.push_back(fmt::format("the device allowlist ({})", fmt::join(config.devices, ",")));
  }
  if (!config.paused_gpus.empty()) {
    parts.push_back(fmt::format("pausing GPUs {}", fmt::join(config.paused_gpus, ",")));
  }
  return fmt::format("{}", fmt::join(parts, " with "));
}

// Reasons that need no look at the GPUs' state; "" when there is none.
std::string RequestReason(const PendingJob& job, const Pass& p) {
  if (p.config.paused) return "paused: no job starts until trainq resume (running jobs go on)";
  if (job.not_before >= kHeldNotBefore) return HeldReason(job.id, job.held_by);
  if (job.not_before > p.now) {
    uint64_t ms = ElapsedMs(job.not_before, p.now);
    uint64_t secs = ms / 1000 + (ms % 1000 != 0 ? 1 : 0);
    if (!job.lost_node.empty()) {
      return fmt::format(
          "node {} was judged lost: waiting for it to say how its attempt ended; runs "
          "elsewhere in {}s",
          job.lost_node, secs);
    }
    return fmt::format("retrying after out of memory in {}s", secs);
  }
  if (job.gpus < 0 || job.cpus < 0 || job.num_nodes < 1) {
    return fmt::format("asks for {} and {} on {}; cannot be placed", Plural(job.gpus, "GPU"),
                       Plural(job.cpus, "CPU slot"), Plural(job.num_nodes, "node"));
  }
  if (job.num_nodes > 1 && static_cast<size_t>(job.num_nodes) > p.size()) {
    return fmt::format("needs {} at once; the cluster has {}", Plural(job.num_nodes, "node"),
                       p.size());
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

}  // namespace

// Why a GPU the job would fit is closed to it; "" when it is open.
std::string ClosedText(const PendingJob& job, const Pass& p, size_t n, size_t i) {
  if (!p.NodeOpen(job, n)) return Pass::NodeClosedText(job, p.node(n));
  const GpuState& gpu = p.node(n).gpus[i];
  if (!Pass::TypeOk(job, gpu)) {
    return fmt::format("not of --gpu-type {} (it is {})", job.gpu_type,
                       gpu.model.empty() ? "of unknown model" : gpu.model);
  }
  if (p.Paused(gpu)) return "paused (trainq resume --gpus)";
  if (!p.Allowed(gpu)) return "not in the device allowlist";
  if (uint64_t age = p.StaleMs(gpu); age > 0) {
    // Whole seconds: the age grows while the reason is read.
    return fmt::format(
        "last sampled {} ago{}, more than gpu_stale_after = {}",
        FormatDuration(static_cast<int64_t>(age / 1000 * 1000)),
        gpu.sample_error.empty() ? "" : " (sampling fails: " + gpu.sample_error + ")",
        FormatDuration(p.config.stale_after_ms));
  }
  if (!p.BelowMaxJobs(gpu)) {
    return fmt::format("has {} (max-jobs-per-gpu {})", Plural(gpu.holdings.size(), "job"),
                       p.config.max_jobs_per_gpu);
  }
  JobId held = p.HeldFor(n, i);
  if (held != 0 && held != job.id) return fmt::format("held for job {}", held);
  return "";
}

namespace {

// "; GPU 2 held for job 7, GPU 3 not in the device allowlist": the GPUs the job would fit
// but may not use, when limits or holds close some.
std::string ClosedNote(const PendingJob& job, const Pass& p) {
  if (job.gpus <= 0 || (!p.Limited() && !p.AnyHolds())) return "";
  std::vector<std::string> closed;
  size_t count = 0;
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    if (!p.NodeOpen(job, n)) continue;  // the reason's node part says why
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      if (!Pass::TypeOk(job, node.gpus[i])) continue;  // the type census says so
      std::string why = ClosedText(job, p, n, i);
      if (why.empty() || !LeftAfter(job, node.gpus[i], p.config, p.now)) continue;
      if (++count <= kMaxListed) closed.push_back(GpuName(p, n, node.gpus[i]) + " " + why);
    }
  }
  return count == 0 ? "" : "; would fit but closed: " + Listed(std::move(closed), count);
}

}  // namespace

namespace {

// Why the node is out for the job, in a few words; "" when it is open.
std::string NodeOut(const PendingJob& job, const NodeState& node) {
  if (std::find(job.nodes_excluded.begin(), job.nodes_excluded.end(), node.name) !=
      job.nodes_excluded.end()) {
    return "excluded (--exclude-node)";
  }
  if (!MeetsConstraints(node.features, job.constraints)) {
    return fmt::format("lacks {} (--constraint)",
                       fmt::join(UnmetConstraints(node.features, job.constraints), ", "));
  }
  return node.accepts_new ? "" : "takes no new jobs (drained or lost)";
}

std::string NamesText(const std::vector<std::string>& names) {
  std::vector<std::string> shown(
      names.begin(), names.begin() + static_cast<ptrdiff_t>(std::min(names.size(), kMaxListed)));
  return Listed(std::move(shown), names.size());
}

// "--node a,b; --exclude-node c", or "" for a job that may go anywhere.
std::string Constraint(const PendingJob& job) {
  std::vector<std::string> parts;
  if (!job.nodes_allowed.empty()) parts.push_back("--node " + NamesText(job.nodes_allowed));
  if (!job.nodes_excluded.empty()) {
    parts.push_back("--exclude-node " + NamesText(job.nodes_excluded));
  }
  if (!job.constraints.empty()) {
    parts.push_back(fmt::format("--constraint {}", fmt::join(job.constraints, "&")));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

// The job's node lists and drained or lost nodes leave fewer nodes than it needs: which and
// why. "" when enough nodes are open to it.
std::string NodesReason(const PendingJob& job, const Pass& p) {
  size_t open = 0;
  for (size_t n = 0; n < p.size(); ++n) open += p.NodeOpen(job, n) ? 1 : 0;
  size_t need = static_cast<size_t>(job.num_nodes);
  if (open >= need || p.size() == 0) return "";  // no node at all: the usual reasons say so
  auto find = [&p](const std::string& name) {
    for (size_t n = 0; n < p.size(); ++n) {
      if (p.node(n).name == name) return n;
    }
    return p.size();
  };
  std::vector<std::string> out;
  size_t count = 0;
  auto add = [&](const std::string& name, const std::string& why) {
    if (why.empty()) return;
    if (++count <= kMaxListed) out.push_back(name + " " + why);
  };
  if (!job.nodes_allowed.empty()) {
    if (job.nodes_allowed.size() == 1 && need == 1) {
      const std::string& name = job.nodes_allowed[0];
      size_t n = find(name);
      if (n == p.size())
        return fmt::format("needs node {} (--node), which is not in the cluster", name);
      std::string why = NodeOut(job, p.node(n));
      return fmt::format("needs node {} (--node), which {}", name,
                         why.starts_with("excluded") ? "it also excludes (--exclude-node)" : why);
    }
    for (const std::string& name : job.nodes_allowed) {
      size_t n = find(name);
      add(name, n == p.size() ? "is not in the cluster" : NodeOut(job, p.node(n)));
    }
  } else {
    for (size_t n = 0; n < p.size(); ++n) add(p.node(n).name, NodeOut(job, p.node(n)));
  }
  std::string constraint = Constraint(job);
  std::string scope = constraint.empty() ? "" : fmt::format(" ({})", constraint);
  std::string list = count == 0 ? "" : ": " + Listed(std::move(out), count);
  if (need == 1) return fmt::format("no node it may use{} takes new jobs{}", scope, list);
  return fmt::format("needs {} at once; only {} of the nodes it may use{} take{} new jobs{}",
                     Plural(job.num_nodes, "node"), open, scope, open == 1 ? "s" : "", list);
}

// "on the nodes it may use (--node a,b): " before a job's GPU reason when it names nodes.
std::string RestrictedPrefix(const PendingJob& job) {
  std::string constraint = Constraint(job);
  return constraint.empty() ? "" : fmt::format("on the nodes it may use ({}): ", constraint);
}

// "; gpu3 takes no new jobs (drained or lost)": nodes the job could use but for that.
std::string NotTakingNote(const PendingJob& job, const Pass& p) {
  std::vector<std::string> names;
  size_t count = 0;
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    if (node.accepts_new) continue;
    if (!job.nodes_allowed.empty() && std::find(job.nodes_allowed.begin(), job.nodes_allowed.end(),
                                                node.name) == job.nodes_allowed.end()) {
      continue;
    }
    if (std::find(job.nodes_excluded.begin(), job.nodes_excluded.end(), node.name) !=
        job.nodes_excluded.end()) {
      continue;
    }
    if (!MeetsConstraints(node.features, job.constraints)) continue;
    if (++count <= kMaxListed) names.push_back(node.name);
  }
  if (count == 0) return "";
  return fmt::format("; {} {} no new jobs (drained or lost)", Listed(std::move(names), count),
                     count == 1 ? "takes" : "take");
}

// A gang that does not fit: how many nodes have what each part needs, and which.
std::string GangReason(const PendingJob& job, const Pass& p) {
  std::string each;
  if (job.gpus == 0) {
    each = Plural(job.cpus, "CPU slot");
  } else if (job.exclusive()) {
    each = fmt::format("{} whole {}{}", job.gpus, GpuNoun(job), job.gpus == 1 ? "" : "s");
  } else {
    std::string mem = job.mem_bytes ? FormatBytes(*job.mem_bytes)
                                    : fmt::format("{}% of its memory", job.mem_percent.value_or(0));
    each = fmt::format("{} of {} usable", Plural(job.gpus, GpuNoun(job)), mem);
  }
  std::string head = fmt::format("needs {} with {} each", Plural(job.num_nodes, "node"), each);
  size_t gpus_ok = 0, most = 0, most_node = 0;
  std::vector<std::string> full;
  size_t full_count = 0;
  for (size_t n = 0; n < p.size(); ++n) {
    if (!p.NodeOpen(job, n)) continue;
    size_t fitting = FittingCount(job, p, n);
    if (fitting > most) std::tie(most, most_node) = std::pair(fitting, n);
    if (fitting < static_cast<size_t>(job.gpus)) continue;
    ++gpus_ok;
    if (!ChooseOnNode(job, p, n)) continue;
    if (++full_count <= kMaxListed) full.push_back(p.node(n).name);
  }
  if (full_count < gpus_ok && gpus_ok >= static_cast<size_t>(job.num_nodes)) {
    return fmt::format("{}; {} have the GPUs but only {} also {}{} free", head, gpus_ok, full_count,
                       Plural(job.cpus, "CPU slot"),
                       job.host_mem_bytes > 0
                           ? " and " + FormatBytes(job.host_mem_bytes) + " of host memory"
                           : "");
  }
  if (full_count == 0) {
    if (most == 0 || job.gpus == 0) return head + "; none has them";
    return fmt::format("{}; none has them (most: {} on node {})", head, most,
                       p.node(most_node).name);
  }
  return fmt::format("{}; {} {} them ({})", head, full_count, full_count == 1 ? "has" : "have",
                     Listed(std::move(full), full_count));
}

// "4 NVIDIA T4, 2 NVIDIA L4 (label big)": the GPUs of the nodes, by model, for a job whose type
// none of them is.
std::string ModelsText(const Pass& p) {
  GpuCensus census;
  for (size_t n = 0; n < p.size(); ++n) {
    for (const GpuState& gpu : p.node(n).gpus) census.Add(gpu.model, gpu.label);
  }
  return census.Text(kMaxListed);
}

// A job with --gpu-type whose type no node it may use has enough of, at all: "needs 1 A100; no
// GPU here is one (GPUs: 4 NVIDIA T4)". "" when some node has them.
std::string TypeCountReason(const PendingJob& job, const Pass& p) {
  if (job.gpu_type.empty() || job.gpus <= 0) return "";
  int most = 0, total = 0;
  size_t most_node = 0;
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    if (!Pass::NodeAllows(job, node)) continue;  // drained nodes count: NodesReason says so
    int count = 0;
    for (const GpuState& gpu : node.gpus) count += Pass::TypeOk(job, gpu) ? 1 : 0;
    total += count;
    if (count > most) std::tie(most, most_node) = std::pair(count, n);
  }
  std::string noun = GpuNoun(job);
  if (total == 0) {
    return fmt::format("needs {}; no GPU {}is of --gpu-type {} (GPUs: {})", Plural(job.gpus, noun),
                       job.constraints.empty() ? "" : "it may use ", job.gpu_type, ModelsText(p));
  }
  if (most < job.gpus) {
    return fmt::format("needs {} on one node; the most {} has is {}{}", Plural(job.gpus, noun),
                       p.size() > 1 ? "any node" : "this node", most, OnNode(p, most_node));
  }
  return "";
}

// A job with --constraint that no node meets, up or not: "needs a node with ib (--constraint);
// none has it (features: a: nvlink; b: none)". "" when some node does.
std::string FeaturesReason(const PendingJob& job, const Pass& p) {
  if (job.constraints.empty() || p.size() == 0) return "";
  std::vector<std::string> have;
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    if (MeetsConstraints(node.features, job.constraints)) return "";
    if (have.size() < kMaxListed) {
      have.push_back(fmt::format(
          "{}: {}", node.name,
          node.features.empty() ? "none" : fmt::format("{}", fmt::join(node.features, ","))));
    }
  }
  std::string features = Listed(std::move(have), p.size());
  return fmt::format("needs a node with {} (--constraint); none has {} (features: {})",
                     fmt::join(job.constraints, " and "),
                     job.constraints.size() == 1 ? "it" : "them", features);
}

// "; A100s: 2, all taken by jobs 4 and 9": the GPUs of the job's type on the nodes it may use,
// for a job that fits none of them now.
std::string TypeCensus(const PendingJob& job, const Pass& p) {
  if (job.gpu_type.empty() || job.gpus <= 0) return "";
  int total = 0, taken = 0, others = 0;
  std::vector<JobId> jobs;
  std::vector<std::string> per_node;
  for (size_t n = 0; n < p.size(); ++n) {
    if (!p.NodeOpen(job, n)) continue;
    const NodeState& node = p.node(n);
    std::span<const GpuRoom> room = p.Room(n);
    int here = 0;
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      const GpuState& gpu = node.gpus[i];
      if (!Pass::TypeOk(job, gpu)) continue;
      ++here;
      if (room[i].free) continue;
      ++taken;
      for (const Holding& h : gpu.holdings) {
        if (std::find(jobs.begin(), jobs.end(), h.job) == jobs.end()) jobs.push_back(h.job);
      }
      others += gpu.holdings.empty() ? 1 : 0;
    }
    total += here;
    if (here > 0) per_node.push_back(fmt::format("{}: {}", node.name, here));
  }
  if (total == 0) return "";
  std::string head = fmt::format("; {}s: {}", GpuNoun(job), total);
  if (p.size() > 1 && per_node.size() > 1) {
    size_t count = per_node.size();
    per_node.resize(std::min(count, kMaxListed));
    head += fmt::format(" ({})", Listed(std::move(per_node), count));
  }
  if (taken == 0) return head + ", none in use";
  std::sort(jobs.begin(), jobs.end());
  std::vector<std::string> by;
  if (!jobs.empty()) {
    std::vector<std::string> ids;
    for (size_t i = 0; i < jobs.size() && i < kMaxListed; ++i)
      ids.push_back(std::to_string(jobs[i]));
    std::string list =
        ids.size() == 1
            ? ids[0]
            : fmt::format("{} and {}", fmt::join(ids.begin(), ids.end() - 1, ", "), ids.back());
    if (jobs.size() > ids.size())
      list = fmt::format("{}, {} more", fmt::join(ids, ", "), jobs.size() - ids.size());
    by.push_back(fmt::format("job{} {}", jobs.size() == 1 ? "" : "s", list));
  }
  if (others > 0) by.push_back(fmt::format("{} by other processes", others));
  return fmt::format("{}, {} taken by {}", head, taken == total ? "all" : std::to_string(taken),
                     fmt::join(by, " and "));
}

}  // namespace

std::string WhyWaiting(const PendingJob& job, const Pass& p) {
  std::string reason = RequestReason(job, p);
  if (!reason.empty()) return reason;
  reason = FeaturesReason(job, p);
  if (!reason.empty()) return reason;
  reason = TypeCountReason(job, p);
  if (!reason.empty()) return reason;
  reason = NodesReason(job, p);
  if (!reason.empty()) return reason;
  std::string why;
  if (job.num_nodes > 1) {
    why = GangReason(job, p);
  } else if (job.gpus == 0 || GpusFitSomewhere(job, p)) {
    why = HostReason(job, p);
  } else {
    why = (job.exclusive() ? ExclusiveReason(job, p) : SharedReason(job, p)) + TypeCensus(job, p);
  }
  return RestrictedPrefix(job) + why + ClosedNote(job, p) + NotTakingNote(job, p);
}

std::string UserCapReason(const PendingJob& job, const Pass& p) {
  const PolicyConfig& c = p.config;
  UserUse use = p.UseOf(job.user);
  std::string who = job.user.empty() ? "its user" : job.user;
  if (c.max_jobs_per_user > 0 && use.jobs >= c.max_jobs_per_user) {
    return fmt::format("waiting: {} has {} running; max_jobs_per_user = {}", who,
                       Plural(use.jobs, "job"), c.max_jobs_per_user);
  }
  // Asking for more than the limit: no number of ends lets it start.
  if (c.max_gpus_per_user > 0 && job.total_gpus() > c.max_gpus_per_user) {
    return fmt::format("waiting: needs {}, more than max_gpus_per_user = {}",
                       Plural(job.total_gpus(), "GPU"), c.max_gpus_per_user);
  }
  std::string needs =
      job.total_gpus() > 1 ? fmt::format(" and this job needs {}", job.total_gpus()) : "";
  return fmt::format("waiting: {} has {} in use{}; max_gpus_per_user = {}", who,
                     Plural(use.gpus, "GPU"), needs, c.max_gpus_per_user);
}

std::string HeldNote(const Pass& p, JobId job) {
  std::vector<std::string> names;
  for (const auto& [n, gpus] : p.holds().at(job)) {
    for (size_t g : gpus) names.push_back(GpuName(p, n, p.node(n).gpus[g]));
  }
  return fmt::format("; waited past the aging limit: {} held for it", fmt::join(names, ", "));
}

}  // namespace trainq::placement_internal

namespace trainq {

std::string HeldReason(int64_t job, const std::string& by) {
  return fmt::format("held{}: no pass starts it until trainq release{}",
                     by.empty() ? "" : " by " + by, job > 0 ? fmt::format(" {}", job) : "");
}

std::string HeldBy(std::string_view reason) {
  constexpr std::string_view kPrefix = "held by ";
  if (!reason.starts_with(kPrefix)) return "";
  reason.remove_prefix(kPrefix.size());
  size_t colon = reason.find(':');
  return colon == std::string_view::npos ? "" : std::string(reason.substr(0, colon));
}

}  // namespace trainq
