// `trainq config show|get|set|unset`: the daemon's options, and the limits that change
// while it runs (docs/config.md).
#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/cli/reply.h"
#include "src/core/json_codec.h"

namespace trainq {

using json = nlohmann::json;

namespace {

Result<json> CallConfig(Client& client, const std::string& method, const std::string& body = "") {
  return client.Call(method, "/v1/config", body);
}

std::string SourceText(const Reply& option) {
  std::string source = option.Str("source");
  if (option.Has("file_value")) {
    source += fmt::format(" (config file: {})", option.AnyText("file_value"));
  }
  return source;
}

}  // namespace

int CmdConfigShow(Client& client, bool as_json) {
  Result<json> r = CallConfig(client, "GET");
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  std::vector<std::vector<std::string>> rows = {{"OPTION", "VALUE", "SOURCE"}};
  for (const Reply& o : reply.Array("options")) {
    rows.push_back({o.Str("name"), o.AnyText("value"), SourceText(o)});
  }
  std::string settings = reply.Str("settings_file");
  if (!reply.ok()) return Fail(reply.status());
  if (as_json) {
    std::printf("%s\n", DumpJson(*r, 2).c_str());
    return 0;
  }
  std::fputs(RenderTable(rows).c_str(), stdout);
  std::printf("run-time settings (trainq config set) are kept in %s\n", settings.c_str());
  return 0;
}

int CmdConfigGet(Client& client, const std::string& key, bool as_json) {
  if (key.empty()) return CmdConfigShow(client, as_json);
  // The daemon's list is the one table of options; the client keeps no copy of it.
  std::string name = key;
  std::replace(name.begin(), name.end(), '-', '_');
  Result<json> r = CallConfig(client, "GET");
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  std::optional<Reply> option;
  for (const Reply& o : reply.Array("options")) {
    if (o.Str("name") == name) option = o;
  }
  std::string value = option ? option->AnyText("value") : "";
  if (!reply.ok()) return Fail(reply.status());
  if (!option) {
    return Fail(Status::Invalid(fmt::format(
        "unknown config option '{}'; 'trainq config show' lists them (docs/config.md)", key)));
  }
  std::printf("%s\n", as_json ? DumpJson(option->raw(), 2).c_str() : value.c_str());
  return 0;
}

int CmdConfigSet(Client& client, const std::string& key, const std::string& value) {
  // The daemon parses the text, so the CLI and the API accept exactly the same forms.
  return PrintReplyMessage(CallConfig(client, "PUT", DumpJson({{key, value}})));
}

int CmdConfigUnset(Client& client, const std::string& key) {
  return PrintReplyMessage(CallConfig(client, "PUT", DumpJson({{key, nullptr}})));
}

int PrintReplyMessage(const Result<nlohmann::json>& r) {
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  std::string message = reply.Str("message");
  if (!reply.ok()) return Fail(reply.status());
  std::printf("%s\n", message.c_str());
  return 0;
}

}  // namespace trainq
