// The no-GPU probe and the choice between the three probes.
#include "src/os/gpu/gpu_probe.h"

#include <string_view>

#include <fmt/format.h>

namespace trainq {

namespace {

class NoGpuProbe final : public GpuProbe {
 public:
  Result<GpuSnapshot> Sample() override { return GpuSnapshot{"none", {}, {}}; }
  std::string Describe() const override { return "no GPUs"; }
};

// "NVML library X not found: ..." reads better in the note as "X not found: ...".
std::string WhyNoNvml(const Status& status) {
  constexpr std::string_view kPrefix = "NVML library ";
  std::string_view why = status.message();
  if (why.starts_with(kPrefix)) why.remove_prefix(kPrefix.size());
  return std::string(why);
}

}  // namespace

std::unique_ptr<GpuProbe> MakeNoGpuProbe() { return std::make_unique<NoGpuProbe>(); }

Result<ProbeChoice> ChooseGpuProbe(const std::string& fake_gpus_file,
                                   const std::string& nvml_library) {
  if (!fake_gpus_file.empty()) {
    auto simulated = OpenSimulatedProbe(fake_gpus_file);
    if (!simulated.ok()) return simulated.status();
    std::string note = (*simulated)->Describe();
    return ProbeChoice{std::move(simulated).value(), std::move(note)};
  }
  auto nvml = OpenNvmlProbe(nvml_library);
  if (nvml.ok()) {
    std::string note = (*nvml)->Describe();
    return ProbeChoice{std::move(nvml).value(), std::move(note)};
  }
  // No driver is a normal machine for CPU jobs, not an error.
  return ProbeChoice{MakeNoGpuProbe(),
                     fmt::format("no NVML ({}): running CPU jobs only", WhyNoNvml(nvml.status()))};
}

}  // namespace trainq
