// The daemon's options: one table (config.cc) gives each option's name, type, default,
// accepted form, whether it changes at run time, and how it is read, shown and applied.
// The TOML file, `trainq config set/get/show` and docs/config.md all follow it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/placement.h"
#include "trainq/status.h"

namespace trainq {

// The values in force. Every member is one option of the table in config.cc (its name there
// in the comment where it differs).
struct Config {
  // The placement policy's options, with PolicyConfig's defaults, so the daemon and the
  // simulator start from the same policy. Their names in the table: headroom, ramp_up,
  // devices, paused, paused_gpus, max_jobs_per_gpu, whole_gpu_max_used (whole_max_used_bytes),
  // gpu_stale_after (stale_after_ms; PolicyOf raises it to two sample_intervals),
  // max_gpus_per_user, max_jobs_per_user, aging_limit (aging_ms), max_holds, placement (pack:
  // "spread" or "pack"). `workload` is no option: the scheduler fills in what it learns.
  PolicyConfig policy;
  int64_t oom_backoff_ms = 30000;         // oom_backoff
  int64_t oom_backoff_max_ms = 3600000;   // oom_backoff_max
  int64_t grace_ms = 10000;               // grace_period
  int64_t interactive_idle_ms = 3600000;  // interactive_idle_timeout; 0: never
  // Preemption (docs/scheduling.md, "Preemption"): whether a job is preemptible when its submit
  // does not say (preemptible), the priority lead that lets a waiting job stop running ones
  // (preempt_priority_gap), the other rules (preempt_for_fair_share, preempt_for_aging), the
  // least run time before an attempt may be stopped (min_runtime) and how long a job stopped
  // twice in a row is spared (preempt_spare).
  bool preemptible = false;
  int preempt_priority_gap = 1;
  bool preempt_for_fair_share = false;
  bool preempt_for_aging = false;
  int64_t min_runtime_ms = 10 * 60 * 1000;
  int64_t preempt_spare_ms = 60 * 60 * 1000;
  int64_t attained_service_ms = 0;  // attained_service: the order's bands; 0: off
  bool preempt_for_attained_service = false;
  int64_t sample_interval_ms = 1000;  // sample_interval
  int cpu_slots = 0;                  // 0: the machine's cores

  std::string fake_gpus;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::vector<std::string> oom_patterns;  // added to the built-in list
  uint64_t log_tail_bytes = 64 * 1024;    // log_tail
  uint64_t log_max_bytes = 100ull << 20;  // log_max_size; 0: no limit
  // Host limits of each attempt's cgroup (docs/operations.md, "Host limits"); 0: none.
  uint64_t max_mem_limit_bytes = 0;      // max_mem_limit; 0: the machine's memory
  uint64_t default_mem_limit_bytes = 0;  // default_mem_limit
  int max_procs_per_job = 32768;
  int default_max_procs = 4096;  // 0: max_procs_per_job
  // What one user may keep (docs/operations.md, "Per-user caps"); 0: no cap.
  int max_waiting_jobs_per_user = 10000;
  uint64_t max_stored_bytes_per_user = 20ull << 30;
  std::string node_name;  // empty: the host name
  // What --constraint and --gpu-type select this node and its GPUs by (docs/scheduling.md).
  std::vector<std::string> node_features;
  std::string gpu_type;  // a label of every GPU here, besides its model name; "": none
  // Jobs in containers (docs/containers.md).
  std::string container_runtime;  // "podman", "docker"; "": podman where installed, else docker
  std::vector<std::string> container_runtime_args;
  std::string container_pull = "never";
  uint64_t container_shm_bytes = 8ull << 30;
  std::string container_gpu_kind = "nvidia.com/gpu";
  bool container_gpu_check = true;
  uint64_t max_request_bytes = 64ull << 20;  // max_request
  // API connections (docs/operations.md, "Connections and limits").
  int64_t request_timeout_ms = 10000;  // request_timeout
  int64_t header_timeout_ms = 5000;    // header_timeout
  int64_t idle_timeout_ms = 60000;     // idle_timeout
  int max_connections = 1024;
  int max_connections_per_peer = 64;
  // Scheduling (docs/scheduling.md).
  int64_t fair_share_half_life_ms = 7 * 24 * 3600 * 1000ll;
  // How many recent GPU submits give the workload mix for fragmentation-aware GPU choice
  // (PolicyConfig::workload); 0: none, the plain rule.
  int workload_window = 0;
  int master_port_first = 29500;  // master_port_range
  int master_port_last = 29999;
  // Who may use the daemon (docs/operations.md, "A shared server", "Remote access").
  bool shared = false;
  std::string socket;  // "": the mode's default
  std::string socket_group;
  std::string admin_group;
  std::vector<std::string> listen;  // "HOST:PORT"
  std::string tls_cert;
  std::string tls_key;
  // The CAs a node trusts its peers' certificates by; "": TRAINQ_CA, else the system's.
  std::string tls_ca;
  bool allow_plaintext = false;
  // A cluster (docs/cluster.md): the shared store and this node's part in it.
  std::string store;  // "": embedded SQLite
  std::string store_password_file;
  std::string store_sentinel_password_file;  // redis+sentinel://: the sentinels' password
  int store_min_replicas_acked = -1;         // -1: "auto" (MinReplicasAcked)
  std::string cluster_key_file;              // "": cluster.key in the state dir
  std::string redis_prefix = "trainq:";
  std::string node_address;                     // "": the host name
  std::string notify_url;                       // every job's end is POSTed here; "": none
  std::string notify_format = "json";           // "json" or "slack"
  bool metrics_per_user = false;                // /metrics: per-user series too
  std::string hpc_job_mapping_dir;              // dcgm-exporter's job-mapping files; "": none
  std::string sendmail = "/usr/sbin/sendmail";  // --mail goes through it
  std::vector<std::string> mail_domains;        // --mail USER@DOMAIN: DOMAIN one of these
  std::string snapshot = "off";                 // submit's default: "off" or "git"
  uint64_t snapshot_max_bytes = 200ull << 20;   // a larger tree is refused
  uint64_t stage_cache_bytes = 50ull << 30;     // a node's chunk cache; 0: no cap
  // Work-tree paths a snapshot links to rather than copies, besides the ignored top-level
  // directories (docs/workflow.md, "Code snapshots").
  std::vector<std::string> snapshot_link;
  int64_t heartbeat_interval_ms = 10000;  // heartbeat_interval
  int64_t node_timeout_ms = 300000;       // node_timeout
  int64_t leader_lease_ms = 15000;        // leader_lease
  int max_node_failures = 3;
  int64_t lost_node_wait_ms = 60000;  // lost_node_wait
  // The options the file set (the rest kept their defaults), for `trainq config show`.
  std::set<std::string> from_file;
  // Options set from outside the file, and from where: "environment (TRAINQ_FAKE_GPUS)",
  // "command line (--shared)". They win over the file.
  std::map<std::string, std::string> from_outside;
};

// The placement policy's settings in `config`: `config.policy` with stale_after_ms at least
// two sample_intervals. The workload mix is not an option: the scheduler adds what it learns
// from the queue (docs/scheduling.md).
PolicyConfig PolicyOf(const Config& config);

// How many API connections the daemon keeps open: `max_connections`, and never so many that
// they leave fewer than a reserve of the fd limit (RLIMIT_NOFILE) to the database, the logs,
// the shims' pidfds and GPU sampling: a quarter of it, at least 64.
size_t ConnectionCap(int max_connections, uint64_t fd_limit);

// The daemon's TCP listeners, judged from `config` alone (trainqd at start and
// --check-config): every `listen` entry an address (ParseListenAddress), tls_cert and
// tls_key both set or neither, and no address other than loopback served without TLS unless
// allow_plaintext: bearer tokens would cross the network in clear. kInvalid naming each
// option at fault, every problem at once.
Status CheckListen(const Config& config);

// How many replicas a write a user is told about waits for: store_min_replicas_acked, its
// "auto" being 1 with a redis+sentinel:// store and 0 otherwise.
int MinReplicasAcked(const Config& config);

// The cluster options, judged from `config` alone (trainqd at start and --check-config):
// `store` empty or a Redis URL (ParseRedisUrl) whose user, if any, has a password there or
// in store_password_file, and a password whenever its host (or a sentinel's) is not
// loopback; store_sentinel_password_file only with redis+sentinel://, and
// store_min_replicas_acked only with a Redis store; heartbeat_interval
// at most a quarter of node_timeout; grace_period at most a quarter of it (a node's jobs stop
// themselves after half of node_timeout and must be gone before another node may run them:
// docs/cluster.md, "Self-fencing"). kInvalid naming each option at fault, every problem at once.
Status CheckCluster(const Config& config);
// notify_url is a webhook URL, notify_format "json" or "slack", each of mail_domains a
// domain name, snapshot "off" or "git"; kInvalid naming them.
Status CheckWorkflow(const Config& config);

// One row of the option table, as docs/config.md shows it.
struct OptionInfo {
  std::string_view name;
  std::string_view type;          // "size", "duration", "integer", ...
  std::string_view default_text;  // as docs/config.md writes it
  std::string_view form;          // the accepted form, as errors name it
  bool settable = false;          // changes at run time (`trainq config set`)
  std::string_view help;          // docs/config.md's "meaning" (Markdown)
};
// Every option, in the order of the table.
std::span<const OptionInfo> ConfigOptions();

// Reads `path` (TOML, one table of options). A missing file gives the defaults. Unknown
// options and wrong types are kInvalid naming the option and the accepted form.
Result<Config> LoadConfig(const std::string& path);
Result<Config> ParseConfig(const std::string& toml_text, const std::string& origin);

// One option's value as the config file would spell it ("512MiB", "30s", "[0, 1]",
// "29500-29999"); nullopt for an unknown name. Always valid JSON too.
std::optional<std::string> OptionValueText(const Config& config, std::string_view name);

// ---- Settings changed while the daemon runs (`trainq config set`) ----
//
// Only the options the table marks settable; the daemon keeps them in a file in its state
// dir and, at its next start, they override the config file. A key also takes its dashed
// form (max-jobs-per-gpu).
struct RuntimeSettings {
  Config values;                // only the options named in `names` mean anything
  std::set<std::string> names;  // canonical names of the options set at run time
  bool Has(std::string_view name) const { return names.count(std::string(name)) > 0; }
};
// "devices, max_jobs_per_gpu, ...": the settable options, for messages.
std::string SettableKeys();

// "max-jobs-per-gpu" -> "max_jobs_per_gpu": the name in the options table.
std::string CanonicalOptionName(std::string_view key);
bool IsOption(std::string_view name);
bool IsSettable(std::string_view name);

// "0,1,3" -> {0, 1, 3} (sorted, duplicates dropped); "all" or "" -> {} (every GPU).
// kInvalid naming `field` and the accepted form otherwise.
Result<std::vector<int>> ParseDeviceList(std::string_view text, std::string_view field);
// {} -> "all"; {0, 1, 3} -> "0,1,3".
std::string FormatDeviceList(const std::vector<int>& devices);
// A whole number from 0 (no limit) to kMaxJobsPerGpu: the run-time limits. `what` names
// the unit in the error ("'x' is not a GPU count").
inline constexpr int kMaxJobsPerGpu = 10000;
Result<int> ParseLimit(std::string_view text, std::string_view field, std::string_view what);
Result<int> ParseMaxJobsPerGpu(std::string_view text, std::string_view field);

// A request to change run-time settings, from a JSON object such as {"devices": [0, 1, 3]},
// {"devices": "0,1,3"}, {"max-jobs-per-gpu": 2}; a null value resets the key to the config
// file's value. Every key is checked before anything is kept: kInvalid naming each bad key
// (unknown ones with the settable keys, file-only ones with "set it in the config file").
struct RuntimeUpdate {
  RuntimeSettings set;
  std::vector<std::string> reset;  // canonical names
};
Result<RuntimeUpdate> ParseRuntimeUpdate(const std::string& json_body);
// `update` applied to `settings`.
RuntimeSettings Updated(RuntimeSettings settings, const RuntimeUpdate& update);

// `runtime` applied on top of `config`.
Config WithRuntime(Config config, const RuntimeSettings& runtime);
// The persisted form: a JSON object with only the keys that are set. Parse errors name
// `origin` and the key.
std::string RuntimeSettingsToJson(const RuntimeSettings& settings);
Result<RuntimeSettings> RuntimeSettingsFromJson(const std::string& text, const std::string& origin);
// The settings file at `path` (StatePaths::settings): nullopt when there is none, kInvalid
// naming the file when it cannot be used.
Result<std::optional<RuntimeSettings>> ReadRuntimeSettings(const std::string& path);
// A settable option's value as the API shows it beside the table ([0, 1] for devices, 2 for
// max_jobs_per_gpu): the persisted form too.
std::string SettableValueJson(const Config& config, std::string_view name);

}  // namespace trainq
