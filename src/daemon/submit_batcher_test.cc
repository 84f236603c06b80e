// The SubmitBatcher on its own: a real SQLite store, a loop run by hand, a fake clock.
#include "src/daemon/submit_batcher.h"

#include <list>
#include <optional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/api/asio.h"
#include "src/os/fake_clock.h"
#include "src/store/sqlite/sqlite_store.h"
#include "src/store/sqlite/sqlite_test_util.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr UnixMs kT0 = 1'800'000'000'000;

class SubmitBatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(dir_.File("trainq.db"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    SubmitBatcher::Hooks hooks;
    hooks.before = [](std::vector<JobSpec>& specs) {
      for (JobSpec& s : specs) s.name += "+signed";
    };
    hooks.stored = [this](const std::vector<JobSpec>& specs, const std::vector<JobId>& ids,
                          UnixMs now) {
      ++batches_;
      EXPECT_EQ(now, kT0);
      for (size_t i = 0; i < ids.size(); ++i) stored_.emplace_back(ids[i], specs[i].group);
    };
    batcher_.emplace(io_, *store_, clock_, config_);
    batcher_->SetHooks(std::move(hooks));
  }
  void TearDown() override {
    batcher_.reset();
    store_.reset();
  }

  static std::vector<JobSpec> Specs(int n, const std::string& user = "ada") {
    std::vector<JobSpec> specs(static_cast<size_t>(n));
    for (JobSpec& s : specs) {
      s.command = {"train"};
      s.cwd = "/";
      s.user = user;
      s.name = "job";
    }
    return specs;
  }
  // Adds a request; its answer arrives once the loop runs.
  std::optional<HttpResponse>& Add(std::vector<JobSpec> specs) {
    answers_.emplace_back();
    std::optional<HttpResponse>& slot = answers_.back();
    batcher_->Add(std::move(specs), [&slot](HttpResponse r) { slot = std::move(r); });
    return slot;
  }
  void Loop() {
    io_.restart();
    io_.poll();
  }

  sqlite::TempDir dir_;  // removed after the store closes
  std::unique_ptr<Store> store_;
  FakeClock clock_{kT0};
  Config config_;
  boost::asio::io_context io_;
  std::optional<SubmitBatcher> batcher_;
  std::list<std::optional<HttpResponse>> answers_;  // stable addresses
  int batches_ = 0;
  std::vector<std::pair<JobId, JobId>> stored_;  // (id, group)
};

TEST_F(SubmitBatcherTest, RequestsOfOneLoopTurnAreStoredTogetherInOrder) {
  std::optional<HttpResponse>& a = Add(Specs(2));
  std::vector<JobSpec> sweep = Specs(3);
  for (JobSpec& s : sweep) s.group = kNewGroup;
  std::optional<HttpResponse>& b = Add(std::move(sweep));
  EXPECT_FALSE(a.has_value());  // nothing before the turn ends
  Loop();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->status, 201);
  EXPECT_EQ(json::parse(a->body)["ids"], json({1, 2}));
  json second = json::parse(b->body);
  EXPECT_EQ(second["ids"], json({3, 4, 5}));
  EXPECT_EQ(second["group"], 3);  // named by its first job
  EXPECT_EQ(batches_, 1);
  ASSERT_EQ(stored_.size(), 5u);
  EXPECT_EQ(stored_[4], std::make_pair(JobId{5}, JobId{3}));
  Result<Job> job = store_->Get(1);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->spec.name, "job+signed");  // `before` ran on what was stored
}

TEST_F(SubmitBatcherTest, ARepeatedKeyJoinsThePendingRequestAndGetsItsIds) {
  std::vector<JobSpec> specs = Specs(1);
  specs[0].submit_key = "k1";
  std::optional<HttpResponse>& first = Add(std::move(specs));
  std::optional<HttpResponse> again;
  Responder respond = [&again](HttpResponse r) { again = std::move(r); };
  EXPECT_FALSE(batcher_->JoinPending("bob", "k1", respond));  // another user's key
  EXPECT_TRUE(batcher_->JoinPending("ada", "k1", respond));
  Loop();
  ASSERT_TRUE(first && again);
  EXPECT_EQ(first->status, 201);
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(json::parse(again->body)["ids"], json::parse(first->body)["ids"]);
  EXPECT_TRUE(json::parse(again->body)["repeated"].get<bool>());
}

TEST_F(SubmitBatcherTest, EachRequestIsJudgedAgainstTheCapsWithTheOnesBeforeIt) {
  config_.max_waiting_jobs_per_user = 3;
  EXPECT_THAT(batcher_->CheckAlone(Specs(4), "ada").message(),
              HasSubstr("this submit of 4 jobs is more than ada may have waiting"));
  EXPECT_TRUE(batcher_->CheckAlone(Specs(3), "ada").ok());
  std::optional<HttpResponse>& a = Add(Specs(2));
  std::optional<HttpResponse>& b = Add(Specs(2));         // 4 > 3
  std::optional<HttpResponse>& c = Add(Specs(1, "bob"));  // bob's own count
  std::optional<HttpResponse>& d = Add(Specs(1));         // 3: fits
  Loop();
  ASSERT_TRUE(a && b && c && d);
  EXPECT_EQ(a->status, 201);
  EXPECT_EQ(b->status, 507);
  EXPECT_THAT(b->body, HasSubstr("ada has 2 jobs waiting and this submit adds 2"));
  EXPECT_EQ(c->status, 201);
  EXPECT_EQ(d->status, 201);
  EXPECT_EQ(json::parse(d->body)["ids"], json({4}));  // b stored nothing
}

}  // namespace
}  // namespace trainq
