#include "src/cli/cli.h"

#include <cstdio>
#include <optional>
#include <string>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "src/cli/commands.h"
#include "src/cli/completion.h"
#include "src/cli/sim_command.h"
#include "src/cli/suggest.h"

namespace trainq {

namespace {

struct Parsed {
  std::string state_dir, server;
  std::string user;
  bool mine = false;
  SubmitArgs submit;
  bool all = false, json = false, follow = false, foreground = false, topo = false;
  std::string state, id;
  int attempt = 0;
  int limit = -1;  // ls --limit; -1: not given
  std::string config_key, config_value;
  std::string backup_path;
  TokenArgs token;
  std::string node_name;
  SimArgs sim;
  std::string group;
  std::string second_id;
  WaitArgs wait;
  SbatchArgs sbatch;
  JobSelection select;
  CleanArgs clean;
  std::string pause_gpus;
  std::string shell;
  bool quiet = false;
  bool newest = false, reverse = false;
  int tail = -1;
};

// The options of `submit`, which `run` takes too.
void AddSubmitOptions(CLI::App* s, SubmitArgs& a) {
  s->add_option("--gpus", a.gpus, "GPUs on one node, or on each with --nodes (0 = CPU job)");
  s->add_option("--mem", a.mem,
                "GPU memory per GPU: 20GiB, 20G, 512MiB, 20GB, 40% (default: whole GPUs)");
  s->add_option("--cpus", a.cpus,
                "host CPU slots the job holds (default: 1 for a CPU job, none for a GPU job)");
  s->add_option("--name", a.name, "a name (default: the command)");
  s->add_option("--priority", a.priority, "higher runs first");
  s->add_option("--retries", a.retries, "retries after GPU out-of-memory");
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
  s->add_option("--nodes,-N", a.num_nodes,
                "a job over N nodes at once, --gpus GPUs on each (a gang: all start or none)");
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

void AddSubmit(CLI::App& app, Parsed& p) {
  CLI::App* s = app.add_subcommand("submit", "queue a job: trainq submit [opts] -- CMD [ARG...]");
  s->alias("add");
  SubmitArgs& a = p.submit;
  AddSubmitOptions(s, a);
  s->add_flag("--json", a.json, "print the job as JSON ({\"ids\", \"group\"} for a sweep)");
  s->add_option("--from", a.from,
                "queue one job per line of FILE (- for standard input): a command line (quoted "
                "as in sh, never expanded) or a JSON job object; the options above are each "
                "job's defaults, and --name is numbered (NAME-1, NAME-2...)");
  s->add_option("--sweep", a.sweeps,
                "NAME=V1,V2,...: one job per value, {NAME} in the command replaced; repeat for "
                "the cross product; all in one group")
      ->allow_extra_args(false);
  s->add_option("--array", a.array,
                "one job per index as Slurm's --array: 0-15, 1,3,5, 0-15:2, then %N for at most "
                "N running at once; TRAINQ_ARRAY_INDEX and {index} in the command");
}

void AddWorkflow(CLI::App& app, Parsed& p) {
  CLI::App* run = app.add_subcommand(
      "run",
      "submit, wait in line, stream the output and exit with the job's exit code; Ctrl-C "
      "cancels it (twice: detach)");
  AddSubmitOptions(run, p.submit);
  CLI::App* wait = app.add_subcommand(
      "wait",
      "block until the jobs end; exit 0 if all succeeded, else the first failed one's code");
  wait->add_option("ids", p.wait.ids, "job ids");
  wait->add_option("--group", p.wait.group, "every job of this group");
  wait->add_flag("--any", p.wait.any, "return when the first of them ends, with its code");
  // Its words are sbatch's own options, the script and its arguments: RunCli hands them over
  // unparsed (SplitSbatch).
  app.add_subcommand("sbatch",
                     "run a Slurm batch script: its #SBATCH lines become trainq's options; "
                     "trainq sbatch [SBATCH OPTIONS] SCRIPT [ARGS]");
  CLI::App* diff = app.add_subcommand(
      "diff", "what differs between two runs: commit, uncommitted changes, command, env");
  diff->add_option("first", p.id, "job id")->required();
  diff->add_option("second", p.second_id, "job id")->required();
}

void AddQueries(CLI::App& app, Parsed& p) {
  CLI::App* ls = app.add_subcommand("ls", "waiting and running jobs");
  ls->add_flag("--all,-a", p.all, "done jobs too");
  ls->add_option("--state", p.state, "only these states, comma-separated");
  ls->add_flag("--json", p.json, "JSON output");
  ls->add_option("--limit", p.limit,
                 "show at most N jobs: the oldest, or with --newest the newest; 0: all (the "
                 "table shows 200 unless told, --json and -q all)")
      ->check(CLI::NonNegativeNumber);
  ls->add_flag("--newest", p.newest, "newest first");
  ls->add_flag("--reverse,-r", p.reverse, "the listed jobs in the opposite order");
  ls->add_flag("--quiet,-q", p.quiet, "only the ids, one per line");
  ls->add_option("--user,-u", p.user, "only this user's jobs");
  ls->add_flag("--mine", p.mine, "only your own jobs");
  ls->add_option("--group,-g", p.group,
                 "only this group's jobs (a sweep, an array), done ones too");
  CLI::App* show = app.add_subcommand("show", "everything about a job, all its attempts");
  show->add_option("id", p.id, "job id")->required();
  show->add_flag("--json", p.json, "JSON output");
  CLI::App* explain =
      app.add_subcommand("explain", "why a job waits: reason, GPUs, holds, line, fair share");
  explain->add_option("id", p.id, "job id")->required();
  explain->add_flag("--json", p.json, "JSON output");
  CLI::App* logs = app.add_subcommand("logs", "output of the latest (or Nth) attempt");
  logs->add_option("id", p.id, "job id")->required();
  logs->add_flag("--follow,-f", p.follow, "keep printing until the attempt ends");
  logs->add_option("--attempt", p.attempt, "attempt number");
  logs->add_option("--tail,-n", p.tail, "start at the last N lines (with -f: then follow)")
      ->check(CLI::NonNegativeNumber);
  CLI::App* cancel =
      app.add_subcommand("cancel", "cancel waiting jobs (they stay, cancelled), stop running ones");
  CLI::App* retry = app.add_subcommand("retry", "queue jobs that ended again, as new attempts");
  for (CLI::App* c : {cancel, retry}) {
    bool is_cancel = c == cancel;
    c->add_option("ids", p.select.ids, "job ids, lists and ranges: 12 597,598 10-20");
    c->add_option("--group,-g", p.select.group,
                  is_cancel ? "this group's jobs that have not ended"
                            : "this group's jobs that failed or were cancelled");
    c->add_option("--name", p.select.name, "your jobs whose name matches this glob (lr-*)");
    c->add_option("--state", p.select.state,
                  is_cancel ? "your jobs in these states (default: all that have not ended)"
                            : "your jobs in these states (default: failed,cancelled)");
    c->add_flag("--all-mine", p.select.all_mine,
                is_cancel ? "every job of yours that has not ended"
                          : "every job of yours that failed or was cancelled");
  }
  retry->add_flag("--failed", p.select.failed, "only those that failed");
  CLI::App* pause =
      app.add_subcommand("pause", "start no new jobs (all, or on --gpus); running ones go on");
  pause->add_option("--gpus", p.pause_gpus, "only on these GPUs: 0,1");
  CLI::App* resume = app.add_subcommand("resume", "start jobs again (all, or on --gpus)");
  resume->add_option("--gpus", p.pause_gpus, "only on these GPUs: 0,1");
  CLI::App* clean = app.add_subcommand(
      "clean", "forget jobs that ended, and their logs; the queue's store stays small");
  clean->add_option("--before", p.clean.before, "only those that ended at least this long ago: 7d");
  clean->add_option("--state", p.clean.state,
                    "only these: succeeded, failed, cancelled (default: all three)");
  clean->add_flag("--keep-logs", p.clean.keep_logs, "keep their run dirs and logs");
  clean->add_flag("--all-users", p.clean.all_users, "every user's jobs (admins)");
  app.add_subcommand("completion", "print a completion script: source <(trainq completion bash)")
      ->add_option("shell", p.shell, "bash, zsh or fish")
      ->required();
  CLI::App* gpus =
      app.add_subcommand("gpus", "each GPU: memory, utilisation, jobs, other processes");
  gpus->add_flag("--json", p.json, "JSON output");
  gpus->add_flag("--topo", p.topo, "how far apart the GPUs are (as nvidia-smi topo -m)");
}

void AddDaemon(CLI::App& app, Parsed& p) {
  CLI::App* d =
      app.add_subcommand("daemon", "the daemon, trainqd (started on demand by every command)");
  d->add_flag("--foreground", p.foreground,
              "run trainqd in the foreground, logging to stderr (as 'trainqd' does)");
  d->add_subcommand("start", "start trainqd unless it runs");
  d->add_subcommand("stop", "stop the daemon; running jobs keep running");
  d->add_subcommand("status", "whether the daemon runs, its pid and GPUs")
      ->add_flag("--json", p.json, "JSON output");
  d->add_subcommand("backup", "copy the queue's database to PATH while the daemon runs")
      ->add_option("path", p.backup_path, "the file to write (replaced once complete)")
      ->required();
}

void AddConfig(CLI::App& app, Parsed& p) {
  CLI::App* c = app.add_subcommand("config", "the daemon's options; change limits while it runs");
  c->require_subcommand(1, 1);
  CLI::App* show = c->add_subcommand("show", "every option, its value and where it came from");
  show->add_flag("--json", p.json, "JSON output");
  CLI::App* get = c->add_subcommand("get", "one option's value in force (all without KEY)");
  get->add_option("key", p.config_key, "option name, e.g. devices or max-jobs-per-gpu");
  get->add_flag("--json", p.json, "JSON output");
  // The daemon owns the option table; it names the settable options when a key is wrong.
  CLI::App* set = c->add_subcommand(
      "set", "change an option now, kept across restarts (docs/config.md marks which)");
  set->add_option("key", p.config_key, "an option settable at run time, e.g. devices")->required();
  set->add_option("value", p.config_value, "the new value")->required();
  c->add_subcommand("check",
                    "check the config file as trainqd would read it (trainqd --check-config)");
  CLI::App* unset = c->add_subcommand("unset", "drop a run-time value: the config file's applies");
  unset->add_option("key", p.config_key, "an option settable at run time")->required();
}

void AddToken(CLI::App& app, Parsed& p) {
  CLI::App* t = app.add_subcommand("token", "API tokens for remote access (admins)");
  t->require_subcommand(1, 1);
  CLI::App* create =
      t->add_subcommand("create", "make a token; it is printed once and only its hash is kept");
  create->add_option("name", p.token.name, "its name: 1 to 64 of A-Z a-z 0-9 . _ -")->required();
  create->add_option("--role", p.token.role, "read, submit or admin")->required();
  create->add_option("--user", p.token.user, "the user it acts as (default: yours)");
  create->add_option("--expires", p.token.expires, "lifetime: 30d, 12h, ... (default: none)");
  create->add_flag("--json", p.token.json, "JSON output");
  t->add_subcommand("ls", "every token: name, role, user, dates, state (never the token)")
      ->add_flag("--json", p.json, "JSON output");
  t->add_subcommand("revoke", "refuse a token from now on")
      ->add_option("name", p.token.name, "the token's name")
      ->required();
}

void AddNodes(CLI::App& app, Parsed& p) {
  app.add_subcommand("nodes", "a cluster's nodes: state, leader, GPUs, jobs, heartbeat")
      ->add_flag("--json", p.json, "JSON output");
  CLI::App* n = app.add_subcommand("node", "drain or resume a cluster's node (admins)");
  n->require_subcommand(1, 1);
  n->add_subcommand("drain", "start no new job there; running ones run on")
      ->add_option("name", p.node_name, "the node, as `trainq nodes` names it")
      ->required();
  n->add_subcommand("resume", "let jobs start there again")
      ->add_option("name", p.node_name, "the node, as `trainq nodes` names it")
      ->required();
}

int DispatchToken(Client& client, CLI::App& token, Parsed& p) {
  if (token.got_subcommand("create")) return CmdTokenCreate(client, p.token);
  if (token.got_subcommand("revoke")) return CmdTokenRevoke(client, p.token.name);
  return CmdTokenList(client, p.json);
}

int DispatchConfig(Client& client, CLI::App& config, Parsed& p) {
  if (config.got_subcommand("set")) return CmdConfigSet(client, p.config_key, p.config_value);
  if (config.got_subcommand("unset")) return CmdConfigUnset(client, p.config_key);
  if (config.got_subcommand("check")) return CmdConfigCheck(client);
  if (config.got_subcommand("get")) return CmdConfigGet(client, p.config_key, p.json);
  return CmdConfigShow(client, p.json);
}

int Dispatch(CLI::App& app, Parsed& p) {
  CLI::App* sub = app.get_subcommands().front();
  std::string name = sub->get_name();
  if (name == "sim") return RunSimCommand(*sub, p.sim);
  if (name == "completion") return CmdCompletion(app, p.shell);
  Result<ServerChoice> server = ChooseServer(p.state_dir, p.server);
  if (!server.ok()) {
    std::fprintf(stderr, "trainq: %s\n", server.status().message().c_str());
    return ExitCodeFor(server.status().code());
  }
  Client client(std::move(*server));
  if (name == "submit") return CmdSubmit(client, p.submit);
  if (name == "run") return CmdRun(client, p.submit);
  if (name == "diff") return CmdDiff(client, p.id, p.second_id);
  if (name == "wait") return CmdWait(client, p.wait);
  if (name == "sbatch") return CmdSbatch(client, p.sbatch);
  if (name == "ls")
    return CmdList(client, {p.all, p.state, p.limit, p.json, p.user, p.mine, p.group, p.newest,
                            p.reverse, p.quiet});
  if (name == "show") return CmdShow(client, p.id, p.json);
  if (name == "explain") return CmdExplain(client, p.id, p.json);
  if (name == "logs") return CmdLogs(client, p.id, p.follow, p.attempt, p.tail);
  if (name == "cancel") return CmdCancel(client, p.select);
  if (name == "retry") return CmdRetry(client, p.select);
  if (name == "pause" || name == "resume") return CmdPause(client, p.pause_gpus, name == "pause");
  if (name == "clean") return CmdClean(client, p.clean);
  if (name == "gpus") return p.topo ? CmdGpuTopology(client, p.json) : CmdGpus(client, p.json);
  if (name == "config") return DispatchConfig(client, *sub, p);
  if (name == "token") return DispatchToken(client, *sub, p);
  if (name == "nodes") return CmdNodes(client, p.json);
  if (name == "node") return CmdNodeDrain(client, p.node_name, sub->got_subcommand("drain"));
  if (sub->got_subcommand("stop")) return CmdDaemonStop(client);
  if (sub->got_subcommand("status")) return CmdDaemonStatus(client, p.json);
  if (sub->got_subcommand("backup")) return CmdDaemonBackup(client, p.backup_path);
  return p.foreground ? CmdDaemonForeground(client) : CmdDaemonStart(client);
}

// `trainq [GLOBAL OPTIONS] sbatch WORDS...`: the words after "sbatch" are sbatch's (its
// options look like ours but are not), so they are taken off before CLI11 parses the rest.
// Returns how many arguments CLI11 should see.
int SplitSbatch(int argc, char** argv, std::vector<std::string>& words) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--state-dir" || arg == "--server") {
      ++i;
    } else if (arg == "sbatch") {
      words.assign(argv + i + 1, argv + argc);
      return i + 1;
    } else if (!arg.starts_with("--state-dir=") && !arg.starts_with("--server=")) {
      break;
    }
  }
  return argc;
}

// A command word that names no command, at the top or inside a group of commands (`config`,
// `token`, `daemon`...): "unknown command 'submt'; did you mean 'submit'?", which CLI11 would
// have put as "A subcommand is required" or an unexpected argument.
std::optional<std::string> UnknownCommand(CLI::App& app, int argc, char** argv) {
  CLI::App* level = &app;
  std::string path = "";
  bool options = false;  // inside a command, CLI11's complaint about them is the one to show
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (level == &app && (arg == "--state-dir" || arg == "--server")) {
      ++i;
      continue;
    }
    if (arg.starts_with("-")) {
      options = true;
      continue;
    }
    std::vector<CLI::App*> subs = level->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return std::nullopt;  // a command's own arguments
    CLI::App* next = nullptr;
    std::vector<std::string> names;
    for (CLI::App* sub : subs) {
      if (sub->get_name().empty()) continue;  // an option group, not a command
      names.push_back(sub->get_name());
      if (sub->check_name(std::string(arg))) next = sub;
    }
    if (next == nullptr) {
      std::string text = fmt::format("unknown command '{}{}'", path, arg);
      if (std::optional<std::string> near = ClosestWord(arg, names)) {
        text += fmt::format("; did you mean '{}{}'?", path, *near);
      } else {
        text += fmt::format("; the commands are: {}", fmt::join(names, ", "));
      }
      return text;
    }
    level = next;
    path += next->get_name() + " ";
  }
  // A group of commands given none of them.
  std::vector<std::string> names;
  for (CLI::App* sub : level->get_subcommands([](CLI::App*) { return true; })) {
    if (!sub->get_name().empty()) names.push_back(sub->get_name());
  }
  if (names.empty() || (level != &app && (options || !level->get_require_subcommand_min()))) {
    return std::nullopt;
  }
  return fmt::format("give a command{}: {}; see 'trainq {}--help'",
                     path.empty() ? "" : " after '" + path.substr(0, path.size() - 1) + "'",
                     fmt::join(names, ", "), path);
}

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{"trainq: a GPU-aware queue for deep-learning training jobs", "trainq"};
  app.set_version_flag("--version", "trainq " TRAINQ_VERSION);
  app.require_subcommand(1, 1);
  app.fallthrough();
  Parsed p;
  app.add_option("--state-dir", p.state_dir,
                 "instance directory (default: $TRAINQ_STATE_DIR or ~/.local/state/trainq)");
  app.add_option("--server", p.server,
                 "the daemon to use: unix:/PATH.sock, http://HOST:PORT or https://HOST:PORT "
                 "(default: $TRAINQ_SERVER, else /run/trainq/trainq.sock when a shared daemon "
                 "serves this machine, else your personal daemon)");
  AddSubmit(app, p);
  AddWorkflow(app, p);
  AddQueries(app, p);
  AddDaemon(app, p);
  AddConfig(app, p);
  AddToken(app, p);
  AddNodes(app, p);
  AddSimCommand(app, p.sim);
  argc = SplitSbatch(argc, argv, p.sbatch.words);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (std::optional<std::string> unknown = UnknownCommand(app, argc, argv)) {
      std::fprintf(stderr, "trainq: %s\n", unknown->c_str());
      return 2;
    }
    std::fprintf(stderr, "trainq: %s; see 'trainq --help'\n", e.what());
    return 2;
  }
  return Dispatch(app, p);
}

}  // namespace trainq
