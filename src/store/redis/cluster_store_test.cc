// The cluster half of the Redis store against a real redis-server: nodes, the leader lease
// and its fence, lost nodes, remote cancels, events, and Redis going away and coming back.
// Leases and events are real time here; waits are short polls with a deadline.
#include <gmock/gmock.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "src/store/redis/redis_test_util.h"
#include "src/store/store_conformance.h"

namespace trainq {
namespace {

using redis::RedisServer;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr UnixMs kT0 = 1'790'000'000'000;

// Polls `done` until it holds or `ms` pass.
template <class F>
bool Eventually(F done, int ms = 3000) {
  auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// The events a subscription handed on, for tests to wait on.
class EventLog {
 public:
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& e) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(e);
      cv_.notify_all();
    };
  }
  bool WaitFor(const std::string& event, int ms = 3000, long times = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(ms),
                        [&] { return std::count(events_.begin(), events_.end(), event) >= times; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

class ClusterStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }

  std::unique_ptr<ClusterStore> Open() {
    Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(server_.Target());
    EXPECT_TRUE(IsOk(store));
    return store.ok() ? std::move(store).value() : nullptr;
  }

  static NodeRecord Node(std::string name, std::string info = "{}") {
    NodeRecord n;
    n.name = std::move(name);
    n.address = "10.0.0.7";
    n.api_url = "https://10.0.0.7:7070";
    n.runs_dir = "/var/lib/trainq/runs";
    n.master_port_first = 29500;
    n.master_port_last = 29599;
    n.info = std::move(info);
    n.version = "0.1.0";
    return n;
  }

  JobId Submit() {
    JobSpec spec;
    spec.name = "train";
    spec.command = {"python", "train.py"};
    spec.user = "alice";
    Result<std::vector<JobId>> ids = store_->Submit(std::span(&spec, 1), kT0);
    EXPECT_TRUE(IsOk(ids));
    return ids.ok() ? ids->front() : 0;
  }

  // A job running attempt expected_attempt + 1 on `node`.
  void RunOn(JobId id, const std::string& node, int expected_attempt = 0) {
    Placement p;
    p.node = node;
    p.gpu_indices = {0};
    ASSERT_TRUE(IsOk(store_->StartAttempt(id, expected_attempt, p, kT0)));
    ASSERT_TRUE(IsOk(store_->MarkRunning(id, expected_attempt + 1, 42, 43, kT0)));
  }

  Job Fetch(JobId id) {
    Result<Job> job = store_->Get(id);
    EXPECT_TRUE(IsOk(job));
    return job.ok() ? *job : Job{};
  }

  // A subscription that is known to receive: probe events are published until one arrives.
  std::unique_ptr<EventSubscription> Listen(EventLog& log) {
    std::unique_ptr<EventSubscription> sub = store_->Subscribe(log.Sink());
    bool up = Eventually([&] {
      EXPECT_TRUE(IsOk(store_->Publish("probe")));
      return log.WaitFor("probe", 50);
    });
    EXPECT_TRUE(up) << "the subscription never received an event";
    return sub;
  }

  RedisServer server_;
  std::unique_ptr<ClusterStore> store_;
};

// --- Nodes ---

TEST_F(ClusterStoreTest, HeartbeatRegistersNodesWithTheStoresClock) {
  Result<UnixMs> first = store_->Heartbeat(Node("gpu07", R"({"gpus":8})"));
  ASSERT_TRUE(IsOk(first));
  ASSERT_TRUE(IsOk(store_->Heartbeat(Node("gpu02"))));
  Result<UnixMs> again = store_->Heartbeat(Node("gpu07", R"({"gpus":7})"));
  ASSERT_TRUE(IsOk(again));
  EXPECT_GE(*again, *first);
  Result<std::vector<NodeRecord>> nodes = store_->Nodes();
  ASSERT_TRUE(IsOk(nodes));
  ASSERT_EQ(nodes->size(), 2u);
  const NodeRecord& n = (*nodes)[1];
  EXPECT_EQ((*nodes)[0].name, "gpu02");
  EXPECT_EQ(n.name, "gpu07");
  EXPECT_EQ(n.address, "10.0.0.7");
  EXPECT_EQ(n.api_url, "https://10.0.0.7:7070");
  EXPECT_EQ(n.runs_dir, "/var/lib/trainq/runs");
  EXPECT_EQ(n.master_port_first, 29500);
  EXPECT_EQ(n.master_port_last, 29599);
  EXPECT_EQ(n.info, R"({"gpus":7})");
  EXPECT_EQ(n.version, "0.1.0");
  EXPECT_EQ(n.joined_at, *first);
  EXPECT_EQ(n.heartbeat_at, *again);
  EXPECT_FALSE(n.lost);
  EXPECT_FALSE(n.drained);
  // The store's clock, not the test's fixed times: within a minute of this machine's.
  auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  EXPECT_NEAR(static_cast<double>(*again), static_cast<double>(wall), 60'000);
  EXPECT_TRUE(HasCode(store_->Heartbeat(Node("bad name")), Code::kInvalid));
}

TEST_F(ClusterStoreTest, DrainAndResumeAreKeptAcrossHeartbeats) {
  ASSERT_TRUE(IsOk(store_->Heartbeat(Node("gpu07"))));
  ASSERT_TRUE(IsOk(store_->SetDrained("gpu07", true)));
  ASSERT_TRUE(IsOk(store_->Heartbeat(Node("gpu07"))));
  EXPECT_TRUE(store_->Nodes()->front().drained);
  ASSERT_TRUE(IsOk(store_->SetDrained("gpu07", false)));
  EXPECT_FALSE(store_->Nodes()->front().drained);
  Status unknown = store_->SetDrained("gpu99", true);
  EXPECT_TRUE(HasCode(unknown, Code::kNotFound));
  EXPECT_THAT(unknown.message(), HasSubstr("gpu99"));
}

TEST_F(ClusterStoreTest, OnlyALostIdleNodeCanBeRemoved) {
  Result<UnixMs> beat = store_->Heartbeat(Node("gpu07"));
  ASSERT_TRUE(IsOk(beat));
  EXPECT_TRUE(HasCode(store_->RemoveNode("gpu07"), Code::kConflict));
  ASSERT_TRUE(IsOk(store_->MarkNodeLost("gpu07", *beat + 1, 3)));
  ASSERT_TRUE(IsOk(store_->RemoveNode("gpu07")));
  EXPECT_TRUE(store_->Nodes()->empty());
  EXPECT_TRUE(HasCode(store_->RemoveNode("gpu07"), Code::kNotFound));
}

// --- The leader lease ---

TEST_F(ClusterStoreTest, LeaderLeaseIsTakenRenewedAndLapsesToANewEpoch) {
  Result<LeaderLease> a = store_->AcquireLeader("gpu01", 200);
  ASSERT_TRUE(IsOk(a));
  EXPECT_TRUE(a->mine);
  EXPECT_EQ(a->leader, "gpu01");
  EXPECT_GT(a->epoch, 0);
  EXPECT_GT(a->now, 0);
  Result<LeaderLease> b = store_->AcquireLeader("gpu02", 200);
  ASSERT_TRUE(IsOk(b));
  EXPECT_FALSE(b->mine);
  EXPECT_EQ(b->leader, "gpu01");
  EXPECT_EQ(b->epoch, a->epoch);
  Result<LeaderLease> renewed = store_->AcquireLeader("gpu01", 200);
  ASSERT_TRUE(IsOk(renewed));
  EXPECT_TRUE(renewed->mine);
  EXPECT_EQ(renewed->epoch, a->epoch);
  // gpu01 stops renewing: within a lease or two gpu02 takes over in a later epoch.
  int64_t epoch = 0;
  ASSERT_TRUE(Eventually([&] {
    Result<LeaderLease> l = store_->AcquireLeader("gpu02", 200);
    epoch = l.ok() && l->mine ? l->epoch : 0;
    return epoch != 0;
  }));
  EXPECT_GT(epoch, a->epoch);
  EXPECT_FALSE(store_->AcquireLeader("gpu01", 200)->mine);
}

TEST_F(ClusterStoreTest, ResignGivesTheLeaseUpOnlyForItsHolderAndEpoch) {
  Result<LeaderLease> a = store_->AcquireLeader("gpu01", 60'000);
  ASSERT_TRUE(IsOk(a));
  ASSERT_TRUE(IsOk(store_->ResignLeader("gpu01", a->epoch + 1)));
  ASSERT_TRUE(IsOk(store_->ResignLeader("gpu02", a->epoch)));
  EXPECT_FALSE(store_->AcquireLeader("gpu02", 60'000)->mine);
  ASSERT_TRUE(IsOk(store_->ResignLeader("gpu01", a->epoch)));
  Result<LeaderLease> b = store_->AcquireLeader("gpu02", 60'000);
  EXPECT_TRUE(b->mine);
  EXPECT_GT(b->epoch, a->epoch);
}

TEST_F(ClusterStoreTest, ADeposedLeadersWritesAreRefusedAndChangeNothing) {
  JobId id = Submit();
  Result<UnixMs> beat = store_->Heartbeat(Node("gpu05"));
  ASSERT_TRUE(IsOk(beat));
  JobId running = Submit();
  RunOn(running, "gpu05");
  Result<LeaderLease> old = store_->AcquireLeader("gpu01", 60'000);
  ASSERT_TRUE(IsOk(old));
  store_->SetLeaderFence("gpu01", old->epoch);
  std::vector<std::pair<JobId, std::string>> reasons = {{id, "needs 1 GPU"}};
  ASSERT_TRUE(IsOk(store_->SetReasons(reasons)));  // while it leads
  ASSERT_TRUE(IsOk(store_->ResignLeader("gpu01", old->epoch)));
  std::unique_ptr<ClusterStore> other = Open();
  Result<LeaderLease> now = other->AcquireLeader("gpu02", 60'000);
  ASSERT_TRUE(IsOk(now));
  ASSERT_TRUE(now->mine);

  Placement p;
  p.node = "gpu05";
  Status start = store_->StartAttempt(id, 0, p, kT0);
  EXPECT_TRUE(HasCode(start, Code::kConflict));
  EXPECT_THAT(start.message(), HasSubstr("not the leader"));
  reasons[0].second = "stale";
  EXPECT_TRUE(HasCode(store_->SetReasons(reasons), Code::kConflict));
  Result<std::vector<JobId>> lost = store_->MarkNodeLost("gpu05", *beat + 1, 3);
  EXPECT_TRUE(HasCode(lost, Code::kConflict));
  EXPECT_THAT(lost.status().message(), HasSubstr("not the leader"));
  Job job = Fetch(id);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.reason, "needs 1 GPU");
  EXPECT_TRUE(job.attempts.empty());
  EXPECT_EQ(Fetch(running).state, JobState::kRunning);
  EXPECT_FALSE(store_->Nodes()->front().lost);

  // The new leader, fenced in its own epoch, may.
  other->SetLeaderFence("gpu02", now->epoch);
  EXPECT_TRUE(IsOk(other->StartAttempt(id, 0, p, kT0)));
  // Unfenced (epoch 0) writes are not checked.
  store_->SetLeaderFence("gpu01", 0);
  EXPECT_TRUE(IsOk(store_->SetReasons(reasons)));
}

// --- Lost nodes ---

TEST_F(ClusterStoreTest, ALostNodesJobsAreQueuedAgainUntilMaxNodeFailures) {
  JobId id = Submit();
  JobId elsewhere = Submit();
  RunOn(elsewhere, "gpu02");
  for (int k = 1; k <= 3; ++k) {
    Result<UnixMs> beat = store_->Heartbeat(Node("gpu07"));
    ASSERT_TRUE(IsOk(beat));
    RunOn(id, "gpu07", k - 1);
    Result<std::vector<Job>> active = store_->ActiveOn("gpu07");
    ASSERT_TRUE(IsOk(active));
    ASSERT_EQ(active->size(), 1u);
    EXPECT_EQ((*active)[0].id, id);
    EXPECT_EQ((*active)[0].current()->n, k);

    Result<std::vector<JobId>> ended = store_->MarkNodeLost("gpu07", *beat + 1, 2);
    ASSERT_TRUE(IsOk(ended));
    EXPECT_THAT(*ended, ElementsAre(id));
    Job job = Fetch(id);
    EXPECT_EQ(job.node_failures, k);
    ASSERT_EQ(job.attempts.size(), static_cast<size_t>(k));
    EXPECT_EQ(job.attempts.back().state, JobState::kFailed);
    EXPECT_EQ(job.attempts.back().end_reason, "node gpu07 lost");
    EXPECT_TRUE(job.attempts.back().ended_at.has_value());
    if (k <= 2) {
      EXPECT_EQ(job.state, JobState::kQueued);
      EXPECT_EQ(job.reason,
                "node gpu07 lost; queued again (node failure " + std::to_string(k) + " of 2)");
      EXPECT_GE(job.queued_at, *beat);
    } else {
      EXPECT_EQ(job.state, JobState::kFailed);
      EXPECT_EQ(job.reason, "node gpu07 lost; 3 node failures, max_node_failures = 2");
    }
    EXPECT_TRUE(store_->Nodes()->back().lost);
    EXPECT_TRUE(store_->ActiveOn("gpu07")->empty());
    // The lost node's late word on the attempt taken from it is refused.
    AttemptEnd end;
    end.attempt_state = JobState::kSucceeded;
    end.job_state = JobState::kSucceeded;
    EXPECT_TRUE(HasCode(store_->FinishAttempt(id, k, end), Code::kConflict));
    EXPECT_TRUE(HasCode(store_->MarkRunning(id, k, 1, 1, kT0), Code::kConflict));
  }
  EXPECT_EQ(Fetch(id).spec.retries, 3) << "node failures do not use OOM retries";
  EXPECT_EQ(Fetch(elsewhere).state, JobState::kRunning);
}

// A node judged lost may only have been frozen while its jobs ended: within wait_ms its own
// report of an attempt's end is taken, and the job ends as it did instead of running again.
TEST_F(ClusterStoreTest, AFrozenNodesLateEndIsTakenWhileTheJobWaitsForIt) {
  JobId finished = Submit();
  JobId fenced = Submit();
  Result<UnixMs> beat = store_->Heartbeat(Node("gpu07"));
  ASSERT_TRUE(IsOk(beat));
  RunOn(finished, "gpu07");
  RunOn(fenced, "gpu07");
  ASSERT_TRUE(IsOk(store_->MarkNodeLost("gpu07", *beat + 1, 3, 60'000)));
  Job waiting = Fetch(finished);
  EXPECT_EQ(waiting.state, JobState::kQueued);
  EXPECT_GE(waiting.not_before, *beat + 60'000);  // not placed again before the wait is over
  EXPECT_THAT(waiting.reason,
              HasSubstr("runs elsewhere in 60 s unless gpu07 reports how it ended"));

  AttemptEnd ok;
  ok.attempt_state = JobState::kSucceeded;
  ok.job_state = JobState::kSucceeded;
  ok.exit_code = 0;
  ok.end_reason = ok.job_reason = "exit code 0";
  ASSERT_TRUE(IsOk(store_->FinishAttempt(finished, 1, ok)));
  Job job = Fetch(finished);
  EXPECT_EQ(job.state, JobState::kSucceeded);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].state, JobState::kSucceeded);
  EXPECT_EQ(job.node_failures, 0);
  // Said once: the same end again is an ordinary late record, refused.
  EXPECT_TRUE(HasCode(store_->FinishAttempt(finished, 1, ok), Code::kConflict));

  // An attempt the node stopped itself (self-fencing) goes back to the queue, free to start.
  AttemptEnd requeue;
  requeue.attempt_state = JobState::kFailed;
  requeue.job_state = JobState::kQueued;
  requeue.end_reason = "stopped by self-fencing: node heartbeat lapsed";
  requeue.job_reason = "requeued: " + requeue.end_reason;
  ASSERT_TRUE(IsOk(store_->FinishAttempt(fenced, 1, requeue)));
  EXPECT_EQ(Fetch(fenced).state, JobState::kQueued);
  EXPECT_EQ(Fetch(fenced).not_before, 0);
}

TEST_F(ClusterStoreTest, ALateEndIsRefusedWithoutAWaitOrOnceTheJobRanAgain) {
  JobId id = Submit();
  Result<UnixMs> beat = store_->Heartbeat(Node("gpu07"));
  ASSERT_TRUE(IsOk(beat));
  RunOn(id, "gpu07");
  ASSERT_TRUE(IsOk(store_->MarkNodeLost("gpu07", *beat + 1, 3, 60'000)));
  RunOn(id, "gpu02", 1);  // placed elsewhere (a leader that did not wait)
  AttemptEnd ok;
  ok.attempt_state = JobState::kSucceeded;
  ok.job_state = JobState::kSucceeded;
  EXPECT_TRUE(HasCode(store_->FinishAttempt(id, 1, ok), Code::kConflict));
  EXPECT_EQ(Fetch(id).attempts.back().node, "gpu02");

  JobId now = Submit();
  beat = store_->Heartbeat(Node("gpu08"));
  RunOn(now, "gpu08");
  ASSERT_TRUE(IsOk(store_->MarkNodeLost("gpu08", *beat + 1, 3, 0)));  // lost_node_wait = 0
  EXPECT_EQ(Fetch(now).not_before, 0);
  EXPECT_TRUE(HasCode(store_->FinishAttempt(now, 1, ok), Code::kConflict));
}

TEST_F(ClusterStoreTest, ANodeThatBeatSinceIsNotLost) {
  ASSERT_TRUE(IsOk(store_->Heartbeat(Node("gpu07"))));
  JobId id = Submit();
  RunOn(id, "gpu07");
  Result<UnixMs> beat = store_->Heartbeat(Node("gpu07"));
  ASSERT_TRUE(IsOk(beat));
  Result<std::vector<JobId>> ended = store_->MarkNodeLost("gpu07", *beat, 3);
  ASSERT_TRUE(IsOk(ended));
  EXPECT_TRUE(ended->empty());
  EXPECT_EQ(Fetch(id).state, JobState::kRunning);
  EXPECT_FALSE(store_->Nodes()->front().lost);
}

TEST_F(ClusterStoreTest, ALostNodeThatBeatsAgainRejoins) {
  Result<UnixMs> first = store_->Heartbeat(Node("gpu07"));
  ASSERT_TRUE(IsOk(first));
  ASSERT_TRUE(IsOk(store_->MarkNodeLost("gpu07", *first + 1, 3)));
  ASSERT_TRUE(store_->Nodes()->front().lost);
  Result<UnixMs> back = store_->Heartbeat(Node("gpu07"));
  ASSERT_TRUE(IsOk(back));
  NodeRecord n = store_->Nodes()->front();
  EXPECT_FALSE(n.lost);
  EXPECT_EQ(n.joined_at, *back);
  EXPECT_EQ(n.heartbeat_at, *back);
}

// --- Cancels made on another node ---

TEST_F(ClusterStoreTest, RequestCancelFlagsTheCurrentActiveAttemptOnly) {
  JobId id = Submit();
  EXPECT_TRUE(HasCode(store_->RequestCancel(id, 0, "ada"), Code::kConflict));
  RunOn(id, "gpu07");
  EXPECT_EQ(*store_->CancelRequested(id, 1), std::nullopt);
  EXPECT_TRUE(HasCode(store_->RequestCancel(id, 2, "ada"), Code::kConflict));
  ASSERT_TRUE(IsOk(store_->RequestCancel(id, 1, "carol")));
  EXPECT_EQ(*store_->CancelRequested(id, 1), std::optional<std::string>("carol"));  // who asked
  EXPECT_EQ(*store_->CancelRequested(id, 2), std::nullopt);
  EXPECT_TRUE(HasCode(store_->RequestCancel(id + 100, 1, "ada"), Code::kNotFound));
}

// A preemption the leader decided: the stop rides with the attempt, apart from a cancel.
TEST_F(ClusterStoreTest, RequestStopKeepsTheStopWithTheCurrentActiveAttempt) {
  JobId id = Submit();
  EXPECT_TRUE(HasCode(store_->RequestStop(id, 0, "{}"), Code::kConflict));
  RunOn(id, "gpu07");
  EXPECT_EQ(*store_->StopRequested(id, 1), "");
  std::string stop = R"js({"reason":"preempted by job 9 (priority 100)","stop_in_ms":60000})js";
  ASSERT_TRUE(IsOk(store_->RequestStop(id, 1, stop)));
  EXPECT_EQ(*store_->StopRequested(id, 1), stop);
  EXPECT_EQ(*store_->CancelRequested(id, 1), std::nullopt);  // a stop is no cancel
  EXPECT_TRUE(HasCode(store_->RequestStop(id, 2, stop), Code::kConflict));
}

// --- Events ---

TEST_F(ClusterStoreTest, WritesPublishTheirEvents) {
  EventLog log;
  std::unique_ptr<EventSubscription> sub = Listen(log);
  ASSERT_TRUE(IsOk(store_->Heartbeat(Node("gpu07"))));
  EXPECT_TRUE(log.WaitFor("node gpu07"));
  JobId id = Submit();
  EXPECT_TRUE(log.WaitFor("submit " + std::to_string(id)));  // the ids: the leader reads just those
  RunOn(id, "gpu07");
  EXPECT_TRUE(log.WaitFor("placed gpu07"));
  ASSERT_TRUE(IsOk(store_->RequestCancel(id, 1, "ada")));
  EXPECT_TRUE(log.WaitFor("cancel gpu07 " + std::to_string(id)));
  AttemptEnd end;
  end.attempt_state = JobState::kCancelled;
  end.job_state = JobState::kCancelled;
  ASSERT_TRUE(IsOk(store_->FinishAttempt(id, 1, end)));
  EXPECT_TRUE(log.WaitFor("end " + std::to_string(id)));
  ASSERT_TRUE(IsOk(store_->Requeue(id, "retried", kT0)));
  EXPECT_TRUE(log.WaitFor("requeue " + std::to_string(id)));
  ASSERT_TRUE(IsOk(store_->AcquireLeader("gpu07", 60'000)));
  EXPECT_TRUE(log.WaitFor("leader gpu07"));
  auto start = Clock::now();
  sub.reset();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1)) << "the subscription stops promptly";
}

// --- Redis going away ---

TEST(RedisRestartTest, RedisRestartedFromItsAofKeepsTheQueue) {
  RedisServer server(/*aof=*/true);
  ASSERT_TRUE(server.Start());
  Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(server.Target());
  ASSERT_TRUE(IsOk(store));
  std::vector<JobSpec> specs(3);
  for (JobSpec& s : specs) {
    s.command = {"python", "train.py"};
    s.user = "alice";
  }
  Result<std::vector<JobId>> ids = (*store)->Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  Placement p;
  p.node = "gpu07";
  ASSERT_TRUE(IsOk((*store)->StartAttempt((*ids)[1], 0, p, kT0)));
  server.Kill();  // SIGKILL: no shutdown save
  ASSERT_TRUE(server.Start());
  // The call that finds the old connection gone says so; the next one reconnects (and
  // reloads the scripts Redis forgot).
  Result<std::vector<Job>> after = (*store)->List({.states = {}, .with_attempts = true});
  if (!after.ok()) {
    EXPECT_TRUE(HasCode(after, Code::kUnavailable));
    after = (*store)->List({.states = {}, .with_attempts = true});
  }
  ASSERT_TRUE(IsOk(after));
  ASSERT_EQ(after->size(), 3u);
  EXPECT_EQ((*after)[0].state, JobState::kQueued);
  EXPECT_EQ((*after)[1].state, JobState::kStarting);
  EXPECT_EQ((*after)[1].attempts.at(0).node, "gpu07");
  EXPECT_EQ((*after)[2].state, JobState::kQueued);
  Result<std::vector<JobId>> next = (*store)->Submit(std::span(&specs[0], 1), kT0);
  ASSERT_TRUE(IsOk(next));
  EXPECT_GT(next->front(), ids->back()) << "ids are never reused";
}

TEST(RedisRestartTest, CallsWhileRedisIsDownAreUnavailableAndWorkOnceItIsBack) {
  RedisServer server;
  ASSERT_TRUE(server.Start());
  Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(server.Target());
  ASSERT_TRUE(IsOk(store));
  EventLog log;
  std::unique_ptr<EventSubscription> sub = (*store)->Subscribe(log.Sink());
  // Once subscribed it says so: what was published before may have been missed.
  ASSERT_TRUE(log.WaitFor("reconnected"));
  server.Kill();
  Result<std::vector<Job>> down = (*store)->List({});
  ASSERT_TRUE(HasCode(down, Code::kUnavailable));
  EXPECT_THAT(down.status().message(),
              HasSubstr("store unreachable: redis 127.0.0.1:" + std::to_string(server.port())));
  NodeRecord node;
  node.name = "gpu07";
  EXPECT_TRUE(HasCode((*store)->Heartbeat(node), Code::kUnavailable));
  ASSERT_TRUE(server.Start());
  JobSpec spec;
  spec.command = {"true"};
  spec.user = "alice";
  EXPECT_TRUE(IsOk((*store)->Submit(std::span(&spec, 1), kT0)));
  EXPECT_TRUE(log.WaitFor("reconnected", 8000, 2)) << "the subscription comes back and says so";
}

// --- Gangs (--nodes N): one attempt, a part on each node ---

class GangStoreTest : public ClusterStoreTest {
 protected:
  // A gang's attempt 1 placed on gpu1 (part 0) and gpu2 (part 1).
  JobId StartGang() {
    JobId id = Submit();
    Placement p;
    p.node = "gpu1";
    p.gpu_indices = {0, 1};
    p.master_port = 29500;
    p.master_addr = "10.0.0.1";
    p.parts = {{"gpu1", {0, 1}, {"GPU-a", "GPU-b"}, "/s1/runs/1/1", "/s1/runs/1/1/output.log"},
               {"gpu2", {2, 3}, {"GPU-c", "GPU-d"}, "/s2/runs/1/1", "/s2/runs/1/1/output.log"}};
    EXPECT_TRUE(IsOk(store_->StartAttempt(id, 0, p, kT0)));
    return id;
  }

  static AttemptEnd PartEnd(int part, JobState state) {
    AttemptEnd end;
    end.attempt_state = state;
    end.job_state = state;
    end.ended_at = kT0 + 1000;
    end.end_reason = std::string(StateName(state));
    end.part = part;
    end.parts = 2;
    return end;
  }

  std::vector<JobId> ActiveIds(const std::string& node) {
    Result<std::vector<Job>> jobs = store_->ActiveOn(node);
    EXPECT_TRUE(IsOk(jobs));
    std::vector<JobId> ids;
    for (const Job& j : jobs.ok() ? *jobs : std::vector<Job>{}) ids.push_back(j.id);
    return ids;
  }
};

TEST_F(GangStoreTest, PartsAreKeptAndEachNodeSeesTheAttempt) {
  JobId id = StartGang();
  Job job = Fetch(id);
  ASSERT_EQ(job.attempts.size(), 1u);
  const Attempt& a = job.attempts[0];
  ASSERT_EQ(a.parts.size(), 2u);
  EXPECT_EQ(a.parts[1].node, "gpu2");
  EXPECT_EQ(a.parts[1].gpu_indices, (std::vector<int>{2, 3}));
  EXPECT_EQ(a.parts[1].gpu_uuids, (std::vector<std::string>{"GPU-c", "GPU-d"}));
  EXPECT_EQ(a.parts[1].run_dir, "/s2/runs/1/1");
  EXPECT_EQ(a.master_addr, "10.0.0.1");
  int rank = -1;
  ASSERT_TRUE(a.PartOn("gpu2", &rank));
  EXPECT_EQ(rank, 1);
  EXPECT_THAT(ActiveIds("gpu1"), ElementsAre(id));
  EXPECT_THAT(ActiveIds("gpu2"), ElementsAre(id));
  EXPECT_TRUE(ActiveIds("gpu3").empty());
}

TEST_F(GangStoreTest, SucceedsOnlyWhenEveryPartHas) {
  JobId id = StartGang();
  ASSERT_TRUE(IsOk(store_->MarkRunning(id, 1, 42, 43, kT0)));
  ASSERT_TRUE(IsOk(store_->FinishAttempt(id, 1, PartEnd(1, JobState::kSucceeded))));
  EXPECT_EQ(Fetch(id).state, JobState::kRunning);  // part 0 still runs
  EXPECT_THAT(ActiveIds("gpu1"), ElementsAre(id));
  ASSERT_TRUE(IsOk(store_->FinishAttempt(id, 1, PartEnd(0, JobState::kSucceeded))));
  EXPECT_EQ(Fetch(id).state, JobState::kSucceeded);
  EXPECT_TRUE(ActiveIds("gpu1").empty());
  EXPECT_TRUE(ActiveIds("gpu2").empty());
}

TEST_F(GangStoreTest, OnePartFailingEndsTheWholeAttemptOnEveryNode) {
  JobId id = StartGang();
  ASSERT_TRUE(IsOk(store_->FinishAttempt(id, 1, PartEnd(1, JobState::kFailed))));
  EXPECT_EQ(Fetch(id).state, JobState::kFailed);
  EXPECT_TRUE(ActiveIds("gpu1").empty());  // part 0's node stops its part
  // Part 0's own end comes late and is refused.
  EXPECT_TRUE(
      HasCode(store_->FinishAttempt(id, 1, PartEnd(0, JobState::kCancelled)), Code::kConflict));
}

TEST_F(GangStoreTest, AnElasticGangGrowsByAPartThatItsNodeSeesAndWhoseEndCounts) {
  JobId id = StartGang();
  ASSERT_TRUE(IsOk(store_->MarkRunning(id, 1, 42, 43, kT0)));
  std::vector<AttemptPart> before = Fetch(id).attempts[0].parts;
  AttemptPart added{"gpu3", {0}, {"GPU-e"}, "/s3/runs/1/1", "/s3/runs/1/1/output.log", kT0 + 500};
  ASSERT_TRUE(IsOk(store_->AddPart(id, 1, before, added)));
  const Attempt a = Fetch(id).attempts[0];
  ASSERT_EQ(a.parts.size(), 3u);
  EXPECT_EQ(a.parts[2].node, "gpu3");
  EXPECT_EQ(a.parts[2].gpu_uuids, (std::vector<std::string>{"GPU-e"}));
  EXPECT_EQ(a.parts[2].added_at, kT0 + 500);
  EXPECT_EQ(a.parts[0].added_at, 0);
  EXPECT_THAT(ActiveIds("gpu3"), ElementsAre(id));
  // Parts that changed meanwhile, or an attempt no longer current: refused, nothing written.
  EXPECT_TRUE(HasCode(store_->AddPart(id, 1, before, added), Code::kConflict));
  EXPECT_TRUE(HasCode(store_->AddPart(id, 2, a.parts, added), Code::kConflict));
  EXPECT_EQ(Fetch(id).attempts[0].parts.size(), 3u);
  // Parts 0 and 1 started when the gang had two: the attempt succeeds only once the third has.
  ASSERT_TRUE(IsOk(store_->FinishAttempt(id, 1, PartEnd(0, JobState::kSucceeded))));
  ASSERT_TRUE(IsOk(store_->FinishAttempt(id, 1, PartEnd(1, JobState::kSucceeded))));
  EXPECT_EQ(Fetch(id).state, JobState::kRunning);
  ASSERT_TRUE(IsOk(store_->FinishAttempt(id, 1, PartEnd(2, JobState::kSucceeded))));
  EXPECT_EQ(Fetch(id).state, JobState::kSucceeded);
  EXPECT_TRUE(ActiveIds("gpu3").empty());
}

// A gang whose parts are ending, or that is asked to stop or cancel, takes no new part: it
// would wait on a part that joins a rendezvous nobody hosts any more.
TEST_F(GangStoreTest, AGangThatIsEndingOrStoppingGetsNoNewPart) {
  AttemptPart added{"gpu3", {0}, {"GPU-e"}, "/s3/runs/1/1", "/s3/runs/1/1/output.log", kT0 + 500};
  JobId done = StartGang();
  ASSERT_TRUE(IsOk(store_->MarkRunning(done, 1, 42, 43, kT0)));
  ASSERT_TRUE(IsOk(store_->FinishAttempt(done, 1, PartEnd(0, JobState::kSucceeded))));
  EXPECT_TRUE(
      HasCode(store_->AddPart(done, 1, Fetch(done).attempts[0].parts, added), Code::kConflict));
  JobId stopped = StartGang();
  ASSERT_TRUE(IsOk(store_->RequestStop(stopped, 1, "{}")));
  EXPECT_TRUE(HasCode(store_->AddPart(stopped, 1, Fetch(stopped).attempts[0].parts, added),
                      Code::kConflict));
  JobId cancelled = StartGang();
  ASSERT_TRUE(IsOk(store_->RequestCancel(cancelled, 1, "ada")));
  EXPECT_TRUE(HasCode(store_->AddPart(cancelled, 1, Fetch(cancelled).attempts[0].parts, added),
                      Code::kConflict));
  for (JobId id : {done, stopped, cancelled}) {
    EXPECT_EQ(Fetch(id).attempts[0].parts.size(), 2u);
    EXPECT_TRUE(ActiveIds("gpu3").empty());
  }
}

TEST_F(GangStoreTest, LosingAnyPartsNodeRequeuesTheGang) {
  ASSERT_TRUE(IsOk(store_->Heartbeat(Node("gpu1"))));
  ASSERT_TRUE(IsOk(store_->Heartbeat(Node("gpu2"))));
  JobId id = StartGang();
  Result<std::vector<JobId>> ended = store_->MarkNodeLost("gpu2", kT0 * 10, 3);
  ASSERT_TRUE(IsOk(ended));
  EXPECT_THAT(*ended, ElementsAre(id));
  Job job = Fetch(id);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.attempts[0].end_reason, "node gpu2 lost");
  EXPECT_TRUE(ActiveIds("gpu1").empty());
}

}  // namespace
}  // namespace trainq
