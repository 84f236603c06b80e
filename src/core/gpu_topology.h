// How far apart two GPUs are, as numbers and as the names `nvidia-smi topo -m` prints.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace trainq {

// How far apart two GPUs are: NVML's common-ancestor levels (nvmlGpuTopologyLevel_t).
// Lower is closer; NVLink-connected pairs are described as kTopoInternal.
inline constexpr int kTopoInternal = 0;     // one board (or NVLink, in simulated files)
inline constexpr int kTopoSingle = 10;      // one PCIe switch       (nvidia-smi: PIX)
inline constexpr int kTopoMultiple = 20;    // several PCIe switches (PXB)
inline constexpr int kTopoHostBridge = 30;  // one host bridge        (PHB)
inline constexpr int kTopoNode = 40;        // one NUMA node          (NODE)
inline constexpr int kTopoSystem = 50;      // across sockets         (SYS)

// "PIX" -> 10 and so on, as `nvidia-smi topo -m` names them; "X" (itself), "BRD" (one
// board) and "NV#" (NVLink) -> 0.
// Also the numbers themselves ("20"). nullopt for anything else.
std::optional<int> TopologyLevelFromName(std::string_view name);
// 10 -> "PIX"; 0 -> "X" on the diagonal, "BRD" off it; anything else as its number.
std::string TopologyLevelName(int level, bool diagonal);

}  // namespace trainq
