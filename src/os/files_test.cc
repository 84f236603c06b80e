// The file helpers the stager and the stores move, make and remove trees with (files.cc) and
// the facts and modes they read and set (permissions.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "src/os/permissions.h"
#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {
namespace {

using testing::TempDir;

TEST(FilesTest, RenameFileReplacesAndSaysWhenNothingIsThere) {
  TempDir dir;
  std::ofstream(dir / "a") << "new";
  std::ofstream(dir / "b") << "old";
  ASSERT_TRUE(RenameFile(dir / "a", dir / "b").ok());
  EXPECT_EQ(*ReadFile(dir / "b"), "new");
  Status gone = RenameFile(dir / "a", dir / "c");
  EXPECT_EQ(gone.code(), Code::kNotFound);
  EXPECT_THAT(gone.message(), ::testing::HasSubstr(dir / "a"));
}

TEST(FilesTest, RemoveTreeEmptiesReadOnlyDirectoriesAndNeverFollowsALink) {
  TempDir dir;
  TempDir elsewhere;
  std::ofstream(elsewhere / "kept") << "x";
  ASSERT_TRUE(MakeDirs(dir / "t/sub").ok());
  std::ofstream(dir / "t/sub/f") << "x";
  std::filesystem::create_directory_symlink(elsewhere.path(), dir / "t/link");
  ASSERT_TRUE(ChangeMode(dir / "t/sub", 0555).ok());
  ASSERT_TRUE(ChangeMode(dir / "t", 0555).ok());
  RemoveTree(dir / "t");
  EXPECT_FALSE(LstatFacts(dir / "t").exists);
  EXPECT_TRUE(FileExists(elsewhere / "kept"));
}

TEST(FilesTest, ListEntriesNamesEveryKindSortedAndNothingForAMissingDir) {
  TempDir dir;
  std::ofstream(dir / "b") << "x";
  ASSERT_TRUE(MakeDir(dir / "a", 0700).ok());
  ASSERT_TRUE(MakeDir(dir / "a", 0700).ok());  // already there
  std::filesystem::create_symlink("b", dir / "c");
  EXPECT_EQ(*ListEntries(dir.path()), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(*ListFiles(dir.path()), (std::vector<std::string>{"b"}));
  EXPECT_TRUE(ListEntries(dir / "none")->empty());
}

TEST(FilesTest, CreateNewFileIsPrivateExclusiveAndRefusesALink) {
  TempDir dir;
  mode_t old = SetUmask(0);
  ASSERT_TRUE(CreateNewFile(dir / "key", "secret\n").ok());
  SetUmask(old);
  EXPECT_EQ(*ReadFile(dir / "key"), "secret\n");
  EXPECT_EQ(LstatFacts(dir / "key").mode, 0600u);
  EXPECT_EQ(CreateNewFile(dir / "key", "other").code(), Code::kConflict);
  std::filesystem::create_symlink(dir / "target", dir / "link");
  EXPECT_FALSE(CreateNewFile(dir / "link", "x").ok());
  EXPECT_FALSE(FileExists(dir / "target"));
}

TEST(PermissionsTest, FactsOfAnOpenFileAndOfAPathAgree) {
  TempDir dir;
  std::ofstream(dir / "f") << "x";
  ASSERT_TRUE(ChangeMode(dir / "f", 0640).ok());
  ASSERT_TRUE(ChangeOwner(dir / "f", EffectiveUid(), EffectiveGid()).ok());
  Result<UniqueFd> fd = OpenToRead(dir / "f", /*follow_links=*/false);
  ASSERT_TRUE(fd.ok());
  PathFacts open = FdFacts(fd->get());
  PathFacts path = LstatFacts(dir / "f");
  EXPECT_EQ(open.mode, 0640u);
  EXPECT_EQ(open.uid, EffectiveUid());
  EXPECT_EQ(open.gid, EffectiveGid());
  EXPECT_EQ(open.ctime_ns, path.ctime_ns);
  EXPECT_GT(path.ctime_ns, 0);
  std::filesystem::create_symlink(dir / "f", dir / "l");
  EXPECT_FALSE(OpenToRead(dir / "l", /*follow_links=*/false).ok());
}

TEST(PermissionsTest, CurrentUmaskLeavesItAsItWas) {
  mode_t old = SetUmask(027);
  EXPECT_EQ(CurrentUmask(), 027u);
  EXPECT_EQ(CurrentUmask(), 027u);
  SetUmask(old);
}

}  // namespace
}  // namespace trainq
