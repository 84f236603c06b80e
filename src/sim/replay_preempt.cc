// trainq's preemption step in the replay: what the daemon's Scheduler::Preempt does after a
// pass (src/daemon/scheduler.cc), on the simulated cluster. ChoosePreemptions decides; the
// simulator stops the victims after stop_ms and holds their GPUs for the preemptor.
#include <algorithm>

#include "src/core/wait_kind.h"
#include "src/sim/preempt_filter.h"
#include "src/sim/replay_internal.h"

namespace trainq::sim::replay_internal {

// As the daemon builds it from its config: the same function, the same fields.
PreemptConfig Replayer::PreemptSettings() const { return PreemptConfigFrom(options_); }

// As ChoosePreemptions judges "large": at least half the GPUs of the largest node.
bool Replayer::LargeForAging(size_t i) const {
  return trace_[i].gpus > 0 && 2 * trace_[i].gpus >= cluster_.max_gpus_per_node();
}

void Replayer::PreemptStep(const PlacementResult* result, int64_t now) {
  ExpirePreemptions(now);
  std::vector<const PendingJob*> ready = result ? LeftForGpus(*result) : AllWaitingInOrder();
  // Elastic jobs shrink first: a resize keeps the job running, a preemption does not.
  if (Resizes()) ready = ShrinkFor(std::move(ready), now);
  if (ready.empty() || !options_.preempt) return;
  std::vector<RunningJob> running = RunningJobs();
  std::vector<NodeState> storage;
  std::span<const NodeState> nodes = PassNodes(storage);
  PreemptConfig settings = PreemptSettings();
  std::vector<const PendingJob*> asked =
      WorthAsking(ready, nodes, running, config_, settings, usage_, now);
  if (asked.empty()) return;
  std::vector<Preemption> decisions =
      ChoosePreemptions(asked, nodes, running, config_, settings, usage_, now);
  for (const Preemption& d : decisions) ApplyPreemption(d, now);
}

// Preemptions whose preemptor started, or did not in time, are over; so are their holds.
void Replayer::ExpirePreemptions(int64_t now) {
  std::erase_if(preempting_, [&](const auto& kv) {
    return runs_[size_t(kv.first - 1)].state != RunState::kWaiting || now >= kv.second.give_up_at;
  });
  std::erase_if(holds_, [&](const Hold& h) { return h.preempting && !preempting_.count(h.job); });
}

// The jobs the pass left waiting for GPUs (busy, or short of memory), in placement order, as
// the daemon's Scheduler::MayPreempt picks them by their reasons' kinds; not those already
// preempting.
std::vector<const PendingJob*> Replayer::LeftForGpus(const PlacementResult& result) const {
  std::vector<char> for_gpus(result.reason_texts.size());
  for (size_t k = 0; k < result.reason_texts.size(); ++k) {
    std::string_view kind = WaitKind(JobState::kQueued, result.reason_texts[k]);
    // "other" too: WaitKind gives the whole-GPU reason ("needs 1 whole GPU (no other job or
    // process on it); none is free; taken: GPU 0 by job 4") no kind of its own, and in the
    // simulator no reason but a GPU's can be "other".
    for_gpus[k] = kind == "gpus_busy" || kind == "gpu_memory" || kind == "other";
  }
  std::vector<const PendingJob*> out;
  for (const PlacementResult::Waiting& w : result.waiting) {
    const PendingJob& job = pending_[size_t(w.job - 1)];
    if (job.gpus > 0 && for_gpus[w.reason] && !preempting_.count(w.job)) out.push_back(&job);
  }
  return out;
}

// With every GPU full, every waiting job waits for GPUs: all of them, in placement order.
std::vector<const PendingJob*> Replayer::AllWaitingInOrder() const {
  std::vector<const PendingJob*> out;
  for (size_t i : waiting_) {
    if (!IsGang(i) && trace_[i].gpus > 0 && !preempting_.count(JobId(i + 1)))
      out.push_back(&pending_[i]);
  }
  std::stable_sort(out.begin(), out.end(), [&](const PendingJob* a, const PendingJob* b) {
    return PlacedBefore(*a, *b, usage_);
  });
  return out;
}

// Every attempt as the daemon's RunningForPreemption describes it: all preemptible, priority 0.
std::vector<RunningJob> Replayer::RunningJobs() const {
  std::vector<RunningJob> out;
  out.reserve(running_.size());
  for (size_t i : running_) {
    const JobRun& r = runs_[i];
    RunningJob v;
    v.job = JobId(i + 1);
    v.user = trace_[i].user;
    v.preemptible = true;
    v.started_at = r.attempt_start_ms;
    v.attained_gpu_ms = r.attained_gpu_ms;
    v.preempted_in_a_row = r.preemptions;  // every earlier attempt of a job ended preempted
    v.last_preempted_at = r.last_preempted_ms;
    v.stop_ms = options_.stop_ms;
    v.stopping = r.state == RunState::kStopping;
    for (const auto& [node, gpus] : placed_[i])
      v.parts.push_back({cluster_.nodes()[node].name, gpus});
    v.cpus = pending_[i].cpus;
    v.host_mem_bytes = pending_[i].host_mem_bytes;
    out.push_back(std::move(v));
  }
  return out;
}

void Replayer::ApplyPreemption(const Preemption& d, int64_t now) {
  for (JobId v : d.victims) StopAt(size_t(v - 1), now + options_.stop_ms);
  preempting_[d.job] = {d.ready_at, d.ready_at + kGiveUpMs};
  std::erase_if(holds_, [&](const Hold& h) { return h.job == d.job; });
  holds_.push_back(PreemptingHold(d));
}

}  // namespace trainq::sim::replay_internal
