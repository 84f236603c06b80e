#include "src/os/permissions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/os/proc_test_util.h"
#include "src/os/system.h"
#include "src/os/users.h"

namespace trainq {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TempDir;

constexpr int64_t kMe = 1000;

PathFacts Dir(int64_t uid, mode_t mode) { return {true, false, true, uid, mode}; }

TEST(PermissionsTest, PrivateDirMustBeOursAloneAndNotALink) {
  EXPECT_TRUE(JudgePrivateDir("/run/user/1000/trainq", Dir(kMe, 0700), kMe).ok());
  struct Case {
    PathFacts facts;
    const char* problem;
  } bad[] = {
      {Dir(2000, 0700), "owned by"},
      {Dir(0, 0700), "owned by"},  // root's directory is no more ours than anyone's
      {Dir(kMe, 0755), "mode is 0755"},
      {Dir(kMe, 0710), "mode is 0710"},
      {{true, true, false, kMe, 0777}, "symbolic link"},
      {{true, false, false, kMe, 0600}, "not a directory"},
      {{}, "does not exist"},
  };
  for (const Case& c : bad) {
    Status st = JudgePrivateDir("/tmp/trainq-1000", c.facts, kMe);
    EXPECT_EQ(st.code(), Code::kPermission) << c.problem;
    EXPECT_THAT(st.message(), AllOf(HasSubstr("/tmp/trainq-1000"), HasSubstr(c.problem),
                                    HasSubstr("remove /tmp/trainq-1000")));
  }
}

TEST(PermissionsTest, StateDirMustBeOursAndWritableByUsAlone) {
  EXPECT_TRUE(JudgeStateDir("/s", Dir(kMe, 0700), kMe).ok());
  EXPECT_TRUE(JudgeStateDir("/s", Dir(kMe, 0755), kMe).ok());  // readable; its files are 0600
  for (PathFacts facts : {Dir(2000, 0700), Dir(kMe, 0775), Dir(kMe, 0757), Dir(kMe, 01777)}) {
    Status st = JudgeStateDir("/s", facts, kMe);
    EXPECT_EQ(st.code(), Code::kPermission) << facts.mode;
    EXPECT_THAT(st.message(), AllOf(HasSubstr("state dir /s"), HasSubstr("chmod 700 /s")));
  }
  EXPECT_THAT(JudgeStateDir("/s", Dir(2000, 0700), kMe).message(),
              HasSubstr("owned by " + UserName(2000) + " (uid 2000)"));
}

TEST(PermissionsTest, MakePrivateDirCreates0700WhateverTheUmask) {
  TempDir tmp;
  mode_t old = ::umask(0);
  Status st = MakePrivateDir(tmp / "sock");
  ::umask(old);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(LstatFacts(tmp / "sock").mode, 0700u);
  EXPECT_TRUE(MakePrivateDir(tmp / "sock").ok());  // it exists: checked only
}

TEST(PermissionsTest, MakePrivateDirRefusesAnExistingOpenDirOrALink) {
  TempDir tmp;
  ASSERT_EQ(::mkdir((tmp / "open").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((tmp / "open").c_str(), 0755), 0);
  EXPECT_EQ(MakePrivateDir(tmp / "open").code(), Code::kPermission);
  ASSERT_EQ(::symlink((tmp / "open").c_str(), (tmp / "link").c_str()), 0);
  ASSERT_EQ(::chmod((tmp / "open").c_str(), 0700), 0);
  Status st = MakePrivateDir(tmp / "link");
  EXPECT_EQ(st.code(), Code::kPermission);
  EXPECT_THAT(st.message(), HasSubstr("symbolic link"));
}

StatePaths PathsIn(const std::string& dir) {
  StatePaths p;
  p.state_dir = dir;
  p.db = dir + "/trainq.db";
  p.log = dir + "/daemon.log";
  p.lock = dir + "/daemon.lock";
  return p;
}

TEST(PermissionsTest, StateDirWithALinkWhereTrainqWritesIsRefusedNamingIt) {
  TempDir tmp;
  StatePaths paths = PathsIn(tmp.path());
  EXPECT_TRUE(CheckStateDir(paths).ok());
  for (const std::string& file : StateFiles(paths)) {
    ASSERT_EQ(::symlink("/etc/hostname", file.c_str()), 0) << file;
    Status st = CheckStateDir(paths);
    EXPECT_EQ(st.code(), Code::kPermission) << file;
    EXPECT_THAT(st.message(), AllOf(HasSubstr(file + " is a symbolic link"), HasSubstr("rm ")));
    ASSERT_EQ(::unlink(file.c_str()), 0);
  }
}

TEST(PermissionsTest, OpenAppendAndLockFileNeverFollowALink) {
  TempDir tmp;
  testing::WriteAll(tmp / "target", "keep");
  ASSERT_EQ(::symlink((tmp / "target").c_str(), (tmp / "daemon.log").c_str()), 0);
  Result<UniqueFd> log = OpenAppend(tmp / "daemon.log");
  EXPECT_EQ(log.status().code(), Code::kPermission);
  EXPECT_THAT(log.status().message(), HasSubstr(tmp / "daemon.log"));
  EXPECT_EQ(LockFile(tmp / "daemon.log").status().code(), Code::kPermission);
  EXPECT_EQ(testing::ReadAll(tmp / "target"), "keep");
}

TEST(PermissionsTest, TightenMakesExistingFilesPrivateAndLeavesLinksAlone) {
  TempDir tmp;
  testing::WriteAll(tmp / "db", "x");
  ASSERT_EQ(::chmod((tmp / "db").c_str(), 0644), 0);
  testing::WriteAll(tmp / "other", "x");
  ASSERT_EQ(::chmod((tmp / "other").c_str(), 0644), 0);
  ASSERT_EQ(::symlink((tmp / "other").c_str(), (tmp / "link").c_str()), 0);
  ASSERT_TRUE(TightenStateFiles({tmp / "db", tmp / "link", tmp / "absent"}).ok());
  EXPECT_EQ(LstatFacts(tmp / "db").mode, 0600u);
  EXPECT_EQ(LstatFacts(tmp / "other").mode, 0644u);
}

TEST(PermissionsTest, ChangeModeSetsTheBitsAndAFailureNamesModeAndPath) {
  TempDir tmp;
  testing::WriteAll(tmp / "sock", "x");
  ASSERT_TRUE(ChangeMode(tmp / "sock", 0660).ok());
  EXPECT_EQ(LstatFacts(tmp / "sock").mode, 0660u);
  Status st = ChangeMode(tmp / "absent", 0755);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("chmod 0755 " + (tmp / "absent")));
}

TEST(PermissionsTest, ChangeGroupToOurOwnGroupKeepsTheOwner) {
  TempDir tmp;
  testing::WriteAll(tmp / "sock", "x");
  ASSERT_TRUE(ChangeGroup(tmp / "sock", ::getegid()).ok());
  EXPECT_EQ(LstatFacts(tmp / "sock").uid, static_cast<int64_t>(::geteuid()));
  EXPECT_THAT(ChangeGroup(tmp / "absent", ::getegid()).message(),
              HasSubstr("chown " + (tmp / "absent")));
}

}  // namespace
}  // namespace trainq
