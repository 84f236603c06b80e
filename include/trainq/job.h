// The job model shared by every part: what a user asks for (JobSpec), each execution
// (Attempt) and the job as stored (Job). Plain data; no I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainq/status.h"

namespace trainq {

using JobId = int64_t;
using UnixMs = int64_t;  // milliseconds since the Unix epoch, UTC

// JobSpec::group in a submit: a new group named by the first job stored with it. A store's
// Submit takes any negative value as a new group's tag, so requests committed together
// (kNewGroup - k for the k-th) each get their own group.
constexpr JobId kNewGroup = -1;
// JobSpec::gate_pid in a submit: the caller's own process (the API fills in its pid).
constexpr int64_t kGateCaller = -1;

// The life of a job: src/core/state_machine.h. Waiting: queued, blocked. Running: starting,
// running. Done: succeeded, failed, cancelled.
enum class JobState { kQueued, kBlocked, kStarting, kRunning, kSucceeded, kFailed, kCancelled };

// A job's environment, (name, value) in order. The jobs of one batch share one copy — a
// million-job `--from` held a million copies of the submitter's environment, 7 GB — so it
// reads as a vector and is copied only when changed while shared.
class EnvVars {
 public:
  using Entry = std::pair<std::string, std::string>;
  using List = std::vector<Entry>;
  using value_type = Entry;
  using const_iterator = List::const_iterator;
  using iterator = const_iterator;

  EnvVars() = default;
  EnvVars(List list)  // NOLINT: a vector of entries is an environment
      : list_(list.empty() ? nullptr : std::make_shared<List>(std::move(list))) {}
  EnvVars(std::initializer_list<Entry> entries) : EnvVars(List(entries)) {}

  const List& list() const { return list_ ? *list_ : Empty(); }
  const_iterator begin() const { return list().begin(); }
  const_iterator end() const { return list().end(); }
  size_t size() const { return list().size(); }
  bool empty() const { return list().empty(); }
  const Entry& front() const { return list().front(); }
  void clear() { list_.reset(); }
  template <class... Args>
  void emplace_back(Args&&... args) {
    Mutable().emplace_back(std::forward<Args>(args)...);
  }
  void push_back(Entry entry) { Mutable().push_back(std::move(entry)); }
  // Whether both hold the very same copy (a batch's jobs): equal without comparing.
  bool SharedWith(const EnvVars& other) const { return list_ && list_ == other.list_; }

  friend bool operator==(const EnvVars& a, const EnvVars& b) {
    return a.list_ == b.list_ || a.list() == b.list();
  }
  friend bool operator==(const EnvVars& a, const List& b) { return a.list() == b; }

 private:
  static const List& Empty() {
    static const List kEmpty;
    return kEmpty;
  }
  List& Mutable() {
    if (!list_ || list_.use_count() > 1) list_ = std::make_shared<List>(list());
    return *list_;
  }
  std::shared_ptr<List> list_;
};

std::string_view StateName(JobState s);  // "queued", ...
std::optional<JobState> ParseState(std::string_view name);
bool IsWaiting(JobState s);
bool IsActive(JobState s);  // starting or running
bool IsDone(JobState s);

// What a user submits. Validated by ValidateSpec (src/core/spec.h) before it is stored.
// A waiting job's not_before while it is held (`trainq hold`): no pass starts it until
// `trainq release` sets it back to 0. The last millisecond of year 9999, so every time
// format and sum stays in range.
inline constexpr UnixMs kHeldNotBefore = 253'402'300'799'999;

// A job that runs in a container (docs/containers.md): the image (a name in the node's image
// store, or the absolute path of a `docker save`/`podman save` tar or an OCI archive), the
// mounts beside its cwd ("SRC:DST[:ro]", absolute paths), /dev/shm's size (0: the daemon's
// container_shm_size) and the working directory inside ("": the job's cwd). No image: the
// job runs on the host.
struct ContainerSpec {
  std::string image;
  std::vector<std::string> mounts;
  uint64_t shm_bytes = 0;
  std::string workdir;
  // An archive's image names (its RepoTags), read at submit: the nodes whose stores hold one
  // of them are preferred (docs/containers.md, "In a cluster").
  std::vector<std::string> archive_names;
  bool on() const { return !image.empty(); }
  bool operator==(const ContainerSpec&) const = default;
};

// A tree the job needs where it runs (docs/cluster.md, "Code and data"). Its manifest
// (src/os/transfer.h: every file's chunks by SHA-256) is made at submit and kept, with the
// bytes, on the node that stored the job (signed_by; on one machine, the machine). There the
// job uses the source itself; another node fetches what its cache lacks and runs the job on
// a copy.
enum class TransferKind {
  kTree,   // the snapshot's tree (--snapshot): the job's cwd is inside it
  kLink,   // a directory the snapshot's tree links to (data/, snapshot_link)
  kStage,  // --stage SRC[:DST]
};
struct Transfer {
  TransferKind kind = TransferKind::kStage;
  std::string src;  // absolute, on the node that stored the job
  // Where the job finds it: kStage, relative to its cwd or absolute; kLink, the link's path in
  // the tree; kTree, "".
  std::string dst;
  std::string manifest;       // the manifest text's SHA-256
  std::string manifest_path;  // where that node keeps the text
  uint64_t bytes = 0;         // of its files
  uint64_t files = 0;
  bool operator==(const Transfer&) const = default;
};

// How a job is warned before it is stopped, and what follows (docs/scheduling.md, "Preemption
// and requeue"; src/core/stop_spec.h parses and stores it).
struct StopSpec {
  // --signal [B:]SIG[@T]: SIG (0: none) sent lead_ms before the time limit and before a
  // preemption stops the job; to every process of the job, or (batch_only, Slurm's B:) to
  // its command's own process only, the batch shell of an sbatch script.
  int signal = 0;
  int64_t lead_ms = 0;
  bool batch_only = false;
  // --requeue: when preempted, queued again under the same id as a new attempt (else it ends
  // cancelled). A job may always requeue itself (`trainq requeue`, `scontrol requeue`).
  bool requeue = false;
  // --preemptible, --no-preemptible: whether a waiting job of higher priority may stop it
  // (docs/scheduling.md); nullopt: the daemon's `preemptible` option says.
  std::optional<bool> preemptible;
  // --checkpoint GLOB (relative to cwd): an attempt stopped after its signal says whether a
  // file matching it was written after the signal.
  std::string checkpoint;
  bool operator==(const StopSpec&) const = default;
};

struct JobSpec {
  std::string name;                  // defaults to the command's basename
  std::vector<std::string> command;  // argv, exec'd directly
  std::string cwd;                   // absolute
  // The environment the job starts with: the submitter's, then --env overrides.
  EnvVars env;
  int gpus = 1;  // on each node; 0 = CPU job
  // --gpus MIN:MAX: an elastic job (docs/workflow.md, "Elastic jobs"), which runs on `gpus`
  // (its min) to max_gpus GPUs of one node and is resized while it runs; 0: not elastic.
  int max_gpus = 0;
  std::optional<uint64_t> mem_bytes;  // per GPU
  std::optional<double> mem_percent;  // per GPU, of its total; exclusive if neither
  int cpus = 1;                       // host CPU slots held
  int priority = 0;                   // higher first
  int retries = 3;                    // OOM retries allowed
  // --hold: stored held (not_before kHeldNotBefore), as `trainq hold` leaves a job, until
  // `trainq release`; Slurm's `sbatch --hold`.
  bool hold = false;
  std::string user;  // who submitted (from the socket's peer credentials)
  // Dependencies (--after, --after-any): ids of jobs that existed when this one was
  // submitted. `after`: start once all succeeded; one failing or cancelled cancels this
  // job. `after_any`: start once all ended, whatever the outcome.
  std::vector<JobId> after;
  std::vector<JobId> after_any;
  int64_t time_limit_ms = 0;  // wall-clock limit per attempt (--time); 0: none
  // Host limits of each attempt, held by its cgroup: memory in bytes (--mem-limit, not the GPU
  // --mem) and tasks, processes and threads together (--max-procs). 0: the daemon's default
  // (config default_mem_limit, default_max_procs).
  uint64_t mem_limit_bytes = 0;
  int64_t max_procs = 0;
  // Where it may run (a cluster, docs/scheduling.md "Nodes and gangs"): only these nodes
  // when not empty (--node, Slurm's -w), never these (--exclude-node, -x).
  std::vector<std::string> nodes_allowed;
  std::vector<std::string> nodes_excluded;
  // --nodes: a gang of this many nodes, each giving `gpus` GPUs (and `cpus`, `mem` per GPU),
  // started all at once or not at all.
  int num_nodes = 1;
  // --nodes MIN:MAX: an elastic gang (docs/workflow.md, "Elastic gangs"), which starts on
  // `num_nodes` (its min) to max_nodes nodes and grows by parts that join its torchrun
  // rendezvous while it runs; 0: a fixed count.
  int max_nodes = 0;
  // What its GPUs and nodes must be (docs/scheduling.md, "GPU types and node features"): a
  // GPU model or node label (--gpu-type a100; "": any) and node features, each clause "a" or
  // "a|b" (any of them), all of which hold (--constraint ib&nvlink).
  std::string gpu_type;
  std::vector<std::string> constraints;
  ContainerSpec container;          // --image, --mount, --shm-size, --container-workdir
  std::vector<Transfer> transfers;  // --snapshot's tree and links, --stage
  // What comes back to the node that stored it when an attempt elsewhere ends (--collect):
  // patterns as glob(3) takes them, relative to the job's cwd; copied into `collect_to`
  // there ("": the job's cwd).
  std::vector<std::string> collect;
  std::string collect_to;
  StopSpec stop;  // --signal, --requeue, --preemptible, --checkpoint
  // The Idempotency-Key of the request that stored it ("" for none): a request sent again
  // with the same key (and user) is answered with the ids already stored.
  std::string submit_key;
  // A group of jobs submitted together (a sweep, an array): the id of its first job, as
  // Slurm's array job id; 0: none. kNewGroup in a submit: the store gives the batch's first id.
  JobId group = 0;
  // At most this many of the group's jobs run at once (--array 0-15%4); 0: no limit.
  int group_limit = 0;
  // The index in an array (--array): TRAINQ_ARRAY_INDEX; -1: not an array job.
  int array_index = -1;
  // What ran (docs/workflow.md, "Run records"): a JSON object the client made at submit
  // (git commit, branch, dirty, diff hash, host, snapshot, version); "": none. Kept as given.
  std::string record;
  // Told when the job ends: a URL that gets a JSON POST (--notify), an address mailed through
  // sendmail (--mail); "": none.
  std::string notify_url;
  std::string mail;
  // Started as `trainq sbatch` starts a batch script: with the variables Slurm sets
  // (SLURM_JOB_ID, SLURM_ARRAY_TASK_ID, SLURM_NODEID, ...).
  bool slurm_env = false;
  // A gate (`with trainq.gpu(...)` in Python; docs/python.md): no command is started. The
  // process that submitted it (pid and /proc start time) holds the GPUs once placed, until
  // it releases them or ends. 0: an ordinary job.
  int64_t gate_pid = 0;
  uint64_t gate_ticks = 0;
  // An interactive session (`trainq shell`; docs/workflow.md, "Interactive sessions"): the
  // command runs on a pseudo-terminal (or pipes) that the client connects to through the
  // shim's session socket; the shim starts it only once a client has connected, and a
  // client that goes away hangs it up. no_log: the transcript is not kept (only trainq's own
  // lines reach the log); only with `interactive`.
  bool interactive = false;
  bool no_log = false;
  // In a cluster: the node that stored it and that node's HMAC, under the cluster key, of
  // the fields that decide who runs what (src/daemon/cluster_key.h). A node runs only a
  // record whose signature holds. Never taken from a request.
  std::string signed_by;
  std::string signature;

  bool exclusive() const { return gpus > 0 && !mem_bytes && !mem_percent; }
  bool has_deps() const { return !after.empty() || !after_any.empty(); }
};

// One node's share of an attempt over several nodes (--nodes N, a gang): its GPUs and run
// dir there. Part 0 runs on the master node (MASTER_ADDR).
struct AttemptPart {
  std::string node;
  std::vector<int> gpu_indices;
  std::vector<std::string> gpu_uuids;
  std::string run_dir;
  std::string log_path;
  // A part an elastic gang grew by while it ran (ClusterStore::AddPart): when; 0: placed with
  // the attempt.
  UnixMs added_at = 0;
};

// One execution of a job. Attempts are numbered from 1.
// What an attempt did with its GPUs (Attempt::usage); AddUsage adds such deltas.
struct AttemptUsage {
  uint64_t held_gpu_ms = 0;
  uint64_t util_known_ms = 0;
  uint64_t busy_gpu_ms = 0;
  uint64_t mem_byte_s = 0;
  bool empty() const {
    return held_gpu_ms == 0 && util_known_ms == 0 && busy_gpu_ms == 0 && mem_byte_s == 0;
  }
  AttemptUsage& operator+=(const AttemptUsage& o) {
    held_gpu_ms += o.held_gpu_ms;
    util_known_ms += o.util_known_ms;
    busy_gpu_ms += o.busy_gpu_ms;
    mem_byte_s += o.mem_byte_s;
    return *this;
  }
};

struct Attempt {
  int n = 0;
  JobState state = JobState::kStarting;  // starting, running, or a done state
  std::string node;
  std::vector<int> gpu_indices;  // NVML indices on the node
  std::vector<std::string> gpu_uuids;
  uint64_t reserved_bytes = 0;  // per GPU; the GPU's total for exclusive jobs
  int cpus = 0;
  std::string run_dir;  // spec, log, exit record
  std::string log_path;
  int64_t pid = 0;               // the shim's pid, 0 until known
  uint64_t pid_start_ticks = 0;  // /proc/PID/stat starttime, guards pid reuse
  UnixMs started_at = 0;
  std::optional<UnixMs> ended_at;
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool oom = false;
  uint64_t peak_mem_bytes = 0;  // sum over the attempt's GPUs, highest sample
  // GPU time held and used, added up sample by sample by the node that runs it (a gang's
  // parts each add theirs): GPU-milliseconds held; of them, those whose utilisation the probe
  // knew, and those weighted by it (a GPU at 40 % for 10 s adds 4 s); the memory its
  // processes used, in byte-seconds (divided by the held seconds: the mean per GPU).
  AttemptUsage usage;
  int master_port = 0;     // MASTER_PORT of a multi-GPU attempt; 0: none
  std::string end_reason;  // "exit code 1", "out of memory (retry 1 of 3 in 30s)"
  // A gang's parts in rank order (part 0 is also node, gpu_indices, run_dir above); empty
  // for an attempt on one node. master_addr: part 0's node_address.
  std::vector<AttemptPart> parts;
  std::string master_addr;
  // The part of this attempt on `node`: the attempt itself for one node (when it runs
  // there), a gang's part there, or nullopt. `rank` gets the part's rank (0 for one node).
  std::optional<AttemptPart> PartOn(const std::string& on, int* rank = nullptr) const;
};

struct Job {
  JobId id = 0;
  JobSpec spec;
  JobState state = JobState::kQueued;
  UnixMs submitted_at = 0;
  // When it last became queued: submit, retry, dependencies met, an OOM or lost-node retry.
  // The scheduler ages a waiting job from here.
  UnixMs queued_at = 0;
  std::string reason;             // why it waits, or why it ended
  int attempt = 0;                // number of the latest attempt, 0 before the first
  UnixMs not_before = 0;          // OOM backoff: not placed before this time
  int node_failures = 0;          // attempts a lost node ended (cluster; src/store/cluster.h)
  std::vector<Attempt> attempts;  // oldest first; may be empty in listings

  const Attempt* current() const { return attempts.empty() ? nullptr : &attempts.back(); }
};

// RFC 3339 UTC with milliseconds: "2026-11-22T10:00:00.123Z".
std::string FormatTime(UnixMs t);

}  // namespace trainq
