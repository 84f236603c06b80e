// Preemption against the fakes (docs/scheduling.md, "Preemption"): which running jobs a
// waiting job of higher priority stops, that none younger than min_runtime is, that a job
// preempted twice in a row is spared, and that the GPUs its victims free are held for the
// preemptor through their warning and grace.
#include <csignal>

#include <fmt/format.h>

#include "src/daemon/daemon_test_fixture.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

using namespace daemon_test;  // NOLINT: the fixture's helpers
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kMinute = 60 * 1000;

class PreemptTest : public DaemonTest {
 protected:
  bool Asked(JobId id, int attempt) { return ReadShimControl(RunDir(id, attempt)).ok(); }
};

// The youngest attempt goes first (least work lost); one job frees exactly what is needed, so
// the other is left alone; the victim's warning and reason name the preemptor.
TEST_F(PreemptTest, TheYoungestPreemptibleJobThatFreesEnoughIsStoppedWithItsWarning) {
  SetGpus({Gpu(0, 80), Gpu(1, 80)});
  Start();
  JobId old_one = Submit({{"gpus", 1}, {"preemptible", true}});
  clock_.Set(kT0 + 5 * kMinute);
  JobId young =
      Submit({{"gpus", 1}, {"preemptible", true}, {"requeue", true}, {"signal", "USR1@40"}});
  clock_.Set(kT0 + 30 * kMinute);
  JobId urgent = Submit({{"gpus", 1}, {"priority", 100}});
  EXPECT_FALSE(Asked(old_one, 1));
  ASSERT_TRUE(Asked(young, 1));
  ShimControl control = *ReadShimControl(RunDir(young, 1));
  EXPECT_EQ(control.stop, "preempted");
  EXPECT_EQ(control.reason, fmt::format("preempted by job {} (priority 100)", urgent));
  EXPECT_EQ(control.stop_in_ms, 40'000);  // its --signal lead
  EXPECT_EQ(shims_.Find(RunDir(young, 1))->signals, std::vector<int>{SIGUSR1});
  EXPECT_THAT(Reason(urgent), StartsWith(fmt::format("will preempt job {} ({}, priority 0) in ",
                                                     young, Get(young).spec.user)));
  // The victim ends as its shim carries the stop out: requeued (--requeue), and the
  // preemptor starts on the GPU it freed.
  EndStopped(young, 1);
  Job victim = Get(young);
  EXPECT_EQ(victim.state, JobState::kQueued);
  EXPECT_EQ(victim.attempts[0].end_reason, control.reason);
  EXPECT_EQ(Get(urgent).state, JobState::kRunning);
  EXPECT_EQ(Get(urgent).attempts[0].gpu_indices, victim.attempts[0].gpu_indices);
}

TEST_F(PreemptTest, NothingIsPreemptedWithoutTheGapOrPreemptibleJobsAndNoneYoungerThanMinRuntime) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId running = Submit({{"gpus", 1}, {"preemptible", true}, {"priority", 5}});
  clock_.Set(kT0 + 3 * kMinute);
  JobId equal = Submit({{"gpus", 1}, {"priority", 5}});  // gap 1: equal priority waits
  JobId urgent = Submit({{"gpus", 1}, {"priority", 9}});
  EXPECT_FALSE(Asked(running, 1));  // 3 minutes in: younger than min_runtime (10m)
  HttpResponse r = Call("GET", "/v1/jobs/" + std::to_string(urgent) + "/explain");
  json doc = json::parse(r.body);
  ASSERT_EQ(doc["preemption"].size(), 1u) << r.body;
  EXPECT_EQ(doc["preemption"][0]["eligible"], false);
  EXPECT_THAT(doc["preemption"][0]["why"].get<std::string>(), HasSubstr("min_runtime"));
  // Time alone makes it old enough: the daemon wakes for that and preempts then.
  WakeUp();
  EXPECT_EQ(clock_.Now(), kT0 + 10 * kMinute);
  ASSERT_TRUE(Asked(running, 1));
  EXPECT_THAT(ReadShimControl(RunDir(running, 1))->reason,
              HasSubstr(fmt::format("preempted by job {}", urgent)));
  EndStopped(running, 1);
  EXPECT_EQ(Get(running).state, JobState::kCancelled);  // no --requeue
  EXPECT_THAT(Get(running).reason, HasSubstr("not queued again (submit with --requeue"));
  EXPECT_EQ(Get(urgent).state, JobState::kRunning);
  EXPECT_EQ(Get(equal).state, JobState::kQueued);
  // A job not preemptible is never a victim, whatever waits.
  clock_.Set(kT0 + 60 * kMinute);
  JobId top = Submit({{"gpus", 1}, {"priority", 1000}});
  EXPECT_FALSE(Asked(urgent, 1));
  EXPECT_EQ(Get(top).state, JobState::kQueued);
}

// The GPUs the victims free are the preemptor's: a smaller job waiting behind does not take
// the first one freed while the other victim still runs its warning.
TEST_F(PreemptTest, FreedGpusAreHeldForThePreemptorThroughItsVictimsLead) {
  SetGpus({Gpu(0, 80), Gpu(1, 80)});
  Start();
  JobId slow = Submit({{"gpus", 1}, {"preemptible", true}, {"signal", "USR1@60"}});
  JobId quick = Submit({{"gpus", 1}, {"preemptible", true}});
  clock_.Set(kT0 + 20 * kMinute);
  JobId big = Submit({{"gpus", 2}, {"priority", 100}});
  ASSERT_TRUE(Asked(slow, 1) && Asked(quick, 1));
  EXPECT_EQ(ReadShimControl(RunDir(slow, 1))->stop_in_ms, 60'000);
  EXPECT_EQ(ReadShimControl(RunDir(quick, 1))->stop_in_ms, 0);
  JobId small = Submit({{"gpus", 1}});
  EndStopped(quick, 1);  // GPU free, the other victim saves for a minute more
  EXPECT_EQ(Get(small).state, JobState::kQueued);
  EXPECT_THAT(Reason(small), HasSubstr(fmt::format("held for job {}", big)));
  EXPECT_EQ(Get(big).state, JobState::kQueued);
  EXPECT_THAT(Reason(big), HasSubstr("will preempt job"));
  clock_.Set(kT0 + 21 * kMinute);
  EndStopped(slow, 1);
  EXPECT_EQ(Get(big).state, JobState::kRunning);
  EXPECT_EQ(Get(small).state, JobState::kQueued);
}

// A job preempted twice in a row is spared for preempt_spare; then it may be again.
TEST_F(PreemptTest, AJobPreemptedTwiceInARowIsSparedForAWhile) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId victim = Submit({{"gpus", 1}, {"preemptible", true}, {"requeue", true}});
  UnixMs t = kT0;
  for (int round = 1; round <= 2; ++round) {
    t += 15 * kMinute;
    clock_.Set(t);
    JobId urgent = Submit({{"gpus", 1}, {"priority", 100}});
    ASSERT_TRUE(Asked(victim, round)) << round;
    EndStopped(victim, round);
    ASSERT_EQ(Get(urgent).state, JobState::kRunning);
    Finish(urgent, 1);
    ASSERT_EQ(Get(victim).state, JobState::kRunning) << round;
  }
  t += 15 * kMinute;
  clock_.Set(t);
  JobId third = Submit({{"gpus", 1}, {"priority", 100}});
  EXPECT_FALSE(Asked(victim, 3));
  HttpResponse r = Call("GET", "/v1/jobs/" + std::to_string(third) + "/explain");
  EXPECT_THAT(r.body, HasSubstr("preempted 2 times in a row"));
  // preempt_spare (1h) after its last preemption it is a candidate again: the daemon wakes
  // for that moment.
  while (!Asked(victim, 3) && clock_.Now() < kT0 + 180 * kMinute) WakeUp();
  EXPECT_EQ(clock_.Now(), kT0 + 30 * kMinute + 60 * kMinute);
  EXPECT_TRUE(Asked(victim, 3));
}

// The attained-service order and rule (attained_service, preempt_for_attained_service): a new
// job preempts one that has had the threshold's GPU time, whoever's it is, and not before (the
// daemon wakes when it passes it); the victim, requeued, waits behind a job submitted after
// it that has had less.
TEST_F(PreemptTest, AJobThatHadLessGpuTimePreemptsOneThatHadMoreAndGoesFirst) {
  config_.attained_service_ms = 30 * kMinute;
  config_.preempt_for_attained_service = true;
  SetGpus({Gpu(0, 80)});
  Start();
  JobId served = Submit({{"gpus", 1}, {"preemptible", true}, {"requeue", true}});
  clock_.Set(kT0 + 15 * kMinute);
  JobId fresh = Submit({{"gpus", 1}});
  EXPECT_FALSE(Asked(served, 1));  // 15 of its 30 GPU-minutes
  HttpResponse r = Call("GET", "/v1/jobs/" + std::to_string(fresh) + "/explain");
  EXPECT_THAT(r.body, HasSubstr(fmt::format("attained service: job {} has had 15m", served)));
  WakeUp();
  EXPECT_GE(clock_.Now(), kT0 + 30 * kMinute);
  EXPECT_LE(clock_.Now(), kT0 + 30 * kMinute + 1000);
  ASSERT_TRUE(Asked(served, 1));
  EXPECT_THAT(ReadShimControl(RunDir(served, 1))->reason,
              StartsWith(fmt::format("preempted by job {} (", fresh)));
  EndStopped(served, 1);
  EXPECT_EQ(Get(fresh).state, JobState::kRunning);
  EXPECT_EQ(Get(served).state, JobState::kQueued);
  JobId later = Submit({{"gpus", 1}});
  Finish(fresh, 1);
  EXPECT_EQ(Get(later).state, JobState::kRunning);
  EXPECT_EQ(Get(served).state, JobState::kQueued);
}

}  // namespace
}  // namespace trainq
