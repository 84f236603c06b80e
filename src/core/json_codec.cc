#include "src/core/json_codec.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/core/gpu_select.h"
#include "src/core/job_fields.h"
#include "src/core/spec.h"
#include "src/core/stop_spec.h"
#include "src/core/transfers.h"
#include "trainq/size.h"

namespace trainq {

namespace {

using nlohmann::json;

json TimeOrNull(UnixMs t) { return t == 0 ? json(nullptr) : json(FormatTime(t)); }

template <class T>
json OrNull(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// "string", "number", ... and for numbers which kind, so "expected an integer, got
// number 1.5" says what is wrong.
std::string Describe(const json& v) {
  if (v.is_number_float()) return fmt::format("number {}", v.get<double>());
  return v.type_name();
}

std::string Expected(std::string_view field, std::string_view what, const json& got) {
  return fmt::format("{}: expected {}, got {}", field, what, Describe(got));
}

std::string OutOfRange(std::string_view field, const std::string& got) {
  return fmt::format("{}: {} is out of range; expected an integer from {} to {}", field, got,
                     std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
}

class SpecReader {
 public:
  explicit SpecReader(JobSpec& spec) : spec_(spec) {}

  void Field(const std::string& key, const json& v);
  Status Finish(bool has_command);

 private:
  void Int(const std::string& key, const json& v, int& out);
  void String(const std::string& key, const json& v, std::string& out);
  void Command(const json& v);
  void Env(const json& v);
  void Mem(const json& v);
  void Ids(const std::string& key, const json& v, std::vector<JobId>& out);
  void Time(const json& v);
  void MemLimit(const json& v);
  void MaxProcs(const json& v);
  void Names(const std::string& key, const json& v, std::vector<std::string>& out,
             std::string_view item = "node name");
  void GpuType(const json& v);
  bool ContainerField(const std::string& key, const json& v);
  void Constraints(const json& v);
  void Transfers(const json& v);
  bool WorkflowField(const std::string& key, const json& v);
  bool StopField(const std::string& key, const json& v);
  void Bool(const std::string& key, const json& v, bool& out);
  void Group(const json& v);
  void Record(const json& v);

  JobSpec& spec_;
  std::vector<std::string> errors_;
  bool cpus_given_ = false;
};

void SpecReader::Field(const std::string& key, const json& v) {
  if (key == "command") return Command(v);
  if (key == "cwd") return String(key, v, spec_.cwd);
  if (key == "name") return String(key, v, spec_.name);
  if (key == "env") return Env(v);
  if (key == "mem") return Mem(v);
  if (key == "gpus") return Int(key, v, spec_.gpus);
  if (key == "max_gpus") return Int(key, v, spec_.max_gpus);
  if (key == "cpus") {
    cpus_given_ = true;
    return Int(key, v, spec_.cpus);
  }
  if (key == "priority") return Int(key, v, spec_.priority);
  if (key == "retries") return Int(key, v, spec_.retries);
  if (key == "hold") return Bool(key, v, spec_.hold);
  if (key == "interactive") return Bool(key, v, spec_.interactive);
  if (key == "no_log") return Bool(key, v, spec_.no_log);
  if (key == "after") return Ids(key, v, spec_.after);
  if (key == "after_any") return Ids(key, v, spec_.after_any);
  if (key == "time") return Time(v);
  if (key == "mem_limit") return MemLimit(v);
  if (key == "max_procs") return MaxProcs(v);
  if (key == "nodes") return Names(key, v, spec_.nodes_allowed);
  if (key == "exclude_nodes") return Names(key, v, spec_.nodes_excluded);
  if (key == "num_nodes") return Int(key, v, spec_.num_nodes);
  if (key == "max_nodes") return Int(key, v, spec_.max_nodes);
  if (key == "gpu_type") return GpuType(v);
  if (key == "constraints") return Constraints(v);
  if (key == "transfers") return Transfers(v);
  if (key == "collect") return Names(key, v, spec_.collect, "pattern");
  if (key == "collect_to") {
    if (v.is_null()) return spec_.collect_to.clear();
    return String(key, v, spec_.collect_to);
  }
  if (ContainerField(key, v)) return;
  if (WorkflowField(key, v)) return;
  if (StopField(key, v)) return;
  // Every key of the table has a reader above (JobFieldsTest.EveryRequestKeyOfTheTableIsRead).
  errors_.push_back(fmt::format("{}: unknown field; expected {}", key, RequestKeys()));
}

void SpecReader::Int(const std::string& key, const json& v, int& out) {
  if (!v.is_number_integer()) return errors_.push_back(Expected(key, "an integer", v));
  constexpr int64_t kMin = std::numeric_limits<int>::min();
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMax)) {
    return errors_.push_back(OutOfRange(key, v.dump()));
  }
  auto i = v.get<int64_t>();
  if (i < kMin || i > kMax) return errors_.push_back(OutOfRange(key, v.dump()));
  out = static_cast<int>(i);
}

void SpecReader::String(const std::string& key, const json& v, std::string& out) {
  if (!v.is_string()) return errors_.push_back(Expected(key, "a string", v));
  out = v.get<std::string>();
}

void SpecReader::Command(const json& v) {
  if (!v.is_array()) return errors_.push_back(Expected("command", "an array of strings", v));
  spec_.command.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      errors_.push_back(Expected(fmt::format("command[{}]", i), "a string", v[i]));
      continue;
    }
    spec_.command.push_back(v[i].get<std::string>());
  }
}

void SpecReader::Env(const json& v) {
  if (!v.is_object()) return errors_.push_back(Expected("env", "an object of strings", v));
  spec_.env.clear();
  for (const auto& [name, value] : v.items()) {
    if (!value.is_string()) {
      errors_.push_back(Expected(fmt::format("env.{}", name), "a string", value));
      continue;
    }
    spec_.env.emplace_back(name, value.get<std::string>());
  }
}

void SpecReader::Mem(const json& v) {
  if (v.is_null()) {
    spec_.mem_bytes.reset();
    spec_.mem_percent.reset();
    return;
  }
  if (!v.is_string()) return errors_.push_back(Expected("mem", "a string or null", v));
  Result<MemRequest> mem = ParseMemRequest(v.get<std::string>(), "--mem");
  if (!mem.ok()) return errors_.push_back(mem.status().message());
  spec_.mem_bytes = mem->bytes;
  spec_.mem_percent = mem->percent;
}

void SpecReader::Ids(const std::string& key, const json& v, std::vector<JobId>& out) {
  if (v.is_null()) return out.clear();
  if (!v.is_array()) return errors_.push_back(Expected(key, "an array of job ids", v));
  out.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer()) {
      errors_.push_back(Expected(fmt::format("{}[{}]", key, i), "a job id (integer)", v[i]));
      continue;
    }
    if (v[i].is_number_unsigned() && v[i].get<uint64_t>() > uint64_t{INT64_MAX}) {
      errors_.push_back(fmt::format("{}[{}]: {} is out of range", key, i, v[i].dump()));
      continue;
    }
    out.push_back(v[i].get<JobId>());
  }
}

// Node names; ValidateSpec judges them.
void SpecReader::Names(const std::string& key, const json& v, std::vector<std::string>& out,
                       std::string_view item) {
  if (v.is_null()) return out.clear();
  if (!v.is_array())
    return errors_.push_back(Expected(key, fmt::format("an array of {}s", item), v));
  out.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      errors_.push_back(
          Expected(fmt::format("{}[{}]", key, i), fmt::format("a {} (string)", item), v[i]));
      continue;
    }
    out.push_back(v[i].get<std::string>());
  }
}

// The container fields (--image, --mount, --shm-size, --container-workdir); ValidateSpec judges
// their values. false for a key that is none of them.
bool SpecReader::ContainerField(const std::string& key, const json& v) {
  ContainerSpec& c = spec_.container;
  if (key == "image") {
    if (v.is_null()) {
      c.image.clear();
    } else {
      String(key, v, c.image);
    }
  } else if (key == "mounts") {
    if (v.is_null()) {
      c.mounts.clear();
    } else {
      Names(key, v, c.mounts, "mount");
    }
  } else if (key == "shm_size") {
    if (v.is_null()) {
      c.shm_bytes = 0;
    } else if (!v.is_string()) {
      errors_.push_back(Expected(key, "a size such as \"16GiB\" or null", v));
    } else {
      Result<uint64_t> bytes = ParseSize(v.get<std::string>(), "--shm-size");
      if (!bytes.ok()) {
        errors_.push_back(bytes.status().message());
      } else {
        c.shm_bytes = *bytes;
      }
    }
  } else if (key == "container_workdir") {
    if (v.is_null()) {
      c.workdir.clear();
    } else {
      String(key, v, c.workdir);
    }
  } else {
    return false;
  }
  return true;
}

// A GPU model or label (--gpu-type); null or "": any GPU.
void SpecReader::GpuType(const json& v) {
  if (v.is_null()) return spec_.gpu_type.clear();
  if (!v.is_string()) return errors_.push_back(Expected("gpu_type", "a string", v));
  std::string type = v.get<std::string>();
  if (!type.empty()) {
    if (Status st = CheckGpuType(type, "gpu_type"); !st.ok()) {
      return errors_.push_back(st.message());
    }
  }
  spec_.gpu_type = std::move(type);
}

// What the client staged (its manifests made already); null: none.
void SpecReader::Transfers(const json& v) {
  spec_.transfers.clear();
  if (v.is_null()) return;
  Result<std::vector<Transfer>> t = ParseTransfers(v.dump(), "transfers");
  if (!t.ok()) return errors_.push_back(t.status().message());
  spec_.transfers = std::move(*t);
}

// Node features (--constraint): an expression, or an array of them that must all hold.
void SpecReader::Constraints(const json& v) {
  spec_.constraints.clear();
  if (v.is_null()) return;
  std::vector<std::pair<std::string, std::string>> exprs;  // (field, expression)
  if (v.is_string()) {
    exprs.emplace_back("constraints", v.get<std::string>());
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) {
        errors_.push_back(Expected(fmt::format("constraints[{}]", i), "a string", v[i]));
        continue;
      }
      exprs.emplace_back(fmt::format("constraints[{}]", i), v[i].get<std::string>());
    }
  } else {
    return errors_.push_back(Expected("constraints", "a string or an array of strings", v));
  }
  for (const auto& [field, expr] : exprs) {
    Result<std::vector<std::string>> clauses = ParseConstraint(expr, field);
    if (!clauses.ok()) {
      errors_.push_back(clauses.status().message());
      continue;
    }
    for (std::string& c : *clauses) {
      if (std::find(spec_.constraints.begin(), spec_.constraints.end(), c) ==
          spec_.constraints.end()) {
        spec_.constraints.push_back(std::move(c));
      }
    }
  }
  if (spec_.constraints.size() > kMaxConstraints) {
    errors_.push_back(
        fmt::format("constraints: more than {} features; ask for fewer", kMaxConstraints));
  }
}

void SpecReader::Bool(const std::string& key, const json& v, bool& out) {
  if (!v.is_boolean()) return errors_.push_back(Expected(key, "true or false", v));
  out = v.get<bool>();
}

// How the job is warned and stopped (src/core/stop_spec.h); false for a key that is none.
bool SpecReader::StopField(const std::string& key, const json& v) {
  StopSpec& stop = spec_.stop;
  if (key == "signal") {
    if (v.is_null()) {
      stop.signal = 0;
      stop.lead_ms = 0;
      stop.batch_only = false;
    } else if (!v.is_string()) {
      errors_.push_back(Expected(key, "a string such as \"B:USR1@90\" or null", v));
    } else {
      Result<SignalOption> sig = ParseSignalOption(v.get<std::string>(), "--signal");
      if (!sig.ok()) {
        errors_.push_back(sig.status().message());
      } else {
        stop.signal = sig->signal;
        stop.lead_ms = sig->lead_ms;
        stop.batch_only = sig->batch_only;
      }
    }
  } else if (key == "requeue") {
    Bool(key, v, stop.requeue);
  } else if (key == "preemptible") {
    bool yes = false;
    if (v.is_null()) {
      stop.preemptible.reset();
    } else if (Bool(key, v, yes); v.is_boolean()) {
      stop.preemptible = yes;
    }
  } else if (key == "checkpoint") {
    if (v.is_null()) {
      stop.checkpoint.clear();
    } else {
      String(key, v, stop.checkpoint);
    }
  } else {
    return false;
  }
  return true;
}

// The fields of the researcher's workflow (groups, arrays, run records, notifications,
// sbatch); false for a key that is none of them.
bool SpecReader::WorkflowField(const std::string& key, const json& v) {
  if (key == "group") {
    Group(v);
  } else if (key == "group_limit") {
    Int(key, v, spec_.group_limit);
  } else if (key == "array_index") {
    if (v.is_null())
      spec_.array_index = -1;
    else
      Int(key, v, spec_.array_index);
  } else if (key == "record") {
    Record(v);
  } else if (key == "notify") {
    if (v.is_null())
      spec_.notify_url.clear();
    else
      String(key, v, spec_.notify_url);
  } else if (key == "mail") {
    if (v.is_null())
      spec_.mail.clear();
    else
      String(key, v, spec_.mail);
  } else if (key == "gate") {
    if (!v.is_boolean())
      errors_.push_back(Expected(key, "true or false", v));
    else
      spec_.gate_pid = v.get<bool>() ? kGateCaller : 0;
  } else if (key == "slurm") {
    if (!v.is_boolean())
      errors_.push_back(Expected(key, "true or false", v));
    else
      spec_.slurm_env = v.get<bool>();
  } else {
    return false;
  }
  return true;
}

// true: a new group of the jobs this request stores; an id: that group; null or false: none.
void SpecReader::Group(const json& v) {
  if (v.is_null() || (v.is_boolean() && !v.get<bool>())) {
    spec_.group = 0;
  } else if (v.is_boolean()) {
    spec_.group = kNewGroup;
  } else if (v.is_number_integer() && v.get<int64_t>() > 0) {
    spec_.group = v.get<JobId>();
  } else {
    errors_.push_back(Expected("group", "true (a new group) or a group's id", v));
  }
}

void SpecReader::Record(const json& v) {
  if (v.is_null()) return spec_.record.clear();
  if (!v.is_object()) return errors_.push_back(Expected("record", "an object", v));
  spec_.record = v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A size as --mem-limit takes it (ParseSize), or null for the daemon's default.
void SpecReader::MemLimit(const json& v) {
  if (v.is_null()) {
    spec_.mem_limit_bytes = 0;
    return;
  }
  if (!v.is_string()) {
    return errors_.push_back(Expected("mem_limit", "a size such as \"4GiB\" or null", v));
  }
  Result<uint64_t> bytes = ParseSize(v.get<std::string>(), "--mem-limit");
  if (!bytes.ok()) return errors_.push_back(bytes.status().message());
  spec_.mem_limit_bytes = *bytes;
}

// A task count, or null for the daemon's default; ValidateSpec judges the range.
void SpecReader::MaxProcs(const json& v) {
  if (v.is_null()) {
    spec_.max_procs = 0;
    return;
  }
  int n = 0;
  size_t before = errors_.size();
  Int("max_procs", v, n);
  if (errors_.size() != before) return;
  // 0 would read as "not given": the daemon's default, not what was asked.
  if (n < 1) {
    return errors_.push_back(
        fmt::format("--max-procs: {} is not between 1 and {}", n, kMaxProcsLimit));
  }
  spec_.max_procs = n;
}

// A duration text as --time takes it (ParseTimeLimit), or null for no limit.
void SpecReader::Time(const json& v) {
  if (v.is_null()) {
    spec_.time_limit_ms = 0;
    return;
  }
  if (!v.is_string()) {
    return errors_.push_back(Expected("time", "a string such as \"2h30m\" or null", v));
  }
  Result<int64_t> ms = ParseTimeLimit(v.get<std::string>());
  if (!ms.ok()) return errors_.push_back(ms.status().message());
  spec_.time_limit_ms = *ms;
}

Status SpecReader::Finish(bool has_command) {
  // A GPU job holds host CPU slots only when it asks: its GPUs bound how many run, and a
  // slot per job left GPUs idle on machines with few cores (docs/config.md, cpu_slots).
  if (!cpus_given_ && spec_.gpus > 0) spec_.cpus = 0;
  if (!has_command) {
    errors_.insert(errors_.begin(), "command: required; give the command as an array of strings");
  }
  if (errors_.empty()) return Status::Ok();
  return Status::Invalid(fmt::format("{}", fmt::join(errors_, "; ")));
}

std::string MemText(const JobSpec& spec) {
  if (spec.mem_bytes) return fmt::format("{}B", *spec.mem_bytes);
  return fmt::format("{}%", *spec.mem_percent);
}

}  // namespace

namespace {

// Where an attempt ran: its node, or a gang's nodes in rank order.
json AttemptNodes(const Attempt& a) {
  json nodes = json::array();
  if (a.parts.empty()) {
    if (!a.node.empty()) nodes.push_back(a.node);
    return nodes;
  }
  for (const AttemptPart& p : a.parts) nodes.push_back(p.node);
  return nodes;
}

// As the stores keep them (one writer of the fields).
json TransfersJson(const std::vector<Transfer>& transfers) {
  if (transfers.empty()) return json::array();
  return json::parse(TransfersToText(transfers), nullptr, false);
}

// A stored record as JSON; null when none (or, never expected, not an object).
json RecordJson(const std::string& text) {
  if (text.empty()) return nullptr;
  json record = json::parse(text, nullptr, false);
  return record.is_object() ? record : json(nullptr);
}

}  // namespace

json AttemptUsageJson(const AttemptUsage& u) {
  return {{"gpu_seconds_held", static_cast<double>(u.held_gpu_ms) / 1000.0},
          {"gpu_seconds_used", static_cast<double>(u.busy_gpu_ms) / 1000.0},
          {"utilization_mean", u.util_known_ms
                                   ? json(static_cast<double>(u.busy_gpu_ms) / u.util_known_ms)
                                   : json(nullptr)},
          {"memory_mean_bytes",
           u.held_gpu_ms >= 1000 ? json(u.mem_byte_s / (u.held_gpu_ms / 1000)) : json(nullptr)}};
}

json AttemptToJson(const Attempt& a) {
  json parts = json::array();
  for (const AttemptPart& p : a.parts) {
    parts.push_back({{"node", p.node},
                     {"gpu_indices", p.gpu_indices},
                     {"log_path", p.log_path},
                     {"added_at", TimeOrNull(p.added_at)}});
  }
  return json{{"parts", std::move(parts)},
              {"n", a.n},
              {"state", std::string(StateName(a.state))},
              {"node", a.node},
              {"gpu_indices", a.gpu_indices},
              {"gpu_uuids", a.gpu_uuids},
              {"reserved_bytes", a.reserved_bytes},
              {"cpus", a.cpus},
              {"started_at", TimeOrNull(a.started_at)},
              {"ended_at", a.ended_at ? json(FormatTime(*a.ended_at)) : json(nullptr)},
              {"exit_code", OrNull(a.exit_code)},
              {"signal", OrNull(a.signal)},
              {"oom", a.oom},
              {"peak_mem_bytes", a.peak_mem_bytes},
              {"log_path", a.log_path},
              {"run_dir", a.run_dir},
              {"pid", a.pid},
              {"end_reason", a.end_reason},
              {"master_port", a.master_port > 0 ? json(a.master_port) : json(nullptr)},
              {"nodes", AttemptNodes(a)},
              {"usage", AttemptUsageJson(a.usage)}};
}

json JobToJson(const Job& job) {
  const JobSpec& s = job.spec;
  json attempts = json::array();
  for (const Attempt& a : job.attempts) attempts.push_back(AttemptToJson(a));
  return json{
      {"id", job.id},
      {"name", s.name},
      {"state", std::string(StateName(job.state))},
      {"command", s.command},
      {"cwd", s.cwd},
      {"gpus", s.gpus},
      {"max_gpus", s.max_gpus},
      {"mem_bytes", OrNull(s.mem_bytes)},
      {"mem_percent", OrNull(s.mem_percent)},
      {"exclusive", s.exclusive()},
      {"cpus", s.cpus},
      {"priority", s.priority},
      {"retries", s.retries},
      {"submitted_held", s.hold},
      {"user", s.user},
      {"submitted_at", FormatTime(job.submitted_at)},
      {"reason", job.reason},
      {"attempt", job.attempt},
      {"not_before", job.not_before >= kHeldNotBefore ? json(nullptr) : TimeOrNull(job.not_before)},
      {"held", job.not_before >= kHeldNotBefore},
      {"after", s.after},
      {"after_any", s.after_any},
      {"time_limit_ms", s.time_limit_ms > 0 ? json(s.time_limit_ms) : json(nullptr)},
      {"mem_limit_bytes", s.mem_limit_bytes > 0 ? json(s.mem_limit_bytes) : json(nullptr)},
      {"max_procs", s.max_procs > 0 ? json(s.max_procs) : json(nullptr)},
      {"nodes", s.nodes_allowed},
      {"exclude_nodes", s.nodes_excluded},
      {"num_nodes", s.num_nodes},
      {"max_nodes", s.max_nodes},
      {"gpu_type", s.gpu_type.empty() ? json(nullptr) : json(s.gpu_type)},
      {"constraints", s.constraints},
      {"transfers", TransfersJson(s.transfers)},
      {"collect", s.collect},
      {"collect_to", s.collect_to.empty() ? json(nullptr) : json(s.collect_to)},
      {"image", s.container.on() ? json(s.container.image) : json(nullptr)},
      {"mounts", s.container.mounts},
      {"shm_size_bytes", s.container.shm_bytes > 0 ? json(s.container.shm_bytes) : json(nullptr)},
      {"container_workdir",
       s.container.workdir.empty() ? json(nullptr) : json(s.container.workdir)},
      {"group", s.group > 0 ? json(s.group) : json(nullptr)},
      {"group_limit", s.group_limit > 0 ? json(s.group_limit) : json(nullptr)},
      {"array_index", s.array_index >= 0 ? json(s.array_index) : json(nullptr)},
      {"record", RecordJson(s.record)},
      {"notify", s.notify_url.empty() ? json(nullptr) : json(s.notify_url)},
      {"mail", s.mail.empty() ? json(nullptr) : json(s.mail)},
      {"slurm", s.slurm_env},
      {"interactive", s.interactive},
      {"no_log", s.no_log},
      {"gate_pid", s.gate_pid > 0 ? json(s.gate_pid) : json(nullptr)},
      {"signal", s.stop.signal > 0 ? json(FormatSignalOption(s.stop)) : json(nullptr)},
      {"requeue", s.stop.requeue},
      {"preemptible", s.stop.preemptible ? json(*s.stop.preemptible) : json(nullptr)},
      {"checkpoint", s.stop.checkpoint.empty() ? json(nullptr) : json(s.stop.checkpoint)},
      {"attempts", std::move(attempts)}};
}

void HideFromOthers(json& job) {
  constexpr const char* kHidden = "(hidden)";
  for (const JobFieldInfo& f : JobFieldInfos()) {
    if (f.readers != Readers::kOwner) continue;
    std::string_view keys = f.shown;
    while (!keys.empty()) {
      size_t space = keys.find(' ');
      std::string key(keys.substr(0, space));
      keys = space == std::string_view::npos ? std::string_view() : keys.substr(space + 1);
      if (job.contains(key) && !job[key].is_null()) job[key] = kHidden;
    }
  }
  // The fields others see in part (Readers::kOwnerParts): a `trainq sbatch` job's script
  // text, which its command carries as the wrapper's $1 and which sets secrets as often as
  // --env does (the script's path and arguments stay), and the values of the record's --env
  // overrides (the names stay, as `diff` compares them).
  json& record = job["record"];
  json& command = job["command"];
  if (record.is_object() && record.contains("sbatch") && command.is_array() && command.size() > 4) {
    command[4] = kHidden;
  }
  if (record.is_object() && record.contains("env_overrides") &&
      record["env_overrides"].is_array()) {
    for (json& item : record["env_overrides"]) {
      std::string text = item.is_string() ? item.get<std::string>() : "";
      item = text.substr(0, text.find('=')) + "=" + kHidden;
    }
  }
}

Result<JobSpec> SpecFromJson(const json& request) {
  if (!request.is_object()) {
    return Status::Invalid(Expected("request", "an object", request));
  }
  JobSpec spec;
  SpecReader reader(spec);
  for (const auto& [key, value] : request.items()) reader.Field(key, value);
  TRAINQ_RETURN_IF_ERROR(reader.Finish(request.contains("command")));
  return spec;
}

Result<EnvVars> EnvFromJson(const json& env) {
  JobSpec spec;
  SpecReader reader(spec);
  reader.Field("env", env);
  TRAINQ_RETURN_IF_ERROR(reader.Finish(/*has_command=*/true));  // only the env is asked for
  return std::move(spec.env);
}

json SpecToJson(const JobSpec& spec) {
  json env = json::object();
  for (const auto& [name, value] : spec.env) env[name] = value;
  bool has_mem = spec.mem_bytes || spec.mem_percent;
  json out{{"command", spec.command},
           {"cwd", spec.cwd},
           {"env", std::move(env)},
           {"name", spec.name},
           {"gpus", spec.gpus},
           {"mem", has_mem ? json(MemText(spec)) : json(nullptr)},
           {"cpus", spec.cpus},
           {"priority", spec.priority},
           {"retries", spec.retries},
           {"after", spec.after},
           {"after_any", spec.after_any},
           {"time", spec.time_limit_ms > 0 ? json(fmt::format("{}ms", spec.time_limit_ms))
                                           : json(nullptr)}};
  // Left out at their defaults, so a reader that predates them reads every single-node spec.
  if (!spec.nodes_allowed.empty()) out["nodes"] = spec.nodes_allowed;
  if (!spec.nodes_excluded.empty()) out["exclude_nodes"] = spec.nodes_excluded;
  if (spec.num_nodes != 1) out["num_nodes"] = spec.num_nodes;
  if (spec.max_nodes != 0) out["max_nodes"] = spec.max_nodes;
  if (!spec.gpu_type.empty()) out["gpu_type"] = spec.gpu_type;
  if (!spec.constraints.empty()) out["constraints"] = spec.constraints;
  if (!spec.transfers.empty()) out["transfers"] = TransfersJson(spec.transfers);
  if (!spec.collect.empty()) out["collect"] = spec.collect;
  if (!spec.collect_to.empty()) out["collect_to"] = spec.collect_to;
  if (spec.container.on()) out["image"] = spec.container.image;
  if (!spec.container.mounts.empty()) out["mounts"] = spec.container.mounts;
  if (spec.container.shm_bytes > 0) out["shm_size"] = fmt::format("{}B", spec.container.shm_bytes);
  if (!spec.container.workdir.empty()) out["container_workdir"] = spec.container.workdir;
  if (spec.mem_limit_bytes > 0) out["mem_limit"] = fmt::format("{}B", spec.mem_limit_bytes);
  if (spec.max_procs != 0) out["max_procs"] = spec.max_procs;
  if (spec.group > 0) out["group"] = spec.group;
  if (spec.group == kNewGroup) out["group"] = true;
  if (spec.group_limit != 0) out["group_limit"] = spec.group_limit;
  if (spec.array_index != -1) out["array_index"] = spec.array_index;
  if (!spec.record.empty()) out["record"] = RecordJson(spec.record);
  if (!spec.notify_url.empty()) out["notify"] = spec.notify_url;
  if (!spec.mail.empty()) out["mail"] = spec.mail;
  if (spec.slurm_env) out["slurm"] = true;
  if (spec.gate_pid != 0) out["gate"] = true;
  if (spec.stop.signal > 0) out["signal"] = FormatSignalOption(spec.stop);
  if (spec.stop.requeue) out["requeue"] = true;
  if (spec.stop.preemptible) out["preemptible"] = *spec.stop.preemptible;
  if (spec.hold) out["hold"] = true;
  if (spec.interactive) out["interactive"] = true;
  if (spec.no_log) out["no_log"] = true;
  if (spec.max_gpus != 0) out["max_gpus"] = spec.max_gpus;
  if (!spec.stop.checkpoint.empty()) out["checkpoint"] = spec.stop.checkpoint;
  return out;
}

std::string DumpJson(const json& value, int indent) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace trainq
