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

// Groups (sweeps, arrays): a negative group is a new group's tag, named by the first job
// stored with it; two tags in one call make two groups. List finds a group's jobs alone.
TEST_P(StoreConformance, NewGroupsAreNamedByTheirFirstJobAndListedAlone) {
  std::vector<JobSpec> specs(5, Spec("g"));
  specs[0].group = specs[1].group = kNewGroup;
  specs[2].group = specs[3].group = kNewGroup - 1;
  specs[1].group_limit = 2;
  specs[1].array_index = 7;
  specs[1].record = R"({"git":{"commit":"abc"}})";
  specs[1].notify_url = "http://127.0.0.1:9/h";
  specs[1].mail = "ada@lab";
  specs[1].slurm_env = true;
  specs[1].gate_pid = 4242;
  specs[1].gate_ticks = 99;
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  const std::vector<JobId>& id = *ids;
  Result<Job> second = store().Get(id[1]);
  ASSERT_TRUE(IsOk(second));
  EXPECT_EQ(second->spec.group, id[0]);
  EXPECT_EQ(second->spec.group_limit, 2);
  EXPECT_EQ(second->spec.array_index, 7);
  EXPECT_EQ(second->spec.record, specs[1].record);
  EXPECT_EQ(second->spec.notify_url, "http://127.0.0.1:9/h");
  EXPECT_EQ(second->spec.mail, "ada@lab");
  EXPECT_TRUE(second->spec.slurm_env);
  EXPECT_EQ(second->spec.gate_pid, 4242);
  EXPECT_EQ(second->spec.gate_ticks, 99u);
  Result<Job> plain = store().Get(id[4]);
  ASSERT_TRUE(IsOk(plain));
  EXPECT_EQ(plain->spec.group, 0);
  EXPECT_EQ(plain->spec.array_index, -1);
  EXPECT_FALSE(plain->spec.slurm_env);
  EXPECT_EQ(plain->spec.gate_pid, 0);

  ListQuery first_group;
  first_group.group = id[0];
  Result<std::vector<Job>> listed = store().List(first_group);
  ASSERT_TRUE(IsOk(listed));
  EXPECT_THAT(Ids(*listed), ElementsAre(id[0], id[1]));
  ListQuery other;
  other.group = id[2];
  other.states = {JobState::kQueued};
  listed = store().List(other);
  ASSERT_TRUE(IsOk(listed));
  EXPECT_THAT(Ids(*listed), ElementsAre(id[2], id[3]));
  ListQuery none;
  none.group = id[4];
  listed = store().List(none);
  ASSERT_TRUE(IsOk(listed));
  EXPECT_TRUE(listed->empty());
}

TEST_P(StoreConformance, ListFiltersByStateInIdOrder) {
  std::vector<JobSpec> specs(5, Spec("j"));
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  const std::vector<JobId>& id = *ids;
  ASSERT_TRUE(IsOk(StartRunning(id[1], 0)));
  ASSERT_TRUE(IsOk(store().StartAttempt(id[3], 0, PlacementOn("n", {1}), kT0)));
  ASSERT_TRUE(IsOk(store().CancelWaiting(id[4], "x")));

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

TEST_P(StoreConformance, LastIdIsTheNewestJobsId) {
  Result<JobId> none = store().LastId();
  ASSERT_TRUE(IsOk(none));
  EXPECT_EQ(*none, 0);
  std::vector<JobSpec> specs(3, Spec("j"));
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  Result<JobId> last = store().LastId();
  ASSERT_TRUE(IsOk(last));
  EXPECT_EQ(*last, ids->back());
  Result<std::vector<Job>> newer = store().List({.states = {}, .after_id = *last});
  ASSERT_TRUE(IsOk(newer));
  EXPECT_TRUE(newer->empty());
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

TEST_P(StoreConformance, ListOnlyStartedLeavesOutJobsThatNeverRan) {
  std::vector<JobSpec> specs(4, Spec("j"));
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  const std::vector<JobId>& id = *ids;
  ASSERT_TRUE(IsOk(StartRunning(id[1], 0)));
  ASSERT_TRUE(IsOk(store().StartAttempt(id[3], 0, PlacementOn("n", {1}), kT0)));
  ListQuery query{.with_attempts = true, .only_started = true};
  Result<std::vector<Job>> started = store().List(query);
  ASSERT_TRUE(IsOk(started));
  EXPECT_THAT(Ids(*started), ElementsAre(id[1], id[3]));
  query.limit = 1;
  Result<std::vector<Job>> first = store().List(query);
  ASSERT_TRUE(IsOk(first));
  EXPECT_THAT(Ids(*first), ElementsAre(id[1]));
  Result<std::vector<Job>> all = store().List({.with_attempts = true});
  ASSERT_TRUE(IsOk(all));
  EXPECT_EQ(all->size(), 4u);
}

// A placement-only listing (the scheduler's read of the queue) holds every field placement
// reads, the same as a full listing's.
TEST_P(StoreConformance, APlacementOnlyListingHoldsWhatPlacementReads) {
  JobSpec a = Spec("a");
  a.gpus = 2;
  a.mem_bytes = 3ull << 30;
  a.cpus = 4;
  a.priority = 7;
  a.user = "ada";
  a.nodes_allowed = {"gpu01", "gpu02"};
  a.nodes_excluded = {"gpu03"};
  a.gpu_type = "a100";
  a.constraints = {"ib"};
  JobSpec b = Spec("b");
  b.mem_percent = 25.0;
  std::vector<JobSpec> specs = {a, b};
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  std::pair<JobId, std::string> reason{(*ids)[0], "needs 2 GPUs"};
  ASSERT_TRUE(IsOk(store().SetReasons(std::span(&reason, 1))));
  ListQuery query{.states = {JobState::kQueued}, .with_env = false};
  Result<std::vector<Job>> full = store().List(query);
  query.placement_only = true;
  Result<std::vector<Job>> lean = store().List(query);
  ASSERT_TRUE(IsOk(full));
  ASSERT_TRUE(IsOk(lean));
  ASSERT_EQ(Ids(*lean), Ids(*full));
  for (size_t i = 0; i < lean->size(); ++i) {
    const Job& l = (*lean)[i];
    const Job& f = (*full)[i];
    EXPECT_EQ(l.state, f.state);
    EXPECT_EQ(l.reason, f.reason);
    EXPECT_EQ(l.attempt, f.attempt);
    EXPECT_EQ(l.submitted_at, f.submitted_at);
    EXPECT_EQ(l.queued_at, f.queued_at);
    EXPECT_EQ(l.not_before, f.not_before);
    EXPECT_EQ(l.spec.gpus, f.spec.gpus);
    EXPECT_EQ(l.spec.mem_bytes, f.spec.mem_bytes);
    EXPECT_EQ(l.spec.mem_percent, f.spec.mem_percent);
    EXPECT_EQ(l.spec.cpus, f.spec.cpus);
    EXPECT_EQ(l.spec.priority, f.spec.priority);
    EXPECT_EQ(l.spec.user, f.spec.user);
    EXPECT_EQ(l.spec.nodes_allowed, f.spec.nodes_allowed);
    EXPECT_EQ(l.spec.nodes_excluded, f.spec.nodes_excluded);
    EXPECT_EQ(l.spec.num_nodes, f.spec.num_nodes);
    EXPECT_EQ(l.spec.gpu_type, f.spec.gpu_type);
    EXPECT_EQ(l.spec.constraints, f.spec.constraints);
    EXPECT_EQ(l.spec.group, f.spec.group);
    EXPECT_EQ(l.spec.group_limit, f.spec.group_limit);
  }
  EXPECT_EQ((*lean)[0].reason, "needs 2 GPUs");
  EXPECT_THAT((*lean)[0].spec.nodes_allowed, ElementsAre("gpu01", "gpu02"));
  EXPECT_EQ((*lean)[0].spec.gpu_type, "a100");
  EXPECT_THAT((*lean)[0].spec.constraints, ElementsAre("ib"));
}

// Several states, read one state at a time by the SQLite store, still page in id order
// across them: the limit keeps the lowest ids of all, not the first state's.
TEST_P(StoreConformance, ListOfSeveralStatesPagesInIdOrderAcrossThem) {
  std::vector<JobSpec> specs(6, Spec("j"));
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  const std::vector<JobId>& id = *ids;
  for (size_t i : {1u, 3u, 5u}) ASSERT_TRUE(IsOk(store().CancelWaiting(id[i], "x")));
  ListQuery query{.states = {JobState::kQueued, JobState::kCancelled}, .limit = 4};
  Result<std::vector<Job>> first = store().List(query);
  ASSERT_TRUE(IsOk(first));
  EXPECT_THAT(Ids(*first), ElementsAre(id[0], id[1], id[2], id[3]));
  query.after_id = id[3];
  Result<std::vector<Job>> rest = store().List(query);
  ASSERT_TRUE(IsOk(rest));
  EXPECT_THAT(Ids(*rest), ElementsAre(id[4], id[5]));
}

TEST_P(StoreConformance, ListFiltersByUser) {
  std::vector<JobSpec> specs(4, Spec("j"));
  specs[1].user = "ada";
  specs[3].user = "ada";
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  Result<std::vector<Job>> ada = store().List({.user = "ada"});
  ASSERT_TRUE(IsOk(ada));
  EXPECT_THAT(Ids(*ada), ElementsAre((*ids)[1], (*ids)[3]));
  Result<std::vector<Job>> ada_queued_after =
      store().List({.states = {JobState::kQueued}, .after_id = (*ids)[1], .user = "ada"});
  ASSERT_TRUE(IsOk(ada_queued_after));
  EXPECT_THAT(Ids(*ada_queued_after), ElementsAre((*ids)[3]));
  Result<std::vector<Job>> nobody = store().List({.user = "nobody-at-all"});
  ASSERT_TRUE(IsOk(nobody));
  EXPECT_TRUE(nobody->empty());
  Result<std::vector<Job>> all = store().List({});
  ASSERT_TRUE(IsOk(all));
  EXPECT_EQ(all->size(), 4u);
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

// Aging counts from here, so a job queued again is not "aged" at once.
TEST_P(StoreConformance, QueuedAtIsWhenTheJobLastBecameQueued) {
  Result<std::vector<JobId>> ids = store().Submit(std::vector<JobSpec>{Spec("a")}, kT0);
  ASSERT_TRUE(IsOk(ids));
  JobId id = (*ids)[0];
  auto queued_at = [&] { return store().Get(id)->queued_at; };
  EXPECT_EQ(queued_at(), kT0);
  ASSERT_TRUE(IsOk(StartRunning(id, 0)));
  AttemptEnd oom = Ended(JobState::kFailed, JobState::kQueued, "out of memory");
  oom.ended_at = kT0 + 100;
  ASSERT_TRUE(IsOk(store().FinishAttempt(id, 1, oom)));
  EXPECT_EQ(queued_at(), kT0 + 100);
  ASSERT_TRUE(IsOk(StartRunning(id, 1)));
  AttemptEnd failed = Ended(JobState::kFailed, JobState::kFailed, "exit code 1");
  failed.ended_at = kT0 + 150;
  ASSERT_TRUE(IsOk(store().FinishAttempt(id, 2, failed)));
  EXPECT_EQ(queued_at(), kT0 + 100);  // a done job keeps it
  ASSERT_TRUE(IsOk(store().Requeue(id, "retried", kT0 + 200)));
  EXPECT_EQ(queued_at(), kT0 + 200);
  EXPECT_EQ(store().Get(id)->submitted_at, kT0);  // its place in line is kept

  JobSpec dependent = Spec("b");
  dependent.after = {id};
  Result<std::vector<JobId>> b = store().Submit(std::vector<JobSpec>{dependent}, kT0 + 250);
  ASSERT_TRUE(IsOk(b));
  ASSERT_EQ(store().Get((*b)[0])->state, JobState::kBlocked);
  ASSERT_TRUE(
      IsOk(store().MoveWaiting((*b)[0], JobState::kBlocked, JobState::kQueued, "", kT0 + 300)));
  EXPECT_EQ(store().Get((*b)[0])->queued_at, kT0 + 300);
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
