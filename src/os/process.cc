// Starting shims and watching processes we did not start (docs/architecture.md).
#include "src/os/process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/os/child_setup.h"
#include "src/os/run_dir.h"

extern char** environ;

namespace trainq {
namespace {

enum SpawnStep : int { kStepSession = 1, kStepLockOpen, kStepLock, kStepFds, kStepExec };

const char* StepName(int step) {
  switch (step) {
    case kStepSession:
      return "setsid";
    case kStepLockOpen:
      return "open lock";
    case kStepLock:
      return "flock";
    case kStepFds:
      return "set up fds";
    default:
      return "exec";
  }
}

// Everything the child needs, built before fork so the child does not allocate.
struct ShimExec {
  std::string binary;
  std::string lock_path;
  CStringArray argv;
  CStringArray envp;
  sigset_t blocked;  // kShimSignals
};

CStringArray ShimEnvironment() {
  std::string prefix = std::string(kShimLockFdEnv) + "=";
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, prefix.c_str(), prefix.size()) != 0) env.emplace_back(*e);
  }
  env.push_back(prefix + std::to_string(kShimLockFd));
  return CStringArray(std::move(env));
}

ShimExec PrepareShimExec(const ShimCommand& command, const std::string& run_dir) {
  std::vector<std::string> argv = {command.binary.substr(command.binary.rfind('/') + 1)};
  argv.insert(argv.end(), command.args.begin(), command.args.end());
  argv.push_back(run_dir);
  ShimExec e{
      command.binary, LockPath(run_dir), CStringArray(std::move(argv)), ShimEnvironment(), {}};
  sigemptyset(&e.blocked);
  for (int sig : kShimSignals) sigaddset(&e.blocked, sig);
  return e;
}

// Async-signal-safe from here to execve (the daemon may have threads), and it runs in the
// daemon's memory (vfork, below): it writes nothing but its own stack and descriptors.
[[noreturn]] void ShimChild(const ShimExec& e, int daemon_log_fd, int report_fd) {
  int report = child::MoveHigh(report_fd);
  if (report < 0) ::_exit(125);
  child::ResetSignals(&e.blocked);
  if (::setsid() < 0) child::Fail(report, kStepSession, errno, 125);
  int lock = ::open(e.lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) child::Fail(report, kStepLockOpen, errno, 125);
  if (int err = child::LockExclusive(lock); err != 0) {
    child::Fail(report, kStepLock, err, err == EWOULDBLOCK ? kShimLockedExit : 125);
  }
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  int out = daemon_log_fd >= 0 ? daemon_log_fd : devnull;
  const int fds[] = {devnull, out, out, lock};
  static_assert(kShimLockFd == 3, "fds[] puts the lock at index 3");
  if (devnull < 0 || !child::InstallFds(fds, 4)) child::Fail(report, kStepFds, errno, 125);
  ::execve(e.binary.c_str(), e.argv.data(), e.envp.data());
  child::Fail(report, kStepExec, errno, 127);
}

Status FailedShim(pid_t pid, const ChildFailure& f, const ShimExec& e) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (f.step == kStepLock && f.err == EWOULDBLOCK) {
    return Status::Conflict(e.lock_path + " is held by another shim (exit " +
                            std::to_string(WEXITSTATUS(status)) + ")");
  }
  std::string what = std::string(StepName(f.step)) + " for shim";
  if (f.step == kStepExec) what = "exec " + e.binary;
  if (f.step == kStepLockOpen || f.step == kStepLock) what += " " + e.lock_path;
  return ErrnoStatus(what, f.err);
}

Result<SpawnedShim> AdoptChild(pid_t pid) {
  auto pidfd = OpenPidfd(pid);
  auto st = ReadProcStat(pid);
  if (pidfd.ok() && st) return SpawnedShim{pid, st->start_ticks, std::move(*pidfd)};
  // Unwatchable: stop it rather than leave a shim nobody will collect.
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (!pidfd.ok()) return pidfd.status();
  return Status::Internal("no /proc entry for our child " + std::to_string(pid));
}

}  // namespace

Result<SpawnedShim> SpawnShim(const ShimCommand& command, const std::string& run_dir,
                              int daemon_log_fd) {
  ShimExec exec = PrepareShimExec(command, run_dir);
  auto report = MakeCloexecPipe();
  if (!report.ok()) return report.status();
  // vfork: the child borrows the daemon's memory until it execs or exits, where fork would copy
  // the page tables of a daemon holding a large queue first (the start path's largest cost
  // after the shim's own start). ShimChild never returns, allocates or writes shared memory;
  // signal dispositions are the child's own (no CLONE_SIGHAND).
  // Every signal blocked across it: none may run a handler of the daemon's in the child
  // before ShimChild has reset them.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = ::vfork();
  if (pid == 0) ShimChild(exec, daemon_log_fd, report->write.get());
  int vfork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return ErrnoStatus("vfork", vfork_errno);
  report->write.Reset();
  // EOF once execve closed the child's end: the lock is held and the shim runs.
  if (auto failure = ReadChildReport(report->read.get())) return FailedShim(pid, *failure, exec);
  return AdoptChild(pid);
}

Result<UniqueFd> OpenPidfd(int64_t pid) {
  if (pid <= 0) return Status::Invalid("pid " + std::to_string(pid));
  // pidfds are always close-on-exec.
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  if (fd >= 0) return UniqueFd(fd);
  if (errno == ESRCH) return Status::NotFound("no process " + std::to_string(pid));
  if (errno == ENOSYS) return Status::Unavailable("pidfd_open: kernel older than 5.3");
  return ErrnoStatus("pidfd_open " + std::to_string(pid), errno);
}

bool PidfdExited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;  // readable (or an error): the process is gone
}

Result<PinnedProcess> PinProcess(int64_t pid) {
  Result<UniqueFd> fd = OpenPidfd(pid);
  if (!fd.ok()) return fd.status();
  std::optional<ProcStat> stat = ReadProcStat(pid);
  struct stat st = {};
  bool read = stat && ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0;
  // Read after the pidfd was taken and before it shows an exit: the facts are this process's.
  if (!read || stat->state == 'Z' || PidfdExited(fd->get())) {
    return Status::NotFound("no process " + std::to_string(pid));
  }
  return PinnedProcess{std::move(*fd), *stat, static_cast<int64_t>(st.st_uid)};
}

Status SignalPidfd(int pidfd, int sig) {
  if (::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0) return Status::Ok();
  if (errno == ESRCH) return Status::NotFound("the process is gone");
  return ErrnoStatus("pidfd_send_signal", errno);
}

void ReapIfChild(int64_t pid) {
  if (pid <= 0) return;
  while (::waitpid(static_cast<pid_t>(pid), nullptr, WNOHANG) < 0 && errno == EINTR) {
  }
}

Status SendSignal(int64_t pid, int sig) {
  if (pid <= 0) return Status::Invalid("refusing to signal pid " + std::to_string(pid));
  if (::kill(static_cast<pid_t>(pid), sig) == 0) return Status::Ok();
  if (errno == ESRCH) return Status::NotFound("no process " + std::to_string(pid));
  return ErrnoStatus("kill " + std::to_string(pid), errno);
}

bool RunDirLocked(const std::string& run_dir) {
  UniqueFd fd(::open(LockPath(run_dir).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  // A shared probe: two probes never collide, and a shim retries its exclusive lock for
  // longer than a probe holds this one.
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) < 0) return errno == EWOULDBLOCK;
  (void)::flock(fd.get(), LOCK_UN);
  return false;
}

Status SpawnDetached(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     const std::optional<RunAs>& as) {
  if (argv.empty()) return Status::Invalid("SpawnDetached: empty command");
  // Built before fork: the child of a threaded process may only make async-signal-safe calls.
  CStringArray args(argv), envp(env);
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    ::setsid();
    if (::fork() != 0) ::_exit(0);  // the grandchild is init's once this child exits
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    ::close_range(3, ~0U, 0);  // none of the daemon's sockets and files
    if (::chdir("/") < 0) ::_exit(127);
    if (as && (::setgroups(as->groups.size(), as->groups.data()) < 0 || ::setgid(as->gid) < 0 ||
               ::setuid(as->uid) < 0)) {
      ::_exit(127);
    }
    ::execve(args.data()[0], args.data(), envp.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return Status::Ok();
}

}  // namespace trainq
