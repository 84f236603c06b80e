#include "src/os/system.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "src/os/proc_test_util.h"

namespace trainq {
namespace {

using testing::TempDir;

// Sets an environment variable for one test and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name), old_(GetEnv(name)) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::setenv(name_, old_.c_str(), 1); }

 private:
  const char* name_;
  std::string old_;
};

void WriteScript(const std::string& path, mode_t mode) {
  std::ofstream(path) << "#!/bin/sh\nexit 0\n";
  ::chmod(path.c_str(), mode);
}

TEST(RandomTokenTest, Is32HexDigitsAndDiffersPerCall) {
  std::string a = RandomToken();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, RandomToken());
}

TEST(FindOnPathTest, TakesTheFirstExecutableInPathOrder) {
  TempDir dir;
  std::string a = dir / "a", b = dir / "b";
  ::mkdir(a.c_str(), 0700);
  ::mkdir(b.c_str(), 0700);
  WriteScript(a + "/tool", 0600);  // not executable: skipped
  WriteScript(b + "/tool", 0700);
  ScopedEnv path("PATH", a + "::" + b);
  Result<std::string> found = FindOnPath("tool");
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(*found, b + "/tool");
}

TEST(FindOnPathTest, NamesWhatItDidNotFind) {
  TempDir dir;
  ScopedEnv path("PATH", dir.path());
  Result<std::string> found = FindOnPath("no-such-tool");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), Code::kNotFound);
  EXPECT_EQ(found.status().message(), "no-such-tool is not on PATH");
}

TEST(RunCommandTest, CollectsBothStreamsAndTheExitCode) {
  Result<CommandOutput> r = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->output, "out\nerr\n");
}

TEST(RunCommandTest, ReportsASignalAsAShellDoes) {
  Result<CommandOutput> r = RunCommand({"/bin/sh", "-c", "kill -9 $$"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 128 + 9);
}

TEST(RunCommandTest, AMissingProgramIsAnError) {
  Result<CommandOutput> r = RunCommand({"/no/such/program"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("/no/such/program"));
}

}  // namespace
}  // namespace trainq
