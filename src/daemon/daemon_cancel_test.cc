// Cancels against the fakes: a cancel that reaches an attempt at any step of its start ends
// it cancelled, never failed. A failed end would notify "failed", cancel the job's dependents
// and be picked up by `retry --failed`.
#include "src/daemon/daemon_test_fixture.h"

#include <fmt/format.h>

namespace trainq {
namespace {

using namespace daemon_test;  // NOLINT: the fixture's helpers
using ::testing::StartsWith;

class CancelTest : public DaemonTest {
 protected:
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
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}});
  std::string run = RunDir(id, 1);
  shims_.leftovers[run] = {ProcStat{6001, 1, 6001, 'S', 5}};
  daemon_.reset();
  std::filesystem::remove_all(run);
  Start();
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

}  // namespace
}  // namespace trainq
