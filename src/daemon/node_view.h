// GET /v1/nodes, as both modes answer it (local_mode.cc, cluster.cc): a node's GPUs with
// the memory a job could use there now. Included by those two files only: it brings JSON.
#pragma once

#include <nlohmann/json.hpp>

#include "src/api/http.h"
#include "src/core/placement.h"

namespace trainq {

// `info`: the node's NodeInfo document (GPU names); `policy` and `now`: what usable means.
inline nlohmann::json GpusJson(const NodeState& node, const nlohmann::json& info,
                               const PolicyConfig& policy, UnixMs now) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuState& g : node.gpus) {
    std::string name;
    if (info.is_object() && info.contains("gpus")) {
      for (const nlohmann::json& gi : info["gpus"]) {
        if (gi.value("index", -1) == g.index) name = gi.value("name", "");
      }
    }
    gpus.push_back({{"index", g.index},
                    {"name", name},
                    {"uuid", g.uuid},
                    {"memory_total", g.total_bytes},
                    {"memory_free", g.free_bytes},
                    {"memory_usable", UsableBytes(g, policy, now)}});
  }
  return gpus;
}

inline HttpResponse NodesJson(int status, const nlohmann::json& body) {
  return {status, body.dump(), "application/json"};
}

}  // namespace trainq
