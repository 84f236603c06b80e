#include "src/store/redis/records.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "src/core/container.h"
#include "src/core/stop_spec.h"
#include "src/core/transfers.h"

namespace trainq::redis {

namespace {

using HashMap = std::map<std::string_view, std::string_view>;

HashMap ToMap(const redisReply* hash) {
  HashMap m;
  if (hash == nullptr || hash->type != REDIS_REPLY_ARRAY) return m;
  for (size_t i = 0; i + 1 < hash->elements; i += 2) {
    m[Text(hash->element[i])] = Text(hash->element[i + 1]);
  }
  return m;
}

Status Corrupt(std::string_view what, std::string_view field, std::string_view value) {
  return Status::Internal(
      fmt::format("the Redis store holds a bad {} {}: '{}'", what, field, value.substr(0, 64)));
}

// Reads the fields of one record; the first bad one is kept as the error.
class Reader {
 public:
  Reader(const redisReply* hash, std::string_view what) : m_(ToMap(hash)), what_(what) {}

  bool Has(std::string_view f) const { return m_.contains(f); }
  std::string Str(std::string_view f) const {
    auto it = m_.find(f);
    return it == m_.end() ? std::string() : std::string(it->second);
  }
  template <class T>
  T Num(std::string_view f) {
    auto it = m_.find(f);
    T v{};
    if (it == m_.end() || it->second.empty()) return v;
    const char* end = it->second.data() + it->second.size();
    auto [ptr, ec] = std::from_chars(it->second.data(), end, v);
    if (ec != std::errc() || ptr != end) Fail(f);
    return v;
  }
  double Double(std::string_view f) {
    std::string s = Str(f);
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') Fail(f);
    return v;
  }
  JobState State(std::string_view f) {
    std::optional<JobState> s = ParseState(Str(f));
    if (!s) Fail(f);
    return s.value_or(JobState::kFailed);
  }
  std::vector<std::string> Strings(std::string_view f) {
    Result<std::vector<std::string>> v = DecodeStrings(Str(f), f);
    if (!v.ok()) Fail(f);
    return v.ok() ? std::move(v).value() : std::vector<std::string>{};
  }
  template <class T>
  std::vector<T> Nums(std::string_view f) {
    std::vector<T> out;
    std::string_view text = m_.contains(f) ? m_.at(f) : std::string_view();
    while (!text.empty()) {
      size_t comma = text.find(',');
      std::string_view item = text.substr(0, comma);
      T v{};
      auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
      if (ec != std::errc() || ptr != item.data() + item.size()) Fail(f);
      out.push_back(v);
      text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    }
    return out;
  }
  Status status() const { return status_; }
  bool empty() const { return m_.empty(); }

 private:
  void Fail(std::string_view f) {
    if (status_.ok()) status_ = Corrupt(what_, f, Str(f));
  }
  HashMap m_;
  std::string_view what_;
  Status status_;
};

template <class T>
std::string Joined(const std::vector<T>& values) {
  return fmt::format("{}", fmt::join(values, ","));
}

}  // namespace

std::string EncodeStrings(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    out += std::to_string(v.size());
    out += ':';
    out += v;
  }
  return out;
}

Result<std::vector<std::string>> DecodeStrings(std::string_view text, std::string_view field) {
  std::vector<std::string> out;
  while (!text.empty()) {
    size_t colon = text.find(':');
    size_t len = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + std::min(colon, text.size()), len);
    if (colon == std::string_view::npos || ec != std::errc() || ptr != text.data() + colon ||
        len > text.size() - colon - 1) {
      return Status::Internal(fmt::format("the Redis store holds a bad {} list", field));
    }
    out.emplace_back(text.substr(colon + 1, len));
    text.remove_prefix(colon + 1 + len);
  }
  return out;
}

Fields NewJobFields(const JobSpec& spec, UnixMs now, JobState state, const std::string& reason) {
  std::vector<std::string> env;
  for (const auto& [name, value] : spec.env) {
    env.push_back(name);
    env.push_back(value);
  }
  Fields f = {{"state", std::string(StateName(state))},
              {"name", spec.name},
              {"command", EncodeStrings(spec.command)},
              {"cwd", spec.cwd},
              {"env", EncodeStrings(env)},
              {"gpus", std::to_string(spec.gpus)},
              {"cpus", std::to_string(spec.cpus)},
              {"priority", std::to_string(spec.priority)},
              {"retries", std::to_string(spec.retries)},
              {"user", spec.user},
              {"submitted_at", std::to_string(now)},
              {"queued_at", std::to_string(now)},
              {"reason", reason},
              {"attempt", "0"},
              {"not_before", "0"},
              {"node_failures", "0"},
              {"after", Joined(spec.after)},
              {"after_any", Joined(spec.after_any)},
              {"time_limit_ms", std::to_string(spec.time_limit_ms)},
              {"mem_limit_bytes", std::to_string(spec.mem_limit_bytes)},
              {"max_procs", std::to_string(spec.max_procs)},
              {"submit_key", spec.submit_key},
              {"nodes_allowed", EncodeStrings(spec.nodes_allowed)},
              {"nodes_excluded", EncodeStrings(spec.nodes_excluded)},
              {"num_nodes", std::to_string(spec.num_nodes)},
              {"gpu_type", spec.gpu_type},
              {"constraints", EncodeStrings(spec.constraints)},
              {"container", ContainerToText(spec.container)},
              {"transfers", TransfersToText(spec.transfers)},
              {"collect", CollectToText(spec)},
              {"stop", StopToText(spec.stop)},
              {"group", std::to_string(spec.group)},
              {"group_limit", std::to_string(spec.group_limit)},
              {"array_index", std::to_string(spec.array_index)},
              {"record", spec.record},
              {"notify_url", spec.notify_url},
              {"mail", spec.mail},
              {"slurm_env", spec.slurm_env ? "1" : "0"},
              {"gate_pid", std::to_string(spec.gate_pid)},
              {"gate_ticks", std::to_string(spec.gate_ticks)},
              {"signed_by", spec.signed_by},
              {"signature", spec.signature}};
  if (spec.mem_bytes) f.emplace_back("mem_bytes", std::to_string(*spec.mem_bytes));
  // The shortest text that reads back as the same double.
  if (spec.mem_percent) f.emplace_back("mem_percent", fmt::format("{}", *spec.mem_percent));
  return f;
}

Fields ChangeableFields(const JobSpec& spec) {
  return {{"name", spec.name},
          {"gpus", std::to_string(spec.gpus)},
          {"cpus", std::to_string(spec.cpus)},
          {"priority", std::to_string(spec.priority)},
          {"time_limit_ms", std::to_string(spec.time_limit_ms)},
          {"after", Joined(spec.after)},
          {"after_any", Joined(spec.after_any)},
          {"gpu_type", spec.gpu_type},
          {"constraints", EncodeStrings(spec.constraints)},
          {"mem_bytes", spec.mem_bytes ? std::to_string(*spec.mem_bytes) : ""},
          {"mem_percent", spec.mem_percent ? fmt::format("{}", *spec.mem_percent) : ""}};
}

Result<Job> ReadJob(const redisReply* hash) {
  Reader r(hash, "job");
  Job job;
  job.id = r.Num<JobId>("id");
  job.state = r.State("state");
  job.spec.name = r.Str("name");
  job.spec.command = r.Strings("command");
  job.spec.cwd = r.Str("cwd");
  std::vector<std::string> env = r.Strings("env");
  for (size_t i = 0; i + 1 < env.size(); i += 2) job.spec.env.emplace_back(env[i], env[i + 1]);
  job.spec.gpus = r.Num<int>("gpus");
  if (r.Has("mem_bytes")) job.spec.mem_bytes = r.Num<uint64_t>("mem_bytes");
  if (r.Has("mem_percent")) job.spec.mem_percent = r.Double("mem_percent");
  job.spec.cpus = r.Num<int>("cpus");
  job.spec.priority = r.Num<int>("priority");
  job.spec.retries = r.Num<int>("retries");
  job.spec.user = r.Str("user");
  job.spec.after = r.Nums<JobId>("after");
  job.spec.after_any = r.Nums<JobId>("after_any");
  job.spec.time_limit_ms = r.Num<int64_t>("time_limit_ms");
  // Absent from a job an earlier trainq stored: the daemon's defaults.
  if (r.Has("mem_limit_bytes")) job.spec.mem_limit_bytes = r.Num<uint64_t>("mem_limit_bytes");
  if (r.Has("max_procs")) job.spec.max_procs = r.Num<int64_t>("max_procs");
  job.spec.submit_key = r.Str("submit_key");
  job.spec.nodes_allowed = r.Strings("nodes_allowed");
  job.spec.nodes_excluded = r.Strings("nodes_excluded");
  job.spec.num_nodes = r.Has("num_nodes") ? r.Num<int>("num_nodes") : 1;
  job.spec.gpu_type = r.Str("gpu_type");  // "" in a job an earlier trainq stored
  if (r.Has("constraints")) job.spec.constraints = r.Strings("constraints");
  if (Result<ContainerSpec> c = ContainerFromText(r.Str("container")); c.ok()) {
    job.spec.container = std::move(*c);
  } else {
    return c.status();
  }
  TRAINQ_RETURN_IF_ERROR(CollectFromText(r.Str("collect"), job.spec));
  TRAINQ_RETURN_IF_ERROR(StopFromText(r.Str("stop"), job.spec.stop));
  if (Result<std::vector<Transfer>> t = TransfersFromText(r.Str("transfers")); t.ok()) {
    job.spec.transfers = std::move(*t);
  } else {
    return t.status();
  }
  // Fields a job stored by an earlier trainq lacks keep their defaults.
  if (r.Has("group")) {
    job.spec.group = r.Num<JobId>("group");
    job.spec.group_limit = r.Num<int>("group_limit");
    job.spec.array_index = r.Num<int>("array_index");
    job.spec.record = r.Str("record");
    job.spec.notify_url = r.Str("notify_url");
    job.spec.mail = r.Str("mail");
    job.spec.slurm_env = r.Str("slurm_env") == "1";
    job.spec.gate_pid = r.Num<int64_t>("gate_pid");
    job.spec.gate_ticks = r.Num<uint64_t>("gate_ticks");
  }
  job.spec.signed_by = r.Str("signed_by");
  job.spec.signature = r.Str("signature");
  job.submitted_at = r.Num<UnixMs>("submitted_at");
  job.queued_at = r.Num<UnixMs>("queued_at");
  job.reason = r.Str("reason");
  job.attempt = r.Num<int>("attempt");
  job.not_before = r.Num<UnixMs>("not_before");
  job.node_failures = r.Num<int>("node_failures");
  if (!r.status().ok()) return r.status();
  return job;
}

Result<Attempt> ReadAttempt(const redisReply* hash) {
  Reader r(hash, "attempt");
  Attempt a;
  a.n = r.Num<int>("n");
  a.state = r.State("state");
  a.node = r.Str("node");
  a.gpu_indices = r.Nums<int>("gpu_indices");
  a.gpu_uuids = r.Strings("gpu_uuids");
  a.reserved_bytes = r.Num<uint64_t>("reserved_bytes");
  a.cpus = r.Num<int>("cpus");
  a.run_dir = r.Str("run_dir");
  a.log_path = r.Str("log_path");
  a.pid = r.Num<int64_t>("pid");
  a.pid_start_ticks = r.Num<uint64_t>("pid_start_ticks");
  a.started_at = r.Num<UnixMs>("started_at");
  if (r.Has("ended_at")) a.ended_at = r.Num<UnixMs>("ended_at");
  if (r.Has("exit_code")) a.exit_code = r.Num<int>("exit_code");
  if (r.Has("signal")) a.signal = r.Num<int>("signal");
  a.oom = r.Str("oom") == "1";
  a.peak_mem_bytes = r.Num<uint64_t>("peak_mem_bytes");
  a.usage = {r.Num<uint64_t>("held_gpu_ms"), r.Num<uint64_t>("util_known_ms"),
             r.Num<uint64_t>("busy_gpu_ms"), r.Num<uint64_t>("mem_byte_s")};
  a.end_reason = r.Str("end_reason");
  a.master_port = r.Num<int>("master_port");
  a.master_addr = r.Str("master_addr");
  if (std::string parts = r.Str("parts"); !parts.empty()) {
    nlohmann::json doc = nlohmann::json::parse(parts, nullptr, false);
    if (!doc.is_array()) return Corrupt("attempt", "parts", parts);
    for (const nlohmann::json& p : doc) {
      if (!p.is_object()) return Corrupt("attempt", "parts", parts);
      AttemptPart part;
      part.node = p.value("node", "");
      part.gpu_indices = p.value("gpu_indices", std::vector<int>{});
      part.gpu_uuids = p.value("gpu_uuids", std::vector<std::string>{});
      part.run_dir = p.value("run_dir", "");
      part.log_path = p.value("log_path", "");
      a.parts.push_back(std::move(part));
    }
  }
  if (!r.status().ok()) return r.status();
  return a;
}

Result<NodeRecord> ReadNode(const redisReply* hash) {
  Reader r(hash, "node");
  NodeRecord n;
  n.name = r.Str("name");
  n.address = r.Str("address");
  n.api_url = r.Str("api_url");
  n.runs_dir = r.Str("runs_dir");
  n.master_port_first = r.Num<int>("master_port_first");
  n.master_port_last = r.Num<int>("master_port_last");
  n.info = r.Str("info");
  n.version = r.Str("version");
  n.drained = r.Str("drained") == "1";
  n.lost = r.Str("lost") == "1";
  n.joined_at = r.Num<UnixMs>("joined_at");
  n.heartbeat_at = r.Num<UnixMs>("heartbeat_at");
  if (!r.status().ok()) return r.status();
  return n;
}

Result<TokenRecord> ReadToken(const redisReply* hash) {
  Reader r(hash, "token");
  TokenRecord t;
  t.name = r.Str("name");
  t.hash = r.Str("hash");
  std::optional<Role> role = ParseRole(r.Str("role"));
  if (!role) return Status::Internal(fmt::format("token '{}' has no known role", t.name));
  t.role = *role;
  t.user = r.Str("user");
  t.created_at = r.Num<UnixMs>("created_at");
  t.expires_at = r.Num<UnixMs>("expires_at");
  t.revoked_at = r.Num<UnixMs>("revoked_at");
  t.created_by = r.Str("created_by");
  t.signature = r.Str("signature");
  if (!r.status().ok()) return r.status();
  return t;
}

}  // namespace trainq::redis
