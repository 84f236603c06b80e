// The commands that read the queue (`ls`, `show`, `explain`, `logs`, `acct`) against a fake
// daemon: the request, the table or JSON printed, and the exit code for each kind of answer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/cli/commands.h"
#include "src/cli/fake_daemon_test_util.h"

namespace trainq {
namespace {

using json = nlohmann::json;
using testing::AttemptJson;
using testing::Capture;
using testing::FakeDaemon;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::JobJson;
using ::testing::Not;
using ::testing::StartsWith;

// Job 12 ran twice: out of memory, then succeeded; job 13 waits.
json TwoJobs() {
  json done = JobJson(12, "train", "succeeded");
  done["attempt"] = 2;
  done["attempts"] = {AttemptJson(1, "failed", "2026-01-02T10:00:35.000Z", 137),
                      AttemptJson(2, "succeeded", "2026-01-02T10:01:05.000Z", 0)};
  done["attempts"][0]["end_reason"] = "out of memory; retried";
  done["attempts"][0]["oom"] = true;
  json waiting = JobJson(13, "eval", "queued");
  waiting["gpus"] = 0;
  waiting["cpus"] = 2;
  return json::array({done, waiting});
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    out.push_back(text.substr(start, nl - start));
  }
  return out;
}

// The words of a table's line, split on runs of spaces.
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < line.size()) {
    size_t end = line.find("  ", at);
    if (end == std::string::npos) end = line.size();
    out.push_back(line.substr(at, end - at));
    at = line.find_first_not_of(' ', end);
    if (at == std::string::npos) break;
  }
  return out;
}

TEST(ListCommandTest, PrintsATableOfTheJobs) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs?limit=201", 200, {{"jobs", TwoJobs()}, {"cluster", false}});
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdList(client, ListArgs{}); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  std::vector<std::string> lines = Lines(ran.out);
  ASSERT_EQ(lines.size(), 3u) << ran.out;
  EXPECT_EQ(Cells(lines[0]),
            (std::vector<std::string>{"ID", "NAME", "STATE", "PRIORITY", "ASKS", "GPUS", "ATTEMPT",
                                      "USER", "SUBMITTED", "INFO"}));
  std::vector<std::string> done = Cells(lines[1]);
  ASSERT_EQ(done.size(), 10u) << lines[1];
  EXPECT_EQ(done[0], "12");
  EXPECT_EQ(done[2], "succeeded");
  EXPECT_EQ(done[4], "1xwhole");
  EXPECT_EQ(done[5], "0,1");
  EXPECT_EQ(done[6], "2");
  EXPECT_EQ(done[8], "2026-01-02 10:00:00");
  EXPECT_EQ(done[9], "ran 1m00s, peak 3.0 GiB");
  std::vector<std::string> waiting = Cells(lines[2]);
  ASSERT_EQ(waiting.size(), 10u) << lines[2];
  EXPECT_EQ(waiting[4], "CPUx2");
  EXPECT_EQ(waiting[5], "-");
  EXPECT_EQ(waiting[9], "waiting for GPUs");
  EXPECT_THAT(ran.err, IsEmpty());
}

TEST(ListCommandTest, AClusterAddsTheNodeColumn) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs?limit=201", 200, {{"jobs", TwoJobs()}, {"cluster", true}});
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdList(client, ListArgs{}); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  std::vector<std::string> lines = Lines(ran.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(Cells(lines[0])[6], "NODE");
  EXPECT_EQ(Cells(lines[1])[6], "gpu1");
}

TEST(ListCommandTest, JsonPrintsEveryJobAsTheDaemonSentIt) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs?all=1", 200, {{"jobs", TwoJobs()}});
  Client client = daemon.MakeClient();
  ListArgs a;
  a.json = true;
  a.all = true;
  testing::Ran ran = Capture([&] { return CmdList(client, a); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out), TwoJobs());
}

TEST(ListCommandTest, QuietPrintsTheIdsNewestFirst) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs?all=1", 200, {{"jobs", TwoJobs()}});
  Client client = daemon.MakeClient();
  ListArgs a;
  a.quiet = true;
  a.newest = true;
  testing::Ran ran = Capture([&] { return CmdList(client, a); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "13\n12\n");
}

TEST(ListCommandTest, UserAndMineTogetherAreRefused) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  ListArgs a;
  a.user = "ada";
  a.mine = true;
  testing::Ran ran = Capture([&] { return CmdList(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_EQ(ran.err, "trainq: --user and --mine: give one of them\n");
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(ListCommandTest, AReplyWithoutJobsNamesTheField) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs?limit=201", 200, {{"cluster", false}});
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdList(client, ListArgs{}); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_THAT(ran.err, HasSubstr("lacks field 'jobs'"));
  EXPECT_THAT(ran.out, IsEmpty());
}

// A daemon of another version: a field of another type is reported, naming it, not thrown.
TEST(ListCommandTest, AClusterFlagOfAnotherTypeNamesIt) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs?limit=201", 200, {{"jobs", TwoJobs()}, {"cluster", "yes"}});
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdList(client, ListArgs{}); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_THAT(ran.err, HasSubstr("'cluster'"));
  EXPECT_THAT(ran.out, IsEmpty());
}

TEST(ListCommandTest, AGroupListsItsDoneJobsToo) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs?group=20&all=1", 200, {{"jobs", json::array()}});
  testing::Ran ran = testing::RunTrainq(daemon, {"ls", "--group", "20", "--json"});
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out), json::array());
}

TEST(ShowCommandTest, PrintsTheJobAndEachAttempt) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/12", 200, TwoJobs()[0]);
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdShow(client, "12", false); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_THAT(ran.out, HasSubstr("job:         12\n"));
  EXPECT_THAT(ran.out, HasSubstr("state:       succeeded\n"));
  EXPECT_THAT(ran.out, HasSubstr("command:     python train.py\n"));
  EXPECT_THAT(ran.out, HasSubstr("attempt 1: failed\n"));
  EXPECT_THAT(ran.out, HasSubstr("  exit code 137  signal -  out of memory yes\n"));
  EXPECT_THAT(ran.out, HasSubstr("  out of memory; retried\n"));
  EXPECT_THAT(ran.out, HasSubstr("attempt 2: succeeded\n"));
  EXPECT_THAT(ran.out, HasSubstr("  log /nonexistent/run/attempt-2.log\n"));
}

TEST(ShowCommandTest, JsonPrintsTheDaemonsJob) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/12", 200, TwoJobs()[0]);
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdShow(client, "12", true); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out), TwoJobs()[0]);
}

TEST(ShowCommandTest, NoSuchJobExitsThree) {
  FakeDaemon daemon;
  daemon.OnError("GET", "/v1/jobs/99", Status::NotFound("no job 99"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdShow(client, "99", false); });
  EXPECT_EQ(ran.rc, 3);
  EXPECT_EQ(ran.err, "trainq: no job 99\n");
  EXPECT_THAT(ran.out, IsEmpty());
}

TEST(ShowCommandTest, AnotherUsersJobExitsFour) {
  FakeDaemon daemon;
  daemon.OnError("GET", "/v1/jobs/7", Status::Permission("job 7 is bob's"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdShow(client, "7", false); });
  EXPECT_EQ(ran.rc, 4);
  EXPECT_EQ(ran.err, "trainq: job 7 is bob's\n");
}

TEST(ShowCommandTest, AWordThatIsNoIdExitsTwoUnsent) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdShow(client, "abc", false); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("job id: 'abc' is not a job id"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

json Explained() {
  return {{"job", 13},
          {"state", "queued"},
          {"waiting", true},
          {"reason", "waiting for GPUs: none has 20.0 GiB free"},
          {"position", 2},
          {"ahead", 1},
          {"fair_share", {{"user", "ada"}, {"gpu_hours", 1.5}, {"rank", 1}, {"users_waiting", 2}}},
          {"gpus",
           {{{"node", "gpu1"},
             {"index", 0},
             {"memory_usable", 1ull << 30},
             {"memory_total", 80ull << 30},
             {"jobs", {12}},
             {"fits", false}}}},
          {"holds", json::array()}};
}

TEST(ExplainCommandTest, SaysWhyAndWhereTheJobWaits) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/13/explain", 200, Explained());
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdExplain(client, "13", false); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_THAT(ran.out, StartsWith("job 13: queued\nreason: waiting for GPUs: none has 20.0 GiB "
                                  "free\nposition: 2 in line (1 ahead)\n"));
  EXPECT_THAT(ran.out, HasSubstr("fair share: user ada holds 1.50 decayed GPU-hours; rank 1 of 2"));
  EXPECT_THAT(ran.out, HasSubstr("held GPUs: none\n"));
  std::vector<std::string> lines = Lines(ran.out);
  auto gpu = std::find(lines.begin(), lines.end(), "GPUs:");
  ASSERT_NE(gpu, lines.end());
  ASSERT_LT(gpu + 2, lines.end());
  EXPECT_EQ(Cells(gpu[1]),
            (std::vector<std::string>{"GPU", "USABLE", "TOTAL", "JOBS", "FITS", "NOTE"}));
  std::vector<std::string> row = Cells(gpu[2]);
  ASSERT_EQ(row.size(), 6u);
  EXPECT_EQ(row[0], "0");
  EXPECT_EQ(row[3], "12");
  EXPECT_EQ(row[4], "no");
}

TEST(ExplainCommandTest, JsonPrintsTheDaemonsAnswer) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/13/explain", 200, Explained());
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdExplain(client, "13", true); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out), Explained());
}

TEST(ExplainCommandTest, AWaitingReplyWithoutHoldsNamesTheField) {
  json doc = Explained();
  doc.erase("holds");
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/13/explain", 200, doc);
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdExplain(client, "13", false); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_THAT(ran.err, HasSubstr("field 'holds'"));
  EXPECT_THAT(ran.out, IsEmpty());
}

TEST(LogsCommandTest, AJobThatHasNotStartedHasNoLogYet) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/13", 200, JobJson(13, "eval", "queued"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdLogs(client, "13", false, 0); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_EQ(ran.err, "trainq: job 13 has not started yet: waiting for GPUs\n");
  EXPECT_THAT(ran.out, IsEmpty());
}

TEST(LogsCommandTest, AJobCancelledBeforeItStartedNeverWillHaveOne) {
  json job = JobJson(13, "eval", "cancelled");
  job["reason"] = "cancelled by ada";
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/13", 200, job);
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdLogs(client, "13", true, 0); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_EQ(ran.err, "trainq: job 13 never started (cancelled): cancelled by ada\n");
}

TEST(LogsCommandTest, AnAttemptThatDoesNotExistExitsThree) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/12", 200, TwoJobs()[0]);
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdLogs(client, "12", false, 5); });
  EXPECT_EQ(ran.rc, 3);
  EXPECT_EQ(ran.err, "trainq: job 12 has no attempt 5\n");
}

TEST(LogsCommandTest, PrintsTheLatestAttemptsLogThroughTheDaemon) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/12", 200, TwoJobs()[0])
      .On("GET", "/v1/jobs/12/log?attempt=2&size=1", 200, {{"size", 12}, {"attempt", 2}})
      .OnBytes("GET", "/v1/jobs/12/log?attempt=2&offset=0&length=12", "epoch 1\ndone\n");
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdLogs(client, "12", false, 0); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(ran.out, "epoch 1\ndone\n");
}

TEST(LogsCommandTest, JsonHoldsTheTailOfTheLog) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/12", 200, TwoJobs()[0])
      .On("GET", "/v1/jobs/12/log?attempt=1&size=1", 200, {{"size", 12}})
      .OnBytes("GET", "/v1/jobs/12/log?attempt=1&offset=0&length=8388608", "a\nb\nCUDA OOM\n");
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdLogs(client, "12", false, 1, 1, true); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out),
            json({{"job", 12}, {"attempt", 1}, {"active", false}, {"text", "CUDA OOM\n"}}));
}

TEST(LogsCommandTest, ALogTheCallerMayNotReadExitsFour) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/jobs/12", 200, TwoJobs()[0])
      .OnError("GET", "/v1/jobs/12/log?attempt=2&size=1",
               Status::Permission("only ada or an admin may read job 12's log"));
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdLogs(client, "12", false, 0); });
  EXPECT_EQ(ran.rc, 4);
  EXPECT_EQ(ran.err, "trainq: only ada or an admin may read job 12's log\n");
  EXPECT_THAT(ran.out, IsEmpty());
}

json Accounted() {
  return {{"jobs",
           {{{"id", 12},
             {"user", "ada"},
             {"name", "train"},
             {"state", "succeeded"},
             {"submitted_at", 1767348000000},
             {"wait_ms", 5000},
             {"elapsed_ms", 3600000},
             {"gpus", 2},
             {"gpu_hours", 2.0},
             {"gpu_hours_used", 1.5},
             {"utilization", 0.75},
             {"peak_bytes_per_gpu", 3ull << 30},
             {"attempts", 1},
             {"end", "exit code 0"}}}},
          {"users",
           {{{"user", "ada"},
             {"jobs", 1},
             {"succeeded", 1},
             {"failed", 0},
             {"cancelled", 0},
             {"running", 0},
             {"gpu_hours", 2.0},
             {"gpu_hours_used", 1.5},
             {"elapsed_ms", 3600000}}}}};
}

TEST(AcctCommandTest, PrintsEachJobAndEachUsersTotals) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/acct?all=1", 200, Accounted());
  Client client = daemon.MakeClient();
  AcctArgs a;
  a.all_users = true;
  testing::Ran ran = Capture([&] { return CmdAcct(client, a); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  std::vector<std::string> lines = Lines(ran.out);
  ASSERT_EQ(lines.size(), 5u) << ran.out;
  EXPECT_EQ(Cells(lines[0]),
            (std::vector<std::string>{"ID", "USER", "NAME", "STATE", "SUBMITTED", "WAIT", "ELAPSED",
                                      "GPUS", "GPU-HOURS", "USED", "PEAK/GPU", "ATTEMPTS", "END"}));
  std::vector<std::string> job = Cells(lines[1]);
  ASSERT_EQ(job.size(), 13u) << lines[1];
  EXPECT_EQ(job[0], "12");
  EXPECT_EQ(job[4], "2026-01-02 10:00:00");
  EXPECT_EQ(job[5], "5s");
  EXPECT_EQ(job[6], "1h00m");
  EXPECT_EQ(job[8], "2.00");
  EXPECT_EQ(job[9], "1.50 (75%)");
  EXPECT_EQ(job[12], "exit code 0");
  EXPECT_EQ(lines[2], "");
  EXPECT_EQ(Cells(lines[3])[0], "USER");
  EXPECT_EQ(Cells(lines[4]),
            (std::vector<std::string>{"ada", "1", "1", "0", "0", "0", "2.00", "1.50", "1h00m"}));
}

TEST(AcctCommandTest, JsonPrintsTheDaemonsAnswer) {
  FakeDaemon daemon;
  daemon.On("GET", "/v1/acct?user=bob", 200, Accounted());
  Client client = daemon.MakeClient();
  AcctArgs a;
  a.user = "bob";
  a.json = true;
  testing::Ran ran = Capture([&] { return CmdAcct(client, a); });
  EXPECT_EQ(ran.rc, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out), Accounted());
}

TEST(AcctCommandTest, UserAndAllUsersTogetherAreRefused) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  AcctArgs a;
  a.user = "bob";
  a.all_users = true;
  testing::Ran ran = Capture([&] { return CmdAcct(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_EQ(ran.err, "trainq: --user and --all-users: give one of them\n");
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

TEST(AcctCommandTest, ABadSinceNamesTheOption) {
  FakeDaemon daemon;
  Client client = daemon.MakeClient();
  AcctArgs a;
  a.since = "a week";
  testing::Ran ran = Capture([&] { return CmdAcct(client, a); });
  EXPECT_EQ(ran.rc, 2);
  EXPECT_THAT(ran.err, HasSubstr("--since"));
  EXPECT_THAT(daemon.requests(), IsEmpty());
}

// A daemon of another version: a field of another type is reported, naming it, as every
// other reply's is (src/cli/reply.h), not thrown out of the command.
TEST(AcctCommandTest, AFieldOfAnotherTypeNamesIt) {
  json doc = Accounted();
  doc["jobs"][0]["gpus"] = "2";
  FakeDaemon daemon;
  daemon.On("GET", "/v1/acct", 200, doc);
  Client client = daemon.MakeClient();
  testing::Ran ran = Capture([&] { return CmdAcct(client, AcctArgs{}); });
  EXPECT_EQ(ran.rc, 1);
  EXPECT_THAT(ran.err, HasSubstr("'jobs[0].gpus'"));
  EXPECT_THAT(ran.out, Not(HasSubstr("ada")));
}

}  // namespace
}  // namespace trainq
