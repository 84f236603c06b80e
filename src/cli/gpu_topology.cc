// `trainq gpus --topo`: how far apart this node's GPUs are, as `nvidia-smi topo -m` shows it.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/core/json_codec.h"
#include "src/os/gpu/gpu_probe.h"

namespace trainq {

using json = nlohmann::json;

namespace {

constexpr const char* kLegend =
    "Legend: X = itself, BRD = one board (or NVLink, in a simulated GPU file), PIX = one PCIe "
    "switch,\n        PXB = several PCIe switches, PHB = one host bridge, NODE = one NUMA node, "
    "SYS = across sockets\n";

std::string TopologyTable(const json& gpus, const json& topology) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>{""});
  for (const json& g : gpus) rows[0].push_back(fmt::format("GPU{}", g["index"].get<int>()));
  for (size_t i = 0; i < topology.size() && i < gpus.size(); ++i) {
    std::vector<std::string> row = {rows[0][i + 1]};
    for (size_t j = 0; j < topology[i].size(); ++j) {
      row.push_back(TopologyLevelName(topology[i][j].get<int>(), i == j));
    }
    rows.push_back(std::move(row));
  }
  return RenderTable(rows);
}

}  // namespace

int CmdGpuTopology(Client& client, bool as_json) {
  Result<json> r = client.Call("GET", "/v1/gpus");
  if (!r.ok() && r.status().code() == Code::kUnavailable) {
    if (Status st = client.EnsureDaemon(); !st.ok()) return Fail(st);
    r = client.Call("GET", "/v1/gpus");
  }
  if (!r.ok()) return Fail(r.status());
  const json& gpus = (*r)["gpus"];
  json topology = r->value("topology", json::array());
  if (as_json) {
    json indices = json::array();
    for (const json& g : gpus) indices.push_back(g["index"]);
    std::printf(
        "%s\n",
        DumpJson({{"node", (*r)["node"]}, {"gpus", indices}, {"topology", topology}}, 2).c_str());
    return 0;
  }
  if (topology.empty()) {
    std::printf("GPU topology unknown: %s\n",
                gpus.empty() ? "no GPUs"
                             : "NVML cannot tell, or the simulated GPU file has no \"topology\"");
    return 0;
  }
  std::fputs((TopologyTable(gpus, topology) + "\n" + kLegend).c_str(), stdout);
  return 0;
}

}  // namespace trainq
