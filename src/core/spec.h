// Validation of a submitted job (bad input is refused naming the field, and nothing is
// stored) and the environment a job starts with.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

struct FieldError {
  std::string field;    // "--mem", "command", ...
  std::string message;  // what is wrong and the accepted form
};

constexpr size_t kMaxJobNameBytes = 200;
constexpr int kMaxRetries = 100;
constexpr size_t kMaxDeps = 1000;         // ids in --after and --after-any together
constexpr int kMaxNumNodes = 1024;        // --nodes
constexpr size_t kMaxNodeNameBytes = 64;  // a name in --node and --exclude-node
constexpr size_t kMaxNodeNames = 1024;    // names in each of --node and --exclude-node
constexpr char kMasterAddr[] = "127.0.0.1";

// What one node offers beyond counts, for jobs with --gpu-type or --constraint: a type no GPU
// has, or a feature no node has, is refused at submit, as Slurm refuses a request no node's
// configuration can meet.
struct NodeOffer {
  std::string name;
  std::vector<std::pair<std::string, std::string>> gpus;  // (model, label) of each GPU
  std::vector<std::string> features;
};

struct SpecLimits {
  int max_gpus_per_node = 0;  // 0 with gpus requested: no GPUs anywhere
  int max_cpu_slots = 1;
  uint64_t largest_gpu_bytes = 0;  // the most memory one GPU has; 0: not known, not checked
  size_t arg_max = 0;              // execve's limit on argv and environment; 0: not checked
  // What the placement keeps free on every GPU (config headroom): an ask above the largest
  // GPU's total less this could never start.
  uint64_t headroom_bytes = 0;
  int max_nodes = 1;  // nodes a job may span (--nodes): a cluster's nodes not lost
  // Host limits (--mem-limit, --max-procs): whether this daemon enforces them (it runs jobs in
  // cgroups) and, when not, why; then their bounds, 0 meaning none: config max_mem_limit (else
  // the machine's memory, machine_mem_bytes) and max_procs_per_job.
  bool host_limits = false;
  std::string host_limits_off{};
  uint64_t max_mem_limit = 0;
  uint64_t machine_mem_bytes = 0;
  int64_t max_procs = 0;
  // Every node not lost; empty: not known, --gpu-type and --constraint are not checked.
  std::vector<NodeOffer> offers{};
};

// The most --max-procs may ask (the kernel's own limit on pids).
constexpr int64_t kMaxProcsLimit = 4194304;

// The daemon's host-limit options (docs/config.md); 0: none.
struct HostLimitConfig {
  uint64_t max_mem = 0;       // max_mem_limit
  uint64_t default_mem = 0;   // default_mem_limit
  int64_t max_procs = 0;      // max_procs_per_job
  int64_t default_procs = 0;  // default_max_procs
};

struct HostLimits {
  uint64_t mem_bytes = 0;  // 0: none
  int64_t max_procs = 0;   // 0: none
};

// The limits an attempt of `spec` runs under: what the job asked for; else the default,
// never above the bound; else the bound. Every job is held to the bound, asked or not.
HostLimits AttemptHostLimits(const JobSpec& spec, const HostLimitConfig& config);

// execve refuses one argument or variable longer than this (Linux's MAX_ARG_STRLEN).
constexpr size_t kMaxExecString = 32 * 4096;
// Room kept under arg_max for the variables the shim adds (CUDA_VISIBLE_DEVICES, TRAINQ_*,
// MASTER_*, PET_*).
constexpr size_t kExecReserve = 8 * 1024;

// What the caller found at the job's cwd (an OS touch, kept out of this pure check).
enum class CwdKind { kDirectory, kMissing, kNotADirectory };

// Whether `name` may name a node: 1 to 64 letters, digits, '.', '_' or '-'.
bool ValidNodeName(std::string_view name);

// Every problem at once; empty when the spec may be stored.
std::vector<FieldError> ValidateSpec(const JobSpec& spec, const SpecLimits& limits, CwdKind cwd);
// One Status (kInvalid) naming each field, or Ok.
Status ToStatus(const std::vector<FieldError>& errors);

// --mail names the submitter's own address only, since the daemon's sendmail (root's, on a
// shared server) mails a job's output wherever it is told: `user` itself (delivered on this
// machine) or `user`@DOMAIN for a DOMAIN in `domains` (the mail_domains option; any case).
// kInvalid naming --mail, what was given and the forms accepted.
Status CheckMailOwner(std::string_view mail, std::string_view user,
                      const std::vector<std::string>& domains);

// The name a job gets when none is given: the basename of the first argument that looks
// like a script (train.py, run.sh), else of the program ("python train.py" -> "train.py").
// At most 200 bytes; "" for an empty command.
std::string DefaultJobName(const std::vector<std::string>& command);

// Parses "K=V" for --env; kInvalid naming --env when there is no '=' or K is empty.
Result<std::pair<std::string, std::string>> ParseEnvAssignment(const std::string& text);

// --time: a duration (30s, 90m, 2h30m, 1d; src/core/duration.h), plain minutes as Slurm
// takes them ("90"), Slurm's clock forms H:MM:SS and MM:SS ("2:30:00", "45:00") and its day forms
// D-HH, D-HH:MM and D-HH:MM:SS ("1-12:00:00"). kInvalid naming
// --time for anything else, zero included.
Result<int64_t> ParseTimeLimit(std::string_view text);

// A multi-GPU attempt (gpus > 1) needs a MASTER_PORT for its ranks to meet on.
// So does a job over several nodes (--nodes), whose nodes meet on node 0's, and an elastic
// job at every size, so that its launcher (torchrun) reads the same variables on 1 GPU.
// An elastic job (docs/workflow.md, "Elastic jobs"): a GPU range on one node or a node range.
inline bool IsElastic(const JobSpec& spec) { return spec.max_gpus > 0 || spec.max_nodes > 0; }

inline bool NeedsMasterPort(const JobSpec& spec) {
  return spec.gpus > 1 || spec.max_gpus > 1 || spec.num_nodes > 1 || spec.max_nodes > 1;
}

struct AttemptEnvInput {
  JobId job = 0;
  int attempt = 0;
  std::vector<int> gpu_indices;
  std::vector<std::string> gpu_uuids;
  int master_port = 0;    // 0: none (single-GPU and CPU jobs); node 0's for a multi-node job
  std::string run_dir{};  // "": no TRAINQ_RUN_DIR (tests)
  // A part of a multi-node (gang) job: this node's rank, the number of nodes and node 0's
  // address (its node_address). A multi-node job always has a master_port, even with one GPU
  // per node: its nodes' ranks meet there. num_nodes 1 and master_addr "": one node, as
  // before (MASTER_ADDR 127.0.0.1).
  int node_rank = 0;
  int num_nodes = 1;
  std::string master_addr{};
  // Where each part runs, in rank order (one name for one node): SLURM_JOB_NODELIST.
  std::vector<std::string> node_names{};
  // A `trainq sbatch` job's: the folder with srun and scontrol, put first on its PATH, and
  // this node's API (a unix: URL) as TRAINQ_SERVER, which srun asks to start a step's tasks
  // on the job's other nodes. "": neither.
  std::string slurm_bin_dir{};
  std::string local_api{};
};

// Names the attempt in the environment of every process it starts: whatever their session or
// parent, the daemon finds an attempt's processes by it once their shim is gone.
inline constexpr const char* kRunDirEnv = "TRAINQ_RUN_DIR";

// The job's environment (each name once; a later entry wins, as with repeated --env) plus,
// overriding any the job set, CUDA_VISIBLE_DEVICES (NVML indices, "" for CPU jobs),
// CUDA_DEVICE_ORDER=PCI_BUS_ID, TRAINQ_JOB_ID, TRAINQ_ATTEMPT, TRAINQ_GPUS (uuids),
// TRAINQ_NUM_GPUS, TRAINQ_RUN_DIR (the attempt's run dir: kRunDirEnv). With a master_port
// (multi-GPU jobs), the distributed environment an unmodified `torchrun train.py` needs to use
// exactly the attempt's GPUs on this node: MASTER_ADDR=127.0.0.1, MASTER_PORT, PET_MASTER_ADDR,
// PET_MASTER_PORT, PET_NPROC_PER_NODE=<gpus>, PET_NNODES=1; and the per-worker variables torchrun
// sets itself (WORLD_SIZE, RANK, LOCAL_RANK, ...) removed, so stale ones from the submitting shell
// cannot mislead it.
// A part of a multi-node job (num_nodes > 1) has MASTER_ADDR and PET_MASTER_ADDR = master_addr,
// PET_NNODES = NNODES = TRAINQ_NUM_NODES = num_nodes, PET_NODE_RANK = NODE_RANK =
// TRAINQ_NODE_RANK = node_rank, PET_NPROC_PER_NODE = this node's GPUs, and WORLD_SIZE = num_nodes
// x this node's GPUs (every part of a gang has as many), for launchers other than torchrun;
// torchrun sets each worker's WORLD_SIZE to the same value.
// A job of a group has TRAINQ_GROUP; an array's, TRAINQ_ARRAY_INDEX. A job `trainq sbatch`
// submitted (slurm_env) also has what Slurm gives a batch script: SLURM_JOB_ID, SLURM_JOB_NAME,
// SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID, SLURM_NNODES, SLURM_NODEID, SLURM_PROCID,
// SLURM_GPUS_ON_NODE, SLURM_JOB_NODELIST and the like (docs/workflow.md, "sbatch").
std::vector<std::pair<std::string, std::string>> BuildAttemptEnv(const JobSpec& spec,
                                                                 const AttemptEnvInput& in);

}  // namespace trainq
