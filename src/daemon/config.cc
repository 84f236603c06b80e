#include "src/daemon/config.h"

#include <algorithm>
#include <charconv>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
// Header-only and without exceptions: errors come back as values (STYLE.md rule 4).
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

#include "src/core/duration.h"
#include "src/os/run_dir.h"
#include "trainq/size.h"

namespace trainq {

namespace {

using Setter = std::function<Status(Config&, const toml::node&, const std::string&)>;
using Getter = std::function<std::string(const Config&)>;

// How one option is read from the file and shown again.
struct Access {
  Setter set;
  Getter get;
};

struct Option {
  const char* name;
  const char* type;
  const char* default_value;
  const char* help;
  Access access;
};

std::string Quoted(const std::string& s) { return nlohmann::json(s).dump(); }

// "256MiB", "64KiB", or an integer of bytes (a bare number in a string would be MiB): a
// size that reads back to exactly the same bytes.
std::string ExactSize(uint64_t bytes) {
  constexpr const char* kUnits[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; ++i) {
    uint64_t unit = 1ull << (10 * (4 - i));
    if (bytes != 0 && bytes % unit == 0)
      return Quoted(fmt::format("{}{}", bytes / unit, kUnits[i]));
  }
  return std::to_string(bytes);
}

Status WrongType(const std::string& name, std::string_view want) {
  return Status::Invalid(fmt::format("config option {}: expected {}", name, want));
}

Access SizeOption(uint64_t Config::*field) {
  Setter set = [field](Config& c, const toml::node& n, const std::string& name) -> Status {
    if (auto i = n.value<int64_t>(); i && n.is_integer()) {
      if (*i < 0) return WrongType(name, "a size like \"256MiB\" or a byte count");
      c.*field = static_cast<uint64_t>(*i);
      return Status::Ok();
    }
    auto s = n.value<std::string>();
    if (!s) return WrongType(name, "a size like \"256MiB\" or a byte count");
    Result<uint64_t> v = ParseSize(*s, "config option " + name);
    if (!v.ok()) return v.status();
    c.*field = *v;
    return Status::Ok();
  };
  return {set, [field](const Config& c) { return ExactSize(c.*field); }};
}

Access DurationOption(int64_t Config::*field) {
  Setter set = [field](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto s = n.value<std::string>();
    if (!s || !n.is_string()) {
      return WrongType(name, "a duration like \"30s\", \"500ms\", \"2m\", \"2h\", \"7d\"");
    }
    Result<int64_t> v = ParseDurationMs(*s, "config option " + name);
    if (!v.ok()) return v.status();
    c.*field = *v;
    return Status::Ok();
  };
  return {set, [field](const Config& c) { return Quoted(FormatDuration(c.*field)); }};
}

Access StringOption(std::string Config::*field) {
  Setter set = [field](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto s = n.value<std::string>();
    if (!s || !n.is_string()) return WrongType(name, "a string");
    c.*field = *s;
    return Status::Ok();
  };
  return {set, [field](const Config& c) { return Quoted(c.*field); }};
}

// A whole number from 0 to 100,000; `form` says what it counts and what 0 means.
Access CountOption(int Config::*field, const char* form) {
  Setter set = [field, form](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto i = n.value<int64_t>();
    if (!i || !n.is_integer() || *i < 0 || *i > 100000) return WrongType(name, form);
    c.*field = static_cast<int>(*i);
    return Status::Ok();
  };
  return {set, [field](const Config& c) { return std::to_string(c.*field); }};
}

Access PatternsOption() {
  Setter set = [](Config& c, const toml::node& n, const std::string& name) -> Status {
    const toml::array* a = n.as_array();
    if (!a) return WrongType(name, "an array of strings");
    c.oom_patterns.clear();
    for (const toml::node& e : *a) {
      auto s = e.value<std::string>();
      if (!s || !e.is_string() || s->empty())
        return WrongType(name, "an array of non-empty strings");
      c.oom_patterns.push_back(*s);
    }
    return Status::Ok();
  };
  return {set, [](const Config& c) { return nlohmann::json(c.oom_patterns).dump(); }};
}

constexpr const char* kPortRangeForm =
    "a port range \"FIRST-LAST\" with 1024 <= FIRST <= LAST <= 65535, like \"29500-29999\"";

std::optional<int> ParsePort(std::string_view text) {
  int port = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  if (port < 1024 || port > 65535) return std::nullopt;
  return port;
}

Access PortRangeOption() {
  Setter set = [](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto s = n.value<std::string>();
    if (!s || !n.is_string()) return WrongType(name, kPortRangeForm);
    size_t dash = s->find('-');
    if (dash == std::string::npos) return WrongType(name, kPortRangeForm);
    std::optional<int> first = ParsePort(std::string_view(*s).substr(0, dash));
    std::optional<int> last = ParsePort(std::string_view(*s).substr(dash + 1));
    if (!first || !last || *first > *last) {
      return Status::Invalid(
          fmt::format("config option {}: '{}' is not {}", name, *s, kPortRangeForm));
    }
    c.master_port_first = *first;
    c.master_port_last = *last;
    return Status::Ok();
  };
  return {set, [](const Config& c) {
            return Quoted(fmt::format("{}-{}", c.master_port_first, c.master_port_last));
          }};
}

constexpr const char* kDevicesForm =
    "GPU indices like [0, 1, 3] or \"0,1,3\", or \"all\" (every GPU)";

Access DevicesOption() {
  Setter set = [](Config& c, const toml::node& n, const std::string& name) -> Status {
    if (auto s = n.value<std::string>(); s && n.is_string()) {
      Result<std::vector<int>> v = ParseDeviceList(*s, "config option " + name);
      if (!v.ok()) return v.status();
      c.devices = *v;
      return Status::Ok();
    }
    const toml::array* a = n.as_array();
    if (!a) return WrongType(name, kDevicesForm);
    std::vector<int> devices;
    for (const toml::node& e : *a) {
      auto i = e.value<int64_t>();
      if (!i || !e.is_integer() || *i < 0 || *i > 1023) return WrongType(name, kDevicesForm);
      devices.push_back(static_cast<int>(*i));
    }
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    c.devices = devices;
    return Status::Ok();
  };
  return {set, [](const Config& c) { return Quoted(FormatDeviceList(c.devices)); }};
}

Access MaxJobsPerGpuOption() {
  Setter set = [](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto i = n.value<int64_t>();
    if (!i || !n.is_integer() || *i < 0 || *i > kMaxJobsPerGpu) {
      return WrongType(name, fmt::format("a whole number from 0 (no limit) to {}", kMaxJobsPerGpu));
    }
    c.max_jobs_per_gpu = static_cast<int>(*i);
    return Status::Ok();
  };
  return {set, [](const Config& c) { return std::to_string(c.max_jobs_per_gpu); }};
}

const std::vector<Option>& Options() {
  static const std::vector<Option> kOptions = {
      {"headroom", "size", "256MiB", "GPU memory kept free on every GPU, beyond all reservations",
       SizeOption(&Config::headroom_bytes)},
      {"oom_backoff", "duration", "30s",
       "wait before the first retry of an out-of-memory attempt; doubles each retry",
       DurationOption(&Config::oom_backoff_ms)},
      {"oom_backoff_max", "duration", "1h", "longest wait between out-of-memory retries",
       DurationOption(&Config::oom_backoff_max_ms)},
      {"grace_period", "duration", "10s", "time between SIGTERM and SIGKILL when a job is stopped",
       DurationOption(&Config::grace_ms)},
      {"sample_interval", "duration", "1s", "how often the GPUs are sampled",
       DurationOption(&Config::sample_interval_ms)},
      {"ramp_up", "duration", "60s",
       "where per-process GPU memory is unknown, how long a new attempt's reservation counts in "
       "full",
       DurationOption(&Config::ramp_up_ms)},
      {"cpu_slots", "integer", "0",
       "host CPU slots jobs can hold (--cpus); 0 = the machine's cores",
       CountOption(&Config::cpu_slots, "a whole number of slots (0 = the machine's cores)")},
      {"fake_gpus", "path", "\"\"",
       "simulated GPU file (docs/simulated-gpus.md); also TRAINQ_FAKE_GPUS",
       StringOption(&Config::fake_gpus)},
      {"nvml_library", "string", "\"libnvidia-ml.so.1\"", "the NVML library loaded at run time",
       StringOption(&Config::nvml_library)},
      {"oom_patterns", "array of strings", "[]",
       "extra log lines that mean GPU out-of-memory, added to the built-in list", PatternsOption()},
      {"log_tail", "size", "64KiB",
       "how much of a failed job's log end is searched for out-of-memory",
       SizeOption(&Config::log_tail_bytes)},
      {"node_name", "string", "the host name", "this node's name in job records",
       StringOption(&Config::node_name)},
      {"max_request", "size", "64MiB", "largest API request body accepted",
       SizeOption(&Config::max_request_bytes)},
      {"aging_limit", "duration", "2h",
       "a job blocked this long gets the GPUs it would best use held for it (no backfill there)",
       DurationOption(&Config::aging_ms)},
      {"max_holds", "integer", "1",
       "how many aged jobs that cannot start yet have GPUs held at once, oldest in line first; "
       "0 = every aged job",
       CountOption(&Config::max_holds, "a whole number of jobs (0 = every aged job)")},
      {"fair_share_half_life", "duration", "7d",
       "half-life of the GPU-hours that order users by fair share",
       DurationOption(&Config::fair_share_half_life_ms)},
      {"master_port_range", "port range", "\"29500-29999\"",
       "MASTER_PORT values handed to multi-GPU jobs, never two live attempts the same",
       PortRangeOption()},
      {"devices", "GPU list", "\"all\"",
       "GPU indices jobs may use; settable at run time (trainq config set devices 0,1,3)",
       DevicesOption()},
      {"max_jobs_per_gpu", "integer", "0",
       "most trainq jobs on one GPU; 0 = no limit; settable at run time", MaxJobsPerGpuOption()},
  };
  return kOptions;
}

const Option* FindOption(std::string_view name) {
  for (const Option& o : Options()) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

}  // namespace

std::vector<OptionDoc> ConfigOptions() {
  std::vector<OptionDoc> docs;
  for (const Option& o : Options()) docs.push_back({o.name, o.type, o.default_value, o.help});
  return docs;
}

Result<Config> ParseConfig(const std::string& toml_text, const std::string& origin) {
  toml::parse_result parsed = toml::parse(toml_text, origin);
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    return Status::Invalid(
        fmt::format("{}:{}: {}", origin, e.source().begin.line, e.description()));
  }
  Config config;
  std::vector<std::string> problems;
  for (auto&& [key, node] : parsed.table()) {
    std::string name(key.str());
    const Option* option = FindOption(name);
    if (!option) {
      problems.push_back(fmt::format("unknown config option '{}' (see docs/config.md)", name));
      continue;
    }
    Status st = option->access.set(config, node, name);
    if (!st.ok()) problems.push_back(st.message());
    config.from_file.insert(name);
  }
  if (!problems.empty()) {
    std::string joined = origin + ": " + problems[0];
    for (size_t i = 1; i < problems.size(); ++i) joined += "; " + problems[i];
    return Status::Invalid(joined);
  }
  return config;
}

Result<Config> LoadConfig(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (text.ok()) return ParseConfig(*text, path);
  if (text.status().code() == Code::kNotFound) return Config{};
  // A file that is there but cannot be read is not "no config": the daemon would run with
  // settings its operator did not choose.
  return Status(text.status().code(),
                fmt::format("config file {} cannot be read: {}", path, text.status().message()));
}

std::optional<std::string> OptionValueText(const Config& config, std::string_view name) {
  const Option* o = FindOption(name);
  if (!o) return std::nullopt;
  return o->access.get(config);
}

std::string CanonicalOptionName(std::string_view key) {
  std::string name(key);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

bool IsOption(std::string_view name) { return FindOption(name) != nullptr; }

bool IsSettable(std::string_view name) { return name == "devices" || name == "max_jobs_per_gpu"; }

namespace {

Status BadDevices(std::string_view field, std::string_view text) {
  return Status::Invalid(fmt::format(
      "{}: '{}' is not a GPU list; use GPU indices separated by commas, like 0,1,3, or all", field,
      text));
}

std::optional<int> ParseIndex(std::string_view text, int max) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  if (value < 0 || value > max) return std::nullopt;
  return value;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::vector<int>> ParseDeviceList(std::string_view text, std::string_view field) {
  std::string_view s = TrimSpaces(text);
  if (s.empty() || s == "all") return std::vector<int>{};
  std::vector<int> devices;
  while (true) {
    size_t comma = s.find(',');
    std::optional<int> index = ParseIndex(TrimSpaces(s.substr(0, comma)), 1023);
    if (!index) return BadDevices(field, text);
    devices.push_back(*index);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  return devices;
}

std::string FormatDeviceList(const std::vector<int>& devices) {
  if (devices.empty()) return "all";
  return fmt::format("{}", fmt::join(devices, ","));
}

Result<int> ParseMaxJobsPerGpu(std::string_view text, std::string_view field) {
  std::optional<int> n = ParseIndex(TrimSpaces(text), kMaxJobsPerGpu);
  if (!n) {
    return Status::Invalid(
        fmt::format("{}: '{}' is not a job count; use a whole number from 0 (no limit) to {}",
                    field, text, kMaxJobsPerGpu));
  }
  return *n;
}

namespace {

using nlohmann::json;

// A value of the JSON form: an array of indices or the text form.
Result<std::vector<int>> DevicesFromJson(const json& v, const std::string& field) {
  if (v.is_string()) return ParseDeviceList(v.get<std::string>(), field);
  if (!v.is_array()) return BadDevices(field, v.dump());
  std::string text;
  for (const json& e : v) {
    if (!e.is_number_integer()) return BadDevices(field, v.dump());
    if (!text.empty()) text += ',';
    text += e.dump();
  }
  if (text.empty()) return std::vector<int>{};
  return ParseDeviceList(text, field);
}

// 2 or "2"; anything else (2.5, true) fails as its JSON text.
Result<int> MaxJobsFromJson(const json& v, const std::string& field) {
  return ParseMaxJobsPerGpu(v.is_string() ? v.get<std::string>() : v.dump(), field);
}

// One key of a run-time update; problems are added to `problems`.
void ParseUpdateKey(const std::string& key, const json& value, RuntimeUpdate* update,
                    std::vector<std::string>* problems) {
  std::string name = CanonicalOptionName(key);
  if (!IsOption(name)) {
    problems->push_back(fmt::format(
        "unknown setting '{}'; the settings that change at run time are {}", key, kSettableKeys));
    return;
  }
  if (!IsSettable(name)) {
    problems->push_back(fmt::format(
        "{} cannot change while the daemon runs; set it in the config file and restart the "
        "daemon (trainq daemon stop); the settings that change at run time are {}",
        name, kSettableKeys));
    return;
  }
  if (value.is_null()) {
    update->reset.push_back(name);
    return;
  }
  if (name == "devices") {
    Result<std::vector<int>> d = DevicesFromJson(value, name);
    if (d.ok()) update->set.devices = *d;
    if (!d.ok()) problems->push_back(d.status().message());
    return;
  }
  Result<int> n = MaxJobsFromJson(value, name);
  if (n.ok()) update->set.max_jobs_per_gpu = *n;
  if (!n.ok()) problems->push_back(n.status().message());
}

}  // namespace

Result<RuntimeUpdate> ParseRuntimeUpdate(const std::string& json_body) {
  json doc = json::parse(json_body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.empty()) {
    return Status::Invalid(
        fmt::format("expected a JSON object of settings, like {{\"devices\": [0, 1, 3]}} or "
                    "{{\"max_jobs_per_gpu\": 2}}; the settings that change at run time are {}",
                    kSettableKeys));
  }
  RuntimeUpdate update;
  std::vector<std::string> problems;
  for (const auto& [key, value] : doc.items()) ParseUpdateKey(key, value, &update, &problems);
  if (!problems.empty()) return Status::Invalid(fmt::format("{}", fmt::join(problems, "; ")));
  return update;
}

RuntimeSettings Updated(RuntimeSettings settings, const RuntimeUpdate& update) {
  for (const std::string& name : update.reset) {
    if (name == "devices") settings.devices.reset();
    if (name == "max_jobs_per_gpu") settings.max_jobs_per_gpu.reset();
  }
  if (update.set.devices) settings.devices = update.set.devices;
  if (update.set.max_jobs_per_gpu) settings.max_jobs_per_gpu = update.set.max_jobs_per_gpu;
  return settings;
}

Config WithRuntime(Config config, const RuntimeSettings& runtime) {
  if (runtime.devices) config.devices = *runtime.devices;
  if (runtime.max_jobs_per_gpu) config.max_jobs_per_gpu = *runtime.max_jobs_per_gpu;
  return config;
}

std::string RuntimeSettingsToJson(const RuntimeSettings& settings) {
  json doc = json::object();
  if (settings.devices) doc["devices"] = *settings.devices;
  if (settings.max_jobs_per_gpu) doc["max_jobs_per_gpu"] = *settings.max_jobs_per_gpu;
  return doc.dump(2) + "\n";
}

Result<RuntimeSettings> RuntimeSettingsFromJson(const std::string& text,
                                                const std::string& origin) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_object() && doc.empty()) return RuntimeSettings{};
  Result<RuntimeUpdate> update = ParseRuntimeUpdate(text);
  if (!update.ok()) return Status::Invalid(origin + ": " + update.status().message());
  if (!update->reset.empty()) {
    return Status::Invalid(
        fmt::format("{}: {}: expected a value, not null", origin, update->reset[0]));
  }
  return update->set;
}

}  // namespace trainq
