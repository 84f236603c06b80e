// The agent on its own (AgentRig: real SQLite, fake shims, clock and GPUs); the hooks record
// what the rest of the daemon would hear.
#include "src/daemon/agent.h"

#include <cerrno>
#include <csignal>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/core/oom.h"
#include "src/daemon/agent_test_rig.h"
#include "src/daemon/cluster_key.h"
#include "src/daemon/trust.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AgentTest : public ::testing::Test, protected AgentRig {
 protected:
  void SetUp() override {
    config_.grace_ms = 1000;
    config_.master_port_first = 29500;
    config_.master_port_last = 29500;  // one port: the second multi-GPU job waits
    SetUpRig();
    agent_ = MakeAgent();
  }
  void TearDown() override {
    agent_.reset();
    store_.reset();
  }

  // An agent whose hooks note what the rest of the daemon would hear in events_.
  std::unique_ptr<Agent> MakeAgent(const Trust& trust = OneMachineTrust()) {
    Agent::Hooks hooks;
    hooks.started = [this](JobId id) { events_.push_back("started " + std::to_string(id)); };
    hooks.done = [this](JobId id, bool stored) {
      events_.push_back("done " + std::to_string(id) + (stored ? "" : " unstored"));
    };
    hooks.requeued = [this](JobId id, bool oom) {
      events_.push_back("requeued " + std::to_string(id) + (oom ? " oom" : ""));
    };
    hooks.freed = [this] { events_.push_back("freed"); };
    return AgentRig::MakeAgent(std::move(hooks), trust);
  }

  Job Submit(int gpus = 1, int retries = 0) {
    JobSpec spec;
    spec.command = {"train"};
    spec.cwd = "/";
    spec.user = "ada";
    spec.gpus = gpus;
    spec.retries = retries;
    Result<std::vector<JobId>> ids = store_->Submit(std::span(&spec, 1), kT0);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return *store_->Get(ids->front());
  }
  StartDecision On(const Job& job, std::vector<int> gpus) {
    return {job.id, "node-a", std::move(gpus), 10 * kGiB, 1};
  }
  std::string RunDir(JobId id, int n) {
    return paths_.runs + "/" + std::to_string(id) + "/" + std::to_string(n);
  }
  Job Get(JobId id) { return *store_->Get(id); }
  static ExitRecord Exited(int code) {
    ExitRecord r;
    r.exit_code = code;
    r.started_at = r.ended_at = kT0;
    return r;
  }

  std::unique_ptr<Agent> agent_;
  std::vector<std::string> events_;
};

TEST_F(AgentTest, AStartedAttemptRunsUntilItsShimExitsAndItsEndIsRecorded) {
  Job job = Submit();
  uint64_t before = store_->Footprint("ada")->stored_bytes;
  ASSERT_TRUE(agent_->StartLocal(job, On(job, {1})).ok());
  EXPECT_EQ(Get(job.id).state, JobState::kRunning);
  ASSERT_EQ(agent_->live().size(), 1u);
  const LiveAttempt& live = agent_->live().at(job.id);
  EXPECT_EQ(live.gpu_uuids, std::vector<std::string>{"GPU-1"});
  EXPECT_EQ(live.run_dir, RunDir(job.id, 1));
  EXPECT_EQ(live.user, "ada");
  ASSERT_TRUE(shims_.Exit(RunDir(job.id, 1), Exited(0), "done\n"));
  EXPECT_TRUE(agent_->live().empty());
  Job ended = Get(job.id);
  EXPECT_EQ(ended.state, JobState::kSucceeded);
  // What it leaves here (log, spec, records) counts against its user's cap.
  EXPECT_GT(store_->Footprint("ada")->stored_bytes, before + 4);
  std::string id = std::to_string(job.id);
  EXPECT_THAT(events_, ElementsAre("started " + id, "done " + id, "freed"));
}

TEST_F(AgentTest, AMultiGpuAttemptHoldsItsMasterPortUntilItEnds) {
  Job first = Submit(2);
  Job second = Submit(2);
  ASSERT_TRUE(agent_->StartLocal(first, On(first, {0, 1})).ok());
  EXPECT_EQ(agent_->live().at(first.id).master_port, 29500);
  Status st = agent_->StartLocal(second, On(second, {0, 1}));
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_THAT(st.message(), HasSubstr("waiting for a free MASTER_PORT"));
  EXPECT_THAT(Get(second.id).reason, HasSubstr("master_port_range 29500-29500"));
  EXPECT_EQ(agent_->port_retry_at(), kT0 + 2000);  // a program outside trainq sends no sign
  EXPECT_EQ(Get(second.id).state, JobState::kQueued);
  ASSERT_TRUE(shims_.Exit(RunDir(first.id, 1), Exited(0)));
  agent_->ClearPortRetry();
  ASSERT_TRUE(agent_->StartLocal(Get(second.id), On(second, {0, 1})).ok());
  EXPECT_EQ(agent_->live().at(second.id).master_port, 29500);
}

TEST_F(AgentTest, WhatADeadShimLeftIsStoppedBeforeItsEndIsRecorded) {
  Job job = Submit();
  ASSERT_TRUE(agent_->StartLocal(job, On(job, {0})).ok());
  std::string run_dir = RunDir(job.id, 1);
  shims_.leftovers[run_dir] = {{4242, 1, 4242, 'S', 77}};
  ASSERT_TRUE(shims_.Crash(run_dir));
  // Its GPUs stay taken while its processes may still use them.
  ASSERT_EQ(agent_->live().size(), 1u);
  EXPECT_TRUE(agent_->live().at(job.id).stopping.has_value());
  EXPECT_THAT(shims_.leftover_signals[4242], ElementsAre(SIGTERM));
  clock_.Advance(1000);  // grace_period
  agent_->CheckStopping();
  EXPECT_THAT(shims_.leftover_signals[4242], ElementsAre(SIGTERM, SIGKILL));
  EXPECT_EQ(Get(job.id).state, JobState::kRunning);
  shims_.leftovers.erase(run_dir);
  agent_->CheckStopping();
  EXPECT_TRUE(agent_->live().empty());
  Job ended = Get(job.id);
  EXPECT_EQ(ended.state, JobState::kFailed);
  EXPECT_THAT(ended.attempts.at(0).end_reason, HasSubstr("shim"));
  EXPECT_EQ(events_.back(), "freed");
}

TEST_F(AgentTest, AnEndTheStoreRefusedIsKeptAndWrittenAgain) {
  Job job = Submit();
  ASSERT_TRUE(agent_->StartLocal(job, On(job, {0})).ok());
  store_->FailNext("FinishAttempt", ErrnoStatus("write trainq.db", ENOSPC));
  ASSERT_TRUE(shims_.Exit(RunDir(job.id, 1), Exited(3)));
  EXPECT_TRUE(agent_->live().empty());  // its GPUs are free: the shim is gone
  const UnrecordedEnd* u = agent_->UnrecordedEndOf(job.id);
  ASSERT_NE(u, nullptr);
  EXPECT_THAT(u->problem, HasSubstr("disk full in " + paths_.state_dir));
  EXPECT_EQ(Get(job.id).state, JobState::kRunning);
  std::string id = std::to_string(job.id);
  EXPECT_THAT(events_, ElementsAre("started " + id, "freed"));  // nothing done yet
  EXPECT_FALSE(agent_->RetryUnrecordedEnds());
  EXPECT_EQ(agent_->UnrecordedEndOf(job.id), nullptr);
  EXPECT_EQ(Get(job.id).state, JobState::kFailed);
  EXPECT_EQ(events_.back(), "done " + id);
}

TEST_F(AgentTest, AnEndWhileTheStoreIsUnreachableIsWrittenWhenItAnswers) {
  Job job = Submit();
  ASSERT_TRUE(agent_->StartLocal(job, On(job, {0})).ok());
  store_->FailNext("FinishAttempt", Status::Unavailable("store unreachable: redis 10.0.0.10:6379"),
                   3);
  ASSERT_TRUE(shims_.Exit(RunDir(job.id, 1), Exited(0)));
  const UnrecordedEnd* u = agent_->UnrecordedEndOf(job.id);
  ASSERT_NE(u, nullptr);
  EXPECT_THAT(u->problem, HasSubstr("store unreachable"));
  EXPECT_TRUE(agent_->RetryUnrecordedEnds());  // the outage goes on
  EXPECT_TRUE(agent_->RetryUnrecordedEnds());
  EXPECT_EQ(Get(job.id).state, JobState::kRunning);
  EXPECT_FALSE(agent_->RetryUnrecordedEnds());  // it answers
  Job ended = Get(job.id);
  EXPECT_EQ(ended.state, JobState::kSucceeded);
  ASSERT_EQ(ended.attempts.size(), 1u);
  EXPECT_EQ(ended.attempts[0].exit_code, 0);
  EXPECT_EQ(events_.back(), "done " + std::to_string(job.id));
}

TEST_F(AgentTest, EndsKeptThroughAnOutageAreWrittenInTheOrderTheyCame) {
  Job first = Submit();
  Job second = Submit();
  ASSERT_TRUE(agent_->StartLocal(first, On(first, {0})).ok());
  ASSERT_TRUE(agent_->StartLocal(second, On(second, {1})).ok());
  store_->FailNext("FinishAttempt", Status::Unavailable("store unreachable"), 2);
  ASSERT_TRUE(shims_.Exit(RunDir(second.id, 1), Exited(0)));  // the later id ends first
  ASSERT_TRUE(shims_.Exit(RunDir(first.id, 1), Exited(0)));
  events_.clear();
  EXPECT_FALSE(agent_->RetryUnrecordedEnds());
  EXPECT_THAT(events_,
              ElementsAre("done " + std::to_string(second.id), "done " + std::to_string(first.id)));
}

TEST_F(AgentTest, AnEndThatLandedThoughItsAnswerWasLostIsNotWrittenTwice) {
  Job job = Submit();
  ASSERT_TRUE(agent_->StartLocal(job, On(job, {0})).ok());
  store_->FailNext("FinishAttempt", Status::Unavailable("store unreachable: reply lost"));
  ASSERT_TRUE(shims_.Exit(RunDir(job.id, 1), Exited(0)));
  const UnrecordedEnd* u = agent_->UnrecordedEndOf(job.id);
  ASSERT_NE(u, nullptr);
  // The write had reached the store: the store holds this end.
  ASSERT_TRUE(store_->FinishAttempt(job.id, 1, u->end).ok());
  EXPECT_FALSE(agent_->RetryUnrecordedEnds());  // refused as a repeat, taken as recorded
  EXPECT_EQ(events_.back(), "done " + std::to_string(job.id));
  Job ended = Get(job.id);
  EXPECT_EQ(ended.state, JobState::kSucceeded);
  EXPECT_EQ(ended.attempts.size(), 1u);
}

TEST_F(AgentTest, ARequeuedEndTellsTheQueue) {
  Job job = Submit(1, /*retries=*/1);
  ASSERT_TRUE(agent_->StartLocal(job, On(job, {0})).ok());
  config_.oom_patterns = DefaultOomPatterns();
  config_.oom_backoff_ms = 1000;
  ExitRecord oom = Exited(1);
  ASSERT_TRUE(
      shims_.Exit(RunDir(job.id, 1), oom,
                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"));
  EXPECT_EQ(Get(job.id).state, JobState::kQueued);
  std::string id = std::to_string(job.id);
  EXPECT_THAT(events_, ElementsAre("started " + id, "requeued " + id + " oom", "freed"));
}

TEST_F(AgentTest, CancelSignalsTheShimAndTheEndSaysCancelled) {
  Job job = Submit();
  std::string message;
  EXPECT_EQ(agent_->Cancel(job.id, "ada", &message).code(), Code::kNotFound);
  ASSERT_TRUE(agent_->StartLocal(job, On(job, {0})).ok());
  ASSERT_TRUE(agent_->Cancel(job.id, "ada", &message).ok());
  EXPECT_THAT(message, HasSubstr("SIGTERM"));
  EXPECT_THAT(shims_.Find(RunDir(job.id, 1))->signals, ElementsAre(SIGTERM));
  ASSERT_TRUE(shims_.Crash(RunDir(job.id, 1)));  // ended by the signal before it wrote anything
  EXPECT_EQ(Get(job.id).state, JobState::kCancelled);
}

TEST_F(AgentTest, ANewAgentReadoptsLiveShimsAndCollectsThoseThatEnded) {
  Job running = Submit();
  Job ended = Submit();
  ASSERT_TRUE(agent_->StartLocal(running, On(running, {0})).ok());
  ASSERT_TRUE(agent_->StartLocal(ended, On(ended, {1})).ok());
  agent_->Stop();  // the daemon goes away; its shims run on
  ASSERT_TRUE(shims_.Exit(RunDir(ended.id, 1), Exited(0)));
  agent_ = MakeAgent();
  events_.clear();
  agent_->RecoverAttempts(/*unstarted_wait=*/false);
  EXPECT_EQ(agent_->live().size(), 1u);
  EXPECT_TRUE(agent_->live().count(running.id));
  EXPECT_EQ(Get(ended.id).state, JobState::kSucceeded);
  EXPECT_THAT(events_, ElementsAre("done " + std::to_string(ended.id), "freed"));
  // The re-adopted shim is watched again: its exit is this agent's.
  ASSERT_TRUE(shims_.Exit(RunDir(running.id, 1), Exited(0)));
  EXPECT_EQ(Get(running.id).state, JobState::kSucceeded);
}

TEST_F(AgentTest, AClusterAttemptNotStartedYetIsLeftForItsStartAndARefusedRecordNeverRuns) {
  Job job = Submit();
  Placement p;
  p.node = "node-a";
  p.gpu_indices = {0};
  p.gpu_uuids = {"GPU-0"};
  p.run_dir = RunDir(job.id, 1);
  p.log_path = LogPath(p.run_dir);
  ASSERT_TRUE(store_->StartAttempt(job.id, 0, p, kT0).ok());  // the leader placed it here
  // The job was stored unsigned: a cluster's agent refuses it.
  ClusterKey key(std::string(64, 'k'));
  std::unique_ptr<Trust> trust = ClusterTrust(key);
  agent_ = MakeAgent(*trust);
  agent_->RecoverAttempts(/*unstarted_wait=*/true);
  EXPECT_TRUE(agent_->live().empty());
  EXPECT_EQ(Get(job.id).state, JobState::kStarting);  // not ended: its start is still to come
  Status st = agent_->StartPart(Get(job.id), 1, p, -1);
  EXPECT_THAT(st.message(), HasSubstr("carries no signature of a trainq node"));
  EXPECT_EQ(shims_.Find(p.run_dir), nullptr);  // nothing was launched
  EXPECT_FALSE(IsDirectory(p.run_dir));
  agent_.reset();  // before the trust it holds
}

}  // namespace
}  // namespace trainq
