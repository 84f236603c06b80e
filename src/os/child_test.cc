// StartChild, the one runner of children the caller waits for: how it finds a program, what
// the child gets, and how a failure to start is told; and the small descriptor and counter
// helpers srun waits with (io.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>

#include "src/os/proc_test_util.h"
#include "src/os/process.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

// Everything a pipe gives until its end.
std::string ReadAll(const UniqueFd& fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    Result<size_t> n = ReadSome(fd.get(), buf);
    if (!n.ok() || *n == 0) return out;
    out.append(buf, *n);
  }
}

ChildSpec Shell(const std::string& script) {
  ChildSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.search_path = "/usr/bin:/bin";
  spec.env = std::vector<std::string>{"A=1"};
  spec.out = ChildIo::kPipe;
  spec.err = ChildIo::kPipe;
  return spec;
}

TEST(StartChildTest, FindsItsProgramOnThePathItIsGivenWithExactlyItsEnvironment) {
  ChildSpec spec = Shell("echo \"$A-$HOME-$SLURM_TASK_PID\"; echo err >&2; exit 3");
  spec.pid_variable = "SLURM_TASK_PID";
  Result<Child> child = StartChild(spec);
  ASSERT_TRUE(child.ok()) << child.status().message();
  EXPECT_EQ(ReadAll(child->out), "1--" + std::to_string(child->pid) + "\n");
  EXPECT_EQ(ReadAll(child->err), "err\n");
  std::optional<ChildEnd> end = ReapChild(child->pid, true);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->exit_code, 3);
  EXPECT_EQ(end->signal, 0);
}

TEST(StartChildTest, RunsInItsDirectoryAndTellsASignalApart) {
  TempDir dir;
  ChildSpec spec = Shell("pwd; kill -TERM $$");
  spec.cwd = dir.path();
  Result<Child> child = StartChild(spec);
  ASSERT_TRUE(child.ok()) << child.status().message();
  EXPECT_EQ(ReadAll(child->out), dir.path() + "\n");
  std::optional<ChildEnd> end = ReapChild(child->pid, true);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->signal, SIGTERM);
  EXPECT_EQ(end->exit_code, 128 + SIGTERM);
}

TEST(StartChildTest, WithoutAPrefixAFailureToStartIsReturned) {
  ChildSpec spec;
  spec.argv = {"/no/such/program"};
  Result<Child> child = StartChild(spec);
  EXPECT_EQ(child.status().code(), Code::kIo);
  EXPECT_THAT(child.status().message(), HasSubstr("cannot run /no/such/program"));
  spec.argv = {"/bin/true"};
  spec.cwd = "/no/such/dir";
  EXPECT_THAT(StartChild(spec).status().message(), HasSubstr("in /no/such/dir"));
}

TEST(StartChildTest, WithAPrefixTheChildSaysWhyAndExitsAsAShellDoes) {
  ChildSpec spec;
  spec.argv = {"no-such-program-here"};
  spec.search_path = "/usr/bin:/bin";
  spec.err = ChildIo::kPipe;
  spec.failure_prefix = "srun: error: task 3";
  Result<Child> child = StartChild(spec);
  ASSERT_TRUE(child.ok()) << child.status().message();
  EXPECT_EQ(ReadAll(child->err),
            "srun: error: task 3: execve(): no-such-program-here: No such file or directory\n");
  EXPECT_EQ(ReapChild(child->pid, true)->exit_code, 127);
}

TEST(StartChildTest, OnlyStdioReachesTheCommandUnlessAsked) {
  TempDir dir;
  // An fd the caller leaves inheritable: fd 3 onwards is closed at exec unless asked.
  UniqueFd open_fd(::dup(1));
  ASSERT_TRUE(open_fd.valid());
  std::string probe = "test -e /proc/self/fd/" + std::to_string(open_fd.get()) + " && echo yes";
  ChildSpec spec = Shell(probe);
  Result<Child> closed = StartChild(spec);
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(ReadAll(closed->out), "");
  (void)ReapChild(closed->pid, true);
  spec.only_stdio = false;
  Result<Child> kept = StartChild(spec);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(ReadAll(kept->out), "yes\n");
  (void)ReapChild(kept->pid, true);
}

TEST(ReapChildTest, SaysNothingWhileTheChildRuns) {
  ChildSpec spec;
  spec.argv = {"/bin/sleep", "30"};
  Result<Child> child = StartChild(spec);
  ASSERT_TRUE(child.ok());
  EXPECT_FALSE(ReapChild(child->pid, false).has_value());
  EXPECT_FALSE(ProcessExited(child->pid));
  ASSERT_TRUE(SendSignal(child->pid, SIGKILL).ok());
  EXPECT_EQ(ReapChild(child->pid, true)->signal, SIGKILL);
  EXPECT_TRUE(ProcessExited(child->pid));
}

TEST(IoTest, WaitReadableNamesTheReadyDescriptors) {
  ChildSpec spec = Shell("echo hi");
  Result<Child> child = StartChild(spec);
  ASSERT_TRUE(child.ok());
  int fds[] = {child->err.get(), child->out.get()};
  // Out is ready with a line while err is not (the shell may still run); once the child has
  // ended, both are ready: out at its end, err at its end.
  std::vector<size_t> ready = WaitReadable(fds, 10'000);
  EXPECT_FALSE(ready.empty());
  EXPECT_EQ(ReadAll(child->out), "hi\n");
  (void)ReapChild(child->pid, true);
  EXPECT_EQ(WaitReadable(fds, 10'000), (std::vector<size_t>{0, 1}));
}

TEST(IoTest, NextCounterValueCountsFromZero) {
  TempDir dir;
  EXPECT_EQ(*NextCounterValue(dir / "steps"), 0);
  EXPECT_EQ(*NextCounterValue(dir / "steps"), 1);
  EXPECT_EQ(*NextCounterValue(dir / "steps"), 2);
  EXPECT_EQ(*ReadFile(dir / "steps"), "3");
}

TEST(IoTest, ReadAtLeavesTheOffsetAlone) {
  TempDir dir;
  std::ofstream(dir / "f") << "hello world";
  Result<UniqueFd> fd = OpenToRead(dir / "f");
  ASSERT_TRUE(fd.ok());
  char buf[5];
  EXPECT_EQ(*ReadAt(fd->get(), 6, buf), 5u);
  EXPECT_EQ(std::string(buf, 5), "world");
  EXPECT_EQ(*FdSize(fd->get()), 11u);
  EXPECT_EQ(*ReadSome(fd->get(), buf), 5u);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_EQ(OpenToRead(dir / "none").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace trainq
