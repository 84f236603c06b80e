#include "src/os/run_dir.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "src/os/proc_test_util.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(RunDirTest, RunSpecRoundTripsKeepingEnvOrderAndOddStrings) {
  TempDir dir;
  RunSpec spec;
  spec.command = {"python", "train.py", "--name", "a b \"c\" $HOME *", "", "ünï"};
  spec.cwd = "/srv/x y";
  spec.env = {{"ZED", "1"}, {"ALPHA", "with=equals"}, {"EMPTY", ""}, {"ZED", "dup"}};
  spec.log_path = dir / "custom.log";
  spec.grace_ms = 1234;
  spec.time_limit_ms = 9'000'000;
  spec.umask = 027;
  spec.uid = 1001;
  spec.gid = 1002;
  spec.user = "ada";
  spec.home = "/home/ada";
  spec.fence_file = "/var/lib/trainq/fence";
  spec.fence_after_ms = 270'000;
  spec.cgroup = {CgroupVersion::kV1, "/sys/fs/cgroup", "12-1-0badc0de", {64ull << 20, 20}};
  spec.warn_signal = 10;
  spec.warn_lead_ms = 90'000;
  spec.warn_batch_only = true;
  spec.checkpoint = "ckpt/*.pt";
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());

  auto back = ReadRunSpec(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->command, spec.command);
  EXPECT_EQ(back->cwd, spec.cwd);
  EXPECT_EQ(back->env, spec.env);
  EXPECT_EQ(back->log_path, spec.log_path);
  EXPECT_EQ(back->grace_ms, 1234);
  EXPECT_EQ(back->time_limit_ms, 9'000'000);
  EXPECT_EQ(back->umask, 027);
  EXPECT_EQ(back->uid, 1001);
  EXPECT_EQ(back->gid, 1002);
  EXPECT_EQ(back->user, "ada");
  EXPECT_EQ(back->home, "/home/ada");
  EXPECT_EQ(back->fence_file, "/var/lib/trainq/fence");
  EXPECT_EQ(back->fence_after_ms, 270'000);
  EXPECT_EQ(back->cgroup.version, CgroupVersion::kV1);
  EXPECT_EQ(back->cgroup.root, "/sys/fs/cgroup");
  EXPECT_EQ(back->cgroup.name, "12-1-0badc0de");
  EXPECT_EQ(back->cgroup.limits.mem_bytes, 64ull << 20);
  EXPECT_EQ(back->cgroup.limits.max_tasks, 20);
  EXPECT_EQ(back->warn_signal, 10);
  EXPECT_EQ(back->warn_lead_ms, 90'000);
  EXPECT_TRUE(back->warn_batch_only);
  EXPECT_EQ(back->checkpoint, "ckpt/*.pt");
}

TEST(RunDirTest, ShimControlRoundTripsAndRefusesWhatTheShimCannotDo) {
  TempDir dir;
  EXPECT_EQ(ReadShimControl(dir.path()).status().code(), Code::kNotFound);
  ShimControl c{7, "preempted", "preempted by job 31 (priority 100)", 40'000, 10, true};
  ASSERT_TRUE(WriteShimControl(dir.path(), c).ok());
  Result<ShimControl> back = ReadShimControl(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seq, 7);
  EXPECT_EQ(back->stop, "preempted");
  EXPECT_EQ(back->reason, c.reason);
  EXPECT_EQ(back->stop_in_ms, 40'000);
  EXPECT_EQ(back->signal, 10);
  EXPECT_TRUE(back->batch_only);
  ShimControl unknown, negative, no_signal;
  unknown.stop = "cancelled";
  negative.stop_in_ms = -1;
  no_signal.signal = 99;
  for (const ShimControl& bad : {unknown, negative, no_signal}) {
    ASSERT_TRUE(WriteShimControl(dir.path(), bad).ok());
    EXPECT_EQ(ReadShimControl(dir.path()).status().code(), Code::kInvalid) << bad.stop;
  }
}

TEST(RunDirTest, RunSpecEnvMayBeAnObject) {
  TempDir dir;
  ASSERT_TRUE(
      WriteAll(SpecPath(dir.path()), R"({"command": ["true"], "env": {"B": "2", "A": "1"}})"));
  auto spec = ReadRunSpec(dir.path());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_THAT(spec->env, ElementsAre(Pair("A", "1"), Pair("B", "2")));
  EXPECT_EQ(spec->grace_ms, 10000);  // absent: the default
  EXPECT_EQ(spec->umask, -1);        // absent (an older daemon's spec): the shim's own
  EXPECT_EQ(spec->uid, -1);          // absent: the shim's own user
  EXPECT_EQ(spec->gid, -1);
  EXPECT_EQ(spec->fence_file, "");  // absent: no fencing (one machine)
  EXPECT_FALSE(spec->cgroup.on());  // absent: no cgroup
}

TEST(RunDirTest, RunSpecRejectsBadFieldsAndNamesThem) {
  TempDir dir;
  const char* bad[] = {
      R"({"cwd": "/"})",                                   // no command
      R"({"command": ["ls", 3]})",                         // not a string
      R"({"command": "ls"})",                              // not an array
      R"({"command": ["ls"], "env": {"A=B": "x"}})",       // '=' in a name
      R"({"command": ["ls"], "env": [["A", "1", "2"]]})",  // not a pair
      R"({"command": ["ls"], "env": [["", "1"]]})",        // empty name
      R"({"command": ["a\u0000b"]})",                      // NUL cannot reach execve
      R"({"command": ["ls"], "grace_ms": "soon"})",
      R"({"command": ["ls"], "grace_ms": -5})",
      R"({"command": ["ls"], "umask": 512})",
      R"({"command": ["ls"], "umask": "022"})",
      R"({"command": ["ls"], "uid": 1001})",                  // a uid without its gid
      R"({"command": ["ls"], "uid": 4294967295, "gid": 0})",  // (uid_t)-1: "unchanged"
      R"({"command": ["ls"], "uid": -2, "gid": 0})",
      R"({"command": ["ls"], "fence_file": "fence", "fence_after_ms": 500})",  // relative
      R"({"command": ["ls"], "fence_file": "/s/fence"})",                      // no fence_after_ms
      R"({"command": ["ls"], "fence_file": "/s/fence", "fence_after_ms": -1})",
      // A root shim writes below cgroup_root/.../cgroup_name: nothing may lead elsewhere.
      R"({"command": ["ls"], "cgroup_version": "v1", "cgroup_root": "/c", "cgroup_name": ".."})",
      R"({"command": ["ls"], "cgroup_version": "v2", "cgroup_root": "/c", "cgroup_name": "a/b"})",
      R"({"command": ["ls"], "cgroup_version": "v1", "cgroup_root": "c", "cgroup_name": "x"})",
      R"({"command": ["ls"], "cgroup_version": "v3", "cgroup_root": "/c", "cgroup_name": "x"})",
      R"({"command": ["ls"], "cgroup_version": "v2", "cgroup_root": "/c", "cgroup_name": "x",
          "max_tasks": -1})",
      R"(["ls"])",
  };
  for (const char* text : bad) {
    ASSERT_TRUE(WriteAll(SpecPath(dir.path()), text));
    auto spec = ReadRunSpec(dir.path());
    EXPECT_EQ(spec.status().code(), Code::kInvalid) << text;
    EXPECT_THAT(spec.status().message(), HasSubstr("spec.json")) << text;
  }
}

TEST(RunDirTest, WriteRunSpecRefusesInvalidUtf8) {
  TempDir dir;
  RunSpec spec;
  spec.command = {"echo", "\xff\xfe"};
  EXPECT_EQ(WriteRunSpec(dir.path(), spec).code(), Code::kInvalid);
  EXPECT_EQ(ReadRunSpec(dir.path()).status().code(), Code::kNotFound);
}

TEST(RunDirTest, ShimRecordRoundTrips) {
  TempDir dir;
  ASSERT_TRUE(WriteShimRecord(dir.path(), {4242, 18446744073709551000ULL}).ok());
  auto rec = ReadShimRecord(dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->pid, 4242);
  EXPECT_EQ(rec->start_ticks, 18446744073709551000ULL);
}

TEST(RunDirTest, ExitRecordKeepsExitCodeAndSignalApart) {
  TempDir dir;
  ExitRecord exited;
  exited.exit_code = 3;
  exited.started_at = 1700000000000;
  exited.ended_at = 1700000005000;
  ASSERT_TRUE(WriteExitRecord(dir.path(), exited).ok());
  auto rec = ReadExitRecord(dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 3);
  EXPECT_FALSE(rec->signal.has_value());
  EXPECT_EQ(rec->started_at, 1700000000000);
  EXPECT_EQ(rec->ended_at, 1700000005000);
  EXPECT_FALSE(rec->time_limit);
  EXPECT_FALSE(rec->fenced);

  ExitRecord killed;
  killed.signal = 9;
  killed.cancelled = true;
  killed.time_limit = true;
  killed.spawn_failed = true;
  killed.fenced = true;
  killed.mem_limit_hit = 64ull << 20;
  killed.stop = "preempted";
  killed.stop_reason = "preempted by job 31 (priority 100)";
  killed.warned_at = 1700000004000;
  killed.checkpoint = "ckpt/last.pt";
  killed.error = "cannot run '\xff': No such file";  // bytes from a user's argv
  ASSERT_TRUE(WriteExitRecord(dir.path(), killed).ok());
  rec = ReadExitRecord(dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_FALSE(rec->exit_code.has_value());
  EXPECT_EQ(rec->signal, 9);
  EXPECT_TRUE(rec->cancelled);
  EXPECT_TRUE(rec->time_limit);
  EXPECT_TRUE(rec->spawn_failed);
  EXPECT_TRUE(rec->fenced);
  EXPECT_EQ(rec->mem_limit_hit, 64ull << 20);
  EXPECT_EQ(rec->stop, "preempted");
  EXPECT_EQ(rec->stop_reason, killed.stop_reason);
  EXPECT_EQ(rec->warned_at, 1700000004000);
  EXPECT_EQ(rec->checkpoint, "ckpt/last.pt");
  EXPECT_THAT(rec->error, HasSubstr("No such file"));
}

TEST(RunDirTest, AbsentRecordsAreNotFound) {
  TempDir dir;
  EXPECT_EQ(ReadRunSpec(dir.path()).status().code(), Code::kNotFound);
  EXPECT_EQ(ReadShimRecord(dir.path()).status().code(), Code::kNotFound);
  EXPECT_EQ(ReadExitRecord(dir.path()).status().code(), Code::kNotFound);
}

TEST(RunDirTest, EveryTruncationOfAnExitRecordIsInvalid) {
  TempDir dir;
  ExitRecord rec;
  rec.exit_code = 0;
  rec.error = "x";
  rec.ended_at = 5;
  ASSERT_TRUE(WriteExitRecord(dir.path(), rec).ok());
  std::string full = ReadAll(ExitPath(dir.path()));
  ASSERT_GT(full.size(), 20u);
  size_t end = full.rfind('}');  // cuts after the closing brace are still whole records
  for (size_t len = 0; len <= end; ++len) {
    ASSERT_TRUE(WriteAll(ExitPath(dir.path()), full.substr(0, len)));
    EXPECT_EQ(ReadExitRecord(dir.path()).status().code(), Code::kInvalid) << len;
  }
}

TEST(RunDirTest, MalformedRecordsAreInvalid) {
  TempDir dir;
  const char* bad_exit[] = {"",
                            "null",
                            "[]",
                            R"({"exit_code": "0", "ended_at": 1})",
                            R"({"exit_code": 1e400, "ended_at": 1})",
                            R"({"exit_code": 99999999999, "ended_at": 1})",
                            R"({"cancelled": 1, "ended_at": 1})",
                            "{}",
                            "\xff\xfe"};
  for (const char* text : bad_exit) {
    ASSERT_TRUE(WriteAll(ExitPath(dir.path()), text));
    EXPECT_EQ(ReadExitRecord(dir.path()).status().code(), Code::kInvalid) << text;
  }
  const char* bad_shim[] = {R"({"pid": 1})", R"({"pid": 1, "start_ticks": -1})",
                            R"({"pid": "1", "start_ticks": 1})"};
  for (const char* text : bad_shim) {
    ASSERT_TRUE(WriteAll(ShimPath(dir.path()), text));
    EXPECT_EQ(ReadShimRecord(dir.path()).status().code(), Code::kInvalid) << text;
  }
}

TEST(RunDirTest, WriteFileAtomicReplacesAndLeavesNoTempFile) {
  TempDir dir;
  std::string path = dir / "record.json";
  ASSERT_TRUE(WriteFileAtomic(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "second, longer").ok());
  EXPECT_EQ(ReadAll(path), "second, longer");
  EXPECT_THAT(DirEntries(dir.path()), ElementsAre("record.json"));
}

TEST(RunDirTest, WriteFileAtomicFailsCleanlyWhereItCannotWrite) {
  TempDir dir;
  Status st = WriteFileAtomic(dir / "missing/record.json", "x");
  EXPECT_EQ(st.code(), Code::kIo);
  ASSERT_TRUE(MakeDirs(dir / "target.json").ok());  // rename over a directory fails
  st = WriteFileAtomic(dir / "target.json", "x");
  EXPECT_EQ(st.code(), Code::kIo);
  EXPECT_THAT(DirEntries(dir.path()), ElementsAre("target.json"));
}

TEST(RunDirTest, ReadFileReadsEverythingAndReportsAbsence) {
  TempDir dir;
  std::string big(200000, 'x');
  big += "end";
  ASSERT_TRUE(WriteAll(dir / "f", big));
  auto text = ReadFile(dir / "f");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, big);
  EXPECT_EQ(ReadFile(dir / "nope").status().code(), Code::kNotFound);
  EXPECT_EQ(ReadFileTail(dir / "nope", 10).status().code(), Code::kNotFound);
}

TEST(RunDirTest, ReadFileTailReadsOnlyTheEnd) {
  TempDir dir;
  std::string path = dir / "log";
  ASSERT_TRUE(WriteAll(path, "short"));
  EXPECT_EQ(*ReadFileTail(path, 100), "short");
  EXPECT_EQ(*ReadFileTail(path, 3), "ort");
  EXPECT_EQ(*ReadFileTail(path, 0), "");

  // 8 GiB of hole then the tail: reading the whole file would take seconds and memory.
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "CUDA out of memory\n", 19, off_t{8} << 30), 19);
  ::close(fd);
  auto tail = ReadFileTail(path, 19);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_EQ(*tail, "CUDA out of memory\n");
}

TEST(RunDirTest, MakeDirsCreatesPrivateNestedDirectories) {
  TempDir dir;
  std::string deep = dir / "a/b/c";
  ASSERT_TRUE(MakeDirs(deep).ok());
  ASSERT_TRUE(MakeDirs(deep).ok());  // already there
  struct stat st = {};
  ASSERT_EQ(::stat((dir / "a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(deep.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));

  ASSERT_TRUE(WriteAll(dir / "file", "x"));
  EXPECT_EQ(MakeDirs(dir / "file").code(), Code::kIo);
  EXPECT_EQ(MakeDirs(dir / "file/sub").code(), Code::kIo);
}

}  // namespace
}  // namespace trainq
