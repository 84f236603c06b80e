// The Store conformance tests (see store_conformance.h): what a user keeps (Footprint), a
// large environment stored once per submit, and Forget giving both back.
#include <gmock/gmock.h>

#include "src/store/store_conformance.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// An environment far past kSharedEnvBytes: what a batch's `defaults.env` may carry.
std::vector<std::pair<std::string, std::string>> LargeEnv(char fill) {
  return {{"BLOB", std::string(64 << 10, fill)}, {"SMALL", "1"}};
}

TEST_P(StoreConformance, FootprintCountsWaitingJobsAndRecordBytesPerUser) {
  JobSpec ada = Spec("a");
  ada.user = "ada";
  JobSpec bob = Spec("b");
  bob.user = "bob";
  std::vector<JobSpec> specs = {ada, ada, bob};
  ASSERT_TRUE(IsOk(store().Submit(specs, kT0)));
  ASSERT_TRUE(IsOk(store().Submit(std::vector<JobSpec>{After({1}, {})}, kT0)));  // alice's

  Result<UserFootprint> a = store().Footprint("ada");
  ASSERT_TRUE(IsOk(a));
  EXPECT_EQ(a->waiting_jobs, 2);
  Result<UserFootprint> b = store().Footprint("bob");
  ASSERT_TRUE(IsOk(b));
  EXPECT_EQ(b->waiting_jobs, 1);
  // The records' sizes, with an empty environment's text in each store's encoding.
  EXPECT_GE(b->stored_bytes, RecordBytes(bob, 0));
  EXPECT_LE(b->stored_bytes, RecordBytes(bob, 8));
  EXPECT_EQ(a->stored_bytes, 2 * b->stored_bytes);
  Result<UserFootprint> alice = store().Footprint("alice");
  ASSERT_TRUE(IsOk(alice));
  EXPECT_EQ(alice->waiting_jobs, 1);  // blocked counts as waiting
  Result<UserFootprint> nobody = store().Footprint("nobody");
  ASSERT_TRUE(IsOk(nobody));
  EXPECT_EQ(nobody->waiting_jobs, 0);
  EXPECT_EQ(nobody->stored_bytes, 0u);
}

TEST_P(StoreConformance, ALargeEnvironmentIsStoredOncePerSubmitAndReadBackByEveryJob) {
  std::vector<JobSpec> specs(50, Spec("sweep"));
  for (JobSpec& s : specs) s.env = LargeEnv('x');
  specs[7].env = LargeEnv('y');  // one job of the batch carries another
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));

  for (size_t i = 0; i < ids->size(); ++i) {
    Result<Job> job = store().Get((*ids)[i]);
    ASSERT_TRUE(IsOk(job));
    EXPECT_EQ(job->spec.env, specs[i].env) << "job " << (*ids)[i];
  }
  Result<std::vector<Job>> listed = store().List({});
  ASSERT_TRUE(IsOk(listed));
  ASSERT_EQ(listed->size(), 50u);
  EXPECT_EQ(listed->back().spec.env, LargeEnv('x'));
  ListQuery bare;
  bare.with_env = false;
  Result<std::vector<Job>> without = store().List(bare);
  ASSERT_TRUE(IsOk(without));
  EXPECT_THAT(without->front().spec.env, IsEmpty());

  // Each of the two texts counts once: 50 jobs take far less than 50 copies.
  Result<UserFootprint> fp = store().Footprint("alice");
  ASSERT_TRUE(IsOk(fp));
  uint64_t one_env = 64 << 10;
  EXPECT_GE(fp->stored_bytes, 2 * one_env);
  EXPECT_LT(fp->stored_bytes, 3 * one_env);
}

TEST_P(StoreConformance, LogBytesOfAnEndCountForTheUser) {
  JobId id = SubmitOne();
  ASSERT_TRUE(IsOk(StartRunning(id, 0)));
  Result<UserFootprint> before = store().Footprint("alice");
  ASSERT_TRUE(IsOk(before));
  AttemptEnd end = Ended(JobState::kSucceeded, JobState::kSucceeded, "exit code 0");
  end.log_bytes = 5'000'000;
  ASSERT_TRUE(IsOk(store().FinishAttempt(id, 1, end)));
  Result<UserFootprint> after = store().Footprint("alice");
  ASSERT_TRUE(IsOk(after));
  EXPECT_EQ(after->stored_bytes, before->stored_bytes + 5'000'000);
  EXPECT_EQ(after->waiting_jobs, 0);
}

TEST_P(StoreConformance, ForgetRemovesOnlyEndedJobsAndGivesTheirBytesBack) {
  std::vector<JobSpec> specs(3, Spec("sweep"));
  for (JobSpec& s : specs) s.env = LargeEnv('z');
  Result<std::vector<JobId>> ids = store().Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  JobId waiting = SubmitOne();
  // The first of the batch (the one that stored the shared env) ends and is forgotten;
  // the others still read the environment back.
  ASSERT_TRUE(IsOk(StartRunning((*ids)[0], 0)));
  AttemptEnd end = Ended(JobState::kFailed, JobState::kFailed, "exit code 1");
  end.log_bytes = 1000;
  ASSERT_TRUE(IsOk(store().FinishAttempt((*ids)[0], 1, end)));
  ASSERT_TRUE(IsOk(store().CancelWaiting((*ids)[1], "cancelled by alice")));
  Result<UserFootprint> before = store().Footprint("alice");
  ASSERT_TRUE(IsOk(before));

  std::vector<JobId> asked = {(*ids)[0], waiting, 999, (*ids)[1]};
  Result<std::vector<JobId>> gone = store().Forget(asked, {});
  ASSERT_TRUE(IsOk(gone));
  EXPECT_THAT(*gone, ElementsAre((*ids)[0], (*ids)[1]));
  EXPECT_TRUE(HasCode(store().Get((*ids)[0]), Code::kNotFound));
  EXPECT_TRUE(HasCode(store().Get((*ids)[1]), Code::kNotFound));
  EXPECT_TRUE(IsOk(store().Get(waiting)));
  Result<Job> kept = store().Get((*ids)[2]);
  ASSERT_TRUE(IsOk(kept));
  EXPECT_EQ(kept->spec.env, LargeEnv('z'));

  Result<UserFootprint> after = store().Footprint("alice");
  ASSERT_TRUE(IsOk(after));
  EXPECT_EQ(after->waiting_jobs, before->waiting_jobs);
  // Gone: both records (the first with the shared environment's text, about 64 KiB in
  // each store's encoding) and the first one's log.
  uint64_t freed = before->stored_bytes - after->stored_bytes;
  uint64_t records = 2 * RecordBytes(specs[0], 0) + 1000;
  EXPECT_GE(freed, records + (64 << 10));
  EXPECT_LE(freed, records + (64 << 10) + 64);
  Result<std::vector<Job>> listed = store().List({});
  ASSERT_TRUE(IsOk(listed));
  EXPECT_EQ(listed->size(), 2u);
  // A new job never takes a forgotten id.
  EXPECT_GT(SubmitOne(), waiting);
}

// `trainq acct` after `trainq clean`: the row given for each job forgotten is kept, and only
// for those; read back by user and by when the job ended.
TEST_P(StoreConformance, ForgetKeepsTheAccountingRowOfEachJobItForgets) {
  JobId ended = EndedJob(JobState::kSucceeded);
  JobId waiting = SubmitOne();
  AcctRow a;
  a.id = ended;
  a.user = "alice";
  a.name = "train";
  a.state = "succeeded";
  a.ended_at = kT0 + 60'000;
  a.elapsed_ms = 59'000;
  a.gpus = 2;
  a.gpu_hours = 2 * 59'000 / 3'600'000.0;
  a.attempts = 1;
  a.end = "exit code 0";
  AcctRow w = a;
  w.id = waiting;
  std::vector<JobId> asked = {ended, waiting};
  std::vector<AcctRow> rows = {a, w};
  Result<std::vector<JobId>> gone = store().Forget(asked, rows);
  ASSERT_TRUE(IsOk(gone));
  EXPECT_THAT(*gone, ElementsAre(ended));
  Result<std::vector<AcctRow>> kept = store().AcctRecords("alice", 0);
  ASSERT_TRUE(IsOk(kept));
  ASSERT_EQ(kept->size(), 1u);  // the waiting job was not forgotten: no row of it
  EXPECT_EQ((*kept)[0].id, ended);
  EXPECT_EQ((*kept)[0].gpus, 2);
  EXPECT_DOUBLE_EQ((*kept)[0].gpu_hours, a.gpu_hours);
  EXPECT_EQ((*kept)[0].end, "exit code 0");
  EXPECT_TRUE(IsOk(store().AcctRecords("", 0)));
  EXPECT_EQ(store().AcctRecords("", 0)->size(), 1u);
  EXPECT_TRUE(store().AcctRecords("bob", 0)->empty());
  EXPECT_TRUE(store().AcctRecords("alice", kT0 + 60'001)->empty());
}

}  // namespace
}  // namespace trainq
