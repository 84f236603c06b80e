// srun's neighbours as a `trainq sbatch` job sees them (trainq run as scancel, scontrol,
// sbatch, squeue): what each covers reaches the daemon as the trainq command it stands for,
// and what it does not cover says what to use instead, with exit code 1.
#include "src/cli/slurm_tools.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/cli/fake_daemon_test_util.h"

namespace trainq {
namespace {

using testing::FakeDaemon;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Sets an environment variable for one test, and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value == nullptr) {
      ::unsetenv(name);
    } else {
      ::setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// `argv[0]` run as a Slurm tool inside a job whose daemon is `daemon`.
testing::Ran RunTool(FakeDaemon& daemon, std::vector<std::string> argv) {
  ScopedEnv server("TRAINQ_SERVER", testing::kFakeServer);
  ScopedTestTransport transport(daemon.transport());
  std::vector<char*> ptrs;
  for (std::string& word : argv) ptrs.push_back(word.data());
  return testing::Capture([&] {
    std::optional<int> rc = RunSlurmTool(static_cast<int>(ptrs.size()), ptrs.data());
    EXPECT_TRUE(rc.has_value()) << argv[0] << " is no Slurm tool";
    return rc.value_or(-1);
  });
}

TEST(SlurmToolsTest, TrainqItselfIsNoTool) {
  std::vector<std::string> argv = {"/usr/bin/trainq", "ls"};
  std::vector<char*> ptrs = {argv[0].data(), argv[1].data()};
  EXPECT_EQ(RunSlurmTool(2, ptrs.data()), std::nullopt);
}

TEST(SlurmToolsTest, ScancelSignalSignalsTheJobThroughTheDaemon) {
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs/12/signal?signal=USR1&batch=1", 200,
            {{"message", "job 12: SIGUSR1 sent"}, {"job", testing::JobJson(12, "a", "running")}});
  testing::Ran ran = RunTool(daemon, {"/tmp/job/bin/scancel", "-s", "USR1", "-b", "12"});
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "job 12: SIGUSR1 sent\n");
}

TEST(SlurmToolsTest, ScancelOfAJobThatEndedExitsWithTrainqsCode) {
  FakeDaemon daemon;
  daemon.OnError("POST", "/v1/jobs/12/signal?signal=TERM", Status::Conflict("job 12 has ended"));
  testing::Ran ran = RunTool(daemon, {"scancel", "--signal=TERM", "12"});
  EXPECT_EQ(ran.rc, 1);
  EXPECT_EQ(ran.err, "trainq: job 12 has ended\n");
}

TEST(SlurmToolsTest, ScancelWithoutSignalSaysWhatToUse) {
  FakeDaemon daemon;
  testing::Ran ran = RunTool(daemon, {"scancel", "12"});
  EXPECT_EQ(ran.rc, 1);
  EXPECT_THAT(ran.err, HasSubstr("to stop a job use trainq cancel ID"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(SlurmToolsTest, ScontrolRequeueRequeuesTheJobItself) {
  ScopedEnv own("TRAINQ_JOB_ID", "12");
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs/12/requeue?self=1", 200,
            {{"message", "job 12 requeued"}, {"job", testing::JobJson(12, "a", "queued")}});
  testing::Ran ran = RunTool(daemon, {"scontrol", "requeue", "12"});
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "job 12 requeued\n");
}

TEST(SlurmToolsTest, ScontrolExpandsAHostList) {
  FakeDaemon daemon;
  testing::Ran ran = RunTool(daemon, {"scontrol", "show", "hostnames", "gpu[1-3],cpu7"});
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "gpu1\ngpu2\ngpu3\ncpu7\n");
  ran = RunTool(daemon, {"scontrol", "show", "hostlist", "gpu1,gpu2,gpu3"});
  EXPECT_EQ(ran.out, "gpu[1-3]\n");
}

TEST(SlurmToolsTest, ScontrolOfWhatItDoesNotCoverSaysWhatToUse) {
  FakeDaemon daemon;
  testing::Ran ran = RunTool(daemon, {"scontrol", "update", "JobId=12"});
  EXPECT_EQ(ran.rc, 1);
  EXPECT_THAT(ran.err, HasSubstr("use trainq update ID"));
}

TEST(SlurmToolsTest, SqueueIsNotCoveredAndSaysWhatToUse) {
  FakeDaemon daemon;
  testing::Ran ran = RunTool(daemon, {"squeue", "-u", "ada"});
  EXPECT_EQ(ran.rc, 1);
  EXPECT_EQ(ran.err, "squeue is not part of trainq; use trainq ls (--json for scripts)\n");
  EXPECT_THAT(ran.out, IsEmpty());
}

TEST(SlurmToolsTest, SbatchWithoutAScriptExitsTwo) {
  FakeDaemon daemon;
  testing::Ran ran = RunTool(daemon, {"sbatch", "--gres=gpu:1"});
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("sbatch: give the batch script"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(SlurmToolsTest, SbatchWithAnOptionThatCannotBeReadExitsTwo) {
  FakeDaemon daemon;
  testing::Ran ran = RunTool(daemon, {"sbatch", "--nodes=many", "job.sh"});
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("the command line: --nodes 'many' cannot be read"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

}  // namespace
}  // namespace trainq
