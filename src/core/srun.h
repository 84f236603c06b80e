// `srun` inside a `trainq sbatch` job (docs/workflow.md, "srun and scontrol"): its options,
// the allocation it reads from the batch script's environment, how a step's tasks are laid
// out over the nodes, and each task's environment. Pure; src/cli/slurm_tools.cc runs them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainq/status.h"

namespace trainq {

struct SrunOptions {
  std::optional<int> ntasks;           // -n, --ntasks
  std::optional<int> nodes;            // -N, --nodes
  std::optional<int> ntasks_per_node;  // --ntasks-per-node
  std::optional<int> cpus_per_task;    // -c, --cpus-per-task
  std::optional<int> gpus_per_task;    // --gpus-per-task
  std::vector<std::string> nodelist;   // -w, --nodelist (a Slurm node list)
  std::vector<std::string> exclude;    // -x, --exclude
  std::string chdir;                   // -D, --chdir
  std::string job_name;                // -J, --job-name: SLURM_JOB_NAME of the tasks
  bool label = false;                  // -l, --label: "RANK: " before each line
  bool kill_on_bad_exit = false;       // -K, --kill-on-bad-exit[=0|1]: Slurm's default is off
  bool quiet = false;                  // -Q, --quiet: no warnings
  std::vector<std::string> command;
  // Options read and not honoured, each naming the option and why.
  std::vector<std::string> warnings;
};

// srun's command line (without "srun"): options up to the command. kInvalid naming the option
// and its accepted form for a bad value, an option srun does not have, or no command.
Result<SrunOptions> ParseSrun(const std::vector<std::string>& args);

using EnvMap = std::map<std::string, std::string>;

// The job's allocation as the batch script's environment gives it (the SLURM_* variables
// trainq sets): kInvalid naming the variable when one is missing or unreadable, e.g. srun
// run outside a `trainq sbatch` job.
struct SlurmAllocation {
  std::string job_id;
  std::vector<std::string> nodes;  // SLURM_JOB_NODELIST expanded
  std::vector<int> capacity;       // tasks each node may run (SLURM_TASKS_PER_NODE)
  int node_id = 0;                 // SLURM_NODEID: where this srun runs
  std::optional<int> ntasks;       // SLURM_NTASKS
  std::optional<int> gpus_per_task;
  std::optional<int> cpus_per_task;
};
Result<SlurmAllocation> AllocationFromEnv(const EnvMap& env);

// One step: how many tasks each allocation node runs (0: not in the step) and the global
// rank of each node's first task. Block distribution, as Slurm's default: without -N the
// tasks fill node 0 up to its capacity, then node 1, ...; with -N they spread evenly over
// the first N nodes (the first ones take the extras).
struct StepLayout {
  std::vector<int> tasks;
  std::vector<int> first;
  int ntasks = 0;
  int gpus_per_task = 0;  // 0: every task sees all of its node's GPUs
  std::optional<int> cpus_per_task;
  std::vector<std::string> step_nodes;  // the nodes with tasks, in order
  std::vector<std::string> warnings;    // what srun changed of what was asked, in its words
};
// kInvalid, in srun's words, for a step the allocation cannot hold.
Result<StepLayout> LayOutStep(const SrunOptions& o, const SlurmAllocation& a);

// The names whose values belong to the node a task runs on, not to the node srun ran on:
// a task on another node takes them from that node's part of the job.
bool NodeSpecificVar(std::string_view name);

// The environment of one task: `base` (srun's, with another node's node-specific variables
// already swapped in) plus Slurm's step variables (SLURM_STEP_ID, SLURM_PROCID, SLURM_LOCALID,
// SLURM_NTASKS, ...) and, with --gpus-per-task, the task's share of `node_gpus` (the node's
// CUDA_VISIBLE_DEVICES) in CUDA_VISIBLE_DEVICES and what Slurm sets beside it.
EnvMap TaskEnv(const EnvMap& base, const StepLayout& layout, const SlurmAllocation& a, int node,
               int local, int step, const std::vector<std::string>& node_gpus);

}  // namespace trainq
