// The shim with real commands. Each test forks and calls RunShim(run_dir) in the child, so
// no trainq binary is needed; the forked child is the shim (pid, subreaper, lock holder).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>

#include "src/os/fence.h"
#include "src/os/proc_test_util.h"
#include "src/os/process.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

using testing::ForkRun;
using ::testing::HasSubstr;
using testing::ReadAll;
using testing::TempDir;
using testing::WaitChild;
using testing::WaitUntil;
using testing::WriteAll;
using Steady = std::chrono::steady_clock;

constexpr int64_t kGraceMs = 300;

RunSpec Spec(std::vector<std::string> command, const TempDir& dir) {
  RunSpec spec;
  spec.command = std::move(command);
  spec.cwd = dir.path();
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.log_path = LogPath(dir.path());
  spec.grace_ms = kGraceMs;
  return spec;
}

pid_t StartShim(const std::string& run_dir) {
  return ForkRun([&] { return RunShim(run_dir); });
}

// The shim's exit record once it has finished with status 0.
Result<ExitRecord> FinishShim(pid_t shim, const std::string& run_dir) {
  auto status = WaitChild(shim);
  if (!status) return Status::Internal("the shim did not finish");
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return Status::Internal("shim wait status " + std::to_string(*status));
  }
  return ReadExitRecord(run_dir);
}

Result<ExitRecord> RunToEnd(const RunSpec& spec, const std::string& run_dir) {
  TRAINQ_RETURN_IF_ERROR(WriteRunSpec(run_dir, spec));
  return FinishShim(StartShim(run_dir), run_dir);
}

// A pid the command wrote into `file` (relative to its cwd), once the write is complete.
int64_t AwaitPidFile(const std::string& path) {
  std::string text;
  WaitUntil([&] {
    text = ReadAll(path);
    return !text.empty() && text.back() == '\n';
  });
  return text.empty() ? 0 : std::atoll(text.c_str());
}

TEST(ShimTest, RecordsExitCodes) {
  TempDir dir;
  RunSpec spec = Spec({"true"}, dir);
  spec.log_path = "";  // default: output.log in the run dir
  auto rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 0);
  EXPECT_FALSE(rec->signal.has_value());
  EXPECT_FALSE(rec->cancelled);
  EXPECT_FALSE(rec->spawn_failed);
  EXPECT_GT(rec->started_at, 1'600'000'000'000);
  EXPECT_LE(rec->started_at, rec->ended_at);
  EXPECT_EQ(::access(LogPath(dir.path()).c_str(), F_OK), 0);

  rec = RunToEnd(Spec({"sh", "-c", "exit 3"}, dir), dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 3);
  EXPECT_FALSE(rec->signal.has_value());
}

TEST(ShimTest, RecordsDeathBySignalApartFromExitCode) {
  TempDir dir;
  auto rec = RunToEnd(Spec({"sh", "-c", "kill -9 $$"}, dir), dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->signal, SIGKILL);
  EXPECT_FALSE(rec->exit_code.has_value());
  EXPECT_FALSE(rec->cancelled);
}

TEST(ShimTest, CommandNotFoundIsASpawnFailureExplainedInTheLog) {
  TempDir dir;
  auto rec = RunToEnd(Spec({"no-such-command-for-trainq", "x"}, dir), dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->spawn_failed);
  EXPECT_EQ(rec->exit_code, 127);
  EXPECT_EQ(rec->error, "cannot run 'no-such-command-for-trainq': No such file or directory");
  EXPECT_EQ(ReadAll(LogPath(dir.path())),
            "trainq: cannot run 'no-such-command-for-trainq': No such file or directory\n");
}

// Found but not runnable (no execute permission): 126, as a shell says, not 127.
TEST(ShimTest, ACommandThatCannotBeRunExits126) {
  TempDir dir;
  std::string plain = dir / "plain.txt";
  ASSERT_TRUE(WriteFileAtomic(plain, "not a program\n").ok());  // no execute bit
  auto rec = RunToEnd(Spec({plain}, dir), dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->spawn_failed);
  EXPECT_EQ(rec->exit_code, 126);
  EXPECT_EQ(rec->error, "cannot run '" + plain + "': Permission denied");
}

TEST(ShimTest, MissingWorkingDirectoryIsASpawnFailure) {
  TempDir dir;
  RunSpec spec = Spec({"true"}, dir);
  spec.cwd = dir / "gone";
  auto rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->spawn_failed);
  EXPECT_EQ(rec->exit_code, 127);
  EXPECT_THAT(rec->error, HasSubstr(dir / "gone"));
  EXPECT_THAT(rec->error, HasSubstr("No such file or directory"));
  EXPECT_THAT(ReadAll(LogPath(dir.path())), HasSubstr("trainq: cannot change directory"));
}

TEST(ShimTest, UnreadableSpecIsRecorded) {
  TempDir dir;
  ASSERT_TRUE(WriteAll(SpecPath(dir.path()), "{\"command\": [\"tr"));
  auto rec = FinishShim(StartShim(dir.path()), dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->spawn_failed);
  EXPECT_THAT(rec->error, HasSubstr("spec.json"));
  EXPECT_FALSE(rec->exit_code.has_value());
}

TEST(ShimTest, StdoutAndStderrAreAppendedToTheLog) {
  TempDir dir;
  RunSpec spec = Spec({"sh", "-c", "echo out; echo err >&2"}, dir);
  ASSERT_TRUE(RunToEnd(spec, dir.path()).ok());
  ASSERT_TRUE(RunToEnd(spec, dir.path()).ok());
  EXPECT_EQ(ReadAll(LogPath(dir.path())), "out\nerr\nout\nerr\n");
  struct stat st = {};
  ASSERT_EQ(::stat(LogPath(dir.path()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(ShimTest, EnvironmentIsExactlyTheSpecs) {
  TempDir dir;
  RunSpec spec = Spec({"env"}, dir);
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"FOO", "bar baz"}, {"EMPTY", ""}, {"Z", "a=b"}};
  ::setenv("TRAINQ_SHIM_TEST_LEAK", "1", 1);  // in the shim's environment, not the spec
  auto rec = RunToEnd(spec, dir.path());
  ::unsetenv("TRAINQ_SHIM_TEST_LEAK");
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 0);
  EXPECT_EQ(ReadAll(LogPath(dir.path())), "PATH=/usr/bin:/bin\nFOO=bar baz\nEMPTY=\nZ=a=b\n");
}

TEST(ShimTest, CommandIsLookedUpInTheSpecsPath) {
  TempDir dir;
  ASSERT_TRUE(MakeDirs(dir / "bin").ok() && MakeDirs(dir / "noexec").ok());
  ASSERT_TRUE(WriteAll(dir / "bin/mytool", "#!/bin/sh\necho \"mytool ran with $1\"\n", 0755));
  ASSERT_TRUE(WriteAll(dir / "noexec/mytool", "not a program\n", 0644));
  RunSpec spec = Spec({"mytool", "arg"}, dir);
  spec.env = {{"PATH", dir / "missing" + ":" + dir / "noexec" + ":" + dir / "bin"}};
  auto rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 0);
  EXPECT_EQ(ReadAll(LogPath(dir.path())), "mytool ran with arg\n");

  // The shim's own PATH finds `env`; the job's does not.
  spec = Spec({"env"}, dir);
  spec.env = {{"PATH", dir / "bin"}};
  rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->spawn_failed);
  EXPECT_EQ(rec->exit_code, 127);
}

TEST(ShimTest, ArgvIsPassedVerbatimWithoutAShell) {
  TempDir dir;
  auto rec = RunToEnd(Spec({"printf", "[%s]", "a b", "\"q\"", "$HOME", "*", "'s'", "", "x;y"}, dir),
                      dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(ReadAll(LogPath(dir.path())), "[a b][\"q\"][$HOME][*]['s'][][x;y]");
}

TEST(ShimTest, CancelStopsTheWholeTreeIncludingOtherSessions) {
  TempDir dir;
  RunSpec spec = Spec({"sh", "-c", "setsid sleep 300 & echo $! > gc.pid; sleep 300"}, dir);
  spec.grace_ms = 5000;  // everything here dies of SIGTERM well before
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  pid_t shim = StartShim(dir.path());
  int64_t gc = AwaitPidFile(dir / "gc.pid");
  ASSERT_GT(gc, 0);
  std::optional<ProcStat> gc_stat;
  ASSERT_TRUE(WaitUntil([&] {  // setsid has run: the grandchild leads its own session
    gc_stat = ReadProcStat(gc);
    return gc_stat && gc_stat->sid == gc;
  }));

  auto t0 = Steady::now();
  ASSERT_TRUE(SendSignal(shim, SIGTERM).ok());
  auto rec = FinishShim(shim, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_LT(Steady::now() - t0, std::chrono::milliseconds(spec.grace_ms));
  EXPECT_TRUE(rec->cancelled);
  EXPECT_EQ(rec->signal, SIGTERM);
  EXPECT_FALSE(rec->exit_code.has_value());
  EXPECT_FALSE(ProcessAlive(gc, gc_stat->start_ticks));
}

// SpawnShim hands the shim its signals blocked; a cancel sent before the shim's own code ran
// is pending then, and the shim records it as a cancel without starting the command.
TEST(ShimTest, AStopPendingAtTheStartIsACancelAndRunsNothing) {
  TempDir dir;
  ASSERT_TRUE(WriteRunSpec(dir.path(), Spec({"touch", "ran"}, dir)).ok());
  pid_t shim = ForkRun([&] {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kShimSignals) sigaddset(&set, sig);
    ::sigprocmask(SIG_SETMASK, &set, nullptr);
    ::kill(::getpid(), SIGTERM);
    return RunShim(dir.path());
  });
  auto rec = FinishShim(shim, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->cancelled);
  EXPECT_FALSE(rec->spawn_failed) << rec->error;
  EXPECT_FALSE(rec->exit_code.has_value());
  EXPECT_NE(::access((dir / "ran").c_str(), F_OK), 0);
}

TEST(ShimTest, CancelKillsWhatIgnoresSigtermAfterTheGrace) {
  TempDir dir;
  RunSpec spec = Spec({"sh", "-c", "trap '' TERM; echo $$ > ready.pid; sleep 300"}, dir);
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  pid_t shim = StartShim(dir.path());
  ASSERT_GT(AwaitPidFile(dir / "ready.pid"), 0);

  auto t0 = Steady::now();
  ASSERT_TRUE(SendSignal(shim, SIGTERM).ok());
  auto rec = FinishShim(shim, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_GE(Steady::now() - t0, std::chrono::milliseconds(kGraceMs));
  EXPECT_TRUE(rec->cancelled);
  EXPECT_EQ(rec->signal, SIGKILL);
}

// Guards against a shim killed -9 leaving its command running, unsupervised.
TEST(ShimTest, TheCommandDiesWithItsShim) {
  TempDir dir;
  ASSERT_TRUE(WriteRunSpec(dir.path(), Spec({"sleep", "300"}, dir)).ok());
  pid_t shim = StartShim(dir.path());
  std::optional<ProcStat> command;
  ASSERT_TRUE(WaitUntil([&] {  // the shim's child, once it runs sleep (a new process group)
    auto kids = Descendants(shim);
    command = kids.empty() ? std::nullopt : ReadProcStat(kids[0]);
    return command && ReadAll("/proc/" + std::to_string(command->pid) + "/comm") == "sleep\n";
  }));

  ::kill(shim, SIGKILL);
  ::waitpid(shim, nullptr, 0);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(command->pid, command->start_ticks); }));
  ::kill(static_cast<pid_t>(command->pid), SIGKILL);  // no leftover should the test fail
}

TEST(ShimTest, TimeLimitStopsTheWholeTreeAndSaysSoInTheExitRecord) {
  TempDir dir;
  // The grandchild ignores SIGTERM and lives in its own session: only the SIGKILL after the
  // grace ends it, and only because the shim hunts the whole tree.
  RunSpec spec = Spec({"sh", "-c",
                       "setsid sh -c \"trap '' TERM; exec sleep 300\" & echo $! > gc.pid; "
                       "sleep 300"},
                      dir);
  spec.time_limit_ms = 200;
  auto rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->time_limit);
  EXPECT_FALSE(rec->cancelled);
  EXPECT_EQ(rec->signal, SIGTERM);
  int64_t gc = std::atoll(ReadAll(dir / "gc.pid").c_str());
  ASSERT_GT(gc, 0);
  EXPECT_FALSE(ReadProcStat(gc).has_value()) << "the grandchild outlived the time limit";
  EXPECT_THAT(ReadAll(LogPath(dir.path())), HasSubstr("time limit (200ms) reached"));
}

// --signal USR1@T with --checkpoint: the job is warned T before its time limit, saves, and its
// exit record says when it was warned and which checkpoint it wrote after that.
TEST(ShimTest, TheWarningComesBeforeTheTimeLimitAndTheCheckpointIsFound) {
  TempDir dir;
  RunSpec spec = Spec({"sh", "-c",
                       "mkdir -p ckpt; touch ckpt/old.pt; "
                       "trap 'echo step > ckpt/new.pt; echo warned >> seen' USR1; "
                       "echo $$ > ready.pid; while :; do sleep 0.05; done"},
                      dir);
  spec.time_limit_ms = 1500;
  spec.warn_signal = SIGUSR1;
  spec.warn_lead_ms = 1000;
  spec.checkpoint = "ckpt/*.pt";
  auto t0 = Steady::now();
  auto rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_GE(Steady::now() - t0, std::chrono::milliseconds(1500));
  EXPECT_TRUE(rec->time_limit);
  EXPECT_GT(rec->warned_at, 0);
  EXPECT_LE(rec->warned_at, rec->ended_at - 800);  // about a second before the end
  EXPECT_EQ(rec->checkpoint, "ckpt/new.pt");
  EXPECT_EQ(ReadAll(dir / "seen"), "warned\n");
  EXPECT_THAT(ReadAll(LogPath(dir.path())),
              HasSubstr("the time limit (2s) is 1s away; sent SIGUSR1 to the "));
}

// A preemption (control.json, then SIGUSR1): the job's warning now, the stop when its lead
// is over; one that saves and leaves on the warning (Hugging Face's way, on SIGTERM) ends as
// stopped all the same, so it is requeued rather than taken for finished.
TEST(ShimTest, APreemptionWarnsThenStopsAndAJobThatLeavesEarlyIsStillStopped) {
  for (bool leaves : {false, true}) {
    TempDir dir;
    std::string trap = leaves ? "trap 'echo saved > ckpt.pt; exit 0' TERM; "
                              : "trap 'echo saved > ckpt.pt' TERM; ";
    RunSpec spec =
        Spec({"sh", "-c", trap + "echo $$ > ready.pid; while :; do sleep 0.05; done"}, dir);
    spec.warn_signal = SIGTERM;
    spec.warn_lead_ms = 60000;
    spec.checkpoint = "*.pt";
    ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
    pid_t shim = StartShim(dir.path());
    ASSERT_GT(AwaitPidFile(dir / "ready.pid"), 0);
    ShimControl control{1, "preempted", "preempted by job 31 (priority 100)", 700, 0, false};
    ASSERT_TRUE(WriteShimControl(dir.path(), control).ok());
    auto t0 = Steady::now();
    ASSERT_TRUE(SendSignal(shim, SIGUSR1).ok());
    auto rec = FinishShim(shim, dir.path());
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    auto took = Steady::now() - t0;
    EXPECT_EQ(rec->stop, "preempted") << leaves;
    EXPECT_EQ(rec->stop_reason, "preempted by job 31 (priority 100)");
    EXPECT_FALSE(rec->cancelled);
    EXPECT_GT(rec->warned_at, 0);
    EXPECT_EQ(rec->checkpoint, "ckpt.pt");
    std::string log = ReadAll(LogPath(dir.path()));
    // The shell handles it (a child forked that moment may too); sleep does not.
    EXPECT_THAT(log, HasSubstr("preempted by job 31 (priority 100): stopping in 700ms; sent "
                               "SIGTERM to the "));
    if (leaves) {
      EXPECT_EQ(rec->exit_code, 0);
      EXPECT_LT(took, std::chrono::milliseconds(700));
    } else {
      EXPECT_GE(took, std::chrono::milliseconds(700));
      EXPECT_THAT(log, HasSubstr("preempted by job 31 (priority 100); stopping the job"));
    }
  }
}

// `trainq requeue` from inside: stopped at once, no warning; and a signal for the job
// (scancel --signal) reaches every process, or with batch_only the command's own alone.
TEST(ShimTest, ARequeueStopsAtOnceAndSignalsReachTheTreeOrTheBatchShell) {
  TempDir dir;
  RunSpec spec = Spec({"sh", "-c",
                       "trap 'echo shell >> who' USR2; "
                       "sh -c \"trap 'echo child >> who' USR2; while :; do sleep 0.05; done\" & "
                       "echo $$ > ready.pid; while :; do sleep 0.05; done"},
                      dir);
  spec.warn_signal = SIGUSR2;
  spec.warn_lead_ms = 60000;
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  pid_t shim = StartShim(dir.path());
  ASSERT_GT(AwaitPidFile(dir / "ready.pid"), 0);
  ASSERT_TRUE(WaitUntil([&] { return Descendants(shim).size() >= 3; }));  // sh, sh, sleep
  ASSERT_TRUE(WriteShimControl(dir.path(), {1, "", "", 0, SIGUSR2, true}).ok());
  ASSERT_TRUE(SendSignal(shim, SIGUSR1).ok());
  ASSERT_TRUE(WaitUntil([&] { return ReadAll(dir / "who") == "shell\n"; }));
  ASSERT_TRUE(WriteShimControl(dir.path(), {2, "", "", 0, SIGUSR2, false}).ok());
  ASSERT_TRUE(SendSignal(shim, SIGUSR1).ok());
  ASSERT_TRUE(WaitUntil([&] { return ReadAll(dir / "who").size() == 18; }));
  EXPECT_THAT(ReadAll(dir / "who"), HasSubstr("child\n"));
  // An old request read again changes nothing; a new one stops the job at once.
  ASSERT_TRUE(SendSignal(shim, SIGUSR1).ok());
  ASSERT_TRUE(
      WriteShimControl(dir.path(), {3, "requeued", "requeued by itself", 0, 0, false}).ok());
  ASSERT_TRUE(SendSignal(shim, SIGUSR1).ok());
  auto rec = FinishShim(shim, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->stop, "requeued");
  EXPECT_EQ(rec->stop_reason, "requeued by itself");
  EXPECT_EQ(rec->warned_at, 0);  // no lead, no warning
  EXPECT_EQ(ReadAll(dir / "who").size(), 18u);
}

TEST(ShimTest, CommandEndingWithinItsTimeLimitIsNotMarked) {
  TempDir dir;
  RunSpec spec = Spec({"true"}, dir);
  spec.time_limit_ms = 3600 * 1000;
  auto rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_FALSE(rec->time_limit);
  EXPECT_EQ(rec->exit_code, 0);
}

TEST(ShimTest, LeftoverProcessesAreStoppedAfterTheCommandExits) {
  TempDir dir;
  // The second leftover ignores SIGTERM and needs the SIGKILL after the grace.
  auto rec = RunToEnd(Spec({"sh", "-c",
                            "sleep 300 & echo $! > bg.pid; "
                            "(trap '' TERM; exec sleep 300) & echo $! > stubborn.pid"},
                           dir),
                      dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 0);
  EXPECT_FALSE(rec->cancelled);
  for (const char* file : {"bg.pid", "stubborn.pid"}) {
    int64_t pid = std::atoll(ReadAll(dir / file).c_str());
    ASSERT_GT(pid, 0) << file;
    EXPECT_FALSE(ReadProcStat(pid).has_value()) << file << " still there";
  }
}

// fd -> target from `ls -l /proc/self/fd` output, without ls's own directory fd.
std::map<int, std::string> ListedFds(const std::string& listing) {
  std::map<int, std::string> fds;
  std::istringstream in(listing);
  for (std::string line; std::getline(in, line);) {
    size_t arrow = line.find(" -> ");
    if (arrow == std::string::npos) continue;
    size_t sp = line.rfind(' ', arrow - 1);
    std::string target = line.substr(arrow + 4);
    if (!target.ends_with("/fd")) fds[std::atoi(line.c_str() + sp + 1)] = target;
  }
  return fds;
}

// The shim runs under the daemon's umask 077; the command gets the one the spec names (the
// daemon's at start), so a job's own files are not made private behind its user's back.
TEST(ShimTest, CommandRunsWithTheSpecsUmaskNotTheShims) {
  TempDir dir;
  RunSpec spec = Spec({"sh", "-c", "umask > umask.txt"}, dir);
  spec.umask = 022;
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  pid_t shim = ForkRun([&] {
    ::umask(077);
    return RunShim(dir.path());
  });
  auto rec = FinishShim(shim, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(ReadAll(dir / "umask.txt"), "0022\n");
  struct stat st = {};
  ASSERT_EQ(::stat((dir / "umask.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(::stat(LogPath(dir.path()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // the shim's own file
}

TEST(ShimTest, CommandInheritsNoFdsBeyondStdio) {
  TempDir dir;
  ASSERT_TRUE(WriteRunSpec(dir.path(), Spec({"ls", "-l", "/proc/self/fd"}, dir)).ok());
  int junk = ::open("/dev/null", O_RDONLY);  // not close-on-exec, like a careless parent's
  ASSERT_GE(::dup2(junk, 57), 0);
  pid_t shim = ForkRun([&] {
    // As SpawnShim leaves it: the lock open without close-on-exec, flocked, named in env.
    int lock = ::open(LockPath(dir.path()).c_str(), O_RDWR | O_CREAT, 0600);
    if (lock < 0 || ::dup2(lock, 63) < 0 || ::flock(63, LOCK_EX | LOCK_NB) < 0) return 99;
    ::setenv(kShimLockFdEnv, "63", 1);
    return RunShim(dir.path());
  });
  ::close(57);
  ::close(junk);
  auto rec = FinishShim(shim, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(rec->exit_code, 0);
  std::string listing = ReadAll(LogPath(dir.path()));
  auto fds = ListedFds(listing);
  EXPECT_EQ(fds.size(), 3u) << listing;
  EXPECT_EQ(fds[0], "/dev/null");
  // stdout and stderr are the write end of the shim's pipe; its read end is not here.
  EXPECT_THAT(fds[1], ::testing::StartsWith("pipe:["));
  EXPECT_EQ(fds[2], fds[1]);
}

// Guards against a log that grows without bound: the shim reads the output from a pipe and
// keeps the head, a marker and the end within log_max_bytes.
TEST(ShimTest, OutputBeyondTheLimitKeepsTheHeadAMarkerAndTheEnd) {
  TempDir dir;
  RunSpec spec = Spec({"seq", "1", "200000"}, dir);  // 1.2 MiB
  spec.log_max_bytes = 64 * 1024;
  auto rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 0);
  std::string log = ReadAll(LogPath(dir.path()));
  EXPECT_LE(log.size(), spec.log_max_bytes);
  EXPECT_TRUE(log.starts_with("1\n2\n3\n")) << log.substr(0, 100);
  EXPECT_THAT(log, HasSubstr(" bytes of output dropped here; log_max_size is 64.0 KiB"));
  EXPECT_TRUE(log.ends_with("\n199999\n200000\n")) << log.substr(log.size() - 100);
}

// Stopping a job that floods its output after SIGTERM: the shim keeps reading the pipe
// while it waits out the grace (the job never blocks on it), within the limit.
TEST(ShimTest, AJobWritingWhileBeingStoppedIsReadAndStopped) {
  TempDir dir;
  RunSpec spec = Spec({"sh", "-c",
                       "trap 'while :; do echo after-term; done' TERM; echo $$ > ready.pid; "
                       "while :; do sleep 0.05; done"},
                      dir);
  spec.log_max_bytes = 64 * 1024;
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  pid_t shim = StartShim(dir.path());
  ASSERT_GT(AwaitPidFile(dir / "ready.pid"), 0);

  auto t0 = Steady::now();
  ASSERT_TRUE(SendSignal(shim, SIGTERM).ok());
  auto rec = FinishShim(shim, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_LT(Steady::now() - t0, std::chrono::seconds(10));
  EXPECT_TRUE(rec->cancelled);
  EXPECT_EQ(rec->signal, SIGKILL);
  std::string log = ReadAll(LogPath(dir.path()));
  EXPECT_LE(log.size(), spec.log_max_bytes);
  EXPECT_THAT(log, HasSubstr("bytes of output dropped here"));
  EXPECT_TRUE(log.ends_with("after-term\n")) << log.substr(log.size() - 100);
}

// A leftover holds the pipe after the command exited: what it writes during the stop is
// still read, and the shim does not wait for the pipe to close.
TEST(ShimTest, OutputOfLeftoversIsKept) {
  TempDir dir;
  // The leftover ignores SIGTERM before the command exits: otherwise, on a busy machine, the
  // shim's SIGTERM to the leftovers could come first and end it before it wrote anything.
  RunSpec spec = Spec({"sh", "-c",
                       "(trap '' TERM; : > armed; sleep 0.2; echo late) & "
                       "while [ ! -e armed ]; do sleep 0.01; done; echo early"},
                      dir);
  spec.grace_ms = 2000;
  auto rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 0);
  EXPECT_EQ(ReadAll(LogPath(dir.path())), "early\nlate\n");
}

// The daemon's part in self-fencing, as a process of its own: stamps the fence file every
// 20 ms until it is frozen (SIGSTOP, as a frozen daemon) or killed.
class Renewer {
 public:
  explicit Renewer(const std::string& path) {
    pid_ = ForkRun([&] {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (;;) {
        (void)WriteFenceStamp(path, BootClockMs());
        ::usleep(20'000);
      }
      return 0;
    });
  }
  ~Renewer() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  void Freeze() { ::kill(pid_, SIGSTOP); }

 private:
  pid_t pid_;
};

RunSpec FencedSpec(std::vector<std::string> command, const TempDir& dir, int64_t fence_after_ms) {
  RunSpec spec = Spec(std::move(command), dir);
  spec.fence_file = dir / "fence";
  spec.fence_after_ms = fence_after_ms;
  return spec;
}

TEST(ShimTest, AJobWhoseNodeKeepsRenewingRunsToItsEnd) {
  TempDir dir;
  Renewer renewer(dir / "fence");
  ASSERT_TRUE(WaitUntil([&] { return ReadFenceStamp(dir / "fence").ok(); }));
  // Runs well past fence_after: each renewal keeps it going.
  auto rec = RunToEnd(FencedSpec({"sleep", "1.2"}, dir, 500), dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_FALSE(rec->fenced) << rec->error;
  EXPECT_EQ(rec->exit_code, 0);
}

// The node's daemon freezes (SIGSTOP): the stamp goes stale and the shim, on its own,
// stops the whole tree within fence_after + grace, as on cancel.
TEST(ShimTest, AStaleFenceStampStopsTheWholeTree) {
  TempDir dir;
  Renewer renewer(dir / "fence");
  ASSERT_TRUE(WaitUntil([&] { return ReadFenceStamp(dir / "fence").ok(); }));
  RunSpec spec = FencedSpec({"sh", "-c",
                             "setsid sh -c \"trap '' TERM; exec sleep 300\" & echo $! > gc.pid; "
                             "sleep 300"},
                            dir, 500);
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  pid_t shim = StartShim(dir.path());
  int64_t gc = AwaitPidFile(dir / "gc.pid");
  ASSERT_GT(gc, 0);

  renewer.Freeze();
  auto t0 = Steady::now();
  auto rec = FinishShim(shim, dir.path());
  auto took = Steady::now() - t0;
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->fenced);
  EXPECT_FALSE(rec->cancelled);
  EXPECT_FALSE(rec->time_limit);
  EXPECT_EQ(rec->signal, SIGTERM);
  EXPECT_THAT(rec->error, HasSubstr("stopped: node heartbeat not renewed for 0."));
  EXPECT_THAT(rec->error, HasSubstr("(fence_after 0.5 s)"));
  EXPECT_GE(took, std::chrono::milliseconds(500 - 50));  // the last stamp is at most 20 ms old
  EXPECT_LT(took, std::chrono::milliseconds(500 + kGraceMs + 1500));
  EXPECT_FALSE(ReadProcStat(gc).has_value()) << "the grandchild outlived the fence";
  EXPECT_THAT(ReadAll(LogPath(dir.path())), HasSubstr("trainq: node heartbeat not renewed for 0."));
}

// No stamp yet (the daemon has not renewed since the shim started): the lapse counts from
// the shim's start.
TEST(ShimTest, AFenceFileThatNeverAppearsStopsTheJobFenceAfterFromTheStart) {
  TempDir dir;
  ASSERT_TRUE(WriteRunSpec(dir.path(), FencedSpec({"sleep", "300"}, dir, 400)).ok());
  auto t0 = Steady::now();
  auto rec = FinishShim(StartShim(dir.path()), dir.path());
  auto took = Steady::now() - t0;
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->fenced);
  EXPECT_EQ(rec->signal, SIGTERM);
  EXPECT_GE(took, std::chrono::milliseconds(400));
  EXPECT_LT(took, std::chrono::milliseconds(400 + kGraceMs + 1500));
}

TEST(ShimTest, ANodeAlreadyFencedDoesNotStartTheCommand) {
  TempDir dir;
  ASSERT_TRUE(WriteFenceStamp(dir / "fence", BootClockMs() - 10'000).ok());
  auto rec = RunToEnd(FencedSpec({"touch", "ran"}, dir, 500), dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->fenced);
  EXPECT_FALSE(rec->spawn_failed);
  EXPECT_FALSE(rec->exit_code.has_value());
  EXPECT_THAT(rec->error, HasSubstr("not renewed for 10."));
  EXPECT_NE(::access((dir / "ran").c_str(), F_OK), 0);
}

TEST(ShimTest, WritesShimRecordHoldsTheLockAndRefusesASecondShim) {
  TempDir dir;
  std::string fifo = dir / "release";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_TRUE(WriteRunSpec(dir.path(), Spec({"cat", fifo}, dir)).ok());
  pid_t shim = StartShim(dir.path());
  ASSERT_TRUE(WaitUntil([&] { return ReadShimRecord(dir.path()).ok(); }));
  auto rec = ReadShimRecord(dir.path());
  auto st = ReadProcStat(shim);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(rec->pid, shim);
  EXPECT_EQ(rec->start_ticks, st->start_ticks);
  EXPECT_TRUE(RunDirLocked(dir.path()));

  auto second = WaitChild(StartShim(dir.path()));
  ASSERT_TRUE(second.has_value());
  EXPECT_TRUE(WIFEXITED(*second) && WEXITSTATUS(*second) == kShimLockedExit) << *second;
  EXPECT_EQ(ReadExitRecord(dir.path()).status().code(), Code::kNotFound);

  // Let cat finish: a writer that opens and closes the fifo gives it EOF.
  int writer = -1;
  ASSERT_TRUE(WaitUntil([&] {
    writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    return writer >= 0;
  }));
  ::close(writer);
  auto exit = FinishShim(shim, dir.path());
  ASSERT_TRUE(exit.ok()) << exit.status().ToString();
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_FALSE(RunDirLocked(dir.path()));
}

}  // namespace
}  // namespace trainq
