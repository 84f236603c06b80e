// `trainq submit` against a fake daemon: the request it sends, what it prints, and its exit
// code for each kind of answer (README, "Exit codes": 0 success, 2 invalid input, 3 no such
// job, 4 not allowed, 1 anything else).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/cli/commands.h"
#include "src/cli/fake_daemon_test_util.h"
#include "src/os/proc_test_util.h"

namespace trainq {
namespace {

using json = nlohmann::json;
using testing::Capture;
using testing::FakeDaemon;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kJobs = "/v1/jobs";

// `submit -- python train.py`, in a directory that is no git tree, without a snapshot.
SubmitArgs Train() {
  SubmitArgs a;
  a.command = {"python", "train.py"};
  a.cwd = "/nonexistent/proj";
  a.snapshot = "off";
  return a;
}

TEST(SubmitCommandTest, SendsTheJobAndPrintsItsId) {
  FakeDaemon daemon;
  daemon.On("POST", kJobs, 201, {{"ids", {12}}});
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.gpus = 2;
  a.name = "lr-sweep";
  a.env = {"LR=0.1"};
  a.after = {"7,8"};
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "12\n");
  ASSERT_EQ(daemon.requests().size(), 1u);
  const ClientRequest& sent = daemon.requests()[0];
  EXPECT_FALSE(sent.idempotency_key.empty());
  json body = json::parse(sent.body);
  EXPECT_EQ(body["command"], json({"python", "train.py"}));
  EXPECT_EQ(body["cwd"], "/nonexistent/proj");
  EXPECT_EQ(body["gpus"], 2);
  EXPECT_EQ(body["name"], "lr-sweep");
  EXPECT_EQ(body["env"]["LR"], "0.1");
  EXPECT_EQ(body["after"], json({7, 8}));
  EXPECT_FALSE(body.contains("mem"));
}

TEST(SubmitCommandTest, JsonPrintsTheJobTheDaemonStored) {
  FakeDaemon daemon;
  json job = testing::JobJson(12, "train", "queued");
  daemon.On("POST", kJobs, 201, {{"ids", {12}}}).On("GET", "/v1/jobs/12", 200, job);
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.json = true;
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out), job);
}

TEST(SubmitCommandTest, ARefusalExitsTwoWithTheDaemonsMessage) {
  FakeDaemon daemon;
  daemon.OnError("POST", kJobs, Status::Invalid("--mem: 'lots' is not a size; use 20GiB"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdSubmit(client, Train()); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_EQ(ran.err, "trainq: --mem: 'lots' is not a size; use 20GiB\n");
  EXPECT_THAT(ran.out, IsEmpty());
}

TEST(SubmitCommandTest, ADaemonThatIsUnavailableExitsOne) {
  FakeDaemon daemon;
  daemon.OnError("POST", kJobs, Status::Unavailable("the store is away; try again"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdSubmit(client, Train()); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_EQ(ran.err, "trainq: the store is away; try again\n");
  EXPECT_EQ(daemon.requests().size(), 1u);  // a 503 was an answer: nothing is sent again
}

TEST(SubmitCommandTest, NoDaemonListeningExitsOneNamingTheServer) {
  FakeDaemon daemon;
  daemon.OnFailure("POST", kJobs, Status::Unavailable("connect: no such file"))
      .OnFailure("GET", "/v1/status", Status::Unavailable("connect: no such file"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdSubmit(client, Train()); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_THAT(ran.err, HasSubstr("does not answer"));
  EXPECT_THAT(ran.err, HasSubstr(testing::kFakeServer + std::string(" (--server)")));
}

TEST(SubmitCommandTest, AnAnswerThatIsNotJsonExitsOne) {
  FakeDaemon daemon;
  daemon.OnBytes("POST", kJobs, "<html>bad gateway</html>");
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdSubmit(client, Train()); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_THAT(ran.err, HasSubstr("not JSON"));
}

TEST(SubmitCommandTest, ALostAnswerIsSentAgainWithTheSameKey) {
  FakeDaemon daemon;
  daemon.OnFailure("POST", kJobs, Status::Io("connection reset"))
      .On("POST", kJobs, 201, {{"ids", {12}}})
      .On("GET", "/v1/status", 200, {{"pid", 1}});
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdSubmit(client, Train()); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "12\n");
  std::vector<ClientRequest> posts = daemon.Sent("POST", kJobs);
  ASSERT_EQ(posts.size(), 2u);
  EXPECT_EQ(posts[0].idempotency_key, posts[1].idempotency_key);
  EXPECT_EQ(posts[0].body, posts[1].body);
}

TEST(SubmitCommandTest, AReplyWithoutIdsNamesTheField) {
  FakeDaemon daemon;
  daemon.On("POST", kJobs, 201, json::object());
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdSubmit(client, Train()); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_THAT(ran.err, HasSubstr("field 'ids'"));
}

TEST(SubmitCommandTest, ABadEnvIsRefusedBeforeAnythingIsSent) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.env = {"NOEQUALS"};
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--env"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(SubmitCommandTest, ABadAfterNamesTheOption) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.after = {"12,abc"};
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--after: 'abc' is not a job id"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(SubmitCommandTest, ASweepIsOneGroupOfJobs) {
  FakeDaemon daemon;
  daemon.On("POST", kJobs, 201, {{"ids", {20, 21}}, {"group", 20}});
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.command = {"python", "train.py", "--lr", "{lr}"};
  a.sweeps = {"lr=0.1,0.01"};
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "20\n21\n");
  EXPECT_THAT(ran.err, HasSubstr("group 20: 2 jobs (trainq ls --group 20)"));
  json body = daemon.BodyOf("POST", kJobs);
  EXPECT_EQ(body["defaults"]["group"], true);
  ASSERT_EQ(body["jobs"].size(), 2u);
  EXPECT_EQ(body["jobs"][0]["command"], json({"python", "train.py", "--lr", "0.1"}));
  EXPECT_EQ(body["jobs"][1]["command"], json({"python", "train.py", "--lr", "0.01"}));
}

TEST(SubmitCommandTest, ASweepWithJsonPrintsIdsAndGroup) {
  FakeDaemon daemon;
  daemon.On("POST", kJobs, 201, {{"ids", {20, 21}}, {"group", 20}});
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.command = {"python", "train.py", "{lr}"};
  a.sweeps = {"lr=0.1,0.01"};
  a.json = true;
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out), json({{"ids", {20, 21}}, {"group", 20}}));
}

TEST(SubmitCommandTest, ABadSweepNamesTheOption) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.sweeps = {"lr"};
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--sweep"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(SubmitCommandTest, ABadArrayNamesTheOption) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.array = "5-1";
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--array"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

class SubmitFromTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::string path = dir_.path() + "/jobs.txt";
    std::ofstream(path) << text;
    return path;
  }

  testing::TempDir dir_;
};

TEST_F(SubmitFromTest, EachLineIsAJobAndTheDaemonsErrorNamesTheLine) {
  FakeDaemon daemon;
  daemon.OnError("POST", kJobs, Status::Invalid("jobs[1]: --mem: 'lots' is not a size"));
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.command.clear();
  a.from = Write("# the sweep\npython a.py\n\n{\"command\": [\"b\"], \"mem\": \"lots\"}\n");
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_EQ(ran.err, "trainq: --from " + a.from + " line 4: --mem: 'lots' is not a size\n");
  json body = daemon.BodyOf("POST", kJobs);
  ASSERT_EQ(body["jobs"].size(), 2u);
  EXPECT_EQ(body["jobs"][0]["command"], json({"python", "a.py"}));
  EXPECT_EQ(body["jobs"][1]["mem"], "lots");
  EXPECT_EQ(body["defaults"]["cwd"], "/nonexistent/proj");
}

TEST_F(SubmitFromTest, AScriptIsRefusedWithWhatToRunInstead) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.command.clear();
  a.from = Write("#!/bin/bash\npython a.py\n");
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--from: " + a.from + " is a script"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST_F(SubmitFromTest, ACommandBesideFromIsRefused) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  SubmitArgs a = Train();
  a.from = Write("python a.py\n");
  testing::Ran ran = Capture([&] { return CmdSubmit(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--from: give either --from FILE or a command"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(SubmitCommandLineTest, TheOptionsReachTheRequest) {
  FakeDaemon daemon;
  daemon.On("POST", kJobs, 201, {{"ids", {5}}});
  testing::Ran ran =
      testing::RunTrainq(daemon, {"submit", "--gpus", "0", "--cpus", "4", "--priority", "3",
                                  "--no-snapshot", "--cwd", "/nonexistent", "--", "make", "-j4"});
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "5\n");
  json body = daemon.BodyOf("POST", kJobs);
  EXPECT_EQ(body["command"], json({"make", "-j4"}));
  EXPECT_EQ(body["gpus"], 0);
  EXPECT_EQ(body["cpus"], 4);
  EXPECT_EQ(body["priority"], 3);
}

TEST(SubmitCommandLineTest, AnUnknownOptionExitsTwoBeforeAnythingIsSent) {
  FakeDaemon daemon;
  testing::Ran ran = testing::RunTrainq(daemon, {"submit", "--gpu", "2", "--", "x"});
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--gpu"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

}  // namespace
}  // namespace trainq
