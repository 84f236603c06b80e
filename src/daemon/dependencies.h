// Job dependencies in the daemon: when a job reaches a done state its blocked dependents
// are judged again (DecideDeps) and moved on (queued, or cancelled, which in turn resolves
// their own dependents). Every move is a compare-and-set in the store, so doing it twice is
// harmless; on start every blocked job is judged again, which covers a crash between a
// job's end and the resolution of its dependents.
#pragma once

#include <functional>

#include "src/os/clock.h"
#include "src/store/store.h"

namespace trainq {

class Dependencies {
 public:
  // What the rest of the daemon does when a dependency moves a job. `queued`: a blocked job
  // is queued now (the waiting index takes it, a pass follows). `ended`: it was cancelled (its
  // notifications go out). `unqueued`: a queued job left the queue (blocked or cancelled
  // again after a retry; the waiting index forgets it).
  struct Hooks {
    std::function<void(const Job& job, UnixMs now)> queued;
    std::function<void(JobId id)> ended;
    std::function<void(JobId id)> unqueued;
  };

  // `store` and `clock` outlive the object. Its hooks come later (SetHooks), once what they
  // call is made.
  Dependencies(Store& store, const Clock& clock) : store_(store), clock_(clock) {}
  void SetHooks(Hooks hooks) { hooks_ = std::move(hooks); }

  // Job `id` ended or started: its blocked dependents are judged again, and theirs in turn
  // when one is cancelled.
  void ResolveDependents(JobId id);
  // A job just queued again (`trainq retry`) with dependencies: blocked again while one is
  // open, cancelled if an --after one failed.
  void Recheck(JobId id);
  // A job whose dependencies were changed (`trainq update --after`): a queued one as
  // Recheck does, a blocked one queued, cancelled or left blocked with its new reason.
  void Rejudge(JobId id);
  // Judges every blocked job (at start).
  void ResolveAllBlocked();

 private:
  Store& store_;
  const Clock& clock_;
  Hooks hooks_;
};

}  // namespace trainq
