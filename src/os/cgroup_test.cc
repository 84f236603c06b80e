#include "src/os/cgroup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

void Put(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string Get(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  return text.ok() ? *text : "<absent>";
}

// A hybrid host's layout: v1 memory and pids hierarchies, no v2 at the root.
void FakeV1(const TempDir& root) {
  Put(root / "memory/cgroup.procs", "1\n");
  Put(root / "memory/memory.limit_in_bytes", "9223372036854771712\n");
  Put(root / "pids/cgroup.procs", "1\n");
}

void FakeV2(const TempDir& root, const std::string& controllers) {
  Put(root / "cgroup.controllers", controllers);
  Put(root / "cgroup.subtree_control", "");
  Put(root / "cgroup.procs", "1\n");
}

TEST(CgroupTest, OffWithoutRootOrHierarchy) {
  EXPECT_FALSE(SetUpCgroups("").on());
  TempDir root;
  CgroupHost host = SetUpCgroups(root.path());
  EXPECT_FALSE(host.on());
  EXPECT_THAT(host.why_off, HasSubstr("neither cgroup v2 nor the v1 memory and pids"));
}

TEST(CgroupTest, V1SetUpMakesTrainqParents) {
  TempDir root;
  FakeV1(root);
  CgroupHost host = SetUpCgroups(root.path());
  ASSERT_TRUE(host.on()) << host.why_off;
  EXPECT_EQ(host.version, CgroupVersion::kV1);
  EXPECT_TRUE(std::filesystem::is_directory(root / "memory/trainq"));
  EXPECT_TRUE(std::filesystem::is_directory(root / "pids/trainq"));
}

// Where trainq's parent group cannot be made (here a file stands in its place, which stops
// root as a read-only hierarchy would), cgroups are off and the reason names it.
TEST(CgroupTest, V1OffWhenTheParentCannotBeMade) {
  TempDir root;
  FakeV1(root);
  { std::ofstream(root / "pids/trainq") << "not a directory\n"; }
  CgroupHost host = SetUpCgroups(root.path());
  EXPECT_FALSE(host.on());
  EXPECT_THAT(host.why_off, HasSubstr("pids/trainq"));
}

TEST(CgroupTest, V2EnablesControllersForItsChildren) {
  TempDir root;
  FakeV2(root, "cpuset cpu io memory hugetlb pids rdma misc\n");
  CgroupHost host = SetUpCgroups(root.path());
  ASSERT_TRUE(host.on()) << host.why_off;
  EXPECT_EQ(host.version, CgroupVersion::kV2);
  EXPECT_EQ(Get(root / "cgroup.subtree_control"), "+memory +pids");
  EXPECT_EQ(Get(root / "trainq.slice/cgroup.subtree_control"), "+memory +pids");
}

TEST(CgroupTest, V2OffWithoutMemoryController) {
  TempDir root;
  FakeV2(root, "cpu io pids\n");
  CgroupHost host = SetUpCgroups(root.path());
  EXPECT_FALSE(host.on());
  EXPECT_THAT(host.why_off, HasSubstr("lacks the memory controller"));
}

TEST(CgroupTest, NameIsJobAttemptAndHash) {
  std::string a = AttemptCgroupName("/var/lib/trainq/runs/12/1");
  EXPECT_THAT(a, ::testing::MatchesRegex("12-1-[0-9a-f]{8}"));
  EXPECT_NE(a, AttemptCgroupName("/home/u/.local/state/trainq/runs/12/1"));
  EXPECT_EQ(a, AttemptCgroupName("/var/lib/trainq/runs/12/1"));
  EXPECT_THAT(AttemptCgroupName("/x/a b/../1"), ::testing::MatchesRegex("\\.\\.-1-[0-9a-f]{8}"));
}

TEST(CgroupTest, V1GroupLimitsProcsAndCounters) {
  TempDir root;
  FakeV1(root);
  ASSERT_TRUE(SetUpCgroups(root.path()).on());
  CgroupSpec spec{CgroupVersion::kV1, root.path(), "7-1-00000000", {64ull << 20, 20}};
  ASSERT_TRUE(CreateCgroup(spec).ok());
  EXPECT_THAT(CgroupDirs(spec),
              ElementsAre(root / "memory/trainq/7-1-00000000", root / "pids/trainq/7-1-00000000"));
  EXPECT_THAT(CgroupJoinFiles(spec), ElementsAre(root / "memory/trainq/7-1-00000000/tasks",
                                                 root / "pids/trainq/7-1-00000000/tasks"));
  EXPECT_EQ(Get(root / "memory/trainq/7-1-00000000/memory.limit_in_bytes"), "67108864");
  EXPECT_EQ(Get(root / "pids/trainq/7-1-00000000/pids.max"), "20");
  EXPECT_TRUE(CgroupExists(spec));
  EXPECT_TRUE(CgroupProcs(spec).empty());
  Put(root / "memory/trainq/7-1-00000000/cgroup.procs", "40\n12\n");
  Put(root / "pids/trainq/7-1-00000000/cgroup.procs", "12\n41\n");
  EXPECT_THAT(CgroupProcs(spec), ElementsAre(12, 40, 41));
  Put(root / "memory/trainq/7-1-00000000/memory.oom_control",
      "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  Put(root / "pids/trainq/7-1-00000000/pids.events", "max 180\n");
  EXPECT_EQ(CgroupOomKills(spec), 2u);
  EXPECT_EQ(CgroupForksRefused(spec), 180u);
}

TEST(CgroupTest, V1NoLimitWritesUnlimited) {
  TempDir root;
  FakeV1(root);
  ASSERT_TRUE(SetUpCgroups(root.path()).on());
  CgroupSpec spec{CgroupVersion::kV1, root.path(), "n", {}};
  ASSERT_TRUE(CreateCgroup(spec).ok());
  EXPECT_EQ(Get(root / "memory/trainq/n/memory.limit_in_bytes"), "-1");
  EXPECT_EQ(Get(root / "pids/trainq/n/pids.max"), "max");
}

TEST(CgroupTest, V2GroupLimitsAndOomKills) {
  TempDir root;
  FakeV2(root, "memory pids\n");
  ASSERT_TRUE(SetUpCgroups(root.path()).on());
  CgroupSpec spec{CgroupVersion::kV2, root.path(), "3-2-abcdef01", {1ull << 30, 0}};
  Put(root / "trainq.slice/3-2-abcdef01/memory.swap.max", "max");
  ASSERT_TRUE(CreateCgroup(spec).ok());
  std::string dir = root / "trainq.slice/3-2-abcdef01";
  EXPECT_THAT(CgroupJoinFiles(spec), ElementsAre(dir + "/cgroup.procs"));
  EXPECT_EQ(Get(dir + "/memory.max"), "1073741824");
  EXPECT_EQ(Get(dir + "/memory.swap.max"), "0");
  EXPECT_EQ(Get(dir + "/pids.max"), "max");
  Put(dir + "/memory.events", "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\noom_group_kill 0\n");
  EXPECT_EQ(CgroupOomKills(spec), 1u);
}

TEST(CgroupTest, RemoveIsOkWhenGone) {
  TempDir root;
  FakeV1(root);
  CgroupSpec spec{CgroupVersion::kV1, root.path(), "gone", {}};
  EXPECT_FALSE(CgroupExists(spec));
  EXPECT_TRUE(RemoveCgroup(spec).ok());
  EXPECT_TRUE(CgroupProcs(spec).empty());
  EXPECT_EQ(CgroupOomKills(spec), 0u);
}

TEST(CgroupTest, OffSpecHasNoDirs) {
  CgroupSpec off;
  EXPECT_TRUE(CgroupDirs(off).empty());
  EXPECT_TRUE(CreateCgroup(off).ok());
  EXPECT_TRUE(RemoveCgroup(off).ok());
}

// The real thing where this host allows it (root, cgroups mounted): a process that joins by
// writing "0" is listed, the group cannot be removed while it lives, and can once it is gone.
TEST(CgroupRealTest, JoinListRemove) {
  CgroupHost host = SetUpCgroups(kCgroupRoot);
  if (!host.on()) GTEST_SKIP() << "cgroups off here: " << host.why_off;
  CgroupSpec spec{host.version,
                  host.root,
                  AttemptCgroupName("/cgroup-test/" + std::to_string(::getpid())),
                  {256ull << 20, 64}};
  ASSERT_TRUE(CreateCgroup(spec).ok());
  std::vector<std::string> files = CgroupJoinFiles(spec);
  pid_t child = testing::ForkRun([&] {
    for (const std::string& f : files) {
      FILE* out = std::fopen(f.c_str(), "w");
      if (out == nullptr || std::fputs("0", out) < 0 || std::fclose(out) != 0) return 1;
    }
    ::pause();
    return 0;
  });
  EXPECT_TRUE(testing::WaitUntil([&] { return CgroupProcs(spec).size() == 1; }));
  EXPECT_THAT(CgroupProcs(spec), ElementsAre(child));
  EXPECT_EQ(RemoveCgroup(spec).code(), Code::kConflict);
  ::kill(child, SIGKILL);
  testing::WaitChild(child);
  EXPECT_TRUE(testing::WaitUntil([&] { return RemoveCgroup(spec).ok(); }));
  EXPECT_FALSE(CgroupExists(spec));
}

}  // namespace
}  // namespace trainq
