// `trainq sbatch` (docs/workflow.md, "Slurm batch scripts"): reads a Slurm batch script's
// #SBATCH lines and sbatch's own options into what trainq submits. Pure; the CLI reads the
// file and sends the jobs.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainq/status.h"

namespace trainq {

// The options trainq honours, as given (checked when the CLI builds the submit). Each field
// empty/nullopt when the script and the command line leave it unset.
struct SbatchOptions {
  std::string job_name;                  // --job-name, -J
  std::optional<int> gpus;               // per node: --gres=gpu:N, --gpus-per-node
  std::optional<int> gpus_total;         // the job's: --gpus, -G
  std::string gpu_type;                  // the TYPE of --gres=gpu:TYPE:N or --gpus=TYPE:N
  std::vector<std::string> constraints;  // --constraint, -C, as ParseConstraint gives it
  // pyxis's options (docs/containers.md): --container-image, --container-mounts (a comma
  // list of SRC:DST[:ro]), --container-workdir.
  std::string container_image;
  std::vector<std::string> container_mounts;
  std::string container_workdir;
  std::string mem_per_gpu;               // --mem-per-gpu, a size as --mem takes it
  std::optional<int64_t> time_limit_ms;  // --time, -t
  std::string array;                     // --array, as ParseArray takes it
  std::vector<int64_t> after_ok;         // --dependency=afterok:ID[:ID...]
  std::vector<int64_t> after_any;        // --dependency=afterany:ID[:ID...]
  std::string output;                    // --output, -o: a pattern (%j %A %a %x %u %N %%)
  std::string error;                     // --error, -e
  std::optional<int> nodes;              // --nodes, -N (a range's min)
  // --nodes=MIN-MAX: Slurm allocates MIN to MAX nodes when the job starts; trainq starts it on
  // as many as have its GPUs then (an elastic gang that grows only at its start).
  std::optional<int> max_nodes;
  std::optional<int> cpus_per_task;    // --cpus-per-task, -c
  std::optional<int> ntasks;           // --ntasks, -n: srun's tasks in the allocation
  std::optional<int> ntasks_per_node;  // --ntasks-per-node
  std::optional<int> gpus_per_task;    // --gpus-per-task
  std::string chdir;                   // --chdir, -D
  std::vector<std::string> nodelist;   // --nodelist, -w
  std::vector<std::string> exclude;    // --exclude, -x
  std::string mail_user;               // --mail-user
  std::string signal;                  // --signal, as ParseSignalOption takes it
  std::optional<bool> requeue;         // --requeue, --no-requeue
  bool hold = false;                   // --hold, -H: submitted held (scontrol release)
  // trainq's own lines, "#TRAINQ --stage SRC[:DST]", "#TRAINQ --collect PATTERN",
  // "#TRAINQ --collect-to DIR" (docs/cluster.md): what travels with the job.
  std::vector<std::string> stage;
  std::vector<std::string> collect;
  std::string collect_to;
  bool parsable = false;  // --parsable
  // Where each option read was last set, by its long name: "#SBATCH line 5: --cpus-per-task=8"
  // or "the command line: -c 8", so what the daemon refuses is told against the user's line.
  std::map<std::string, std::string> origin;
  // Options read and not honoured, each a line naming it and why ("#SBATCH --partition=gpu
  // (line 3): trainq has no partitions; ignored").
  std::vector<std::string> warnings;
};

// Applies sbatch options `words` (as split from a command line or one #SBATCH line) to
// `out`; `where` names their source in messages ("#SBATCH line 4", "the command line").
// kInvalid naming the option, its source and the accepted form for a value that cannot be
// read; an option trainq does not know or cannot honour becomes a warning.
Status ApplySbatchOptions(const std::vector<std::string>& words, std::string_view where,
                          SbatchOptions& out);

// sbatch's command line before the script: applies the options up to the first word that is
// not an option (`stop_at_word`) and returns its index (words.size() when there is none).
Result<size_t> ApplySbatchCommandLine(const std::vector<std::string>& words, std::string_view where,
                                      SbatchOptions& out, bool stop_at_word = true);

// The #SBATCH lines of `script` applied in order, as sbatch reads them: from the line after
// the "#!" line up to the first line that is neither blank nor a comment; #TRAINQ lines in
// the same place give --stage, --collect and --collect-to (anything else there is refused).
// kInvalid when the script does not start with "#!" (sbatch refuses it too) or a line cannot be
// read.
Status ReadSbatchScript(std::string_view script, SbatchOptions& out);

// What the options ask of the allocation, as Slurm reads them: N nodes, each running
// tasks_per_node[i] of the `ntasks` tasks srun starts (block distribution: the first nodes
// take one more when ntasks does not divide evenly), each node holding gpus_per_node GPUs
// (--gpus-per-node/--gres, --gpus over the nodes, else --gpus-per-task x its tasks) and
// cpus_per_node CPU slots
// (--cpus-per-task, 1 by default, x its tasks; 0 when no --cpus-per-task, --ntasks or
// --ntasks-per-node was given). kInvalid naming the options that
// disagree.
struct SbatchAllocation {
  int nodes = 1;
  int ntasks = 1;
  std::vector<int> tasks_per_node{1};
  int gpus_per_node = 0;
  int cpus_per_node = 0;
};
Result<SbatchAllocation> AllocationOf(const SbatchOptions& o);

// The interpreter of the script's "#!" line and its one optional argument
// ("#!/usr/bin/env bash" -> {"/usr/bin/env", "bash"}).
std::vector<std::string> ShebangOf(std::string_view script);

// An --output/--error pattern with its fixed parts filled in (%x job name, %u user, %%),
// and the parts known only when the job runs turned into the variables the job has then:
// %j -> ${SLURM_JOB_ID}, %A -> ${SLURM_ARRAY_JOB_ID} (the job id outside an array), %a ->
// ${SLURM_ARRAY_TASK_ID} (4294967294 outside an array, as Slurm writes it),
// %N -> ${SLURMD_NODENAME}, all of it quoted for sh. Unknown % letters are kept as Slurm
// keeps them.
std::string ShellPathOf(std::string_view pattern, std::string_view job_name, std::string_view user);

}  // namespace trainq
