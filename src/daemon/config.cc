#include "src/daemon/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
// Header-only and without exceptions: errors come back as values.
#define TOML_HEADER_ONLY 1
// toml++'s own assertions are off, as in a release build: some fire on malformed text that
// it then refuses (fuzz/config_fuzz.cc), which would abort a debug daemon on a typo.
#define TOML_ASSERT(expr) static_assert(true)
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

#include "src/core/duration.h"
#include "src/core/endpoint.h"
#include "src/core/gpu_select.h"
#include "src/os/run_dir.h"
#include "src/os/snapshot.h"
#include "src/store/cluster.h"
#include "trainq/size.h"

namespace trainq {

namespace {

using json = nlohmann::json;

// How one option is read from the file, shown, and (settable ones) changed at run time.
struct Access {
  std::function<Status(Config&, const toml::node&, const std::string& name)> from_toml;
  std::function<std::string(const Config&)> text;  // as the file spells it; valid JSON too
  std::function<void(Config& to, const Config& from)> copy;
  // Settable options only: a value from the API's JSON, and the value as the API shows it.
  std::function<Status(Config&, const json&, const std::string& name)> from_json;
  std::function<json(const Config&)> to_json;
};

// What an option's type contributes to its row: the type and accepted form docs and errors
// name, and how it is accessed.
struct Kind {
  std::string_view type;
  std::string_view form;
  Access access;
};

struct Option {
  OptionInfo info;
  Access access;
};

Option Row(std::string_view name, std::string_view default_text, bool settable,
           std::string_view help, Kind kind) {
  return {{name, kind.type, default_text, kind.form, settable, help}, std::move(kind.access)};
}

// Where an option's value lives: a member of Config, or of Config::policy (the placement
// policy's settings). A row names either kind of member the same way.
template <typename T>
class Field {
 public:
  Field(T Config::*member) : member_(member) {}               // NOLINT: implicit on purpose
  Field(T PolicyConfig::*member) : policy_member_(member) {}  // NOLINT: implicit on purpose

  T& operator()(Config& c) const { return member_ ? c.*member_ : c.policy.*policy_member_; }
  const T& operator()(const Config& c) const {
    return member_ ? c.*member_ : c.policy.*policy_member_;
  }

 private:
  T Config::*member_ = nullptr;
  T PolicyConfig::*policy_member_ = nullptr;
};

template <typename T>
std::function<void(Config&, const Config&)> Copy(Field<T> field) {
  return [field](Config& to, const Config& from) { field(to) = field(from); };
}

std::string Quoted(const std::string& s) { return json(s).dump(); }

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

constexpr std::string_view kSizeForm = "a size like \"256MiB\" or a byte count";

// `zero_ok`: "0" (and "0MiB") is accepted as text too, for options where 0 means "no limit".
Kind Size(Field<uint64_t> field, std::string_view form = kSizeForm, bool zero_ok = false) {
  auto set = [field, form, zero_ok](Config& c, const toml::node& n,
                                    const std::string& name) -> Status {
    if (auto i = n.value_exact<int64_t>(); i && n.is_integer()) {
      if (*i < 0) return WrongType(name, form);
      field(c) = static_cast<uint64_t>(*i);
      return Status::Ok();
    }
    auto s = n.value<std::string>();
    if (!s) return WrongType(name, form);
    Result<uint64_t> v = ParseSize(*s, "config option " + name, zero_ok);
    if (!v.ok()) return v.status();
    field(c) = *v;
    return Status::Ok();
  };
  return {"size",
          form,
          {set, [field](const Config& c) { return ExactSize(field(c)); }, Copy(field), {}, {}}};
}

constexpr int64_t kMinSampleIntervalMs = 100;
constexpr int kMaxProcsOption = 4194304;  // the kernel's largest pid_max
constexpr int kMaxWaitingCap = 10000000;

constexpr std::string_view kDurationForm =
    "a duration like \"30s\", \"500ms\", \"2m\", \"2h\", \"7d\" (at most 36500d)";

// `min_ms`: the shortest value that works (a 0s timeout would cut every connection).
Kind Duration(Field<int64_t> field, int64_t min_ms = 0) {
  auto set = [field, min_ms](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto s = n.value<std::string>();
    if (!s || !n.is_string()) return WrongType(name, kDurationForm);
    Result<int64_t> v = ParseDurationMs(*s, "config option " + name);
    if (!v.ok()) return v.status();
    if (*v < min_ms) {
      return Status::Invalid(
          fmt::format("config option {}: '{}' is too short; expected {} of at least {}", name, *s,
                      kDurationForm, FormatDuration(min_ms)));
    }
    field(c) = *v;
    return Status::Ok();
  };
  return {"duration",
          kDurationForm,
          {set,
           [field](const Config& c) { return Quoted(FormatDuration(field(c))); },
           Copy(field),
           {},
           {}}};
}

Kind String(Field<std::string> field, std::string_view type = "string") {
  auto set = [field](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto s = n.value<std::string>();
    if (!s || !n.is_string()) return WrongType(name, "a string");
    field(c) = *s;
    return Status::Ok();
  };
  return {type,
          "a string",
          {set, [field](const Config& c) { return Quoted(field(c)); }, Copy(field), {}, {}}};
}

// The store URL, shown with any password in it as *** (config show, /v1/config): a password
// belongs in store_password_file, and one left in the URL is never echoed. The '@' is found
// as ParseRedisUrl finds it, the last one.
Kind StoreUrl(Field<std::string> field) {
  Kind kind = String(field, "URL");
  kind.access.text = [field](const Config& c) {
    const std::string& url = field(c);
    size_t start = url.find("://");
    size_t at = url.rfind('@');
    if (start == std::string::npos || at == std::string::npos || at < start + 3) {
      return Quoted(url);
    }
    size_t colon = url.find(':', start + 3);
    if (colon == std::string::npos || colon > at) return Quoted(url);
    return Quoted(url.substr(0, colon + 1) + "***" + url.substr(at));
  };
  return kind;
}

// A whole number from `min` to `max`; `form` says what it counts, what 0 means, and the
// bounds.
Kind Count(Field<int> field, int max, std::string_view form, int min = 0) {
  auto set = [field, max, form, min](Config& c, const toml::node& n, const std::string& name) {
    auto i = n.value_exact<int64_t>();
    if (!i || !n.is_integer() || *i < min || *i > max) return WrongType(name, form);
    field(c) = static_cast<int>(*i);
    return Status::Ok();
  };
  return {
      "integer",
      form,
      {set, [field](const Config& c) { return std::to_string(field(c)); }, Copy(field), {}, {}}};
}

// store_min_replicas_acked: a count of replicas, or "auto" (kAutoReplicas): 1 with sentinels,
// else 0 (MinReplicasAcked).
constexpr int kAutoReplicas = -1;
constexpr int kMaxReplicas = 100;

Kind MinReplicas() {
  static constexpr std::string_view kForm =
      "a whole number of replicas from 0 (no wait) to 100, or \"auto\" (1 with "
      "redis+sentinel://, else 0)";
  auto set = [](Config& c, const toml::node& n, const std::string& name) {
    auto i = n.value_exact<int64_t>();
    if (n.is_string() && n.value<std::string>() == "auto") {
      c.store_min_replicas_acked = kAutoReplicas;
    } else if (n.is_integer() && i && *i >= 0 && *i <= kMaxReplicas) {
      c.store_min_replicas_acked = static_cast<int>(*i);
    } else {
      return WrongType(name, kForm);
    }
    return Status::Ok();
  };
  auto text = [](const Config& c) {
    int n = c.store_min_replicas_acked;
    return n == kAutoReplicas ? std::string("\"auto\"") : std::to_string(n);
  };
  return {"integer or \"auto\"",
          kForm,
          {set, text, Copy(Field(&Config::store_min_replicas_acked)), {}, {}}};
}

constexpr std::string_view kPatternsForm = "an array of non-empty strings";

Kind Strings(Field<std::vector<std::string>> field, std::string_view form = kPatternsForm) {
  auto set = [field, form](Config& c, const toml::node& n, const std::string& name) -> Status {
    const toml::array* a = n.as_array();
    if (!a) return WrongType(name, form);
    field(c).clear();
    for (const toml::node& e : *a) {
      auto s = e.value<std::string>();
      if (!s || !e.is_string() || s->empty()) return WrongType(name, form);
      field(c).push_back(*s);
    }
    return Status::Ok();
  };
  return {"array of strings",
          form,
          {set, [field](const Config& c) { return json(field(c)).dump(); }, Copy(field), {}, {}}};
}

// An array of strings, each of which `valid` accepts; a refusal names the value as `what`.
Kind CheckedStrings(std::vector<std::string> Config::*member, std::string_view form,
                    bool (*valid)(std::string_view), std::string_view what) {
  Kind kind = Strings(member, form);
  auto set = kind.access.from_toml;
  kind.access.from_toml = [set, member, form, valid, what](Config& c, const toml::node& n,
                                                           const std::string& name) -> Status {
    TRAINQ_RETURN_IF_ERROR(set(c, n, name));
    for (const std::string& v : c.*member) {
      if (!valid(v)) {
        return Status::Invalid(
            fmt::format("config option {}: '{}' is not {}; expected {}", name, v, what, form));
      }
    }
    return Status::Ok();
  };
  return kind;
}

// Node features (--constraint): names of kConstraintForm, each once.
Kind Features() {
  return CheckedStrings(
      &Config::node_features,
      "an array of feature names (letters, digits, '.', '_', '-'), like [\"ib\", \"nvlink\"]",
      ValidFeature, "a feature name");
}

// Paths inside a work tree: relative, no "." or ".." part.
Kind SnapshotLinks() {
  return CheckedStrings(
      &Config::snapshot_link,
      "an array of paths inside the work tree, like [\"checkpoints\", \"outputs/runs\"]",
      ValidSnapshotLink, "a path inside the work tree");
}

// This node's GPU label (--gpu-type matches it as it matches a model name).
Kind GpuLabel() {
  Kind kind = String(&Config::gpu_type);
  auto set = kind.access.from_toml;
  kind.access.from_toml = [set](Config& c, const toml::node& n, const std::string& name) {
    TRAINQ_RETURN_IF_ERROR(set(c, n, name));
    if (c.gpu_type.empty()) return Status::Ok();
    return CheckGpuType(c.gpu_type, "config option " + name);
  };
  return kind;
}

// A string that must be one of `allowed` ("" among them where it means "choose for me").
Kind OneOf(Field<std::string> field, std::vector<std::string_view> allowed, std::string_view form) {
  Kind kind = String(field);
  kind.form = form;
  kind.access.from_toml = [field, allowed, form](Config& c, const toml::node& n,
                                                 const std::string& name) -> Status {
    auto s = n.value<std::string>();
    if (!s || !n.is_string()) return WrongType(name, form);
    if (std::find(allowed.begin(), allowed.end(), *s) == allowed.end()) {
      return Status::Invalid(
          fmt::format("config option {}: '{}' is not one of {}", name, *s, form));
    }
    field(c) = *s;
    return Status::Ok();
  };
  return kind;
}

Kind Bool(Field<bool> field) {
  auto set = [field](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto b = n.value_exact<bool>();
    if (!b || !n.is_boolean()) return WrongType(name, "true or false");
    field(c) = *b;
    return Status::Ok();
  };
  return {"boolean",
          "true or false",
          {set,
           [field](const Config& c) { return std::string(field(c) ? "true" : "false"); },
           Copy(field),
           {},
           {}}};
}

constexpr std::string_view kPortRangeForm =
    "a port range \"FIRST-LAST\" with 1024 <= FIRST <= LAST <= 65535, like \"29500-29999\"";

std::optional<int> ParsePort(std::string_view text) {
  int port = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  if (port < 1024 || port > 65535) return std::nullopt;
  return port;
}

Kind PortRange() {
  auto set = [](Config& c, const toml::node& n, const std::string& name) -> Status {
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
  auto text = [](const Config& c) {
    return Quoted(fmt::format("{}-{}", c.master_port_first, c.master_port_last));
  };
  auto copy = [](Config& to, const Config& from) {
    to.master_port_first = from.master_port_first;
    to.master_port_last = from.master_port_last;
  };
  return {"port range", kPortRangeForm, {set, text, copy, {}, {}}};
}

Status BadDevices(std::string_view field, std::string_view text) {
  return Status::Invalid(fmt::format(
      "{}: '{}' is not a GPU list; use GPU indices separated by commas, like 0,1,3, or all", field,
      text));
}

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
  if (text.empty()) return std::vector<int>{};  // [], as GET shows every GPU
  return ParseDeviceList(text, field);
}

constexpr std::string_view kDevicesForm =
    "GPU indices like [0, 1, 3] or \"0,1,3\", or \"all\" (every GPU)";

Kind Devices() {
  auto set = [](Config& c, const toml::node& n, const std::string& name) -> Status {
    if (auto s = n.value<std::string>(); s && n.is_string()) {
      Result<std::vector<int>> v = ParseDeviceList(*s, "config option " + name);
      if (!v.ok()) return v.status();
      c.policy.devices = *v;
      return Status::Ok();
    }
    const toml::array* a = n.as_array();
    if (!a) return WrongType(name, kDevicesForm);
    std::vector<int> devices;
    for (const toml::node& e : *a) {
      auto i = e.value_exact<int64_t>();
      if (!i || !e.is_integer() || *i < 0 || *i > 1023) return WrongType(name, kDevicesForm);
      devices.push_back(static_cast<int>(*i));
    }
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    c.policy.devices = devices;
    return Status::Ok();
  };
  auto from_json = [](Config& c, const json& v, const std::string& name) -> Status {
    Result<std::vector<int>> d = DevicesFromJson(v, name);
    if (!d.ok()) return d.status();
    c.policy.devices = *d;
    return Status::Ok();
  };
  return {"GPU list",
          kDevicesForm,
          {set, [](const Config& c) { return Quoted(FormatDeviceList(c.policy.devices)); },
           Copy<std::vector<int>>(&PolicyConfig::devices), from_json,
           [](const Config& c) { return json(c.policy.devices); }}};
}

constexpr std::string_view kMaxJobsForm = "a whole number from 0 (no limit) to 10000";

// A limit settable at run time: 2 or "2" from the API; anything else (2.5, true) fails as
// its JSON text. `what` names the unit in errors ("job", "GPU").
Kind SettableLimit(Field<int> field, std::string_view what) {
  Kind kind = Count(field, kMaxJobsPerGpu, kMaxJobsForm);
  kind.access.from_json = [field, what](Config& c, const json& v,
                                        const std::string& name) -> Status {
    Result<int> n = ParseLimit(v.is_string() ? v.get<std::string>() : v.dump(), name, what);
    if (!n.ok()) return n.status();
    field(c) = *n;
    return Status::Ok();
  };
  kind.access.to_json = [field](const Config& c) { return json(field(c)); };
  return kind;
}

constexpr int kMaxCount = 100000;

constexpr std::string_view kPlacementForm = "\"spread\" or \"pack\"";

// placement: spread (false) or pack (true), from the file or at run time.
Kind Placement() {
  auto parse = [](Config& c, std::optional<std::string> s, const std::string& name,
                  std::string_view shown) -> Status {
    if (s == "spread" || s == "pack") {
      c.policy.pack = *s == "pack";
      return Status::Ok();
    }
    return Status::Invalid(fmt::format("config option {}: '{}' is not a placement; use {}", name,
                                       shown, kPlacementForm));
  };
  auto set = [parse](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto s = n.value<std::string>();
    if (!s || !n.is_string()) return WrongType(name, kPlacementForm);
    return parse(c, s, name, *s);
  };
  auto from_json = [parse](Config& c, const json& v, const std::string& name) -> Status {
    std::optional<std::string> s;
    if (v.is_string()) s = v.get<std::string>();
    return parse(c, s, name, s ? *s : v.dump());
  };
  auto shown = [](const Config& c) { return std::string(c.policy.pack ? "pack" : "spread"); };
  return {
      "string",
      kPlacementForm,
      {set, [shown](const Config& c) { return Quoted(shown(c)); }, Copy<bool>(&PolicyConfig::pack),
       from_json, [shown](const Config& c) { return json(shown(c)); }}};
}

// paused, set by `trainq pause` and `trainq resume`: true or false.
Kind Paused() {
  Kind kind = Bool(&PolicyConfig::paused);
  kind.access.from_json = [](Config& c, const json& v, const std::string& name) -> Status {
    // `trainq config set paused true` sends the text.
    if (v == "true" || v == "false") {
      c.policy.paused = v == "true";
      return Status::Ok();
    }
    if (!v.is_boolean()) return WrongType(name, "true or false");
    c.policy.paused = v.get<bool>();
    return Status::Ok();
  };
  kind.access.to_json = [](const Config& c) { return json(c.policy.paused); };
  return kind;
}

constexpr std::string_view kPausedGpusForm =
    "GPU indices like [0, 1] or \"0,1\", or \"none\" (no GPU paused)";

// paused_gpus: the GPUs `trainq pause --gpus` paused; "none" or [] for none.
Kind PausedGpus() {
  auto parse = [](Config& c, const std::string& text, const std::string& name) -> Status {
    if (text == "none" || text.empty()) {
      c.policy.paused_gpus.clear();
      return Status::Ok();
    }
    Result<std::vector<int>> v = ParseDeviceList(text, "config option " + name);
    if (!v.ok() || v->empty()) {
      return Status::Invalid(
          fmt::format("config option {}: '{}' is not {}", name, text, kPausedGpusForm));
    }
    c.policy.paused_gpus = *v;
    return Status::Ok();
  };
  auto from_list = [parse](Config& c, const json& v, const std::string& name) -> Status {
    if (v.is_string()) return parse(c, v.get<std::string>(), name);
    if (!v.is_array()) return WrongType(name, kPausedGpusForm);
    std::string text;
    for (const json& e : v) {
      if (!e.is_number_integer()) return WrongType(name, kPausedGpusForm);
      if (!text.empty()) text += ',';
      text += e.dump();
    }
    return parse(c, text, name);
  };
  auto set = [from_list](Config& c, const toml::node& n, const std::string& name) -> Status {
    if (auto s = n.value<std::string>(); s && n.is_string()) return from_list(c, json(*s), name);
    const toml::array* a = n.as_array();
    if (!a) return WrongType(name, kPausedGpusForm);
    json list = json::array();
    for (const toml::node& e : *a) {
      auto i = e.value_exact<int64_t>();
      if (!i || !e.is_integer()) return WrongType(name, kPausedGpusForm);
      list.push_back(*i);
    }
    return from_list(c, list, name);
  };
  auto text = [](const Config& c) {
    return Quoted(c.policy.paused_gpus.empty() ? "none" : FormatDeviceList(c.policy.paused_gpus));
  };
  return {"GPU list",
          kPausedGpusForm,
          {set, text, Copy<std::vector<int>>(&PolicyConfig::paused_gpus), from_list,
           [](const Config& c) { return json(c.policy.paused_gpus); }}};
}

// cpu_slots, also settable at run time: 4 or "4" from the API.
Kind CpuSlots() {
  constexpr std::string_view kForm =
      "a whole number of slots from 0 (the machine's cores) to "
      "100000";
  Kind kind = Count(&Config::cpu_slots, kMaxCount, kForm);
  kind.access.from_json = [kForm](Config& c, const json& v, const std::string& name) -> Status {
    std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    int n = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || n < 0 ||
        n > kMaxCount) {
      return Status::Invalid(
          fmt::format("{}: '{}' is not a slot count; use {}", name, text, kForm));
    }
    c.cpu_slots = n;
    return Status::Ok();
  };
  kind.access.to_json = [](const Config& c) { return json(c.cpu_slots); };
  return kind;
}

// The one table. docs/config.md's option table is checked against it (config_test.cc), and
// its defaults against Config{} and PolicyConfig{}.
const std::vector<Option>& Options() {
  static const std::vector<Option> kOptions = {
      Row("headroom", "256MiB", false, "GPU memory kept free on every GPU, beyond all reservations",
          Size(&PolicyConfig::headroom_bytes)),
      Row("oom_backoff", "30s", false,
          "wait before the first retry of an out-of-memory attempt; doubles each retry",
          Duration(&Config::oom_backoff_ms)),
      Row("oom_backoff_max", "1h", false, "longest wait between out-of-memory retries",
          Duration(&Config::oom_backoff_max_ms)),
      Row("grace_period", "10s", false, "time between SIGTERM and SIGKILL when a job is stopped",
          Duration(&Config::grace_ms)),
      Row("interactive_idle_timeout", "1h", false,
          "an interactive session (`trainq shell`) with no input from its terminal and no use of "
          "its GPUs for this long is hung up; 0 = never",
          Duration(&Config::interactive_idle_ms)),
      Row("sample_interval", "1s", false, "how often the GPUs are sampled; at least 100ms",
          Duration(&Config::sample_interval_ms, kMinSampleIntervalMs)),
      Row("ramp_up", "60s", false,
          "where per-process GPU memory is unknown, how long a new attempt's reservation counts "
          "in full",
          Duration(&PolicyConfig::ramp_up_ms)),
      Row("whole_gpu_max_used", "1GiB", false,
          "a whole-GPU job (no `--mem`) takes only a GPU with no other job or process and at most "
          "this much memory in use (memory held from another container shows no process); 0 = "
          "none at all",
          Size(&PolicyConfig::whole_max_used_bytes, "a size like \"1GiB\", or 0 (none in use)",
               true)),
      Row("gpu_stale_after", "10s", false,
          "after GPU samples fail, nothing starts on the GPUs once their last good sample is this "
          "old (at least two `sample_interval`s are used); `trainq gpus` shows the age and error",
          Duration(&PolicyConfig::stale_after_ms, 1000)),
      Row("cpu_slots", "0", true,
          "host CPU slots jobs can hold (`--cpus`; a GPU job holds none unless it asks); 0 = the "
          "machine's cores (`trainq config set cpu-slots 16`)",
          CpuSlots()),
      Row("fake_gpus", "\"\"", false,
          "simulated GPU file ([simulated-gpus.md](simulated-gpus.md)); also `TRAINQ_FAKE_GPUS`",
          String(&Config::fake_gpus, "path")),
      Row("nvml_library", "\"libnvidia-ml.so.1\"", false, "the NVML library loaded at run time",
          String(&Config::nvml_library)),
      Row("oom_patterns", "[]", false,
          "extra log lines that mean GPU out-of-memory, added to the built-in list",
          Strings(&Config::oom_patterns)),
      Row("log_tail", "64KiB", false,
          "how much of a failed job's log end is searched for out-of-memory",
          Size(&Config::log_tail_bytes)),
      Row("log_max_size", "100MiB", false,
          "largest log one attempt keeps: its first half and latest output, a marker between; "
          "0 = no limit",
          Size(&Config::log_max_bytes, "a size like \"100MiB\", or 0 (no limit)", true)),
      Row("max_mem_limit", "0", false,
          "host memory (RAM) a job may ask with `--mem-limit`, and the limit of every job that "
          "asks none and has no `default_mem_limit`; 0 = the machine's memory. Needs cgroups "
          "([operations.md](operations.md#host-limits))",
          Size(&Config::max_mem_limit_bytes, "a size like \"64GiB\", or 0 (the machine's memory)",
               true)),
      Row("default_mem_limit", "0", false,
          "host memory limit of a job that gives no `--mem-limit` (at most `max_mem_limit`); "
          "0 = none",
          Size(&Config::default_mem_limit_bytes, "a size like \"16GiB\", or 0 (none)", true)),
      Row("max_procs_per_job", "32768", false,
          "tasks (processes and threads) a job may ask with `--max-procs`; 0 = no bound",
          Count(&Config::max_procs_per_job, kMaxProcsOption,
                "a whole number of tasks from 0 (no bound) to 4194304")),
      Row("default_max_procs", "4096", false,
          "task limit of a job that gives no `--max-procs` (at most `max_procs_per_job`); 0 = "
          "`max_procs_per_job`",
          Count(&Config::default_max_procs, kMaxProcsOption,
                "a whole number of tasks from 0 (the bound) to 4194304")),
      Row("max_waiting_jobs_per_user", "10000", false,
          "most jobs one user may have queued or blocked; a submit past it is refused whole; "
          "0 = no cap",
          Count(&Config::max_waiting_jobs_per_user, kMaxWaitingCap,
                "a whole number of jobs from 0 (no cap) to 10000000")),
      Row("max_stored_bytes_per_user", "20GiB", false,
          "most bytes one user's kept jobs may take: their records and the logs of their "
          "attempts; a submit past it is refused until `trainq clean` frees some; 0 = no cap",
          Size(&Config::max_stored_bytes_per_user, "a size like \"20GiB\", or 0 (no cap)", true)),
      Row("node_name", "the host name", false, "this node's name in job records",
          String(&Config::node_name)),
      Row("node_features", "[]", false,
          "what `--constraint` (Slurm's `-C`) selects this node by, like [\"ib\", \"nvlink\"]",
          Features()),
      Row("container_runtime", "\"\"", false,
          "what runs `--image` jobs ([containers.md](containers.md)): \"podman\", \"docker\", or "
          "\"\" for podman where it is installed, else docker",
          OneOf(&Config::container_runtime, {"", "podman", "docker"},
                "\"podman\", \"docker\" or \"\" (podman where installed, else docker)")),
      Row("container_runtime_args", "[]", false,
          "options added to every container's `run` line, for what the host needs (e.g. "
          "[\"--runtime\", \"runc\"])",
          Strings(&Config::container_runtime_args, "an array of strings")),
      Row("container_pull", "\"never\"", false,
          "whether an image missing from the node's store is pulled from a registry: "
          "\"never\" (the job fails saying so) or \"missing\"",
          OneOf(&Config::container_pull, {"never", "missing"}, "\"never\" or \"missing\"")),
      Row("container_shm_size", "8GiB", false,
          "/dev/shm of a container job that gives no `--shm-size` (PyTorch's DataLoader "
          "workers pass batches through it; the runtimes' 64 MB is too small)",
          Size(&Config::container_shm_bytes)),
      Row("container_gpu_kind", "\"nvidia.com/gpu\"", false,
          "the CDI kind a container's GPUs are asked as (`--device KIND=UUID`); \"\": set "
          "`NVIDIA_VISIBLE_DEVICES` for the runtime's NVIDIA hook instead",
          String(&Config::container_gpu_kind)),
      Row("container_gpu_check", "true", false,
          "before the first GPU container job after each start, run `nvidia-smi -L` in a "
          "container given that job's GPUs and refuse container GPU jobs on this node unless "
          "it lists exactly them ([containers.md](containers.md), \"GPU isolation\")",
          Bool(&Config::container_gpu_check)),
      Row("gpu_type", "\"\"", false,
          "a label `--gpu-type` matches on this node's GPUs, besides their model name (for a "
          "model NVML names vaguely, or a lab's own class like \"big\")",
          GpuLabel()),
      Row("max_request", "64MiB", false, "largest API request body accepted",
          Size(&Config::max_request_bytes)),
      Row("request_timeout", "10s", false,
          "an API request's header and body must arrive, and its answer be read, within this",
          Duration(&Config::request_timeout_ms, 100)),
      Row("header_timeout", "5s", false,
          "a new API connection's TLS handshake and first request's header must arrive within "
          "this of connecting, a later request's header within this of its first byte",
          Duration(&Config::header_timeout_ms, 100)),
      Row("idle_timeout", "60s", false,
          "an API connection waiting for its first or next request is closed after this",
          Duration(&Config::idle_timeout_ms, 100)),
      Row("max_connections", "1024", false,
          "most API connections open at once (fewer where the fd limit is low); at the cap the "
          "one idle longest is closed, else the new one gets a 503",
          Count(&Config::max_connections, kMaxCount,
                "a whole number of connections from 1 to 100000", 1)),
      Row("max_connections_per_peer", "64", false,
          "most API connections one client holds: one user on the Unix socket (root and the "
          "daemon's user aside), one IP address over TCP; at it the client's connection idle "
          "longest is closed, else its new one gets a 503",
          Count(&Config::max_connections_per_peer, kMaxCount,
                "a whole number of connections from 1 to 100000", 1)),
      Row("aging_limit", "2h", false,
          "a job blocked this long gets the GPUs it would best use held for it (no backfill "
          "there)",
          Duration(&PolicyConfig::aging_ms)),
      Row("max_holds", "1", false,
          "how many aged jobs that cannot start yet have GPUs held at once, oldest in line "
          "first; 0 = every aged job",
          Count(&PolicyConfig::max_holds, kMaxCount,
                "a whole number of jobs from 0 (every aged job) to 100000")),
      Row("preemptible", "false", false,
          "whether a job whose submit says neither `--preemptible` nor `--no-preemptible` may be "
          "stopped for a waiting job of higher priority",
          Bool(&Config::preemptible)),
      Row("preempt_priority_gap", "1", false,
          "a waiting job may preempt running preemptible jobs whose priority is at least this "
          "much below its own (0: equal priorities too)",
          Count(&Config::preempt_priority_gap, kMaxCount,
                "a whole number from 0 (equal priorities preempt) to 100000")),
      Row("preempt_for_fair_share", "false", false,
          "a waiting job of a user below their fair share may also preempt preemptible jobs of "
          "users above theirs",
          Bool(&Config::preempt_for_fair_share)),
      Row("preempt_for_aging", "false", false,
          "a large job (several nodes, or half a node's GPUs or more) waiting past "
          "`aging_limit` may also preempt preemptible jobs of other users",
          Bool(&Config::preempt_for_aging)),
      Row("min_runtime", "10m", false,
          "an attempt that has run less than this is never preempted, nor resized (an elastic "
          "job keeps its size at least this long)",
          Duration(&Config::min_runtime_ms)),
      Row("preempt_spare", "1h", false,
          "a job preempted twice in a row is not preempted again for this long",
          Duration(&Config::preempt_spare_ms)),
      Row("attained_service", "0s", false,
          "GPU time (GPUs x time run, over a job's attempts): at equal priority, jobs that have "
          "had less go first, as Tiresias's 2D-LAS serves its first queue first; 0s = off",
          Duration(&Config::attained_service_ms)),
      Row("preempt_for_attained_service", "false", false,
          "a waiting job that has had less than `attained_service` may also preempt "
          "preemptible jobs of no higher priority that have had more",
          Bool(&Config::preempt_for_attained_service)),
      Row("fair_share_half_life", "7d", false,
          "half-life of the GPU-hours that order users by fair share",
          Duration(&Config::fair_share_half_life_ms)),
      Row("workload_window", "0", false,
          "how many of the last submitted GPU jobs give the workload mix for fragmentation-aware "
          "GPU choice (FGD, as `trainq sim` runs it); 0 = off: the `placement` rule",
          Count(&Config::workload_window, kMaxCount,
                "a whole number of jobs from 0 (off) to 100000")),
      Row("placement", "\"spread\"", true,
          "where shares (`--mem`) go first: \"spread\" = the GPUs with the fewest trainq jobs, "
          "then the most usable memory, so jobs balance over the GPUs; \"pack\" = GPUs already "
          "in use, then best fit, keeping whole GPUs free (`trainq config set placement pack`)",
          Placement()),
      Row("master_port_range", "\"29500-29999\"", false,
          "`MASTER_PORT` values handed to multi-GPU jobs, never two live attempts the same",
          PortRange()),
      Row("shared", "false", false,
          "one daemon for every user of the machine (run as root; also `trainqd --shared`): jobs "
          "run as their submitter ([operations.md](operations.md#a-shared-server))",
          Bool(&Config::shared)),
      Row("socket", "\"\"", false,
          "the API's Unix socket (also `--socket`); \"\" = `trainq.sock` in the state dir, or "
          "`/run/trainq/trainq.sock` when shared",
          String(&Config::socket, "path")),
      Row("socket_group", "\"\"", false,
          "shared: only this group's members may use the socket (mode 0660); \"\" = everyone "
          "(0666)",
          String(&Config::socket_group, "group")),
      Row("admin_group", "\"\"", false,
          "shared: members of this group are admins, as root is: they act on every user's jobs",
          String(&Config::admin_group, "group")),
      Row("listen", "[]", false,
          "TCP addresses to serve the API on, each \"HOST:PORT\"; every request needs a token "
          "([operations.md](operations.md#remote-access))",
          Strings(&Config::listen, "an array of \"HOST:PORT\" strings, like [\"0.0.0.0:7070\"]")),
      Row("tls_cert", "\"\"", false, "TLS certificate chain (PEM) for `listen`",
          String(&Config::tls_cert, "path")),
      Row("tls_key", "\"\"", false, "TLS private key (PEM) for `listen`",
          String(&Config::tls_key, "path")),
      Row("tls_ca", "\"\"", false,
          "CA certificates (PEM) a node verifies the other nodes' certificates against, in place "
          "of the system's ([cluster.md](cluster.md#tls-between-nodes))",
          String(&Config::tls_ca, "path")),
      Row("allow_plaintext", "false", false,
          "serve `listen` addresses other than loopback without TLS (tokens then cross the "
          "network in clear)",
          Bool(&Config::allow_plaintext)),
      Row("notify_url", "\"\"", false,
          "POST every job's end to this URL as JSON, as `--notify` does for one job "
          "([workflow.md](workflow.md#notifications))",
          String(&Config::notify_url, "URL")),
      Row("notify_format", "\"json\"", false,
          "the body of webhooks: \"json\" (trainq's fields) or \"slack\" (`{\"text\": ...}` for "
          "Slack-compatible incoming webhooks)",
          String(&Config::notify_format)),
      Row("metrics_per_user", "false", false,
          "`/metrics` also counts jobs per user (a `user` label: as many series as users) "
          "([dashboard.md](dashboard.md#prometheus))",
          Bool(&Config::metrics_per_user)),
      Row("hpc_job_mapping_dir", "\"\"", false,
          "a directory where trainq keeps one file per GPU index naming the jobs on it, as "
          "dcgm-exporter's `--hpc-job-mapping-dir` reads them; \"\" = none "
          "([dashboard.md](dashboard.md#per-job-gpu-figures-from-dcgm-exporter))",
          String(&Config::hpc_job_mapping_dir, "path")),
      Row("sendmail", "\"/usr/sbin/sendmail\"", false,
          "the program `--mail` sends through (`sendmail -t`); a job asking for mail is refused "
          "when it is missing",
          String(&Config::sendmail, "path")),
      Row("mail_domains", "[]", false,
          "`--mail` takes only the submitter's own address: their user name (mailed on this "
          "machine) or USER@DOMAIN for a DOMAIN listed here; [] = the user name only "
          "([workflow.md](workflow.md#notifications))",
          Strings(&Config::mail_domains, "an array of domain names, like [\"lab.example.org\"]")),
      Row("snapshot", "\"off\"", false,
          "what `trainq submit` does without --snapshot/--no-snapshot: \"off\", or \"git\" to run "
          "every job in a copy of its git work tree ([workflow.md](workflow.md#code-snapshots))",
          String(&Config::snapshot)),
      Row("snapshot_max_size", "200MiB", false,
          "the largest work tree a snapshot copies; a larger one is refused, naming its biggest "
          "files",
          Size(&Config::snapshot_max_bytes)),
      Row("snapshot_link", "[]", false,
          "paths of a work tree that a snapshot's tree links to instead of copying, made in the "
          "work tree if missing, besides the top-level directories git ignores, which are "
          "always linked: what a job reads or writes there is the project's "
          "([workflow.md](workflow.md#code-snapshots))",
          SnapshotLinks()),
      Row("stage_cache_size", "50GiB", false,
          "cluster: the most bytes a node keeps of the code and data shipped to it from other "
          "nodes; past it, the least recently used files no waiting or running job needs go "
          "([cluster.md](cluster.md#code-and-data))",
          Size(&Config::stage_cache_bytes, "a size like \"50GiB\", or 0 (no cap)", true)),
      Row("store", "\"\"", false,
          "a cluster's shared store, \"redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]\", or "
          "\"redis+sentinel://[USER@]HOST[:PORT],HOST[:PORT],.../MASTER[/DB]\" for a Redis whose "
          "master its sentinels choose ([cluster.md](cluster.md#redis-with-failover)); \"\" = "
          "the embedded SQLite database, one machine ([cluster.md](cluster.md))",
          StoreUrl(&Config::store)),
      Row("store_password_file", "\"\"", false,
          "a file (mode 0600) holding the password of `store`'s user, which the URL then names "
          "without one (redis://USER@HOST); read at start",
          String(&Config::store_password_file, "path")),
      Row("store_sentinel_password_file", "\"\"", false,
          "redis+sentinel://: a file (mode 0600) holding the sentinels' own password, sent with "
          "`store`'s user; read at start; \"\" = the sentinels ask for none",
          String(&Config::store_sentinel_password_file, "path")),
      Row("store_min_replicas_acked", "\"auto\"", false,
          "a submit, start, end or cancel is answered only once this many Redis replicas hold "
          "it (`WAIT`); fewer within a second make it fail, so nothing a failover could lose is "
          "reported stored; \"auto\" = 1 with redis+sentinel://, else 0 (no wait) "
          "([cluster.md](cluster.md#redis-with-failover))",
          MinReplicas()),
      Row("cluster_key_file", "\"\"", false,
          "cluster: the key every node holds (mode 0600; the same file on each node, never in "
          "Redis) that signs jobs, tokens and the nodes' requests; \"\" = cluster.key in the "
          "state dir. Make one with `trainqd --new-cluster-key FILE` "
          "([cluster.md](cluster.md#the-cluster-key))",
          String(&Config::cluster_key_file, "path")),
      Row("redis_prefix", "\"trainq:\"", false,
          "every Redis key of this cluster starts with it: several clusters can share one Redis",
          String(&Config::redis_prefix)),
      Row("node_address", "\"\"", false,
          "the address other nodes and `MASTER_ADDR` use for this node; \"\" = the host name",
          String(&Config::node_address, "host name or IP address")),
      Row("heartbeat_interval", "10s", false,
          "cluster: how often a node renews its heartbeat; at most a quarter of node_timeout",
          Duration(&Config::heartbeat_interval_ms, 100)),
      Row("node_timeout", "300s", false,
          "cluster: a node silent this long is lost and its jobs run elsewhere; its own jobs "
          "stop themselves after half of it (self-fencing)",
          Duration(&Config::node_timeout_ms, 1000)),
      Row("leader_lease", "15s", false,
          "cluster: how long the scheduling leader's lease lasts unrenewed; another node takes "
          "over within two lease periods",
          Duration(&Config::leader_lease_ms, 300)),
      Row("lost_node_wait", "60s", false,
          "cluster: how long a lost node's jobs wait before they run elsewhere, so a node that "
          "was only frozen can still report the jobs that ended meanwhile (they then keep their "
          "real end and run once); 0 = at once",
          Duration(&Config::lost_node_wait_ms, 0)),
      Row("max_node_failures", "3", false,
          "cluster: a job whose attempts lost this many nodes fails instead of running again",
          Count(&Config::max_node_failures, kMaxCount,
                "a whole number of node failures from 1 to 100000", 1)),
      Row("devices", "\"all\"", true,
          "GPU indices jobs may use (`trainq config set devices 0,1,3`)", Devices()),
      Row("paused", "false", true,
          "no job starts while true; running ones go on (`trainq pause`, `trainq resume`)",
          Paused()),
      Row("paused_gpus", "\"none\"", true,
          "GPUs no job starts on; running ones go on (`trainq pause --gpus 0,1`)", PausedGpus()),
      Row("max_jobs_per_gpu", "0", true, "most trainq jobs on one GPU; 0 = no limit",
          SettableLimit(&PolicyConfig::max_jobs_per_gpu, "job")),
      Row("max_gpus_per_user", "0", true,
          "most GPUs one user's running jobs hold, on all nodes; 0 = no limit",
          SettableLimit(&PolicyConfig::max_gpus_per_user, "GPU")),
      Row("max_jobs_per_user", "0", true,
          "most jobs of one user running at once (CPU jobs too); 0 = no limit",
          SettableLimit(&PolicyConfig::max_jobs_per_user, "job")),
  };
  return kOptions;
}

const Option* FindOption(std::string_view name) {
  for (const Option& o : Options()) {
    if (name == o.info.name) return &o;
  }
  return nullptr;
}

}  // namespace

std::span<const OptionInfo> ConfigOptions() {
  static const std::vector<OptionInfo> kInfo = [] {
    std::vector<OptionInfo> info;
    for (const Option& o : Options()) info.push_back(o.info);
    return info;
  }();
  return kInfo;
}

size_t ConnectionCap(int max_connections, uint64_t fd_limit) {
  uint64_t reserve = std::max<uint64_t>(64, fd_limit / 4);
  uint64_t ceiling = fd_limit > reserve + 8 ? fd_limit - reserve : 8;
  return static_cast<size_t>(std::min<uint64_t>(std::max(max_connections, 1), ceiling));
}

Status CheckListen(const Config& config) {
  std::vector<std::string> problems;
  std::vector<std::string> exposed;  // non-loopback addresses
  for (const std::string& entry : config.listen) {
    Result<ListenAddress> at = ParseListenAddress(entry, "listen");
    if (!at.ok()) {
      problems.push_back(at.status().message());
    } else if (!IsLoopbackHost(at->host)) {
      exposed.push_back(entry);
    }
  }
  bool tls = !config.tls_cert.empty() && !config.tls_key.empty();
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    problems.push_back(fmt::format(
        "{} is set but {} is not: set both (a PEM certificate chain and its private key) or "
        "neither",
        config.tls_cert.empty() ? "tls_key" : "tls_cert",
        config.tls_cert.empty() ? "tls_cert" : "tls_key"));
  } else if (!tls && !exposed.empty() && !config.allow_plaintext) {
    problems.push_back(fmt::format(
        "listen: {} is reachable from other machines and would be served without TLS, so "
        "bearer tokens would cross the network in clear; set tls_cert and tls_key, or "
        "allow_plaintext = true on a trusted network",
        fmt::join(exposed, ", ")));
  }
  if (problems.empty()) return Status::Ok();
  return Status::Invalid(fmt::format("{}", fmt::join(problems, "; ")));
}

int MinReplicasAcked(const Config& config) {
  if (config.store_min_replicas_acked != kAutoReplicas) return config.store_min_replicas_acked;
  return config.store.starts_with("redis+sentinel://") ? 1 : 0;
}

namespace {

// The hosts a password protects: the server's, or every sentinel's (the servers they name
// are on the same network).
std::vector<std::string> StoreHosts(const RedisTarget& t) {
  if (t.sentinels.empty()) return {t.host};
  std::vector<std::string> hosts;
  for (const RedisAddress& s : t.sentinels) hosts.push_back(s.host);
  return hosts;
}

void CheckStoreUrl(const Config& config, std::vector<std::string>& problems) {
  Result<RedisTarget> t = ParseRedisUrl(config.store);
  if (!t.ok()) return problems.push_back(t.status().message());
  if (!t->user.empty() && t->password.empty() && config.store_password_file.empty()) {
    return problems.push_back(
        "store: a user without a password; set store_password_file to a file holding the "
        "password (mode 0600), or give redis://USER:PASSWORD@HOST");
  }
  std::vector<std::string> hosts = StoreHosts(*t);
  auto remote = std::find_if(hosts.begin(), hosts.end(),
                             [](const std::string& h) { return !IsLoopbackHost(h); });
  if (t->password.empty() && config.store_password_file.empty() && remote != hosts.end()) {
    // Whoever writes to the store decides what is queued and cancelled on every node.
    problems.push_back(fmt::format(
        "store: Redis on {} without a password; outside loopback the store needs a user and "
        "a password (redis://USER@HOST with store_password_file, docs/cluster.md \"Redis "
        "ACL\")",
        *remote));
  }
}

}  // namespace

Status CheckCluster(const Config& config) {
  std::vector<std::string> problems;
  if (!config.store.empty()) CheckStoreUrl(config, problems);
  if (config.store.empty() && config.store_min_replicas_acked > 0) {
    problems.push_back(
        "store_min_replicas_acked: the embedded store has no replicas; set it only with a "
        "Redis store (store = \"redis+sentinel://...\")");
  }
  if (!config.store_sentinel_password_file.empty() &&
      !config.store.starts_with("redis+sentinel://")) {
    problems.push_back(
        "store_sentinel_password_file: set, but store is not a redis+sentinel:// URL; only "
        "sentinels are asked for that password");
  }
  if (config.heartbeat_interval_ms * 4 > config.node_timeout_ms) {
    problems.push_back(fmt::format(
        "heartbeat_interval: {} is more than a quarter of node_timeout ({}); a node would be "
        "judged lost after missing fewer than four heartbeats",
        FormatDuration(config.heartbeat_interval_ms), FormatDuration(config.node_timeout_ms)));
  }
  if (config.grace_ms * 4 > config.node_timeout_ms) {
    problems.push_back(fmt::format(
        "grace_period: {} is more than a quarter of node_timeout ({}); a node's jobs stop "
        "themselves after half of node_timeout and must be gone before the node is judged lost",
        FormatDuration(config.grace_ms), FormatDuration(config.node_timeout_ms)));
  }
  if (!config.redis_prefix.empty() &&
      config.redis_prefix.find_first_of("*?[] \t\n") != std::string::npos) {
    problems.push_back(fmt::format(
        "redis_prefix: '{}' holds a glob character or space; use letters, digits and ':', '_', "
        "'-', '.' (an ACL names the keys as PREFIX*)",
        config.redis_prefix));
  }
  if (problems.empty()) return Status::Ok();
  return Status::Invalid(fmt::format("{}", fmt::join(problems, "; ")));
}

Status CheckWorkflow(const Config& config) {
  if (!config.notify_url.empty()) {
    Result<WebhookUrl> url = ParseWebhookUrl(config.notify_url, "notify_url");
    if (!url.ok()) return url.status();
  }
  for (const std::string& domain : config.mail_domains) {
    bool name = domain.front() != '.' && domain.front() != '-' &&
                std::all_of(domain.begin(), domain.end(), [](char c) {
                  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
                });
    if (!name) {
      return Status::Invalid(fmt::format(
          "mail_domains: '{}' is not a domain name; use letters, digits, '.' and '-', like "
          "\"lab.example.org\"",
          domain));
    }
  }
  if (config.snapshot != "off" && config.snapshot != "git") {
    return Status::Invalid(
        fmt::format("snapshot: '{}' is not a mode; use \"off\" or \"git\"", config.snapshot));
  }
  if (config.notify_format != "json" && config.notify_format != "slack") {
    return Status::Invalid(
        fmt::format("notify_format: '{}' is not a format; use \"json\" or "
                    "\"slack\"",
                    config.notify_format));
  }
  if (!config.hpc_job_mapping_dir.empty() && config.hpc_job_mapping_dir[0] != '/') {
    return Status::Invalid(fmt::format(
        "hpc_job_mapping_dir: '{}' is not an absolute path; use a directory like "
        "\"/run/trainq/hpc-jobs\" (the one dcgm-exporter's --hpc-job-mapping-dir names)",
        config.hpc_job_mapping_dir));
  }
  return Status::Ok();
}

PolicyConfig PolicyOf(const Config& config) {
  PolicyConfig policy = config.policy;
  // A bound shorter than two samples would close GPUs between good samples.
  policy.stale_after_ms = std::max(policy.stale_after_ms, 2 * config.sample_interval_ms);
  return policy;
}

// toml++ 3.3 (Debian 12) reaches __builtin_unreachable when it asks whether some non-ASCII
// characters (U+00A1..U+0499 among them) are whitespace, wherever they stand, and assumes
// what its assertions state about a table header it cannot read: undefined behaviour on a
// typo, found by fuzz/config_fuzz.cc. Every option is top-level and ASCII, and TOML allows
// no control character but tab, so those are refused before toml++ reads the text.
namespace {
Status RefuseWhatTomlppMisreads(std::string_view text, const std::string& origin) {
  int line = 1;
  bool blank_so_far = true;  // only blanks on this line yet
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      return Status::Invalid(
          fmt::format("{}:{}: a non-ASCII character; config.toml is ASCII (in a string, "
                      "write \\uXXXX)",
                      origin, line));
    }
    if ((u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7f) {
      return Status::Invalid(fmt::format(
          "{}:{}: control character 0x{:02x}; TOML allows none but tab", origin, line, u));
    }
    if (c == '[' && blank_so_far) {
      return Status::Invalid(fmt::format(
          "{}:{}: a [table]; every option goes at the top level (docs/config.md)", origin, line));
    }
    blank_so_far = c == '\n' || (blank_so_far && (c == ' ' || c == '\t'));
    if (c == '\n') ++line;
  }
  return Status::Ok();
}
}  // namespace

Result<Config> ParseConfig(const std::string& toml_text, const std::string& origin) {
  TRAINQ_RETURN_IF_ERROR(RefuseWhatTomlppMisreads(toml_text, origin));
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
    Status st = option->access.from_toml(config, node, name);
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
  return o->access.text(config);
}

std::string CanonicalOptionName(std::string_view key) {
  std::string name(key);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

bool IsOption(std::string_view name) { return FindOption(name) != nullptr; }

bool IsSettable(std::string_view name) {
  const Option* o = FindOption(name);
  return o != nullptr && o->info.settable;
}

std::string SettableKeys() {
  std::vector<std::string_view> keys;
  for (const Option& o : Options()) {
    if (o.info.settable) keys.push_back(o.info.name);
  }
  return fmt::format("{}", fmt::join(keys, ", "));
}

namespace {

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
  if (s == "all") return std::vector<int>{};
  // "" read as every GPU would silently lift a limit someone meant to set.
  if (s.empty()) {
    return Status::Invalid(fmt::format(
        "{}: the GPU list is empty; name GPU indices like 0,1,3, or all for every GPU", field));
  }
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

Result<int> ParseLimit(std::string_view text, std::string_view field, std::string_view what) {
  std::optional<int> n = ParseIndex(TrimSpaces(text), kMaxJobsPerGpu);
  if (!n) {
    return Status::Invalid(
        fmt::format("{}: '{}' is not a {} count; use a whole number from 0 (no limit) to {}", field,
                    text, what, kMaxJobsPerGpu));
  }
  return *n;
}

Result<int> ParseMaxJobsPerGpu(std::string_view text, std::string_view field) {
  return ParseLimit(text, field, "job");
}

namespace {

// One key of a run-time update; problems are added to `problems`.
void ParseUpdateKey(const std::string& key, const json& value, RuntimeUpdate* update,
                    std::vector<std::string>* problems) {
  std::string name = CanonicalOptionName(key);
  const Option* option = FindOption(name);
  if (option == nullptr) {
    problems->push_back(fmt::format(
        "unknown setting '{}'; the settings that change at run time are {}", key, SettableKeys()));
    return;
  }
  if (!option->info.settable) {
    problems->push_back(fmt::format(
        "{} cannot change while the daemon runs; set it in the config file and restart the "
        "daemon (trainq daemon stop); the settings that change at run time are {}",
        name, SettableKeys()));
    return;
  }
  if (value.is_null()) {
    update->reset.push_back(name);
    return;
  }
  Status st = option->access.from_json(update->set.values, value, name);
  if (!st.ok()) return problems->push_back(st.message());
  update->set.names.insert(name);
}

}  // namespace

Result<RuntimeUpdate> ParseRuntimeUpdate(const std::string& json_body) {
  json doc = json::parse(json_body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.empty()) {
    return Status::Invalid(
        fmt::format("expected a JSON object of settings, like {{\"devices\": [0, 1, 3]}} or "
                    "{{\"max_jobs_per_gpu\": 2}}; the settings that change at run time are {}",
                    SettableKeys()));
  }
  RuntimeUpdate update;
  std::vector<std::string> problems;
  for (const auto& [key, value] : doc.items()) ParseUpdateKey(key, value, &update, &problems);
  if (!problems.empty()) return Status::Invalid(fmt::format("{}", fmt::join(problems, "; ")));
  return update;
}

RuntimeSettings Updated(RuntimeSettings settings, const RuntimeUpdate& update) {
  for (const std::string& name : update.reset) settings.names.erase(name);
  for (const std::string& name : update.set.names) {
    FindOption(name)->access.copy(settings.values, update.set.values);
    settings.names.insert(name);
  }
  return settings;
}

Config WithRuntime(Config config, const RuntimeSettings& runtime) {
  for (const std::string& name : runtime.names) {
    FindOption(name)->access.copy(config, runtime.values);
  }
  return config;
}

std::string SettableValueJson(const Config& config, std::string_view name) {
  const Option* o = FindOption(name);
  if (o == nullptr || !o->info.settable) return "null";
  return o->access.to_json(config).dump();
}

std::string RuntimeSettingsToJson(const RuntimeSettings& settings) {
  json doc = json::object();
  for (const std::string& name : settings.names) {
    doc[name] = FindOption(name)->access.to_json(settings.values);
  }
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
