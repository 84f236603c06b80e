#include "src/daemon/gpu_history.h"

#include <algorithm>

namespace trainq {

uint64_t ReservedUnused(const GpuState& state) {
  uint64_t reserved = 0;
  for (const Holding& h : state.holdings) {
    uint64_t used = h.used_now.value_or(0);
    reserved += h.reserved_bytes > used ? h.reserved_bytes - used : 0;
  }
  return reserved;
}

GpuPoint PointOf(const GpuInfo& info, const GpuState& state, const PolicyConfig& policy,
                 UnixMs now) {
  GpuPoint p;
  p.used = info.used_bytes;
  p.reserved = ReservedUnused(state);
  p.usable = UsableBytes(state, policy, now);
  p.utilization = info.utilization_pct;
  for (const Holding& h : state.holdings) p.jobs.push_back(h.job);
  return p;
}

bool GpuHistory::Add(UnixMs t, const std::vector<GpuInfo>& gpus, std::vector<GpuPoint> points) {
  bool same = gpus.size() == gpus_.size() &&
              std::equal(gpus.begin(), gpus.end(), gpus_.begin(),
                         [](const GpuInfo& a, const Gpu& b) { return a.uuid == b.uuid; });
  if (!same) {
    samples_.clear();
    gpus_.clear();
    for (const GpuInfo& g : gpus) gpus_.push_back({g.index, g.uuid, g.name, g.total_bytes});
  } else if (!samples_.empty() && t - samples_.back().t < spacing_ms_ && t >= samples_.back().t) {
    return false;
  }
  samples_.push_back({t, std::move(points)});
  while (!samples_.empty() && samples_.front().t < t - window_ms_) samples_.pop_front();
  // A clock stepped back leaves older stamps behind newer ones; the count still bounds it.
  size_t most = static_cast<size_t>(window_ms_ / std::max<int64_t>(spacing_ms_, 1)) + 1;
  while (samples_.size() > most) samples_.pop_front();
  return true;
}

std::vector<const GpuSample*> GpuHistory::Since(UnixMs since) const {
  std::vector<const GpuSample*> out;
  for (const GpuSample& s : samples_) {
    if (s.t >= since) out.push_back(&s);
  }
  return out;
}

size_t GpuHistory::Bytes() const {
  size_t bytes = sizeof(*this);
  for (const Gpu& g : gpus_) bytes += sizeof(g) + g.uuid.capacity() + g.name.capacity();
  for (const GpuSample& s : samples_) {
    bytes += sizeof(s) + s.gpus.capacity() * sizeof(GpuPoint);
    for (const GpuPoint& p : s.gpus) bytes += p.jobs.capacity() * sizeof(JobId);
  }
  return bytes;
}

}  // namespace trainq
