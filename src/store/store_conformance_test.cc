// The Store conformance tests (see store_conformance.h): submit, get and transitions.
// Each backend instantiates them; listing, counting and leases are in
// store_conformance_query_test.cc.
#include "src/store/store_conformance.h"

#include <gmock/gmock.h>

#include "src/core/job_fields_test_util.h"
#include "src/core/placement.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;

// --- Submit and Get ---

TEST_P(StoreConformance, SubmitAssignsIncreasingIdsInOrder) {
  std::vector<JobSpec> specs = {Spec("a"), Spec("b"), Spec("c")};
  Result<std::vector<JobId>> first = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(first));
  ASSERT_EQ(first->size(), 3u);
  EXPECT_GT((*first)[0], 0);
  EXPECT_LT((*first)[0], (*first)[1]);
  EXPECT_LT((*first)[1], (*first)[2]);
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(Fetch((*first)[i]).spec.name, specs[i].name);
  }
  JobId later = SubmitOne();
  EXPECT_GT(later, (*first)[2]);
}

TEST_P(StoreConformance, SubmitOfNothingReturnsNoIds) {
  Result<std::vector<JobId>> ids = store().Submit({}, kT0);
  ASSERT_TRUE(IsOk(ids));
  EXPECT_TRUE(ids->empty());
}

TEST_P(StoreConformance, SubmitRoundTripsEveryField) {
  JobSpec spec;
  spec.name = "sweep lr=3e-4";
  spec.command = {"python",          "train.py", "--msg",     "two words",
                  "it's \"quoted\"", "",         "ünïcødé ✓", "a\\b\tc"};
  spec.cwd = "/home/al ice/проект";
  spec.env = {{"PATH", "/usr/bin:/bin"},
              {"OPTS", "a=b=c"},
              {"EMPTY", ""},
              {"UNI", "日本語 ☃"},
              {"OPTS", "later duplicate"}};
  spec.gpus = 4;
  spec.mem_bytes = (uint64_t{1} << 62) + 1;  // beyond double precision
  spec.cpus = 8;
  spec.priority = -3;
  spec.retries = 0;
  spec.user = "alice";
  Job job = Fetch(SubmitOne(spec));
  EXPECT_EQ(job.spec.name, spec.name);
  EXPECT_EQ(job.spec.command, spec.command);
  EXPECT_EQ(job.spec.cwd, spec.cwd);
  EXPECT_EQ(job.spec.env, spec.env);
  EXPECT_EQ(job.spec.gpus, 4);
  EXPECT_EQ(job.spec.mem_bytes, spec.mem_bytes);
  EXPECT_EQ(job.spec.mem_percent, std::nullopt);
  EXPECT_EQ(job.spec.cpus, 8);
  EXPECT_EQ(job.spec.priority, -3);
  EXPECT_EQ(job.spec.retries, 0);
  EXPECT_EQ(job.spec.user, "alice");
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.submitted_at, kT0);
  EXPECT_EQ(job.attempt, 0);
  EXPECT_EQ(job.not_before, 0);
  EXPECT_EQ(job.reason, "");
  EXPECT_TRUE(job.attempts.empty());
}

// Every row of kJobFields (src/core/job_fields.h), each at a value other than its default,
// comes back as it went in: a field added to the table and forgotten by a store fails here.
// A field the store has no place for (its column "") comes back at its default.
TEST_P(StoreConformance, SubmitRoundTripsEveryFieldOfTheTable) {
  ASSERT_NE(GetParam().column, nullptr) << "the backend names no column of kJobFields";
  JobId a = SubmitOne();
  JobId b = SubmitOne();
  JobSpec spec = FullSpec(a, b);
  Job job = Fetch(SubmitOne(spec));
  JobSpec expected = spec;
  const JobSpec defaults;
  ForEachJobField([&](const auto& field) {
    if ((field.info.*GetParam().column).empty()) field.Of(expected) = field.Of(defaults);
  });
  EXPECT_THAT(DifferingFields(job.spec, expected), ::testing::IsEmpty());
  EXPECT_EQ(job.state, JobState::kBlocked);  // it waits on a and b
}

// --hold: stored held in the same write as the job (no pass anywhere can start it first); a
// held job that waits on a dependency keeps its dependency's reason until it is queued.
TEST_P(StoreConformance, AHeldSubmitIsStoredHeld) {
  JobSpec held = Spec("held");
  held.hold = true;
  Job job = Fetch(SubmitOne(held));
  EXPECT_TRUE(job.spec.hold);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.not_before, kHeldNotBefore);
  EXPECT_EQ(HeldBy(job.reason), held.user) << job.reason;
  JobSpec blocked = Spec("blocked");
  blocked.hold = true;
  blocked.after = {job.id};
  Job waiting = Fetch(SubmitOne(blocked));
  EXPECT_EQ(waiting.state, JobState::kBlocked);
  EXPECT_EQ(waiting.not_before, kHeldNotBefore);
  EXPECT_THAT(waiting.reason, ::testing::HasSubstr(std::to_string(job.id)));
  Job plain = Fetch(SubmitOne(Spec("plain")));
  EXPECT_EQ(plain.not_before, 0);
  EXPECT_FALSE(plain.spec.hold);
}

// `trainq update` changes exactly the rows kJobFields lets it change: all of them while the
// job waits, those marked Change::kAlways while it runs, and nothing else.
TEST_P(StoreConformance, UpdateJobChangesExactlyTheTablesChangeableFields) {
  JobId a = SubmitOne();
  JobId b = SubmitOne();
  for (bool running : {false, true}) {
    SCOPED_TRACE(running ? "running" : "waiting");
    JobSpec before = Spec("before");
    JobId id = SubmitOne(before);
    if (running) {
      ASSERT_TRUE(IsOk(StartRunning(id, 0)));
    }
    JobSpec stored = Fetch(id).spec;
    JobSpec asked = FullSpec(a, b);
    ASSERT_TRUE(IsOk(store().UpdateJob(id, asked, 0, "", running)));
    JobSpec got = Fetch(id).spec;
    std::vector<std::string> want;
    ForEachJobField([&](const auto& field) {
      Change c = field.info.change;
      bool changes = running ? c == Change::kAlways : c != Change::kNever;
      if (changes && !(field.Of(stored) == field.Of(asked))) want.emplace_back(field.info.name);
    });
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(DifferingFields(stored, got), want);
  }
}

TEST_P(StoreConformance, SubmitRoundTripsNodeChoiceAndGang) {
  JobSpec gang = Spec("gang");
  gang.nodes_allowed = {"gpu1", "gpu2.lab", "gpu_3"};
  gang.nodes_excluded = {"gpu-9"};
  gang.num_nodes = 2;
  gang.gpu_type = "rtx 4090";
  gang.constraints = {"ib", "a100|h100"};
  JobSpec plain = Spec("plain");
  Job got = Fetch(SubmitOne(gang));
  EXPECT_EQ(got.spec.nodes_allowed, gang.nodes_allowed);
  EXPECT_EQ(got.spec.nodes_excluded, gang.nodes_excluded);
  EXPECT_EQ(got.spec.num_nodes, 2);
  EXPECT_EQ(got.spec.gpu_type, "rtx 4090");
  EXPECT_EQ(got.spec.constraints, gang.constraints);
  Job single = Fetch(SubmitOne(plain));
  EXPECT_TRUE(single.spec.nodes_allowed.empty());
  EXPECT_TRUE(single.spec.nodes_excluded.empty());
  EXPECT_EQ(single.spec.num_nodes, 1);
  EXPECT_EQ(single.spec.gpu_type, "");
  EXPECT_TRUE(single.spec.constraints.empty());
}

TEST_P(StoreConformance, SubmitKeepsMemoryPercentApartFromBytesAndExclusive) {
  JobSpec percent = Spec("percent");
  percent.mem_percent = 37.5;
  JobSpec exclusive = Spec("exclusive");
  JobSpec cpu_only = Spec("cpu");
  cpu_only.gpus = 0;
  cpu_only.command = {};
  cpu_only.env = {};
  Job p = Fetch(SubmitOne(percent));
  EXPECT_EQ(p.spec.mem_percent, 37.5);
  EXPECT_EQ(p.spec.mem_bytes, std::nullopt);
  EXPECT_FALSE(p.spec.exclusive());
  Job e = Fetch(SubmitOne(exclusive));
  EXPECT_EQ(e.spec.mem_bytes, std::nullopt);
  EXPECT_EQ(e.spec.mem_percent, std::nullopt);
  EXPECT_TRUE(e.spec.exclusive());
  Job c = Fetch(SubmitOne(cpu_only));
  EXPECT_EQ(c.spec.gpus, 0);
  EXPECT_TRUE(c.spec.command.empty());
  EXPECT_TRUE(c.spec.env.empty());
}

TEST_P(StoreConformance, SubmitOfManyReturnsIdsInOrder) {
  std::vector<JobSpec> specs;
  for (int i = 0; i < 500; ++i) specs.push_back(Spec("job" + std::to_string(i)));
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  ASSERT_EQ(ids->size(), specs.size());
  for (size_t i = 1; i < ids->size(); ++i) ASSERT_LT((*ids)[i - 1], (*ids)[i]);
  EXPECT_EQ(Fetch(ids->front()).spec.name, "job0");
  EXPECT_EQ(Fetch(ids->back()).spec.name, "job499");
}

TEST_P(StoreConformance, SubmitKeyFindsTheIdsOfItsRequestForItsUserOnly) {
  std::vector<JobSpec> specs = {Spec("a"), Spec("b")};
  for (JobSpec& s : specs) s.submit_key = "key-1";
  ASSERT_TRUE(IsOk(store().Submit(std::span(&specs[0], 1), kT0)));  // an unrelated job first
  JobSpec plain = Spec("plain");
  SubmitOne(plain);
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  Result<std::vector<JobId>> found = store().IdsForSubmitKey("alice", "key-1");
  ASSERT_TRUE(IsOk(found));
  // The first submit carried the key too: every job stored under it, in order.
  ASSERT_EQ(found->size(), 3u);
  EXPECT_EQ((*found)[1], (*ids)[0]);
  EXPECT_EQ((*found)[2], (*ids)[1]);
  Result<std::vector<JobId>> other_user = store().IdsForSubmitKey("bob", "key-1");
  ASSERT_TRUE(IsOk(other_user));
  EXPECT_TRUE(other_user->empty());
  Result<std::vector<JobId>> unknown = store().IdsForSubmitKey("alice", "key-2");
  ASSERT_TRUE(IsOk(unknown));
  EXPECT_TRUE(unknown->empty());
  Result<std::vector<JobId>> empty_key = store().IdsForSubmitKey("alice", "");
  ASSERT_TRUE(IsOk(empty_key));
  EXPECT_TRUE(empty_key->empty());  // jobs without a key are never found by one
}

TEST_P(StoreConformance, UnknownIdIsNotFoundEverywhere) {
  JobId known = SubmitOne();
  JobId unknown = known + 1000;
  EXPECT_TRUE(HasCode(store().Get(unknown), Code::kNotFound));
  EXPECT_TRUE(
      HasCode(store().StartAttempt(unknown, 0, PlacementOn("n", {0}), kT0), Code::kNotFound));
  EXPECT_TRUE(HasCode(store().MarkRunning(unknown, 1, 1, 1, kT0), Code::kNotFound));
  EXPECT_TRUE(
      HasCode(store().FinishAttempt(unknown, 1, Ended(JobState::kFailed, JobState::kFailed, "x")),
              Code::kNotFound));
  EXPECT_TRUE(HasCode(store().RecordPeak(unknown, 1, 1), Code::kNotFound));
  EXPECT_TRUE(HasCode(store().CancelWaiting(unknown, "x"), Code::kNotFound));
  EXPECT_TRUE(HasCode(store().Requeue(unknown, "x", kT0), Code::kNotFound));
}

// --- The job's life ---

TEST_P(StoreConformance, FullLifeQueuedStartingRunningSucceeded) {
  JobId id = SubmitOne();
  Placement placement = PlacementOn("node-b", {3, 1});
  ASSERT_TRUE(IsOk(store().StartAttempt(id, 0, placement, kT0 + 10)));
  Job starting = Fetch(id);
  EXPECT_EQ(starting.state, JobState::kStarting);
  EXPECT_EQ(starting.attempt, 1);
  ASSERT_EQ(starting.attempts.size(), 1u);
  const Attempt& a = starting.attempts[0];
  EXPECT_EQ(a.n, 1);
  EXPECT_EQ(a.state, JobState::kStarting);
  EXPECT_EQ(a.node, "node-b");
  EXPECT_EQ(a.gpu_indices, (std::vector<int>{3, 1}));
  EXPECT_EQ(a.gpu_uuids, (std::vector<std::string>{"GPU-uuid-3", "GPU-uuid-1"}));
  EXPECT_EQ(a.reserved_bytes, placement.reserved_bytes);
  EXPECT_EQ(a.cpus, 2);
  EXPECT_EQ(a.run_dir, placement.run_dir);
  EXPECT_EQ(a.log_path, placement.log_path);
  EXPECT_EQ(a.started_at, kT0 + 10);
  EXPECT_EQ(a.pid, 0);
  EXPECT_EQ(a.ended_at, std::nullopt);

  ASSERT_TRUE(IsOk(store().MarkRunning(id, 1, 4242, 987654321, kT0 + 20)));
  Job running = Fetch(id);
  EXPECT_EQ(running.state, JobState::kRunning);
  ASSERT_NE(running.current(), nullptr);
  EXPECT_EQ(running.current()->state, JobState::kRunning);
  EXPECT_EQ(running.current()->pid, 4242);
  EXPECT_EQ(running.current()->pid_start_ticks, 987654321u);

  AttemptEnd end = Ended(JobState::kSucceeded, JobState::kSucceeded, "exit code 0");
  end.exit_code = 0;
  ASSERT_TRUE(IsOk(store().FinishAttempt(id, 1, end)));
  Job done = Fetch(id);
  EXPECT_EQ(done.state, JobState::kSucceeded);
  EXPECT_EQ(done.reason, "exit code 0");
  EXPECT_EQ(done.attempt, 1);
  ASSERT_EQ(done.attempts.size(), 1u);
  const Attempt& d = done.attempts[0];
  EXPECT_EQ(d.state, JobState::kSucceeded);
  EXPECT_EQ(d.exit_code, 0);
  EXPECT_EQ(d.signal, std::nullopt);
  EXPECT_FALSE(d.oom);
  EXPECT_EQ(d.ended_at, end.ended_at);
  EXPECT_EQ(d.end_reason, "exit code 0");
  EXPECT_EQ(d.pid, 4242);  // kept for the record
}

TEST_P(StoreConformance, FinishRecordsSignalWithoutExitCode) {
  JobId id = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(id, 0)));
  AttemptEnd end = Ended(JobState::kFailed, JobState::kFailed, "killed by signal 9");
  end.signal = 9;
  ASSERT_TRUE(IsOk(store().FinishAttempt(id, 1, end)));
  Job job = Fetch(id);
  EXPECT_EQ(job.state, JobState::kFailed);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].state, JobState::kFailed);
  EXPECT_EQ(job.attempts[0].exit_code, std::nullopt);
  EXPECT_EQ(job.attempts[0].signal, 9);
}

TEST_P(StoreConformance, FinishFromStartingIsAllowed) {
  JobId id = SubmitOne();
  ASSERT_TRUE(IsOk(store().StartAttempt(id, 0, PlacementOn("n", {0}), kT0)));
  AttemptEnd end = Ended(JobState::kFailed, JobState::kFailed, "shim failed to start");
  ASSERT_TRUE(IsOk(store().FinishAttempt(id, 1, end)));
  EXPECT_EQ(Fetch(id).state, JobState::kFailed);
}

// --- Compare-and-set ---

TEST_P(StoreConformance, OnlyOneOfTwoStartsWithTheSameAttemptWins) {
  JobId id = SubmitOne();
  ASSERT_TRUE(IsOk(store().StartAttempt(id, 0, PlacementOn("node-a", {0}), kT0)));
  Status second = store().StartAttempt(id, 0, PlacementOn("node-b", {1}), kT0);
  EXPECT_TRUE(HasCode(second, Code::kConflict));
  EXPECT_THAT(second.message(), HasSubstr("starting"));
  Job job = Fetch(id);
  EXPECT_EQ(job.attempt, 1);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].node, "node-a");
}

TEST_P(StoreConformance, StartWithWrongExpectedAttemptConflicts) {
  JobId id = SubmitOne();
  EXPECT_TRUE(HasCode(store().StartAttempt(id, 1, PlacementOn("n", {0}), kT0), Code::kConflict));
  Job job = Fetch(id);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.attempt, 0);
  EXPECT_TRUE(job.attempts.empty());
}

TEST_P(StoreConformance, StartOfJobThatIsNotQueuedConflicts) {
  JobId cancelled = SubmitOne();
  JobId failed = SubmitOne();
  ASSERT_TRUE(IsOk(store().CancelWaiting(cancelled, "x")));
  ASSERT_TRUE(IsOk(StartRunning(failed, 0)));
  ASSERT_TRUE(IsOk(store().FinishAttempt(
      failed, 1, Ended(JobState::kFailed, JobState::kFailed, "exit code 1"))));
  Status refused = store().StartAttempt(cancelled, 0, PlacementOn("n", {0}), kT0);
  EXPECT_TRUE(HasCode(refused, Code::kConflict));
  EXPECT_THAT(refused.message(), HasSubstr("cancelled"));
  EXPECT_TRUE(
      HasCode(store().StartAttempt(failed, 1, PlacementOn("n", {0}), kT0), Code::kConflict));
  EXPECT_TRUE(Fetch(cancelled).attempts.empty());
  EXPECT_EQ(Fetch(failed).attempts.size(), 1u);
}

// One request cancelling many: the waiting ones are cancelled with their own reasons, and a
// job that runs or does not exist is answered in its place without failing the others.
TEST_P(StoreConformance, CancelWaitingManyAnswersEachJobInItsPlace) {
  JobId queued = SubmitOne();
  JobId running = SubmitOne();
  JobId also_queued = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(running, 0)));
  std::vector<std::pair<JobId, std::string>> cancels = {{queued, "cancelled by alice"},
                                                        {running, "cancelled by alice"},
                                                        {also_queued + 1000, "cancelled by bob"},
                                                        {also_queued, "cancelled by bob"}};
  Result<std::vector<Status>> done = store().CancelWaitingMany(cancels);
  ASSERT_TRUE(IsOk(done));
  ASSERT_EQ(done->size(), 4u);
  EXPECT_TRUE(IsOk((*done)[0]));
  EXPECT_TRUE(HasCode((*done)[1], Code::kConflict));
  EXPECT_TRUE(HasCode((*done)[2], Code::kNotFound));
  EXPECT_TRUE(IsOk((*done)[3]));
  EXPECT_EQ(Fetch(queued).state, JobState::kCancelled);
  EXPECT_EQ(Fetch(queued).reason, "cancelled by alice");
  EXPECT_EQ(Fetch(also_queued).reason, "cancelled by bob");
  EXPECT_EQ(Fetch(running).state, JobState::kRunning);
}

TEST_P(StoreConformance, MarkRunningWithStaleOrRepeatedAttemptConflicts) {
  JobId id = SubmitOne();
  ASSERT_TRUE(IsOk(store().StartAttempt(id, 0, PlacementOn("n", {0}), kT0)));
  EXPECT_TRUE(HasCode(store().MarkRunning(id, 2, 7, 7, kT0), Code::kConflict));
  EXPECT_TRUE(HasCode(store().MarkRunning(id, 0, 7, 7, kT0), Code::kConflict));
  EXPECT_EQ(Fetch(id).state, JobState::kStarting);
  ASSERT_TRUE(IsOk(store().MarkRunning(id, 1, 7, 7, kT0)));
  EXPECT_TRUE(HasCode(store().MarkRunning(id, 1, 8, 8, kT0), Code::kConflict));
  EXPECT_EQ(Fetch(id).current()->pid, 7);
}

TEST_P(StoreConformance, MarkRunningOfQueuedJobConflicts) {
  JobId id = SubmitOne();
  EXPECT_TRUE(HasCode(store().MarkRunning(id, 0, 7, 7, kT0), Code::kConflict));
  EXPECT_EQ(Fetch(id).state, JobState::kQueued);
}

TEST_P(StoreConformance, FinishWithStaleAttemptConflicts) {
  JobId id = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(id, 0)));
  AttemptEnd end = Ended(JobState::kFailed, JobState::kFailed, "exit code 1");
  EXPECT_TRUE(HasCode(store().FinishAttempt(id, 2, end), Code::kConflict));
  EXPECT_TRUE(HasCode(store().FinishAttempt(id, 0, end), Code::kConflict));
  Job job = Fetch(id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.current()->ended_at, std::nullopt);
  ASSERT_TRUE(IsOk(store().FinishAttempt(id, 1, end)));
  Status again = store().FinishAttempt(id, 1, end);
  EXPECT_TRUE(HasCode(again, Code::kConflict));
  EXPECT_THAT(again.message(), HasSubstr("failed"));
}

TEST_P(StoreConformance, FinishOfQueuedJobConflicts) {
  JobId id = SubmitOne();
  AttemptEnd end = Ended(JobState::kFailed, JobState::kFailed, "x");
  EXPECT_TRUE(HasCode(store().FinishAttempt(id, 0, end), Code::kConflict));
  EXPECT_EQ(Fetch(id).state, JobState::kQueued);
}

TEST_P(StoreConformance, CancelWaitingCancelsQueuedButNotRunning) {
  JobId queued = SubmitOne();
  JobId running = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(running, 0)));
  ASSERT_TRUE(IsOk(store().CancelWaiting(queued, "cancelled by alice")));
  Job cancelled = Fetch(queued);
  EXPECT_EQ(cancelled.state, JobState::kCancelled);
  EXPECT_EQ(cancelled.reason, "cancelled by alice");
  Status refused = store().CancelWaiting(running, "cancelled by alice");
  EXPECT_TRUE(HasCode(refused, Code::kConflict));
  EXPECT_THAT(refused.message(), HasSubstr("running"));
  EXPECT_EQ(Fetch(running).state, JobState::kRunning);
  EXPECT_TRUE(HasCode(store().CancelWaiting(queued, "again"), Code::kConflict));
}

// --- Retries ---

TEST_P(StoreConformance, OomRetryQueuesAgainAndNextStartMakesAttemptTwo) {
  JobId id = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(id, 0)));
  AttemptEnd oom = Ended(JobState::kFailed, JobState::kQueued, "CUDA out of memory");
  oom.exit_code = 1;
  oom.oom = true;
  oom.not_before = kT0 + 90'000;
  oom.job_reason = "out of memory (retry 1 of 3 in 30s)";
  ASSERT_TRUE(IsOk(store().FinishAttempt(id, 1, oom)));
  Job queued = Fetch(id);
  EXPECT_EQ(queued.state, JobState::kQueued);
  EXPECT_EQ(queued.attempt, 1);  // the number stays until the next start
  EXPECT_EQ(queued.not_before, kT0 + 90'000);
  EXPECT_EQ(queued.reason, "out of memory (retry 1 of 3 in 30s)");

  EXPECT_TRUE(HasCode(store().StartAttempt(id, 0, PlacementOn("n", {0}), kT0), Code::kConflict));
  ASSERT_TRUE(IsOk(store().StartAttempt(id, 1, PlacementOn("node-c", {2}), kT0 + 100'000)));
  Job retried = Fetch(id);
  EXPECT_EQ(retried.state, JobState::kStarting);
  EXPECT_EQ(retried.attempt, 2);
  ASSERT_EQ(retried.attempts.size(), 2u);
  EXPECT_EQ(retried.attempts[0].n, 1);
  EXPECT_EQ(retried.attempts[0].state, JobState::kFailed);
  EXPECT_TRUE(retried.attempts[0].oom);
  EXPECT_EQ(retried.attempts[0].exit_code, 1);
  EXPECT_EQ(retried.attempts[0].end_reason, "CUDA out of memory");
  EXPECT_EQ(retried.attempts[1].n, 2);
  EXPECT_EQ(retried.attempts[1].state, JobState::kStarting);
  EXPECT_EQ(retried.attempts[1].node, "node-c");
  EXPECT_FALSE(retried.attempts[1].oom);
  // The old attempt is fenced off.
  EXPECT_TRUE(HasCode(store().MarkRunning(id, 1, 9, 9, kT0), Code::kConflict));
}

TEST_P(StoreConformance, RequeueOfDoneJobQueuesItForANewAttempt) {
  JobId id = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(id, 0)));
  AttemptEnd end = Ended(JobState::kFailed, JobState::kFailed, "exit code 1");
  end.not_before = kT0 + 5;
  ASSERT_TRUE(IsOk(store().FinishAttempt(id, 1, end)));
  ASSERT_TRUE(IsOk(store().Requeue(id, "retried by alice", kT0)));
  Job job = Fetch(id);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.reason, "retried by alice");
  EXPECT_EQ(job.not_before, 0);
  EXPECT_EQ(job.attempt, 1);
  ASSERT_TRUE(IsOk(StartRunning(id, 1)));
  EXPECT_EQ(Fetch(id).attempts.size(), 2u);
}

TEST_P(StoreConformance, RequeueOfCancelledWorksButNotOfWaitingOrRunning) {
  JobId cancelled = SubmitOne();
  JobId queued = SubmitOne();
  JobId running = SubmitOne();
  ASSERT_TRUE(IsOk(store().CancelWaiting(cancelled, "x")));
  ASSERT_TRUE(IsOk(StartRunning(running, 0)));
  ASSERT_TRUE(IsOk(store().Requeue(cancelled, "back", kT0)));
  EXPECT_EQ(Fetch(cancelled).state, JobState::kQueued);
  EXPECT_TRUE(HasCode(store().Requeue(queued, "x", kT0), Code::kConflict));
  EXPECT_TRUE(HasCode(store().Requeue(running, "x", kT0), Code::kConflict));
  EXPECT_EQ(Fetch(running).state, JobState::kRunning);
}

TEST_P(StoreConformance, RecordPeakOnlyRaises) {
  JobId id = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(id, 0)));
  ASSERT_TRUE(IsOk(store().RecordPeak(id, 1, 100)));
  ASSERT_TRUE(IsOk(store().RecordPeak(id, 1, 50)));
  EXPECT_EQ(Fetch(id).current()->peak_mem_bytes, 100u);
  uint64_t big = uint64_t{40} << 30;
  ASSERT_TRUE(IsOk(store().RecordPeak(id, 1, big)));
  EXPECT_EQ(Fetch(id).current()->peak_mem_bytes, big);
  EXPECT_TRUE(HasCode(store().RecordPeak(id, 2, 1), Code::kNotFound));
}

TEST_P(StoreConformance, AddUsageAddsUpAndOutlivesTheEnd) {
  JobId id = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(id, 0)));
  EXPECT_TRUE(Fetch(id).current()->usage.empty());
  uint64_t mem = uint64_t{30} << 40;  // 30 GiB for 1,024 s: past 32 bits
  ASSERT_TRUE(IsOk(store().AddUsage(id, 1, {60000, 60000, 30000, mem})));
  ASSERT_TRUE(IsOk(store().AddUsage(id, 1, {1000, 0, 0, 7})));
  ASSERT_TRUE(IsOk(store().FinishAttempt(
      id, 1, Ended(JobState::kSucceeded, JobState::kSucceeded, "exit code 0"))));
  AttemptUsage u = Fetch(id).current()->usage;
  EXPECT_EQ(u.held_gpu_ms, 61000u);
  EXPECT_EQ(u.util_known_ms, 60000u);
  EXPECT_EQ(u.busy_gpu_ms, 30000u);
  EXPECT_EQ(u.mem_byte_s, mem + 7);
  EXPECT_TRUE(HasCode(store().AddUsage(id, 2, {1, 1, 1, 1}), Code::kNotFound));
}

TEST_P(StoreConformance, SetReasonsOnlyTouchesWaitingJobs) {
  JobId queued = SubmitOne();
  JobId running = SubmitOne();
  JobId done = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(running, 0)));
  ASSERT_TRUE(IsOk(StartRunning(done, 0)));
  ASSERT_TRUE(IsOk(store().FinishAttempt(
      done, 1, Ended(JobState::kSucceeded, JobState::kSucceeded, "exit code 0"))));
  std::vector<std::pair<JobId, std::string>> reasons = {
      {queued, "needs 1 GPU with 20 GiB free; best is GPU 3 with 11.2 GiB"},
      {running, "stale"},
      {done, "stale"},
      {done + 1000, "no such job"}};
  ASSERT_TRUE(IsOk(store().SetReasons(reasons)));
  EXPECT_EQ(Fetch(queued).reason, reasons[0].second);
  EXPECT_NE(Fetch(running).reason, "stale");
  EXPECT_EQ(Fetch(done).reason, "exit code 0");
  ASSERT_TRUE(IsOk(store().SetReasons({})));
}

}  // namespace
}  // namespace trainq
