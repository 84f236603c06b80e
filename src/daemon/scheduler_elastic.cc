// Elastic jobs in the scheduler (docs/workflow.md, "Elastic jobs"): growth at a start and
// later, shrinks before preemption, and the resizes under way. A resize of a running job is a
// stop through the preemption machinery (the job's --signal warning, its grace), and the job
// is queued again at once with its new GPUs held for it, so it restarts under the same id as
// attempt N+1 with the new CUDA_VISIBLE_DEVICES, WORLD_SIZE and TRAINQ_NUM_GPUS.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "src/core/duration.h"
#include "src/core/spec.h"
#include "src/daemon/scheduler.h"

namespace trainq {

namespace {

// How long after its stop should be over a resize is given up: as a preemption's.
constexpr int64_t kResizeSlackMs = 60 * 1000;

// The GPUs of `g.to` not in `before`: what a growth adds (Resize::to is all of them).
NodeGpus Added(const Resize& g, const std::vector<int>& before) {
  NodeGpus out{g.to.node, {}};
  for (int gpu : g.to.gpu_indices) {
    if (std::find(before.begin(), before.end(), gpu) == before.end())
      out.gpu_indices.push_back(gpu);
  }
  return out;
}

}  // namespace

void Scheduler::HoldAdded(std::vector<NodeState>& nodes, UnixMs now) const {
  for (const auto& [id, r] : resizing_) {
    if (r.added.empty() || waiting_.find(id) != nullptr) continue;
    for (NodeState& node : nodes) {
      if (node.name != r.to.node) continue;
      for (GpuState& gpu : node.gpus) {
        if (std::find(r.added.begin(), r.added.end(), gpu.index) == r.added.end()) continue;
        gpu.holdings.push_back({id, gpu.total_bytes, std::nullopt, true, now});
      }
    }
  }
}

void Scheduler::PrepareResizes(std::vector<NodeState>& nodes,
                               std::vector<const PendingJob*>& ordered,
                               std::vector<PendingJob>& storage, std::vector<Hold>& holds,
                               UnixMs now) {
  std::erase_if(resizing_, [&](const auto& kv) {
    if (now < kv.second.give_up_at) return false;
    spdlog::warn("job {}: its resize did not happen in time; it runs at whatever size it gets",
                 kv.first);
    return true;
  });
  if (resizing_.empty()) return;
  HoldAdded(nodes, now);
  storage.reserve(resizing_.size());  // pointers into it go in `ordered`
  for (const PendingJob*& p : ordered) {
    auto r = resizing_.find(p->id);
    if (r == resizing_.end()) continue;
    storage.push_back(*p);
    const std::vector<NodeGpus>& parts = r->second.parts;
    if (parts.empty()) {
      storage.back().gpus = static_cast<int>(r->second.to.gpu_indices.size());
    } else {
      storage.back().num_nodes = static_cast<int>(parts.size());  // a gang that shrank
    }
    p = &storage.back();
    std::erase_if(holds, [&](const Hold& h) { return h.job == r->first; });
    holds.push_back({r->first, r->second.to.node, r->second.to.gpu_indices,
                     parts.empty() ? std::vector<NodeGpus>{r->second.to} : parts, true});
  }
}

void Scheduler::GrowAtStart(std::vector<StartDecision>& starts, const std::vector<NodeState>& nodes,
                            const std::vector<Hold>& holds, const PolicyConfig& policy,
                            UnixMs now) {
  std::vector<ElasticRun> runs;
  std::vector<GangRun> gangs;
  for (const StartDecision& d : starts) {
    const PendingJob* p = waiting_.find(d.job);
    if (p != nullptr && p->max_nodes > p->num_nodes && !resizing_.count(d.job)) {
      GangRun g;
      g.shape = *p;
      g.parts = d.parts;
      if (g.parts.empty()) g.parts.push_back({d.node, d.gpu_indices});
      g.starting = true;
      gangs.push_back(std::move(g));
      continue;
    }
    if (p == nullptr || p->max_gpus <= static_cast<int>(d.gpu_indices.size()) ||
        d.parts.size() > 1 || resizing_.count(d.job)) {
      continue;
    }
    ElasticRun r;
    r.job = d.job;
    r.priority = p->priority;
    r.user = p->user;
    r.min_gpus = p->gpus;
    r.max_gpus = p->max_gpus;
    r.where = {d.node, d.gpu_indices};
    r.starting = true;
    runs.push_back(std::move(r));
  }
  if (runs.empty() && gangs.empty()) return;
  elastic_seen_ = true;
  // The nodes as this pass's starts leave them.
  std::vector<NodeState> after = nodes;
  HoldAdded(after, now);
  for (const StartDecision& d : starts) {
    std::vector<NodeGpus> parts = d.parts;
    if (parts.empty()) parts.push_back({d.node, d.gpu_indices});
    const PendingJob* p = waiting_.find(d.job);
    for (const NodeGpus& part : parts) {
      HoldOn(after, part, {d.job, d.reserved_bytes, std::nullopt, false, now},
             p != nullptr ? p->user : "");
    }
  }
  for (const Resize& g : ChooseGrowth(runs, after, holds, policy, ElasticSettings(), now)) {
    NodeGpus added;
    for (StartDecision& d : starts) {
      if (d.job != g.job) continue;
      added = Added(g, d.gpu_indices);
      d.gpu_indices = g.to.gpu_indices;
      if (!d.parts.empty()) d.parts[0].gpu_indices = g.to.gpu_indices;
      spdlog::info("job {}: starts on {} GPUs: {}", d.job, d.gpu_indices.size(), g.reason);
    }
    // The GPUs it grew into are gone for the gangs below.
    const PendingJob* p = waiting_.find(g.job);
    HoldOn(after, added, {g.job, 0, std::nullopt, true, now}, p != nullptr ? p->user : "");
  }
  for (const GangGrowth& g :
       ChooseGangGrowth(gangs, after, holds, policy, ElasticSettings(), now)) {
    for (StartDecision& d : starts) {
      if (d.job != g.job) continue;
      if (d.parts.empty()) d.parts.push_back({d.node, d.gpu_indices});
      d.parts.insert(d.parts.end(), g.added.begin(), g.added.end());
      spdlog::info("job {}: starts on {} nodes: {}", d.job, d.parts.size(), g.reason);
    }
  }
}

std::vector<ElasticRun> Scheduler::ElasticRunning(std::map<JobId, Job>* jobs, UnixMs now,
                                                  std::vector<GangRun>* gangs) {
  std::vector<ElasticRun> out;
  if (!elastic_seen_) return out;
  ListQuery query;
  query.states = {JobState::kStarting, JobState::kRunning};
  query.with_attempts = true;
  query.with_env = false;
  Result<std::vector<Job>> active = store_.List(query);
  if (!active.ok()) {
    spdlog::warn("elastic jobs: {}", active.status().message());
    return out;
  }
  std::set<JobId> victims;
  for (const auto& [preemptor, p] : preempting_) victims.insert(p.victims.begin(), p.victims.end());
  bool queued_elastic = false;
  for (const auto& [id, p] : waiting_) {
    queued_elastic = queued_elastic || p.max_gpus > 0 || p.max_nodes > 0;
  }
  bool running_gang = false;
  for (Job& job : *active) {
    const Attempt* a = job.current();
    if (a == nullptr || !IsElastic(job.spec)) continue;
    bool stopping = victims.count(job.id) > 0 || resizing_.count(job.id) > 0;
    if (auto live = agent_.live().find(job.id); live != agent_.live().end()) {
      stopping = stopping || live->second.cancel_requested || !live->second.stop_requested.empty();
    }
    // A batch script's node range is Slurm's: decided when it starts, never resized.
    if (job.spec.max_nodes > 0 && job.spec.slurm_env) continue;
    if (job.spec.max_nodes > 0) {
      running_gang = true;
      if (gangs == nullptr) continue;
      GangRun g;
      g.shape = PendingOf(job.id, job.spec, job.submitted_at, job.queued_at, 0);
      g.sized_at = a->started_at > 0 ? a->started_at : now;
      for (const AttemptPart& part : a->parts) {
        g.parts.push_back({part.node, part.gpu_indices});
        g.sized_at = std::max(g.sized_at, part.added_at);
      }
      if (g.parts.empty()) g.parts.push_back({a->node, a->gpu_indices});
      g.stopping = stopping;
      g.stop_ms = (job.spec.stop.signal > 0 ? job.spec.stop.lead_ms : 0) + config_.grace_ms;
      gangs->push_back(std::move(g));
      if (jobs != nullptr) jobs->emplace(job.id, job);
      continue;
    }
    if (a->parts.size() > 1) continue;
    ElasticRun r;
    r.job = job.id;
    r.priority = job.spec.priority;
    r.user = job.spec.user;
    r.min_gpus = job.spec.gpus;
    r.max_gpus = job.spec.max_gpus;
    r.where = {a->node, a->gpu_indices};
    r.sized_at = a->started_at > 0 ? a->started_at : now;
    r.stopping = stopping;
    r.stop_ms = (job.spec.stop.signal > 0 ? job.spec.stop.lead_ms : 0) + config_.grace_ms;
    out.push_back(std::move(r));
    if (jobs != nullptr) jobs->emplace(job.id, std::move(job));
  }
  // None running and none waiting: nothing to list again until one is submitted or queued.
  if (out.empty() && !running_gang && !queued_elastic) elastic_seen_ = false;
  return out;
}

bool Scheduler::BeginResize(const Job& job, const Resize& d, UnixMs now) {
  ShimControl control;
  control.stop = "resized";
  control.reason = "resized: " + d.reason;
  control.stop_in_ms = job.spec.stop.signal > 0 ? job.spec.stop.lead_ms : 0;
  if (Status st = site_->Preempt(job, control); !st.ok()) {
    spdlog::warn("job {}: resizing: {}", job.id, st.message());
    return false;
  }
  Resizing& r = resizing_[job.id];
  r.to = d.to;
  r.parts = d.to_parts;
  r.added.clear();
  const Attempt* a = job.current();
  for (int g : d.to.gpu_indices) {
    if (a == nullptr ||
        std::find(a->gpu_indices.begin(), a->gpu_indices.end(), g) == a->gpu_indices.end()) {
      r.added.push_back(g);
    }
  }
  r.give_up_at = now + control.stop_in_ms + config_.grace_ms + kResizeSlackMs;
  bool grow = d.to_parts.empty() ? static_cast<int>(d.to.gpu_indices.size()) > d.from_gpus
                                 : static_cast<int>(d.to_parts.size()) > d.from_nodes;
  if (counters_) ++counters_->resizes[grow ? "grow" : "shrink"];
  spdlog::info("job {}: {}; stopping it in {}", job.id, control.reason,
               FormatDuration(control.stop_in_ms));
  return true;
}

std::vector<PendingJob> Scheduler::ShrinkFor(std::vector<PendingJob> ready,
                                             const std::vector<ElasticRun>& runs,
                                             const std::vector<GangRun>& gangs,
                                             std::map<JobId, Job>& jobs,
                                             const std::vector<NodeState>& nodes,
                                             const PolicyConfig& policy, UnixMs now) {
  std::vector<const PendingJob*> asking;
  for (const PendingJob& p : ready) asking.push_back(&p);
  std::vector<Shrink> shrinks =
      ChooseShrinks(asking, nodes, runs, policy, ElasticSettings(), now, gangs);
  std::set<JobId> served;
  for (const Shrink& s : shrinks) {
    Preempting p;
    p.shrink = true;
    p.ready_at = s.ready_at;
    p.give_up_at = s.ready_at + config_.grace_ms + kResizeSlackMs;
    for (const Resize& d : s.resizes) {
      auto job = jobs.find(d.job);
      if (job == jobs.end() || !BeginResize(job->second, d, now)) continue;
      p.victims.push_back(d.job);
      bool gang = !d.to_parts.empty();
      size_t to = gang ? d.to_parts.size() : d.to.gpu_indices.size();
      p.victims_text += fmt::format(
          "{}job {} shrinks from {} to {} {}{}", p.victims_text.empty() ? "" : " and ", d.job,
          gang ? d.from_nodes : d.from_gpus, to, gang ? "node" : "GPU", to == 1 ? "" : "s");
    }
    if (p.victims.empty()) continue;
    spdlog::info("job {}: {}", s.job, s.reason);
    preempting_[s.job] = std::move(p);
    std::erase_if(holds_, [&](const Hold& h) { return h.job == s.job; });
    holds_.push_back(ShrinkHold(s));
    served.insert(s.job);
  }
  std::erase_if(ready, [&](const PendingJob& p) { return served.count(p.id) > 0; });
  return ready;
}

void Scheduler::GrowRunning(const PolicyConfig& policy, UnixMs now) {
  elastic_wakeup_ = 0;
  std::map<JobId, Job> jobs;
  std::vector<GangRun> gangs;
  std::vector<ElasticRun> runs = ElasticRunning(&jobs, now, &gangs);
  if (runs.empty() && gangs.empty()) return;
  // A job not yet past min_runtime at its size may resize then: a pass is due.
  auto wake = [&](UnixMs sized_at, bool stopping) {
    UnixMs at = sized_at + config_.min_runtime_ms;
    if (!stopping && at > now && (elastic_wakeup_ == 0 || at < elastic_wakeup_)) {
      elastic_wakeup_ = at;
    }
  };
  for (const ElasticRun& r : runs) wake(r.sized_at, r.stopping);
  for (const GangRun& g : gangs) {
    if (g.nodes() < g.shape.max_nodes) wake(g.sized_at, g.stopping);
  }
  for (const auto& [id, r] : resizing_) {
    if (elastic_wakeup_ == 0 || r.give_up_at < elastic_wakeup_) elastic_wakeup_ = r.give_up_at;
  }
  std::vector<NodeState> nodes = site_->PassNodes();
  HoldAdded(nodes, now);
  for (const Resize& g : ChooseGrowth(runs, nodes, holds_, policy, ElasticSettings(), now)) {
    auto job = jobs.find(g.job);
    if (job == jobs.end() || !BeginResize(job->second, g, now)) continue;
    // The GPUs it grows into are its own while it restarts: not for a gang's part.
    const Attempt* a = job->second.current();
    HoldOn(nodes, Added(g, a != nullptr ? a->gpu_indices : std::vector<int>{}),
           {g.job, 0, std::nullopt, true, now}, job->second.spec.user);
  }
  for (const GangGrowth& g :
       ChooseGangGrowth(gangs, nodes, holds_, policy, ElasticSettings(), now)) {
    auto job = jobs.find(g.job);
    if (job == jobs.end()) continue;
    if (Status st = site_->AddParts(job->second, g.added); !st.ok()) {
      spdlog::warn("job {}: growing: {}", g.job, st.message());
      continue;
    }
    if (counters_) ++counters_->resizes["grow"];
    spdlog::info("job {}: {}; the new part{} join{} its rendezvous", g.job, g.reason,
                 g.added.size() == 1 ? "" : "s", g.added.size() == 1 ? "s" : "");
  }
}

}  // namespace trainq
