#include "src/sim/usage.h"

#include <cmath>

namespace trainq::sim {

void AdvanceUsage(UsageByUser& usage, const std::map<std::string, double>& running_gpus,
                  int64_t elapsed_ms, int64_t half_life_ms) {
  if (elapsed_ms <= 0) return;
  double hours = elapsed_ms / 3.6e6;
  double keep = 1.0;
  double accrue = hours;  // GPU-hours one GPU adds over the interval, after decay
  if (half_life_ms > 0) {
    double rate = std::log(2.0) / (half_life_ms / 3.6e6);  // per hour
    keep = std::exp(-rate * hours);
    accrue = (1.0 - keep) / rate;
  }
  if (keep != 1.0) {
    for (auto& [user, value] : usage) value *= keep;
  }
  for (const auto& [user, gpus] : running_gpus) {
    if (gpus > 0) usage[user] += gpus * accrue;
  }
}

}  // namespace trainq::sim
