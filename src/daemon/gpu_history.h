// The GPUs over the last hour: what the dashboard charts, GET /v1/gpus/history serves and the
// event stream's "gpus" events carry. One point per GPU per sample, at most one sample a
// second and an hour of them: bounded whatever sample_interval is (docs/dashboard.md).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "src/core/placement.h"
#include "src/os/gpu/gpu_probe.h"
#include "trainq/job.h"

namespace trainq {

// One GPU at one sample.
struct GpuPoint {
  uint64_t used = 0;      // bytes in use on it, by anyone
  uint64_t reserved = 0;  // bytes trainq holds for its jobs beyond what they use yet
  uint64_t usable = 0;    // bytes a new job could be given (as placement judges)
  int utilization = -1;   // percent; -1 unknown
  std::vector<JobId> jobs;
};

struct GpuSample {
  UnixMs t = 0;
  std::vector<GpuPoint> gpus;  // as GpuHistory::gpus()
};

// Bytes of a GPU's reservations its jobs do not use yet (what `trainq gpus` calls reserved).
uint64_t ReservedUnused(const GpuState& state);
// The point of GPU `info` (placement's view of it: `state`) at `now`.
GpuPoint PointOf(const GpuInfo& info, const GpuState& state, const PolicyConfig& policy,
                 UnixMs now);

class GpuHistory {
 public:
  // Keeps samples of the last `window_ms`, at least `spacing_ms` apart.
  explicit GpuHistory(int64_t window_ms = 3600 * 1000, int64_t spacing_ms = 1000)
      : window_ms_(window_ms), spacing_ms_(spacing_ms) {}

  // Adds the sample of `gpus` taken at `t`; false (nothing kept) when it is closer than the
  // spacing to the last one. A different set of GPUs (another count or UUIDs) starts again.
  bool Add(UnixMs t, const std::vector<GpuInfo>& gpus, std::vector<GpuPoint> points);
  struct Gpu {
    int index = 0;
    std::string uuid;
    std::string name;
    uint64_t total = 0;
  };
  const std::vector<Gpu>& gpus() const { return gpus_; }
  const std::deque<GpuSample>& samples() const { return samples_; }
  // The samples taken at `since` or later, oldest first.
  std::vector<const GpuSample*> Since(UnixMs since) const;
  // What the kept samples take in memory, near enough (the heap's own overhead aside).
  size_t Bytes() const;

 private:
  int64_t window_ms_;
  int64_t spacing_ms_;
  std::vector<Gpu> gpus_;
  std::deque<GpuSample> samples_;
};

}  // namespace trainq
