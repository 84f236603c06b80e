// `trainq config show|get|set|unset`: the daemon's options, and the limits that change
// while it runs (docs/config.md).
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/core/json_codec.h"
#include "src/daemon/config.h"

namespace trainq {

using json = nlohmann::json;

namespace {

// Starts the daemon when nobody answered, as every other command does.
Result<json> CallDaemon(Client& client, const std::string& method, const std::string& body = "") {
  Result<json> r = client.Call(method, "/v1/config", body);
  if (r.ok() || r.status().code() != Code::kUnavailable) return r;
  TRAINQ_RETURN_IF_ERROR(client.EnsureDaemon());
  return client.Call(method, "/v1/config", body);
}

std::string Shown(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string SourceText(const json& option) {
  std::string source = option["source"].get<std::string>();
  if (option.contains("file_value")) {
    source += fmt::format(" (config file: {})", Shown(option["file_value"]));
  }
  return source;
}

const json* FindOption(const json& config, const std::string& name) {
  for (const json& o : config["options"]) {
    if (o["name"] == name) return &o;
  }
  return nullptr;
}

int PrintMessage(const Result<json>& r) {
  if (!r.ok()) return Fail(r.status());
  std::printf("%s\n", (*r)["message"].get<std::string>().c_str());
  return 0;
}

}  // namespace

int CmdConfigShow(Client& client, bool as_json) {
  Result<json> r = CallDaemon(client, "GET");
  if (!r.ok()) return Fail(r.status());
  if (as_json) {
    std::printf("%s\n", DumpJson(*r, 2).c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"OPTION", "VALUE", "SOURCE"}};
  for (const json& o : (*r)["options"]) {
    rows.push_back({o["name"].get<std::string>(), Shown(o["value"]), SourceText(o)});
  }
  std::fputs(RenderTable(rows).c_str(), stdout);
  std::printf("run-time settings (trainq config set) are kept in %s\n",
              (*r)["settings_file"].get<std::string>().c_str());
  return 0;
}

int CmdConfigGet(Client& client, const std::string& key, bool as_json) {
  if (key.empty()) return CmdConfigShow(client, as_json);
  std::string name = CanonicalOptionName(key);
  if (!IsOption(name)) {
    return Fail(Status::Invalid(fmt::format(
        "unknown config option '{}'; 'trainq config show' lists them (docs/config.md)", key)));
  }
  Result<json> r = CallDaemon(client, "GET");
  if (!r.ok()) return Fail(r.status());
  const json* option = FindOption(*r, name);
  if (option == nullptr) return Fail(Status::Internal("the daemon did not report " + name));
  std::string out = as_json ? DumpJson(*option, 2) : Shown((*option)["value"]);
  std::printf("%s\n", out.c_str());
  return 0;
}

int CmdConfigSet(Client& client, const std::string& key, const std::string& value) {
  // The daemon parses the text, so the CLI and the API accept exactly the same forms.
  return PrintMessage(CallDaemon(client, "PUT", DumpJson({{key, value}})));
}

int CmdConfigUnset(Client& client, const std::string& key) {
  return PrintMessage(CallDaemon(client, "PUT", DumpJson({{key, nullptr}})));
}

}  // namespace trainq
