// The pass: holds for aged jobs, then what fits starts in placement order, then a reason for
// every job left waiting. The steps live in placement_{choice,reasons,holds}.cc.
#include "src/core/placement.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "src/core/placement_internal.h"

namespace trainq {

namespace {

using placement_internal::Choose;
using placement_internal::ClosedText;
using placement_internal::Commit;
using placement_internal::HeldNote;
using placement_internal::HoldForAged;
using placement_internal::HoldsInForce;
using placement_internal::LeftAfter;
using placement_internal::NodeChoice;
using placement_internal::Pass;
using placement_internal::Placeable;
using placement_internal::Shape;
using placement_internal::ShapeOf;
using placement_internal::UserCapReason;
using placement_internal::WaitingSince;
using placement_internal::WhyWaiting;

// at + ms, saturated at the largest time rather than wrapping.
UnixMs SatAddMs(UnixMs at, int64_t ms) {
  return at > std::numeric_limits<UnixMs>::max() - ms ? std::numeric_limits<UnixMs>::max()
                                                      : at + ms;
}

// A job left waiting, with the shape its reason is shared by (-1: a reason of its own).
struct Waiter {
  const PendingJob* job;
  JobId id;  // a copy: explaining a long queue then touches only this array
  int shape;
  bool at_user_cap = false;  // its reason is the per-user limit
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
    if (p.AtUserCap(*job)) {
      // Its user reached a limit through starts earlier in this pass: GPUs held for it would
      // stay idle, so they go back to the jobs after it.
      if (holder && p.Release(job->id)) std::fill(failed.begin(), failed.end(), 0);
      waiting.push_back({job, job->id, -1, true});
      continue;
    }
    int shape = shapes.Index(*job);
    if (failed.size() < shapes.size()) failed.resize(shapes.size(), 0);
    std::optional<std::vector<NodeChoice>> choice;
    if (holder || !failed[shape]) choice = Choose(*job, p);
    if (!choice) {
      if (!holder) failed[shape] = 1;
      waiting.push_back({job, job->id, holder ? -1 : shape});
      continue;
    }
    result.starts.push_back(Commit(*job, *choice, p));
    p.AddUse(*job);
    // Its other held GPUs open up again: shapes that failed may fit now.
    if (holder && p.Release(job->id)) std::fill(failed.begin(), failed.end(), 0);
  }
  // A held job whose user a later job of theirs took to a limit cannot start either.
  if (p.UserLimited() && p.AnyHolds()) {
    for (Waiter& w : waiting) {
      if (p.HoldsFor(w.id) && p.AtUserCap(*w.job) && p.Release(w.id)) w.at_user_cap = true;
    }
  }
  return waiting;
}

// Explained against the pass's final state: what a user sees until the next pass. A job
// that did not fit earlier in the pass fits no better now, as a pass only takes resources.
void ExplainWaiting(std::span<const Waiter> waiting, const Pass& p, size_t shape_count,
                    PlacementResult& result) {
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> explained(shape_count, kNone);
  std::map<std::pair<std::string, int64_t>, uint32_t> capped;
  result.waiting.reserve(waiting.size());
  auto add = [&result](std::string text) {
    result.reason_texts.push_back(std::move(text));
    return static_cast<uint32_t>(result.reason_texts.size() - 1);
  };
  for (const Waiter& w : waiting) {
    if (w.at_user_cap) {  // one text per user and request: a user's backlog shares it
      auto [it, added] = capped.try_emplace({w.job->user, w.job->total_gpus()}, 0);
      if (added) it->second = add(UserCapReason(*w.job, p));
      result.waiting.push_back({w.id, it->second});
      continue;
    }
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

bool PlacedBefore(const PendingJob& a, const PendingJob& b, const UsageByUser& usage) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.service_band != b.service_band) return a.service_band < b.service_band;
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
    if (job->not_before >= kHeldNotBefore) continue;  // held: only a release brings it back
    consider(job->not_before);
    // Aged() is strict: one millisecond past the limit.
    if (config.aging_ms > 0) consider(SatAddMs(SatAddMs(WaitingSince(*job), config.aging_ms), 1));
  }
  if (waiting.empty()) return next;
  for (const NodeState& node : nodes) {
    for (const GpuState& gpu : node.gpus) {
      // Facts turning stale close the GPU: the reasons must say so. Stale is strict too.
      if (gpu.sampled_at > 0 && config.stale_after_ms > 0)
        consider(SatAddMs(SatAddMs(gpu.sampled_at, config.stale_after_ms), 1));
      if (config.ramp_up_ms <= 0) continue;
      for (const Holding& h : gpu.holdings) {
        if (!h.used_now) consider(SatAddMs(h.started_at, config.ramp_up_ms));
      }
    }
  }
  return next;
}

}  // namespace trainq
