#include "src/daemon/dependencies.h"

#include <deque>
#include <set>
#include <span>

#include <spdlog/spdlog.h>

#include "src/core/deps.h"
#include "src/core/placement.h"

namespace trainq {

namespace {

std::vector<DepState> ReadDeps(Store& store, const JobSpec& spec) {
  std::vector<DepState> deps;
  auto read = [&](JobId id) {
    Result<Job> job = store.Get(id);
    if (job.ok()) {
      deps.push_back({id, true, job->state, job->reason});
    } else if (job.status().code() == Code::kNotFound) {
      deps.push_back({id, false, JobState::kCancelled, ""});
    }  // other errors: left out, so it counts as open and is judged again later
  };
  for (JobId id : spec.after) read(id);
  for (JobId id : spec.after_any) read(id);
  return deps;
}

}  // namespace

void Dependencies::ResolveDependents(JobId id) {
  std::deque<JobId> ended = {id};
  while (!ended.empty()) {
    Result<std::vector<Job>> dependents = store_.Dependents(ended.front());
    ended.pop_front();
    if (!dependents.ok()) {
      spdlog::error("dependencies: {}", dependents.status().message());
      continue;
    }
    for (const Job& job : *dependents) {
      DepDecision d = DecideDeps(job.spec, ReadDeps(store_, job.spec));
      // A held job's reason says it is held, and by whom, until its release.
      bool held = job.not_before >= kHeldNotBefore;
      if (d.state == JobState::kBlocked) {
        if (d.reason != job.reason && !held) {
          std::pair<JobId, std::string> reason{job.id, d.reason};
          if (Status st = store_.SetReasons(std::span(&reason, 1)); !st.ok()) {
            spdlog::warn("job {}: {}", job.id, st.message());
          }
        }
        continue;
      }
      UnixMs now = clock_.Now();
      std::string reason =
          held && d.state == JobState::kQueued ? HeldReason(job.id, HeldBy(job.reason)) : d.reason;
      Status st = store_.MoveWaiting(job.id, JobState::kBlocked, d.state, reason, now);
      if (!st.ok()) {
        // kConflict: resolved already (a cancel, an earlier pass); nothing left to do.
        if (st.code() != Code::kConflict) spdlog::error("job {}: {}", job.id, st.message());
        continue;
      }
      spdlog::info("job {}: dependencies resolved: {}{}", job.id, StateName(d.state),
                   d.reason.empty() ? "" : " (" + d.reason + ")");
      if (d.state == JobState::kQueued) {
        Job queued = job;
        queued.reason = reason;
        hooks_.queued(queued, now);
      } else {
        ended.push_back(job.id);  // cancelled: its own dependents follow
        hooks_.ended(job.id);
      }
    }
  }
}

void Dependencies::Recheck(JobId id) {
  Result<Job> job = store_.Get(id);
  if (!job.ok() || job->state != JobState::kQueued || !job->spec.has_deps()) return;
  DepDecision d = DecideDeps(job->spec, ReadDeps(store_, job->spec));
  Status st;
  if (d.state == JobState::kBlocked) {
    st = store_.MoveWaiting(id, JobState::kQueued, JobState::kBlocked, d.reason, clock_.Now());
  } else if (d.state == JobState::kCancelled) {
    st = store_.CancelWaiting(id, d.reason);
  } else {
    return;
  }
  if (!st.ok()) spdlog::warn("job {}: {}", id, st.message());
  hooks_.unqueued(id);
  if (d.state == JobState::kCancelled) {
    ResolveDependents(id);
    hooks_.ended(id);
  }
}

void Dependencies::Rejudge(JobId id) {
  Result<Job> job = store_.Get(id);
  if (!job.ok()) return;
  if (job->state == JobState::kQueued) return Recheck(id);
  if (job->state != JobState::kBlocked) return;
  DepDecision d = DecideDeps(job->spec, ReadDeps(store_, job->spec));
  if (d.state == JobState::kBlocked) {
    std::pair<JobId, std::string> reason{id, d.reason};
    if (Status st = store_.SetReasons(std::span(&reason, 1)); !st.ok()) {
      spdlog::warn("job {}: {}", id, st.message());
    }
    return;
  }
  UnixMs now = clock_.Now();
  if (Status st = store_.MoveWaiting(id, JobState::kBlocked, d.state, d.reason, now); !st.ok()) {
    if (st.code() != Code::kConflict) spdlog::error("job {}: {}", id, st.message());
    return;
  }
  if (d.state == JobState::kQueued) {
    hooks_.queued(*job, now);
  } else {
    ResolveDependents(id);
    hooks_.ended(id);
  }
}

void Dependencies::ResolveAllBlocked() {
  ListQuery query;
  query.states = {JobState::kBlocked};
  query.with_env = false;
  Result<std::vector<Job>> blocked = store_.List(query);
  if (!blocked.ok()) {
    spdlog::error("dependencies: {}", blocked.status().message());
    return;
  }
  // Judging a blocked job's dependencies is what ResolveDependents does for the dependents
  // of each of them; one pass over the distinct dependencies covers every blocked job.
  std::set<JobId> deps;
  for (const Job& job : *blocked) {
    deps.insert(job.spec.after.begin(), job.spec.after.end());
    deps.insert(job.spec.after_any.begin(), job.spec.after_any.end());
  }
  for (JobId id : deps) ResolveDependents(id);
}

}  // namespace trainq
