// The scheduler (scheduler.h): turns the waiting index and the site's nodes into the pure
// policy's input, and carries out its decisions.
#include "src/daemon/scheduler.h"

#include <malloc.h>

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "src/core/container.h"
#include "src/core/deps.h"
#include "src/core/duration.h"
#include "src/os/system.h"

namespace trainq {

Scheduler::Scheduler(boost::asio::io_context& io, Store& store, const Clock& clock,
                     const Config& config, Agent& agent, std::string state_dir,
                     std::function<uint64_t()> largest_gpu)
    : io_(io),
      store_(store),
      clock_(clock),
      config_(config),
      agent_(agent),
      state_dir_(std::move(state_dir)),
      largest_gpu_(std::move(largest_gpu)),
      recent_(static_cast<size_t>(config.workload_window)) {}

void Scheduler::Stop() {
  stopping_ = true;
  wakeup_timer_.cancel();
  reason_timer_.cancel();
}

void Scheduler::RequestSchedule() {
  if (schedule_posted_ || stopping_) return;
  schedule_posted_ = true;
  boost::asio::post(io_, [this] {
    schedule_posted_ = false;
    if (!stopping_) SchedulePass();
  });
}

PolicyConfig Scheduler::Policy() const {
  PolicyConfig policy = PolicyOf(config_);
  // The requests to come, as far as this daemon can know them: its last submits
  // (workload_window; none kept when 0, and the plain rule applies).
  if (recent_.size() > 0) policy.workload = recent_.Mix(largest_gpu_());
  return policy;
}

namespace {

// 64 bits of the text: two reasons of one job that differ and share it are as likely as a
// random collision (about one in 10^19), and would leave the older one shown until the next.
uint64_t ReasonDigest(std::string_view reason) { return std::hash<std::string_view>{}(reason); }

// Changed reasons a loop turn writes at most, and the pause between two such turns: a
// million rewritten reasons cost the loop about 5% of its time while they are written.
constexpr size_t kReasonRowsPerWrite = 1000;
constexpr auto kReasonWriteGap = std::chrono::milliseconds(100);

// Queued jobs read from the store at a time when the index is read anew.
constexpr int kWaitingPage = 10000;

}  // namespace

PendingJob PendingOf(JobId id, const JobSpec& spec, UnixMs submitted_at, UnixMs queued_at,
                     UnixMs not_before) {
  PendingJob p;
  p.id = id;
  p.gpus = spec.gpus;
  p.mem_bytes = spec.mem_bytes;
  p.mem_percent = spec.mem_percent;
  p.cpus = spec.cpus;
  p.priority = spec.priority;
  p.submitted_at = submitted_at;
  p.queued_at = queued_at;
  p.not_before = not_before;
  p.user = spec.user;
  p.nodes_allowed = spec.nodes_allowed;
  p.nodes_excluded = spec.nodes_excluded;
  p.num_nodes = spec.num_nodes;
  p.max_gpus = spec.max_gpus;
  p.max_nodes = spec.max_nodes;
  p.gpu_type = spec.gpu_type;
  p.constraints = spec.constraints;
  if (spec.container.on()) {
    p.images = IsImageArchive(spec.container.image) ? spec.container.archive_names
                                                    : std::vector{spec.container.image};
  }
  for (const Transfer& t : spec.transfers) p.shipped.emplace_back(t.manifest, t.bytes);
  p.shipped_from = spec.signed_by;
  p.group = spec.group;
  p.group_limit = spec.group_limit;
  return p;
}

Status Scheduler::RefreshWaiting() {
  if (!waiting_stale_) return Status::Ok();
  elastic_seen_ = true;  // a requeued elastic job, or one running since a restart
  ListQuery query;
  query.states = {JobState::kQueued};
  query.with_env = false;  // the policy needs the requests; a started job is read in full
  query.placement_only = true;
  // Whether it waits for a lost node's word, and what its attempts received (the
  // attained-service order).
  query.with_attempts = site_->ReadsLastAttempt() || config_.attained_service_ms > 0;
  // A page at a time: a million jobs read whole took 700 MB at once (a Job is large), most
  // of a restart's time spent faulting that memory in. The loop thread is the store's only
  // writer here, so no job changes between two pages.
  query.limit = kWaitingPage;
  waiting_.clear();
  size_t read = 0;
  for (;;) {
    Result<std::vector<Job>> page = store_.List(query);
    if (!page.ok()) {
      waiting_stale_ = true;
      return page.status();
    }
    reasons_.reserve(read + page->size());
    for (const Job& job : *page) {
      reasons_[job.id].written = ReasonDigest(job.reason);  // the store's, whoever wrote it
      PendingJob p = PendingOf(job.id, job.spec, job.submitted_at, job.queued_at, job.not_before);
      if (job.not_before >= kHeldNotBefore) p.held_by = HeldBy(job.reason);
      p.service_band = ServiceBand(AttainedGpuMs(job), config_.attained_service_ms);
      const Attempt* last = job.current();
      if (last && job.not_before > 0 && last->end_reason == "node " + last->node + " lost") {
        p.lost_node = last->node;
      }
      waiting_.emplace(job.id, std::move(p));
    }
    read += page->size();
    if (page->size() < static_cast<size_t>(kWaitingPage)) break;
    query.after_id = page->back().id;
  }
  waiting_stale_ = false;
  // Every waiting job has an entry now: any more are of jobs that left.
  if (reasons_.size() > waiting_.size()) ForgetReasonsExcept();
  // What a large queue's read took goes back to the system (glibc keeps freed memory
  // otherwise: 550 MB held after reading a million jobs).
  if (read > 10000) ::malloc_trim(0);
  return Status::Ok();
}

void Scheduler::Submitted(const std::vector<JobSpec>& specs, const std::vector<JobId>& ids,
                          UnixMs now) {
  for (size_t i = 0; i < specs.size(); ++i) {
    recent_.Add(PendingOf(0, specs[i], 0, 0, 0));  // the workload mix counts every request
    if (IsElastic(specs[i])) elastic_seen_ = true;
    // A job with dependencies may have been stored blocked or cancelled: the store knows.
    if (specs[i].has_deps()) {
      waiting_stale_ = true;
    } else {
      // As the store keeps it (SubmitStart): a --hold job is held.
      DepDecision start = SubmitStart(specs[i], DepDecision{});
      PendingJob p = PendingOf(ids[i], specs[i], now, now, start.not_before);
      if (start.not_before >= kHeldNotBefore) p.held_by = HeldBy(start.reason);
      waiting_.emplace(ids[i], std::move(p));
    }
  }
  RequestSchedule();
}

void Scheduler::AddWaiting(JobId id, const JobSpec& spec, UnixMs submitted_at, UnixMs queued_at,
                           UnixMs not_before) {
  waiting_.emplace(id, PendingOf(id, spec, submitted_at, queued_at, not_before));
}

void Scheduler::Queued(const Job& job, UnixMs now) {
  // A job held while it was blocked stays held once its dependencies are met.
  PendingJob p = PendingOf(job.id, job.spec, job.submitted_at, now, job.not_before);
  if (IsElastic(job.spec)) elastic_seen_ = true;
  if (job.not_before >= kHeldNotBefore) p.held_by = HeldBy(job.reason);
  p.service_band = ServiceBand(AttainedGpuMs(job), config_.attained_service_ms);
  waiting_.emplace(job.id, std::move(p));
  RequestSchedule();
}

void Scheduler::Left(JobId id) {
  waiting_.erase(id);
  reasons_.erase(id);
  resizing_.erase(id);
}

void Scheduler::Requeued(JobId id) {
  waiting_stale_ = true;
  reasons_.erase(id);  // waiting again: its reason must be written anew
}

void Scheduler::NoteWaiting(JobId id) {
  Result<Job> job = store_.Get(id);
  if (!job.ok()) {
    waiting_stale_ = true;  // read it with the rest at the next pass
    return;
  }
  waiting_.erase(id);  // a requeued job comes back with its new queued_at and backoff
  if (job->state != JobState::kQueued) return;
  PendingJob p = PendingOf(id, job->spec, job->submitted_at, job->queued_at, job->not_before);
  if (IsElastic(job->spec)) elastic_seen_ = true;
  if (job->not_before >= kHeldNotBefore) p.held_by = HeldBy(job->reason);
  p.service_band = ServiceBand(AttainedGpuMs(*job), config_.attained_service_ms);
  waiting_.emplace(id, std::move(p));
}

void Scheduler::Reload() {
  waiting_stale_ = true;
  holds_.clear();
  reasons_.clear();
  unwritten_.clear();
  unwritten_next_ = 0;
  fair_share_loaded_ = false;
}

void Scheduler::SchedulePass() {
  UnixMs now = clock_.Now();
  storage_retry_at_ = 0;
  agent_.ClearPortRetry();
  // Every node records the ends of the attempts it ran, the store's refusals included.
  if (agent_.RetryUnrecordedEnds()) storage_retry_at_ = now + kStorageRetryMs;
  // In a cluster only the leader places; the others run what it placed on them.
  if (!site_->Places()) {
    ArmWakeup(now);
    return;
  }
  if (Status st = RefreshWaiting(); !st.ok()) {
    spdlog::error("scheduling pass: {}", st.message());
    if (!StorageProblem(st, state_dir_).empty()) storage_retry_at_ = now + kStorageRetryMs;
    ArmWakeup(now);
    return;
  }
  waiting_jobs_ = static_cast<int64_t>(waiting_.size());
  if (waiting_.empty()) {
    FairShareNow(now);  // attempts that ended are folded in while they are known
    holds_.clear();
    GrowRunning(Policy(), now);  // idle GPUs nobody waits for
    ArmWakeup(now);
    return;
  }
  int64_t began_ns = MonotonicNs();
  std::vector<NodeState> nodes = site_->PassNodes();  // first: a leader's fair share reads it
  UsageByUser usage = FairShareNow(now);
  PolicyConfig policy = Policy();
  // The index keeps the order: no sort of the whole queue on each pass.
  std::vector<const PendingJob*> ordered = waiting_.Ordered(usage);
  std::vector<std::pair<JobId, std::string>> throttled = ThrottleGroups(ordered);
  std::vector<PendingJob> resized;  // resized jobs as they wait: at their new size
  std::vector<Hold> holds = holds_;
  PrepareResizes(nodes, ordered, resized, holds, now);
  PlacementResult result = PlaceOrdered(ordered, nodes, policy, now, holds);
  for (auto& [id, reason] : throttled) {
    result.waiting.push_back({id, static_cast<uint32_t>(result.reason_texts.size())});
    result.reason_texts.push_back(std::move(reason));
  }
  std::vector<PendingJob> may_preempt = MayPreempt(result, ordered, now);
  holds_ = std::move(result.holds);
  GrowAtStart(result.starts, nodes, holds_, policy, now);
  for (const StartDecision& d : result.starts) resizing_.erase(d.job);
  StartDecided(result.starts, now);
  Preempt(may_preempt, nodes, policy, usage, now, result);
  GrowRunning(policy, now);
  waiting_jobs_ = static_cast<int64_t>(waiting_.size());
  WriteReasons(result);
  if (counters_)
    counters_->pass_duration.Observe(static_cast<double>(MonotonicNs() - began_ns) / 1e9);
  ArmWakeup(now);
}

// Takes out of `ordered` the jobs whose group already runs as many as its limit allows
// (counting those earlier in line that may start now), and says why each waits. The store
// counts the group's running jobs, so a cluster's leader counts every node's.
std::vector<std::pair<JobId, std::string>> Scheduler::ThrottleGroups(
    std::vector<const PendingJob*>& ordered) {
  std::vector<std::pair<JobId, std::string>> throttled;
  std::map<JobId, int> room;  // by group: how many more may start in this pass
  std::erase_if(ordered, [&](const PendingJob* job) {
    if (job->group_limit <= 0) return false;
    auto [it, fresh] = room.try_emplace(job->group, 0);
    if (fresh) it->second = job->group_limit - ActiveInGroup(job->group, job->group_limit);
    if (it->second > 0) {
      --it->second;
      return false;
    }
    throttled.emplace_back(job->id, fmt::format("group {}: at most {} of its jobs run at once "
                                                "(%{}), and that many are running or starting",
                                                job->group, job->group_limit, job->group_limit));
    return true;
  });
  return throttled;
}

int Scheduler::ActiveInGroup(JobId group, int limit) {
  ListQuery query;
  query.states = {JobState::kStarting, JobState::kRunning};
  query.group = group;
  query.with_env = false;
  Result<std::vector<Job>> active = store_.List(query);
  if (active.ok()) return static_cast<int>(active->size());
  spdlog::warn("group {}: {}; starting none of it this pass", group, active.status().message());
  return limit;  // unknown: start none rather than too many
}

void Scheduler::StartDecided(const std::vector<StartDecision>& starts, UnixMs now) {
  std::string problem;
  std::vector<JobId> stopped;  // by `problem`: the one that met it and those not tried
  for (const StartDecision& d : starts) {
    if (!problem.empty()) {
      stopped.push_back(d.job);
      continue;
    }
    reasons_.erase(d.job);
    waiting_.erase(d.job);
    Result<Job> job = store_.Get(d.job);
    Status st = job.ok() ? site_->Place(*job, d) : job.status();
    if (st.ok()) {
      if (counters_) {
        counters_->queue_wait.Observe(
            static_cast<double>(std::max<UnixMs>(now - job->queued_at, 0)) / 1000.0);
      }
      continue;
    }
    waiting_stale_ = true;  // whatever the store now says of it
    if (st.code() == Code::kUnavailable && agent_.port_retry_at() != 0) {
      spdlog::info("job {}: {}", d.job, st.message());  // TakeMasterPort: it waits
      continue;
    }
    spdlog::error("job {}: {}", d.job, st.message());
    problem = StorageProblem(st, state_dir_);
    if (!problem.empty()) stopped.push_back(d.job);
  }
  if (problem.empty()) return;
  storage_retry_at_ = now + kStorageRetryMs;
  WriteStorageReasons(stopped,
                      fmt::format("{}; trying again every {}s", problem, kStorageRetryMs / 1000));
}

// Best effort: when the database is what is full, this fails too, and the log says why.
void Scheduler::WriteStorageReasons(const std::vector<JobId>& ids, const std::string& reason) {
  std::vector<std::pair<JobId, std::string>> changed;
  uint64_t digest = ReasonDigest(reason);
  for (JobId id : ids) {
    auto [it, added] = reasons_.try_emplace(id);
    it->second.live = kNoLiveReason;  // the store's, written now, is the one to show
    if (!added && it->second.written == digest) continue;
    it->second.written = digest;
    changed.emplace_back(id, reason);
  }
  if (changed.empty()) return;
  if (Status st = store_.SetReasons(changed); !st.ok()) spdlog::warn("reasons: {}", st.message());
}

UsageByUser Scheduler::FairShareNow(UnixMs now) {
  int64_t half_life = config_.fair_share_half_life_ms;
  if (!fair_share_loaded_) {
    fair_share_ = FairShareLedger(half_life);
    ListQuery query;
    query.with_attempts = true;
    query.only_started = true;
    query.with_env = false;
    Result<std::vector<Job>> jobs = store_.List(query);
    if (!jobs.ok()) {
      spdlog::warn("fair share: {}", jobs.status().message());
    } else {
      for (const Job& job : *jobs) {
        for (const Attempt& a : job.attempts) {
          if (!a.ended_at) continue;
          int gpus = static_cast<int>(a.gpu_indices.size());
          fair_share_.AddEnded(job.spec.user, gpus, a.started_at, *a.ended_at);
        }
      }
    }
    fair_share_loaded_ = true;
  }
  // The attempts running now: this node's, or (a cluster's leader) every node's.
  RunningUses running = site_->Running();
  // Attempts seen running that are gone ended about now.
  for (const auto& [key, run] : running_use_) {
    if (!running.count(key)) fair_share_.AddEnded(run.user, run.gpus, run.started_at, now);
  }
  running_use_ = std::move(running);
  UsageByUser usage = fair_share_.At(now);
  for (const auto& [key, run] : running_use_) {
    usage[run.user] += DecayedGpuHours(run.gpus, run.started_at, now, now, half_life);
  }
  return usage;
}

Result<Explanation> Scheduler::ExplainWaiting(JobId id) {
  TRAINQ_RETURN_IF_ERROR(RefreshWaiting());
  UnixMs now = clock_.Now();
  UsageByUser usage = FairShareNow(now);
  std::vector<PendingJob> pending;
  pending.reserve(waiting_.size());
  for (const auto& [jid, p] : waiting_) pending.push_back(p);
  std::vector<NodeState> nodes = site_->PassNodes();
  return Explain(id, pending, nodes, Policy(), now, usage, holds_);
}

PreemptConfig Scheduler::PreemptSettings() const { return PreemptConfigFrom(config_); }

std::vector<PendingJob> Scheduler::MayPreempt(const PlacementResult& result,
                                              std::span<const PendingJob* const> ordered,
                                              UnixMs now) const {
  // Those a pass left waiting, in placement order; one that waits for something no victim
  // frees (a backoff, a pause, its user's limit) is judged by Place as it tries victims, so
  // it preempts nothing. The first few only: a long queue's tail waits for them anyway.
  constexpr size_t kMostPerPass = 64;
  std::set<JobId> left;
  for (const PlacementResult::Waiting& w : result.waiting) left.insert(w.job);
  std::vector<PendingJob> out;
  for (const PendingJob* job : ordered) {
    if (out.size() == kMostPerPass) break;
    if (!left.count(job->id) || job->gpus <= 0 || job->not_before > now ||
        preempting_.count(job->id)) {
      continue;
    }
    out.push_back(*job);
  }
  return out;
}

std::vector<RunningJob> Scheduler::RunningForPreemption(std::map<JobId, Job>* jobs, UnixMs now) {
  ListQuery query;
  query.states = {JobState::kStarting, JobState::kRunning};
  query.with_attempts = true;
  query.with_env = false;
  Result<std::vector<Job>> active = store_.List(query);
  std::vector<RunningJob> out;
  if (!active.ok()) {
    spdlog::warn("preemption: {}", active.status().message());
    return out;
  }
  std::set<JobId> stopping;
  for (const auto& [preemptor, p] : preempting_)
    stopping.insert(p.victims.begin(), p.victims.end());
  for (Job& job : *active) {
    const Attempt* a = job.current();
    if (a == nullptr) continue;
    RunningJob r;
    r.job = job.id;
    r.user = job.spec.user;
    r.priority = job.spec.priority;
    r.preemptible = job.spec.stop.preemptible.value_or(config_.preemptible) &&
                    job.spec.gate_pid == 0;  // a gate has no processes to warn
    r.started_at = a->started_at > 0 ? a->started_at : now;
    r.attained_gpu_ms = AttainedGpuMs(job);  // the ended attempts'; this one's runs on
    for (auto e = job.attempts.rbegin() + 1; e < job.attempts.rend(); ++e) {
      if (!e->end_reason.starts_with("preempted by job ")) break;
      ++r.preempted_in_a_row;
      if (r.last_preempted_at == 0) r.last_preempted_at = e->ended_at.value_or(0);
    }
    r.stop_ms = (job.spec.stop.signal > 0 ? job.spec.stop.lead_ms : 0) + config_.grace_ms;
    auto live = agent_.live().find(job.id);
    r.stopping = stopping.count(job.id) > 0 || resizing_.count(job.id) > 0 ||
                 (live != agent_.live().end() &&
                  (live->second.cancel_requested || !live->second.stop_requested.empty()));
    if (a->parts.empty()) {
      r.parts.push_back({a->node, a->gpu_indices});
    } else {
      for (const AttemptPart& part : a->parts) r.parts.push_back({part.node, part.gpu_indices});
    }
    r.cpus = a->cpus;
    out.push_back(std::move(r));
    if (jobs != nullptr) jobs->emplace(job.id, std::move(job));
  }
  return out;
}

void Scheduler::Preempt(const std::vector<PendingJob>& candidates,
                        const std::vector<NodeState>& nodes, const PolicyConfig& policy,
                        const UsageByUser& usage, UnixMs now, PlacementResult& result) {
  preempt_wakeup_ = 0;
  // Preemptions whose preemptor started or left, or whose victims never stopped, are over.
  std::set<JobId> waiting_ids;
  for (const PlacementResult::Waiting& w : result.waiting) waiting_ids.insert(w.job);
  std::erase_if(preempting_, [&](const auto& kv) {
    return !waiting_ids.count(kv.first) || now >= kv.second.give_up_at;
  });
  std::erase_if(holds_, [&](const Hold& h) { return h.preempting && !preempting_.count(h.job); });
  std::vector<PendingJob> ready;
  for (const PendingJob& job : candidates) {
    if (!preempting_.count(job.id)) ready.push_back(job);
  }
  // The GPUs as this pass's starts left them: a preemptor must not plan on one just taken.
  // Read only when something may be decided on them.
  std::vector<NodeState> after_starts;
  bool read_after = false;
  auto free_now = [&]() -> const std::vector<NodeState>& {
    if (result.starts.empty()) return nodes;
    if (!read_after) {
      after_starts = site_->PassNodes();
      HoldAdded(after_starts, now);
      read_after = true;
    }
    return after_starts;
  };
  // Elastic jobs shrink first: a shrunk job runs on, a preempted one does not.
  if (!ready.empty()) {
    std::map<JobId, Job> elastic_jobs;
    std::vector<GangRun> gangs;
    std::vector<ElasticRun> elastic = ElasticRunning(&elastic_jobs, now, &gangs);
    if (!elastic.empty() || !gangs.empty()) {
      ready = ShrinkFor(std::move(ready), elastic, gangs, elastic_jobs, free_now(), policy, now);
    }
  }
  std::map<JobId, Job> jobs;
  std::vector<RunningJob> running;
  if (!ready.empty()) running = RunningForPreemption(&jobs, now);
  bool any_preemptible = std::any_of(running.begin(), running.end(),
                                     [](const RunningJob& r) { return r.preemptible; });
  std::vector<Preemption> decisions;
  if (any_preemptible) {
    decisions = ChoosePreemptions(std::span<const PendingJob>(ready), free_now(), running, policy,
                                  PreemptSettings(), usage, now);
    // A preemptible job too young to stop now may be one later: a pass is due then.
    // So may one the thrash guard spares, once it is no longer spared.
    auto due = [&](UnixMs at) {
      if (at > now && (preempt_wakeup_ == 0 || at < preempt_wakeup_)) preempt_wakeup_ = at;
    };
    for (const RunningJob& r : running) {
      if (!r.preemptible || r.stopping) continue;
      due(r.started_at + config_.min_runtime_ms);
      if (r.preempted_in_a_row >= 2) due(r.last_preempted_at + config_.preempt_spare_ms);
      // When it passes the attained-service threshold, that rule may take it.
      size_t gpus = 0;
      for (const NodeGpus& part : r.parts) gpus += part.gpu_indices.size();
      double need = double(config_.attained_service_ms) - r.attained_gpu_ms;
      if (config_.preempt_for_attained_service && gpus > 0 && need > 0) {
        due(r.started_at + static_cast<int64_t>(need / double(gpus)) + 1);
      }
    }
  }
  for (const Preemption& d : decisions) {
    Preempting& p = preempting_[d.job];
    p.ready_at = d.ready_at;
    // Past the victims' lead and grace, with room for a slow stop and the next sample.
    p.give_up_at = d.ready_at + config_.grace_ms + 60 * 1000;
    for (size_t i = 0; i < d.victims.size(); ++i) {
      auto v = jobs.find(d.victims[i]);
      if (v == jobs.end()) continue;
      const Job& victim = v->second;
      ShimControl control;
      control.stop = "preempted";
      control.reason = i < d.victim_reasons.size() ? d.victim_reasons[i]
                                                   : fmt::format("preempted by job {}", d.job);
      control.stop_in_ms = victim.spec.stop.signal > 0 ? victim.spec.stop.lead_ms : 0;
      Status st = site_->Preempt(victim, control);
      if (!st.ok()) {
        spdlog::warn("job {}: preempting job {}: {}", d.job, victim.id, st.message());
        continue;
      }
      spdlog::info("job {}: {}; job {} {}", d.job, d.reason, victim.id, control.reason);
      p.victims.push_back(victim.id);
      p.victims_text +=
          fmt::format("{}job {} ({}, priority {})", p.victims_text.empty() ? "" : ", ", victim.id,
                      victim.spec.user, victim.spec.priority);
    }
    if (p.victims.empty()) {
      preempting_.erase(d.job);
      continue;
    }
    std::erase_if(holds_, [&](const Hold& h) { return h.job == d.job; });
    holds_.push_back(PreemptingHold(d));
  }
  if (preempting_.empty()) return;
  // Each preemptor's reason says whom it stops and when their GPUs free up.
  for (PlacementResult::Waiting& w : result.waiting) {
    auto it = preempting_.find(w.job);
    if (it == preempting_.end()) continue;
    const Preempting& p = it->second;
    std::string text =
        p.shrink ? (p.ready_at > now
                        ? fmt::format("will start when {}, in {}: the GPUs are held for this job",
                                      p.victims_text, FormatDuration(p.ready_at - now))
                        : fmt::format("will start when {}: waiting for it to stop", p.victims_text))
        : p.ready_at > now
            ? fmt::format("will preempt {} in {}: its GPUs are held for this job", p.victims_text,
                          FormatDuration(p.ready_at - now))
            : fmt::format("preempting {}: waiting for its processes to end", p.victims_text);
    w.reason = static_cast<uint32_t>(result.reason_texts.size());
    result.reason_texts.push_back(std::move(text));
    UnixMs next = p.ready_at > now ? p.ready_at : p.give_up_at;
    if (preempt_wakeup_ == 0 || next < preempt_wakeup_) preempt_wakeup_ = next;
  }
}

Result<std::vector<PreemptCandidate>> Scheduler::ExplainPreemption(JobId id) {
  TRAINQ_RETURN_IF_ERROR(RefreshWaiting());
  UnixMs now = clock_.Now();
  const PendingJob* job = waiting_.find(id);
  if (job == nullptr) return std::vector<PreemptCandidate>{};
  std::vector<const PendingJob*> pending;
  for (const auto& [jid, p] : waiting_) pending.push_back(&p);
  std::vector<RunningJob> running = RunningForPreemption(nullptr, now);
  UsageByUser usage = FairShareNow(now);
  return trainq::ExplainPreemption(*job, pending, site_->PassNodes(), running, Policy(),
                                   PreemptSettings(), usage, now);
}

const std::string* Scheduler::LiveReason(JobId id) const {
  if (site_ == nullptr || !site_->Places()) return nullptr;
  auto it = reasons_.find(id);
  if (it == reasons_.end() || it->second.live == kNoLiveReason || it->second.pass != pass_) {
    return nullptr;
  }
  return &live_texts_[it->second.live];
}

// Keeps the pass's reasons as the ones to show, and writes those that changed: the first in
// line now, the rest a chunk at a time (WriteUnwrittenReasons).
void Scheduler::WriteReasons(PlacementResult& result) {
  ++pass_;
  live_texts_ = std::move(result.reason_texts);
  live_digests_.clear();
  live_digests_.reserve(live_texts_.size());
  for (const std::string& text : live_texts_) live_digests_.push_back(ReasonDigest(text));
  unwritten_.clear();
  unwritten_next_ = 0;
  for (const PlacementResult::Waiting& w : result.waiting) {
    auto [it, added] = reasons_.try_emplace(w.job);
    it->second.live = w.reason;
    it->second.pass = pass_;
    if (added || it->second.written != live_digests_[w.reason]) unwritten_.push_back(w.job);
  }
  WriteUnwrittenReasons();
}

void Scheduler::WriteReasonsNow() {
  while (reasons_unwritten() > 0) WriteUnwrittenReasons();
  reason_timer_.cancel();
}

void Scheduler::WriteUnwrittenReasons() {
  std::vector<std::pair<JobId, std::string>> rows;
  std::vector<ReasonState*> written;
  while (unwritten_next_ < unwritten_.size() && rows.size() < kReasonRowsPerWrite) {
    auto it = reasons_.find(unwritten_[unwritten_next_++]);
    if (it == reasons_.end()) continue;  // started or left the queue since
    ReasonState& r = it->second;
    if (r.pass != pass_ || r.live == kNoLiveReason || r.written == live_digests_[r.live]) continue;
    rows.emplace_back(it->first, live_texts_[r.live]);
    written.push_back(&r);
  }
  if (!rows.empty()) {
    if (Status st = store_.SetReasons(rows); st.ok()) {
      for (ReasonState* r : written) r->written = live_digests_[r->live];
    } else {
      spdlog::warn("reasons: {}", st.message());  // the next pass tries them again
    }
  }
  if (unwritten_next_ == unwritten_.size()) {
    unwritten_ = {};
    unwritten_next_ = 0;
    return;
  }
  reason_timer_.expires_after(kReasonWriteGap);
  reason_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && !stopping_) WriteUnwrittenReasons();
  });
}

// A job that left the queue (cancelled, retried later) must get its reason written again.
// Run after a reload only: the paths that take one job out of waiting_ forget its reason
// themselves, and a walk of every reason on each pass cost a third of an idle pass.
void Scheduler::ForgetReasonsExcept() {
  std::erase_if(reasons_, [this](const auto& entry) { return !waiting_.count(entry.first); });
}

// Time alone changes what a pass decides (a backoff ends, a job ages, a ramp-up window
// closes) while no submit, exit or sample comes to say so: wake up for it.
void Scheduler::ArmWakeup(UnixMs now) {
  // Only the node that places wakes for the queue's sake: a follower's index is stale, and
  // a time it says is due would never be acted on (the pass returns at once), so the timer
  // would fire again and again. A follower wakes only to write ends the store refused.
  std::vector<const PendingJob*> waiting;
  if (site_->Places()) {
    waiting.reserve(waiting_.size());
    for (const auto& [id, job] : waiting_) waiting.push_back(&job);
  }
  next_wakeup_ = NextPassDue(waiting, site_->LastNodes(), Policy(), now);
  if (storage_retry_at_ != 0 && (next_wakeup_ == 0 || storage_retry_at_ < next_wakeup_)) {
    next_wakeup_ = storage_retry_at_;
  }
  if (UnixMs port = agent_.port_retry_at();
      port != 0 && (next_wakeup_ == 0 || port < next_wakeup_)) {
    next_wakeup_ = port;
  }
  if (site_->Places() && preempt_wakeup_ > now &&
      (next_wakeup_ == 0 || preempt_wakeup_ < next_wakeup_)) {
    next_wakeup_ = preempt_wakeup_;
  }
  if (site_->Places() && elastic_wakeup_ > now &&
      (next_wakeup_ == 0 || elastic_wakeup_ < next_wakeup_)) {
    next_wakeup_ = elastic_wakeup_;
  }
  if (next_wakeup_ == 0) {
    wakeup_timer_.cancel();
    return;
  }
  // A far deadline is re-armed by the pass it triggers: a steady clock in nanoseconds
  // cannot hold a century.
  constexpr int64_t kMaxDelayMs = 24 * 3600 * 1000;
  wakeup_timer_.expires_after(std::chrono::milliseconds(std::min(next_wakeup_ - now, kMaxDelayMs)));
  wakeup_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && !stopping_) OnWakeupTimer();
  });
}

}  // namespace trainq
