#include "src/core/state_machine.h"

#include <fmt/format.h>

namespace trainq {

bool TransitionAllowed(JobState from, JobState to) {
  using S = JobState;
  switch (from) {
    case S::kQueued: return to == S::kStarting || to == S::kCancelled || to == S::kBlocked;
    case S::kBlocked: return to == S::kQueued || to == S::kCancelled;
    case S::kStarting:
    case S::kRunning:
      return to == S::kSucceeded || to == S::kFailed || to == S::kCancelled || to == S::kQueued ||
             (from == S::kStarting && to == S::kRunning);
    case S::kSucceeded:
    case S::kFailed:
    case S::kCancelled: return to == S::kQueued;
  }
  return false;
}

Status CheckTransition(JobState from, JobState to) {
  if (TransitionAllowed(from, to)) return Status::Ok();
  return Status::Conflict(
      fmt::format("job is {}; it cannot become {}", StateName(from), StateName(to)));
}

}  // namespace trainq
