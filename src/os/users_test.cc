#include "src/os/users.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"
#include "src/os/user_test_util.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestUser;

UserInfo Ada() {
  UserInfo u;
  u.name = "ada";
  u.uid = 1001;
  u.gid = 1001;
  u.groups = {1001, 50};
  return u;
}

DirFacts Dir(std::string path, int64_t uid, int64_t gid, mode_t mode) {
  DirFacts d;
  d.path = std::move(path);
  d.exists = true;
  d.directory = true;
  d.uid = uid;
  d.gid = gid;
  d.mode = mode;
  d.owner = uid == 0 ? "root" : "u" + std::to_string(uid);
  d.group = gid == 0 ? "root" : "g" + std::to_string(gid);
  return d;
}

Status Judge(std::vector<DirFacts> chain, const UserInfo& user = Ada()) {
  return JudgeMayEnter(chain.back().path, chain, user, "cwd");
}

TEST(JudgeMayEnterTest, EachClassOfBitsDecidesForItsUsers) {
  // Owner bits for the owner, group bits for a member, other bits for the rest.
  EXPECT_TRUE(Judge({Dir("/", 0, 0, 0755), Dir("/x", 1001, 0, 0700)}).ok());
  EXPECT_TRUE(Judge({Dir("/", 0, 0, 0755), Dir("/x", 0, 50, 0710)}).ok());
  EXPECT_TRUE(Judge({Dir("/", 0, 0, 0755), Dir("/x", 0, 0, 0701)}).ok());
  EXPECT_FALSE(Judge({Dir("/", 0, 0, 0755), Dir("/x", 0, 0, 0750)}).ok());
  EXPECT_FALSE(Judge({Dir("/", 0, 0, 0755), Dir("/x", 0, 60, 0750)}).ok());
}

TEST(JudgeMayEnterTest, TheFirstMatchingClassDecidesEvenWhenALaterOneWouldAllow) {
  // As the kernel checks: the owner gets the owner bits only, a member the group bits only.
  EXPECT_FALSE(Judge({Dir("/", 0, 0, 0755), Dir("/x", 1001, 0, 0077)}).ok());
  EXPECT_FALSE(Judge({Dir("/", 0, 0, 0755), Dir("/x", 0, 50, 0707)}).ok());
}

TEST(JudgeMayEnterTest, AParentWithoutSearchBlocksAndIsNamed) {
  Status st = Judge({Dir("/", 0, 0, 0755), Dir("/srv", 0, 0, 0700), Dir("/srv/x", 1001, 0, 0755)});
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_EQ(st.message(), "cwd: user ada may not enter /srv/x (/srv is drwx------ root root)");
}

TEST(JudgeMayEnterTest, TheDirectoryItselfIsNamedWithItsModeAndOwners) {
  Status st = Judge({Dir("/", 0, 0, 0755), Dir("/srv", 0, 0, 0755), Dir("/srv/x", 0, 0, 0700)});
  EXPECT_EQ(st.message(), "cwd: user ada may not enter /srv/x (drwx------ root root)");
}

TEST(JudgeMayEnterTest, RootMayEnterAnyDirectoryButNotAMissingOne) {
  UserInfo root;
  root.name = "root";
  root.uid = 0;
  root.gid = 0;
  EXPECT_TRUE(Judge({Dir("/", 0, 0, 0755), Dir("/x", 1001, 1001, 0000)}, root).ok());
  DirFacts gone;
  gone.path = "/gone";
  EXPECT_EQ(Judge({Dir("/", 0, 0, 0755), gone}, root).message(), "cwd: /gone does not exist");
  DirFacts file = Dir("/f", 0, 0, 0755);
  file.directory = false;
  EXPECT_EQ(Judge({Dir("/", 0, 0, 0755), file}, root).message(), "cwd: /f is not a directory");
}

TEST(JudgeMayReadTest, AFileNeedsReadAndADirectoryReadAndSearchByTheClassThatMatches) {
  DirFacts file = Dir("/f", 0, 0, 0640);
  file.directory = false;
  EXPECT_FALSE(JudgeMayRead(file, Ada(), "--mount").ok());
  EXPECT_THAT(JudgeMayRead(file, Ada(), "--mount").message(),
              HasSubstr("--mount: user ada may not read /f (-rw-r----- root root)"));
  file.gid = 50;  // ada's second group
  EXPECT_TRUE(JudgeMayRead(file, Ada(), "--mount").ok());
  file.uid = 1001;
  file.mode = 0044;  // the owner's own bits decide, as the kernel's check does
  EXPECT_FALSE(JudgeMayRead(file, Ada(), "--mount").ok());
  EXPECT_FALSE(JudgeMayRead(Dir("/d", 0, 0, 0744), Ada(), "--mount").ok());  // no x
  EXPECT_TRUE(JudgeMayRead(Dir("/d", 0, 0, 0705), Ada(), "--mount").ok());
  UserInfo root;
  root.uid = 0;
  EXPECT_TRUE(JudgeMayRead(Dir("/d", 5, 5, 0700), root, "--mount").ok());
  DirFacts gone;
  gone.path = "/gone";
  EXPECT_THAT(JudgeMayRead(gone, root, "--mount").message(), HasSubstr("/gone does not exist"));
}

TEST(DirModeStringTest, ShowsBitsAsLsDoes) {
  EXPECT_EQ(DirModeString(0700), "drwx------");
  EXPECT_EQ(DirModeString(0751), "drwxr-x--x");
  EXPECT_EQ(DirModeString(01777), "drwxrwxrwt");
  EXPECT_EQ(DirModeString(02750), "drwxr-s---");
}

TEST(UsersTest, RootIsFoundByNameAndById) {
  auto by_name = LookupUserByName("root");
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  EXPECT_EQ(by_name->uid, 0);
  EXPECT_EQ(by_name->gid, 0);
  EXPECT_EQ(by_name->home, "/root");
  EXPECT_THAT(by_name->groups, ::testing::Contains(0));
  auto by_id = LookupUserById(0);
  ASSERT_TRUE(by_id.ok()) << by_id.status().ToString();
  EXPECT_EQ(by_id->name, "root");
}

TEST(UsersTest, UserNameAndHomeDirFallBackToTheNumberAndRoot) {
  EXPECT_EQ(UserName(0), "root");
  EXPECT_EQ(HomeDir(0), "/root");
  EXPECT_EQ(UserName(-1), "unknown");
  EXPECT_EQ(HomeDir(-1), "/");
  ASSERT_FALSE(LookupUserById(3999999999).ok());  // no such user on the test machine
  EXPECT_EQ(UserName(3999999999), "3999999999");
  EXPECT_EQ(HomeDir(3999999999), "/");
}

TEST(UsersTest, AnUnknownUserIsNotFoundByName) {
  auto u = LookupUserByName("tq-no-such-user");
  EXPECT_EQ(u.status().code(), Code::kNotFound);
  EXPECT_EQ(u.status().message(), "no local user 'tq-no-such-user'");
}

TEST(UsersTest, AnUnknownGroupIsInvalidAndNamed) {
  auto root = LookupUserById(0);
  ASSERT_TRUE(root.ok());
  auto in = UserInGroup(*root, "tq-no-such-group");
  EXPECT_EQ(in.status().code(), Code::kInvalid);
  EXPECT_THAT(in.status().message(), HasSubstr("tq-no-such-group"));
  auto root_group = UserInGroup(*root, "root");
  ASSERT_TRUE(root_group.ok());
  EXPECT_TRUE(*root_group);
}

TEST(UsersTest, ARealUserWithASecondGroupAndTheDirectoriesItMayEnter) {
  TestUser user(/*extra_group=*/true);
  if (!user.ok()) GTEST_SKIP() << user.why();
  auto info = LookupUserByName(user.name());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->name, user.name());
  EXPECT_EQ(info->home, "/home/" + user.name());
  EXPECT_GT(info->uid, 0);
  EXPECT_EQ(LookupUserById(info->uid)->name, user.name());
  EXPECT_EQ(info->groups.size(), 2u);
  auto in_second = UserInGroup(*info, user.group());
  ASSERT_TRUE(in_second.ok());
  EXPECT_TRUE(*in_second);
  EXPECT_FALSE(*UserInGroup(*info, "root"));

  TempDir tmp;  // 0700 root: the user may not enter it, nor anything below
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0700), 0);
  std::string open = tmp / "open";
  ASSERT_EQ(::mkdir(open.c_str(), 0755), 0);
  Status st = CheckMayEnter(open, *info, "cwd");
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_THAT(st.message(), HasSubstr("cwd: user " + user.name() + " may not enter " + open + " (" +
                                      tmp.path() + " is drwx------ root root)"));
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0711), 0);
  EXPECT_TRUE(CheckMayEnter(open, *info, "cwd").ok());
  // Through a link: the real path's directories count too.
  std::string shut = tmp / "shut";
  ASSERT_EQ(::mkdir(shut.c_str(), 0700), 0);
  std::string inner = shut + "/inner";
  ASSERT_EQ(::mkdir(inner.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(inner.c_str(), (tmp / "link").c_str()), 0);
  st = CheckMayEnter(tmp / "link", *info, "cwd");
  EXPECT_THAT(st.message(), HasSubstr("(" + shut + " is drwx------ root root)"));
  // The second group opens a directory of that group.
  ASSERT_EQ(::chown(shut.c_str(), 0, static_cast<gid_t>(info->groups.back())), 0);
  ASSERT_EQ(::chmod(shut.c_str(), 0710), 0);
  EXPECT_TRUE(CheckMayEnter(tmp / "link", *info, "cwd").ok()) << info->groups.back();
  EXPECT_THAT(CheckMayEnter("relative", *info, "cwd").message(), HasSubstr("absolute"));
  // Reading: a 0644 file below a directory the user may not enter is out of reach.
  std::string data = inner + "/data";
  ASSERT_TRUE(WriteFileAtomic(data, "x").ok());
  ASSERT_EQ(::chmod(data.c_str(), 0644), 0);
  EXPECT_TRUE(CheckMayRead(data, *info, "--mount").ok());
  ASSERT_EQ(::chmod(shut.c_str(), 0700), 0);
  st = CheckMayRead(data, *info, "--mount");
  EXPECT_THAT(st.message(), HasSubstr("--mount: user " + user.name() + " may not enter " + inner));
}

}  // namespace
}  // namespace trainq
