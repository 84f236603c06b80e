// The GPUs as the probe last saw them (NVML, or a simulated file): the daemon samples every
// sample_interval and after each exit; a failed sample keeps the last good one, whose facts
// are stale from then on (docs/architecture.md, "GPU sampling").
#pragma once

#include <optional>
#include <string>

#include "src/os/clock.h"
#include "src/os/gpu/gpu_probe.h"

namespace trainq {

class GpuSampler {
 public:
  GpuSampler(ProbeChoice probe, const Clock& clock) : probe_(std::move(probe)), clock_(clock) {}

  struct Outcome {
    bool fresh = false;    // a new snapshot was taken
    bool changed = false;  // the GPUs differ from the last sample's, or sampling began to
                           // fail or works again
  };
  Outcome Sample();

  // The last good sample; nullopt before the first.
  const std::optional<GpuSnapshot>& snapshot() const { return snapshot_; }
  // When snapshot() was taken, and why every sample since has failed ("" when the last one
  // worked).
  UnixMs sampled_at() const { return sampled_at_; }
  const std::string& error() const { return error_; }
  std::string Describe() const { return probe_.probe->Describe(); }
  // Of the last good sample; 0 before one.
  uint64_t LargestGpuBytes() const;
  int GpuCount() const { return snapshot_ ? static_cast<int>(snapshot_->gpus.size()) : 0; }

 private:
  ProbeChoice probe_;
  const Clock& clock_;
  std::optional<GpuSnapshot> snapshot_;
  UnixMs sampled_at_ = 0;
  std::string error_;
};

}  // namespace trainq
