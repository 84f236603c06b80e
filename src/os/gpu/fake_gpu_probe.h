// GPUs a test describes in code: every Sample() returns the snapshot as the test last set it,
// or fails with `error` while the test has set one (an NVML error, a bad simulated file).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "src/os/gpu/gpu_probe.h"

namespace trainq {

class FakeGpuProbe final : public GpuProbe {
 public:
  explicit FakeGpuProbe(std::shared_ptr<const GpuSnapshot> snapshot,
                        std::shared_ptr<const std::string> error = nullptr)
      : snapshot_(std::move(snapshot)), error_(std::move(error)) {}
  Result<GpuSnapshot> Sample() override {
    if (error_ && !error_->empty()) return Status::Unavailable(*error_);
    return *snapshot_;
  }
  std::string Describe() const override { return "fake GPUs"; }

 private:
  std::shared_ptr<const GpuSnapshot> snapshot_;
  std::shared_ptr<const std::string> error_;
};

}  // namespace trainq
