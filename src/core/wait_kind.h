// The fixed kinds of a waiting job's reason, for trainq_jobs_waiting{reason} (/metrics): a
// label takes few values, and a reason's text names jobs, sizes and GPUs.
#pragma once

#include <array>
#include <string_view>

#include "trainq/job.h"

namespace trainq {

inline constexpr std::array<std::string_view, 14> kWaitKinds = {
    "dependency", "held",   "oom_backoff", "user_limit", "group_limit", "gpus_busy", "gpu_memory",
    "cpu_slots",  "no_fit", "paused",      "stale_gpus", "node",        "storage",   "other"};

// The kind of the reason `reason` of a job in `state` (queued or blocked): one of kWaitKinds.
std::string_view WaitKind(JobState state, std::string_view reason);

}  // namespace trainq
