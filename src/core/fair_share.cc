#include "src/core/fair_share.h"

#include <algorithm>
#include <cmath>

namespace trainq {

namespace {

constexpr double kMsPerHour = 3600.0 * 1000.0;

}  // namespace

double DecayedGpuHours(int gpus, UnixMs start, UnixMs end, UnixMs now, int64_t half_life_ms) {
  UnixMs stop = std::min(end, now);
  if (gpus <= 0 || stop <= start) return 0;
  double span_ms = static_cast<double>(stop) - static_cast<double>(start);
  if (half_life_ms <= 0) return gpus * span_ms / kMsPerHour;
  // The integral of 2^(-(now - t)/h) dt from start to stop is h/ln2 * (2^(-a_stop/h) -
  // 2^(-a_start/h)), with a_x = now - x.
  double h = static_cast<double>(half_life_ms);
  double age_stop = static_cast<double>(now) - static_cast<double>(stop);
  double age_start = static_cast<double>(now) - static_cast<double>(start);
  double integral = h / std::log(2.0) * (std::exp2(-age_stop / h) - std::exp2(-age_start / h));
  return gpus * integral / kMsPerHour;
}

double FairShareLedger::Decay(double hours, UnixMs from, UnixMs to) const {
  if (half_life_ms_ <= 0 || to <= from) return hours;
  double age = static_cast<double>(to) - static_cast<double>(from);
  return hours * std::exp2(-age / static_cast<double>(half_life_ms_));
}

void FairShareLedger::AddEnded(const std::string& user, int gpus, UnixMs start, UnixMs end) {
  double hours = DecayedGpuHours(gpus, start, end, end, half_life_ms_);
  Entry& e = users_[user];
  UnixMs as_of = std::max(e.as_of, end);
  e.hours = Decay(e.hours, e.as_of, as_of) + Decay(hours, end, as_of);
  e.as_of = as_of;
}

UsageByUser FairShareLedger::At(UnixMs now) const {
  UsageByUser usage;
  for (const auto& [user, e] : users_) usage[user] = Decay(e.hours, e.as_of, now);
  return usage;
}

}  // namespace trainq
