// Processes: one function spawns, every job gets its own session,
// every fd we open is close-on-exec, exit code and signal are kept apart.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/os/cgroup.h"
#include "src/os/fd.h"
#include "trainq/status.h"

namespace trainq {

struct ProcStat {
  int64_t pid = 0;
  int64_t ppid = 0;
  int64_t sid = 0;
  char state = '?';          // R, S, Z, ...
  uint64_t start_ticks = 0;  // field 22: start time in clock ticks since boot
};

// /proc/PID/stat; nullopt if the process does not exist.
std::optional<ProcStat> ReadProcStat(int64_t pid);
// True if `pid` exists, is not a zombie, and started at `start_ticks`.
bool ProcessAlive(int64_t pid, uint64_t start_ticks);
// All live descendants of `root` (not root itself), from one scan of /proc.
std::vector<int64_t> Descendants(int64_t root);
// Whether process `pid` has a handler for `sig` (SigCgt in /proc/PID/status): a warning sent to
// one that has none would only kill it. false when it is gone.
bool CatchesSignal(int64_t pid, int sig);
// Its argv (/proc/PID/cmdline); empty when it is gone or a kernel thread.
std::vector<std::string> ProcessArgv(int64_t pid);
// pid -> parent for every live process, from one scan of /proc (the daemon maps GPU
// processes to attempts with it).
std::vector<ProcStat> ScanProcesses();
// The live processes of the attempt whose run dir is `run_dir` and whose shim was `shim_pid`
// started at `shim_start_ticks` (0: no shim known), found by one scan of /proc once the shim
// may be gone (its orphans are no longer below it): every process whose environment sets
// TRAINQ_RUN_DIR (kRunDirEnv) to `run_dir`, and, among those with no TRAINQ_RUN_DIR at all,
// the ones in the shim's session that started no earlier than the shim (the shim itself while
// it lives). A process with another attempt's TRAINQ_RUN_DIR is never included, nor the
// caller. Environments are read from /proc/PID/environ: processes of other users are not
// seen unless the caller may read theirs.
std::vector<ProcStat> AttemptProcesses(const std::string& run_dir, int64_t shim_pid,
                                       uint64_t shim_start_ticks);
// The TRAINQ_RUN_DIR (kRunDirEnv) process `pid` was started with: the attempt it belongs to
// wherever it runs (a container under docker's daemon is no shim's descendant); nullopt when
// it has none or its environment cannot be read.
std::optional<std::string> ProcessRunDir(int64_t pid);
// The same, where the attempt has a cgroup (src/os/cgroup.h): while its group exists, the
// group's processes (however they left the shim's session or environment), the shim while
// it lives, and the processes outside it with the attempt's TRAINQ_RUN_DIR (a container's,
// moved to its runtime's group); the /proc scan above where it does not (an attempt started
// without one).
std::vector<ProcStat> AttemptProcesses(const std::string& run_dir, int64_t shim_pid,
                                       uint64_t shim_start_ticks, const CgroupSpec& cgroup);

struct SpawnedShim {
  int64_t pid = 0;
  uint64_t start_ticks = 0;
  UniqueFd pidfd;  // readable when the shim exits
};

// How the shim finds the lock SpawnShim took for it: the lock file is open as fd kShimLockFd
// (already flock'ed, not close-on-exec) and the environment says so in kShimLockFdEnv. RunShim
// keeps that fd (close-on-exec from then on) and, when the variable is absent (a test or a
// manual `trainq-shim RUN_DIR`), opens and flocks the lock file itself. The job never sees the
// variable.
inline constexpr int kShimLockFd = 3;
inline constexpr const char* kShimLockFdEnv = "TRAINQ_SHIM_LOCK_FD";
// The shim's exit status when another shim already holds the run dir's lock.
inline constexpr int kShimLockedExit = 126;

// The signals the shim reads from its signalfd: stop requests, its children's exits, and
// SIGUSR1: the daemon wrote a request in control.json (ShimControl, src/os/run_dir.h).
inline constexpr int kShimSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGUSR1};

// Starts `command RUN_DIR` in a new session, with the lock file of the run dir
// (run_dir.h) already flock'ed in the child before exec, stdin from /dev/null and
// stdout/stderr to `daemon_log_fd` (or /dev/null if -1). No other fd is inherited; every
// disposition is the default and exactly kShimSignals are blocked (before setsid, long before
// exec): a stop sent at any moment of the shim's start waits, pending, until the shim reads
// it and records the attempt cancelled, instead of killing a shim that has no exit record
// yet. Returns once the shim has exec'd: kConflict when another shim holds the
// lock (the child exited kShimLockedExit and was reaped), kIo when the binary could not be
// exec'd.
// What starts a shim: trainq-shim RUN_DIR, or `trainqd shim RUN_DIR` where trainqd was
// installed without its trainq-shim (slower to start: trainqd loads the daemon's libraries).
struct ShimCommand {
  ShimCommand(std::string binary_path, std::vector<std::string> leading = {})  // NOLINT
      : binary(std::move(binary_path)), args(std::move(leading)) {}
  std::string binary;
  std::vector<std::string> args;  // before RUN_DIR
};

Result<SpawnedShim> SpawnShim(const ShimCommand& command, const std::string& run_dir,
                              int daemon_log_fd = -1);
// A pidfd for a process we did not start (re-adoption after a daemon restart).
Result<UniqueFd> OpenPidfd(int64_t pid);
// A process pinned by its pidfd, read while the pidfd shows it alive: its pid, start time
// and owner (the uid of /proc/PID) are that process's, never a later one's with its pid.
struct PinnedProcess {
  UniqueFd pidfd;
  ProcStat stat;
  int64_t uid = -1;
};
// kNotFound when no live process has `pid`.
Result<PinnedProcess> PinProcess(int64_t pid);
// Whether the process behind `pidfd` has exited (its pidfd is readable).
bool PidfdExited(int pidfd);
// Signals exactly the process behind `pidfd` (pidfd_send_signal), never another that
// reused its pid; kNotFound once it is gone.
Status SignalPidfd(int pidfd, int sig);
// Reaps `pid` if it is our child and has exited; harmless otherwise.
void ReapIfChild(int64_t pid);
// kNotFound when the process is gone; kInvalid for pid <= 0 (never a group or everyone).
Status SendSignal(int64_t pid, int sig);
// True if some process holds the run dir's lock (the shim is alive).
bool RunDirLocked(const std::string& run_dir);

// Starts `argv` with exactly `env` in a session of its own and does not wait for it: it is
// nobody's child once this returns (reparented to init). Its stdio is /dev/null; with `as`
// (a root caller) it runs as that user. kIo when fork fails; an exec failure is not seen.
struct RunAs {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};
Status SpawnDetached(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     const std::optional<RunAs>& as);

// --- Children the caller waits for: srun's tasks, RunCommand's commands ---

// Where a child's stdin, stdout or stderr goes.
enum class ChildIo {
  kInherit,  // the caller's own
  kNull,     // /dev/null
  kPipe,     // a pipe whose other end the caller gets (Child::in, out, err), close-on-exec
  kStdout,   // stderr only: wherever stdout goes
};

// What StartChild runs.
struct ChildSpec {
  std::vector<std::string> argv;
  // KEY=VALUE, exactly; nullopt: the caller's environment.
  std::optional<std::vector<std::string>> env;
  // The directories (a colon list, as PATH) argv[0] is looked up in when it holds no '/', as a
  // shell with that PATH would; "": argv[0] is run as given.
  std::string search_path;
  std::string cwd;  // "": the caller's
  ChildIo in = ChildIo::kInherit, out = ChildIo::kInherit, err = ChildIo::kInherit;
  // Only fds 0-2 reach the command (a daemon's sockets must not outlive it in a sendmail);
  // false: every fd the caller left without close-on-exec too.
  bool only_stdio = true;
  // A variable the command finds set to its own pid (srun's SLURM_TASK_PID); "": none.
  std::string pid_variable;
  // How a chdir or exec that fails is told. "": StartChild returns it (kIo naming the
  // directory or argv[0]) and no child is left. Else the child writes "PREFIX: chdir to DIR:
  // WHY" or "PREFIX: execve(): ARGV0: WHY" on its stderr and exits 1 (chdir), 127 (no such
  // program) or 126, as a shell does; StartChild returns once it forked.
  std::string failure_prefix;
};

struct Child {
  int64_t pid = -1;
  UniqueFd in, out, err;  // the caller's ends of the pipes asked for; -1 otherwise
};

// The one way trainq starts a child it waits for (the shim's spawn and detached starts have
// their own, with their own sessions): `spec` as the caller's child, in the caller's session,
// every signal's disposition the default and none blocked. kIo when it cannot start (fork, a
// pipe, or, without failure_prefix, the chdir or the exec).
Result<Child> StartChild(const ChildSpec& spec);

// How a child ended: its exit code, or the signal that killed it (then exit_code is
// 128 + signal, as a shell reports it).
struct ChildEnd {
  int exit_code = 0;
  int signal = 0;
};
// Reaps the caller's child `pid` once it has ended: nullopt while it runs (`block`: waits for
// its end) or when it is not the caller's child.
std::optional<ChildEnd> ReapChild(int64_t pid, bool block);

// Whether a process that is not our child has exited: gone, or a zombie its new parent (an
// init that does not reap) has not collected.
bool ProcessExited(int64_t pid);

// The shim's main (`trainq-shim RUN_DIR`, also `trainqd shim RUN_DIR`): reads spec.json, writes
// shim.json, runs the command as a child subreaper, stops the whole tree on SIGTERM (SIGTERM,
// grace, SIGKILL), writes exit.json. Returns the shim's exit code: 0 once exit.json is written
// (whatever the command did), kShimLockedExit when another shim holds the lock (nothing written), 1
// when even exit.json could not be written.
int RunShim(const std::string& run_dir);

}  // namespace trainq
