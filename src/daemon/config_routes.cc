// The config API: GET /v1/config shows every option's value in force and where it came
// from; PUT (or POST) /v1/config changes the limits that may change at run time. Changes
// are persisted in settings.json in the state dir before they take effect, so they survive
// a restart or a crash of the daemon (docs/config.md).
#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/json_codec.h"
#include "src/daemon/daemon_impl.h"
#include "src/daemon/json_response.h"
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

std::vector<int> DaemonImpl::MissingDevices(const std::vector<int>& devices) const {
  std::vector<int> missing;
  for (int d : devices) {
    bool found = sampler_.snapshot() &&
                 std::any_of(sampler_.snapshot()->gpus.begin(), sampler_.snapshot()->gpus.end(),
                             [d](const GpuInfo& g) { return g.index == d; });
    if (!found) missing.push_back(d);
  }
  return missing;
}

Status DaemonImpl::LoadRuntimeSettings() {
  file_config_ = config_;
  Result<std::optional<RuntimeSettings>> settings = ReadRuntimeSettings(options_.paths.settings);
  if (!settings.ok()) return settings.status();
  if (!*settings) return Status::Ok();
  ApplyRuntime(**settings);
  spdlog::info("run-time settings from {}: {}", options_.paths.settings, Describe(runtime_));
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

void DaemonImpl::ApplyRuntime(const RuntimeSettings& settings) {
  runtime_ = settings;
  config_ = WithRuntime(file_config_, runtime_);
  cpu_slots_ = config_.cpu_slots > 0 ? config_.cpu_slots : CpuCount();
  std::vector<int> missing = MissingDevices(config_.policy.devices);
  if (!missing.empty()) {
    spdlog::warn("devices {}: this node has no GPU {}; jobs use the listed GPUs that exist",
                 FormatDeviceList(config_.policy.devices), FormatDeviceList(missing));
  }
}

std::string DaemonImpl::ConfigJson() const {
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
  doc["settings_file"] = options_.paths.settings;
  return DumpJson(doc);
}

void DaemonImpl::GetConfigRoute(Responder& respond) {
  respond({200, ConfigJson(), "application/json"});
}

// Checks the whole request, then persists, then applies: a refused or failed request
// changes nothing.
void DaemonImpl::SetConfigRoute(const HttpRequest& req, const Caller& caller, Responder& respond) {
  Result<RuntimeUpdate> update = ParseRuntimeUpdate(req.body);
  if (!update.ok()) return respond(ErrorResponse(update.status()));
  if (update->set.Has("devices")) {
    std::vector<int> missing = MissingDevices(update->set.values.policy.devices);
    if (!missing.empty()) {
      std::vector<int> have;
      if (sampler_.snapshot()) {
        for (const GpuInfo& g : sampler_.snapshot()->gpus) have.push_back(g.index);
      }
      return respond(ErrorResponse(Status::Invalid(
          fmt::format("devices: this node has no GPU {}; its GPUs are {} (see trainq gpus)",
                      FormatDeviceList(missing), have.empty() ? "none" : FormatDeviceList(have)))));
    }
  }
  RuntimeSettings next = Updated(runtime_, *update);
  std::string path = options_.paths.settings;
  if (Status st = WriteFileAtomic(path, RuntimeSettingsToJson(next), Durability::kSync); !st.ok()) {
    return respond(ErrorResponse(st));
  }
  Config before = config_;
  ApplyRuntime(next);
  std::vector<std::string> changes;
  for (const std::string& name : Named(*update)) {
    std::string was = Shown(before, name);
    std::string now = Shown(config_, name);
    changes.push_back(was == now ? fmt::format("{} = {} (unchanged)", name, now)
                                 : fmt::format("{} = {} (was {})", name, now, was));
  }
  spdlog::info("config set by {}: {}", caller.user, fmt::join(changes, ", "));
  RequestSchedule();
  json out = json::parse(ConfigJson());
  out["message"] = fmt::format("{}", fmt::join(changes, "\n"));
  respond(Json(200, out));
}

}  // namespace trainq
