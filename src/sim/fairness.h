// Per-user fairness of a replay: GPU-time each user received against their fair share, over a
// span of time (docs/scheduling.md, "Preemption in the simulator"). Pure: the simulator tells
// it, interval by interval, what each user asked for and held.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace trainq::sim {

// Max-min fair shares of `capacity` GPUs among demands (GPUs each user's waiting and running
// jobs ask for): every user gets their demand or the common level L, whichever is less, with L
// as high as the capacity allows; all demands when they fit. Same order as `demands`.
std::vector<double> MaxMinShares(std::span<const double> demands, double capacity);

struct UserFairness {
  std::string user;
  double received_gpu_h = 0;  // GPU-time their jobs held
  double fair_gpu_h = 0;      // integral of their max-min fair share
  double equal_gpu_h = 0;     // integral of capacity / users with work
  double asked_gpu_h = 0;     // what their replayed jobs ask for (gpus x share x duration)
  double ratio = 0;           // received / fair
  bool counted = false;       // asked >= the minimum, and fair > 0
};

struct FairnessReport {
  // max / min of received / fair over the counted users; nullopt when fewer than one is
  // counted or a counted user received nothing (unbounded).
  std::optional<double> figure;
  std::optional<double> equal_split_figure;  // the same against capacity / users with work
  int users = 0;                             // counted
  std::vector<UserFairness> per_user;        // every user with demand, by name
};

class FairnessMeter {
 public:
  // Measures over [from_ms, to_ms) only: intervals outside it count for nothing.
  FairnessMeter(double capacity_gpus, int64_t from_ms, int64_t to_ms);

  // Over [t0, t1) each user's demand and holding stayed as given (GPUs, shares counted as
  // fractions). Users with no demand are ignored.
  void Add(int64_t t0, int64_t t1, const std::map<std::string, double>& demand,
           const std::map<std::string, double>& held);

  // `asked_gpu_ms`: per user, the GPU-time their jobs ask for; users who ask for less than
  // `min_asked_gpu_ms` are reported but not counted in the figure.
  FairnessReport Report(const std::map<std::string, double>& asked_gpu_ms,
                        double min_asked_gpu_ms) const;

 private:
  struct Sums {
    double received_gpu_ms = 0, fair_gpu_ms = 0, equal_gpu_ms = 0;
  };
  double capacity_;
  int64_t from_ms_, to_ms_;
  std::map<std::string, Sums> sums_;
};

}  // namespace trainq::sim
