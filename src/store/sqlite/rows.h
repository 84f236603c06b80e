// How the job model maps to rows of the SQLite store: column lists in one place, and the
// codecs for the columns that hold arrays (JSON text) and states (their names).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/core/deps.h"
#include "src/store/sqlite/sqlite_db.h"
#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq::sqlite {

// The job's columns: its own (id, state, times, reason, attempt) and one per row of
// kJobFields (src/core/job_fields.h) in table order; ReadJob reads them in that order.
// `with_env` false: the environment is '' (SQLite computes every result column of a row, so a
// listing that reads no environment would still look each job's up in `envs`, a third of
// reading a million queued jobs at a restart). `placement_only`: what the scheduler places
// by (ListQuery::placement_only); the columns placement never reads are their defaults as
// constants, so no row's text, JSON or environment is read for them.
std::string JobColumns(bool with_env = true, bool placement_only = false);
inline constexpr char kAttemptColumns[] =
    "job_id, n, state, node, gpu_indices, gpu_uuids, reserved_bytes, cpus, run_dir, "
    "log_path, pid, pid_start_ticks, started_at, ended_at, exit_code, signal, oom, "
    "peak_mem_bytes, end_reason, master_port, held_gpu_ms, util_known_ms, busy_gpu_ms, "
    "mem_byte_s";

// The INSERT for a new job, derived from kJobFields; bind with BindNewJob.
const std::string& InsertJobSql();
// `trainq update` of job ?1: the fields kJobFields lets change (those that change while it
// runs, with `running`), then (waiting) not_before and reason; bind with BindUpdate. Changes
// nothing unless the job is waiting (running: starting or running).
std::string UpdateJobSql(bool running);
Status BindUpdate(Query& query, JobId id, const JobSpec& spec, UnixMs not_before,
                  const std::string& reason, bool running);

// Jobs in id order after ?1, at most ?2 (-1: no limit). With `by_state`, only those in state
// ?3, read in id order from the (state, id) index: an IN list of states made SQLite sort the
// rows in a temporary b-tree, which for a million queued jobs spilled 1.1 million pages to a
// temporary file on every restart. Several states are one query each, merged by id. ?10: only
// this user's (''; all), ?11: only this group's (0: all), ?12: only jobs with an attempt (0: all).
// `with_env`, `placement_only`: as JobColumns.
std::string ListJobsSql(bool by_state, bool with_env = true, bool placement_only = false);
// Attempts of the jobs whose ids are in the JSON array ?1, by job id then number.
std::string AttemptsOfJobsSql();
// Attempts of job ?1, oldest first.
std::string AttemptsOfJobSql();
// Job ?1.
std::string GetJobSql();

// Where a new job's environment is: `text` in its own row (env_id 0), or env_id, a row of
// envs its submit shares (text empty); stored_bytes as RecordBytes counts it.
struct NewJobEnv {
  std::string text;
  int64_t env_id = 0;
  uint64_t stored_bytes = 0;
};
// kInvalid naming the field when a string is not valid UTF-8 (JSON cannot hold it, and
// every API speaks JSON, so such a value could not be shown or sent anyway).
Status BindNewJob(Query& query, const JobSpec& spec, UnixMs submitted_at, const DepDecision& start,
                  const NewJobEnv& env);
Result<std::string> EncodeEnv(const std::vector<std::pair<std::string, std::string>>& env);
// The blocked jobs that list job ?1 in after or after_any, in id order.
std::string DependentsSql();

// kInternal when a stored value cannot be decoded (a row we did not write).
// `with_env` false leaves spec.env empty: decoding it is most of a listing's cost.
Result<Job> ReadJob(const Query& query, bool with_env = true);
// The attempt and, through job_id, the job it belongs to.
Result<Attempt> ReadAttempt(const Query& query, JobId* job_id);

// JSON array codecs, exposed for the attempts columns written by the store.
Result<std::string> EncodeStrings(std::span<const std::string> values, std::string_view field);
Result<std::string> EncodeInts(std::span<const int> values);

// The stored name of a state ("queued", ...), and back.
std::string_view StateText(JobState state);
Result<JobState> DecodeState(std::string_view text);

}  // namespace trainq::sqlite
