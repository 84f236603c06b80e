#include "src/store/redis/records.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <map>
#include <optional>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "src/core/container.h"
#include "src/core/job_field_text.h"
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

}  // namespace

std::string EncodeStrings(const std::vector<std::string>& values) { return LengthPrefixed(values); }

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

namespace {

// Reads a field that is there (an absent one keeps JobSpec's default: a job an earlier
// trainq stored lacks the fields added since).
template <class T>
Status FromRedis(Reader& r, std::string_view f, T& out) {
  using V = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<V, std::string>) {
    out = r.Str(f);
  } else if constexpr (std::is_same_v<V, bool>) {
    out = r.Str(f) == "1";
  } else if constexpr (std::is_integral_v<V>) {
    out = r.Num<V>(f);
  } else if constexpr (std::is_same_v<V, std::optional<uint64_t>>) {
    out = r.Num<uint64_t>(f);
  } else if constexpr (std::is_same_v<V, std::optional<double>>) {
    out = r.Double(f);
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    out = r.Strings(f);
  } else if constexpr (std::is_same_v<V, std::vector<JobId>>) {
    out = r.Nums<JobId>(f);
  } else if constexpr (std::is_same_v<V, EnvVars>) {
    std::vector<std::string> flat = r.Strings(f);
    EnvVars::List env;
    for (size_t i = 0; i + 1 < flat.size(); i += 2) env.emplace_back(flat[i], flat[i + 1]);
    out = std::move(env);
  } else if constexpr (std::is_same_v<V, ContainerSpec>) {
    Result<ContainerSpec> c = ContainerFromText(r.Str(f));
    if (!c.ok()) return c.status();
    out = std::move(*c);
  } else if constexpr (std::is_same_v<V, std::vector<Transfer>>) {
    Result<std::vector<Transfer>> t = TransfersFromText(r.Str(f));
    if (!t.ok()) return t.status();
    out = std::move(*t);
  } else {
    static_assert(std::is_same_v<V, StopSpec>, "a JobSpec member type with no Redis form");
    return StopFromText(r.Str(f), out);
  }
  return Status::Ok();
}

bool Changeable(const JobFieldInfo& f, bool running) {
  return running ? f.change == Change::kAlways : f.change != Change::kNever;
}

}  // namespace

Fields NewJobFields(const JobSpec& spec, UnixMs now, const DepDecision& start) {
  Fields f = {{"state", std::string(StateName(start.state))},
              {"submitted_at", std::to_string(now)},
              {"queued_at", std::to_string(now)},
              {"reason", start.reason},
              {"attempt", "0"},
              {"not_before", std::to_string(start.not_before)},
              {"node_failures", "0"}};
  ForEachJobField([&](const auto& field) {
    if (field.info.codec == FieldCodec::kInCollect) return;
    if (std::optional<std::string> value = FieldText(field, spec)) {
      f.emplace_back(field.info.redis, std::move(*value));
    }
  });
  return f;
}

Fields ChangeableFields(const JobSpec& spec, bool running) {
  Fields f;
  ForEachJobField([&](const auto& field) {
    if (!Changeable(field.info, running)) return;
    f.emplace_back(field.info.redis, FieldText(field, spec).value_or(""));
  });
  return f;
}

Result<Job> ReadJob(const redisReply* hash) {
  Reader r(hash, "job");
  Job job;
  job.id = r.Num<JobId>("id");
  job.state = r.State("state");
  Status status;
  ForEachJobField([&](const auto& field) {
    const JobFieldInfo& f = field.info;
    if (!status.ok() || f.codec == FieldCodec::kInCollect || !r.Has(f.redis)) return;
    if (f.codec == FieldCodec::kCollectPair) {
      status = CollectFromText(r.Str(f.redis), job.spec);
    } else {
      status = FromRedis(r, f.redis, std::remove_cvref_t<decltype(field)>::Of(job.spec));
    }
  });
  if (!status.ok()) return status;
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
      part.added_at = p.value("added_at", UnixMs{0});
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
