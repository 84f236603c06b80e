// The workflow commands (docs/workflow.md) against a fake daemon: `wait` and `run` exit with
// the jobs' codes, `diff` names what differs between two runs, and `sbatch` turns a script
// into one submit, telling the daemon's refusals against the script's lines.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/cli/commands.h"
#include "src/cli/fake_daemon_test_util.h"
#include "src/os/proc_test_util.h"

namespace trainq {
namespace {

using json = nlohmann::json;
using testing::AttemptJson;
using testing::Capture;
using testing::FakeDaemon;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::JobJson;
using ::testing::StartsWith;

// A job that ended in `state`, its one attempt with `exit_code` (or killed by `signal`).
json Ended(int64_t id, const std::string& state, std::optional<int> exit_code,
           std::optional<int> signal = std::nullopt) {
  json job = JobJson(id, "j", state);
  json attempt = AttemptJson(1, state, "2026-01-02T10:01:05.000Z", exit_code);
  if (signal) attempt["signal"] = *signal;
  // Not {attempt}: clang reads that as a copy of attempt, GCC as an array of it.
  job["attempts"] = json::array({attempt});
  return job;
}

WaitArgs WaitFor(std::vector<std::string> ids) {
  WaitArgs a;
  a.ids = std::move(ids);
  return a;
}

TEST(WaitCommandTest, ExitsWithTheFirstFailedJobsCode) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/12", 200, Ended(12, "succeeded", 0))
      .On("GET", "/v1/jobs/13", 200, Ended(13, "failed", 3));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdWait(client, WaitFor({"12,13"})); });
  EXPECT_EQ(ran.rc, 3);
  EXPECT_EQ(ran.err, "trainq: job 12 succeeded\ntrainq: job 13 failed\n");
  EXPECT_THAT(ran.out, IsEmpty());
}

TEST(WaitCommandTest, AJobKilledBySignalIs128PlusIt) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/12", 200, Ended(12, "failed", std::nullopt, 9));
  Client client = daemon.MakeClient();
  WaitArgs a = WaitFor({"12"});
  a.json = true;
  testing::Ran ran = Capture([&] { return CmdWait(client, a); });
  EXPECT_EQ(ran.rc, 137);
  EXPECT_EQ(json::parse(ran.out),
            json({{"jobs", {{{"id", 12}, {"state", "failed"}, {"exit_code", 137}}}},
                  {"exit_code", 137}}));
}

TEST(WaitCommandTest, AJobCancelledBeforeItRanIsOne) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/12", 200, JobJson(12, "j", "cancelled"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdWait(client, WaitFor({"12"})); });
  EXPECT_EQ(ran.rc, 1);
}

// A daemon of another version: a job without a state is reported, naming the field, not
// waited on forever.
TEST(WaitCommandTest, AJobWithoutAStateNamesTheField) {
  json job = Ended(12, "failed", 1);
  job.erase("state");
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/12", 200, job);
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdWait(client, WaitFor({"12"})); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_THAT(ran.err, HasSubstr("lacks field 'state'"));
}

TEST(WaitCommandTest, IdsAndGroupTogetherAreRefused) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  WaitArgs a = WaitFor({"12"});
  a.group = "20";
  testing::Ran ran = Capture([&] { return CmdWait(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("wait: give job ids or --group G"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(WaitCommandTest, AnUnknownJobExitsThree) {
  FakeDaemon daemon;
  daemon.OnError("GET", "/v1/jobs/99", Status::NotFound("no job 99"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdWait(client, WaitFor({"99"})); });
  EXPECT_EQ(ran.rc, 3);
  EXPECT_EQ(ran.err, "trainq: no job 99\n");
}

TEST(RunCommandTest, StreamsTheOutputAndExitsWithTheJobsCode) {
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs", 201, {{"ids", {12}}})
      .On("GET", "/v1/jobs/12", 200, Ended(12, "failed", 3))
      .On("GET", "/v1/jobs/12/log?attempt=1&size=1", 200, {{"size", 9}})
      .OnBytes("GET", "/v1/jobs/12/log?attempt=1&offset=0&length=9", "Traceback");
  Client client = daemon.MakeClient();
  SubmitArgs a;
  a.command = {"python", "train.py"};
  a.cwd = "/nonexistent";
  a.snapshot = "off";
  testing::Ran ran = Capture([&] { return CmdRun(client, a); });
  EXPECT_EQ(ran.rc, 3);
  EXPECT_EQ(ran.out, "Traceback");
  EXPECT_THAT(ran.err, StartsWith("trainq: job 12 submitted\n"));
  EXPECT_THAT(ran.err, HasSubstr("trainq: job 12 failed"));
}

TEST(RunCommandTest, ASweepIsRefused) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  SubmitArgs a;
  a.command = {"x"};
  a.sweeps = {"lr=1,2"};
  testing::Ran ran = Capture([&] { return CmdRun(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("run: attaches to one job"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

json Recorded(int64_t id, const std::string& commit, const std::string& lr) {
  json job = JobJson(id, "train", "succeeded");
  job["command"] = {"python", "train.py", "--lr", lr};
  job["record"] = {{"git", {{"commit", commit}, {"branch", "main"}}},
                   {"host", "gpu1"},
                   {"trainq_version", "1.0"}};
  return job;
}

TEST(DiffCommandTest, NamesWhatDiffersBetweenTwoRuns) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/1", 200, Recorded(1, "aaaaaaaaaaaaaaaa", "0.1"))
      .On("GET", "/v1/jobs/2", 200, Recorded(2, "bbbbbbbbbbbbbbbb", "0.01"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdDiff(client, "1", "2"); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out,
            "commit:\n  - aaaaaaaaaaaa\n  + bbbbbbbbbbbb\n"
            "command:\n  - [\"python\",\"train.py\",\"--lr\",\"0.1\"]\n"
            "  + [\"python\",\"train.py\",\"--lr\",\"0.01\"]\n");
}

TEST(DiffCommandTest, JsonListsTheDifferences) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/1", 200, Recorded(1, "aaaa", "0.1"))
      .On("GET", "/v1/jobs/2", 200, Recorded(2, "aaaa", "0.1"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdDiff(client, "1", "2", true); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  json out = json::parse(ran.out);
  EXPECT_EQ(out["first"], 1);
  EXPECT_EQ(out["second"], 2);
  EXPECT_EQ(out["differences"], json::array());
}

TEST(DiffCommandTest, ASecondIdThatIsNoIdExitsTwo) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/1", 200, Recorded(1, "aaaa", "0.1"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdDiff(client, "1", "two"); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("job id: 'two' is not a job id"));
}

class SbatchCommandTest : public ::testing::Test {
 protected:
  std::string Script(const std::string& text) {
    std::string path = dir_ / "train.sh";
    std::ofstream(path) << text;
    return path;
  }

  testing::TempDir dir_;
};

TEST_F(SbatchCommandTest, SubmitsTheScriptAsOneJob) {
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs", 201, {{"ids", {12}}});
  Client client = daemon.MakeClient();
  std::string script = Script(
      "#!/bin/bash\n#SBATCH --job-name=bert\n#SBATCH --gres=gpu:2\n#SBATCH --time=1:00:00\n"
      "python train.py\n");
  testing::Ran ran = Capture([&] { return CmdSbatch(client, SbatchArgs{{script, "--epochs"}}); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "Submitted batch job 12\n");
  json body = daemon.BodyOf("POST", "/v1/jobs");
  EXPECT_EQ(body["name"], "bert");
  EXPECT_EQ(body["gpus"], 2);
  EXPECT_EQ(body["time"], "3600000ms");
  EXPECT_EQ(body["slurm"], true);
  EXPECT_EQ(body["record"]["sbatch"]["script"], script);
  EXPECT_EQ(body["record"]["sbatch"]["args"], json({"--epochs"}));
  EXPECT_EQ(body["env"]["SLURM_JOB_NAME"], "bert");
}

TEST_F(SbatchCommandTest, ParsablePrintsTheIdAlone) {
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs", 201, {{"ids", {12}}});
  Client client = daemon.MakeClient();
  std::string script = Script("#!/bin/bash\ntrue\n");
  testing::Ran ran = Capture([&] { return CmdSbatch(client, SbatchArgs{{"--parsable", script}}); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "12\n");
}

TEST_F(SbatchCommandTest, ALineThatCannotBeReadExitsTwoNamingIt) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  std::string script = Script("#!/bin/bash\n#SBATCH --time=soon\ntrue\n");
  testing::Ran ran = Capture([&] { return CmdSbatch(client, SbatchArgs{{script}}); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, StartsWith("trainq: " + script + ": #SBATCH line 2: --time 'soon'"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST_F(SbatchCommandTest, AMissingScriptExitsTwo) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdSbatch(client, SbatchArgs{{dir_ / "missing.sh"}}); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("sbatch: cannot read the script"));
}

TEST_F(SbatchCommandTest, ARefusalIsToldAgainstTheScriptsLine) {
  FakeDaemon daemon;
  daemon.OnError("POST", "/v1/jobs", Status::Invalid("--gpus: 9 is more than any node has (8)"));
  Client client = daemon.MakeClient();
  std::string script = Script("#!/bin/bash\n#SBATCH --gres=gpu:9\ntrue\n");
  testing::Ran ran = Capture([&] { return CmdSbatch(client, SbatchArgs{{script}}); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_EQ(ran.err,
            "trainq: #SBATCH line 2: --gres=gpu:9 cannot be met: --gpus: 9 is more than any node "
            "has (8)\n");
}

}  // namespace
}  // namespace trainq
