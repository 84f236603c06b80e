// Job dependencies (--after, --after-any): what a job waiting on others should do given
// the states of the jobs it waits on. Pure: the caller reads the states from the store.
#pragma once

#include <span>
#include <string>

#include "trainq/job.h"

namespace trainq {

// What the caller knows of one dependency.
struct DepState {
  JobId id = 0;
  bool found = true;  // false: the store has no such job (it cannot be waited for)
  JobState state = JobState::kQueued;
  std::string reason;  // the dependency's own reason (why it was cancelled)
};

struct DepDecision {
  // kQueued: every dependency is satisfied. kBlocked: some are still open (reason says
  // which: "waiting for job 12 (running), 13 (queued)"). kCancelled: an --after
  // dependency failed or was cancelled ("dependency 12 failed").
  JobState state = JobState::kQueued;
  std::string reason;
  UnixMs not_before = 0;  // kHeldNotBefore: held (SubmitStart)
};

// `deps` holds the state of every id in spec.after and spec.after_any (order free; an id
// missing from `deps` counts as open). An --after dependency that ended other than
// succeeded cancels the job; the reason names the first such one in spec.after order and,
// when that one was itself cancelled by a dependency, the root cause of the chain:
// "dependency 13 was cancelled (dependency 12 failed)".
DepDecision DecideDeps(const JobSpec& spec, std::span<const DepState> deps);

// A new job as the store keeps it: its dependencies' decision (DecideDeps; queued without
// any), held on top when it was submitted with --hold: not_before kHeldNotBefore, and a
// queued job's reason saying who holds it (the passes add its id, HeldReason).
DepDecision SubmitStart(const JobSpec& spec, DepDecision deps);

}  // namespace trainq
