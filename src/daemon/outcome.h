// What an ended attempt means for its job: succeeded, failed, cancelled, or back to the
// queue after an out-of-memory death. Pure: the caller reads the exit record and log tail.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/os/run_dir.h"
#include "src/store/store.h"

namespace trainq {

struct OutcomeInput {
  std::optional<ExitRecord> record;  // nullopt: the shim died without writing one
  std::string log_tail;
  std::vector<std::string> oom_patterns;
  int oom_retries_used = 0;  // earlier attempts of this job that died of OOM
  int retries_allowed = 3;
  int64_t backoff_ms = 30000;
  int64_t backoff_max_ms = 3600000;
  UnixMs now = 0;
  int64_t time_limit_ms = 0;  // the job's --time, for the reason; 0: none
};

// Cancelled beats everything; a stop at the time limit is a failure "time limit (2h30m)"
// whatever the exit status or the log says (never an OOM retry: the limit would only
// fire again); then success, OOM (retry or fail), other failures.
AttemptEnd DecideOutcome(const OutcomeInput& in);

// "SIGKILL" for 9, "signal 64" for unknown numbers.
std::string SignalName(int sig);

}  // namespace trainq
