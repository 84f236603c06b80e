// The GPU probe (docs/simulated-gpus.md for the simulated one): NVML loaded at run time, simulated
// GPUs described by a JSON file, or none. The daemon samples it; nothing else touches GPUs. Thread:
// one caller at a time. Sample() is bounded and never blocks on a job.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/gpu_topology.h"
#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

struct GpuProcess {
  int64_t pid = 0;
  uint64_t used_bytes = 0;
};

struct GpuInfo {
  int index = 0;     // NVML index (what CUDA_VISIBLE_DEVICES names with PCI_BUS_ID order)
  std::string uuid;  // "GPU-..."; the stable key
  std::string name;  // "NVIDIA A100-SXM4-80GB"
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;  // everything: trainq jobs, other users, the driver
  uint64_t free_bytes = 0;
  int utilization_pct = -1;           // -1: unknown
  bool processes_known = false;       // false: per-process figures unavailable
  std::vector<GpuProcess> processes;  // compute processes with their usage
};

struct GpuSnapshot {
  std::string source;  // "nvml", "simulated" or "none"
  std::vector<GpuInfo> gpus;
  // topology[i][j]: the level between gpus[i] and gpus[j] (symmetric, 0 on the diagonal).
  // Empty: unknown — the probe cannot tell, or could not for some pair.
  std::vector<std::vector<int>> topology;
};

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  virtual Result<GpuSnapshot> Sample() = 0;
  // One line for the log: "NVML 12.535.104, 4 GPUs" / "simulated GPUs from F" / ...
  virtual std::string Describe() const = 0;
};

// NVML through dlopen(library). kUnavailable if the library or its init is missing.
Result<std::unique_ptr<GpuProbe>> OpenNvmlProbe(const std::string& library = "libnvidia-ml.so.1");
// Simulated GPUs: `path` is re-read on every Sample(). kInvalid if it is unreadable now.
Result<std::unique_ptr<GpuProbe>> OpenSimulatedProbe(const std::string& path);
std::unique_ptr<GpuProbe> MakeNoGpuProbe();

// The probe a daemon uses: simulated when `fake_gpus_file` is not empty, else NVML, else
// none. `note` is the one line to log about the choice (why NVML was not used, say).
struct ProbeChoice {
  std::unique_ptr<GpuProbe> probe;
  std::string note;
};
Result<ProbeChoice> ChooseGpuProbe(const std::string& fake_gpus_file,
                                   const std::string& nvml_library = "libnvidia-ml.so.1");

}  // namespace trainq
