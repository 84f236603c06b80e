#include "src/daemon/config.h"

#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>
// Header-only and without exceptions: errors come back as values (STYLE.md rule 4).
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

#include "src/core/duration.h"
#include "trainq/size.h"

namespace trainq {

namespace {

using Setter = std::function<Status(Config&, const toml::node&, const std::string&)>;

struct Option {
  const char* name;
  const char* type;
  const char* default_value;
  const char* help;
  Setter set;
};

Status WrongType(const std::string& name, const char* want) {
  return Status::Invalid(fmt::format("config option {}: expected {}", name, want));
}

Setter SizeOption(uint64_t Config::*field) {
  return [field](Config& c, const toml::node& n, const std::string& name) -> Status {
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
}

Setter DurationOption(int64_t Config::*field) {
  return [field](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto s = n.value<std::string>();
    if (!s || !n.is_string()) return WrongType(name, "a duration like \"30s\", \"500ms\", \"2m\"");
    Result<int64_t> v = ParseDurationMs(*s, "config option " + name);
    if (!v.ok()) return v.status();
    c.*field = *v;
    return Status::Ok();
  };
}

Setter StringOption(std::string Config::*field) {
  return [field](Config& c, const toml::node& n, const std::string& name) -> Status {
    auto s = n.value<std::string>();
    if (!s || !n.is_string()) return WrongType(name, "a string");
    c.*field = *s;
    return Status::Ok();
  };
}

Status SetCpuSlots(Config& c, const toml::node& n, const std::string& name) {
  auto i = n.value<int64_t>();
  if (!i || !n.is_integer() || *i < 0 || *i > 100000) {
    return WrongType(name, "a whole number of slots (0 = the machine's cores)");
  }
  c.cpu_slots = static_cast<int>(*i);
  return Status::Ok();
}

Status SetPatterns(Config& c, const toml::node& n, const std::string& name) {
  const toml::array* a = n.as_array();
  if (!a) return WrongType(name, "an array of strings");
  c.oom_patterns.clear();
  for (const toml::node& e : *a) {
    auto s = e.value<std::string>();
    if (!s || !e.is_string() || s->empty()) return WrongType(name, "an array of non-empty strings");
    c.oom_patterns.push_back(*s);
  }
  return Status::Ok();
}

const std::vector<Option>& Options() {
  static const std::vector<Option> kOptions = {
      {"headroom", "size", "256MiB", "GPU memory kept free on every GPU, beyond all reservations",
       SizeOption(&Config::headroom_bytes)},
      {"oom_backoff", "duration", "30s", "wait before the first retry of an out-of-memory attempt; doubles each retry",
       DurationOption(&Config::oom_backoff_ms)},
      {"oom_backoff_max", "duration", "1h", "longest wait between out-of-memory retries",
       DurationOption(&Config::oom_backoff_max_ms)},
      {"grace_period", "duration", "10s", "time between SIGTERM and SIGKILL when a job is stopped",
       DurationOption(&Config::grace_ms)},
      {"sample_interval", "duration", "1s", "how often the GPUs are sampled",
       DurationOption(&Config::sample_interval_ms)},
      {"ramp_up", "duration", "60s",
       "where per-process GPU memory is unknown, how long a new attempt's reservation counts in full",
       DurationOption(&Config::ramp_up_ms)},
      {"cpu_slots", "integer", "0", "host CPU slots jobs can hold (--cpus); 0 = the machine's cores",
       SetCpuSlots},
      {"fake_gpus", "path", "\"\"", "simulated GPU file (docs/simulated-gpus.md); also TRAINQ_FAKE_GPUS",
       StringOption(&Config::fake_gpus)},
      {"nvml_library", "string", "\"libnvidia-ml.so.1\"", "the NVML library loaded at run time",
       StringOption(&Config::nvml_library)},
      {"oom_patterns", "array of strings", "[]",
       "extra log lines that mean GPU out-of-memory, added to the built-in list", SetPatterns},
      {"log_tail", "size", "64KiB", "how much of a failed job's log end is searched for out-of-memory",
       SizeOption(&Config::log_tail_bytes)},
      {"node_name", "string", "the host name", "this node's name in job records",
       StringOption(&Config::node_name)},
      {"max_request", "size", "64MiB", "largest API request body accepted",
       SizeOption(&Config::max_request_bytes)},
  };
  return kOptions;
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
    return Status::Invalid(fmt::format("{}:{}: {}", origin, e.source().begin.line, e.description()));
  }
  Config config;
  std::vector<std::string> problems;
  for (auto&& [key, node] : parsed.table()) {
    std::string name(key.str());
    const Option* option = nullptr;
    for (const Option& o : Options()) {
      if (name == o.name) option = &o;
    }
    if (!option) {
      problems.push_back(fmt::format("unknown config option '{}' (see docs/config.md)", name));
      continue;
    }
    Status st = option->set(config, node, name);
    if (!st.ok()) problems.push_back(st.message());
  }
  if (!problems.empty()) {
    std::string joined = origin + ": " + problems[0];
    for (size_t i = 1; i < problems.size(); ++i) joined += "; " + problems[i];
    return Status::Invalid(joined);
  }
  return config;
}

Result<Config> LoadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Config{};
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseConfig(buffer.str(), path);
}

}  // namespace trainq
