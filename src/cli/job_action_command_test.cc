// The commands that act on jobs (`cancel`, `retry`, `hold`, `release`, `update`, `requeue`,
// `clean`) against a fake daemon: the requests, each job's line, and the exit code when the
// daemon refuses some of the jobs (docs/workflow.md: "an id that does not exist or cannot be
// cancelled is an error, and the exit code says so").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/commands.h"
#include "src/cli/fake_daemon_test_util.h"

namespace trainq {
namespace {

using json = nlohmann::json;
using testing::Capture;
using testing::FakeDaemon;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::JobJson;

constexpr const char* kCancel = "/v1/jobs/cancel";

json Done(int64_t id, const std::string& verb) {
  return {{"id", id}, {"state", "cancelled"}, {"message", fmt::format("job {} {}", id, verb)}};
}

json Refused(int64_t id, const std::string& code, const std::string& message) {
  return {{"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

JobSelection Ids(std::vector<std::string> ids) {
  JobSelection s;
  s.ids = std::move(ids);
  return s;
}

TEST(CancelCommandTest, OneJob) {
  FakeDaemon daemon;
  daemon.On("POST", kCancel, 200, {{"results", {Done(12, "cancelled")}}});
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdCancel(client, Ids({"12"})); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "job 12 cancelled\n");
  EXPECT_EQ(daemon.BodyOf("POST", kCancel), json({{"ids", {12}}}));
}

TEST(CancelCommandTest, ListsAndRangesAreOneRequest) {
  FakeDaemon daemon;
  daemon.On("POST", kCancel, 200,
            {{"results",
              {Done(10, "cancelled"), Done(11, "cancelled"), Done(12, "stopping"),
               Done(15, "cancelled")}}});
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdCancel(client, Ids({"10-12,15", "11"})); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "job 10 cancelled\njob 11 cancelled\njob 12 stopping\njob 15 cancelled\n");
  EXPECT_EQ(daemon.BodyOf("POST", kCancel), json({{"ids", {10, 11, 12, 15}}}));
}

TEST(CancelCommandTest, ARefusedJobAmongThemSetsTheExitCode) {
  FakeDaemon daemon;
  daemon.On("POST", kCancel, 200,
            {{"results",
              {Done(10, "cancelled"), Refused(11, "not_found", "no job 11"),
               Refused(12, "conflict", "job 12 already ended (succeeded)")}}});
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdCancel(client, Ids({"10-12"})); });
  EXPECT_EQ(ran.rc, 3);  // not found (3) outranks the conflict (1)
  EXPECT_EQ(ran.out, "job 10 cancelled\n");
  EXPECT_EQ(ran.err, "trainq: no job 11\ntrainq: job 12 already ended (succeeded)\n");
}

TEST(CancelCommandTest, AnotherUsersJobExitsFour) {
  FakeDaemon daemon;
  daemon.On("POST", kCancel, 200,
            {{"results", {Refused(7, "permission", "job 7 is bob's"), Done(8, "cancelled")}}});
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdCancel(client, Ids({"7,8"})); });
  EXPECT_EQ(ran.rc, 4);
  EXPECT_EQ(ran.out, "job 8 cancelled\n");
}

TEST(CancelCommandTest, JsonPrintsEachOutcomeAndKeepsTheExitCode) {
  FakeDaemon daemon;
  json results = {Done(10, "cancelled"), Refused(11, "not_found", "no job 11")};
  daemon.On("POST", kCancel, 200, {{"results", results}});
  Client client = daemon.MakeClient();
  JobSelection s = Ids({"10,11"});
  s.json = true;
  testing::Ran ran = Capture([&] { return CmdCancel(client, s); });
  EXPECT_EQ(ran.rc, 3);
  EXPECT_EQ(json::parse(ran.out), json({{"results", results}}));
  EXPECT_EQ(ran.err, "trainq: no job 11\n");
}

TEST(CancelCommandTest, NoIdsAndNoFilterIsRefusedUnsent) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdCancel(client, JobSelection{}); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("cancel: give job ids"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(CancelCommandTest, ARangeThatRunsBackwardsNamesIt) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdCancel(client, Ids({"20-10"})); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("job ids: '20-10' runs backwards"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(CancelCommandTest, AGroupCancelsItsJobsThatHaveNotEnded) {
  json jobs = {JobJson(20, "a", "succeeded"), JobJson(21, "b", "running"),
               JobJson(22, "c", "queued")};
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs?all=1&group=20", 200, {{"jobs", jobs}})
      .On("POST", kCancel, 200, {{"results", {Done(21, "stopping"), Done(22, "cancelled")}}});
  Client client = daemon.MakeClient();
  JobSelection s;
  s.group = "20";
  testing::Ran ran = Capture([&] { return CmdCancel(client, s); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "group 20: 2 job(s) cancelled or stopping, 3 in the group\n");
  EXPECT_EQ(daemon.BodyOf("POST", kCancel), json({{"ids", {21, 22}}}));
}

TEST(CancelCommandTest, AnEmptyGroupIsNotFound) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs?all=1&group=20", 200, {{"jobs", json::array()}});
  Client client = daemon.MakeClient();
  JobSelection s;
  s.group = "20";
  testing::Ran ran = Capture([&] { return CmdCancel(client, s); });
  EXPECT_EQ(ran.rc, 3);
  EXPECT_THAT(ran.err, HasSubstr("no group 20"));
}

TEST(CancelCommandTest, AFilterThatPicksNothingSaysSoAndExitsZero) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs?all=1&mine=1", 200,
            {{"jobs", {JobJson(5, "lr-1", "succeeded"), JobJson(6, "eval", "queued")}}});
  Client client = daemon.MakeClient();
  JobSelection s;
  s.name = "lr-*";
  testing::Ran ran = Capture([&] { return CmdCancel(client, s); });
  EXPECT_EQ(ran.rc, 0);
  EXPECT_EQ(ran.err, "trainq: no job of yours matches; nothing to cancel\n");
  EXPECT_TRUE(daemon.Sent("POST", kCancel).empty());
}

TEST(CancelCommandTest, SignalIsSentToEachRunningJob) {
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs/12/signal?signal=USR1&batch=1", 200,
            {{"message", "job 12: SIGUSR1 sent"}, {"job", JobJson(12, "a", "running")}});
  Client client = daemon.MakeClient();
  JobSelection s = Ids({"12"});
  s.signal = "USR1";
  s.batch = true;
  testing::Ran ran = Capture([&] { return CmdCancel(client, s); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "job 12: SIGUSR1 sent\n");
}

TEST(CancelCommandTest, ABadSignalNamesTheOption) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  JobSelection s = Ids({"12"});
  s.signal = "NOPE";
  testing::Ran ran = Capture([&] { return CmdCancel(client, s); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--signal"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(CancelCommandLineTest, IdsAndJsonFromTheCommandLine) {
  FakeDaemon daemon;
  daemon.On("POST", kCancel, 200, {{"results", {Done(3, "cancelled"), Done(4, "cancelled")}}});
  testing::Ran ran = testing::RunTrainq(daemon, {"cancel", "3", "4", "--json"});
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["results"].size(), 2u);
  EXPECT_EQ(daemon.BodyOf("POST", kCancel), json({{"ids", {3, 4}}}));
}

TEST(RetryCommandTest, RequeuesEndedJobsInOneRequest) {
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs/retry", 200,
            {{"results", {{{"id", 5}, {"state", "queued"}, {"message", "job 5 queued again"}}}}});
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdRetry(client, Ids({"5"})); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "job 5 queued again\n");
}

TEST(RetryCommandTest, FailedAndStateTogetherAreRefused) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  JobSelection s;
  s.failed = true;
  s.state = "cancelled";
  testing::Ran ran = Capture([&] { return CmdRetry(client, s); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_EQ(ran.err, "trainq: --failed and --state: give one of them\n");
}

TEST(RetryCommandTest, AnUnknownStateNamesTheOption) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  JobSelection s;
  s.state = "failed,done";
  testing::Ran ran = Capture([&] { return CmdRetry(client, s); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--state: 'done' is not a state"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

json Updated(int64_t id, const std::string& message) {
  return {{"message", message}, {"job", JobJson(id, "a", "queued")}};
}

UpdateArgs Hold(std::vector<std::string> ids, bool hold) {
  UpdateArgs a;
  a.ids = std::move(ids);
  a.hold = hold;
  return a;
}

TEST(HoldCommandTest, HoldsEachJob) {
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs/12/update", 200, Updated(12, "job 12 held"))
      .On("POST", "/v1/jobs/13/update", 200, Updated(13, "job 13 held"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdUpdate(client, Hold({"12,13"}, true)); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "job 12 held\njob 13 held\n");
  EXPECT_EQ(daemon.BodyOf("POST", "/v1/jobs/12/update"), json({{"hold", true}}));
  EXPECT_EQ(daemon.BodyOf("POST", "/v1/jobs/13/update"), json({{"hold", true}}));
}

TEST(HoldCommandTest, ReleaseOfARunningJobIsRefusedAndTheOthersGoOn) {
  FakeDaemon daemon;
  daemon.OnError("POST", "/v1/jobs/12/update", Status::Conflict("job 12 runs; nothing to release"))
      .On("POST", "/v1/jobs/13/update", 200, Updated(13, "job 13 released"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdUpdate(client, Hold({"12", "13"}, false)); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_EQ(ran.out, "job 13 released\n");
  EXPECT_EQ(ran.err, "trainq: job 12 runs; nothing to release\n");
  EXPECT_EQ(daemon.BodyOf("POST", "/v1/jobs/13/update"), json({{"hold", false}}));
}

TEST(HoldCommandTest, JsonGathersEachOutcome) {
  FakeDaemon daemon;
  daemon.OnError("POST", "/v1/jobs/12/update", Status::NotFound("no job 12"))
      .On("POST", "/v1/jobs/13/update", 200, Updated(13, "job 13 held"));
  Client client = daemon.MakeClient();
  UpdateArgs a = Hold({"12-13"}, true);
  a.json = true;
  testing::Ran ran = Capture([&] { return CmdUpdate(client, a); });
  EXPECT_EQ(ran.rc, 3);
  json results = json::parse(ran.out)["results"];
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0],
            json({{"id", 12}, {"error", {{"code", "not_found"}, {"message", "no job 12"}}}}));
  EXPECT_EQ(results[1]["message"], "job 13 held");
}

TEST(HoldCommandLineTest, HoldAndReleaseSendTheirFlag) {
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs/4/update", 200, Updated(4, "job 4 held"));
  testing::Ran ran = testing::RunTrainq(daemon, {"hold", "4"});
  EXPECT_EQ(ran.rc, 0) << ran.err;
  ran = testing::RunTrainq(daemon, {"release", "4"});
  EXPECT_EQ(ran.rc, 0) << ran.err;
  std::vector<ClientRequest> sent = daemon.Sent("POST", "/v1/jobs/4/update");
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(json::parse(sent[0].body), json({{"hold", true}}));
  EXPECT_EQ(json::parse(sent[1].body), json({{"hold", false}}));
}

TEST(UpdateCommandTest, SendsOnlyWhatChanges) {
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs/12/update", 200, Updated(12, "job 12 updated"));
  Client client = daemon.MakeClient();
  UpdateArgs a;
  a.ids = {"12"};
  a.priority = 5;
  a.after = "none";
  a.gpu_type = "none";
  testing::Ran ran = Capture([&] { return CmdUpdate(client, a); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(daemon.BodyOf("POST", "/v1/jobs/12/update"),
            json({{"priority", 5}, {"after", json::array()}, {"gpu_type", nullptr}}));
}

TEST(UpdateCommandTest, NothingToChangeIsRefusedUnsent) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  UpdateArgs a;
  a.ids = {"12"};
  testing::Ran ran = Capture([&] { return CmdUpdate(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("nothing to change"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(UpdateCommandTest, ABadAfterNamesTheOption) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  UpdateArgs a;
  a.ids = {"12"};
  a.after = "x1";
  testing::Ran ran = Capture([&] { return CmdUpdate(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--after: job ids: 'x1'"));
}

TEST(UpdateCommandTest, TheDaemonsRefusalOfAFieldExitsTwo) {
  FakeDaemon daemon;
  daemon.OnError("POST", "/v1/jobs/12/update", Status::Invalid("--mem: 'x' is not a size"));
  Client client = daemon.MakeClient();
  UpdateArgs a;
  a.ids = {"12"};
  a.mem = "x";
  testing::Ran ran = Capture([&] { return CmdUpdate(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_EQ(ran.err, "trainq: --mem: 'x' is not a size\n");
}

TEST(RequeueCommandTest, WithoutIdsOutsideAJobIsRefused) {
  ::unsetenv("TRAINQ_JOB_ID");
  ::unsetenv("SLURM_JOB_ID");
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdRequeue(client, RequeueArgs{}); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("requeue: give the job ids"));
}

TEST(RequeueCommandTest, AJobThatWaitsIsAConflict) {
  FakeDaemon daemon;
  daemon.OnError("POST", "/v1/jobs/12/requeue", Status::Conflict("job 12 waits; nothing to stop"));
  Client client = daemon.MakeClient();
  RequeueArgs a;
  a.ids = {"12"};
  testing::Ran ran = Capture([&] { return CmdRequeue(client, a); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_EQ(ran.err, "trainq: job 12 waits; nothing to stop\n");
}

// Every --json of a command that acts on jobs gives a refused job's error one shape, the API's
// ({"code", "message"}), so a script reads `error.code` whichever command it ran.
TEST(RequeueCommandTest, JsonGivesARefusalTheShapeOfEveryOtherResult) {
  FakeDaemon daemon;
  daemon.OnError("POST", "/v1/jobs/12/requeue", Status::Conflict("job 12 waits; nothing to stop"))
      .On("POST", "/v1/jobs/13/requeue", 200, Updated(13, "job 13 requeued"));
  Client client = daemon.MakeClient();
  RequeueArgs a;
  a.ids = {"12,13"};
  a.json = true;
  testing::Ran ran = Capture([&] { return CmdRequeue(client, a); });
  EXPECT_EQ(ran.rc, 1);
  json results = json::parse(ran.out)["results"];
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(
      results[0],
      json({{"id", 12},
            {"error", {{"code", "conflict"}, {"message", "job 12 waits; nothing to stop"}}}}));
  EXPECT_EQ(results[1]["message"], "job 13 requeued");
}

TEST(CancelCommandTest, SignalJsonGivesARefusalTheAPIsShape) {
  FakeDaemon daemon;
  daemon.OnError("POST", "/v1/jobs/12/signal?signal=USR1", Status::NotFound("no job 12"));
  Client client = daemon.MakeClient();
  JobSelection s = Ids({"12"});
  s.signal = "USR1";
  s.json = true;
  testing::Ran ran = Capture([&] { return CmdCancel(client, s); });
  EXPECT_EQ(ran.rc, 3);
  EXPECT_EQ(json::parse(ran.out)["results"][0]["error"],
            json({{"code", "not_found"}, {"message", "no job 12"}}));
}

TEST(CleanCommandTest, SendsTheFiltersAndPrintsTheMessage) {
  FakeDaemon daemon;
  daemon.On("POST", "/v1/jobs/clean", 200,
            {{"forgotten", 2}, {"ids", {1, 2}}, {"message", "forgot 2 jobs"}});
  Client client = daemon.MakeClient();
  CleanArgs a;
  a.before = "7d";
  a.state = "failed";
  testing::Ran ran = Capture([&] { return CmdClean(client, a); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "forgot 2 jobs\n");
  EXPECT_EQ(daemon.BodyOf("POST", "/v1/jobs/clean"), json({{"keep_logs", false},
                                                           {"all_users", false},
                                                           {"older_than_ms", 7 * 86400000LL},
                                                           {"states", {"failed"}}}));
}

TEST(CleanCommandTest, AStateThatHasNotEndedIsRefused) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  CleanArgs a;
  a.state = "running";
  testing::Ran ran = Capture([&] { return CmdClean(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--state: running jobs have not ended"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

}  // namespace
}  // namespace trainq
