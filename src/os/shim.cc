// The shim (docs/architecture.md, "One job's path"): supervises one attempt's command so the daemon
// can die or restart while the job runs. All state lives in the run dir; the shim is
// single-threaded and learns about signals and exits only through a signalfd. The command's
// stdout and stderr are one pipe that the same poll reads into the log (LogWriter), so the log
// stays within log_max_size.
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "src/core/container.h"
#include "src/core/duration.h"
#include "src/os/cgroup.h"
#include "src/os/child_setup.h"
#include "src/os/clock.h"
#include "src/os/fence.h"
#include "src/os/log_writer.h"
#include "src/os/process.h"
#include "src/os/run_dir.h"
#include "src/os/session_link.h"
#include "src/os/users.h"
#include "trainq/size.h"

namespace trainq {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kPoll{20};             // rescan of the tree while waiting for exits
constexpr milliseconds kLeftoverGrace{2000};  // leftovers after the command exited
constexpr milliseconds kKillPatience{30000};  // leftovers that survive SIGKILL (stuck in D)
// A record that found the disk full is written again after this, doubling up to the cap:
// soon after space is freed, without a busy loop while it is not.
constexpr milliseconds kNoSpaceFirstRetry{100};
constexpr milliseconds kNoSpaceMaxRetry{2000};
constexpr int kSpawnFailedExit = 127;
constexpr int kNotExecutableExit = 126;
// Output moved into the log per wake-up: a chatty job cannot keep the shim from its signals.
constexpr size_t kReadBudget = 1 << 20;
// A session's pending input beyond which the client is not read until the program takes it.
constexpr size_t kMaxPendingInput = 1 << 20;
// How long the last output and the exit frame may take to reach a slow client.
constexpr milliseconds kSessionFlush{2000};
// A session's time limit is announced this long before it (half the limit when shorter).
constexpr milliseconds kSessionWarning{60000};
// The last read once the tree is gone: a pipe holds far less; this only bounds a writer
// outside the tree that someone handed the pipe to.
constexpr size_t kDrainLimit = 16 << 20;

enum CommandStep : int {
  kStepStdio = 1,
  kStepChdir,
  kStepExec,
  kStepGroups,
  kStepGid,
  kStepUid,
  kStepRegain,
  kStepCgroup,
  kStepLink,  // + the link's index
};

// The files the command's child joins its cgroup by (v1: memory and pids), opened before fork.
struct CgroupJoin {
  int fds[2] = {-1, -1};
  int count = 0;
};

// The user a shim running as root makes the command's process before it runs anything.
struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // for setgroups: computed before fork, the child must not allocate
};

// Everything the command's child needs, built before fork.
struct PreparedCommand {
  std::vector<std::string> candidates;  // paths to try with execve, in PATH order
  CStringArray argv;
  CStringArray envp;
  std::string cwd;
  int umask = -1;
  std::optional<Identity> identity;  // set: drop to this user first
  // RunSpec::links, with the directories above each path (made if missing), outermost first.
  struct Link {
    std::vector<std::string> parents;
    std::string path, target;
  };
  std::vector<Link> links;
};

std::vector<PreparedCommand::Link> LinkSteps(const RunSpec& spec) {
  std::vector<PreparedCommand::Link> out;
  for (const auto& [path, target] : spec.links) {
    PreparedCommand::Link& l = out.emplace_back();
    l.path = path;
    l.target = target;
    for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
      l.parents.push_back(path.substr(0, at));
    }
  }
  return out;
}

// Makes each link as the user (async-signal-safe): a link already there is replaced (an
// earlier job's copy); a file or directory there fails the step.
void MakeLinks(const PreparedCommand& c, int report) {
  for (size_t i = 0; i < c.links.size(); ++i) {
    const PreparedCommand::Link& l = c.links[i];
    for (const std::string& dir : l.parents) ::mkdir(dir.c_str(), 0777);
    if (::symlink(l.target.c_str(), l.path.c_str()) == 0) continue;
    int err = errno;
    struct stat st = {};
    if (err == EEXIST && ::lstat(l.path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) &&
        ::unlink(l.path.c_str()) == 0 && ::symlink(l.target.c_str(), l.path.c_str()) == 0) {
      continue;
    }
    child::Fail(report, kStepLink + static_cast<int>(i), err, kSpawnFailedExit);
  }
}

// execvpe's search, but with PATH from the job's environment rather than the shim's.
std::vector<std::string> ExecCandidates(const RunSpec& spec) {
  const std::string& file = spec.command[0];
  if (file.empty()) return {};
  if (file.find('/') != std::string::npos) return {file};
  std::string path = "/bin:/usr/bin";  // glibc's default when PATH is unset
  auto it = std::find_if(spec.env.begin(), spec.env.end(),
                         [](const auto& kv) { return kv.first == "PATH"; });
  if (it != spec.env.end()) path = it->second;
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon - start);
    out.push_back((dir.empty() ? "." : dir) + "/" + file);
    if (colon == std::string::npos) return out;
    start = colon + 1;
  }
}

// Exactly the spec's environment (the daemon put the job's and trainq's variables there):
// nothing of the shim's own reaches the command. A job run as a user gets that user's HOME,
// USER and LOGNAME whatever the spec says, as login(1) would set them.
std::vector<std::string> CommandEnv(const RunSpec& spec) {
  bool as_user = spec.uid >= 0 && !spec.user.empty();
  std::vector<std::string> env;
  for (const auto& [k, v] : spec.env) {
    if (as_user && (k == "HOME" || k == "USER" || k == "LOGNAME")) continue;
    env.push_back(k + "=" + v);
  }
  if (as_user) {
    env.push_back("HOME=" + spec.home);
    env.push_back("USER=" + spec.user);
    env.push_back("LOGNAME=" + spec.user);
  }
  return env;
}

// The user to drop to: only a root shim can and must; a shim that already runs as the
// spec's user has nothing to drop.
Result<std::optional<Identity>> IdentityFor(const RunSpec& spec) {
  if (spec.uid < 0) return std::optional<Identity>();
  if (::geteuid() != 0) {
    if (static_cast<int64_t>(::geteuid()) == spec.uid) return std::optional<Identity>();
    return Status::Permission(
        fmt::format("setuid {}: the shim runs as uid {}, not as root", spec.uid, ::geteuid()));
  }
  Identity id{static_cast<uid_t>(spec.uid), static_cast<gid_t>(spec.gid), {}};
  std::vector<int64_t> groups =
      spec.user.empty() ? std::vector<int64_t>{spec.gid} : GroupList(spec.user, spec.gid);
  for (int64_t g : groups) id.groups.push_back(static_cast<gid_t>(g));
  return std::optional<Identity>(std::move(id));
}

Result<PreparedCommand> PrepareCommand(const RunSpec& spec) {
  auto identity = IdentityFor(spec);
  if (!identity.ok()) return identity.status();
  return PreparedCommand{ExecCandidates(spec),
                         CStringArray(spec.command),
                         CStringArray(CommandEnv(spec)),
                         spec.cwd,
                         spec.umask,
                         std::move(*identity),
                         LinkSteps(spec)};
}

// Opens the job's log. Owned by `owner` (a job run as its user reads its own log) and 0600.
// A log the shim finds (a shim run again on its run dir) is kept; a link is never followed.
Result<UniqueFd> OpenLog(const std::string& path, const std::optional<Identity>& owner) {
  if (!owner) {
    UniqueFd log(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!log.valid()) return ErrnoStatus("open log " + path, errno);
    return log;
  }
  const int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW;
  UniqueFd log(::open(path.c_str(), flags | O_CREAT | O_EXCL, 0600));
  if (!log.valid() && errno == EEXIST) log.Reset(::open(path.c_str(), flags));
  if (!log.valid()) return ErrnoStatus("open log " + path, errno);
  struct stat st = {};
  if (::fstat(log.get(), &st) < 0) return ErrnoStatus("stat log " + path, errno);
  if (!S_ISREG(st.st_mode)) return Status::Invalid("log " + path + ": not a regular file");
  if (::fchown(log.get(), owner->uid, owner->gid) < 0 || ::fchmod(log.get(), 0600) < 0) {
    return ErrnoStatus("chown log " + path, errno);
  }
  return log;
}

// setgroups, setgid, setuid, then proof that root cannot be had back. Async-signal-safe.
void DropTo(const Identity& id, int report) {
  if (::setgroups(id.groups.size(), id.groups.data()) < 0) {
    child::Fail(report, kStepGroups, errno, kSpawnFailedExit);
  }
  if (::setgid(id.gid) < 0) child::Fail(report, kStepGid, errno, kSpawnFailedExit);
  if (::setuid(id.uid) < 0) child::Fail(report, kStepUid, errno, kSpawnFailedExit);
  if (id.uid != 0 && (::setuid(0) == 0 || ::seteuid(0) == 0)) {
    child::Fail(report, kStepRegain, EPERM, kSpawnFailedExit);
  }
}

// Like glibc's execvpe: skip directories that lack the file, report EACCES if any candidate
// was denied, stop at any other error. Never falls back to /bin/sh.
int ExecSearch(const PreparedCommand& c) {
  int err = ENOENT;
  bool denied = false;
  for (const std::string& path : c.candidates) {
    ::execve(path.c_str(), c.argv.data(), c.envp.data());
    err = errno;
    if (err == EACCES) {
      denied = true;
    } else if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ENODEV &&
               err != ETIMEDOUT) {
      return err;
    }
  }
  return denied ? EACCES : err;
}

// `shim` is the parent's pid, taken before fork.
// The command's stdio: input_fd -1 reads /dev/null. A session's pseudo-terminal is all three
// and becomes the controlling terminal of a new session (login(1)'s way): ^C and ^Z reach
// the foreground job, and a hangup its session.
struct CommandStdio {
  int input_fd = -1;
  int output_fd = -1;
  bool terminal = false;
};

[[noreturn]] void CommandChild(const PreparedCommand& c, const CgroupJoin& cgroup, pid_t shim,
                               const CommandStdio& stdio, int report_fd) {
  // A job must not outlive its supervisor unnoticed: killed with it (kill -9 included). The
  // daemon finds and stops what the command started itself (process.h, AttemptProcesses).
  // Checked after the prctl: a shim that died before it would never send the signal.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || ::getppid() != shim) ::_exit(kSpawnFailedExit);
  int report = child::MoveHigh(report_fd);
  if (report < 0) ::_exit(kSpawnFailedExit);
  // Into the attempt's cgroup while still root and before exec: everything the command ever
  // starts is born inside it, under its limits.
  for (int i = 0; i < cgroup.count; ++i) {
    if (::write(cgroup.fds[i], "0", 1) != 1)
      child::Fail(report, kStepCgroup, errno, kSpawnFailedExit);
  }
  if (stdio.terminal) {
    if (::setsid() < 0 || ::ioctl(stdio.output_fd, TIOCSCTTY, 0) < 0) {
      child::Fail(report, kStepStdio, errno, kSpawnFailedExit);
    }
  } else {
    ::setpgid(0, 0);
  }
  child::ResetSignals();
  int input = stdio.input_fd >= 0 ? stdio.input_fd : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int fds[] = {input, stdio.output_fd, stdio.output_fd};
  if (input < 0 || !child::InstallFds(fds, 3)) {
    child::Fail(report, kStepStdio, errno, kSpawnFailedExit);
  }
  if (c.identity) {
    DropTo(*c.identity, report);
    // A change of credentials clears the parent-death signal: armed again, and checked again.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || ::getppid() != shim) ::_exit(kSpawnFailedExit);
  }
  // After the drop: a directory the user may not enter fails here, as the user.
  if (!c.cwd.empty() && ::chdir(c.cwd.c_str()) < 0) {
    child::Fail(report, kStepChdir, errno, kSpawnFailedExit);
  }
  if (c.umask >= 0) ::umask(static_cast<mode_t>(c.umask));  // the shim itself runs under 077
  MakeLinks(c, report);
  // As a shell: 127 when no candidate exists, 126 when one does but cannot be run.
  int err = ExecSearch(c);
  child::Fail(report, kStepExec, err, err == ENOENT ? kSpawnFailedExit : kNotExecutableExit);
}

// The lock fd SpawnShim left us, if the variable names an fd open on this run dir's lock.
int InheritedLockFd(const std::string& lock_path) {
  const char* value = std::getenv(kShimLockFdEnv);
  if (value == nullptr) return -1;
  int fd = std::atoi(value);
  ::unsetenv(kShimLockFdEnv);
  struct stat inherited = {}, expected = {};
  if (fd < 0 || ::fstat(fd, &inherited) < 0 || ::stat(lock_path.c_str(), &expected) < 0) return -1;
  bool same = inherited.st_dev == expected.st_dev && inherited.st_ino == expected.st_ino;
  return same ? fd : -1;
}

class Shim {
 public:
  explicit Shim(std::string run_dir) : run_dir_(std::move(run_dir)) {}
  int Run();

 private:
  Status TakeLock();
  Status BlockSignals();
  Status Prepare();
  Status StartCommand();
  Status OpenTerminal(CommandStdio& stdio, UniqueFd& child_end);
  void AwaitClient();
  void PumpSession();
  void EndSession();
  void Supervise();
  void RunCleanup();
  int RunAside(std::vector<std::string>& argv, const char* stuck,
               std::chrono::milliseconds patience = std::chrono::milliseconds(30000),
               int output = -1);
  void ProbeGpus();
  milliseconds UntilDeadline() const;
  bool PastDeadline() const;
  void TakeControl();
  void Warn(std::string_view why);
  std::string SendWarning(int sig, bool batch_only);
  pid_t BatchShell();
  void CheckCheckpoint();
  milliseconds UntilNextCheck() const;
  bool SessionIdle();
  bool FenceDue();
  bool FenceLapsed();
  void StopTree(milliseconds grace);
  void SignalTree(int sig);
  std::vector<int64_t> TreePids() const;
  bool TreeGone();
  void WaitSignals(milliseconds timeout);
  void ReadOutput(size_t budget);
  void Reap();
  Result<std::vector<UniqueFd>> OpenCgroup();
  void EndCgroup();
  std::string FailureMessage(const ChildFailure& f) const;
  void LogLine(const std::string& line);
  // Runs `write` until it succeeds or fails otherwise than for space; while the disk is
  // full it waits (reading signals) and says so once. `give_up_on_cancel`: a stop request
  // ends the wait with the last error (the record is not needed once the job is stopped).
  template <class Write>
  Status WriteWaitingForSpace(const char* what, Write write, bool give_up_on_cancel);
  int Finish();

  std::string run_dir_;
  RunSpec spec_;
  UniqueFd lock_;
  UniqueFd signal_fd_;
  std::optional<PreparedCommand> command_;  // set by Prepare
  std::optional<LogWriter> log_;
  UniqueFd output_;  // the pipe's read end (non-blocking); closed at EOF
  std::vector<char> buffer_ = std::vector<char>(64 * 1024);
  pid_t main_pid_ = -1;
  bool main_reaped_ = false;
  bool cancel_requested_ = false;
  std::optional<Steady::time_point> deadline_;  // the time limit, from the command's start
  // The warning (RunSpec::warn_signal): when it is due before the time limit, and whether it
  // was sent. A ShimControl stop: its kind, reason and moment; control_seq_ the last request
  // acted on, control_pending_ a SIGUSR1 not yet read.
  std::optional<Steady::time_point> warn_at_;
  bool warned_ = false;
  bool control_pending_ = false;
  int64_t control_seq_ = 0;
  std::string stop_kind_;
  std::string stop_reason_;
  std::optional<Steady::time_point> stop_at_;
  // Self-fencing (RunSpec::fence_file): the node's last heartbeat renewal the shim knows of,
  // in BootClockMs — the latest stamp read, or the shim's start while none was readable (the
  // daemon had not renewed yet).
  int64_t last_renewal_ms_ = 0;
  std::optional<Steady::time_point> next_fence_check_;  // set while fencing applies
  ExitRecord rec_;
  std::string gpu_problem_;  // what the GPU isolation probe found wrong (ProbeGpus)
  // An interactive session (RunSpec::session_socket): its client, the program's input (a
  // pipe's write end; on a terminal output_, the master, takes it), what the client typed
  // that the program has not read yet, and the warning of the time limit.
  std::optional<SessionLink> session_;
  UniqueFd input_;
  bool terminal_ = false;
  // Where typed input goes: the terminal's master (the output's fd too), or the stdin pipe.
  int ProgramInput() const { return terminal_ ? output_.get() : input_.get(); }
  std::string pending_input_;
  bool hangup_requested_ = false;
  bool eof_pending_ = false;  // the client's input ended: close the pipe once it is written
  // The idle timeout (RunSpec::session_idle_ms): the last input, in BootClockMs, and when the
  // daemon's stamp of GPU use is read next.
  int64_t last_input_ms_ = 0;
  std::optional<Steady::time_point> next_idle_check_;
  std::optional<Steady::time_point> session_warn_at_;
  bool session_warned_ = false;
};

int Shim::Run() {
  if (Status st = TakeLock(); !st.ok()) {
    std::fprintf(stderr, "trainqd shim: %s\n", st.ToString().c_str());
    return st.code() == Code::kConflict ? kShimLockedExit : 1;
  }
  rec_.started_at = SystemClock().Now();
  last_renewal_ms_ = BootClockMs();
  Status st = BlockSignals();
  if (st.ok()) st = Prepare();
  if (st.ok() && !gpu_problem_.empty()) st = Status::Invalid(gpu_problem_);
  WaitSignals(milliseconds(0));  // a stop that came before the start: do not start at all
  rec_.cancelled = cancel_requested_;
  // A node already fenced does not start what another node may be about to run.
  if (st.ok() && !rec_.cancelled && !spec_.fence_file.empty()) rec_.fenced = FenceLapsed();
  if (st.ok() && !rec_.cancelled && !rec_.fenced && session_) AwaitClient();
  if (st.ok() && !rec_.cancelled && !rec_.fenced && rec_.hangup.empty()) st = StartCommand();
  if (!st.ok()) {
    rec_.spawn_failed = true;
    rec_.error = st.message();
    LogLine("trainq: " + st.message());
  }
  if (main_pid_ > 0) Supervise();
  EndSession();
  RunCleanup();
  EndCgroup();
  return Finish();
}

// RunSpec::cleanup, once the tree is gone: its output is dropped and its end not judged (a
// container already removed is no failure).
void Shim::RunCleanup() {
  if (!spec_.cleanup.empty()) RunAside(spec_.cleanup, "did not finish removing the container");
}

// Runs `argv` to its end beside the command: as the command's user, with its environment,
// output to the file `output` (or dropped); one that hangs past `patience` is killed and
// `stuck` logged. Its wait status, or -1.
int Shim::RunAside(std::vector<std::string>& argv, const char* stuck, milliseconds patience,
                   int output) {
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  char* const* envp = command_ ? command_->envp.data() : environ;
  const Identity* as = command_ && command_->identity ? &*command_->identity : nullptr;
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    child::ResetSignals();
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(output >= 0 ? output : null, 1);
      ::dup2(output >= 0 ? output : null, 2);
    }
    if (as != nullptr) DropTo(*as, -1);
    if (::chdir("/") < 0) ::_exit(127);  // not the shim's run dir: the user may not enter it
    ::execve(args[0], args.data(), envp);
    ::_exit(127);
  }
  auto give_up = Steady::now() + patience;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Steady::now() > give_up) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      LogLine(fmt::format("trainq: {} {}", argv[0], stuck));
      return -1;
    }
    ::usleep(20000);
  }
  return status;
}

// The GPU isolation probe (RunSpec::gpu_probe): its verdict for the node's setup goes to
// gpu_check_file, and what it found wrong fails the attempt. An archive's first load is
// part of it, hence the patience.
void Shim::ProbeGpus() {
  constexpr milliseconds kProbePatience{600000};
  std::string out_path = run_dir_ + "/gpu_probe.out";
  UniqueFd out(::open(out_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!out.valid()) {
    gpu_problem_ = "GPU isolation check: " + ErrnoStatus("open " + out_path, errno).message();
    return;
  }
  int status = RunAside(spec_.gpu_probe, "did not finish the GPU isolation check", kProbePatience,
                        out.get());
  int code = status < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  Result<std::string> said = ReadFileTail(out_path, 64 * 1024);
  GpuProbeVerdict v = JudgeGpuProbe(said.ok() ? *said : "", code, spec_.gpu_probe_expect);
  gpu_problem_ = v.problem;
  if (v.ran && !spec_.gpu_check_file.empty()) {
    (void)WriteGpuCheck(spec_.gpu_check_file, {spec_.gpu_check_key, v.problem.empty(), v.problem});
  }
}

Status Shim::TakeLock() {
  std::string path = LockPath(run_dir_);
  int fd = InheritedLockFd(path);
  if (fd >= 0 && ::fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) return ErrnoStatus("fcntl lock", errno);
  if (fd < 0) fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  lock_.Reset(fd);
  // Idempotent on the fd SpawnShim already locked; the guard when we opened it ourselves.
  int err = child::LockExclusive(fd);
  if (err == EWOULDBLOCK) return Status::Conflict(path + " is held by another shim");
  if (err != 0) return ErrnoStatus("flock " + path, err);
  return Status::Ok();
}

// No logic in handlers: the signals stay blocked and are read from a signalfd. SpawnShim
// blocked them before exec, so a stop sent while this process started is pending here;
// blocking them again covers a shim started by hand.
Status Shim::BlockSignals() {
  ::signal(SIGCHLD, SIG_DFL);  // SIG_IGN inherited from a careless parent would auto-reap
  // A session's program that exits with input unread: the write fails with EPIPE instead of
  // killing the shim. What the shim starts gets every disposition back (child::ResetSignals).
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kShimSignals) sigaddset(&set, sig);
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) < 0) return ErrnoStatus("sigprocmask", errno);
  signal_fd_.Reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd_.valid()) return ErrnoStatus("signalfd", errno);
  return Status::Ok();
}

Status Shim::Prepare() {
  auto spec = ReadRunSpec(run_dir_);
  if (!spec.ok()) return spec.status();
  spec_ = std::move(*spec);
  if (spec_.command.empty()) return Status::Invalid(SpecPath(run_dir_) + ": empty command");
  auto command = PrepareCommand(spec_);
  if (command.ok()) command_.emplace(std::move(*command));
  auto self = ReadProcStat(::getpid());
  if (!self) return Status::Internal("cannot read /proc/self/stat");
  // Not waited for: a restarted daemon adopts a locked run dir only through shim.json.
  TRAINQ_RETURN_IF_ERROR(WriteShimRecord(run_dir_, {self->pid, self->start_ticks}));
  std::string log_path = spec_.log_path.empty() ? LogPath(run_dir_) : spec_.log_path;
  const std::optional<Identity> none;
  const std::optional<Identity>& owner = command_ ? command_->identity : none;
  Status opened = WriteWaitingForSpace(
      "output.log",
      [&] {
        auto log = OpenLog(log_path, owner);
        if (!log.ok()) return log.status();
        log_.emplace(std::move(*log), spec_.log_max_bytes);
        return Status::Ok();
      },
      /*give_up_on_cancel=*/true);
  // The log first, so that it says why the command could not be prepared.
  if (!opened.ok()) return opened;
  if (!command.ok()) return command.status();
  if (!spec_.session_socket.empty()) {
    const std::optional<Identity>& user = command_->identity;
    Result<SessionLink> link = SessionLink::Listen(
        spec_.session_socket, user ? int64_t{user->uid} : -1, user ? int64_t{user->gid} : -1);
    if (!link.ok()) return link.status();
    session_.emplace(std::move(*link));
  }
  for (const std::string& line : spec_.notices) LogLine(line);
  // Before the shim is a subreaper: what these leave running is not the job's.
  if (!spec_.prepare.empty()) RunAside(spec_.prepare, "did not finish preparing");
  if (!spec_.gpu_probe.empty()) ProbeGpus();
  // Workers that daemonise (torchrun's, in their own sessions) stay our descendants.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) return ErrnoStatus("PR_SET_CHILD_SUBREAPER", errno);
  return Status::Ok();
}

Status Shim::StartCommand() {
  const PreparedCommand& command = *command_;
  auto report = MakeCloexecPipe();
  if (!report.ok()) return report.status();
  // Both ends close-on-exec: the child installs the write end as fds 1 and 2 (dup2 clears
  // the flag there), so the read end never reaches the command. A session's terminal instead.
  CommandStdio stdio;
  UniqueFd child_end;  // the parent's copy of what the child installs, closed after fork
  UniqueFd child_input;
  if (session_ && session_->hello_value().tty) {
    TRAINQ_RETURN_IF_ERROR(OpenTerminal(stdio, child_end));
  } else {
    auto output = MakeCloexecPipe();
    if (!output.ok()) return output.status();
    output_ = std::move(output->read);
    child_end = std::move(output->write);
    stdio.output_fd = child_end.get();
    if (session_) {
      auto input = MakeCloexecPipe();
      if (!input.ok()) return input.status();
      input_ = std::move(input->write);
      child_input = std::move(input->read);
      stdio.input_fd = child_input.get();
      if (::fcntl(input_.get(), F_SETFL, O_NONBLOCK) < 0) {
        return ErrnoStatus("fcntl O_NONBLOCK", errno);
      }
    }
  }
  if (::fcntl(output_.get(), F_SETFL, O_NONBLOCK) < 0) {
    return ErrnoStatus("fcntl O_NONBLOCK", errno);
  }
  rec_.started_at = SystemClock().Now();
  if (spec_.time_limit_ms > 0) {
    deadline_ = Steady::now() + milliseconds(spec_.time_limit_ms);
    // A lead longer than the limit warns at the start, as Slurm does.
    if (spec_.warn_signal > 0) {
      warn_at_ = *deadline_ - milliseconds(std::min(spec_.warn_lead_ms, spec_.time_limit_ms));
    }
    if (session_) {
      session_warn_at_ =
          *deadline_ - std::min(kSessionWarning, milliseconds(spec_.time_limit_ms / 2));
    }
  }
  if (!spec_.fence_file.empty()) next_fence_check_ = Steady::now();
  if (session_ && spec_.session_idle_ms > 0) {
    last_input_ms_ = BootClockMs();
    next_idle_check_ = Steady::now() + milliseconds(spec_.session_idle_ms);
  }
  auto cgroup_fds = OpenCgroup();
  if (!cgroup_fds.ok()) return cgroup_fds.status();
  CgroupJoin join;
  for (const UniqueFd& fd : *cgroup_fds) join.fds[join.count++] = fd.get();
  pid_t self = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) CommandChild(command, join, self, stdio, report->write.get());
  main_pid_ = pid;
  child_end.Reset();  // else the pipe never reaches EOF (the terminal never hangs up)
  child_input.Reset();
  // The child does it too; whichever runs first wins. Not for a terminal's child: setsid
  // fails in a process that already leads a group.
  if (!stdio.terminal) ::setpgid(pid, pid);
  report->write.Reset();
  if (auto failure = ReadChildReport(report->read.get())) {
    rec_.spawn_failed = true;
    rec_.error = FailureMessage(*failure);
    LogLine("trainq: " + rec_.error);
  }
  return Status::Ok();
}

// A pseudo-terminal of the client's size, its slave the user's (as login(1) leaves a tty):
// the master becomes output_, through which the program's input goes too.
Status Shim::OpenTerminal(CommandStdio& stdio, UniqueFd& child_end) {
  UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master.valid()) return ErrnoStatus("posix_openpt", errno);
  if (::grantpt(master.get()) < 0 || ::unlockpt(master.get()) < 0) {
    return ErrnoStatus("unlockpt", errno);
  }
  char name[128];
  if (::ptsname_r(master.get(), name, sizeof(name)) != 0) return ErrnoStatus("ptsname", errno);
  child_end.Reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!child_end.valid()) return ErrnoStatus(fmt::format("open {}", name), errno);
  if (const std::optional<Identity>& user = command_->identity) {
    if (::fchown(child_end.get(), user->uid, static_cast<gid_t>(-1)) < 0) {
      return ErrnoStatus(fmt::format("chown {}", name), errno);
    }
  }
  WindowSize size = session_->hello_value().size;
  struct winsize ws = {};
  ws.ws_row = size.rows;
  ws.ws_col = size.cols;
  if (::ioctl(master.get(), TIOCSWINSZ, &ws) < 0) return ErrnoStatus("TIOCSWINSZ", errno);
  terminal_ = true;
  output_ = std::move(master);
  stdio.input_fd = child_end.get();
  stdio.output_fd = child_end.get();
  stdio.terminal = true;
  return Status::Ok();
}

// Before the command starts: the client's hello, which says whether the program gets a
// terminal and of what size, so nothing it prints is lost or drawn at a wrong width. A stop
// request, or no client in session_wait_ms, ends the attempt unstarted.
void Shim::AwaitClient() {
  auto give_up = Steady::now() + milliseconds(spec_.session_wait_ms);
  while (!session_->hello() && !cancel_requested_) {
    if (session_->gone()) {
      rec_.hangup = session_->why_gone() + " before the session started";
      return LogLine("trainq: " + rec_.hangup);
    }
    auto left = std::chrono::ceil<milliseconds>(give_up - Steady::now());
    if (left.count() <= 0) {
      rec_.hangup =
          fmt::format("no terminal connected within {}", FormatDuration(spec_.session_wait_ms));
      return LogLine("trainq: " + rec_.hangup + "; the session did not start");
    }
    WaitSignals(std::min(left, milliseconds(1000)));
  }
  if (cancel_requested_) {
    rec_.cancelled = true;
    LogLine("trainq: the session was cancelled before it started");
    return;
  }
  int64_t at = spec_.session_tty_flag_at;
  if (session_->hello() && session_->hello_value().tty && !spec_.session_tty_flag.empty() &&
      at >= 0 && at <= static_cast<int64_t>(spec_.command.size())) {
    spec_.command.insert(spec_.command.begin() + at, spec_.session_tty_flag);
    command_->argv = CStringArray(spec_.command);
  }
}

// After each wake-up: what the client sent goes to the program; its going away is a hangup.
void Shim::PumpSession() {
  if (!session_) return;
  std::string typed = session_->TakeInput();
  if (!typed.empty()) last_input_ms_ = BootClockMs();
  pending_input_ += typed;
  int input = ProgramInput();
  // A resize before the terminal exists waits in the link for it (the latest one counts).
  if (std::optional<WindowSize> size = terminal_ ? session_->TakeResize() : std::nullopt) {
    struct winsize ws = {};
    ws.ws_row = size->rows;
    ws.ws_col = size->cols;
    (void)::ioctl(output_.get(), TIOCSWINSZ, &ws);  // the kernel tells the foreground job
  }
  if (session_->TakeEof()) {
    if (terminal_) {
      pending_input_ += '\x04';  // ^D: the terminal's end of input
    } else {
      eof_pending_ = true;
    }
  }
  while (input >= 0 && !pending_input_.empty()) {
    ssize_t n = ::write(input, pending_input_.data(), pending_input_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) {  // the program closed its input, or the terminal hung up
      pending_input_.clear();
      break;
    }
    pending_input_.erase(0, static_cast<size_t>(n));
  }
  if (eof_pending_ && pending_input_.empty()) input_.Reset();
  session_->set_reading(pending_input_.size() < kMaxPendingInput);
  if (session_->gone() && main_pid_ > 0 && !main_reaped_) hangup_requested_ = true;
}

// The exit frame, after the program's last output: `trainq shell` exits with its status.
void Shim::EndSession() {
  if (!session_) return;
  SessionExit exit;
  if (rec_.exit_code) {
    exit.status = *rec_.exit_code;
    if (!rec_.hangup.empty() || rec_.cancelled || rec_.time_limit) exit.how = "the session ended";
  } else if (rec_.signal) {
    exit.status = 128 + *rec_.signal;
    exit.how = fmt::format("killed by SIG{}", sigabbrev_np(*rec_.signal));
  } else {
    exit.status = 255;  // ssh's own failure status: the program never ran
    exit.how = !rec_.error.empty()    ? rec_.error
               : !rec_.hangup.empty() ? rec_.hangup
                                      : "the session did not start";
  }
  session_->SendExit(exit);
  session_->Finish(kSessionFlush);
}

std::string Shim::FailureMessage(const ChildFailure& f) const {
  std::string reason = std::strerror(f.err);
  switch (f.step) {
    case kStepChdir:
      if (command_->identity) {
        return fmt::format("cwd: user {} may not enter {}: {}", spec_.user, spec_.cwd, reason);
      }
      return "cannot change directory to '" + spec_.cwd + "': " + reason;
    case kStepGroups:
      return fmt::format("setgroups for user {}: {}", spec_.user, reason);
    case kStepGid:
      return fmt::format("setgid {}: {}", spec_.gid, reason);
    case kStepUid:
      return fmt::format("setuid {}: {}", spec_.uid, reason);
    case kStepRegain:
      return fmt::format("setuid {}: root could be regained after the change; not running",
                         spec_.uid);
    case kStepExec:
      return "cannot run '" + spec_.command[0] + "': " + reason;
    case kStepCgroup:
      return fmt::format("cannot join cgroup {}: {}", spec_.cgroup.name, reason);
    default:
      if (f.step >= kStepLink && static_cast<size_t>(f.step - kStepLink) < spec_.links.size()) {
        const auto& [path, target] = spec_.links[static_cast<size_t>(f.step - kStepLink)];
        return fmt::format("--stage: cannot make {} a link to {}: {}", path, target,
                           f.err == EEXIST ? "something else is there already" : reason);
      }
      return "cannot set up stdin/stdout/stderr: " + reason;
  }
}

void Shim::Supervise() {
  PumpSession();  // what the client sent before the start: input typed ahead, its end
  while (!main_reaped_) {
    WaitSignals(UntilNextCheck());
    Reap();
    if (control_pending_) TakeControl();
    if (rec_.cancelled || rec_.time_limit || rec_.fenced || !rec_.stop.empty() ||
        !rec_.hangup.empty() || main_reaped_) {
      continue;
    }
    if (warn_at_ && !warned_ && Steady::now() >= *warn_at_) {
      Warn(fmt::format("the time limit ({}) is {} away", FormatDuration(spec_.time_limit_ms),
                       FormatDuration(std::min(spec_.warn_lead_ms, spec_.time_limit_ms))));
    }
    if (session_warn_at_ && !session_warned_ && Steady::now() >= *session_warn_at_) {
      session_warned_ = true;
      auto left = std::chrono::ceil<std::chrono::seconds>(*deadline_ - Steady::now());
      LogLine(fmt::format("trainq: this session ends in {} (its time limit, --time {})",
                          FormatDuration(std::chrono::duration_cast<milliseconds>(left).count()),
                          FormatDuration(spec_.time_limit_ms)));
    }
    if (cancel_requested_) {
      rec_.cancelled = true;
      if (session_) LogLine("trainq: the session was cancelled; hanging up");
      StopTree(milliseconds(spec_.grace_ms));
    } else if (SessionIdle()) {
      rec_.hangup = fmt::format("idle for {}: no input and no GPU use (interactive_idle_timeout)",
                                FormatDuration(spec_.session_idle_ms));
      LogLine("trainq: " + rec_.hangup + "; hanging up the session");
      StopTree(milliseconds(spec_.grace_ms));
    } else if (hangup_requested_) {
      rec_.hangup = session_->why_gone();
      LogLine("trainq: " + rec_.hangup + "; hanging up the session");
      StopTree(milliseconds(spec_.grace_ms));
    } else if (PastDeadline()) {
      rec_.time_limit = true;
      LogLine("trainq: time limit (" + FormatDuration(spec_.time_limit_ms) +
              ") reached; stopping the job");
      StopTree(milliseconds(spec_.grace_ms));
    } else if (stop_at_ && Steady::now() >= *stop_at_) {
      rec_.stop = stop_kind_;
      rec_.stop_reason = stop_reason_;
      LogLine("trainq: " + stop_reason_ + "; stopping the job");
      StopTree(milliseconds(spec_.grace_ms));
    } else if (FenceDue() && FenceLapsed()) {
      rec_.fenced = true;
      StopTree(milliseconds(spec_.grace_ms));
    }
  }
  // A stop asked for whose moment had not come: the job ended first (it saved and left on the
  // warning), and its end is still the stop's.
  if (!stop_kind_.empty() && rec_.stop.empty() && !rec_.cancelled) {
    rec_.stop = stop_kind_;
    rec_.stop_reason = stop_reason_;
  }
  // Leftovers (background processes, orphaned workers) would keep holding GPU memory. They
  // may hold the pipe too: it is read while they live, and what they left is read after.
  StopTree(std::min(milliseconds(spec_.grace_ms), kLeftoverGrace));
  ReadOutput(kDrainLimit);
  output_.Reset();
  if (warned_ && !spec_.checkpoint.empty()) CheckCheckpoint();
}

// Acts on a new request in control.json: a signal for the job now, a stop (warned first).
void Shim::TakeControl() {
  control_pending_ = false;
  Result<ShimControl> c = ReadShimControl(run_dir_);
  if (!c.ok() || c->seq <= control_seq_) return;
  control_seq_ = c->seq;
  if (c->signal > 0 && !main_reaped_) {
    LogLine("trainq: asked to signal the job; " + SendWarning(c->signal, c->batch_only));
  }
  if (c->stop.empty()) return;
  auto at = Steady::now() + milliseconds(c->stop_in_ms);
  // A later request may only bring the stop closer (the job asking to be requeued while its
  // preemption's warning runs); the first kind and reason stay.
  if (stop_at_ && *stop_at_ <= at) return;
  if (stop_kind_.empty()) {
    stop_kind_ = c->stop;
    stop_reason_ = c->reason;
  }
  stop_at_ = at;
  if (c->stop_in_ms > 0 && !warned_) {
    Warn(fmt::format("{}: stopping in {}", c->reason, FormatDuration(c->stop_in_ms)));
  }
}

void Shim::Warn(std::string_view why) {
  warned_ = true;
  if (spec_.warn_signal <= 0 || main_reaped_) return;
  rec_.warned_at = SystemClock().Now();
  LogLine(
      fmt::format("trainq: {}; {}", why, SendWarning(spec_.warn_signal, spec_.warn_batch_only)));
}

// `sig` to the batch shell, or to every process of the tree that handles it: one that does
// not would only die of it (torchrun's agent of SIGUSR1, a batch script's wrapper), as Slurm
// spares the batch shell unless told B:. What was done, for the log.
std::string Shim::SendWarning(int sig, bool batch_only) {
  std::string name = fmt::format("SIG{}", sigabbrev_np(sig));
  if (batch_only) {
    ::kill(BatchShell(), sig);
    return fmt::format("sent {} to the batch shell", name);
  }
  size_t sent = 0;
  for (int64_t pid : TreePids()) {
    if (!CatchesSignal(pid, sig)) continue;
    ::kill(static_cast<pid_t>(pid), sig);
    ++sent;
  }
  if (sent == 0) return fmt::format("no process of the job handles {}, so none was sent it", name);
  return fmt::format("sent {} to the {} process{} of the job that handle{} it", name, sent,
                     sent == 1 ? "" : "es", sent == 1 ? "s" : "");
}

// The batch shell: the command's own process, or (an sbatch job, RunSpec::batch_script) the
// oldest process of the tree running the script the wrapper copied.
pid_t Shim::BatchShell() {
  if (spec_.batch_script.empty()) return main_pid_;
  pid_t found = main_pid_;
  uint64_t oldest = UINT64_MAX;
  for (int64_t pid : Descendants(::getpid())) {
    std::vector<std::string> argv = ProcessArgv(pid);
    bool script = false;
    for (size_t i = 0; i < std::min<size_t>(argv.size(), 2); ++i) {
      script = script || argv[i].ends_with(spec_.batch_script);
    }
    std::optional<ProcStat> st = script ? ReadProcStat(pid) : std::nullopt;
    if (st && st->start_ticks < oldest) {
      oldest = st->start_ticks;
      found = static_cast<pid_t>(pid);
    }
  }
  return found;
}

// --checkpoint: the newest file matching the glob in cwd modified after the warning. Links
// are not followed: only what the job itself wrote is judged.
void Shim::CheckCheckpoint() {
  constexpr int64_t kCoarseClockSlackMs = 20;
  if (rec_.warned_at <= 0) return;
  std::string pattern =
      spec_.checkpoint.starts_with('/') ? spec_.checkpoint : spec_.cwd + "/" + spec_.checkpoint;
  glob_t found = {};
  if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &found) != 0) {
    ::globfree(&found);
    return;
  }
  int64_t newest = 0;
  for (size_t i = 0; i < found.gl_pathc; ++i) {
    struct stat st = {};
    if (::lstat(found.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode)) continue;
    int64_t mtime = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
    // The kernel stamps files from a coarse clock, up to a tick behind the one read here.
    if (mtime >= rec_.warned_at - kCoarseClockSlackMs && mtime > newest) {
      newest = mtime;
      std::string_view path = found.gl_pathv[i];
      if (path.starts_with(spec_.cwd + "/")) path.remove_prefix(spec_.cwd.size() + 1);
      rec_.checkpoint = std::string(path);
    }
  }
  ::globfree(&found);
}

// How long the supervision loop may sleep: until the time limit, or forever without one.
milliseconds Shim::UntilDeadline() const {
  if (!deadline_) return milliseconds(-1);
  auto left = std::chrono::ceil<milliseconds>(*deadline_ - Steady::now());
  // poll(2) takes an int; a far deadline is simply approached in steps.
  return std::clamp(left, milliseconds(0), milliseconds(3600 * 1000));
}

bool Shim::PastDeadline() const { return deadline_ && Steady::now() >= *deadline_; }

// The supervision loop's sleep: until the time limit or the next read of the fence file.
milliseconds Shim::UntilNextCheck() const {
  if (control_pending_) return milliseconds(0);  // read before the command started
  milliseconds wait = UntilDeadline();
  for (const auto& at : {warned_ ? std::nullopt : warn_at_, stop_at_,
                         session_warned_ ? std::nullopt : session_warn_at_, next_idle_check_}) {
    if (!at) continue;
    auto left = std::max(std::chrono::ceil<milliseconds>(*at - Steady::now()), milliseconds(0));
    wait = wait < milliseconds(0) ? left : std::min(wait, left);
  }
  if (!next_fence_check_) return wait;
  auto fence = std::chrono::ceil<milliseconds>(*next_fence_check_ - Steady::now());
  fence = std::max(fence, milliseconds(0));
  return wait < milliseconds(0) ? fence : std::min(wait, fence);
}

// Whether a session has had neither input nor GPU use for session_idle_ms; when not, the next
// check is due when it could first be, from the latest of the two.
bool Shim::SessionIdle() {
  if (!next_idle_check_ || Steady::now() < *next_idle_check_) return false;
  int64_t active = last_input_ms_;
  if (Result<int64_t> gpu = ReadFenceStamp(spec_.session_activity_file); gpu.ok()) {
    active = std::max(active, *gpu);
  }
  int64_t left = spec_.session_idle_ms - (BootClockMs() - active);
  if (left <= 0) return true;
  next_idle_check_ = Steady::now() + milliseconds(left);
  return false;
}

// Output wakes the loop too: the file is read on schedule, not on every chunk of output.
bool Shim::FenceDue() {
  if (!next_fence_check_ || Steady::now() < *next_fence_check_) return false;
  next_fence_check_ = Steady::now() + milliseconds(FenceCheckIntervalMs(spec_.fence_after_ms));
  return true;
}

// Reads the daemon's stamp; true, with the reason recorded and logged, once the node has
// not renewed its heartbeat for longer than fence_after_ms. An absent or unreadable file
// keeps the last renewal known: a daemon that cannot write it cannot vouch for the node.
bool Shim::FenceLapsed() {
  auto stamp = ReadFenceStamp(spec_.fence_file);
  if (stamp.ok()) last_renewal_ms_ = *stamp;
  int64_t lapse = BootClockMs() - last_renewal_ms_;
  if (lapse <= spec_.fence_after_ms) return false;
  std::string why = fmt::format("node heartbeat not renewed for {:.1f} s (fence_after {:.1f} s)",
                                static_cast<double>(lapse) / 1000,
                                static_cast<double>(spec_.fence_after_ms) / 1000);
  rec_.error = "stopped: " + why;
  LogLine("trainq: " + why + "; stopping the job, another node may run it");
  return true;
}

void Shim::StopTree(milliseconds grace) {
  if (TreeGone()) return;
  auto wait_gone = [this](milliseconds within) {
    auto deadline = Steady::now() + within;
    while (!TreeGone() && Steady::now() < deadline) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Steady::now());
      WaitSignals(std::clamp(left, milliseconds(0), kPoll));
    }
  };
  // A session is hung up first, as a closed terminal would be, and given the grace to leave
  // (an interactive shell ignores SIGTERM but leaves on SIGHUP, hanging up its own jobs);
  // then the usual stop.
  if (session_) {
    SignalTree(SIGHUP);
    wait_gone(grace);
    if (TreeGone()) return;
  }
  SignalTree(SIGTERM);
  wait_gone(grace);
  auto give_up = Steady::now() + kKillPatience;
  while (!TreeGone()) {  // rescan: processes may fork while we kill
    if (main_reaped_ && Steady::now() > give_up) {
      LogLine("trainq: some processes of this job survive SIGKILL; leaving them");
      return;
    }
    SignalTree(SIGKILL);
    WaitSignals(kPoll);
  }
}

// The cgroup is the authority: it holds whatever the tree started, however it left.
std::vector<int64_t> Shim::TreePids() const {
  std::vector<int64_t> pids = Descendants(::getpid());
  for (int64_t pid : CgroupProcs(spec_.cgroup)) pids.push_back(pid);
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

void Shim::SignalTree(int sig) {
  std::vector<int64_t> pids = TreePids();
  // The group id cannot be reused while its leader is unreaped; afterwards the scan suffices.
  bool group = !main_reaped_;
  if (group) ::kill(-main_pid_, sig);
  // Each process once: docker's client, for one, stops passing SIGTERM on to its container
  // and exits at the third it receives.
  for (int64_t pid : pids) {
    if (group && ::getpgid(static_cast<pid_t>(pid)) == main_pid_) continue;
    ::kill(static_cast<pid_t>(pid), sig);
  }
}

bool Shim::TreeGone() {
  Reap();
  if (!main_reaped_) return false;
  // As a subreaper the shim is the parent of every orphan, so each live descendant hangs
  // below a child of the shim: no children at all means no tree. A child left after Reap is
  // alive or still exiting (it may have closed the pipe, waking us, before it can be
  // reaped); a /proc scan would miss it and leave it unreaped, so wait for its SIGCHLD.
  siginfo_t info = {};
  bool no_children = ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD;
  return no_children && CgroupProcs(spec_.cgroup).empty();
}

// Creates the attempt's cgroup with its limits and opens the files the child joins it by.
// No cgroup in the spec: nothing to join.
Result<std::vector<UniqueFd>> Shim::OpenCgroup() {
  std::vector<UniqueFd> fds;
  if (!spec_.cgroup.on()) return fds;
  if (Status st = CreateCgroup(spec_.cgroup); !st.ok())
    return Status::Io("cgroup: " + st.message());
  for (const std::string& file : CgroupJoinFiles(spec_.cgroup)) {
    fds.emplace_back(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fds.back().valid()) return ErrnoStatus("cgroup: open " + file, errno);
  }
  return fds;
}

// Once the tree is gone: what the limits did, in the job's log and exit record, and the group
// removed. A group the kernel still counts a dying process in is retried for a moment.
void Shim::EndCgroup() {
  if (!spec_.cgroup.on()) return;
  const CgroupLimits& limits = spec_.cgroup.limits;
  if (uint64_t kills = CgroupOomKills(spec_.cgroup); kills > 0 && limits.mem_bytes > 0) {
    rec_.mem_limit_hit = limits.mem_bytes;
    LogLine(
        fmt::format("trainq: host memory limit {} reached (--mem-limit); the kernel killed "
                    "{} of this job's processes",
                    FormatBytes(limits.mem_bytes), kills));
  }
  if (uint64_t refused = CgroupForksRefused(spec_.cgroup); refused > 0) {
    LogLine(fmt::format("trainq: {} forks refused at the task limit {} (--max-procs)", refused,
                        limits.max_tasks));
  }
  auto give_up = Steady::now() + kLeftoverGrace;
  Status st = RemoveCgroup(spec_.cgroup);
  while (!st.ok() && Steady::now() < give_up) {
    WaitSignals(kPoll);
    st = RemoveCgroup(spec_.cgroup);
  }
  if (!st.ok())
    std::fprintf(stderr, "trainqd shim %s: %s\n", run_dir_.c_str(), st.ToString().c_str());
}

// Every wait also reads the command's output: a job blocked on a full pipe would never end,
// not even while it is being stopped. Returns early when output arrives.
void Shim::WaitSignals(milliseconds timeout) {
  // signals, output, and a session's listener, client and the program's input.
  struct pollfd p[5] = {{signal_fd_.get(), POLLIN, 0}, {output_.get(), POLLIN, 0}};
  // A session's client that does not read holds the program's output, not the shim's memory.
  if (!output_.valid() || (session_ && session_->room() == 0)) p[1].fd = -1;
  int nfds = 2;
  if (session_) {
    session_->PollFds(p[2], p[3]);
    int input = ProgramInput();
    p[4] = {pending_input_.empty() ? -1 : input, POLLOUT, 0};
    nfds = 5;
  }
  // Without a signalfd (its setup failed) this is still a wait, never a spin: poll skips a
  // negative fd.
  if (!signal_fd_.valid()) p[0].fd = -1;
  int ready = ::poll(p, static_cast<nfds_t>(nfds), static_cast<int>(timeout.count()));
  if (ready > 0 && p[1].fd >= 0 && p[1].revents != 0) ReadOutput(kReadBudget);
  if (session_) {
    if (ready > 0) session_->Handle(p[2], p[3]);
    PumpSession();
  }
  if (ready <= 0) return;
  if (!signal_fd_.valid() || (p[0].revents & POLLIN) == 0) return;
  struct signalfd_siginfo info;
  while (::read(signal_fd_.get(), &info, sizeof(info)) == sizeof(info)) {
    if (info.ssi_signo == SIGUSR1) {
      control_pending_ = true;
    } else if (info.ssi_signo != SIGCHLD) {
      cancel_requested_ = true;
    }
  }
}

// Moves up to `budget` bytes from the pipe into the log; closes the pipe at EOF (no writer
// left). A failed log write loses those bytes only: the pipe is still emptied, so the job
// never blocks on it.
void Shim::ReadOutput(size_t budget) {
  while (output_.valid() && budget > 0) {
    size_t chunk = std::min(buffer_.size(), budget);
    if (session_) chunk = std::min(chunk, session_->room());
    if (chunk == 0) return;  // the client reads slowly: the program waits, as on a terminal
    ssize_t n = ::read(output_.get(), buffer_.data(), chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // EIO: a terminal's master once no process holds its slave, a pipe's EOF.
    if (n <= 0) {
      output_.Reset();
      return;
    }
    std::string_view bytes(buffer_.data(), static_cast<size_t>(n));
    if (log_ && !spec_.session_no_log) (void)log_->Append(bytes);
    if (session_) session_->SendOutput(bytes);
    budget -= static_cast<size_t>(n);
  }
}

// Reaps every exited child: the command and orphans reparented to us as subreaper.
void Shim::Reap() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;
    if (pid != main_pid_) continue;
    main_reaped_ = true;
    if (WIFEXITED(status)) rec_.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) rec_.signal = WTERMSIG(status);
  }
}

void Shim::LogLine(const std::string& line) {
  ReadOutput(kReadBudget);  // what the command wrote before this, first
  // A session's user sees trainq's lines on the terminal as well.
  if (session_) session_->SendNotice(line);
  if (!log_) return;
  (void)log_->Append(line + "\n");
}

template <class Write>
Status Shim::WriteWaitingForSpace(const char* what, Write write, bool give_up_on_cancel) {
  milliseconds wait = kNoSpaceFirstRetry;
  bool said = false;
  for (;;) {
    Status st = write();
    if (st.code() != Code::kNoSpace || (give_up_on_cancel && cancel_requested_)) return st;
    if (!said) {
      // The daemon log and the job's log may well be on the full disk too: best effort.
      std::string line = "trainq: cannot write " + std::string(what) + " (" + st.message() +
                         "); trying again until there is space";
      std::fprintf(stderr, "trainqd shim %s: %s\n", run_dir_.c_str(), line.c_str());
      LogLine(line);
      said = true;
    }
    WaitSignals(wait);
    wait = std::min(wait * 2, kNoSpaceMaxRetry);
  }
}

// On a full disk the shim waits for space with its lock held: the daemon still sees a live
// shim (it can be cancelled, and a restarted daemon re-adopts it) and its real exit is kept.
int Shim::Finish() {
  rec_.ended_at = SystemClock().Now();
  Status st = WriteWaitingForSpace(
      "exit.json", [this] { return WriteExitRecord(run_dir_, rec_); },
      /*give_up_on_cancel=*/false);
  if (!st.ok()) {
    std::fprintf(stderr, "trainqd shim: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int RunShim(const std::string& run_dir) { return Shim(run_dir).Run(); }

}  // namespace trainq
