#include "src/daemon/runtime_config.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/json_codec.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {

using json = nlohmann::json;

namespace {

// The option's value as JSON: every value the table shows is valid JSON too.
json ValueJson(const Config& config, const std::string& name) {
  return json::parse(OptionValueText(config, name).value_or("null"), nullptr, false);
}

// As a person reads it: 0,1,3 rather than "0,1,3".
std::string Shown(const Config& config, const std::string& name) {
  json v = ValueJson(config, name);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// The settings a request names, in the order of the table.
std::vector<std::string> Named(const RuntimeUpdate& u) {
  std::vector<std::string> names;
  for (const OptionInfo& o : ConfigOptions()) {
    std::string name(o.name);
    bool reset = std::find(u.reset.begin(), u.reset.end(), name) != u.reset.end();
    if (u.set.Has(name) || reset) names.push_back(name);
  }
  return names;
}

std::string SourceOf(const Config& file, const RuntimeSettings& runtime, const std::string& name) {
  if (runtime.Has(name)) return "runtime";
  if (auto it = file.from_outside.find(name); it != file.from_outside.end()) return it->second;
  return file.from_file.count(name) ? "file" : "default";
}

std::string Describe(const RuntimeSettings& s) {
  std::vector<std::string> parts;
  for (const std::string& name : s.names) parts.push_back(name + " " + Shown(s.values, name));
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::vector<int> RuntimeConfig::MissingDevices(const std::vector<int>& devices) const {
  std::vector<int> have = gpus_();
  std::vector<int> missing;
  for (int d : devices) {
    if (std::find(have.begin(), have.end(), d) == have.end()) missing.push_back(d);
  }
  return missing;
}

Status RuntimeConfig::Load() {
  Result<std::optional<RuntimeSettings>> settings = ReadRuntimeSettings(settings_path_);
  if (!settings.ok()) return settings.status();
  if (!*settings) return Status::Ok();
  Apply(**settings);
  spdlog::info("run-time settings from {}: {}", settings_path_, Describe(runtime_));
  return Status::Ok();
}

Result<std::optional<RuntimeSettings>> ReadRuntimeSettings(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok() && text.status().code() == Code::kNotFound) {
    return std::optional<RuntimeSettings>();
  }
  if (!text.ok()) return text.status();
  Result<RuntimeSettings> settings = RuntimeSettingsFromJson(*text, path);
  if (!settings.ok()) {
    return Status::Invalid(settings.status().message() +
                           " (it holds `trainq config set` values; fix or remove it)");
  }
  return std::optional<RuntimeSettings>(std::move(*settings));
}

void RuntimeConfig::Apply(const RuntimeSettings& settings) {
  runtime_ = settings;
  config_ = WithRuntime(file_config_, runtime_);
  std::vector<int> missing = MissingDevices(config_.policy.devices);
  if (!missing.empty()) {
    spdlog::warn("devices {}: this node has no GPU {}; jobs use the listed GPUs that exist",
                 FormatDeviceList(config_.policy.devices), FormatDeviceList(missing));
  }
}

std::string RuntimeConfig::Json() const {
  json options = json::array();
  json doc = json::object();
  for (const OptionInfo& o : ConfigOptions()) {
    std::string name(o.name);
    json entry = {{"name", name},
                  {"value", ValueJson(config_, name)},
                  {"source", SourceOf(file_config_, runtime_, name)},
                  {"settable", o.settable}};
    if (runtime_.Has(name)) entry["file_value"] = ValueJson(file_config_, name);
    options.push_back(std::move(entry));
    // Settable values also sit at the top, in the form a PUT takes ([0, 1], 2).
    if (o.settable) doc[name] = json::parse(SettableValueJson(config_, name));
  }
  doc["options"] = std::move(options);
  // What `trainq submit` reads to snapshot the way this daemon's config says.
  doc["snapshot"] = config_.snapshot;
  doc["snapshot_max_bytes"] = config_.snapshot_max_bytes;
  doc["snapshot_link"] = config_.snapshot_link;
  // In a cluster the snapshot and what it links to are shipped to other nodes.
  doc["cluster"] = !config_.store.empty();
  doc["settings_file"] = settings_path_;
  return DumpJson(doc);
}

// Checks the whole request, then persists, then applies: a refused or failed request
// changes nothing.
Result<std::string> RuntimeConfig::Set(const std::string& body, const std::string& user) {
  Result<RuntimeUpdate> update = ParseRuntimeUpdate(body);
  if (!update.ok()) return update.status();
  if (update->set.Has("devices")) {
    std::vector<int> missing = MissingDevices(update->set.values.policy.devices);
    if (!missing.empty()) {
      std::vector<int> have = gpus_();
      return Status::Invalid(
          fmt::format("devices: this node has no GPU {}; its GPUs are {} (see trainq gpus)",
                      FormatDeviceList(missing), have.empty() ? "none" : FormatDeviceList(have)));
    }
  }
  RuntimeSettings next = Updated(runtime_, *update);
  TRAINQ_RETURN_IF_ERROR(
      WriteFileAtomic(settings_path_, RuntimeSettingsToJson(next), Durability::kSync));
  Config before = config_;
  Apply(next);
  std::vector<std::string> changes;
  for (const std::string& name : Named(*update)) {
    std::string was = Shown(before, name);
    std::string now = Shown(config_, name);
    changes.push_back(was == now ? fmt::format("{} = {} (unchanged)", name, now)
                                 : fmt::format("{} = {} (was {})", name, now, was));
  }
  spdlog::info("config set by {}: {}", user, fmt::join(changes, ", "));
  return fmt::format("{}", fmt::join(changes, "\n"));
}

}  // namespace trainq
