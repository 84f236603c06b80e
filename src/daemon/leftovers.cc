// Attempts that end without an exit record (docs/architecture.md, "The shim and
// re-adoption"): a shim killed -9, a run dir removed while the daemon was down, an attempt the
// daemon recorded but never started. What the attempt started may still run, off the books,
// on GPUs the scheduler would hand to the next job; so its processes are found (launcher's
// AttemptProcesses) and stopped as the shim would stop them, and only once none is left is the
// end recorded and are the GPUs and the port let go.
#include <csignal>

#include <spdlog/spdlog.h>

#include "src/core/duration.h"
#include "src/daemon/agent.h"

namespace trainq {

namespace {

// As the shim's own patience with processes that survive SIGKILL (uninterruptible sleep).
constexpr int64_t kKillPatienceMs = 30'000;

const char* Describe(Unrecorded why) {
  switch (why) {
    case Unrecorded::kShimDied:
      return "its shim died without an exit record";
    case Unrecorded::kNeverStarted:
      return "it was recorded but its shim never started";
    case Unrecorded::kRunDirMissing:
      return "its run dir is missing";
  }
  return "";
}

}  // namespace

void Agent::EndUnrecorded(JobId id, Unrecorded why) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  LiveAttempt& live = it->second;
  UnixMs now = clock_.Now();
  StoppingAttempt stopping;
  stopping.why = why;
  stopping.cancel_sent = live.cancel_requested;
  stopping.procs = launcher_->AttemptProcesses(live.run_dir, live.shim);
  stopping.found = stopping.procs.size();
  stopping.kill_at = now + config_.grace_ms;
  stopping.give_up_at = stopping.kill_at + kKillPatienceMs;
  live.stopping = std::move(stopping);
  if (live.stopping->procs.empty()) return RecordUnrecorded(id, 0);
  spdlog::warn(
      "job {} attempt {}: {}; stopping its {} processes (SIGTERM, SIGKILL after {}, "
      "grace_period)",
      id, live.n, Describe(why), live.stopping->found, FormatDuration(config_.grace_ms));
  for (const ProcStat& p : live.stopping->procs) {
    (void)launcher_->Signal({p.pid, p.start_ticks}, SIGTERM);  // kNotFound: already gone
  }
}

void Agent::CheckStopping() {
  std::vector<JobId> ids;
  for (const auto& [id, live] : live_) {
    if (live.stopping) ids.push_back(id);
  }
  UnixMs now = clock_.Now();
  for (JobId id : ids) {
    LiveAttempt& live = live_.at(id);
    StoppingAttempt& stopping = *live.stopping;
    // Rescanned each time: a process may have forked while it was being stopped.
    stopping.procs = launcher_->AttemptProcesses(live.run_dir, live.shim);
    if (stopping.procs.empty()) {
      RecordUnrecorded(id, 0);
    } else if (now >= stopping.give_up_at) {
      spdlog::error("job {} attempt {}: {} processes survive SIGKILL; leaving them", id, live.n,
                    stopping.procs.size());
      RecordUnrecorded(id, stopping.procs.size());
    } else if (now >= stopping.kill_at) {
      for (const ProcStat& p : stopping.procs) {
        (void)launcher_->Signal({p.pid, p.start_ticks}, SIGKILL);
      }
    }
  }
}

void Agent::RecordUnrecorded(JobId id, size_t survivors) {
  LiveAttempt& live = live_.at(id);
  // The shim that would have removed its attempt's cgroup is gone; with survivors the kernel
  // keeps the group anyway.
  if (survivors == 0) launcher_->RemoveAttemptCgroup(live.run_dir);
  // What it would have run once the tree was gone: a container's record is removed.
  launcher_->RunCleanup(live.run_dir);
  UnrecordedInput in;
  in.why = live.stopping->why;
  in.run_dir = live.run_dir;
  in.stopped = live.stopping->found;
  in.survivors = survivors;
  in.now = clock_.Now();
  if (live.cancel_requested) {
    in.cancel = live.stopping->cancel_sent ? CancelAt::kBeforeTheEnd : CancelAt::kWhileStopping;
  }
  RecordEnd(id, DecideUnrecorded(in));
}

}  // namespace trainq
