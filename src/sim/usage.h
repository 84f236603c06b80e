// Decayed GPU-hours per user, the standing the policy's fair share compares. Kept to one
// function so that the core's own accounting can replace it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "src/core/placement.h"

namespace trainq::sim {

// Advances `usage` by `elapsed_ms`: every value decays by half per `half_life_ms`, and each
// user in `running_gpus` accrues its GPUs over the interval, decayed from the moment each
// GPU-second was used (exact for a constant number of GPUs). half_life_ms <= 0: no decay.
void AdvanceUsage(UsageByUser& usage, const std::map<std::string, double>& running_gpus,
                  int64_t elapsed_ms, int64_t half_life_ms);

}  // namespace trainq::sim
