#include "src/os/process.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "src/os/child_setup.h"
#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using testing::ForkRun;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using testing::ReadAll;
using testing::TempDir;
using testing::WaitChild;
using testing::WaitUntil;

const std::string kFakeShim = std::string(TRAINQ_SOURCE_DIR) + "/tests/fakes/fake_shim.py";

// Our children here may inherit a blocked SIGTERM from the test runner: stop them with KILL.
void KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// A child that pauses until killed; our own process, so ProcStat fields are known.
pid_t StartPausedChild() {
  return ForkRun([] {
    for (;;) ::pause();
    return 0;
  });
}

TEST(ProcStatTest, ReadsOurOwnProcess) {
  auto st = ReadProcStat(::getpid());
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->pid, ::getpid());
  EXPECT_EQ(st->ppid, ::getppid());
  EXPECT_EQ(st->sid, ::getsid(0));
  EXPECT_EQ(st->state, 'R');
  EXPECT_GT(st->start_ticks, 0u);
  EXPECT_FALSE(ReadProcStat(0).has_value());
  EXPECT_FALSE(ReadProcStat(-1).has_value());
}

TEST(ProcStatTest, CommWithParenthesesAndSpacesDoesNotShiftFields) {
  TempDir dir;
  // The kernel names the process after the basename of the exec'd path: "a) (b) R 1 2 3".
  std::string name = "a) (b) R 1 2 3";
  std::string link = dir / name;
  ASSERT_EQ(::symlink("/bin/sleep", link.c_str()), 0);
  pid_t pid = ForkRun([&] {
    char* argv[] = {const_cast<char*>(name.c_str()), const_cast<char*>("30"), nullptr};
    ::execv(link.c_str(), argv);
    return 127;
  });
  ASSERT_GT(pid, 0);
  std::string comm;
  bool named = WaitUntil([&] {
    comm = ReadAll("/proc/" + std::to_string(pid) + "/comm");
    return comm == name + "\n";
  });
  auto st = ReadProcStat(pid);
  KillAndReap(pid);
  ASSERT_TRUE(named) << "comm is " << comm;
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->pid, pid);
  EXPECT_EQ(st->ppid, ::getpid());
  EXPECT_EQ(st->sid, ::getsid(0));
  EXPECT_TRUE(st->state == 'S' || st->state == 'R') << st->state;
  EXPECT_GE(st->start_ticks, ReadProcStat(::getpid())->start_ticks);
}

TEST(ProcStatTest, ProcessAliveChecksStartTimeAndZombies) {
  auto self = ReadProcStat(::getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_TRUE(ProcessAlive(::getpid(), self->start_ticks));
  EXPECT_FALSE(ProcessAlive(::getpid(), self->start_ticks + 1));  // a reused pid

  pid_t pid = ForkRun([] { return 0; });
  ASSERT_GT(pid, 0);
  uint64_t ticks = 0;
  bool zombie = WaitUntil([&] {
    auto st = ReadProcStat(pid);
    if (st) ticks = st->start_ticks;
    return st && st->state == 'Z';
  });
  EXPECT_TRUE(zombie);
  EXPECT_FALSE(ProcessAlive(pid, ticks));
  ::waitpid(pid, nullptr, 0);
  EXPECT_FALSE(ProcessAlive(pid, ticks));
  EXPECT_FALSE(ReadProcStat(pid).has_value());
}

TEST(ProcTreeTest, DescendantsIncludeGrandchildrenAndScanKnowsParents) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  pid_t child = ForkRun([&] {
    pid_t grandchild = ForkRun([] {
      for (;;) ::pause();
      return 0;
    });
    (void)!::write(fds[1], &grandchild, sizeof(grandchild));
    ::waitpid(grandchild, nullptr, 0);  // reap it here: init may not reap in a container
    return 0;
  });
  ::close(fds[1]);
  pid_t grandchild = 0;
  ASSERT_EQ(::read(fds[0], &grandchild, sizeof(grandchild)), ssize_t{sizeof(grandchild)});
  ::close(fds[0]);

  EXPECT_THAT(Descendants(::getpid()), IsSupersetOf({int64_t{child}, int64_t{grandchild}}));
  EXPECT_THAT(Descendants(child), ElementsAre(grandchild));
  EXPECT_THAT(Descendants(grandchild), ElementsAre());
  std::map<int64_t, int64_t> parent;
  for (const ProcStat& st : ScanProcesses()) parent[st.pid] = st.ppid;
  EXPECT_EQ(parent[grandchild], child);
  EXPECT_EQ(parent[child], ::getpid());

  ::kill(grandchild, SIGKILL);
  ASSERT_TRUE(WaitChild(child).has_value());
}

// Starts `sleep 300` with exactly `env` (in a new session if asked) and returns once it has
// exec'd, so /proc shows its own environment: the pipe's end closes on exec.
pid_t StartSleep(std::vector<std::string> env, bool new_session) {
  CStringArray argv({"sleep", "300"});
  CStringArray envp(std::move(env));
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    if (new_session) ::setsid();
    ::execve("/bin/sleep", argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  char c;
  while (::read(fds[0], &c, 1) < 0 && errno == EINTR) {
  }
  ::close(fds[0]);
  return pid;
}

std::vector<int64_t> Pids(const std::vector<ProcStat>& procs) {
  std::vector<int64_t> pids;
  for (const ProcStat& p : procs) pids.push_back(p.pid);
  std::sort(pids.begin(), pids.end());
  return pids;
}

TEST(AttemptProcessesTest, TheMarkerFindsTheAttemptsProcessesInAnySession) {
  TempDir dir;
  std::string run = dir / "runs/1/1";
  pid_t ours = StartSleep({"TRAINQ_RUN_DIR=" + run, "OTHER=1"}, true);
  pid_t next_attempt = StartSleep({"TRAINQ_RUN_DIR=" + dir / "runs/1/2"}, true);
  pid_t longer_name = StartSleep({"TRAINQ_RUN_DIR=" + run + "0"}, true);
  pid_t unmarked = StartSleep({}, true);

  EXPECT_THAT(Pids(AttemptProcesses(run, 0, 0)), ElementsAre(ours));
  EXPECT_THAT(Pids(AttemptProcesses(dir / "runs/1/2", 0, 0)), ElementsAre(next_attempt));

  for (pid_t pid : {ours, next_attempt, longer_name, unmarked}) KillAndReap(pid);
  EXPECT_THAT(Pids(AttemptProcesses(run, 0, 0)), ElementsAre());
}

// A shim killed -9 leaves its orphans to init (here: to us, as subreaper); those that dropped
// the marker are still found by the shim's session, those of another attempt never are.
TEST(AttemptProcessesTest, TheShimsSessionFindsOrphansWithoutTheMarker) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  TempDir dir;
  std::string run = dir / "runs/2/1";
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  pid_t shim = ForkRun([&] {
    ::setsid();
    pid_t kids[2] = {StartSleep({}, false), StartSleep({"TRAINQ_RUN_DIR=" + run + "x"}, false)};
    (void)!::write(fds[1], kids, sizeof(kids));
    for (;;) ::pause();
    return 0;
  });
  ::close(fds[1]);
  pid_t kids[2] = {0, 0};
  ASSERT_EQ(::read(fds[0], kids, sizeof(kids)), ssize_t{sizeof(kids)});
  ::close(fds[0]);
  auto shim_stat = ReadProcStat(shim);
  ASSERT_TRUE(shim_stat.has_value());

  EXPECT_THAT(Pids(AttemptProcesses(run, shim, shim_stat->start_ticks)),
              ElementsAre(std::min(shim, kids[0]), std::max(shim, kids[0])));
  KillAndReap(shim);
  ASSERT_TRUE(WaitUntil([&] {
    auto st = ReadProcStat(kids[0]);
    return st && st->ppid == ::getpid();
  }));
  EXPECT_THAT(Pids(AttemptProcesses(run, shim, shim_stat->start_ticks)), ElementsAre(kids[0]));
  // The same session number with a later start time is another process's.
  EXPECT_THAT(Pids(AttemptProcesses(run, shim, UINT64_MAX)), ElementsAre());

  KillAndReap(kids[0]);
  KillAndReap(kids[1]);
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

TEST(ProcessTest, SendSignalRefusesGroupsAndReportsMissingProcesses) {
  EXPECT_EQ(SendSignal(0, SIGKILL).code(), Code::kInvalid);
  EXPECT_EQ(SendSignal(-1, SIGKILL).code(), Code::kInvalid);
  pid_t pid = StartPausedChild();
  EXPECT_TRUE(SendSignal(pid, SIGKILL).ok());
  ASSERT_TRUE(WaitChild(pid).has_value());
  EXPECT_EQ(SendSignal(pid, 0).code(), Code::kNotFound);
}

TEST(ProcessTest, PidfdBecomesReadableWhenTheProcessExits) {
  pid_t pid = StartPausedChild();
  auto pidfd = OpenPidfd(pid);
  ASSERT_TRUE(pidfd.ok()) << pidfd.status().ToString();
  EXPECT_EQ(::fcntl(pidfd->get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  struct pollfd p = {pidfd->get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  ::kill(pid, SIGKILL);
  EXPECT_EQ(::poll(&p, 1, 10000), 1);
  ReapIfChild(pid);
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);  // already reaped
  EXPECT_EQ(errno, ECHILD);
  EXPECT_EQ(OpenPidfd(pid).status().code(), Code::kNotFound);
  EXPECT_EQ(OpenPidfd(0).status().code(), Code::kInvalid);
  ReapIfChild(1);  // not ours: harmless
}

TEST(ProcessTest, RunDirLockedFollowsTheFlock) {
  TempDir dir;
  EXPECT_FALSE(RunDirLocked(dir.path()));  // no lock file yet
  UniqueFd holder(::open(LockPath(dir.path()).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(holder.valid());
  EXPECT_FALSE(RunDirLocked(dir.path()));
  ASSERT_EQ(::flock(holder.get(), LOCK_EX | LOCK_NB), 0);
  EXPECT_TRUE(RunDirLocked(dir.path()));
  holder.Reset();
  EXPECT_FALSE(RunDirLocked(dir.path()));
}

// What fake_shim.py recorded: its argv, the lock variable, signal state, fd -> target.
struct FakeShimView {
  std::vector<std::string> args;
  std::string lock_env;
  std::string sig_blocked;
  std::string sig_ignored;
  std::string sig_pending;  // ShdPnd: sent to the process, not yet taken
  std::map<int, std::string> fds;
};

FakeShimView ReadFakeShim(const std::string& run_dir) {
  FakeShimView v;
  std::istringstream in(ReadAll(run_dir + "/fake_shim.txt"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string key, rest;
    words >> key;
    std::getline(words >> std::ws, rest);
    if (key == "arg") v.args.push_back(rest);
    if (key == "lockfd") v.lock_env = rest;
    if (key == "SigBlk:") v.sig_blocked = rest;
    if (key == "SigIgn:") v.sig_ignored = rest;
    if (key == "ShdPnd:") v.sig_pending = rest;
    if (key == "fd") {
      size_t sp = rest.find(' ');
      v.fds[std::stoi(rest.substr(0, sp))] = rest.substr(sp + 1);
    }
  }
  return v;
}

// Starts the fake shim with junk around it: an inherited non-close-on-exec fd, SIGTERM
// blocked, SIGHUP and SIGPIPE ignored. Restores all of that before returning.
Result<SpawnedShim> SpawnWithJunk(const std::string& run_dir, int daemon_log_fd) {
  int junk = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
  int high_junk = ::dup2(junk, 57);
  sigset_t term, old_mask;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &term, &old_mask);
  auto old_hup = ::signal(SIGHUP, SIG_IGN);
  auto old_pipe = ::signal(SIGPIPE, SIG_IGN);
  auto shim = SpawnShim(kFakeShim, run_dir, daemon_log_fd);
  ::signal(SIGPIPE, old_pipe);
  ::signal(SIGHUP, old_hup);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ::close(junk);
  ::close(high_junk);
  return shim;
}

// /proc/PID/status's hex mask of `sigs`.
std::string MaskOf(std::initializer_list<int> sigs) {
  uint64_t mask = 0;
  for (int sig : sigs) mask |= 1ULL << (sig - 1);
  return fmt::format("{:016x}", mask);
}

// The fake shim reads SIGTERM from its blocked signals, as the real one does, and exits
// 128 + 15: had SIGTERM been left unblocked, it would have died of it instead.
void StopFakeShim(const SpawnedShim& shim) {
  EXPECT_TRUE(SendSignal(shim.pid, SIGTERM).ok());
  auto status = WaitChild(static_cast<pid_t>(shim.pid), std::chrono::seconds(5));
  ASSERT_TRUE(status.has_value()) << "SIGTERM did not stop the shim";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 128 + SIGTERM) << *status;
}

TEST(SpawnShimTest, ShimGetsNewSessionLockStdioAndNothingElse) {
  TempDir dir;
  std::string daemon_log = dir / "daemon.log";
  UniqueFd log(::open(daemon_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  ASSERT_TRUE(log.valid());
  auto shim = SpawnWithJunk(dir.path(), log.get());
  ASSERT_TRUE(shim.ok()) << shim.status().ToString();
  bool recorded = WaitUntil([&] { return ::access((dir / "fake_shim.txt").c_str(), F_OK) == 0; });
  auto st = ReadProcStat(shim->pid);
  bool locked = RunDirLocked(dir.path());
  bool logged = WaitUntil([&] { return ReadAll(daemon_log).find("stderr") != std::string::npos; });
  StopFakeShim(*shim);
  ASSERT_TRUE(recorded);

  FakeShimView v = ReadFakeShim(dir.path());
  EXPECT_THAT(v.args, ElementsAre(dir.path()));
  EXPECT_EQ(v.lock_env, std::to_string(kShimLockFd));
  // Exactly the shim's own signals, though the caller blocked SIGTERM only.
  EXPECT_EQ(v.sig_blocked, MaskOf({SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGUSR1}));
  // Python itself ignores SIGPIPE and SIGXFSZ; nothing else may be ignored (SIGHUP was).
  // Only the classic signals count: glibc reserves 32 and 33 and refuses to change them, so
  // they keep whatever disposition the test runner (ctest, make) gave them.
  uint64_t ignored = std::stoull(v.sig_ignored, nullptr, 16) & ((1ULL << 31) - 1);
  EXPECT_EQ(ignored & ~((1ULL << (SIGPIPE - 1)) | (1ULL << (SIGXFSZ - 1))), 0u) << v.sig_ignored;
  std::map<int, std::string> want = {
      {0, "/dev/null"}, {1, daemon_log}, {2, daemon_log}, {kShimLockFd, LockPath(dir.path())}};
  EXPECT_EQ(v.fds, want) << ReadAll(dir / "fake_shim.txt");

  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->sid, shim->pid);  // session leader
  EXPECT_EQ(st->start_ticks, shim->start_ticks);
  EXPECT_TRUE(locked);
  EXPECT_TRUE(logged);
  EXPECT_EQ(ReadAll(daemon_log), "fake shim stdout\nfake shim stderr\n");
  EXPECT_FALSE(RunDirLocked(dir.path()));  // released with the shim
}

TEST(SpawnShimTest, PidfdReportsTheExitAndOutputDefaultsToDevNull) {
  TempDir dir;
  auto shim = SpawnShim(kFakeShim, dir.path());
  ASSERT_TRUE(shim.ok()) << shim.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return ::access((dir / "fake_shim.txt").c_str(), F_OK) == 0; }));
  EXPECT_EQ(ReadFakeShim(dir.path()).fds[2], "/dev/null");
  struct pollfd p = {shim->pidfd.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  ASSERT_TRUE(SendSignal(shim->pid, SIGTERM).ok());
  EXPECT_EQ(::poll(&p, 1, 5000), 1);
  ReapIfChild(shim->pid);
  EXPECT_FALSE(ReadProcStat(shim->pid).has_value());
}

// A cancel that reaches a shim the moment it exists, long before its own code runs (Python
// takes tens of milliseconds to start), waits for the shim: it neither kills it nor is lost.
TEST(SpawnShimTest, AStopSentBeforeTheShimRunsWaitsForIt) {
  TempDir dir;
  auto shim = SpawnShim(kFakeShim, dir.path());
  ASSERT_TRUE(shim.ok()) << shim.status().ToString();
  ASSERT_TRUE(SendSignal(shim->pid, SIGTERM).ok());
  auto status = WaitChild(static_cast<pid_t>(shim->pid), std::chrono::seconds(10));
  ASSERT_TRUE(status.has_value()) << "the shim never took its SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 128 + SIGTERM)
      << "killed before it could record anything: status " << *status;
  FakeShimView v = ReadFakeShim(dir.path());
  EXPECT_EQ(v.sig_pending, MaskOf({SIGTERM})) << ReadAll(dir / "fake_shim.txt");
}

TEST(SpawnShimTest, SecondShimOnALockedRunDirNeverStarts) {
  TempDir dir;
  auto first = SpawnShim(kFakeShim, dir.path());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return ::access((dir / "fake_shim.txt").c_str(), F_OK) == 0; }));
  ASSERT_EQ(::unlink((dir / "fake_shim.txt").c_str()), 0);

  auto second = SpawnShim(kFakeShim, dir.path());
  EXPECT_EQ(second.status().code(), Code::kConflict);
  EXPECT_THAT(second.status().message(), HasSubstr("exit 126"));
  EXPECT_NE(::access((dir / "fake_shim.txt").c_str(), F_OK), 0);  // never ran
  EXPECT_TRUE(RunDirLocked(dir.path()));                          // the first still holds it
  StopFakeShim(*first);
}

TEST(SpawnShimTest, MissingBinaryIsAnIoError) {
  TempDir dir;
  auto shim = SpawnShim(dir / "no-such-trainq", dir.path());
  EXPECT_EQ(shim.status().code(), Code::kIo);
  EXPECT_THAT(shim.status().message(), HasSubstr("No such file"));
  EXPECT_FALSE(RunDirLocked(dir.path()));
}

}  // namespace
}  // namespace trainq
