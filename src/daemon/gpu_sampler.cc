#include "src/daemon/gpu_sampler.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "src/core/duration.h"

namespace trainq {

namespace {

bool SameGpus(const GpuSnapshot& a, const GpuSnapshot& b) {
  if (a.gpus.size() != b.gpus.size()) return false;
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    const GpuInfo& x = a.gpus[i];
    const GpuInfo& y = b.gpus[i];
    if (x.uuid != y.uuid || x.free_bytes != y.free_bytes || x.total_bytes != y.total_bytes ||
        x.processes.size() != y.processes.size()) {
      return false;
    }
    for (size_t p = 0; p < x.processes.size(); ++p) {
      if (x.processes[p].pid != y.processes[p].pid ||
          x.processes[p].used_bytes != y.processes[p].used_bytes) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

GpuSampler::Outcome GpuSampler::Sample() {
  Result<GpuSnapshot> snap = probe_.probe->Sample();
  if (!snap.ok()) {
    // Keep the last good snapshot: a half-written simulated file or a passing NVML error
    // must not make the GPUs vanish. Its facts are stale from now on (the policy starts
    // nothing on them past gpu_stale_after); the log says so once per distinct error.
    std::string error = snap.status().message();
    if (error == error_) return {};
    spdlog::warn("GPU sample failed: {}; {}", error,
                 snapshot_ ? "keeping the last good sample, taken " +
                                 FormatDuration(clock_.Now() - sampled_at_) + " ago"
                           : std::string("no GPU sample yet"));
    error_ = std::move(error);
    return {false, true};
  }
  if (!error_.empty()) spdlog::info("GPU sampling works again");
  bool changed = !snapshot_ || !SameGpus(*snapshot_, *snap) || !error_.empty();
  error_.clear();
  sampled_at_ = clock_.Now();
  snapshot_ = std::move(*snap);
  return {true, changed};
}

uint64_t GpuSampler::LargestGpuBytes() const {
  uint64_t largest = 0;
  if (snapshot_) {
    for (const GpuInfo& g : snapshot_->gpus) largest = std::max(largest, g.total_bytes);
  }
  return largest;
}

}  // namespace trainq
