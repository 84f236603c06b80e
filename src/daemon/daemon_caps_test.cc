// The per-user caps (docs/operations.md, "Per-user caps"): a submit past what one user may
// keep waiting or stored is refused whole, naming the option, and nothing of it is stored.
#include "src/daemon/daemon_test_fixture.h"

namespace trainq::daemon_test {
namespace {

size_t StoredJobs(Store& store) {
  Result<std::vector<Job>> jobs = store.List({});
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  return jobs.ok() ? jobs->size() : 0;
}

json Batch(int n, json defaults = json::object()) {
  json list = json::array();
  for (int i = 0; i < n; ++i) list.push_back(json{{"command", {"train"}}});
  return {{"defaults", std::move(defaults)}, {"jobs", list}};
}

TEST_F(DaemonTest, ASubmitPastTheWaitingJobsCapIsRefusedWholeAndNothingIsStored) {
  config_.max_waiting_jobs_per_user = 3;
  SetGpus({Gpu(0, 80)});
  config_.policy.paused = true;  // nothing starts: every job waits
  Start();
  ASSERT_EQ(Call("POST", "/v1/jobs", Batch(2, {{"cwd", dir_}}).dump()).status, 201);

  HttpResponse r = Call("POST", "/v1/jobs", Batch(2, {{"cwd", dir_}}).dump());
  EXPECT_EQ(r.status, 507) << r.body;
  EXPECT_THAT(r.body, HasSubstr("has 2 jobs waiting and this submit adds 2"));
  EXPECT_THAT(r.body, HasSubstr("max_waiting_jobs_per_user = 3"));
  EXPECT_THAT(r.body, HasSubstr("nothing was stored"));
  EXPECT_EQ(StoredJobs(*store_), 2u);

  // One more fits; a cancelled job no longer waits, so it makes room.
  JobId third = Submit(json::object());
  EXPECT_EQ(Call("POST", "/v1/jobs", Batch(1, {{"cwd", dir_}}).dump()).status, 507);
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(third) + "/cancel").status, 200);
  EXPECT_EQ(Call("POST", "/v1/jobs", Batch(1, {{"cwd", dir_}}).dump()).status, 201);
}

// Requests that arrive in one loop turn are stored in one transaction: each is judged with
// what the ones before it in the batch add.
TEST_F(DaemonTest, RequestsOfOneGroupCommitAreJudgedOneAfterAnother) {
  config_.max_waiting_jobs_per_user = 3;
  SetGpus({Gpu(0, 80)});
  config_.policy.paused = true;
  Start();
  std::vector<std::optional<HttpResponse>> got(3);
  for (auto& slot : got) {
    daemon_->Handle(Request("POST", "/v1/jobs", Batch(1, {{"cwd", dir_}}).dump()),
                    [&slot](HttpResponse r) { slot = std::move(r); });
  }
  // The fourth asks for two: past the cap once the three before it count.
  std::optional<HttpResponse> fourth;
  daemon_->Handle(Request("POST", "/v1/jobs", Batch(2, {{"cwd", dir_}}).dump()),
                  [&fourth](HttpResponse r) { fourth = std::move(r); });
  Loop();
  for (auto& slot : got) {
    ASSERT_TRUE(slot.has_value());
    EXPECT_EQ(slot->status, 201) << slot->body;
  }
  ASSERT_TRUE(fourth.has_value());
  EXPECT_EQ(fourth->status, 507) << fourth->body;
  EXPECT_THAT(fourth->body, HasSubstr("has 3 jobs waiting and this submit adds 2"));
  EXPECT_EQ(StoredJobs(*store_), 3u);
}

TEST_F(DaemonTest, LogsCountTowardsTheStoredBytesCapUntilCleanForgetsThem) {
  config_.max_stored_bytes_per_user = 1 << 20;
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}});
  ASSERT_EQ(Get(id).state, JobState::kRunning);
  ASSERT_TRUE(shims_.Exit(RunDir(id, 1), Exited(0), std::string(2 << 20, 'l')));
  Loop();
  ASSERT_EQ(Get(id).state, JobState::kSucceeded);

  HttpResponse r = Call("POST", "/v1/jobs", Batch(1, {{"cwd", dir_}}).dump());
  EXPECT_EQ(r.status, 507) << r.body;
  EXPECT_THAT(r.body, HasSubstr("max_stored_bytes_per_user = 1.0 MiB"));
  EXPECT_THAT(r.body, HasSubstr("trainq clean"));
  EXPECT_EQ(StoredJobs(*store_), 1u);

  ASSERT_EQ(Call("POST", "/v1/jobs/clean", "{}").status, 200);
  EXPECT_FALSE(std::filesystem::exists(RunDir(id, 1)));
  EXPECT_EQ(Call("POST", "/v1/jobs", Batch(1, {{"cwd", dir_}}).dump()).status, 201);
}

// One large environment in a batch's defaults is stored once, and counted once.
TEST_F(DaemonTest, ABatchSharingALargeEnvironmentCountsItOnce) {
  config_.max_stored_bytes_per_user = 4 << 20;
  SetGpus({Gpu(0, 80)});
  config_.policy.paused = true;
  Start();
  json env;  // 4 x 120 KiB: each variable within its limit
  for (char c : std::string("ABCD")) env[std::string("BLOB_") + c] = std::string(120 << 10, c);
  json defaults = {{"cwd", dir_}, {"env", env}};
  HttpResponse r = Call("POST", "/v1/jobs", Batch(300, defaults).dump());
  ASSERT_EQ(r.status, 201) << r.body.substr(0, 300);
  Result<UserFootprint> fp = store_->Footprint(Get(1).spec.user);
  ASSERT_TRUE(fp.ok());
  EXPECT_LT(fp->stored_bytes, 1u << 20);
  EXPECT_EQ(Get(300).spec.env.size(), 4u);
  EXPECT_EQ(Get(300).spec.env.front().second.size(), 120u << 10);
  // Another submit stores its own copy (480 KiB): the eighth is past the cap.
  for (int i = 0; i < 7; ++i) {
    ASSERT_EQ(Call("POST", "/v1/jobs", Batch(1, defaults).dump()).status, 201) << i;
  }
  EXPECT_EQ(Call("POST", "/v1/jobs", Batch(1, defaults).dump()).status, 507);
}

}  // namespace
}  // namespace trainq::daemon_test
