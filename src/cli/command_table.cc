#include "src/cli/command_table.h"

#include <array>
#include <charconv>
#include <memory>
#include <string_view>

#include <CLI/CLI.hpp>

#include "src/cli/commands.h"
#include "src/cli/completion.h"
#include "src/cli/sim_command.h"
#include "src/cli/slurm_tools.h"

namespace trainq {

namespace {

Client& ClientOf(Invocation& inv) { return *inv.client; }

// --gpus or --nodes: N, or MIN:MAX for an elastic job (`max` 0 for N); the daemon judges the
// numbers (ValidateSpec). `form` names the accepted forms in the refusal.
void AddRangeOption(CLI::App* s, const char* names, const char* option, const char* form,
                    const char* help, int& min, int& max) {
  s->add_option_function<std::string>(
       names,
       [option, form, &min, &max](const std::string& text) {
         auto number = [&](std::string_view part) {
           int n = 0;
           auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
           if (ec != std::errc() || end != part.data() + part.size() || part.empty()) {
             throw CLI::ValidationError(option, "'" + text + "' is not valid; expected " + form);
           }
           return n;
         };
         std::string_view all(text);
         size_t colon = all.find(':');
         min = number(all.substr(0, colon));
         max = colon == std::string_view::npos ? 0 : number(all.substr(colon + 1));
       },
       help)
      ->type_name("N|MIN:MAX");
}

// The options of `submit`, which `run` takes too.
void AddSubmitOptions(CLI::App* s, SubmitArgs& a) {
  AddRangeOption(s, "--gpus", "--gpus",
                 "a count (2; 0 = CPU job) or an elastic range MIN:MAX (1:4)",
                 "GPUs on one node, or on each with --nodes (0 = CPU job); MIN:MAX: an elastic "
                 "job that runs on MIN to MAX GPUs of one node, resized as GPUs free up or are "
                 "needed",
                 a.gpus, a.max_gpus);
  s->add_option("--mem", a.mem,
                "GPU memory per GPU: 20GiB, 20G, 512MiB, 20GB, 40% (default: whole GPUs)");
  s->add_option("--cpus", a.cpus,
                "host CPU slots the job holds (default: 1 for a CPU job, none for a GPU job)");
  s->add_option("--name", a.name, "a name (default: the command)");
  s->add_option("--priority", a.priority, "higher runs first");
  s->add_option("--retries", a.retries, "retries after GPU out-of-memory");
  s->add_flag("--hold", a.hold, "store it held: it waits until trainq release");
  s->add_option("--cwd", a.cwd, "working directory (default: the current one)");
  // One value per --env: a vector option would otherwise also take the words after it and
  // swallow the `--` that ends the options, so the command's own flags would be refused.
  s->add_option("--env", a.env, "K=V added to the job's environment (repeatable)")
      ->allow_extra_args(false);
  s->add_option("--after", a.after,
                "start only after these jobs succeeded: ID[,ID...]; if one "
                "fails or is cancelled, this job is cancelled")
      ->allow_extra_args(false);
  s->add_option("--after-any", a.after_any,
                "start after these jobs ended, whatever the outcome: "
                "ID[,ID...]")
      ->allow_extra_args(false);
  s->add_option("--time", a.time,
                "wall-clock limit per attempt: 2h30m, 90m, 45s, 1d, plain "
                "minutes (90) or H:MM:SS; then SIGTERM, grace, SIGKILL and the job fails");
  s->add_option("--mem-limit", a.mem_limit,
                "host memory (RAM) per attempt, not GPU memory: 4GiB, 512MiB; past it the "
                "kernel kills the job's processes and the job fails (default: the daemon's)");
  s->add_option("--max-procs", a.max_procs,
                "most processes and threads the job may have at once; more forks fail "
                "(default: the daemon's)");
  s->add_option("--node", a.nodes,
                "run only on these nodes of a cluster: NAME[,NAME...] (Slurm's -w)")
      ->allow_extra_args(false);
  s->add_option("--exclude-node", a.exclude_nodes,
                "never run on these nodes: NAME[,NAME...] (Slurm's -x)")
      ->allow_extra_args(false);
  AddRangeOption(s, "--nodes,-N", "--nodes", "a node count (2) or an elastic range MIN:MAX (1:4)",
                 "a job over N nodes at once, --gpus GPUs on each (a gang: all start or none); "
                 "MIN:MAX: an elastic gang for torchrun's rendezvous, started on MIN to MAX nodes "
                 "and grown by nodes that join it while it runs",
                 a.num_nodes, a.max_nodes);
  s->add_option("--gpu-type", a.gpu_type,
                "only GPUs of this model or label: a100, h100, \"rtx 4090\" (words of the model "
                "name, any case; or a node's gpu_type label)");
  s->add_option("--constraint,-C", a.constraints,
                "only nodes with these features (config node_features): ib, ib&nvlink (all), "
                "a100|h100 (any); repeatable, all must hold")
      ->allow_extra_args(false);
  s->add_option("--image", a.image,
                "run in a container of this image: a name in the node's image store, or a "
                "`podman save`/`docker save` tar or OCI archive (docs/containers.md)");
  s->add_option("--mount", a.mounts,
                "with --image: SRC:DST[:ro] mounted in the container "
                "(repeatable); the job's directory always is")
      ->allow_extra_args(false);
  s->add_option("--shm-size", a.shm_size,
                "with --image: the size of /dev/shm (default: the daemon's container_shm_size)");
  s->add_option("--container-workdir", a.container_workdir,
                "with --image: the working directory inside (default: the job's directory)");
  s->add_option("--stage", a.stage,
                "SRC[:DST]: a file or directory here the job finds at DST (relative to its "
                "directory; default: SRC's own place) on whatever node runs it, as it is now "
                "(repeatable; docs/cluster.md)")
      ->allow_extra_args(false);
  s->add_option("--collect", a.collect,
                "PATTERN: when an attempt on another node ends, copy the files of its directory "
                "that match (checkpoints/*.pt, metrics.json) back here (repeatable; "
                "docs/cluster.md)")
      ->allow_extra_args(false);
  s->add_option("--collect-to", a.collect_to,
                "where --collect copies to (default: the job's directory here)");
  s->add_option("--signal", a.signal,
                "[B:]SIG[@T]: send SIG (USR1, TERM, ...) T seconds (default 60) before the time "
                "limit or a preemption stops the job, so it can save a checkpoint; B: to the "
                "command's own process only (Slurm's --signal)");
  s->add_flag("--requeue", a.requeue,
              "when preempted, queue the job again under the same id (TRAINQ_RESTART_COUNT "
              "counts the restarts); without it a preempted job ends cancelled");
  s->add_flag_function(
      "--preemptible", [&a](int64_t) { a.preemptible = true; },
      "a waiting job of higher priority may stop this one (after --signal's warning) "
      "(docs/scheduling.md); the config's preemptible option makes it the default");
  s->add_flag_function(
      "--no-preemptible", [&a](int64_t) { a.preemptible = false; },
      "never preempted, whatever the config's default");
  s->add_option("--checkpoint", a.checkpoint,
                "GLOB: files the job writes when signalled (checkpoints/*.pt); a stopped "
                "attempt's end says whether one was written after the signal");
  s->add_option("--notify", a.notify,
                "POST the job's end as JSON to this URL (retried; docs/workflow.md)");
  s->add_option("--mail", a.mail,
                "mail yourself when the job ends: your user name, or USER@DOMAIN for a domain of "
                "the daemon's mail_domains (needs a local sendmail)");
  s->add_flag_function(
      "--snapshot", [&a](int64_t) { a.snapshot = "git"; },
      "run in a copy of the git work tree made now (docs/workflow.md); the config's snapshot "
      "option makes it the default");
  s->add_flag_function(
      "--no-snapshot", [&a](int64_t) { a.snapshot = "off"; }, "run in the tree as it is");
  s->add_option("command", a.command, "the command and its arguments, after --");
}

Action SetupSubmit(CLI::App& cmd) {
  cmd.alias("add");
  auto a = std::make_shared<SubmitArgs>();
  AddSubmitOptions(&cmd, *a);
  cmd.add_flag("--json", a->json, "print the job as JSON ({\"ids\", \"group\"} for a sweep)");
  cmd.add_option("--from", a->from,
                 "queue one job per line of FILE (- for standard input): a command line (quoted "
                 "as in sh, never expanded) or a JSON job object; the options above are each "
                 "job's defaults, and --name is numbered (NAME-1, NAME-2...)");
  cmd.add_option("--sweep", a->sweeps,
                 "NAME=V1,V2,...: one job per value, {NAME} in the command replaced; repeat for "
                 "the cross product; all in one group")
      ->allow_extra_args(false);
  cmd.add_option("--array", a->array,
                 "one job per index as Slurm's --array: 0-15, 1,3,5, 0-15:2, then %N for at most "
                 "N running at once; TRAINQ_ARRAY_INDEX and {index} in the command");
  return [a](Invocation& inv) { return CmdSubmit(ClientOf(inv), *a); };
}

Action SetupRun(CLI::App& cmd) {
  auto a = std::make_shared<SubmitArgs>();
  AddSubmitOptions(&cmd, *a);
  return [a](Invocation& inv) { return CmdRun(ClientOf(inv), *a); };
}

Action SetupShell(CLI::App& cmd) {
  auto a = std::make_shared<ShellArgs>();
  AddSubmitOptions(&cmd, a->submit);
  cmd.add_flag("--no-log", a->no_log,
               "keep no transcript: the program's output is not written to the job's log");
  return [a](Invocation& inv) { return CmdShell(ClientOf(inv), *a); };
}

Action SetupWait(CLI::App& cmd) {
  auto a = std::make_shared<WaitArgs>();
  cmd.add_option("ids", a->ids, "job ids");
  cmd.add_option("--group", a->group, "every job of this group");
  cmd.add_flag("--any", a->any, "return when the first of them ends, with its code");
  cmd.add_flag("--json", a->json, "at the end, each job's state and exit code as JSON");
  return [a](Invocation& inv) { return CmdWait(ClientOf(inv), *a); };
}

Action SetupSbatch(CLI::App&) {
  return [](Invocation& inv) {
    SbatchArgs args;
    args.words.assign(inv.raw_words.begin(), inv.raw_words.end());
    return CmdSbatch(ClientOf(inv), args);
  };
}

Action SetupSalloc(CLI::App&) {
  return [](Invocation& inv) {
    SbatchArgs args;
    args.words.assign(inv.raw_words.begin(), inv.raw_words.end());
    return CmdSalloc(ClientOf(inv), args);
  };
}

Action SetupSrun(CLI::App&) {
  return [](Invocation& inv) {
    return RunSrun(std::vector<std::string>(inv.raw_words.begin(), inv.raw_words.end()));
  };
}

Action SetupDiff(CLI::App& cmd) {
  auto ids = std::make_shared<std::array<std::string, 2>>();
  auto as_json = std::make_shared<bool>(false);
  cmd.add_option("first", (*ids)[0], "job id")->required();
  cmd.add_option("second", (*ids)[1], "job id")->required();
  cmd.add_flag("--json", *as_json, "JSON output");
  return [ids, as_json](Invocation& inv) {
    return CmdDiff(ClientOf(inv), (*ids)[0], (*ids)[1], *as_json);
  };
}

Action SetupList(CLI::App& cmd) {
  auto a = std::make_shared<ListArgs>();
  cmd.add_flag("--all,-a", a->all, "done jobs too");
  cmd.add_option("--state", a->state, "only these states, comma-separated");
  cmd.add_flag("--json", a->json, "JSON output");
  cmd.add_option("--limit", a->limit,
                 "show at most N jobs: the oldest, or with --newest the newest; 0: all (the "
                 "table shows 200 unless told, --json and -q all)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_flag("--newest", a->newest, "newest first, done jobs too");
  cmd.add_flag("--reverse,-r", a->reverse, "the listed jobs in the opposite order");
  cmd.add_flag("--quiet,-q", a->quiet, "only the ids, one per line");
  cmd.add_option("--user,-u", a->user, "only this user's jobs");
  cmd.add_flag("--mine", a->mine, "only your own jobs");
  cmd.add_option("--group,-g", a->group,
                 "only this group's jobs (a sweep, an array), done ones too");
  return [a](Invocation& inv) { return CmdList(ClientOf(inv), *a); };
}

struct JobView {
  std::string id;
  bool json = false;
};

std::shared_ptr<JobView> AddJobView(CLI::App& cmd) {
  auto a = std::make_shared<JobView>();
  cmd.add_option("id", a->id, "job id")->required();
  cmd.add_flag("--json", a->json, "JSON output");
  return a;
}

Action SetupShow(CLI::App& cmd) {
  auto a = AddJobView(cmd);
  return [a](Invocation& inv) { return CmdShow(ClientOf(inv), a->id, a->json); };
}

Action SetupExplain(CLI::App& cmd) {
  auto a = AddJobView(cmd);
  return [a](Invocation& inv) { return CmdExplain(ClientOf(inv), a->id, a->json); };
}

struct LogsArgs {
  std::string id;
  bool follow = false;
  int attempt = 0;
  int tail = -1;
  bool json = false;
  std::string node;
};

Action SetupLogs(CLI::App& cmd) {
  auto a = std::make_shared<LogsArgs>();
  cmd.add_option("id", a->id, "job id")->required();
  cmd.add_flag("--follow,-f", a->follow, "keep printing until the attempt ends");
  cmd.add_option("--attempt", a->attempt, "attempt number");
  cmd.add_option("--tail,-n", a->tail, "start at the last N lines (with -f: then follow)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_flag("--json", a->json,
               "the log as it is now, as JSON ({\"job\", \"attempt\", \"text\"})");
  cmd.add_option("--node", a->node,
                 "one part of a multi-node job: its rank (0, 1, ...) or node name (default: every "
                 "part, each line after [RANK NODE])");
  return [a](Invocation& inv) {
    return CmdLogs(ClientOf(inv), a->id, a->follow, a->attempt, a->tail, a->json, a->node);
  };
}

// `cancel` and `retry` choose jobs alike; their help says which each acts on.
std::shared_ptr<JobSelection> AddSelection(CLI::App& cmd, bool is_cancel) {
  auto s = std::make_shared<JobSelection>();
  cmd.add_option("ids", s->ids, "job ids, lists and ranges: 12 597,598 10-20");
  cmd.add_option("--group,-g", s->group,
                 is_cancel ? "this group's jobs that have not ended"
                           : "this group's jobs that failed or were cancelled");
  cmd.add_option("--name", s->name, "your jobs whose name matches this glob (lr-*)");
  cmd.add_option("--state", s->state,
                 is_cancel ? "your jobs in these states (default: all that have not ended)"
                           : "your jobs in these states (default: failed,cancelled)");
  cmd.add_flag("--all-mine", s->all_mine,
               is_cancel ? "every job of yours that has not ended"
                         : "every job of yours that failed or was cancelled");
  cmd.add_flag("--json", s->json, "each job's outcome as JSON ({\"results\": [...]})");
  return s;
}

Action SetupUpdate(CLI::App& cmd) {
  auto a = std::make_shared<UpdateArgs>();
  cmd.add_option("ids", a->ids, "job ids, lists and ranges: 12 597,598 10-20")->required();
  cmd.add_option("--priority", a->priority, "higher runs first");
  cmd.add_option("--gpus", a->gpus, "GPUs on one node (on each of a gang's)");
  cmd.add_option("--mem", a->mem, "GPU memory per GPU, as submit takes it");
  cmd.add_option("--cpus", a->cpus, "host CPU slots");
  cmd.add_option("--time", a->time, "the wall-clock limit of each attempt, as submit takes it");
  cmd.add_option("--name", a->name, "a new name (a running job's too)");
  cmd.add_option("--after", a->after, "start only after these succeeded: ID[,ID...], or none");
  cmd.add_option("--after-any", a->after_any, "start after these ended: ID[,ID...], or none");
  cmd.add_option("--gpu-type", a->gpu_type, "only GPUs of this model or label, or none");
  cmd.add_option("--constraint,-C", a->constraints,
                 "only nodes with these features, as submit takes them, or none")
      ->allow_extra_args(false);
  cmd.add_flag("--json", a->json, "each job's outcome as JSON ({\"results\": [...]})");
  return [a](Invocation& inv) { return CmdUpdate(ClientOf(inv), *a); };
}

Action SetupHoldOrRelease(CLI::App& cmd, bool hold) {
  auto a = std::make_shared<UpdateArgs>();
  a->hold = hold;
  cmd.add_option("ids", a->ids, "job ids, lists and ranges: 12 597,598 10-20")->required();
  cmd.add_flag("--json", a->json, "each job's outcome as JSON ({\"results\": [...]})");
  return [a](Invocation& inv) { return CmdUpdate(ClientOf(inv), *a); };
}
Action SetupHold(CLI::App& cmd) { return SetupHoldOrRelease(cmd, true); }
Action SetupRelease(CLI::App& cmd) { return SetupHoldOrRelease(cmd, false); }

Action SetupAcct(CLI::App& cmd) {
  auto a = std::make_shared<AcctArgs>();
  cmd.add_option("--user", a->user, "one user's jobs (default: yours)");
  cmd.add_flag("--all-users", a->all_users, "every user's jobs");
  cmd.add_option("--since", a->since, "jobs that ended this long ago or later: 7d, 12h");
  cmd.add_flag("--json", a->json, "JSON output ({\"jobs\", \"users\"})");
  return [a](Invocation& inv) { return CmdAcct(ClientOf(inv), *a); };
}

Action SetupCancel(CLI::App& cmd) {
  auto s = AddSelection(cmd, true);
  cmd.add_option("--signal,-s", s->signal,
                 "send this signal (USR1, TERM, 10) to running jobs instead of stopping them, as "
                 "scancel --signal");
  cmd.add_flag("--batch,-b", s->batch,
               "with --signal: to the job's command (an sbatch script's shell) only, not every "
               "process");
  return [s](Invocation& inv) { return CmdCancel(ClientOf(inv), *s); };
}

Action SetupRequeue(CLI::App& cmd) {
  auto a = std::make_shared<RequeueArgs>();
  cmd.add_option("ids", a->ids, "running jobs (default: the job this runs in, TRAINQ_JOB_ID)");
  cmd.add_flag("--json", a->json, "each job's outcome as JSON ({\"results\": [...]})");
  return [a](Invocation& inv) { return CmdRequeue(ClientOf(inv), *a); };
}

Action SetupRetry(CLI::App& cmd) {
  auto s = AddSelection(cmd, false);
  cmd.add_flag("--failed", s->failed, "only those that failed");
  return [s](Invocation& inv) { return CmdRetry(ClientOf(inv), *s); };
}

Action SetupPauseOrResume(CLI::App& cmd, bool pause) {
  auto gpus = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  cmd.add_option("--gpus", *gpus, "only on these GPUs: 0,1");
  cmd.add_flag("--json", *as_json, "what is paused now, as JSON");
  return [gpus, pause, as_json](Invocation& inv) {
    return CmdPause(ClientOf(inv), *gpus, pause, *as_json);
  };
}

Action SetupPause(CLI::App& cmd) { return SetupPauseOrResume(cmd, true); }
Action SetupResume(CLI::App& cmd) { return SetupPauseOrResume(cmd, false); }

Action SetupClean(CLI::App& cmd) {
  auto a = std::make_shared<CleanArgs>();
  cmd.add_option("--before", a->before, "only those that ended at least this long ago: 7d");
  cmd.add_option("--state", a->state,
                 "only these: succeeded, failed, cancelled (default: all three)");
  cmd.add_flag("--keep-logs", a->keep_logs, "keep their run dirs and logs");
  cmd.add_flag("--all-users", a->all_users, "every user's jobs (admins)");
  cmd.add_flag("--json", a->json, "JSON output ({\"forgotten\", \"ids\", \"message\"})");
  return [a](Invocation& inv) { return CmdClean(ClientOf(inv), *a); };
}

Action SetupCompletion(CLI::App& cmd) {
  auto shell = std::make_shared<std::string>();
  cmd.add_option("shell", *shell, "bash, zsh or fish")->required();
  return [shell](Invocation& inv) { return CmdCompletion(inv.root, JobIdCommands(), *shell); };
}

Action SetupGpus(CLI::App& cmd) {
  auto flags = std::make_shared<std::array<bool, 2>>();  // --json, --topo
  cmd.add_flag("--json", (*flags)[0], "JSON output");
  cmd.add_flag("--topo", (*flags)[1], "how far apart the GPUs are (as nvidia-smi topo -m)");
  return [flags](Invocation& inv) {
    auto [as_json, topo] = *flags;
    return topo ? CmdGpuTopology(ClientOf(inv), as_json) : CmdGpus(ClientOf(inv), as_json);
  };
}

// An action that takes --json alone.
Action WithJson(CLI::App& cmd, int (*run)(Client&, bool)) {
  auto as_json = std::make_shared<bool>(false);
  cmd.add_flag("--json", *as_json, "JSON output");
  return [as_json, run](Invocation& inv) { return run(ClientOf(inv), *as_json); };
}

// An action that takes nothing.
Action Plain(int (*run)(Client&)) {
  return [run](Invocation& inv) { return run(ClientOf(inv)); };
}

// One required positional word.
Action WithWord(CLI::App& cmd, const char* name, const char* help,
                int (*run)(Client&, const std::string&)) {
  auto word = std::make_shared<std::string>();
  cmd.add_option(name, *word, help)->required();
  return [word, run](Invocation& inv) { return run(ClientOf(inv), *word); };
}

Action SetupDaemon(CLI::App& cmd) {
  auto foreground = std::make_shared<bool>(false);
  cmd.add_flag("--foreground", *foreground,
               "run trainqd in the foreground, logging to stderr (as 'trainqd' does)");
  return [foreground](Invocation& inv) {
    return *foreground ? CmdDaemonForeground(ClientOf(inv)) : CmdDaemonStart(ClientOf(inv));
  };
}

Action SetupDaemonStart(CLI::App& cmd) {
  // `daemon --foreground start` runs it in the foreground too.
  CLI::App* daemon = cmd.get_parent();
  return [daemon](Invocation& inv) {
    return daemon->count("--foreground") > 0 ? CmdDaemonForeground(ClientOf(inv))
                                             : CmdDaemonStart(ClientOf(inv));
  };
}

Action SetupDaemonStop(CLI::App&) { return Plain(CmdDaemonStop); }
Action SetupDaemonStatus(CLI::App& cmd) { return WithJson(cmd, CmdDaemonStatus); }

Action SetupDaemonBackup(CLI::App& cmd) {
  return WithWord(cmd, "path", "the file to write (replaced once complete)", CmdDaemonBackup);
}

Action SetupConfigShow(CLI::App& cmd) { return WithJson(cmd, CmdConfigShow); }

Action SetupConfigGet(CLI::App& cmd) {
  auto key = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  cmd.add_option("key", *key, "option name, e.g. devices or max-jobs-per-gpu");
  cmd.add_flag("--json", *as_json, "JSON output");
  return [key, as_json](Invocation& inv) { return CmdConfigGet(ClientOf(inv), *key, *as_json); };
}

Action SetupConfigSet(CLI::App& cmd) {
  // The daemon owns the option table; it names the settable options when a key is wrong.
  auto kv = std::make_shared<std::array<std::string, 2>>();
  cmd.add_option("key", (*kv)[0], "an option settable at run time, e.g. devices")->required();
  cmd.add_option("value", (*kv)[1], "the new value")->required();
  return [kv](Invocation& inv) { return CmdConfigSet(ClientOf(inv), (*kv)[0], (*kv)[1]); };
}

Action SetupConfigCheck(CLI::App&) { return Plain(CmdConfigCheck); }

Action SetupConfigUnset(CLI::App& cmd) {
  return WithWord(cmd, "key", "an option settable at run time", CmdConfigUnset);
}

Action SetupTokenCreate(CLI::App& cmd) {
  auto a = std::make_shared<TokenArgs>();
  cmd.add_option("name", a->name, "its name: 1 to 64 of A-Z a-z 0-9 . _ -")->required();
  cmd.add_option("--role", a->role, "read, submit or admin")->required();
  cmd.add_option("--user", a->user, "the user it acts as (default: yours)");
  cmd.add_option("--expires", a->expires, "lifetime: 30d, 12h, ... (default: none)");
  cmd.add_flag("--json", a->json, "JSON output");
  return [a](Invocation& inv) { return CmdTokenCreate(ClientOf(inv), *a); };
}

Action SetupTokenList(CLI::App& cmd) { return WithJson(cmd, CmdTokenList); }

Action SetupTokenRevoke(CLI::App& cmd) {
  return WithWord(cmd, "name", "the token's name", CmdTokenRevoke);
}

Action SetupNodes(CLI::App& cmd) { return WithJson(cmd, CmdNodes); }

Action SetupDashboard(CLI::App& cmd) {
  auto as_json = std::make_shared<bool>(false);
  auto no_open = std::make_shared<bool>(false);
  cmd.add_flag("--json", *as_json, "JSON output");
  cmd.add_flag("--no-open", *no_open, "only print the URL, even where a display could show it");
  return [as_json, no_open](Invocation& inv) {
    return CmdDashboard(ClientOf(inv), *as_json, !*no_open);
  };
}

Action SetupNodeDrainOrResume(CLI::App& cmd, bool drain) {
  auto name = std::make_shared<std::string>();
  cmd.add_option("name", *name, "the node, as `trainq nodes` names it")->required();
  return [name, drain](Invocation& inv) { return CmdNodeDrain(ClientOf(inv), *name, drain); };
}

Action SetupNodeDrain(CLI::App& cmd) { return SetupNodeDrainOrResume(cmd, true); }

Action SetupNodeRemove(CLI::App& cmd) {
  auto name = std::make_shared<std::string>();
  cmd.add_option("name", *name, "the node, as `trainq nodes` names it")->required();
  return [name](Invocation& inv) { return CmdNodeRemove(ClientOf(inv), *name); };
}
Action SetupNodeResume(CLI::App& cmd) { return SetupNodeDrainOrResume(cmd, false); }

// In the order `trainq --help` lists them; a group before the commands below it.
constexpr CommandRow kCommands[] = {
    {"submit", "queue a job: trainq submit [opts] -- CMD [ARG...]", SetupSubmit},
    {"run",
     "submit, wait in line, stream the output and exit with the job's exit code; Ctrl-C "
     "cancels it (twice: detach)",
     SetupRun, kNoData},
    {"wait", "block until the jobs end; exit 0 if all succeeded, else the first failed one's code",
     SetupWait, kJobIds},
    {"shell",
     "an interactive session on queued GPUs: waits in line, then runs COMMAND (default: your "
     "shell) on a terminal joined to yours, as srun --pty; trainq shell [opts] [-- CMD...]",
     SetupShell, kNoData},
    {"sbatch",
     "run a Slurm batch script: its #SBATCH lines become trainq's options; "
     "trainq sbatch [SBATCH OPTIONS] SCRIPT [ARGS]",
     SetupSbatch, kRawWords | kNoData},
    {"salloc",
     "Slurm's salloc: sbatch's options, then COMMAND (default: your shell) as a session with "
     "the SLURM_* variables; srun inside runs steps on it; trainq salloc [OPTIONS] [COMMAND]",
     SetupSalloc, kRawWords | kNoData},
    {"srun",
     "Slurm's srun: inside a job, a step on its allocation; outside one, srun --pty [OPTIONS] "
     "COMMAND is trainq salloc (a session)",
     SetupSrun, kRawWords | kNoData},
    {"diff", "what differs between two runs: commit, uncommitted changes, command, env", SetupDiff,
     kJobIds},
    {"ls", "waiting and running jobs", SetupList},
    {"show", "everything about a job, all its attempts", SetupShow, kJobIds},
    {"acct",
     "what jobs took, as sacct: wait, run time, GPUs, GPU-hours, peak, attempts, end; "
     "per user, totals",
     SetupAcct},
    {"explain", "why a job waits: reason, GPUs, holds, line, fair share", SetupExplain, kJobIds},
    {"logs", "output of the latest (or Nth) attempt", SetupLogs, kJobIds},
    {"cancel", "cancel waiting jobs (they stay, cancelled), stop running ones", SetupCancel,
     kJobIds},
    {"retry", "queue jobs that ended again, as new attempts", SetupRetry, kJobIds},
    {"requeue",
     "stop running jobs now and queue them again under their ids (inside a job: itself, after "
     "saving a checkpoint)",
     SetupRequeue, kJobIds},
    {"update",
     "change waiting jobs: --priority --gpus --mem --cpus --time --name --after (a running "
     "job's name and priority)",
     SetupUpdate, kJobIds},
    {"hold", "keep waiting jobs from starting until trainq release", SetupHold, kJobIds},
    {"release", "let held jobs start again", SetupRelease, kJobIds},
    {"pause", "start no new jobs (all, or on --gpus); running ones go on", SetupPause},
    {"resume", "start jobs again (all, or on --gpus)", SetupResume},
    {"clean", "forget jobs that ended, and their logs; the queue's store stays small", SetupClean},
    {"completion", "print a completion script: source <(trainq completion bash)", SetupCompletion,
     kLocal | kNoData},
    {"gpus", "each GPU: memory, utilisation, jobs, other processes", SetupGpus},
    {"daemon", "the daemon, trainqd (started on demand by every command)", SetupDaemon, kNoData},
    {"daemon start", "start trainqd unless it runs", SetupDaemonStart, kNoData},
    {"daemon stop", "stop the daemon; running jobs keep running", SetupDaemonStop, kNoData},
    {"daemon status", "whether the daemon runs, its pid and GPUs", SetupDaemonStatus},
    {"daemon backup", "copy the queue's database to PATH while the daemon runs", SetupDaemonBackup,
     kNoData},
    {"config", "the daemon's options; change limits while it runs"},
    {"config show", "every option, its value and where it came from", SetupConfigShow},
    {"config get", "one option's value in force (all without KEY)", SetupConfigGet},
    {"config set", "change an option now, kept across restarts (docs/config.md marks which)",
     SetupConfigSet, kNoData},
    {"config check", "check the config file as trainqd would read it (trainqd --check-config)",
     SetupConfigCheck, kNoData},
    {"config unset", "drop a run-time value: the config file's applies", SetupConfigUnset, kNoData},
    {"token", "API tokens for remote access (admins)"},
    {"token create", "make a token; it is printed once and only its hash is kept",
     SetupTokenCreate},
    {"token ls", "every token: name, role, user, dates, state (never the token)", SetupTokenList},
    {"token revoke", "refuse a token from now on", SetupTokenRevoke, kNoData},
    {"nodes", "a cluster's nodes: state, leader, GPUs, jobs, heartbeat", SetupNodes},
    {"dashboard",
     "the web dashboard's URL with a fresh read token for you (opened where it can be)",
     SetupDashboard},
    {"node", "drain, resume or remove a cluster's node (admins)"},
    {"node drain", "start no new job there; running ones run on", SetupNodeDrain, kNoData},
    {"node resume", "let jobs start there again", SetupNodeResume, kNoData},
    {"node remove", "forget a lost node, whose jobs were queued again; refused while it is up",
     SetupNodeRemove, kNoData},
    {"sim", "simulate the placement policy on a trace, faster than real time (docs/scheduling.md)",
     nullptr},
    {"sim replay", "jobs arrive, run and leave on a virtual clock; queueing and JCT metrics",
     SetupSimReplay, kLocal},
    {"sim placement", "the FGD protocol: no departures, inflated arrivals, GPU allocation ratio",
     SetupSimPlacement, kLocal},
};

constexpr GlobalOptionRow kGlobalOptions[] = {
    {"--state-dir", "instance directory (default: $TRAINQ_STATE_DIR or ~/.local/state/trainq)",
     &GlobalOptions::state_dir},
    {"--server",
     "the daemon to use: unix:/PATH.sock, http://HOST:PORT or https://HOST:PORT (default: "
     "$TRAINQ_SERVER, else /run/trainq/trainq.sock when a shared daemon serves this machine, "
     "else your personal daemon)",
     &GlobalOptions::server},
};

}  // namespace

std::span<const CommandRow> CommandTable() { return kCommands; }

std::span<const GlobalOptionRow> GlobalOptionTable() { return kGlobalOptions; }

std::set<std::string> JobIdCommands(std::span<const CommandRow> rows) {
  std::set<std::string> out;
  for (const CommandRow& row : rows) {
    if (row.Has(kJobIds)) out.emplace(row.path);
  }
  return out;
}

}  // namespace trainq
