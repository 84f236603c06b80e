// The scheduler on its own (AgentRig: real SQLite behind FaultyStore, fake clock), with a
// fake site that says what the nodes hold and records what it is told to start. Passes run
// when the test polls the loop.
#include "src/daemon/scheduler.h"

#include <cerrno>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/daemon/agent_test_rig.h"
#include "src/os/system.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr UnixMs kT0 = AgentRig::kT0;
constexpr uint64_t kGiB = AgentRig::kGiB;

// One node with one 80 GiB GPU; what it is told to start is recorded as started in the store.
class FakeSite final : public Scheduler::Site {
 public:
  explicit FakeSite(Store& store) : store_(store) {
    NodeState node;
    node.name = "node-a";
    node.cpu_slots = 8;
    GpuState gpu;
    gpu.uuid = "GPU-0";
    gpu.total_bytes = gpu.free_bytes = 80 * kGiB;
    node.gpus.push_back(gpu);
    nodes.push_back(node);
  }
  bool Places() const override { return places; }
  std::vector<NodeState> PassNodes() override {
    ++passes;
    return nodes;
  }
  std::vector<NodeState> LastNodes() const override { return nodes; }
  RunningUses Running() override { return running; }
  Status Preempt(const Job& victim, const ShimControl& control) override {
    preempted.emplace_back(victim.id, control.reason);
    return Status::Ok();
  }
  Status Place(const Job& job, const StartDecision& d) override {
    if (!refuse.ok()) return refuse;
    started.push_back(job.id);
    Placement p;
    p.node = d.node;
    p.gpu_indices = d.gpu_indices;
    p.reserved_bytes = d.reserved_bytes;
    p.run_dir = "/nonexistent/" + std::to_string(job.id);
    p.log_path = p.run_dir + "/output.log";
    TRAINQ_RETURN_IF_ERROR(store_.StartAttempt(job.id, job.attempt, p, kT0));
    // What a started job holds, as the next pass's nodes show it.
    Holding h;
    h.job = job.id;
    h.reserved_bytes = d.reserved_bytes;
    for (GpuState& g : nodes[0].gpus) {
      if (!d.gpu_indices.empty() && g.index == d.gpu_indices[0]) g.holdings.push_back(h);
    }
    return Status::Ok();
  }
  bool ReadsLastAttempt() const override { return false; }

  bool places = true;
  std::vector<NodeState> nodes;
  RunningUses running;
  Status refuse = Status::Ok();
  std::vector<JobId> started;
  std::vector<std::pair<JobId, std::string>> preempted;  // (victim, reason)
  int passes = 0;

 private:
  Store& store_;
};

class SchedulerTest : public ::testing::Test, protected AgentRig {
 protected:
  void SetUp() override {
    config_.policy.headroom_bytes = 0;
    SetUpRig();
    site_ = std::make_unique<FakeSite>(*store_);
    Agent::Hooks hooks;
    hooks.started = [](JobId) {};
    hooks.done = [](JobId, bool) {};
    hooks.requeued = [](JobId, bool) {};
    hooks.freed = [] {};
    agent_ = MakeAgent(std::move(hooks));
    scheduler_ = std::make_unique<Scheduler>(io_, *store_, clock_, config_, *agent_,
                                             paths_.state_dir, [] { return 80 * kGiB; });
    scheduler_->SetSite(site_.get());
  }
  void TearDown() override {
    scheduler_.reset();
    agent_.reset();
    store_.reset();
  }

  // Stores jobs as a submit does and tells the scheduler, as the daemon's batcher would.
  std::vector<JobId> Submit(std::vector<JobSpec> specs) {
    for (JobSpec& s : specs) {
      if (s.command.empty()) s.command = {"train"};
      s.cwd = "/";
      if (s.user.empty()) s.user = "ada";
    }
    Result<std::vector<JobId>> ids = store_->Submit(specs, clock_.Now());
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    scheduler_->Submitted(specs, *ids, clock_.Now());
    return *ids;
  }
  static JobSpec Mem(uint64_t gib, const std::string& user = "ada") {
    JobSpec s;
    s.gpus = 1;
    s.mem_bytes = gib * kGiB;
    s.user = user;
    return s;
  }
  void Loop() {
    io_.restart();
    io_.poll();
  }
  Job Get(JobId id) { return *store_->Get(id); }

  boost::asio::io_context io_;
  std::unique_ptr<FakeSite> site_;
  std::unique_ptr<Agent> agent_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, OnePassPlacesWhatFitsAndWritesWhyTheRestWaits) {
  std::vector<JobId> ids = Submit({Mem(50), Mem(50), Mem(20)});
  Loop();
  EXPECT_EQ(site_->passes, 1);  // three submits, one pass
  EXPECT_THAT(site_->started, ElementsAre(ids[0], ids[2]));
  EXPECT_EQ(Get(ids[1]).state, JobState::kQueued);
  EXPECT_THAT(Get(ids[1]).reason, HasSubstr("50.0 GiB"));
  EXPECT_EQ(scheduler_->waiting_jobs(), 1);
}

TEST_F(SchedulerTest, AReasonIsWrittenOnlyWhenItChanges) {
  std::vector<JobId> ids = Submit({Mem(90)});  // more than the GPU has
  Loop();
  std::string first = Get(ids[0]).reason;
  EXPECT_THAT(first, HasSubstr("90.0 GiB"));
  // Overwritten in the store by hand: a pass that finds the same reason writes nothing.
  std::pair<JobId, std::string> other{ids[0], "written elsewhere"};
  ASSERT_TRUE(store_->SetReasons(std::span(&other, 1)).ok());
  scheduler_->RequestSchedule();
  Loop();
  EXPECT_EQ(site_->passes, 2);
  EXPECT_EQ(Get(ids[0]).reason, "written elsewhere");
  // Forgotten (the job was requeued): written again.
  scheduler_->ForgetReason(ids[0]);
  scheduler_->RequestSchedule();
  Loop();
  EXPECT_EQ(Get(ids[0]).reason, first);
}

// A pass over a long queue writes the first changed reasons at once and the rest a chunk per
// loop turn; meanwhile LiveReason (what the API shows) is already the pass's.
TEST_F(SchedulerTest, ALongQueuesReasonsAreWrittenAChunkPerTurnAndShownMeanwhile) {
  std::vector<JobId> ids = Submit(std::vector<JobSpec>(2500, Mem(90)));  // none fits
  Loop();
  ASSERT_NE(scheduler_->LiveReason(ids.back()), nullptr);
  EXPECT_THAT(*scheduler_->LiveReason(ids.back()), HasSubstr("90.0 GiB"));
  EXPECT_THAT(Get(ids.front()).reason, HasSubstr("90.0 GiB"));  // first in line: written now
  EXPECT_EQ(Get(ids.back()).reason, "");                        // last: not yet
  size_t left = scheduler_->reasons_unwritten();
  EXPECT_GT(left, 0u);
  EXPECT_LT(left, ids.size());
  while (scheduler_->reasons_unwritten() > 0) {
    io_.restart();
    ASSERT_GT(io_.run_one_for(std::chrono::seconds(5)), 0u) << "no chunk written";
  }
  for (JobId id : {ids[0], ids[1500], ids.back()}) {
    EXPECT_EQ(Get(id).reason, *scheduler_->LiveReason(id)) << "job " << id;
  }
  // A job that leaves the queue has no live reason: the store's is the one to show.
  scheduler_->Left(ids[7]);
  EXPECT_EQ(scheduler_->LiveReason(ids[7]), nullptr);
  site_->places = false;  // a follower's passes explain nothing
  EXPECT_EQ(scheduler_->LiveReason(ids[8]), nullptr);
}

// The index is read anew a page of 10,000 at a time: every queued job is in it, the ones on
// later pages too.
TEST_F(SchedulerTest, AReloadReadsTheWholeQueuePageByPage) {
  std::vector<JobId> ids = Submit(std::vector<JobSpec>(10'050, Mem(90)));  // none fits
  std::vector<JobId> more = Submit({Mem(10)});
  Loop();
  ASSERT_THAT(site_->started, ElementsAre(more[0]));
  scheduler_->MarkStale();
  scheduler_->RequestSchedule();
  Loop();
  EXPECT_EQ(scheduler_->waiting_jobs(), 10'050);
  ASSERT_NE(scheduler_->LiveReason(ids.back()), nullptr);
  EXPECT_THAT(*scheduler_->LiveReason(ids.back()), HasSubstr("90.0 GiB"));
}

TEST_F(SchedulerTest, AFollowerPlacesNothingAndWritesNoReason) {
  site_->places = false;
  std::vector<JobId> ids = Submit({Mem(10)});
  Loop();
  EXPECT_EQ(site_->passes, 0);
  EXPECT_THAT(site_->started, IsEmpty());
  EXPECT_EQ(Get(ids[0]).reason, "");
  EXPECT_EQ(scheduler_->NextWakeup(), 0);  // nothing it would act on makes a pass due
  site_->places = true;                    // it became the leader
  scheduler_->Reload();
  scheduler_->RequestSchedule();
  Loop();
  EXPECT_THAT(site_->started, ElementsAre(ids[0]));
}

TEST_F(SchedulerTest, AStartTheStateDirRefusedStopsThePassAndComesBackInFiveSeconds) {
  site_->refuse = ErrnoStatus("write " + paths_.runs + "/1/1/spec.json", ENOSPC);
  std::vector<JobId> ids = Submit({Mem(10), Mem(10)});
  Loop();
  for (JobId id : ids) {
    EXPECT_EQ(Get(id).state, JobState::kQueued);
    EXPECT_THAT(Get(id).reason, HasSubstr("disk full in " + paths_.state_dir));
    EXPECT_THAT(Get(id).reason, HasSubstr("trying again every 5s"));
  }
  EXPECT_EQ(scheduler_->NextWakeup(), kT0 + kStorageRetryMs);
  site_->refuse = Status::Ok();  // space was freed
  clock_.Advance(kStorageRetryMs);
  scheduler_->OnWakeupTimer();
  Loop();
  EXPECT_THAT(site_->started, ElementsAre(ids[0], ids[1]));
}

TEST_F(SchedulerTest, AnArrayRunsNoMoreOfItsJobsAtOnceThanItsLimit) {
  std::vector<JobSpec> specs(3, Mem(1));
  for (JobSpec& s : specs) {
    s.group = 100;
    s.group_limit = 2;
  }
  std::vector<JobId> ids = Submit(specs);
  Loop();
  EXPECT_THAT(site_->started, ElementsAre(ids[0], ids[1]));
  EXPECT_THAT(Get(ids[2]).reason, HasSubstr("at most 2 of its jobs run at once"));
}

TEST_F(SchedulerTest, FairShareFavoursTheUserWhoHasUsedLess) {
  config_.fair_share_half_life_ms = 3600'000;
  // ada has held 4 GPUs for an hour (running elsewhere); bob nothing.
  site_->running[{999, 1}] = {"ada", 4, kT0 - 3600'000};
  std::vector<JobId> ids = Submit({Mem(50, "ada"), Mem(50, "bob")});
  Loop();
  EXPECT_THAT(site_->started, ElementsAre(ids[1]));
  EXPECT_EQ(Get(ids[0]).state, JobState::kQueued);
}

TEST_F(SchedulerTest, ExplainGivesTheNumbersBehindAWaitingJobsReason) {
  std::vector<JobId> ids = Submit({Mem(90)});
  Loop();
  Result<Explanation> why = scheduler_->ExplainWaiting(ids[0]);
  ASSERT_TRUE(why.ok()) << why.status().ToString();
  EXPECT_TRUE(why->waiting);
  EXPECT_EQ(why->position, 1);
  EXPECT_EQ(why->user, "ada");
  EXPECT_EQ(why->reason, Get(ids[0]).reason);
}

}  // namespace
}  // namespace trainq
