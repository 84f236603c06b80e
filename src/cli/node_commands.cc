// `trainq nodes` and `trainq node drain|resume NAME`: a cluster's nodes (docs/cluster.md).
// On one machine `nodes` shows that machine alone.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/api_paths.h"
#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/cli/reply.h"
#include "src/core/json_codec.h"
#include "src/core/words.h"
#include "trainq/size.h"

namespace trainq {

using json = nlohmann::json;

namespace {

// 1234 ms -> "1s ago"; the age of a heartbeat as the store's clock saw it.
std::string Age(int64_t ms) {
  if (ms < 1000) return "now";
  if (ms < 120'000) return fmt::format("{}s ago", ms / 1000);
  if (ms < 7'200'000) return fmt::format("{}m ago", ms / 60'000);
  return fmt::format("{}h ago", ms / 3'600'000);
}

}  // namespace

int CmdNodes(Client& client, bool as_json) {
  Result<json> r = client.Call("GET", api::NodesPath());
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  std::vector<std::vector<std::string>> rows = {{"NODE", "ADDRESS", "STATE", "LEADER",
                                                 "GPUS (usable/total)", "FEATURES", "JOBS",
                                                 "HEARTBEAT"}};
  for (const Reply& n : reply.Array("nodes")) {
    std::vector<std::string> gpus;
    for (const Reply& g : n.Array("gpus")) {
      gpus.push_back(fmt::format("{}:{}/{}", g.Int("index"), FormatBytes(g.UInt("memory_usable")),
                                 FormatBytes(g.UInt("memory_total"))));
    }
    std::vector<std::string> jobs;
    for (const Reply& j : n.Array("jobs")) jobs.push_back(j.AsText());
    std::vector<std::string> features;
    for (const Reply& f : n.ArrayOr("features")) features.push_back(TerminalSafe(f.AsStr()));
    rows.push_back({n.Text("name"), n.Text("address"), n.Text("state"),
                    n.Bool("leader") ? "yes" : "",
                    gpus.empty() ? "-" : fmt::format("{}", fmt::join(gpus, " ")),
                    features.empty() ? "-" : fmt::format("{}", fmt::join(features, ",")),
                    jobs.empty() ? "-" : fmt::format("{}", fmt::join(jobs, ",")),
                    Age(n.Int("heartbeat_age_ms"))});
  }
  if (!reply.ok()) return Fail(reply.status());
  if (as_json) {
    std::printf("%s\n", DumpJson(*r, 2).c_str());
    return 0;
  }
  std::fputs(RenderTable(rows).c_str(), stdout);
  return 0;
}

namespace {

Status CheckNodeName(const std::string& name) {
  if (!name.empty() && name.find('/') == std::string::npos) return Status::Ok();
  return Status::Invalid("node: expected a node's name as `trainq nodes` lists it");
}

}  // namespace

int CmdNodeDrain(Client& client, const std::string& name, bool drain) {
  if (Status st = CheckNodeName(name); !st.ok()) return Fail(st);
  return PrintReplyMessage(client.Call("POST", api::NodePath(name, drain ? "drain" : "resume")));
}

int CmdNodeRemove(Client& client, const std::string& name) {
  if (Status st = CheckNodeName(name); !st.ok()) return Fail(st);
  return PrintReplyMessage(client.Call("POST", api::NodePath(name, "remove")));
}

}  // namespace trainq
