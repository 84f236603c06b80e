#include "src/store/sqlite/rows.h"

#include <nlohmann/json.hpp>

#include "src/core/container.h"
#include "src/core/stop_spec.h"
#include "src/core/transfers.h"
#include "src/store/sqlite/json_text.h"

namespace trainq::sqlite {

namespace {

using nlohmann::json;

Status NotUtf8(std::string_view field) {
  return Status::Invalid(std::string(field) + ": not valid UTF-8");
}

Status Corrupt(std::string_view column, std::string_view text) {
  return Status::Internal("stored " + std::string(column) +
                          " is not what trainq writes: " + std::string(text.substr(0, 80)));
}

json ParseArray(std::string_view text) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return value.is_array() ? value : json();
}

Result<std::vector<std::string>> DecodeStrings(std::string_view text, std::string_view column) {
  if (text == "[]") return std::vector<std::string>{};  // most lists are empty: no parse
  json array = ParseArray(text);
  if (!array.is_array()) return Corrupt(column, text);
  std::vector<std::string> out;
  out.reserve(array.size());
  for (const json& item : array) {
    if (!item.is_string()) return Corrupt(column, text);
    out.push_back(item.get_ref<const std::string&>());
  }
  return out;
}

Result<std::vector<int>> DecodeInts(std::string_view text, std::string_view column) {
  if (text == "[]") return std::vector<int>{};  // most lists are empty: no parse
  json array = ParseArray(text);
  if (!array.is_array()) return Corrupt(column, text);
  std::vector<int> out;
  out.reserve(array.size());
  for (const json& item : array) {
    if (!item.is_number_integer()) return Corrupt(column, text);
    out.push_back(item.get<int>());
  }
  return out;
}

Result<std::vector<JobId>> DecodeIds(std::string_view text, std::string_view column) {
  if (text == "[]") return std::vector<JobId>{};  // most lists are empty: no parse
  json array = ParseArray(text);
  if (!array.is_array()) return Corrupt(column, text);
  std::vector<JobId> out;
  out.reserve(array.size());
  for (const json& item : array) {
    if (!item.is_number_integer()) return Corrupt(column, text);
    out.push_back(item.get<JobId>());
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> DecodeEnv(std::string_view text) {
  json array = ParseArray(text);
  if (!array.is_array()) return Corrupt("env", text);
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(array.size());
  for (const json& item : array) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_string() || !item[1].is_string()) {
      return Corrupt("env", text);
    }
    out.emplace_back(item[0].get_ref<const std::string&>(), item[1].get_ref<const std::string&>());
  }
  return out;
}

// Moves a decoded value into `out`, or hands back the failure.
template <class T>
Status Take(Result<T> decoded, T& out) {
  if (!decoded.ok()) return decoded.status();
  out = std::move(decoded).value();
  return Status::Ok();
}

}  // namespace

Result<std::string> EncodeEnv(const std::vector<std::pair<std::string, std::string>>& env) {
  std::string out = "[";
  for (const auto& [key, value] : env) {
    if (out.size() > 1) out += ',';
    out += '[';
    if (!AppendJsonString(out, key)) return NotUtf8("env");
    out += ',';
    if (!AppendJsonString(out, value)) return NotUtf8("env " + key);
    out += ']';
  }
  return out + "]";
}

Result<std::string> EncodeStrings(std::span<const std::string> values, std::string_view field) {
  std::string out = "[";
  for (const std::string& value : values) {
    if (out.size() > 1) out += ',';
    if (!AppendJsonString(out, value)) return NotUtf8(field);
  }
  return out + "]";
}

Result<std::string> EncodeInts(std::span<const int> values) {
  return json(std::vector<int>(values.begin(), values.end())).dump();
}

std::string ListJobsSql(bool by_state, bool with_env, bool placement_only) {
  const char* columns = placement_only ? kPlacementColumns
                        : with_env     ? kJobColumns
                                       : kJobColumnsNoEnv;
  std::string sql = std::string("SELECT ") + columns + " FROM jobs WHERE id > ?1";
  if (by_state) sql += " AND state = ?3";
  sql += " AND (?10 = '' OR user = ?10) AND (?11 = 0 OR grp = ?11)";
  sql += " AND (?12 = 0 OR EXISTS (SELECT 1 FROM attempts WHERE attempts.job_id = jobs.id))";
  return sql + " ORDER BY id LIMIT ?2";
}

std::string AttemptsOfJobsSql() {
  return std::string("SELECT ") + kAttemptColumns +
         " FROM attempts WHERE job_id IN (SELECT value FROM json_each(?1)) ORDER BY job_id, n";
}

std::string AttemptsOfJobSql() {
  return std::string("SELECT ") + kAttemptColumns + " FROM attempts WHERE job_id = ?1 ORDER BY n";
}

std::string DependentsSql() {
  return std::string("SELECT ") + kJobColumns +
         " FROM jobs WHERE state = 'blocked' AND (?1 IN (SELECT value FROM json_each(after)) "
         "OR ?1 IN (SELECT value FROM json_each(after_any))) ORDER BY id";
}

std::string GetJobSql() {
  return std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?1";
}

std::string_view StateText(JobState state) { return StateName(state); }

Result<JobState> DecodeState(std::string_view text) {
  std::optional<JobState> state = ParseState(text);
  if (!state) return Corrupt("state", text);
  return *state;
}

Status BindNewJob(Query& query, const JobSpec& spec, UnixMs submitted_at, JobState state,
                  const std::string& reason, const NewJobEnv& env) {
  Result<std::string> command = EncodeStrings(spec.command, "command");
  if (!command.ok()) return command.status();
  query.BindAll(spec.name, *command, spec.cwd, env.text, spec.gpus, spec.mem_bytes,
                spec.mem_percent, spec.cpus, spec.priority, spec.retries, spec.user, submitted_at,
                json(spec.after).dump(), json(spec.after_any).dump(), spec.time_limit_ms,
                StateText(state), reason);
  // After ?12 (queued_at = submitted_at) the next bare parameter is ?18.
  if (spec.submit_key.empty()) {
    query.BindNull(18);
  } else {
    query.Bind(18, spec.submit_key);
  }
  Result<std::string> nodes = EncodeStrings(spec.nodes_allowed, "nodes");
  if (!nodes.ok()) return nodes.status();
  Result<std::string> exclude = EncodeStrings(spec.nodes_excluded, "exclude_nodes");
  if (!exclude.ok()) return exclude.status();
  query.Bind(19, *nodes);
  query.Bind(20, *exclude);
  query.Bind(21, spec.num_nodes);
  query.Bind(22, spec.group);
  query.Bind(23, spec.group_limit);
  query.Bind(24, spec.array_index);
  query.Bind(25, spec.record);
  query.Bind(26, spec.notify_url);
  query.Bind(27, spec.mail);
  query.Bind(28, spec.slurm_env ? 1 : 0);
  query.Bind(29, spec.gate_pid);
  query.Bind(30, static_cast<int64_t>(spec.gate_ticks));
  query.Bind(31, static_cast<int64_t>(spec.mem_limit_bytes));
  query.Bind(32, spec.max_procs);
  query.Bind(33, env.env_id);
  query.Bind(34, static_cast<int64_t>(env.stored_bytes));
  Result<std::string> constraints = EncodeStrings(spec.constraints, "constraints");
  if (!constraints.ok()) return constraints.status();
  query.Bind(35, spec.gpu_type);
  query.Bind(36, *constraints);
  query.Bind(37, ContainerToText(spec.container));
  query.Bind(38, TransfersToText(spec.transfers));
  query.Bind(39, CollectToText(spec));
  query.Bind(40, StopToText(spec.stop));
  return Status::Ok();
}

Result<Job> ReadJob(const Query& q, bool with_env) {
  Job job;
  job.id = q.Int64(0);
  TRAINQ_RETURN_IF_ERROR(Take(DecodeState(q.Text(1)), job.state));
  job.spec.name = q.Text(2);
  TRAINQ_RETURN_IF_ERROR(Take(DecodeStrings(q.Text(3), "command"), job.spec.command));
  job.spec.cwd = q.Text(4);
  if (with_env) {
    EnvVars::List env;
    TRAINQ_RETURN_IF_ERROR(Take(DecodeEnv(q.Text(5)), env));
    job.spec.env = std::move(env);
  }
  job.spec.gpus = q.Int(6);
  if (!q.IsNull(7)) job.spec.mem_bytes = q.Uint64(7);
  job.spec.mem_percent = q.OptDouble(8);
  job.spec.cpus = q.Int(9);
  job.spec.priority = q.Int(10);
  job.spec.retries = q.Int(11);
  job.spec.user = q.Text(12);
  job.submitted_at = q.Int64(13);
  job.reason = q.Text(14);
  job.attempt = q.Int(15);
  job.not_before = q.Int64(16);
  TRAINQ_RETURN_IF_ERROR(Take(DecodeIds(q.Text(17), "after"), job.spec.after));
  TRAINQ_RETURN_IF_ERROR(Take(DecodeIds(q.Text(18), "after_any"), job.spec.after_any));
  job.spec.time_limit_ms = q.Int64(19);
  job.queued_at = q.Int64(20);
  TRAINQ_RETURN_IF_ERROR(Take(DecodeStrings(q.Text(21), "nodes"), job.spec.nodes_allowed));
  TRAINQ_RETURN_IF_ERROR(Take(DecodeStrings(q.Text(22), "exclude_nodes"), job.spec.nodes_excluded));
  job.spec.num_nodes = q.Int(23);
  job.spec.group = q.Int64(24);
  job.spec.group_limit = q.Int(25);
  job.spec.array_index = q.Int(26);
  job.spec.record = q.Text(27);
  job.spec.notify_url = q.Text(28);
  job.spec.mail = q.Text(29);
  job.spec.slurm_env = q.Int(30) != 0;
  job.spec.gate_pid = q.Int64(31);
  job.spec.gate_ticks = q.Uint64(32);
  job.spec.mem_limit_bytes = q.Uint64(33);
  job.spec.max_procs = q.Int64(34);
  job.spec.gpu_type = q.Text(35);
  TRAINQ_RETURN_IF_ERROR(Take(DecodeStrings(q.Text(36), "constraints"), job.spec.constraints));
  TRAINQ_RETURN_IF_ERROR(Take(ContainerFromText(q.Text(37)), job.spec.container));
  TRAINQ_RETURN_IF_ERROR(Take(TransfersFromText(q.Text(38)), job.spec.transfers));
  TRAINQ_RETURN_IF_ERROR(CollectFromText(q.Text(39), job.spec));
  TRAINQ_RETURN_IF_ERROR(StopFromText(q.Text(40), job.spec.stop));
  return job;
}

Result<Attempt> ReadAttempt(const Query& q, JobId* job_id) {
  Attempt a;
  *job_id = q.Int64(0);
  a.n = q.Int(1);
  TRAINQ_RETURN_IF_ERROR(Take(DecodeState(q.Text(2)), a.state));
  a.node = q.Text(3);
  TRAINQ_RETURN_IF_ERROR(Take(DecodeInts(q.Text(4), "gpu_indices"), a.gpu_indices));
  TRAINQ_RETURN_IF_ERROR(Take(DecodeStrings(q.Text(5), "gpu_uuids"), a.gpu_uuids));
  a.reserved_bytes = q.Uint64(6);
  a.cpus = q.Int(7);
  a.run_dir = q.Text(8);
  a.log_path = q.Text(9);
  a.pid = q.Int64(10);
  a.pid_start_ticks = q.Uint64(11);
  a.started_at = q.Int64(12);
  a.ended_at = q.OptInt64(13);
  if (!q.IsNull(14)) a.exit_code = q.Int(14);
  if (!q.IsNull(15)) a.signal = q.Int(15);
  a.oom = q.Int64(16) != 0;
  a.peak_mem_bytes = q.Uint64(17);
  a.end_reason = q.Text(18);
  a.master_port = q.Int(19);
  a.usage = {q.Uint64(20), q.Uint64(21), q.Uint64(22), q.Uint64(23)};
  return a;
}

}  // namespace trainq::sqlite
