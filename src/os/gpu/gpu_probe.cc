// The no-GPU probe and the choice between the three probes.
#include "src/os/gpu/gpu_probe.h"

#include <charconv>
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

namespace {

struct LevelName {
  int level;
  const char* name;
};
constexpr LevelName kLevelNames[] = {{kTopoSingle, "PIX"},
                                     {kTopoMultiple, "PXB"},
                                     {kTopoHostBridge, "PHB"},
                                     {kTopoNode, "NODE"},
                                     {kTopoSystem, "SYS"}};

bool IsNvLinkName(std::string_view name) {  // NV1 .. NV18: that many NVLinks between them
  if (!name.starts_with("NV") || name.size() < 3) return false;
  int links = 0;
  auto [ptr, ec] = std::from_chars(name.data() + 2, name.data() + name.size(), links);
  return ec == std::errc() && ptr == name.data() + name.size() && links > 0;
}

}  // namespace

std::optional<int> TopologyLevelFromName(std::string_view name) {
  if (name == "X" || name == "BRD" || IsNvLinkName(name)) return kTopoInternal;
  for (const LevelName& l : kLevelNames) {
    if (name == l.name) return l.level;
  }
  int level = -1;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), level);
  if (ec != std::errc() || ptr != name.data() + name.size()) return std::nullopt;
  if (level == kTopoInternal) return level;
  for (const LevelName& l : kLevelNames) {
    if (level == l.level) return level;
  }
  return std::nullopt;
}

std::string TopologyLevelName(int level, bool diagonal) {
  if (level == kTopoInternal) return diagonal ? "X" : "BRD";
  for (const LevelName& l : kLevelNames) {
    if (level == l.level) return l.name;
  }
  return std::to_string(level);
}

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
