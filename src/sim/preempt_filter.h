// Which waiting jobs are worth handing to ChoosePreemptions (src/core/preemption.h): a
// shortcut the simulator takes so that a pass over a long queue stays cheap, with the same
// decisions as handing it every job.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "src/core/preemption.h"

namespace trainq::sim {

// Of `ready` (in placement order), the jobs some rule of `config` lets preempt some candidate
// victim in `running` (preemptible, not stopping, past min_runtime, not spared), plus each
// user's first job, so that the users ChoosePreemptions averages fair share over stay the
// same; in the same order. A job no rule serves preempts nothing there and changes nothing
// for the jobs after it, so ChoosePreemptions decides the same on this list as on `ready`.
// Empty when no running job is a candidate at all.
std::vector<const PendingJob*> WorthAsking(std::span<const PendingJob* const> ready,
                                           std::span<const NodeState> nodes,
                                           std::span<const RunningJob> running,
                                           const PolicyConfig& policy, const PreemptConfig& config,
                                           const UsageByUser& usage, UnixMs now);

}  // namespace trainq::sim
