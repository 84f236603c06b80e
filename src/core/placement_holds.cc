// Starvation protection: GPUs held for jobs that waited past the aging limit.
#include <set>

#include "src/core/placement_internal.h"

namespace trainq::placement_internal {

namespace {

bool Aged(const PendingJob& job, const PolicyConfig& config, UnixMs now) {
  if (config.aging_ms <= 0 || job.not_before > now) return false;
  return ElapsedMs(now, WaitingSince(job)) > static_cast<uint64_t>(config.aging_ms);
}

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
  if (!p.NodeOpen(job, n) || node.cpu_slots < job.cpus) return out;
  if (node.host_mem_bytes > 0 && job.host_mem_bytes > node.host_mem_bytes) return out;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    const GpuState& gpu = node.gpus[i];
    if (!Pass::TypeOk(job, gpu) || !p.Allowed(gpu) || p.HeldFor(n, i) != 0) continue;
    if (auto d = Distance(job, gpu, p.config, p.now)) out.emplace_back(*d, i);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The positions of `indices` among the GPUs the job may hold on node `n`; nullopt when one
// is no longer a candidate.
std::optional<std::vector<size_t>> StillHoldable(const PendingJob& job, const Pass& p, size_t n,
                                                 const std::vector<int>& indices) {
  auto candidates = HoldCandidates(job, p, n);
  std::vector<size_t> gpus;
  for (int index : indices) {
    auto c = std::find_if(candidates.begin(), candidates.end(), [&](const auto& cand) {
      return p.node(n).gpus[cand.second].index == index;
    });
    if (c == candidates.end()) return std::nullopt;
    gpus.push_back(c->second);
  }
  return gpus;
}

// The previous hold, if it is still a valid choice: every part on a distinct node, with the
// job's GPUs there.
std::optional<HoldParts> KeptHold(const PendingJob& job, const Pass& p,
                                  std::span<const Hold> previous) {
  auto prev = std::find_if(previous.begin(), previous.end(),
                           [&job](const Hold& h) { return h.job == job.id; });
  if (prev == previous.end()) return std::nullopt;
  std::vector<NodeGpus> parts = prev->parts;
  if (parts.empty()) parts.push_back({prev->node, prev->gpu_indices});
  if (parts.size() != static_cast<size_t>(job.num_nodes)) return std::nullopt;
  HoldParts kept;
  std::set<size_t> used;
  for (const NodeGpus& part : parts) {
    if (part.gpu_indices.size() != static_cast<size_t>(job.gpus)) return std::nullopt;
    size_t n = 0;
    while (n < p.size() && (p.node(n).name != part.node || used.count(n))) ++n;
    if (n == p.size()) return std::nullopt;
    std::optional<std::vector<size_t>> gpus = StillHoldable(job, p, n, part.gpu_indices);
    if (!gpus) return std::nullopt;
    used.insert(n);
    kept.emplace_back(n, std::move(*gpus));
  }
  return kept;
}

// Where the job would fit soonest: the nodes whose nearest GPUs are least short of it (as
// many as it needs, ties to the node given first).
std::optional<HoldParts> ChooseHold(const PendingJob& job, const Pass& p) {
  using Cost = std::pair<uint64_t, uint64_t>;
  std::vector<std::tuple<Cost, size_t, std::vector<size_t>>> options;
  size_t k = static_cast<size_t>(job.gpus);
  for (size_t n = 0; n < p.size(); ++n) {
    auto candidates = HoldCandidates(job, p, n);
    if (candidates.size() < k) continue;
    Cost cost{0, 0};
    std::vector<size_t> gpus;
    for (size_t i = 0; i < k; ++i) {
      cost.first = SatAdd(cost.first, candidates[i].first.first);
      cost.second = SatAdd(cost.second, candidates[i].first.second);
      gpus.push_back(candidates[i].second);
    }
    options.emplace_back(cost, n, std::move(gpus));
  }
  size_t want = static_cast<size_t>(job.num_nodes);
  if (options.size() < want) return std::nullopt;
  std::sort(options.begin(), options.end());
  HoldParts parts;
  for (size_t i = 0; i < want; ++i) {
    parts.emplace_back(std::get<1>(options[i]), std::move(std::get<2>(options[i])));
  }
  return parts;
}

// Where the job would start now, as a hold.
std::optional<HoldParts> StartsNow(const PendingJob& job, const Pass& p) {
  std::optional<std::vector<NodeChoice>> choice;
  if (job.num_nodes > 1) {
    choice = ChooseGang(job, p);
  } else if (std::optional<NodeChoice> one = ChooseNode(job, p)) {
    choice = std::vector<NodeChoice>{std::move(*one)};
  }
  if (!choice) return std::nullopt;
  HoldParts parts;
  for (const NodeChoice& c : *choice) {
    std::vector<size_t> gpus;
    for (const GpuPick& pick : c.picks) gpus.push_back(pick.pos);
    parts.emplace_back(c.node, std::move(gpus));
  }
  return parts;
}

// GPUs a preemption frees are its job's while it waits, whatever its age, where they are
// still GPUs of a node the pass sees.
void HoldForPreemptors(std::span<const PendingJob* const> order, Pass& p,
                       std::span<const Hold> previous) {
  for (const Hold& h : previous) {
    if (!h.preempting || p.HoldsFor(h.job)) continue;
    if (std::none_of(order.begin(), order.end(),
                     [&h](const PendingJob* job) { return job->id == h.job; })) {
      continue;
    }
    std::vector<NodeGpus> parts = h.parts;
    if (parts.empty()) parts.push_back({h.node, h.gpu_indices});
    HoldParts kept;
    for (const NodeGpus& part : parts) {
      size_t n = 0;
      while (n < p.size() && p.node(n).name != part.node) ++n;
      if (n == p.size()) break;
      std::vector<size_t> gpus;
      for (int index : part.gpu_indices) {
        for (size_t g = 0; g < p.node(n).gpus.size(); ++g) {
          if (p.node(n).gpus[g].index == index && p.HeldFor(n, g) == 0) gpus.push_back(g);
        }
      }
      if (gpus.size() != part.gpu_indices.size()) break;
      kept.emplace_back(n, std::move(gpus));
    }
    if (kept.size() != parts.size()) continue;
    p.Hold(std::move(kept), h.job);
    p.MarkPreempting(h.job);
  }
}

}  // namespace

// Phase one: in placement order, each aged job gets GPUs held for it, so no job placed
// before it in this pass or later ones takes them: its previous hold while still valid, else
// the GPUs it would use now, else those where it would fit soonest.
void HoldForAged(std::span<const PendingJob* const> order, Pass& p,
                 std::span<const Hold> previous) {
  HoldForPreemptors(order, p, previous);
  if (p.config.aging_ms <= 0) return;
  std::set<Shape> hopeless;  // holds only shrink what is left to hold
  int blocking = 0;          // holds for jobs that cannot start now
  for (const PendingJob* job : order) {
    if (p.AllHeld()) return;
    if (job->gpus <= 0 || !Aged(*job, p.config, p.now) || !Placeable(*job, p)) continue;
    // A job at its user's limit cannot start however long it waits: GPUs held for it would
    // only idle. It is aged still, and gets its hold once its user's jobs end.
    if (p.AtUserCap(*job)) continue;
    Shape shape = ShapeOf(*job);
    if (hopeless.count(shape)) continue;
    // Past max_holds, an aged job is held for only where it starts now: every GPU held
    // idle for a job that cannot start yet is lost to backfill, and holding for a whole
    // backlog of aged jobs idles the cluster (the Philly replay in docs/scheduling.md).
    bool capped = p.config.max_holds > 0 && blocking >= p.config.max_holds;
    std::optional<HoldParts> hold;
    if (!capped) hold = KeptHold(*job, p, previous);
    bool starts_now = false;
    if (!hold) {
      hold = StartsNow(*job, p);
      starts_now = hold.has_value();
    }
    if (!hold && !capped) hold = ChooseHold(*job, p);
    if (!hold) {  // once capped, a shape that cannot start now never will in this phase
      hopeless.insert(shape);
      continue;
    }
    if (!starts_now) ++blocking;
    p.Hold(std::move(*hold), job->id);
  }
}

std::vector<Hold> HoldsInForce(const Pass& p) {
  std::vector<Hold> holds;
  for (const auto& [job, parts] : p.holds()) {
    Hold h{job, "", {}, {}, p.Preempting(job)};
    for (const auto& [n, gpus] : parts) {
      NodeGpus part{p.node(n).name, {}};
      for (size_t g : gpus) part.gpu_indices.push_back(p.node(n).gpus[g].index);
      std::sort(part.gpu_indices.begin(), part.gpu_indices.end());
      h.parts.push_back(std::move(part));
    }
    if (!h.parts.empty())
      std::tie(h.node, h.gpu_indices) = std::pair(h.parts[0].node, h.parts[0].gpu_indices);
    holds.push_back(std::move(h));
  }
  return holds;
}

}  // namespace trainq::placement_internal
