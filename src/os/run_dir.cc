// Run-dir records as JSON. Readers never trust the bytes: a record cut short by a crash or
// edited by hand is kInvalid, never a crash.
#include "src/os/run_dir.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <utility>

namespace trainq {
namespace {

using nlohmann::json;

// (uid_t)-1 means "unchanged" to setuid and chown: never a user's id.
constexpr int64_t kMaxId = 0xfffffffe;

Result<json> ParseRecord(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Invalid(path + ": not a JSON object");
  return j;
}

// strict: refuse strings that are not UTF-8 (a spec must round-trip exactly); otherwise
// replace bad bytes (an exit record must be written whatever its message holds).
Result<std::string> Dump(const json& j, bool strict) {
  try {
    return j.dump(1, ' ', false,
                  strict ? json::error_handler_t::strict : json::error_handler_t::replace) +
           "\n";
  } catch (const json::exception& e) {
    return Status::Invalid(std::string("not valid UTF-8: ") + e.what());
  }
}

Status WriteRecord(const std::string& path, const json& j, bool strict) {
  auto text = Dump(j, strict);
  if (!text.ok()) return text.status();
  return WriteFileAtomic(path, *text, Durability::kNoSync);
}

// Field readers: absent keeps the default; present with the wrong type is an error.
class Fields {
 public:
  Fields(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  template <class T>
  void Int(const char* key, T& out) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return;
    if (!it->is_number_integer()) return Bad(key, "an integer");
    if constexpr (std::is_unsigned_v<T>) {
      if (it->is_number_unsigned()) return Assign(key, it->template get<uint64_t>(), out);
      return Bad(key, "a non-negative integer");
    } else {
      Assign(key, it->template get<int64_t>(), out);
    }
  }
  template <class T>
  void OptInt(const char* key, std::optional<T>& out) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return;
    T v{};
    Int(key, v);
    out = v;
  }
  void Bool(const char* key, bool& out);
  void String(const char* key, std::string& out);
  void Strings(const char* key, std::vector<std::string>& out);
  void Env(const char* key, std::vector<std::pair<std::string, std::string>>& out);
  void Require(const char* key) {
    if (!j_.contains(key)) errors_ += std::string(errors_.empty() ? "" : "; ") + key + ": missing";
  }
  Status status() const {
    return errors_.empty() ? Status::Ok() : Status::Invalid(path_ + ": " + errors_);
  }

 private:
  template <class V, class T>
  void Assign(const char* key, V v, T& out) {
    if (!std::in_range<T>(v)) return Bad(key, "in range");
    out = static_cast<T>(v);
  }
  void Bad(const char* key, const char* want) {
    errors_ += std::string(errors_.empty() ? "" : "; ") + key + ": must be " + want;
  }
  bool GoodString(const json& v) const {
    return v.is_string() && v.get_ref<const std::string&>().find('\0') == std::string::npos;
  }
  bool EnvPair(const std::string& k, const json& v,
               std::vector<std::pair<std::string, std::string>>& out);

  const json& j_;
  std::string path_;
  std::string errors_;
};

void Fields::Bool(const char* key, bool& out) {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return;
  if (!it->is_boolean()) return Bad(key, "true or false");
  out = it->get<bool>();
}

void Fields::String(const char* key, std::string& out) {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return;
  if (!GoodString(*it)) return Bad(key, "a string without NUL");
  out = it->get<std::string>();
}

void Fields::Strings(const char* key, std::vector<std::string>& out) {
  auto it = j_.find(key);
  if (it == j_.end()) return;
  bool ok = it->is_array() &&
            std::all_of(it->begin(), it->end(), [this](const json& v) { return GoodString(v); });
  if (!ok) return Bad(key, "an array of strings without NUL");
  out = it->get<std::vector<std::string>>();
}

bool Fields::EnvPair(const std::string& k, const json& v,
                     std::vector<std::pair<std::string, std::string>>& out) {
  if (k.empty() || k.find_first_of(std::string("=\0", 2)) != std::string::npos) return false;
  if (!GoodString(v)) return false;
  out.emplace_back(k, v.get<std::string>());
  return true;
}

// {"K": "V", ...} or [["K", "V"], ...] (order kept, as environ has it).
void Fields::Env(const char* key, std::vector<std::pair<std::string, std::string>>& out) {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return;
  std::vector<std::pair<std::string, std::string>> env;
  bool ok = it->is_object() || it->is_array();
  if (it->is_object()) {
    for (auto& [k, v] : it->items()) ok = ok && EnvPair(k, v, env);
  } else if (ok) {
    for (const json& p : *it) {
      ok = ok && p.is_array() && p.size() == 2 && p[0].is_string() &&
           EnvPair(p[0].get<std::string>(), p[1], env);
    }
  }
  if (!ok) return Bad(key, "an object or [name, value] pairs, names without '='");
  out = std::move(env);
}

// The cgroup fields name directories a root shim writes to: one plain component under an
// absolute root, and a known version.
Status ReadCgroupSpec(Fields& f, const std::string& run_dir, CgroupSpec& out) {
  std::string version;
  f.String("cgroup_version", version);
  f.String("cgroup_root", out.root);
  f.String("cgroup_name", out.name);
  f.Int("mem_limit_bytes", out.limits.mem_bytes);
  f.Int("max_tasks", out.limits.max_tasks);
  out.version = ParseCgroupVersion(version);
  if (version.empty()) return Status::Ok();
  bool plain = !out.name.empty() && out.name != "." && out.name != ".." &&
               out.name.find('/') == std::string::npos;
  if (out.version == CgroupVersion::kNone || !out.root.starts_with('/') || !plain ||
      out.limits.max_tasks < 0) {
    return Status::Invalid(SpecPath(run_dir) +
                           ": cgroup_version, cgroup_root, cgroup_name, max_tasks: v1 or v2, an "
                           "absolute path, one path component, not negative");
  }
  return Status::Ok();
}

}  // namespace

std::string SpecPath(const std::string& run_dir) { return run_dir + "/spec.json"; }
std::string LockPath(const std::string& run_dir) { return run_dir + "/lock"; }
std::string ShimPath(const std::string& run_dir) { return run_dir + "/shim.json"; }
std::string ExitPath(const std::string& run_dir) { return run_dir + "/exit.json"; }
std::string LogPath(const std::string& run_dir) { return run_dir + "/output.log"; }
std::string ControlPath(const std::string& run_dir) { return run_dir + "/control.json"; }

Status WriteRunSpec(const std::string& run_dir, const RunSpec& spec) {
  json env = json::array();
  for (const auto& [k, v] : spec.env) env.push_back({k, v});
  json j = {{"command", spec.command},
            {"cwd", spec.cwd},
            {"env", env},
            {"log_path", spec.log_path},
            {"log_max_bytes", spec.log_max_bytes},
            {"grace_ms", spec.grace_ms},
            {"time_limit_ms", spec.time_limit_ms}};
  if (spec.umask >= 0) j["umask"] = spec.umask;
  if (spec.warn_signal > 0) {
    j["warn_signal"] = spec.warn_signal;
    j["warn_lead_ms"] = spec.warn_lead_ms;
    j["warn_batch_only"] = spec.warn_batch_only;
  }
  if (!spec.checkpoint.empty()) j["checkpoint"] = spec.checkpoint;
  if (!spec.batch_script.empty()) j["batch_script"] = spec.batch_script;
  if (!spec.cleanup.empty()) j["cleanup"] = spec.cleanup;
  if (!spec.prepare.empty()) j["prepare"] = spec.prepare;
  if (!spec.notices.empty()) j["notices"] = spec.notices;
  if (!spec.links.empty()) {
    json links = json::array();
    for (const auto& [path, target] : spec.links) links.push_back({path, target});
    j["links"] = std::move(links);
  }
  if (!spec.gpu_probe.empty()) {
    j["gpu_probe"] = spec.gpu_probe;
    j["gpu_probe_expect"] = spec.gpu_probe_expect;
    j["gpu_check_file"] = spec.gpu_check_file;
    j["gpu_check_key"] = spec.gpu_check_key;
  }
  if (!spec.session_socket.empty()) {
    j["session_socket"] = spec.session_socket;
    j["session_wait_ms"] = spec.session_wait_ms;
    j["session_no_log"] = spec.session_no_log;
    j["session_idle_ms"] = spec.session_idle_ms;
    j["session_activity_file"] = spec.session_activity_file;
    if (!spec.session_tty_flag.empty()) {
      j["session_tty_flag"] = spec.session_tty_flag;
      j["session_tty_flag_at"] = spec.session_tty_flag_at;
    }
  }
  if (!spec.fence_file.empty()) {
    j["fence_file"] = spec.fence_file;
    j["fence_after_ms"] = spec.fence_after_ms;
  }
  if (spec.uid >= 0) {
    j["uid"] = spec.uid;
    j["gid"] = spec.gid;
    j["user"] = spec.user;
    j["home"] = spec.home;
  }
  if (spec.cgroup.on()) {
    j["cgroup_version"] = CgroupVersionName(spec.cgroup.version);
    j["cgroup_root"] = spec.cgroup.root;
    j["cgroup_name"] = spec.cgroup.name;
    j["mem_limit_bytes"] = spec.cgroup.limits.mem_bytes;
    j["max_tasks"] = spec.cgroup.limits.max_tasks;
  }
  return WriteRecord(SpecPath(run_dir), j, /*strict=*/true);
}

Result<RunSpec> ReadRunSpec(const std::string& run_dir) {
  auto j = ParseRecord(SpecPath(run_dir));
  if (!j.ok()) return j.status();
  RunSpec spec;
  Fields f(*j, SpecPath(run_dir));
  f.Require("command");
  f.Strings("command", spec.command);
  f.String("cwd", spec.cwd);
  f.Env("env", spec.env);
  f.String("log_path", spec.log_path);
  f.Int("log_max_bytes", spec.log_max_bytes);
  f.Int("grace_ms", spec.grace_ms);
  f.Int("time_limit_ms", spec.time_limit_ms);
  f.Int("umask", spec.umask);
  f.Int("warn_signal", spec.warn_signal);
  f.Int("warn_lead_ms", spec.warn_lead_ms);
  f.Bool("warn_batch_only", spec.warn_batch_only);
  f.String("checkpoint", spec.checkpoint);
  f.String("batch_script", spec.batch_script);
  f.Strings("cleanup", spec.cleanup);
  f.Strings("prepare", spec.prepare);
  f.Strings("notices", spec.notices);
  f.Env("links", spec.links);
  f.Strings("gpu_probe", spec.gpu_probe);
  f.Strings("gpu_probe_expect", spec.gpu_probe_expect);
  f.String("gpu_check_file", spec.gpu_check_file);
  f.String("gpu_check_key", spec.gpu_check_key);
  f.String("fence_file", spec.fence_file);
  f.Int("fence_after_ms", spec.fence_after_ms);
  f.String("session_socket", spec.session_socket);
  f.Int("session_wait_ms", spec.session_wait_ms);
  f.Bool("session_no_log", spec.session_no_log);
  f.Int("session_idle_ms", spec.session_idle_ms);
  f.String("session_activity_file", spec.session_activity_file);
  f.String("session_tty_flag", spec.session_tty_flag);
  f.Int("session_tty_flag_at", spec.session_tty_flag_at);
  f.Int("uid", spec.uid);
  f.Int("gid", spec.gid);
  f.String("user", spec.user);
  f.String("home", spec.home);
  TRAINQ_RETURN_IF_ERROR(ReadCgroupSpec(f, run_dir, spec.cgroup));
  if (spec.uid < -1 || spec.uid > kMaxId ||
      (spec.uid >= 0 && (spec.gid < 0 || spec.gid > kMaxId))) {
    return Status::Invalid(SpecPath(run_dir) + ": uid, gid: not a user and group id");
  }
  if (spec.umask < -1 || spec.umask > 0777) {
    return Status::Invalid(SpecPath(run_dir) + ": umask: not within 0..0777 (0..511)");
  }
  if (spec.grace_ms < 0) return Status::Invalid(SpecPath(run_dir) + ": grace_ms: negative");
  if (spec.warn_signal < 0 || spec.warn_signal > 64 || spec.warn_lead_ms < 0) {
    return Status::Invalid(SpecPath(run_dir) +
                           ": warn_signal, warn_lead_ms: a signal number and a time, not negative");
  }
  if (spec.time_limit_ms < 0) {
    return Status::Invalid(SpecPath(run_dir) + ": time_limit_ms: negative");
  }
  if (!spec.fence_file.empty() && (!spec.fence_file.starts_with('/') || spec.fence_after_ms <= 0)) {
    return Status::Invalid(SpecPath(run_dir) +
                           ": fence_file, fence_after_ms: an absolute path and a positive time");
  }
  TRAINQ_RETURN_IF_ERROR(f.status());
  return spec;
}

Status WriteShimRecord(const std::string& run_dir, const ShimRecord& rec) {
  json j = {{"pid", rec.pid}, {"start_ticks", rec.start_ticks}};
  return WriteRecord(ShimPath(run_dir), j, /*strict=*/true);
}

Result<ShimRecord> ReadShimRecord(const std::string& run_dir) {
  auto j = ParseRecord(ShimPath(run_dir));
  if (!j.ok()) return j.status();
  ShimRecord rec;
  Fields f(*j, ShimPath(run_dir));
  f.Require("pid");
  f.Require("start_ticks");
  f.Int("pid", rec.pid);
  f.Int("start_ticks", rec.start_ticks);
  TRAINQ_RETURN_IF_ERROR(f.status());
  return rec;
}

Status WriteExitRecord(const std::string& run_dir, const ExitRecord& rec) {
  json j = {{"cancelled", rec.cancelled},       {"time_limit", rec.time_limit},
            {"spawn_failed", rec.spawn_failed}, {"error", rec.error},
            {"started_at", rec.started_at},     {"ended_at", rec.ended_at}};
  if (rec.fenced) j["fenced"] = true;
  if (rec.mem_limit_hit > 0) j["mem_limit_hit"] = rec.mem_limit_hit;
  if (!rec.stop.empty()) {
    j["stop"] = rec.stop;
    j["stop_reason"] = rec.stop_reason;
  }
  if (!rec.hangup.empty()) j["hangup"] = rec.hangup;
  if (rec.warned_at > 0) j["warned_at"] = rec.warned_at;
  if (!rec.checkpoint.empty()) j["checkpoint"] = rec.checkpoint;
  if (rec.exit_code) j["exit_code"] = *rec.exit_code;
  if (rec.signal) j["signal"] = *rec.signal;
  return WriteRecord(ExitPath(run_dir), j, /*strict=*/false);
}

Result<ExitRecord> ReadExitRecord(const std::string& run_dir) {
  auto j = ParseRecord(ExitPath(run_dir));
  if (!j.ok()) return j.status();
  ExitRecord rec;
  Fields f(*j, ExitPath(run_dir));
  f.Require("ended_at");
  f.OptInt("exit_code", rec.exit_code);
  f.OptInt("signal", rec.signal);
  f.Bool("cancelled", rec.cancelled);
  f.Bool("time_limit", rec.time_limit);
  f.Bool("fenced", rec.fenced);
  f.Bool("spawn_failed", rec.spawn_failed);
  f.Int("mem_limit_hit", rec.mem_limit_hit);
  f.String("stop", rec.stop);
  f.String("stop_reason", rec.stop_reason);
  f.String("hangup", rec.hangup);
  f.Int("warned_at", rec.warned_at);
  f.String("checkpoint", rec.checkpoint);
  f.String("error", rec.error);
  f.Int("started_at", rec.started_at);
  f.Int("ended_at", rec.ended_at);
  TRAINQ_RETURN_IF_ERROR(f.status());
  return rec;
}

Status WriteShimControl(const std::string& run_dir, const ShimControl& c) {
  json j = {{"seq", c.seq},       {"stop", c.stop},
            {"reason", c.reason}, {"stop_in_ms", c.stop_in_ms},
            {"signal", c.signal}, {"batch_only", c.batch_only}};
  return WriteRecord(ControlPath(run_dir), j, /*strict=*/false);
}

Result<ShimControl> ReadShimControl(const std::string& run_dir) {
  auto j = ParseRecord(ControlPath(run_dir));
  if (!j.ok()) return j.status();
  ShimControl c;
  Fields f(*j, ControlPath(run_dir));
  f.Require("seq");
  f.Int("seq", c.seq);
  f.String("stop", c.stop);
  f.String("reason", c.reason);
  f.Int("stop_in_ms", c.stop_in_ms);
  f.Int("signal", c.signal);
  f.Bool("batch_only", c.batch_only);
  TRAINQ_RETURN_IF_ERROR(f.status());
  if ((c.stop != "" && c.stop != "preempted" && c.stop != "requeued" && c.stop != "resized") ||
      c.signal < 0 || c.signal > 64 || c.stop_in_ms < 0) {
    return Status::Invalid(ControlPath(run_dir) +
                           ": stop, signal, stop_in_ms: preempted, requeued or \"\"; a signal "
                           "number; a time, not negative");
  }
  return c;
}

Status WriteGpuCheck(const std::string& path, const GpuCheck& check) {
  json j = {{"key", check.key}, {"ok", check.ok}, {"problem", check.problem}};
  return WriteRecord(path, j, /*strict=*/false);
}

Result<GpuCheck> ReadGpuCheck(const std::string& path) {
  auto j = ParseRecord(path);
  if (!j.ok()) return j.status();
  GpuCheck check;
  Fields f(*j, path);
  f.String("key", check.key);
  f.Bool("ok", check.ok);
  f.String("problem", check.problem);
  TRAINQ_RETURN_IF_ERROR(f.status());
  return check;
}

}  // namespace trainq
