// The Store conformance tests (see store_conformance.h) for dependencies, the time limit
// and MASTER_PORTs: how Submit stores a job with --after/--after-any, the blocked
// transitions as compare-and-set, finding a job's dependents.
#include <gmock/gmock.h>

#include "src/store/store_conformance.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_P(StoreConformance, DependenciesAndTimeLimitRoundTrip) {
  JobId a = SubmitOne();
  JobId b = SubmitOne();
  JobSpec spec = After({a, b}, {b});
  spec.time_limit_ms = 9'000'000;
  Job job = Fetch(SubmitOne(spec));
  EXPECT_EQ(job.spec.after, (std::vector<JobId>{a, b}));
  EXPECT_EQ(job.spec.after_any, (std::vector<JobId>{b}));
  EXPECT_EQ(job.spec.time_limit_ms, 9'000'000);
  Job plain = Fetch(a);
  EXPECT_TRUE(plain.spec.after.empty());
  EXPECT_EQ(plain.spec.time_limit_ms, 0);
}

TEST_P(StoreConformance, HostLimitsRoundTrip) {
  JobSpec spec = Spec("limited");
  spec.mem_limit_bytes = (4ull << 30) + 1;
  spec.max_procs = 20;
  Job job = Fetch(SubmitOne(spec));
  EXPECT_EQ(job.spec.mem_limit_bytes, (4ull << 30) + 1);
  EXPECT_EQ(job.spec.max_procs, 20);
  Job plain = Fetch(SubmitOne());
  EXPECT_EQ(plain.spec.mem_limit_bytes, 0u);
  EXPECT_EQ(plain.spec.max_procs, 0);
}

TEST_P(StoreConformance, JobWithOpenDependenciesIsStoredBlockedWithTheReason) {
  JobId queued = SubmitOne();
  JobId running = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(running, 0)));
  Job job = Fetch(SubmitOne(After({running}, {queued})));
  EXPECT_EQ(job.state, JobState::kBlocked);
  EXPECT_EQ(job.reason, "waiting for job " + std::to_string(running) + " (running), " +
                            std::to_string(queued) + " (queued)");
}

TEST_P(StoreConformance, DependenciesDoneAtSubmitResolveAtOnce) {
  JobId ok = EndedJob(JobState::kSucceeded);
  JobId failed = EndedJob(JobState::kFailed);
  JobId cancelled = EndedJob(JobState::kCancelled);
  EXPECT_EQ(Fetch(SubmitOne(After({ok}))).state, JobState::kQueued);
  EXPECT_EQ(Fetch(SubmitOne(After({}, {failed, cancelled}))).state, JobState::kQueued);
  Job doomed = Fetch(SubmitOne(After({ok, failed})));
  EXPECT_EQ(doomed.state, JobState::kCancelled);
  EXPECT_EQ(doomed.reason, "dependency " + std::to_string(failed) + " failed");
  Job doomed2 = Fetch(SubmitOne(After({cancelled})));
  EXPECT_EQ(doomed2.state, JobState::kCancelled);
  EXPECT_THAT(doomed2.reason, HasSubstr("was cancelled"));
}

TEST_P(StoreConformance, UnknownDependencyRefusesTheWholeBatchNamingFieldAndId) {
  JobId a = SubmitOne();
  std::vector<JobSpec> batch = {Spec("fine"), After({a}), After({}, {a + 100})};
  Result<std::vector<JobId>> ids = store().Submit(batch, kT0);
  ASSERT_TRUE(HasCode(ids, Code::kInvalid));
  EXPECT_THAT(ids.status().message(),
              HasSubstr("jobs[2]: after_any: no job " + std::to_string(a + 100)));
  ListQuery all;
  Result<std::vector<Job>> stored = store().List(all);
  ASSERT_TRUE(IsOk(stored));
  EXPECT_EQ(stored->size(), 1u) << "nothing of the refused batch is stored";
  Result<std::vector<JobId>> one = store().Submit(std::vector<JobSpec>{After({a + 50})}, kT0);
  ASSERT_TRUE(HasCode(one, Code::kInvalid));
  EXPECT_THAT(one.status().message(), HasSubstr("after: no job " + std::to_string(a + 50)));
  // The next id is not burnt in a way that makes the refused ones exist later.
  EXPECT_TRUE(IsOk(store().Get(a)));
}

TEST_P(StoreConformance, DependentsAreTheBlockedJobsNamingTheId) {
  JobId a = SubmitOne();
  JobId b = SubmitOne();
  JobId on_a = SubmitOne(After({a}));
  JobId on_both = SubmitOne(After({b}, {a}));
  JobId any_b = SubmitOne(After({}, {b}));
  JobId cancelled_on_a = SubmitOne(After({a}));
  ASSERT_TRUE(IsOk(store().CancelWaiting(cancelled_on_a, "cancelled by alice")));
  EXPECT_THAT(DependentIds(a), ElementsAre(on_a, on_both));
  EXPECT_THAT(DependentIds(b), ElementsAre(on_both, any_b));
  EXPECT_TRUE(DependentIds(on_a).empty());
  EXPECT_TRUE(DependentIds(12345).empty());
  Result<std::vector<Job>> full = store().Dependents(a);
  ASSERT_TRUE(IsOk(full));
  ASSERT_EQ(full->size(), 2u);
  EXPECT_EQ((*full)[0].spec.after, (std::vector<JobId>{a}));
  EXPECT_EQ((*full)[0].state, JobState::kBlocked);
}

TEST_P(StoreConformance, BlockedMovesToQueuedOrCancelledOnceAsCompareAndSet) {
  JobId a = SubmitOne();
  JobId b1 = SubmitOne(After({a}));
  JobId b2 = SubmitOne(After({a}));
  ASSERT_TRUE(IsOk(store().MoveWaiting(b1, JobState::kBlocked, JobState::kQueued, "", kT0)));
  Job queued = Fetch(b1);
  EXPECT_EQ(queued.state, JobState::kQueued);
  EXPECT_EQ(queued.reason, "");
  // The second of two resolvers loses: the job is no longer blocked.
  EXPECT_TRUE(
      HasCode(store().MoveWaiting(b1, JobState::kBlocked, JobState::kCancelled, "late", kT0),
              Code::kConflict));
  EXPECT_EQ(Fetch(b1).state, JobState::kQueued);

  ASSERT_TRUE(IsOk(store().MoveWaiting(b2, JobState::kBlocked, JobState::kCancelled,
                                       "dependency 1 failed", kT0)));
  Job cancelled = Fetch(b2);
  EXPECT_EQ(cancelled.state, JobState::kCancelled);
  EXPECT_EQ(cancelled.reason, "dependency 1 failed");
  EXPECT_TRUE(HasCode(store().MoveWaiting(b2, JobState::kBlocked, JobState::kQueued, "", kT0),
                      Code::kConflict));
  EXPECT_TRUE(HasCode(store().MoveWaiting(999999, JobState::kBlocked, JobState::kQueued, "", kT0),
                      Code::kNotFound));
}

TEST_P(StoreConformance, MoveWaitingRefusesMovesThatAreNotDependencyResolution) {
  JobId a = SubmitOne();
  JobId b = SubmitOne(After({a}));
  EXPECT_TRUE(HasCode(store().MoveWaiting(b, JobState::kBlocked, JobState::kRunning, "", kT0),
                      Code::kInvalid));
  EXPECT_TRUE(HasCode(store().MoveWaiting(a, JobState::kQueued, JobState::kCancelled, "", kT0),
                      Code::kInvalid));
  EXPECT_TRUE(HasCode(store().MoveWaiting(a, JobState::kSucceeded, JobState::kQueued, "", kT0),
                      Code::kInvalid));
  EXPECT_EQ(Fetch(b).state, JobState::kBlocked);
  EXPECT_EQ(Fetch(a).state, JobState::kQueued);
}

TEST_P(StoreConformance, QueuedJobCanBeBlockedAgainButNotARunningOne) {
  JobId a = SubmitOne();
  JobId b = SubmitOne();
  ASSERT_TRUE(IsOk(store().MoveWaiting(b, JobState::kQueued, JobState::kBlocked,
                                       "waiting for job 1 (queued)", kT0)));
  EXPECT_EQ(Fetch(b).state, JobState::kBlocked);
  ASSERT_TRUE(IsOk(StartRunning(a, 0)));
  EXPECT_TRUE(HasCode(store().MoveWaiting(a, JobState::kQueued, JobState::kBlocked, "x", kT0),
                      Code::kConflict));
  EXPECT_EQ(Fetch(a).state, JobState::kRunning);
}

TEST_P(StoreConformance, BlockedJobsCannotStartButCanBeCancelledAndHaveReasons) {
  JobId a = SubmitOne();
  JobId b = SubmitOne(After({a}));
  EXPECT_TRUE(
      HasCode(store().StartAttempt(b, 0, PlacementOn("node-a", {0}), kT0), Code::kConflict));
  std::vector<std::pair<JobId, std::string>> reasons = {{b, "waiting for job 1 (running)"}};
  ASSERT_TRUE(IsOk(store().SetReasons(reasons)));
  EXPECT_EQ(Fetch(b).reason, "waiting for job 1 (running)");
  ASSERT_TRUE(IsOk(store().CancelWaiting(b, "cancelled by alice")));
  EXPECT_EQ(Fetch(b).state, JobState::kCancelled);
  EXPECT_TRUE(DependentIds(a).empty());
}

TEST_P(StoreConformance, AttemptKeepsItsMasterPort) {
  JobId id = SubmitOne();
  Placement p = PlacementOn("node-a", {0, 1});
  p.master_port = 29503;
  ASSERT_TRUE(IsOk(store().StartAttempt(id, 0, p, kT0)));
  ASSERT_TRUE(IsOk(store().MarkRunning(id, 1, 77, 88, kT0)));
  ListQuery active;
  active.states = {JobState::kRunning};
  active.with_attempts = true;
  Result<std::vector<Job>> jobs = store().List(active);
  ASSERT_TRUE(IsOk(jobs));
  ASSERT_EQ(jobs->size(), 1u);
  ASSERT_NE((*jobs)[0].current(), nullptr);
  EXPECT_EQ((*jobs)[0].current()->master_port, 29503);
  JobId single = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(single, 0)));
  EXPECT_EQ(Fetch(single).current()->master_port, 0);
}

// `trainq update`, `hold`, `release`: a waiting job takes what may change; a running job its
// name and priority only; an ended one nothing.
TEST_P(StoreConformance, UpdateJobChangesAWaitingJobsAsksAndARunningJobsNameAlone) {
  JobId dep = SubmitOne();
  JobSpec spec = Spec("train");
  spec.mem_bytes = 20ull << 30;
  JobId id = SubmitOne(spec);
  spec.name = "renamed";
  spec.gpus = 2;
  spec.mem_bytes.reset();
  spec.mem_percent = 40;
  spec.cpus = 3;
  spec.priority = 9;
  spec.time_limit_ms = 3'600'000;
  spec.after = {dep};
  spec.gpu_type = "h100";
  spec.constraints = {"ib", "x|y"};
  spec.command = {"not", "changed"};  // never what an update writes
  ASSERT_TRUE(IsOk(store().UpdateJob(id, spec, kHeldNotBefore, "held", false)));
  Result<Job> got = store().Get(id);
  ASSERT_TRUE(IsOk(got));
  EXPECT_EQ(got->state, JobState::kQueued);
  EXPECT_EQ(got->spec.name, "renamed");
  EXPECT_EQ(got->spec.gpus, 2);
  EXPECT_FALSE(got->spec.mem_bytes.has_value());
  EXPECT_EQ(got->spec.mem_percent, 40);
  EXPECT_EQ(got->spec.cpus, 3);
  EXPECT_EQ(got->spec.priority, 9);
  EXPECT_EQ(got->spec.time_limit_ms, 3'600'000);
  EXPECT_THAT(got->spec.after, ElementsAre(dep));
  EXPECT_EQ(got->spec.gpu_type, "h100");
  EXPECT_THAT(got->spec.constraints, ElementsAre("ib", "x|y"));
  EXPECT_EQ(got->spec.command, Spec("train").command);
  EXPECT_EQ(got->not_before, kHeldNotBefore);
  EXPECT_EQ(got->reason, "held");
  // Released: not_before 0 again.
  ASSERT_TRUE(IsOk(store().UpdateJob(id, got->spec, 0, "", false)));
  EXPECT_EQ(store().Get(id)->not_before, 0);
  // Running: only the name and priority change; a waiting job's update is refused.
  ASSERT_TRUE(IsOk(StartRunning(dep, 0)));
  JobSpec running = store().Get(dep)->spec;
  running.name = "still-running";
  running.priority = 5;
  running.gpus = 7;
  EXPECT_TRUE(HasCode(store().UpdateJob(dep, running, 0, "", false), Code::kConflict));
  ASSERT_TRUE(IsOk(store().UpdateJob(dep, running, 0, "", true)));
  Result<Job> now = store().Get(dep);
  EXPECT_EQ(now->spec.name, "still-running");
  EXPECT_EQ(now->spec.priority, 5);
  EXPECT_EQ(now->spec.gpus, 1);
  EXPECT_EQ(now->state, JobState::kRunning);
  ASSERT_TRUE(IsOk(
      store().FinishAttempt(dep, 1, Ended(JobState::kSucceeded, JobState::kSucceeded, "done"))));
  EXPECT_TRUE(HasCode(store().UpdateJob(dep, running, 0, "", true), Code::kConflict));
  EXPECT_TRUE(HasCode(store().UpdateJob(9999, spec, 0, "", false), Code::kNotFound));
}

}  // namespace
}  // namespace trainq
