// One function per CLI command; each returns the process exit code and prints errors as
// one line on stderr.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/cli/client.h"
#include "src/cli/log_follow.h"
#include "trainq/status.h"

namespace trainq {

struct SubmitArgs {
  std::vector<std::string> command;
  int gpus = 1;
  int max_gpus = 0;  // --gpus MIN:MAX: an elastic job, `gpus` its min
  std::string mem;
  std::optional<int> cpus;  // unset: 1 for a CPU job, none for a GPU job (the daemon decides)
  std::string name;
  int priority = 0;
  int retries = 3;
  std::string cwd;
  std::vector<std::string> env;
  std::string from;                        // --from FILE
  std::vector<std::string> after;          // --after ID[,ID]: each value a comma-separated list
  std::vector<std::string> after_any;      // --after-any ID[,ID]
  std::string time;                        // --time: checked by the daemon (ParseTimeLimit)
  std::string mem_limit;                   // --mem-limit: host memory, checked by the daemon
  std::optional<int64_t> max_procs;        // --max-procs: tasks, checked by the daemon
  std::vector<std::string> nodes;          // --node NAME[,NAME]: each value a comma list
  std::vector<std::string> exclude_nodes;  // --exclude-node NAME[,NAME]
  int num_nodes = 1;                       // --nodes, -N
  int max_nodes = 0;                       // --nodes MIN:MAX: an elastic gang, num_nodes its min
  std::string gpu_type;                    // --gpu-type: checked by the daemon
  std::vector<std::string> constraints;    // --constraint, -C (repeatable: all of them)
  std::string image;                       // --image: a name, or an archive (made absolute)
  std::vector<std::string> mounts;         // --mount SRC:DST[:ro] (SRC made absolute)
  std::string shm_size;                    // --shm-size: checked by the daemon
  std::string container_workdir;           // --container-workdir
  std::vector<std::string> stage;          // --stage SRC[:DST] (repeatable)
  std::vector<std::string> collect;        // --collect PATTERN (repeatable)
  std::string collect_to;                  // --collect-to DIR (made absolute)
  std::string signal;                      // --signal [B:]SIG[@T]: checked by the daemon
  bool requeue = false;                    // --requeue
  bool hold = false;                       // --hold
  std::optional<bool> preemptible;         // --preemptible / --no-preemptible; unset: config
  std::string checkpoint;                  // --checkpoint GLOB
  bool json = false;
  std::vector<std::string> sweeps;  // --sweep NAME=V1,V2 (repeatable)
  std::string array;                // --array 0-15%4
  std::string notify;               // --notify URL
  std::string mail;                 // --mail ADDR
  std::string snapshot;             // --snapshot[=git|off]; "": the config's default
};

// `trainq wait` and what `run` shares with it.
struct WaitArgs {
  std::vector<std::string> ids;
  std::string group;  // --group G: every job of the group
  bool any = false;   // return at the first end
  bool json = false;  // at the end: {"jobs": [{"id", "state", "exit_code"}], "exit_code"}
};

// `trainq sbatch [OPTIONS] SCRIPT [ARGS]`: sbatch's own options, then the script and its
// arguments (everything from the first word that is not an option).
struct SbatchArgs {
  std::vector<std::string> words;
};

struct ListArgs {
  bool all = false;
  std::string state;
  int limit = -1;  // --limit; -1: not given (the table pages, --json and -q list all)
  bool json = false;
  std::string user;      // only this user's jobs
  bool mine = false;     // only the caller's (the socket's user, or the token's)
  std::string group;     // only this group's jobs
  bool newest = false;   // newest first (--limit N: the N newest)
  bool reverse = false;  // the listed jobs in the opposite order
  bool quiet = false;    // only the ids, one per line (scripts, shell completion)
};

// `trainq token create`.
struct TokenArgs {
  std::string name;
  std::string role;     // read, submit or admin
  std::string user;     // "": the caller's
  std::string expires;  // a duration (30d); "": never
  bool json = false;
};

int Fail(const Status& status);
// Prints a reply's "message" line (a cancel's, a retry's); 0, or the reply's error.
int PrintJobMessage(const nlohmann::json& doc);
// "job id: 'abc' is not a job id; ..." as kInvalid.
Result<int64_t> ParseJobId(const std::string& text);

int CmdSubmit(Client& client, const SubmitArgs& args);
int CmdList(Client& client, const ListArgs& args);
int CmdShow(Client& client, const std::string& id, bool json);
// `tail`: start at the last N lines (-1: the whole log).
// `as_json`: {"job", "attempt", "text"} of the log as it is now (not with `follow`).
// `node`: one part of a gang (its rank or node name); "": every part, each line after
// "[RANK NODE] ".
int CmdLogs(Client& client, const std::string& id, bool follow, int attempt, int tail = -1,
            bool as_json = false, const std::string& node = "");

// The jobs `cancel` and `retry` act on: ids, lists and ranges ("12", "597,598", "10-20"),
// narrowed (or, without ids, chosen) by filters. Filters select the caller's own jobs.
struct JobSelection {
  std::vector<std::string> ids;
  std::string group;  // --group G
  std::string name;   // --name PATTERN, a shell glob
  std::string state;  // --state S[,S]: default, those the command can act on
  bool all_mine = false;
  bool failed = false;  // retry --failed: only those that failed
  bool json = false;    // {"results": [...]} as the API answers, not a line a job
  // cancel --signal SIG [--batch]: send SIG to running jobs rather than stop them (scancel's).
  std::string signal;
  bool batch = false;
};
// `trainq requeue [ID...]`: running jobs stopped now and queued again under their ids; no id:
// the job this runs in (TRAINQ_JOB_ID, or SLURM_JOB_ID in an sbatch script).
struct RequeueArgs {
  std::vector<std::string> ids;
  bool json = false;
};
// "597,598", "10-20" and plain ids, in the order given, each once; kInvalid naming the text
// and the accepted forms.
Result<std::vector<int64_t>> ParseIdList(const std::vector<std::string>& texts);
// `trainq update`, `hold`, `release`: what changes of each job (unset: unchanged).
struct UpdateArgs {
  std::vector<std::string> ids;  // ids, lists and ranges, as cancel takes them
  std::optional<int> priority, gpus, cpus;
  std::optional<std::string> mem, time, name, after, after_any, gpu_type;
  std::vector<std::string> constraints;  // --constraint: replaces the job's; "none" clears them
  std::optional<bool> hold;              // hold (true) or release (false)
  bool json = false;
};
int CmdUpdate(Client& client, const UpdateArgs& args);
// `trainq acct`: the caller's jobs (--user U: one user's, --all-users: everyone's).
struct AcctArgs {
  std::string user;
  bool all_users = false;
  std::string since;  // a duration: jobs that ended that long ago or later (and running ones)
  bool json = false;
};
int CmdAcct(Client& client, const AcctArgs& args);
// `trainq clean`: forget ended jobs.
struct CleanArgs {
  std::string before;  // a duration: only jobs that ended at least this long ago
  std::string state;   // succeeded, failed, cancelled (comma-separated); "": all three
  bool keep_logs = false;
  bool all_users = false;  // admins: every user's jobs
  bool json = false;
};
int CmdClean(Client& client, const CleanArgs& args);
// workflow_commands.cc: selections, groups, run, wait, sbatch (docs/workflow.md).
int CmdCancel(Client& client, const JobSelection& selection);
int CmdRetry(Client& client, const JobSelection& selection);
int CmdRequeue(Client& client, const RequeueArgs& args);
int CmdWait(Client& client, const WaitArgs& args);
int CmdRun(Client& client, const SubmitArgs& args);

// `trainq shell`: an interactive session (docs/workflow.md, "Interactive sessions").
struct ShellArgs {
  SubmitArgs submit;
  bool no_log = false;  // --no-log: the transcript is not kept
};
int CmdShell(Client& client, const ShellArgs& args);
int CmdSbatch(Client& client, const SbatchArgs& args);
int CmdSalloc(Client& client, const SbatchArgs& args);
// The request body `trainq submit` sends for `args` (the caller's environment, cwd, ...);
// kInvalid naming the option at fault.
Result<nlohmann::json> SubmitBody(const SubmitArgs& args);
// Sends a batch {"defaults", "jobs"}; prints the ids (and the group), as `submit` does.
// `where`, when given, names job i in an error instead of "jobs[i]".
int SubmitBatch(Client& client, nlohmann::json body, bool as_json,
                const std::function<std::string(size_t)>& where = nullptr);
// Submits one job and returns its id.
Result<int64_t> SubmitOne(Client& client, const nlohmann::json& body);
// The exit code a script sees for a job that ended (its JSON): 0 succeeded, the command's
// exit code, 128+signal when killed, 1 when it never ran.
int JobExitCode(const nlohmann::json& job);
// snapshot_commands.cc: --snapshot (or the daemon's `snapshot` option): copies the git work
// tree of the body's cwd and points the body's cwd into the copy; adds the run record.
Status ApplySnapshot(Client& client, const SubmitArgs& args, nlohmann::json& body);
// `trainq diff ID1 ID2`: what differs between two runs (commit, changes, command, env).
int CmdDiff(Client& client, const std::string& first, const std::string& second,
            bool as_json = false);
// Follows attempt `attempt` of job `job` whose log is `log_path` (logs -f, run).
std::unique_ptr<LogFollower> AttemptFollower(Client& client, int64_t job, int64_t attempt,
                                             const std::string& log_path);
int CmdGpus(Client& client, bool json);
int CmdExplain(Client& client, const std::string& id, bool json);
// `trainq daemon --foreground`: becomes trainqd for this state dir.
int CmdDaemonForeground(Client& client);
int CmdDaemonStart(Client& client);
int CmdDaemonStop(Client& client);
int CmdDaemonStatus(Client& client, bool json);
// A consistent copy of the database (SQLite's online backup) at `path`, made by the daemon.
int CmdDaemonBackup(Client& client, const std::string& path);
// gpu_topology.cc: `trainq gpus --topo`
int CmdGpuTopology(Client& client, bool json);
// `trainq config check`: trainqd --check-config, so the client never parses the config.
int CmdConfigCheck(Client& client);
// config_commands.cc
int CmdConfigShow(Client& client, bool json);
int CmdConfigGet(Client& client, const std::string& key, bool json);  // empty key: show
int CmdConfigSet(Client& client, const std::string& key, const std::string& value);
int CmdConfigUnset(Client& client, const std::string& key);
// token_commands.cc
int CmdTokenCreate(Client& client, const TokenArgs& args);
int CmdTokenList(Client& client, bool json);
// `trainq dashboard`: the dashboard's URL with a fresh read token (docs/dashboard.md).
int CmdDashboard(Client& client, bool json, bool open);
int CmdTokenRevoke(Client& client, const std::string& name);

// node_commands.cc
int CmdNodes(Client& client, bool json);
int CmdNodeDrain(Client& client, const std::string& name, bool drain);
int CmdNodeRemove(Client& client, const std::string& name);

// A reply's "message" on stdout ("job 12 cancelled"), or the error: the exit code.
// `trainq pause|resume [--gpus 0,1]` (config_commands.cc): the paused and paused_gpus
// settings.
int CmdPause(Client& client, const std::string& gpus, bool pause, bool as_json = false);
int PrintReplyMessage(const Result<nlohmann::json>& r);

}  // namespace trainq
