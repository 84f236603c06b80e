// GPU topology levels as `nvidia-smi topo -m` names them: pure data shared by the GPU probes
// (which read them) and the CLI (which prints them).
#include "src/core/gpu_topology.h"

#include <charconv>

namespace trainq {

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

}  // namespace trainq
