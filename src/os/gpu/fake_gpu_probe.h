// GPUs a test describes in code: every Sample() returns the snapshot as the test last set it.
#pragma once

#include <memory>
#include <utility>

#include "src/os/gpu/gpu_probe.h"

namespace trainq {

class FakeGpuProbe final : public GpuProbe {
 public:
  explicit FakeGpuProbe(std::shared_ptr<const GpuSnapshot> snapshot)
      : snapshot_(std::move(snapshot)) {}
  Result<GpuSnapshot> Sample() override { return *snapshot_; }
  std::string Describe() const override { return "fake GPUs"; }

 private:
  std::shared_ptr<const GpuSnapshot> snapshot_;
};

}  // namespace trainq
