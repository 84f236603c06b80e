// The scheduler role: turns the store's waiting jobs and this node's GPUs into the pure
// policy's input, and carries out its decisions. Runs after every submit, exit and sample
// (coalesced into one pass per loop turn), never on a fixed tick.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "src/daemon/daemon_impl.h"

namespace trainq {

void DaemonImpl::RequestSchedule() {
  if (schedule_posted_ || stopping_) return;
  schedule_posted_ = true;
  boost::asio::post(io_, [this] {
    schedule_posted_ = false;
    if (!stopping_) SchedulePass();
  });
}

std::vector<NodeState> DaemonImpl::BuildNodes() const {
  NodeState node;
  node.name = node_;
  node.cpu_slots = cpu_slots_;
  for (const auto& [id, live] : live_) node.cpu_slots_used += live.cpus;
  if (!snapshot_) return {node};
  for (const GpuInfo& info : snapshot_->gpus) {
    GpuState gpu;
    gpu.index = info.index;
    gpu.uuid = info.uuid;
    gpu.total_bytes = info.total_bytes;
    gpu.free_bytes = info.free_bytes;
    std::set<int64_t> ours;
    for (const auto& [id, live] : live_) {
      if (std::find(live.gpu_indices.begin(), live.gpu_indices.end(), info.index) ==
          live.gpu_indices.end()) {
        continue;
      }
      Holding h;
      h.job = id;
      h.reserved_bytes = live.reserved_bytes;
      h.exclusive = live.exclusive;
      h.started_at = live.started_at;
      if (info.processes_known) {
        auto it = live.used_by_gpu.find(info.index);
        h.used_now = it == live.used_by_gpu.end() ? 0 : it->second;
      }
      gpu.holdings.push_back(h);
    }
    for (const GpuProcess& p : info.processes) {
      if (!pid_owner_.count(p.pid)) ++gpu.foreign_processes;
    }
    node.gpus.push_back(std::move(gpu));
  }
  node.topology = snapshot_->topology;  // by position, as node.gpus: both in snapshot order
  return {node};
}

PolicyConfig DaemonImpl::Policy() const {
  PolicyConfig policy;
  policy.headroom_bytes = config_.headroom_bytes;
  policy.ramp_up_ms = config_.ramp_up_ms;
  policy.devices = config_.devices;
  policy.max_jobs_per_gpu = config_.max_jobs_per_gpu;
  policy.aging_ms = config_.aging_ms;
  return policy;
}

int DaemonImpl::MaxGpusPerNodeNow() const {
  return snapshot_ ? static_cast<int>(snapshot_->gpus.size()) : 0;
}

namespace {

PendingJob PendingOf(JobId id, const JobSpec& spec, UnixMs submitted_at, UnixMs not_before) {
  PendingJob p;
  p.id = id;
  p.gpus = spec.gpus;
  p.mem_bytes = spec.mem_bytes;
  p.mem_percent = spec.mem_percent;
  p.cpus = spec.cpus;
  p.priority = spec.priority;
  p.submitted_at = submitted_at;
  p.not_before = not_before;
  return p;
}

}  // namespace

Status DaemonImpl::RefreshWaiting() {
  if (!waiting_stale_) return Status::Ok();
  ListQuery query;
  query.states = {JobState::kQueued};
  query.with_env = false;  // the policy needs the requests; a started job is read in full
  Result<std::vector<Job>> waiting = store_->List(query);
  if (!waiting.ok()) return waiting.status();
  waiting_.clear();
  for (const Job& job : *waiting) {
    waiting_.emplace(job.id, PendingOf(job.id, job.spec, job.submitted_at, job.not_before));
  }
  waiting_stale_ = false;
  return Status::Ok();
}

void DaemonImpl::AddWaiting(JobId id, const JobSpec& spec, UnixMs submitted_at) {
  waiting_.emplace(id, PendingOf(id, spec, submitted_at, 0));
}

void DaemonImpl::SchedulePass() {
  if (Status st = RefreshWaiting(); !st.ok()) {
    spdlog::error("scheduling pass: {}", st.message());
    return;
  }
  waiting_jobs_ = static_cast<int64_t>(waiting_.size());
  ForgetReasonsExcept();
  if (waiting_.empty()) return;
  std::vector<PendingJob> pending;
  pending.reserve(waiting_.size());
  for (const auto& [id, p] : waiting_) pending.push_back(p);
  std::vector<NodeState> nodes = BuildNodes();
  PolicyConfig policy = Policy();
  UnixMs now = clock_.Now();
  PlacementResult result = Place(pending, nodes, policy, now);

  for (const StartDecision& d : result.starts) {
    written_reasons_.erase(d.job);
    waiting_.erase(d.job);
    Result<Job> job = store_->Get(d.job);
    Status st = job.ok() ? StartAttempt(*job, d) : job.status();
    if (!st.ok()) {
      spdlog::error("job {}: {}", d.job, st.message());
      waiting_stale_ = true;  // whatever the store now says of it
    }
  }
  waiting_jobs_ = static_cast<int64_t>(waiting_.size());
  WriteReasons(result.reasons);
  ArmWakeup(now);
}

// Writes only the reasons that changed since the last pass: most passes change few.
void DaemonImpl::WriteReasons(const std::vector<std::pair<JobId, std::string>>& reasons) {
  std::vector<std::pair<JobId, std::string>> changed;
  for (auto& [id, reason] : reasons) {
    auto it = written_reasons_.find(id);
    if (it != written_reasons_.end() && it->second == reason) continue;
    written_reasons_[id] = reason;
    changed.emplace_back(id, reason);
  }
  if (changed.empty()) return;
  if (Status st = store_->SetReasons(changed); !st.ok()) spdlog::warn("reasons: {}", st.message());
}

// A job that left the queue (cancelled, retried later) must get its reason written again.
void DaemonImpl::ForgetReasonsExcept() {
  std::erase_if(written_reasons_, [this](const auto& entry) { return !waiting_.count(entry.first); });
}

void DaemonImpl::ArmWakeup(UnixMs now) {
  UnixMs next = 0;
  for (const auto& [id, job] : waiting_) {
    if (job.not_before > now && (next == 0 || job.not_before < next)) next = job.not_before;
  }
  if (next == 0) return;
  wakeup_timer_.expires_after(std::chrono::milliseconds(next - now + 1));
  wakeup_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) RequestSchedule();
  });
}

}  // namespace trainq
