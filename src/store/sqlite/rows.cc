#include "src/store/sqlite/rows.h"

#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/core/container.h"
#include "src/core/job_fields.h"
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

namespace {

// A value as SQLite keeps it: NULL, an integer, a real or a text.
using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string>;

template <class T>
Result<SqlValue> ToSql(const T& value, std::string_view column) {
  using V = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<V, std::string>) {
    return SqlValue(value);
  } else if constexpr (std::is_same_v<V, bool>) {
    return SqlValue(int64_t{value ? 1 : 0});
  } else if constexpr (std::is_integral_v<V>) {
    return SqlValue(static_cast<int64_t>(value));
  } else if constexpr (std::is_same_v<V, std::optional<uint64_t>>) {
    return value ? SqlValue(static_cast<int64_t>(*value)) : SqlValue(nullptr);
  } else if constexpr (std::is_same_v<V, std::optional<double>>) {
    return value ? SqlValue(*value) : SqlValue(nullptr);
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    Result<std::string> text = EncodeStrings(value, column);
    if (!text.ok()) return text.status();
    return SqlValue(std::move(text).value());
  } else if constexpr (std::is_same_v<V, std::vector<JobId>>) {
    return SqlValue(json(value).dump());
  } else if constexpr (std::is_same_v<V, ContainerSpec>) {
    return SqlValue(ContainerToText(value));
  } else if constexpr (std::is_same_v<V, std::vector<Transfer>>) {
    return SqlValue(TransfersToText(value));
  } else if constexpr (std::is_same_v<V, EnvVars>) {
    Result<std::string> text = EncodeEnv(value.list());
    if (!text.ok()) return text.status();
    return SqlValue(std::move(text).value());
  } else {
    static_assert(std::is_same_v<V, StopSpec>, "a JobSpec member type with no SQLite form");
    return SqlValue(StopToText(value));
  }
}

template <class T>
Status FromSql(const Query& q, int col, std::string_view column, T& out) {
  using V = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<V, std::string>) {
    out = q.Text(col);
  } else if constexpr (std::is_same_v<V, bool>) {
    out = q.Int64(col) != 0;
  } else if constexpr (std::is_integral_v<V>) {
    out = static_cast<V>(q.Int64(col));
  } else if constexpr (std::is_same_v<V, std::optional<uint64_t>>) {
    out = q.IsNull(col) ? std::nullopt : std::optional<uint64_t>(q.Uint64(col));
  } else if constexpr (std::is_same_v<V, std::optional<double>>) {
    out = q.OptDouble(col);
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    return Take(DecodeStrings(q.Text(col), column), out);
  } else if constexpr (std::is_same_v<V, std::vector<JobId>>) {
    return Take(DecodeIds(q.Text(col), column), out);
  } else if constexpr (std::is_same_v<V, ContainerSpec>) {
    return Take(ContainerFromText(q.Text(col)), out);
  } else if constexpr (std::is_same_v<V, std::vector<Transfer>>) {
    return Take(TransfersFromText(q.Text(col)), out);
  } else if constexpr (std::is_same_v<V, EnvVars>) {
    EnvVars::List env;
    TRAINQ_RETURN_IF_ERROR(Take(DecodeEnv(q.Text(col)), env));
    out = std::move(env);
  } else {
    static_assert(std::is_same_v<V, StopSpec>, "a JobSpec member type with no SQLite form");
    return StopFromText(q.Text(col), out);
  }
  return Status::Ok();
}

void BindValue(Query& q, int index, const SqlValue& v) {
  if (std::holds_alternative<std::nullptr_t>(v)) {
    q.BindNull(index);
  } else if (const auto* n = std::get_if<int64_t>(&v)) {
    q.Bind(index, *n);
  } else if (const auto* d = std::get_if<double>(&v)) {
    q.Bind(index, *d);
  } else {
    q.Bind(index, std::get<std::string>(v));
  }
}

// As SQL text, for the placement listing's constants.
std::string Literal(const SqlValue& v) {
  if (std::holds_alternative<std::nullptr_t>(v)) return "NULL";
  if (const auto* n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  if (const auto* d = std::get_if<double>(&v)) return fmt::format("{}", *d);
  std::string out = "'";
  for (char c : std::get<std::string>(v)) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Whether the field has a column of its own (collect_to shares collect's; signed_by and
// signature have none: one machine signs nothing).
bool HasColumn(const JobFieldInfo& f) {
  return !f.sql.empty() && f.codec != FieldCodec::kInCollect;
}

// The field's value as its column holds it.
template <class Field>
Result<SqlValue> ColumnValue(const Field& field, const JobSpec& spec) {
  if (field.info.codec == FieldCodec::kCollectPair) return SqlValue(CollectToText(spec));
  return ToSql(Field::Of(spec), field.info.sql);
}

template <class Field>
Status ReadColumn(const Field& field, const Query& q, int col, JobSpec& spec) {
  if (field.info.codec == FieldCodec::kCollectPair) return CollectFromText(q.Text(col), spec);
  return FromSql(q, col, field.info.sql, Field::Of(spec));
}

// The job's own columns, before the table's.
constexpr std::string_view kJobStateColumns =
    "id, state, submitted_at, reason, attempt, not_before, queued_at";
constexpr int kFirstFieldColumn = 7;

constexpr std::string_view kEnvColumn =
    "CASE env_id WHEN 0 THEN env ELSE (SELECT body FROM envs WHERE envs.id = jobs.env_id) END";

std::string BuildJobColumns(bool with_env, bool placement_only) {
  std::string out(kJobStateColumns);
  const JobSpec defaults;
  ForEachJobField([&](const auto& field) {
    const JobFieldInfo& f = field.info;
    if (!HasColumn(f)) return;
    out += ", ";
    if (f.codec == FieldCodec::kEnv) {
      out += with_env && !placement_only ? kEnvColumn : "''";
    } else if (placement_only && !f.placement) {
      Result<SqlValue> value = ColumnValue(field, defaults);
      out += value.ok() ? Literal(*value) : "NULL";
    } else {
      out += f.sql;
    }
  });
  return out;
}

}  // namespace

std::string JobColumns(bool with_env, bool placement_only) {
  static const std::string all = BuildJobColumns(true, false);
  static const std::string no_env = BuildJobColumns(false, false);
  static const std::string placement = BuildJobColumns(false, true);
  return placement_only ? placement : with_env ? all : no_env;
}

const std::string& InsertJobSql() {
  static const std::string sql = [] {
    // ?3 is both times: a new job was queued when it was submitted.
    std::string columns =
        "state, reason, submitted_at, queued_at, env_id, stored_bytes, not_before";
    int n = 6;
    ForEachJobField([&](const auto& field) {
      if (!HasColumn(field.info)) return;
      columns += ", ";
      columns += field.info.sql;
      ++n;
    });
    std::string values = "?1, ?2, ?3, ?3";
    for (int i = 4; i <= n; ++i) values += fmt::format(", ?{}", i);
    return fmt::format("INSERT INTO jobs ({}) VALUES ({})", columns, values);
  }();
  return sql;
}

std::string ListJobsSql(bool by_state, bool with_env, bool placement_only) {
  std::string sql = "SELECT " + JobColumns(with_env, placement_only) + " FROM jobs WHERE id > ?1";
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
  return "SELECT " + JobColumns() +
         " FROM jobs WHERE state = 'blocked' AND (?1 IN (SELECT value FROM json_each(after)) "
         "OR ?1 IN (SELECT value FROM json_each(after_any))) ORDER BY id";
}

std::string GetJobSql() { return "SELECT " + JobColumns() + " FROM jobs WHERE id = ?1"; }

std::string_view StateText(JobState state) { return StateName(state); }

Result<JobState> DecodeState(std::string_view text) {
  std::optional<JobState> state = ParseState(text);
  if (!state) return Corrupt("state", text);
  return *state;
}

Status BindNewJob(Query& query, const JobSpec& spec, UnixMs submitted_at, const DepDecision& start,
                  const NewJobEnv& env) {
  query.BindAll(StateText(start.state), start.reason, submitted_at);
  query.Bind(4, env.env_id);
  query.Bind(5, static_cast<int64_t>(env.stored_bytes));
  query.Bind(6, start.not_before);
  int index = 7;
  Status status;
  ForEachJobField([&](const auto& field) {
    const JobFieldInfo& f = field.info;
    if (!status.ok() || !HasColumn(f)) return;
    if (f.codec == FieldCodec::kEnv) {
      query.Bind(index++, env.text);
      return;
    }
    Result<SqlValue> value = ColumnValue(field, spec);
    if (!value.ok()) {
      status = value.status();
      return;
    }
    // The unique index on (user, submit_key) takes NULL as "no key".
    if (f.name == "submit_key" && spec.submit_key.empty()) *value = nullptr;
    BindValue(query, index++, *value);
  });
  return status;
}

std::string UpdateJobSql(bool running) {
  std::string sets;
  int n = 1;
  ForEachJobField([&](const auto& field) {
    const JobFieldInfo& f = field.info;
    if (f.change == Change::kNever || (running && f.change != Change::kAlways)) return;
    if (!sets.empty()) sets += ", ";
    sets += fmt::format("{} = ?{}", f.sql, ++n);
  });
  if (running) {
    return fmt::format("UPDATE jobs SET {} WHERE id = ?1 AND state IN ('starting', 'running')",
                       sets);
  }
  return fmt::format(
      "UPDATE jobs SET {}, not_before = ?{}, reason = ?{} WHERE id = ?1 AND state IN ('queued', "
      "'blocked')",
      sets, n + 1, n + 2);
}

Status BindUpdate(Query& query, JobId id, const JobSpec& spec, UnixMs not_before,
                  const std::string& reason, bool running) {
  query.Bind(1, id);
  int index = 2;
  Status status;
  ForEachJobField([&](const auto& field) {
    const JobFieldInfo& f = field.info;
    if (!status.ok() || f.change == Change::kNever || (running && f.change != Change::kAlways)) {
      return;
    }
    Result<SqlValue> value = ColumnValue(field, spec);
    if (!value.ok()) {
      status = value.status();
      return;
    }
    BindValue(query, index++, *value);
  });
  if (!running) {
    query.Bind(index++, not_before);
    query.Bind(index, reason);
  }
  return status;
}

Result<Job> ReadJob(const Query& q, bool with_env) {
  Job job;
  job.id = q.Int64(0);
  TRAINQ_RETURN_IF_ERROR(Take(DecodeState(q.Text(1)), job.state));
  job.submitted_at = q.Int64(2);
  job.reason = q.Text(3);
  job.attempt = q.Int(4);
  job.not_before = q.Int64(5);
  job.queued_at = q.Int64(6);
  int col = kFirstFieldColumn;
  Status status;
  ForEachJobField([&](const auto& field) {
    const JobFieldInfo& f = field.info;
    if (!status.ok() || !HasColumn(f)) return;
    int at = col++;
    if (f.codec == FieldCodec::kEnv && !with_env) return;
    status = ReadColumn(field, q, at, job.spec);
  });
  if (!status.ok()) return status;
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
