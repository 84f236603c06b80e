// The shim running a command as another user: it runs as root here (the tests do), with a
// RunSpec for a real user the test creates and removes.
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "src/os/proc_test_util.h"
#include "src/os/process.h"
#include "src/os/run_dir.h"
#include "src/os/user_test_util.h"
#include "src/os/users.h"

namespace trainq {
namespace {

using testing::ForkRun;
using ::testing::HasSubstr;
using testing::ReadAll;
using testing::TempDir;
using testing::TestUser;
using testing::WaitChild;
using testing::WaitUntil;

// A run dir (root's, 0700, as the daemon makes it) and a spec that runs as `user`.
RunSpec SpecAs(const UserInfo& user, std::vector<std::string> command, const TempDir& run_dir) {
  RunSpec spec;
  spec.command = std::move(command);
  spec.cwd = "/";
  // What the submitter's client sent, HOME and USER included: overridden by the user's.
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/root"}, {"USER", "root"}, {"JOB", "x"}};
  spec.log_path = LogPath(run_dir.path());
  spec.grace_ms = 300;
  spec.uid = user.uid;
  spec.gid = user.gid;
  spec.user = user.name;
  spec.home = user.home;
  return spec;
}

Result<ExitRecord> RunToEnd(const RunSpec& spec, const std::string& run_dir) {
  TRAINQ_RETURN_IF_ERROR(WriteRunSpec(run_dir, spec));
  auto status = WaitChild(ForkRun([&] { return RunShim(run_dir); }));
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return Status::Internal("the shim did not finish well");
  }
  return ReadExitRecord(run_dir);
}

std::string Joined(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  std::ostringstream out;
  for (int64_t id : ids) out << id << " ";
  return out.str();
}

std::string SortedWords(const std::string& line) {
  std::istringstream in(line);
  std::vector<int64_t> ids;
  for (int64_t id; in >> id;) ids.push_back(id);
  return Joined(ids);
}

class ShimRunAsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!user_.ok()) GTEST_SKIP() << user_.why();
    auto info = LookupUserByName(user_.name());
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    info_ = *info;
  }
  TestUser user_{/*extra_group=*/true};
  UserInfo info_;
};

TEST_F(ShimRunAsTest, TheCommandRunsWithTheUsersIdsGroupsAndNamesAndNothingOfTheShims) {
  TempDir dir;
  RunSpec spec = SpecAs(info_,
                        {"sh", "-c",
                         "id -u; id -g; id -G; echo \"$HOME $USER $LOGNAME $JOB\"; "
                         "echo \"leak=${TRAINQ_RUNAS_TEST_LEAK-none}\"; pwd"},
                        dir);
  ::setenv("TRAINQ_RUNAS_TEST_LEAK", "1", 1);  // in the shim's environment, not the spec
  auto rec = RunToEnd(spec, dir.path());
  ::unsetenv("TRAINQ_RUNAS_TEST_LEAK");
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  std::string log = ReadAll(LogPath(dir.path()));
  EXPECT_EQ(rec->exit_code, 0) << log;
  std::istringstream lines(log);
  std::string uid, gid, groups, names, leak, cwd;
  std::getline(lines, uid);
  std::getline(lines, gid);
  std::getline(lines, groups);
  std::getline(lines, names);
  std::getline(lines, leak);
  std::getline(lines, cwd);
  EXPECT_EQ(uid, std::to_string(info_.uid));
  EXPECT_EQ(gid, std::to_string(info_.gid));
  ASSERT_EQ(info_.groups.size(), 2u);  // its own group and the second one the test made
  EXPECT_EQ(SortedWords(groups), Joined(info_.groups));
  EXPECT_EQ(names, "/home/" + user_.name() + " " + user_.name() + " " + user_.name() + " x");
  EXPECT_EQ(leak, "leak=none");
  EXPECT_EQ(cwd, "/");

  struct stat st = {};
  ASSERT_EQ(::stat(LogPath(dir.path()).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(info_.uid));
  EXPECT_EQ(st.st_gid, static_cast<gid_t>(info_.gid));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // The run dir stays root's: spec.json holds the job's environment, exit.json its outcome.
  ASSERT_EQ(::stat(dir.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  ASSERT_EQ(::stat(ExitPath(dir.path()).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
}

TEST_F(ShimRunAsTest, ALogLeftByAnEarlierShimIsKeptAndGivenToTheUser) {
  TempDir dir;
  ASSERT_TRUE(testing::WriteAll(LogPath(dir.path()), "before\n", 0644));
  auto rec = RunToEnd(SpecAs(info_, {"echo", "after"}, dir), dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(ReadAll(LogPath(dir.path())), "before\nafter\n");
  struct stat st = {};
  ASSERT_EQ(::stat(LogPath(dir.path()).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(info_.uid));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(ShimRunAsTest, ALinkInPlaceOfTheLogIsNeverFollowed) {
  TempDir dir, elsewhere;
  std::string target = elsewhere / "victim";
  ASSERT_TRUE(testing::WriteAll(target, "root's\n", 0600));
  ASSERT_EQ(::symlink(target.c_str(), LogPath(dir.path()).c_str()), 0);
  auto rec = RunToEnd(SpecAs(info_, {"echo", "x"}, dir), dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->spawn_failed);
  EXPECT_THAT(rec->error, HasSubstr("open log"));
  struct stat st = {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);  // not handed to the user
  EXPECT_EQ(ReadAll(target), "root's\n");
}

TEST_F(ShimRunAsTest, ACwdTheUserMayNotEnterIsASpawnFailureNamingCwd) {
  TempDir dir;  // mkdtemp: 0700, root's
  RunSpec spec = SpecAs(info_, {"true"}, dir);
  spec.cwd = dir.path();
  auto rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->spawn_failed);
  EXPECT_EQ(rec->exit_code, 127);
  EXPECT_EQ(rec->error,
            "cwd: user " + user_.name() + " may not enter " + dir.path() + ": Permission denied");
  EXPECT_THAT(ReadAll(LogPath(dir.path())), HasSubstr("trainq: cwd: user " + user_.name()));
}

TEST_F(ShimRunAsTest, TheCommandDiesWithItsShimAfterTheDrop) {
  // Changing credentials clears the parent-death signal; the shim arms it again.
  TempDir dir;
  ASSERT_TRUE(WriteRunSpec(dir.path(), SpecAs(info_, {"sleep", "300"}, dir)).ok());
  pid_t shim = ForkRun([&] { return RunShim(dir.path()); });
  std::optional<ProcStat> command;
  ASSERT_TRUE(WaitUntil([&] {
    auto kids = Descendants(shim);
    command = kids.empty() ? std::nullopt : ReadProcStat(kids[0]);
    return command && ReadAll("/proc/" + std::to_string(command->pid) + "/comm") == "sleep\n";
  }));
  ::kill(shim, SIGKILL);
  ::waitpid(shim, nullptr, 0);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(command->pid, command->start_ticks); }));
  ::kill(static_cast<pid_t>(command->pid), SIGKILL);
}

TEST_F(ShimRunAsTest, PrepareAndCleanupRunAsTheUserAndWhatPrepareLeavesIsNotTheJobs) {
  // Rootless podman's `unshare true` leaves the user's namespace holder running: it must run
  // as the user, and outlive the attempt rather than be waited for or killed with it.
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);
  std::string box = dir / "box";
  ASSERT_EQ(::mkdir(box.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(box.c_str(), 0777), 0);
  RunSpec spec = SpecAs(info_, {"sh", "-c", "echo ran"}, dir);
  spec.prepare = {"/bin/sh", "-c",
                  "id -u > " + box + "/prepared; sleep 300 & echo $! > " + box + "/holder"};
  spec.cleanup = {"/bin/sh", "-c",
                  "id -u > " + box + "/cleaned; echo \"$JOB\" >> " + box + "/cleaned"};
  auto rec = RunToEnd(spec, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 0);
  EXPECT_EQ(ReadAll(box + "/prepared"), std::to_string(info_.uid) + "\n");
  EXPECT_EQ(ReadAll(box + "/cleaned"), std::to_string(info_.uid) + "\nx\n");
  pid_t holder = std::stoi(ReadAll(box + "/holder"));
  EXPECT_EQ(::kill(holder, 0), 0) << "what prepare started was stopped with the job's tree";
  ::kill(holder, SIGKILL);
}

TEST(ShimRunAsPlainTest, AShimNotRunningAsRootRefusesToRunAsAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become nobody first";
  TempDir dir;
  ASSERT_EQ(::chown(dir.path().c_str(), 65534, 65534), 0);  // nobody's run dir
  UserInfo root;
  root.name = "root";
  root.uid = 0;
  root.gid = 0;
  root.home = "/root";
  ASSERT_TRUE(WriteRunSpec(dir.path(), SpecAs(root, {"touch", dir / "ran"}, dir)).ok());
  ASSERT_EQ(::chown(SpecPath(dir.path()).c_str(), 65534, 65534), 0);
  auto status = WaitChild(ForkRun([&] {
    if (::setgroups(0, nullptr) < 0 || ::setgid(65534) < 0 || ::setuid(65534) < 0) return 99;
    return RunShim(dir.path());
  }));
  ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  auto rec = ReadExitRecord(dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_TRUE(rec->spawn_failed);
  EXPECT_EQ(rec->error, "setuid 0: the shim runs as uid 65534, not as root");
  EXPECT_EQ(::access((dir / "ran").c_str(), F_OK), -1);
}

}  // namespace
}  // namespace trainq
