// The JSON forms of jobs and submit requests, shared by the HTTP API, the CLI's --json
// output and the stores. Pure; never throws.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

// {n, state, node, gpu_indices, gpu_uuids, reserved_bytes, cpus, started_at, ended_at,
//  exit_code, signal, oom, peak_mem_bytes, log_path, run_dir, pid, end_reason,
//  master_port}. master_port is null for attempts without one (fewer than 2 GPUs).
// Times are RFC 3339 (FormatTime), null when unset (started_at 0, ended_at empty);
// exit_code and signal are null when unset.
nlohmann::json AttemptToJson(const Attempt& attempt);
// {"gpu_seconds_held", "gpu_seconds_used" (held weighted by utilisation), "utilization_mean"
// (0-1 over the time it was known; null: never), "memory_mean_bytes" (per GPU; null: under a
// second held)}.
nlohmann::json AttemptUsageJson(const AttemptUsage& usage);

// {id, name, state, command, cwd, gpus, mem_bytes, mem_percent, exclusive, cpus, priority,
//  retries, user, submitted_at, reason, attempt, not_before, after, after_any,
//  time_limit_ms, mem_limit_bytes, max_procs, nodes, exclude_nodes, num_nodes, attempts}.
// mem_* are null unless set; not_before, time_limit_ms, mem_limit_bytes and max_procs are null
// when 0; after and after_any are arrays of job ids;
// nodes and exclude_nodes arrays of node names (empty: no constraint). The environment is left out:
// it is large and holds secrets.
nlohmann::json JobToJson(const Job& job);
// What only a job's owner and admins see, replaced by "(hidden)" in JobToJson's form: the
// fields kJobFields (src/core/job_fields.h) gives Readers::kOwner, and the secret parts of
// those it gives Readers::kOwnerParts.
void HideFromOthers(nlohmann::json& job);

// A submit request: {"command": [str, ...] (required), "cwd": str, "env": {str: str},
// "name": str, "gpus": int, "mem": str | null, "cpus": int, "priority": int,
// "retries": int, "after": [id, ...], "after_any": [id, ...], "time": str | null,
// "nodes": [str, ...] | null, "exclude_nodes": [str, ...] | null, "num_nodes": int,
// "mem_limit": str | null, "max_procs": int | null}.
// "time" takes what --time takes (ParseTimeLimit), "mem_limit" what --mem-limit takes
// (ParseSize). Absent keys keep JobSpec's defaults;
// `user` is never taken from here.
// Unknown keys and wrong types are kInvalid, every problem in one message:
// "gpus: expected an integer, got string; bogus: unknown field; ...". Values are only
// type-checked and parsed ("mem" with ParseMemRequest); ValidateSpec judges them.
Result<JobSpec> SpecFromJson(const nlohmann::json& request);
// The "env" field alone, as SpecFromJson reads it (a batch's defaults, read once and shared).
Result<EnvVars> EnvFromJson(const nlohmann::json& env);

// The inverse of SpecFromJson: mem as "21474836480B" or "40%" (null when neither), time as
// "9000000ms" (null when none), mem_limit as "67108864B" and max_procs only when set, env as
// an object (a repeated name keeps its last value); nodes, exclude_nodes and num_nodes only
// when not at their defaults (empty, empty, 1). SpecFromJson(SpecToJson(s)) gives s
// back for every s that SpecFromJson produced (user aside).
nlohmann::json SpecToJson(const JobSpec& spec);

// Serialises without throwing: argv, paths and env values are bytes and may not be valid
// UTF-8, which json::dump would throw on; such bytes become U+FFFD here.
std::string DumpJson(const nlohmann::json& value, int indent = -1);

}  // namespace trainq
