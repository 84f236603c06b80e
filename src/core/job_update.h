// `trainq update`, `hold` and `release` (POST /v1/jobs/ID/update): what a request changes of a
// job, read against the job as it is. Pure; the daemon checks the result as a submit's and
// stores it (Store::UpdateJob).
#pragma once

#include <optional>
#include <string>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

struct JobUpdate {
  JobSpec spec;               // the job's spec with the request's fields in place
  std::optional<bool> hold;   // "hold": true holds, false releases; absent: as it was
  bool deps_changed = false;  // after or after_any differ: the daemon judges them again
  bool running = false;       // the job runs: only its name and priority change
};

// The fields a request may carry, as a submit takes them: name, priority, gpus, mem, cpus,
// time, after, after_any; and hold (a bool). kInvalid naming each field that cannot be read,
// that a job cannot change (command, env, cwd, ...: submit again), or, for a running job
// (starting or running), anything but name and priority, and for an ended one anything.
Result<JobUpdate> ReadJobUpdate(const Job& job, const std::string& body);

}  // namespace trainq
