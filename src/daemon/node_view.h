// GET /v1/nodes, as both modes answer it (local_mode.cc, cluster.cc): a node's GPUs with
// the memory a job could use there now. Included by those two files only: it brings JSON.
#pragma once

#include <nlohmann/json.hpp>

#include "src/api/http.h"
#include "src/core/placement.h"

namespace trainq {

// A string field of a node's NodeInfo document (or of one of its GPUs), "" where absent.
inline std::string TextOf(const nlohmann::json& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A list of strings of a node's NodeInfo document: "features" (config node_features),
// "images" (its container store's names).
inline std::vector<std::string> StringsOf(const nlohmann::json& info, const char* key) {
  std::vector<std::string> out;
  auto it = info.find(key);
  if (it == info.end() || !it->is_array()) return out;
  for (const nlohmann::json& f : *it) {
    if (f.is_string()) out.push_back(f.get<std::string>());
  }
  return out;
}

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
                    {"label", g.label},
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
