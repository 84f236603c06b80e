// Every field of a JobSpec, named once: its SQLite column, its Redis hash field, the keys of a
// submit request that set it, the keys of the job's JSON that show it, whether the cluster
// signature covers it, who may read it and whether `trainq update` may change it. The stores'
// rows, the Redis records, the signature, the codec's accepted keys and the hiding of secrets
// are derived from this table by name (src/store/sqlite/rows.cc, src/store/redis/records.cc,
// src/daemon/cluster_key.cc, src/core/json_codec.cc); a field added to JobSpec and not here
// stops the build (job_fields.cc), and the store conformance suite round-trips every row on
// every store.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "trainq/job.h"

namespace trainq {

// How a store keeps the field.
enum class FieldCodec {
  kValue,        // by its C++ type (text, number, list, or the type's own text form)
  kEnv,          // the environment: each store keeps it its own way (shared once per submit)
  kCollectPair,  // collect and collect_to together in collect's column (CollectToText)
  kInCollect,    // collect_to: kept in collect's column
};

// Who may read it in the job's JSON (GET /v1/jobs, show): everyone, only its owner and admins
// ("(hidden)" for others; docs/operations.md, "Who can do what"), or everyone but with the
// parts that carry secrets hidden from others (HideFromOthers in json_codec.h says which).
enum class Readers { kEveryone, kOwner, kOwnerParts };

// When `trainq update` may change it.
enum class Change { kNever, kWhileWaiting, kAlways };

struct JobFieldInfo {
  std::string_view name = {};   // the JobSpec member
  std::string_view sql = {};    // the column of `jobs`; "": not kept by SQLite (see `why`)
  std::string_view redis = {};  // the job hash's field
  // Keys of a submit request (SpecFromJson) that set it, space-separated; "": none.
  std::string_view request = {};
  // Keys of the job's JSON (JobToJson) that show it, space-separated; "": not shown.
  std::string_view shown = {};
  // The line of `trainq show` that prints it (src/cli/format.cc, JobDetails); "": none.
  std::string_view show = {};
  bool signed_ = true;  // covered by the cluster signature (SignedJobText)
  // Why a field is not signed, not kept by SQLite or not taken from a request.
  std::string_view why = {};
  Readers readers = Readers::kEveryone;
  Change change = Change::kNever;
  bool placement = false;  // read by the scheduler (the stores' placement-only listing)
  FieldCodec codec = FieldCodec::kValue;
};

// One row of the table: the member and what is said of it.
template <auto Member>
struct JobField {
  using Type = std::remove_cvref_t<decltype(std::declval<JobSpec&>().*Member)>;
  static constexpr auto member = Member;
  JobFieldInfo info;
  static Type& Of(JobSpec& spec) { return spec.*Member; }
  static const Type& Of(const JobSpec& spec) { return spec.*Member; }
};

namespace job_fields {
// The changeable fields move where and when a job runs, not what runs or as whom, and update
// writes them in place from whichever node takes the request.
inline constexpr std::string_view kUpdated =
    "changed in place by `trainq update` on any node; decides where and when, not what runs";
}  // namespace job_fields

// clang-format off
inline constexpr auto kJobFields = std::make_tuple(
    JobField<&JobSpec::command>{{.name = "command", .sql = "command", .redis = "command",
        .request = "command", .shown = "command", .show = "command", .readers = Readers::kOwnerParts}},
    JobField<&JobSpec::cwd>{{.name = "cwd", .sql = "cwd", .redis = "cwd", .request = "cwd",
        .shown = "cwd", .show = "cwd"}},
    JobField<&JobSpec::env>{{.name = "env", .sql = "env", .redis = "env", .request = "env",
        .why = "not shown: large, and its values hold secrets (the record keeps the names)",
        .readers = Readers::kOwner, .codec = FieldCodec::kEnv}},
    JobField<&JobSpec::name>{{.name = "name", .sql = "name", .redis = "name", .request = "name",
        .shown = "name", .show = "name", .signed_ = false, .why = job_fields::kUpdated, .change = Change::kAlways}},
    JobField<&JobSpec::gpus>{{.name = "gpus", .sql = "gpus", .redis = "gpus", .request = "gpus",
        .shown = "gpus exclusive", .show = "asks", .signed_ = false, .why = job_fields::kUpdated,
        .change = Change::kWhileWaiting, .placement = true}},
    JobField<&JobSpec::max_gpus>{{.name = "max_gpus", .sql = "max_gpus", .redis = "max_gpus",
        .request = "max_gpus", .shown = "max_gpus", .show = "asks", .placement = true}},
    JobField<&JobSpec::mem_bytes>{{.name = "mem_bytes", .sql = "mem_bytes", .redis = "mem_bytes",
        .request = "mem", .shown = "mem_bytes exclusive", .show = "asks", .signed_ = false,
        .why = job_fields::kUpdated, .change = Change::kWhileWaiting, .placement = true}},
    JobField<&JobSpec::mem_percent>{{.name = "mem_percent", .sql = "mem_percent",
        .redis = "mem_percent", .request = "mem", .shown = "mem_percent exclusive", .show = "asks",
        .signed_ = false, .why = job_fields::kUpdated, .change = Change::kWhileWaiting,
        .placement = true}},
    JobField<&JobSpec::cpus>{{.name = "cpus", .sql = "cpus", .redis = "cpus", .request = "cpus",
        .shown = "cpus", .show = "asks", .signed_ = false, .why = job_fields::kUpdated,
        .change = Change::kWhileWaiting, .placement = true}},
    JobField<&JobSpec::priority>{{.name = "priority", .sql = "priority", .redis = "priority",
        .request = "priority", .shown = "priority", .show = "priority", .signed_ = false, .why = job_fields::kUpdated,
        .change = Change::kAlways, .placement = true}},
    JobField<&JobSpec::retries>{{.name = "retries", .sql = "retries", .redis = "retries",
        .request = "retries", .shown = "retries", .show = "retries"}},
    JobField<&JobSpec::hold>{{.name = "hold", .sql = "hold", .redis = "hold", .request = "hold",
        .shown = "submitted_held", .show = "held at submit"}},
    JobField<&JobSpec::user>{{.name = "user", .sql = "user", .redis = "user", .shown = "user", .show = "user",
        .why = "never from a request: the caller's identity", .placement = true}},
    JobField<&JobSpec::after>{{.name = "after", .sql = "after", .redis = "after",
        .request = "after", .shown = "after", .show = "after", .signed_ = false, .why = job_fields::kUpdated,
        .change = Change::kWhileWaiting}},
    JobField<&JobSpec::after_any>{{.name = "after_any", .sql = "after_any",
        .redis = "after_any", .request = "after_any", .shown = "after_any", .show = "after any", .signed_ = false,
        .why = job_fields::kUpdated, .change = Change::kWhileWaiting}},
    JobField<&JobSpec::time_limit_ms>{{.name = "time_limit_ms", .sql = "time_limit_ms",
        .redis = "time_limit_ms", .request = "time", .shown = "time_limit_ms", .show = "time limit", .signed_ = false,
        .why = job_fields::kUpdated, .change = Change::kWhileWaiting}},
    JobField<&JobSpec::mem_limit_bytes>{{.name = "mem_limit_bytes", .sql = "mem_limit_bytes",
        .redis = "mem_limit_bytes", .request = "mem_limit", .shown = "mem_limit_bytes", .show = "host mem limit"}},
    JobField<&JobSpec::max_procs>{{.name = "max_procs", .sql = "max_procs",
        .redis = "max_procs", .request = "max_procs", .shown = "max_procs", .show = "max procs"}},
    JobField<&JobSpec::nodes_allowed>{{.name = "nodes_allowed", .sql = "nodes",
        .redis = "nodes_allowed", .request = "nodes", .shown = "nodes", .show = "nodes", .placement = true}},
    JobField<&JobSpec::nodes_excluded>{{.name = "nodes_excluded", .sql = "exclude_nodes",
        .redis = "nodes_excluded", .request = "exclude_nodes", .shown = "exclude_nodes", .show = "not on",
        .signed_ = false,
        .why = "the store adds each node an attempt was lost on; decides where, not what runs",
        .placement = true}},
    JobField<&JobSpec::num_nodes>{{.name = "num_nodes", .sql = "num_nodes",
        .redis = "num_nodes", .request = "num_nodes", .shown = "num_nodes", .show = "gang", .placement = true}},
    JobField<&JobSpec::max_nodes>{{.name = "max_nodes", .sql = "max_nodes",
        .redis = "max_nodes", .request = "max_nodes", .shown = "max_nodes", .show = "gang", .placement = true}},
    JobField<&JobSpec::gpu_type>{{.name = "gpu_type", .sql = "gpu_type", .redis = "gpu_type",
        .request = "gpu_type", .shown = "gpu_type", .show = "gpu type", .signed_ = false,
        .why = job_fields::kUpdated, .change = Change::kWhileWaiting, .placement = true}},
    JobField<&JobSpec::constraints>{{.name = "constraints", .sql = "constraints",
        .redis = "constraints", .request = "constraints", .shown = "constraints", .show = "constraint",
        .signed_ = false, .why = job_fields::kUpdated, .change = Change::kWhileWaiting,
        .placement = true}},
    JobField<&JobSpec::container>{{.name = "container", .sql = "container",
        .redis = "container", .request = "image mounts shm_size container_workdir",
        .shown = "image mounts shm_size_bytes container_workdir", .show = "image", .placement = true}},
    JobField<&JobSpec::transfers>{{.name = "transfers", .sql = "transfers",
        .redis = "transfers", .request = "transfers", .shown = "transfers", .show = "staged", .placement = true}},
    JobField<&JobSpec::collect>{{.name = "collect", .sql = "collect", .redis = "collect",
        .request = "collect", .shown = "collect", .show = "collect", .placement = true,
        .codec = FieldCodec::kCollectPair}},
    JobField<&JobSpec::collect_to>{{.name = "collect_to", .sql = "collect", .redis = "collect",
        .request = "collect_to", .shown = "collect_to", .show = "collect", .placement = true,
        .codec = FieldCodec::kInCollect}},
    JobField<&JobSpec::stop>{{.name = "stop", .sql = "stop", .redis = "stop",
        .request = "signal requeue preemptible checkpoint",
        .shown = "signal requeue preemptible checkpoint", .show = "stops", .placement = true}},
    JobField<&JobSpec::submit_key>{{.name = "submit_key", .sql = "submit_key",
        .redis = "submit_key",
        .why = "from the request's Idempotency-Key header; not shown: it is the client's"}},
    JobField<&JobSpec::group>{{.name = "group", .sql = "grp", .redis = "group",
        .request = "group", .shown = "group", .show = "group", .signed_ = false,
        .why = "the store names a new group by its first id after the submit is signed",
        .placement = true}},
    JobField<&JobSpec::group_limit>{{.name = "group_limit", .sql = "group_limit",
        .redis = "group_limit", .request = "group_limit", .shown = "group_limit", .show = "group limit",
        .placement = true}},
    JobField<&JobSpec::array_index>{{.name = "array_index", .sql = "array_index",
        .redis = "array_index", .request = "array_index", .shown = "array_index", .show = "group"}},
    JobField<&JobSpec::record>{{.name = "record", .sql = "record", .redis = "record",
        .request = "record", .shown = "record", .show = "host", .readers = Readers::kOwnerParts}},
    JobField<&JobSpec::notify_url>{{.name = "notify_url", .sql = "notify_url",
        .redis = "notify_url", .request = "notify", .shown = "notify", .show = "notify",
        .readers = Readers::kOwner}},
    JobField<&JobSpec::mail>{{.name = "mail", .sql = "mail", .redis = "mail", .request = "mail",
        .shown = "mail", .show = "mail", .readers = Readers::kOwner}},
    JobField<&JobSpec::slurm_env>{{.name = "slurm_env", .sql = "slurm_env",
        .redis = "slurm_env", .request = "slurm", .shown = "slurm", .show = "sbatch"}},
    JobField<&JobSpec::gate_pid>{{.name = "gate_pid", .sql = "gate_pid", .redis = "gate_pid",
        .request = "gate", .shown = "gate_pid", .show = "gate"}},
    JobField<&JobSpec::gate_ticks>{{.name = "gate_ticks", .sql = "gate_ticks",
        .redis = "gate_ticks", .request = "gate",
        .why = "read from /proc at submit with gate_pid; not shown: it only names that process"}},
    JobField<&JobSpec::interactive>{{.name = "interactive", .sql = "interactive",
        .redis = "interactive", .request = "interactive", .shown = "interactive", .show = "session"}},
    JobField<&JobSpec::no_log>{{.name = "no_log", .sql = "no_log", .redis = "no_log",
        .request = "no_log", .shown = "no_log", .show = "session"}},
    JobField<&JobSpec::signed_by>{{.name = "signed_by", .sql = "", .redis = "signed_by",
        .signed_ = false,
        .why = "the signature's own fields, set by the node that stores the job in a cluster "
               "(SQLite is one machine: no signature)"}},
    JobField<&JobSpec::signature>{{.name = "signature", .sql = "", .redis = "signature",
        .signed_ = false,
        .why = "the signature's own fields, set by the node that stores the job in a cluster "
               "(SQLite is one machine: no signature)"}});
// clang-format on

inline constexpr size_t kJobFieldCount = std::tuple_size_v<decltype(kJobFields)>;

// Calls f(field) for each row in table order.
template <class F>
constexpr void ForEachJobField(F&& f) {
  std::apply([&](const auto&... field) { (f(field), ...); }, kJobFields);
}

// The rows without their members, in table order.
const std::array<JobFieldInfo, kJobFieldCount>& JobFieldInfos();

// Each key a submit request accepts, in table order, once ("command", "cwd", ...).
std::string_view RequestKeys();

}  // namespace trainq
