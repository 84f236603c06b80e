// Dependencies on their own: a real SQLite store, a fake clock, hooks that record.
#include "src/daemon/dependencies.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/fake_clock.h"
#include "src/store/sqlite/sqlite_store.h"
#include "src/store/sqlite/sqlite_test_util.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr UnixMs kT0 = 1'800'000'000'000;

class DependenciesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(dir_.File("trainq.db"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    Dependencies::Hooks hooks;
    hooks.queued = [this](const Job& job, UnixMs now) {
      EXPECT_EQ(now, kT0);
      queued_.push_back(job.id);
    };
    hooks.ended = [this](JobId id) { ended_.push_back(id); };
    hooks.unqueued = [this](JobId id) { unqueued_.push_back(id); };
    deps_.emplace(*store_, clock_);
    deps_->SetHooks(std::move(hooks));
  }
  void TearDown() override {
    deps_.reset();
    store_.reset();
  }

  JobId Submit(std::vector<JobId> after = {}, std::vector<JobId> after_any = {}) {
    JobSpec spec;
    spec.command = {"train"};
    spec.cwd = "/";
    spec.user = "ada";
    spec.after = std::move(after);
    spec.after_any = std::move(after_any);
    Result<std::vector<JobId>> ids = store_->Submit(std::span(&spec, 1), kT0);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? ids->front() : 0;
  }
  // Runs job `id` and ends it in `state`.
  void End(JobId id, JobState state) {
    Placement p;
    p.node = "n";
    p.run_dir = dir_.File("r" + std::to_string(id));
    p.log_path = p.run_dir + "/output.log";
    ASSERT_TRUE(store_->StartAttempt(id, 0, p, kT0).ok());
    AttemptEnd end;
    end.attempt_state = end.job_state = state;
    end.ended_at = kT0;
    end.end_reason = end.job_reason = std::string(StateName(state));
    ASSERT_TRUE(store_->FinishAttempt(id, 1, end).ok());
  }
  JobState StateOf(JobId id) { return store_->Get(id)->state; }

  sqlite::TempDir dir_;  // removed after the store closes
  std::unique_ptr<Store> store_;
  FakeClock clock_{kT0};
  std::optional<Dependencies> deps_;
  std::vector<JobId> queued_, ended_, unqueued_;
};

TEST_F(DependenciesTest, ASuccessQueuesItsDependentsAndAFailureCancelsTheChain) {
  JobId a = Submit();
  JobId b = Submit({a});
  JobId c = Submit({b});      // waits on b, which waits on a
  JobId d = Submit({}, {a});  // --after-any: runs whatever a did
  End(a, JobState::kFailed);
  deps_->ResolveDependents(a);
  EXPECT_EQ(StateOf(b), JobState::kCancelled);
  EXPECT_EQ(StateOf(c), JobState::kCancelled);  // b's dependents follow
  EXPECT_EQ(StateOf(d), JobState::kQueued);
  EXPECT_THAT(ended_, ElementsAre(b, c));
  EXPECT_THAT(queued_, ElementsAre(d));
  // Doing it again changes nothing: every move is a compare-and-set.
  deps_->ResolveDependents(a);
  EXPECT_THAT(ended_, ElementsAre(b, c));
}

TEST_F(DependenciesTest, AtStartEveryBlockedJobIsJudgedAgain) {
  JobId a = Submit();
  JobId b = Submit({a});
  End(a, JobState::kSucceeded);  // ended while no daemon resolved its dependents
  ASSERT_EQ(StateOf(b), JobState::kBlocked);
  deps_->ResolveAllBlocked();
  EXPECT_EQ(StateOf(b), JobState::kQueued);
  EXPECT_THAT(queued_, ElementsAre(b));
}

TEST_F(DependenciesTest, ARetriedJobWaitsAgainWhileItsDependencyIsOpen) {
  JobId a = Submit();
  JobId b = Submit({a});
  End(a, JobState::kSucceeded);
  deps_->ResolveDependents(a);
  End(b, JobState::kFailed);
  // a is retried (queued again), then b: b must wait for a's new run.
  ASSERT_TRUE(store_->Requeue(a, "retried", kT0).ok());
  ASSERT_TRUE(store_->Requeue(b, "retried", kT0).ok());
  deps_->Recheck(b);
  Result<Job> job = store_->Get(b);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kBlocked);
  EXPECT_THAT(job->reason, HasSubstr(std::to_string(a)));
  EXPECT_THAT(unqueued_, ElementsAre(b));
}

}  // namespace
}  // namespace trainq
