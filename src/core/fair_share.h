// Fair share between users: GPU-hours over a decaying window. A GPU-hour used `age` ago
// counts 2^(-age / half_life); the user holding fewer goes first. Pure arithmetic.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "trainq/job.h"

namespace trainq {

// Decayed GPU-hours per user (the placement policy's UsageByUser).
using UsageByUser = std::map<std::string, double>;

// gpus x the integral over [start, min(end, now)] of 2^(-(now - t) / half_life), in hours.
// half_life_ms <= 0: no decay (plain GPU-hours). A run that starts after `now` counts 0.
double DecayedGpuHours(int gpus, UnixMs start, UnixMs end, UnixMs now, int64_t half_life_ms);

// Ended runs folded into one decaying number per user, so a daemon keeps O(users) state
// however many attempts it has seen. Running attempts are added on top by the caller.
class FairShareLedger {
 public:
  explicit FairShareLedger(int64_t half_life_ms) : half_life_ms_(half_life_ms) {}

  void AddEnded(const std::string& user, int gpus, UnixMs start, UnixMs end);
  // Every user's decayed GPU-hours at `now` (not before the latest end added).
  UsageByUser At(UnixMs now) const;
  int64_t half_life_ms() const { return half_life_ms_; }

 private:
  struct Entry {
    double hours = 0;
    UnixMs as_of = 0;
  };
  double Decay(double hours, UnixMs from, UnixMs to) const;

  int64_t half_life_ms_;
  std::map<std::string, Entry> users_;
};

}  // namespace trainq
