// Cancels against the fakes: one request for many jobs is one decision, and a cancel that
// reaches an attempt at any step of its start ends it cancelled, never failed. A failed end would
// notify "failed", cancel the job's dependents and be picked up by `retry --failed`.
#include "src/daemon/daemon_test_fixture.h"

#include <fmt/format.h>

#include "src/core/duration.h"

namespace trainq {
namespace {

using namespace daemon_test;  // NOLINT: the fixture's helpers
using ::testing::StartsWith;

class CancelTest : public DaemonTest {
 protected:
  json CancelMany(const std::vector<JobId>& ids) {
    HttpResponse r = Call("POST", "/v1/jobs/cancel", json{{"ids", ids}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    json doc = json::parse(r.body, nullptr, false);
    return doc.is_object() ? doc["results"] : json::array();
  }
  HttpResponse CancelOne(JobId id) {
    return Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel");
  }
  static ExitRecord CancelledRecord(std::optional<int> signal) {
    ExitRecord rec;
    rec.cancelled = true;
    rec.signal = signal;
    rec.started_at = rec.ended_at = kT0;
    return rec;
  }
};

// The report: 4 GPUs of 40 GiB, three jobs wanting 30 GiB on all four; one runs, two wait.
// `cancel 1-3` as one request stops job 1 and cancels 2 and 3 before any pass can start 3 on
// the GPUs that job 1's stop frees.
TEST_F(CancelTest, ARangeIsOneDecisionAndStartsNothing) {
  SetGpus({Gpu(0, 40), Gpu(1, 40), Gpu(2, 40), Gpu(3, 40)});
  Start();
  std::vector<JobId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Submit({{"gpus", 4}, {"mem", "30GiB"}}));
  ASSERT_EQ(Get(ids[0]).state, JobState::kRunning);
  ASSERT_EQ(Get(ids[2]).state, JobState::kQueued);

  json results = CancelMany(ids);
  ASSERT_EQ(results.size(), 3u) << results.dump();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(results[i]["id"], ids[i]);
    EXPECT_FALSE(results[i].contains("error")) << results[i].dump();
  }
  EXPECT_EQ(results[0]["state"], "running");  // stopping: SIGTERM sent
  EXPECT_EQ(results[0]["message"],
            fmt::format("job {}: stopping its processes (SIGTERM, then SIGKILL after {})", ids[0],
                        FormatDuration(config_.grace_ms)));
  EXPECT_EQ(results[1]["state"], "cancelled");
  EXPECT_EQ(results[2]["state"], "cancelled");
  EXPECT_EQ(shims_.Find(RunDir(ids[0], 1))->signals, std::vector<int>{SIGTERM});

  ASSERT_TRUE(shims_.Exit(RunDir(ids[0], 1), CancelledRecord(SIGTERM)));
  Loop();
  for (JobId id : ids) EXPECT_EQ(Get(id).state, JobState::kCancelled) << "job " << id;
  EXPECT_EQ(shims_.Find(RunDir(ids[2], 1)), nullptr) << "job 3 was started";
  EXPECT_EQ(shims_.alive_count(), 0);
}

// The same jobs cancelled one request at a time, as any API client may: job 1's stop frees
// its GPUs after job 2's cancel made job 3 the head, a pass starts job 3, and the cancel that
// follows kills its new shim before the shim could record anything. The daemon knows it sent
// that stop: cancelled, not "the shim died".
TEST_F(CancelTest, AShimEndedByTheDaemonsOwnStopBeforeItRecordedIsCancelled) {
  SetGpus({Gpu(0, 40), Gpu(1, 40), Gpu(2, 40), Gpu(3, 40)});
  Start();
  std::vector<JobId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Submit({{"gpus", 4}, {"mem", "30GiB"}}));
  ASSERT_EQ(CancelOne(ids[0]).status, 200);
  ASSERT_EQ(CancelOne(ids[1]).status, 200);
  ASSERT_TRUE(shims_.Exit(RunDir(ids[0], 1), CancelledRecord(SIGTERM)));
  Loop();
  ASSERT_EQ(Get(ids[2]).state, JobState::kRunning) << "the pass between requests started it";

  ASSERT_EQ(CancelOne(ids[2]).status, 200);
  ASSERT_TRUE(shims_.Crash(RunDir(ids[2], 1)));  // SIGTERM's default action: no exit.json
  Loop();
  Job job = Get(ids[2]);
  EXPECT_EQ(job.state, JobState::kCancelled);
  EXPECT_THAT(job.reason, StartsWith("cancelled; the job's supervisor (shim) ended without"));
  for (JobId id : ids) EXPECT_EQ(Get(id).state, JobState::kCancelled) << "job " << id;
}

// How a shim may end after the daemon's SIGTERM, at each step of its start.
enum class ShimEnd {
  kRecordBeforeTheCommand,  // the stop was pending when it read its signals: nothing ran
  kRecordAfterStopping,     // the command ran and was stopped
  kDiedWithNothingLeft,     // died of the signal before it blocked it (an older shim)
  kDiedLeavingTheCommand,   // ... after its command started: the daemon stops what is left
};

// A cancel at every step of a start that a request can reach: the attempt recorded `starting`
// (its `running` could not be written) or `running`, crossed with every way its shim ends.
TEST_F(CancelTest, ACancelAtEveryStepOfAStartEndsCancelled) {
  config_.grace_ms = 10'000;
  SetGpus({Gpu(0, 40)});
  Start();
  for (bool running_recorded : {false, true}) {
    for (ShimEnd end : {ShimEnd::kRecordBeforeTheCommand, ShimEnd::kRecordAfterStopping,
                        ShimEnd::kDiedWithNothingLeft, ShimEnd::kDiedLeavingTheCommand}) {
      SCOPED_TRACE(
          fmt::format("running recorded: {}, end {}", running_recorded, static_cast<int>(end)));
      if (!running_recorded) {
        store_->FailNext("MarkRunning", Status::Unavailable("database is locked"));
      }
      JobId id = Submit({{"gpus", 0}});
      std::string run = RunDir(id, 1);
      ASSERT_EQ(Get(id).state, running_recorded ? JobState::kRunning : JobState::kStarting);
      ASSERT_EQ(CancelOne(id).status, 200);
      EXPECT_EQ(shims_.Find(run)->signals, std::vector<int>{SIGTERM});
      switch (end) {
        case ShimEnd::kRecordBeforeTheCommand:
          ASSERT_TRUE(shims_.Exit(run, CancelledRecord(std::nullopt)));
          break;
        case ShimEnd::kRecordAfterStopping:
          ASSERT_TRUE(shims_.Exit(run, CancelledRecord(SIGTERM)));
          break;
        case ShimEnd::kDiedWithNothingLeft:
          ASSERT_TRUE(shims_.Crash(run));
          break;
        case ShimEnd::kDiedLeavingTheCommand:
          shims_.leftovers[run] = {ProcStat{7000 + id, 1, 7000 + id, 'S', 9}};
          ASSERT_TRUE(shims_.Crash(run));
          Loop();
          EXPECT_EQ(shims_.leftover_signals[7000 + id], std::vector<int>{SIGTERM});
          EXPECT_FALSE(IsDone(Get(id).state)) << "ended while its command still ran";
          shims_.leftovers.erase(run);
          daemon_->OnSampleTimer();
          break;
      }
      Loop();
      Job job = Get(id);
      EXPECT_EQ(job.state, JobState::kCancelled) << job.reason;
      ASSERT_EQ(job.attempts.size(), 1u);
      EXPECT_EQ(job.attempts[0].state, JobState::kCancelled);
    }
  }
  EXPECT_EQ(shims_.alive_count(), 0);
}

// Before any step of a start: a waiting job is cancelled where it waits, with no shim.
TEST_F(CancelTest, AWaitingJobIsCancelledWithoutAShim) {
  SetGpus({Gpu(0, 40)});
  Start();
  JobId busy = Submit({{"gpus", 1}});
  JobId waiting = Submit({{"gpus", 1}});
  ASSERT_EQ(Get(waiting).state, JobState::kQueued);
  HttpResponse r = CancelOne(waiting);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Get(waiting).state, JobState::kCancelled);
  EXPECT_EQ(shims_.Find(RunDir(waiting, 1)), nullptr);
  EXPECT_EQ(Get(busy).state, JobState::kRunning);
}

// A dead shim whose processes are being stopped would queue the job again when its run dir
// was missing; a cancel meanwhile keeps it from running again.
TEST_F(CancelTest, ACancelWhileARequeuedAttemptIsStoppedEndsItCancelled) {
  JobId id = RestartWithARunningJobsRunDirGone();
  std::string run = RunDir(id, 1);
  ASSERT_EQ(Get(id).state, JobState::kRunning);  // its processes are being stopped

  HttpResponse r = CancelOne(id);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(shims_.Crash(run));
  shims_.leftovers.erase(run);
  daemon_->OnSampleTimer();
  Loop();
  Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kCancelled) << job.reason;
  EXPECT_EQ(job.attempt, 1);
  EXPECT_EQ(shims_.Find(RunDir(id, 2)), nullptr);
}

// One job of a batch that cannot be cancelled is reported in its place; the others are done.
TEST_F(CancelTest, ABatchReportsEachJobAndRefusesABadListWhole) {
  SetGpus({Gpu(0, 40)});
  Start();
  JobId a = Submit({{"gpus", 1}});
  JobId b = Submit({{"gpus", 1}});
  ASSERT_TRUE(shims_.Exit(RunDir(a, 1), Exited(0)));
  Loop();
  ASSERT_EQ(Get(b).state, JobState::kRunning);
  JobId c = Submit({{"gpus", 1}});

  json results = CancelMany({a, 999, c});
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0]["error"]["code"], "conflict");
  EXPECT_EQ(results[1]["error"]["code"], "not_found");
  EXPECT_EQ(results[2]["state"], "cancelled");

  HttpResponse bad =
      Call("POST", "/v1/jobs/cancel",
           R"({"ids": [)" + std::to_string(b) + R"(, "x", 0, )" + std::to_string(b) + "]}");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr(R"(ids[1]: \"x\" is not a job id)"));
  EXPECT_THAT(bad.body, HasSubstr("ids[2]: 0 is not a job id"));
  EXPECT_THAT(bad.body, HasSubstr(fmt::format("ids[3]: {} is given twice (ids[0])", b)));
  EXPECT_EQ(shims_.Find(RunDir(b, 1))->signals, std::vector<int>{}) << "half done";
  EXPECT_EQ(Call("POST", "/v1/jobs/cancel", R"({"ids": []})").status, 400);
  EXPECT_EQ(Call("POST", "/v1/jobs/cancel", "").status, 400);
}

// The waiting jobs of a batch go to the store in one call, one sync for them all: a store
// that refuses that call refuses each of them, and none is cancelled.
TEST_F(CancelTest, TheWaitingJobsOfABatchAreOneStoreCall) {
  SetGpus({Gpu(0, 40)});
  Start();
  JobId running = Submit({{"gpus", 1}});
  JobId a = Submit({{"gpus", 1}});
  JobId b = Submit({{"gpus", 1}});
  store_->FailNext("CancelWaitingMany", Status::Io("disk I/O error"));
  json results = CancelMany({a, running, b});
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0]["error"]["code"], "io") << results.dump();
  EXPECT_EQ(results[1]["state"], "running");  // stopped through its shim, as ever
  EXPECT_EQ(results[2]["error"]["code"], "io");
  EXPECT_EQ(Get(a).state, JobState::kQueued);
  EXPECT_EQ(Get(b).state, JobState::kQueued);
  EXPECT_EQ(shims_.Find(RunDir(running, 1))->signals, std::vector<int>{SIGTERM});
}

// Retry of many is one decision too: with one GPU, the first retried job starts and the
// others wait, all queued by the one request before the pass that follows it.
TEST_F(CancelTest, ARetryOfManyQueuesThemAllBeforeThePass) {
  SetGpus({Gpu(0, 40)});
  Start();
  std::vector<JobId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Submit({{"gpus", 1}}));
  CancelMany(ids);
  ASSERT_TRUE(shims_.Exit(RunDir(ids[0], 1), CancelledRecord(SIGTERM)));
  Loop();
  HttpResponse r = Call("POST", "/v1/jobs/retry", json{{"ids", ids}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json results = json::parse(r.body)["results"];
  ASSERT_EQ(results.size(), 3u);
  for (const json& item : results) EXPECT_EQ(item["state"], "queued") << item.dump();
  EXPECT_EQ(Get(ids[0]).state, JobState::kRunning);
  EXPECT_EQ(Get(ids[1]).state, JobState::kQueued);
  EXPECT_EQ(Get(ids[2]).state, JobState::kQueued);
}

}  // namespace
}  // namespace trainq
