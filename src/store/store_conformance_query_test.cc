// The Store conformance tests (see store_conformance.h): listing, counting and leases.
#include <gmock/gmock.h>

#include "src/store/store_conformance.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// --- Listing and counting ---

std::vector<JobId> Ids(const std::vector<Job>& jobs) {
  std::vector<JobId> ids;
  for (const Job& job : jobs) ids.push_back(job.id);
  return ids;
}

TEST_P(StoreConformance, ListFiltersByStateInIdOrder) {
  std::vector<JobSpec> specs(5, Spec("j"));
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  const std::vector<JobId>& id = *ids;
  ASSERT_TRUE(IsOk(StartRunning(id[1], 0)));
  ASSERT_TRUE(IsOk(store().StartAttempt(id[3], 0, PlacementOn("n", {1}), kT0)));
  ASSERT_TRUE(IsOk(store().CancelWaiting(id[4], "x", kT0)));

  Result<std::vector<Job>> all = store().List({});
  ASSERT_TRUE(IsOk(all));
  EXPECT_EQ(Ids(*all), id);
  Result<std::vector<Job>> queued = store().List({.states = {JobState::kQueued}});
  ASSERT_TRUE(IsOk(queued));
  EXPECT_THAT(Ids(*queued), ElementsAre(id[0], id[2]));
  Result<std::vector<Job>> active =
      store().List({.states = {JobState::kRunning, JobState::kStarting}});
  ASSERT_TRUE(IsOk(active));
  EXPECT_THAT(Ids(*active), ElementsAre(id[1], id[3]));
  Result<std::vector<Job>> waiting_or_done =
      store().List({.states = {JobState::kCancelled, JobState::kBlocked, JobState::kQueued}});
  ASSERT_TRUE(IsOk(waiting_or_done));
  EXPECT_THAT(Ids(*waiting_or_done), ElementsAre(id[0], id[2], id[4]));
  Result<std::vector<Job>> repeated =
      store().List({.states = {JobState::kQueued, JobState::kQueued}});
  ASSERT_TRUE(IsOk(repeated));
  EXPECT_THAT(Ids(*repeated), ElementsAre(id[0], id[2]));
  Result<std::vector<Job>> none = store().List({.states = {JobState::kSucceeded}});
  ASSERT_TRUE(IsOk(none));
  EXPECT_TRUE(none->empty());
}

TEST_P(StoreConformance, ListPagesWithAfterIdAndLimit) {
  std::vector<JobSpec> specs(5, Spec("j"));
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  std::vector<JobId> seen;
  JobId after = 0;
  int pages = 0;
  for (;;) {
    Result<std::vector<Job>> page = store().List({.states = {}, .after_id = after, .limit = 2});
    ASSERT_TRUE(IsOk(page));
    ASSERT_LE(page->size(), 2u);
    if (page->empty()) break;
    ++pages;
    for (const Job& job : *page) seen.push_back(job.id);
    after = page->back().id;
  }
  EXPECT_EQ(seen, *ids);
  EXPECT_EQ(pages, 3);
  Result<std::vector<Job>> queued_after =
      store().List({.states = {JobState::kQueued}, .after_id = (*ids)[2], .limit = 1});
  ASSERT_TRUE(IsOk(queued_after));
  EXPECT_THAT(Ids(*queued_after), ElementsAre((*ids)[3]));
}

TEST_P(StoreConformance, ListFillsAttemptsOnlyWhenAsked) {
  JobId never = SubmitOne();
  JobId twice = SubmitOne();
  JobId once = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(twice, 0)));
  AttemptEnd oom = Ended(JobState::kFailed, JobState::kQueued, "oom");
  oom.oom = true;
  ASSERT_TRUE(IsOk(store().FinishAttempt(twice, 1, oom)));
  ASSERT_TRUE(IsOk(StartRunning(twice, 1)));
  ASSERT_TRUE(IsOk(StartRunning(once, 0)));

  Result<std::vector<Job>> bare = store().List({});
  ASSERT_TRUE(IsOk(bare));
  ASSERT_EQ(bare->size(), 3u);
  for (const Job& job : *bare) EXPECT_TRUE(job.attempts.empty()) << job.id;

  Result<std::vector<Job>> full = store().List({.states = {}, .with_attempts = true});
  ASSERT_TRUE(IsOk(full));
  ASSERT_EQ(Ids(*full), (std::vector<JobId>{never, twice, once}));
  EXPECT_TRUE((*full)[0].attempts.empty());
  ASSERT_EQ((*full)[1].attempts.size(), 2u);
  EXPECT_EQ((*full)[1].attempts[0].n, 1);
  EXPECT_TRUE((*full)[1].attempts[0].oom);
  EXPECT_EQ((*full)[1].attempts[1].n, 2);
  ASSERT_EQ((*full)[2].attempts.size(), 1u);
  EXPECT_EQ((*full)[2].attempts[0].pid, 1001);

  Result<std::vector<Job>> one =
      store().List({.states = {JobState::kRunning}, .after_id = twice, .with_attempts = true});
  ASSERT_TRUE(IsOk(one));
  ASSERT_EQ(Ids(*one), (std::vector<JobId>{once}));
  EXPECT_EQ((*one)[0].attempts.size(), 1u);
}

TEST_P(StoreConformance, CountByStateCountsEveryState) {
  Result<std::vector<int64_t>> empty = store().CountByState();
  ASSERT_TRUE(IsOk(empty));
  EXPECT_EQ(*empty, std::vector<int64_t>(7, 0));
  std::vector<JobSpec> specs(6, Spec("j"));
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  ASSERT_TRUE(IsOk(StartRunning((*ids)[0], 0)));
  ASSERT_TRUE(IsOk(store().StartAttempt((*ids)[1], 0, PlacementOn("n", {0}), kT0)));
  ASSERT_TRUE(IsOk(StartRunning((*ids)[2], 0)));
  ASSERT_TRUE(IsOk(store().FinishAttempt(
      (*ids)[2], 1, Ended(JobState::kFailed, JobState::kFailed, "exit code 1"))));
  ASSERT_TRUE(IsOk(store().CancelWaiting((*ids)[3], "x", kT0)));
  Result<std::vector<int64_t>> counts = store().CountByState();
  ASSERT_TRUE(IsOk(counts));
  std::vector<int64_t> expected(7, 0);
  expected[static_cast<int>(JobState::kQueued)] = 2;
  expected[static_cast<int>(JobState::kRunning)] = 1;
  expected[static_cast<int>(JobState::kStarting)] = 1;
  expected[static_cast<int>(JobState::kFailed)] = 1;
  expected[static_cast<int>(JobState::kCancelled)] = 1;
  EXPECT_EQ(*counts, expected);
}

// --- Leases ---

TEST_P(StoreConformance, LeaseIsTakenRenewedRefusedAndTakenOverAfterExpiry) {
  Result<Lease> taken = store().AcquireLease("scheduler", "node-a", 10'000, kT0);
  ASSERT_TRUE(IsOk(taken));
  EXPECT_EQ(taken->holder, "node-a");
  EXPECT_GT(taken->epoch, 0);
  EXPECT_EQ(taken->expires_at, kT0 + 10'000);

  Result<Lease> renewed = store().AcquireLease("scheduler", "node-a", 10'000, kT0 + 5'000);
  ASSERT_TRUE(IsOk(renewed));
  EXPECT_EQ(renewed->epoch, taken->epoch);
  EXPECT_EQ(renewed->expires_at, kT0 + 15'000);

  Result<Lease> refused = store().AcquireLease("scheduler", "node-b", 10'000, kT0 + 14'999);
  EXPECT_TRUE(HasCode(refused, Code::kConflict));
  EXPECT_THAT(refused.status().message(), HasSubstr("node-a"));

  Result<Lease> other = store().AcquireLease("other-lease", "node-b", 1'000, kT0 + 14'999);
  ASSERT_TRUE(IsOk(other));

  Result<Lease> takeover = store().AcquireLease("scheduler", "node-b", 10'000, kT0 + 15'000);
  ASSERT_TRUE(IsOk(takeover));
  EXPECT_EQ(takeover->holder, "node-b");
  EXPECT_EQ(takeover->epoch, taken->epoch + 1);
  EXPECT_EQ(takeover->expires_at, kT0 + 25'000);

  Result<Lease> stale = store().AcquireLease("scheduler", "node-a", 10'000, kT0 + 16'000);
  EXPECT_TRUE(HasCode(stale, Code::kConflict));
  EXPECT_THAT(stale.status().message(), HasSubstr("node-b"));
  Result<Lease> back = store().AcquireLease("scheduler", "node-a", 10'000, kT0 + 30'000);
  ASSERT_TRUE(IsOk(back));
  EXPECT_EQ(back->epoch, taken->epoch + 2);
}

}  // namespace
}  // namespace trainq

namespace trainq {
namespace {

TEST_P(StoreConformance, ListWithoutEnvKeepsEverythingButTheEnvironment) {
  JobSpec spec = Spec("train");
  spec.env = {{"PATH", "/usr/bin"}, {"SECRET", "x=y"}};
  JobId id = SubmitOne(spec);
  ListQuery query;
  query.with_env = false;
  Result<std::vector<Job>> lean = store().List(query);
  ASSERT_TRUE(IsOk(lean));
  ASSERT_EQ(lean->size(), 1u);
  EXPECT_EQ((*lean)[0].id, id);
  EXPECT_TRUE((*lean)[0].spec.env.empty());
  EXPECT_EQ((*lean)[0].spec.command, spec.command);
  EXPECT_EQ((*lean)[0].spec.gpus, spec.gpus);
  Result<std::vector<Job>> full = store().List({});
  ASSERT_TRUE(IsOk(full));
  EXPECT_EQ((*full)[0].spec.env, spec.env);
}

}  // namespace
}  // namespace trainq
