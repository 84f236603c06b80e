#include "src/sim/fairness.h"

#include <algorithm>
#include <numeric>

namespace trainq::sim {

std::vector<double> MaxMinShares(std::span<const double> demands, double capacity) {
  std::vector<size_t> order(demands.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return demands[a] < demands[b]; });
  std::vector<double> shares(demands.size(), 0.0);
  double left = std::max(capacity, 0.0);
  for (size_t k = 0; k < order.size(); ++k) {
    double level = left / static_cast<double>(order.size() - k);
    double share = std::min(std::max(demands[order[k]], 0.0), level);
    shares[order[k]] = share;
    left -= share;
  }
  return shares;
}

FairnessMeter::FairnessMeter(double capacity_gpus, int64_t from_ms, int64_t to_ms)
    : capacity_(capacity_gpus), from_ms_(from_ms), to_ms_(to_ms) {}

void FairnessMeter::Add(int64_t t0, int64_t t1, const std::map<std::string, double>& demand,
                        const std::map<std::string, double>& held) {
  t0 = std::max(t0, from_ms_);
  t1 = std::min(t1, to_ms_);
  if (t1 <= t0) return;
  auto dt = static_cast<double>(t1 - t0);
  std::vector<std::string> users;
  std::vector<double> wants;
  for (const auto& [user, gpus] : demand) {
    if (gpus <= 0) continue;
    users.push_back(user);
    wants.push_back(gpus);
  }
  if (users.empty()) return;
  std::vector<double> fair = MaxMinShares(wants, capacity_);
  double equal = capacity_ / static_cast<double>(users.size());
  for (size_t i = 0; i < users.size(); ++i) {
    Sums& s = sums_[users[i]];
    auto it = held.find(users[i]);
    s.received_gpu_ms += (it == held.end() ? 0.0 : it->second) * dt;
    s.fair_gpu_ms += fair[i] * dt;
    s.equal_gpu_ms += equal * dt;
  }
}

namespace {

constexpr double kMsPerHour = 3600.0 * 1000.0;

std::optional<double> Spread(const std::vector<double>& ratios) {
  if (ratios.empty()) return std::nullopt;
  auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  if (*lo <= 0) return std::nullopt;
  return *hi / *lo;
}

}  // namespace

FairnessReport FairnessMeter::Report(const std::map<std::string, double>& asked_gpu_ms,
                                     double min_asked_gpu_ms) const {
  FairnessReport r;
  std::vector<double> ratios, equal_ratios;
  for (const auto& [user, s] : sums_) {
    UserFairness u{user, s.received_gpu_ms / kMsPerHour, s.fair_gpu_ms / kMsPerHour,
                   s.equal_gpu_ms / kMsPerHour};
    auto asked = asked_gpu_ms.find(user);
    double asked_ms = asked == asked_gpu_ms.end() ? 0.0 : asked->second;
    u.asked_gpu_h = asked_ms / kMsPerHour;
    u.ratio = s.fair_gpu_ms > 0 ? s.received_gpu_ms / s.fair_gpu_ms : 0.0;
    u.counted = asked_ms >= min_asked_gpu_ms && s.fair_gpu_ms > 0;
    if (u.counted) {
      ratios.push_back(u.ratio);
      equal_ratios.push_back(s.received_gpu_ms / s.equal_gpu_ms);
      ++r.users;
    }
    r.per_user.push_back(std::move(u));
  }
  r.figure = Spread(ratios);
  r.equal_split_figure = Spread(equal_ratios);
  return r;
}

}  // namespace trainq::sim
