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

}  // namespace

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
    // A job at its user's limit cannot start however long it waits: GPUs held for it would
    // only idle. It is aged still, and gets its hold once its user's jobs end.
    if (p.AtUserCap(*job)) continue;
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

}  // namespace trainq::placement_internal
