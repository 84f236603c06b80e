// `trainq config show|get|set|unset`: the daemon's options, and the limits that change
// while it runs (docs/config.md).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/api_paths.h"
#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/cli/reply.h"
#include "src/core/json_codec.h"

namespace trainq {

using json = nlohmann::json;

namespace {

Result<json> CallConfig(Client& client, const std::string& method, const std::string& body = "") {
  return client.Call(method, api::ConfigPath(), body);
}

std::string SourceText(const Reply& option) {
  std::string source = option.Str("source");
  if (option.Has("file_value")) {
    source += fmt::format(" (config file: {})", option.AnyText("file_value"));
  }
  return source;
}

// A value as the table shows it: one line of at most 60 columns (--json has it whole).
std::string Clipped(std::string text) {
  constexpr size_t kWidth = 60;
  if (text.size() <= kWidth) return text;
  return text.substr(0, kWidth - 3) + "...";
}

}  // namespace

int CmdConfigShow(Client& client, bool as_json) {
  Result<json> r = CallConfig(client, "GET");
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  std::vector<std::vector<std::string>> rows = {{"OPTION", "VALUE", "SOURCE"}};
  for (const Reply& o : reply.Array("options")) {
    rows.push_back({o.Str("name"), Clipped(o.AnyText("value")), Clipped(SourceText(o))});
  }
  std::string settings = reply.Str("settings_file");
  if (!reply.ok()) return Fail(reply.status());
  if (as_json) {
    std::printf("%s\n", DumpJson(*r, 2).c_str());
    return 0;
  }
  std::fputs(RenderTable(rows).c_str(), stdout);
  std::printf(
      "run-time settings (trainq config set) are kept in %s; values longer than a "
      "column are cut short with ... (trainq config get NAME, or --json, shows them "
      "whole)\n",
      settings.c_str());
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

namespace {

// "0,1" as GPU indices; kInvalid naming --gpus.
Result<std::vector<int>> GpuList(const std::string& text) {
  std::vector<int> out;
  for (size_t start = 0;;) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma - start);
    int index = -1;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || index < 0 ||
        index > 1023) {
      return Status::Invalid(fmt::format(
          "--gpus: '{}' is not a GPU list; use GPU indices separated by commas, like 0,1", text));
    }
    out.push_back(index);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

int CmdPause(Client& client, const std::string& gpus, bool pause, bool as_json) {
  json body;
  std::string said;
  if (gpus.empty()) {
    // resume without --gpus lifts every pause, the GPUs' too.
    body = pause ? json{{"paused", true}} : json{{"paused", false}, {"paused_gpus", json::array()}};
    said = pause ? "paused: no job starts until trainq resume; running jobs go on"
                 : "resumed: jobs start again";
  } else {
    Result<std::vector<int>> asked = GpuList(gpus);
    if (!asked.ok()) return Fail(asked.status());
    Result<json> now = CallConfig(client, "GET");
    if (!now.ok()) return Fail(now.status());
    std::vector<int> paused;
    for (const json& g : now->value("paused_gpus", json::array())) {
      if (g.is_number_integer()) paused.push_back(g.get<int>());
    }
    for (int g : *asked) {
      auto it = std::find(paused.begin(), paused.end(), g);
      if (pause && it == paused.end()) paused.push_back(g);
      if (!pause && it != paused.end()) paused.erase(it);
    }
    std::sort(paused.begin(), paused.end());
    body = {{"paused_gpus", paused}};
    said = fmt::format("GPU{} {} {}", asked->size() == 1 ? "" : "s", gpus,
                       pause ? "paused: no job starts there until trainq resume --gpus; running "
                               "jobs go on"
                             : "resumed");
    if (!pause && now->value("paused", false)) said += " (all of trainq is still paused)";
  }
  Result<json> r = CallConfig(client, "PUT", DumpJson(body));
  if (!r.ok()) return Fail(r.status());
  if (as_json) {
    Result<json> now = CallConfig(client, "GET");
    if (!now.ok()) return Fail(now.status());
    json out = {{"message", said},
                {"paused", now->value("paused", false)},
                {"paused_gpus", now->value("paused_gpus", json::array())}};
    std::printf("%s\n", DumpJson(out, 2).c_str());
    return 0;
  }
  std::printf("%s\n", said.c_str());
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
