// `trainq gpus --topo`: how far apart this node's GPUs are, as `nvidia-smi topo -m` shows it.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/api_paths.h"
#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/core/gpu_topology.h"
#include "src/core/json_codec.h"

namespace trainq {

using json = nlohmann::json;

namespace {

constexpr const char* kLegend =
    "Legend: X = itself, BRD = one board (or NVLink, in a simulated GPU file), PIX = one PCIe "
    "switch,\n        PXB = several PCIe switches, PHB = one host bridge, NODE = one NUMA node, "
    "SYS = across sockets\n";

// Row and column names, and each level as `nvidia-smi topo -m` names it.
std::string TopologyTable(const std::vector<int64_t>& indices,
                          const std::vector<std::vector<int64_t>>& topology) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>{""});
  for (int64_t index : indices) rows[0].push_back(fmt::format("GPU{}", index));
  for (size_t i = 0; i < topology.size() && i < indices.size(); ++i) {
    std::vector<std::string> row = {rows[0][i + 1]};
    for (size_t j = 0; j < topology[i].size(); ++j) {
      row.push_back(TopologyLevelName(static_cast<int>(topology[i][j]), i == j));
    }
    rows.push_back(std::move(row));
  }
  return RenderTable(rows);
}

}  // namespace

int CmdGpuTopology(Client& client, bool as_json) {
  Result<json> r = client.Call("GET", api::GpusPath());
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  std::vector<int64_t> indices;
  for (const Reply& g : reply.Array("gpus")) indices.push_back(g.Int("index"));
  std::vector<std::vector<int64_t>> topology;
  for (const Reply& row : reply.ArrayOr("topology")) {
    topology.emplace_back();
    for (const Reply& level : row.Elements()) {
      topology.back().push_back(level.AsInt());
    }
  }
  std::string node = reply.Text("node");
  if (!reply.ok()) return Fail(reply.status());
  if (as_json) {
    std::printf("%s\n",
                DumpJson({{"node", node}, {"gpus", indices}, {"topology", topology}}, 2).c_str());
    return 0;
  }
  if (topology.empty()) {
    std::printf("GPU topology unknown: %s\n",
                indices.empty()
                    ? "no GPUs"
                    : "NVML cannot tell, or the simulated GPU file has no \"topology\"");
    return 0;
  }
  std::fputs((TopologyTable(indices, topology) + "\n" + kLegend).c_str(), stdout);
  return 0;
}

}  // namespace trainq
