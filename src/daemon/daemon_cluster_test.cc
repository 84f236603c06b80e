// The daemon's cluster mode (cluster.cc, and its paths in agent.cc and scheduler.cc): two
// daemons ("nodes") in one process, each with its own fakes (clock, GPUs, shims), state dir
// and event loop, sharing one real Redis store. They are driven as daemon_test.cc drives
// one: the API (Handle), the cluster timer's callback and the loop (io.poll()). Leases and
// events are Redis's, so real time: waits are short polls with a deadline, never sleeps.
#include "src/daemon/daemon_impl.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/core/oom.h"
#include "src/daemon/fake_shim_launcher.h"
#include "src/os/fake_clock.h"
#include "src/os/gpu/fake_gpu_probe.h"
#include "src/os/run_dir.h"
#include "src/os/state_paths.h"
#include "src/store/faulty_store.h"
#include "src/store/redis/redis_test_util.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr uint64_t kGiB = 1ull << 30;
constexpr UnixMs kT0 = 1'800'000'000'000;

GpuInfo Gpu(int index) {
  GpuInfo g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.name = "Fake 80GB";
  g.total_bytes = 80 * kGiB;
  g.free_bytes = g.total_bytes;
  g.processes_known = true;
  return g;
}

ExitRecord Exited(int code) {
  ExitRecord r;
  r.exit_code = code;
  r.started_at = kT0;
  r.ended_at = kT0;
  return r;
}

std::map<std::string, std::string> EnvOf(const std::string& run_dir) {
  Result<RunSpec> spec = ReadRunSpec(run_dir);
  EXPECT_TRUE(spec.ok()) << run_dir << ": " << spec.status().ToString();
  std::map<std::string, std::string> env;
  if (spec.ok()) {
    for (const auto& [k, v] : spec->env) env[k] = v;
  }
  return env;
}

// One node: a daemon with its own fakes, state dir and loop.
struct Node {
  std::string name;
  StatePaths paths;
  Config config;
  FakeClock clock{kT0};
  std::shared_ptr<GpuSnapshot> snapshot = std::make_shared<GpuSnapshot>();
  FakeShims shims;
  boost::asio::io_context io;
  std::unique_ptr<DaemonImpl> daemon;   // after io: destroyed before it
  FaultyClusterStore* store = nullptr;  // the daemon's store, faults injectable

  void Loop() {
    io.restart();
    io.poll();
  }
  std::string RunDir(JobId id, int attempt) const {
    return paths.runs + "/" + std::to_string(id) + "/" + std::to_string(attempt);
  }
  const FakeShims::Shim* Shim(JobId id, int attempt) const {
    return shims.Find(RunDir(id, attempt));
  }
};

class DaemonClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new redis::RedisServer();
    ASSERT_TRUE(server_->Start());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = ::testing::TempDir() + "trainq_cluster_test_" + std::to_string(::getpid()) + "_" + test;
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    target_ = server_->Target("t:" + test + ":");  // a fresh store per test
    Result<std::unique_ptr<ClusterStore>> observer = OpenRedisStore(target_);
    ASSERT_TRUE(observer.ok()) << observer.status().ToString();
    observer_ = std::move(*observer);
  }
  void TearDown() override {
    frozen_.reset();
    for (auto& [name, node] : nodes_) node->daemon.reset();
    nodes_.clear();
    std::filesystem::remove_all(dir_);
  }

  // A node named `name` with `gpus`; its daemon starts with Start().
  Node& AddNode(const std::string& name, std::vector<GpuInfo> gpus,
                int64_t leader_lease_ms = 60'000) {
    auto node = std::make_unique<Node>();
    node->name = name;
    node->paths = ResolveStatePaths(dir_ + "/" + name);
    EXPECT_TRUE(MakeDirs(node->paths.runs).ok());
    node->config.node_name = name;
    node->config.node_address = "addr-" + name;
    node->config.cpu_slots = 8;
    node->config.policy.headroom_bytes = 0;
    node->config.oom_patterns = DefaultOomPatterns();
    node->config.leader_lease_ms = leader_lease_ms;
    node->snapshot->source = "fake";
    node->snapshot->gpus = std::move(gpus);
    Node& ref = *node;
    nodes_[name] = std::move(node);
    return ref;
  }

  struct TwoNodes {
    Node& leader;
    Node& worker;
  };
  // node-a, with no GPU, started first (it leads and places for both), and node-b with
  // GPU 0: the cluster most tests here need.
  TwoNodes StartLeaderAndWorker() {
    Node& a = AddNode("node-a", {});
    Node& b = AddNode("node-b", {Gpu(0)});
    Start(a);
    Start(b);
    return {a, b};
  }

  // Open() and StartCluster(), as Serve() does, without the socket and timers.
  void Start(Node& n) {
    Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(target_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto faulty = std::make_unique<FaultyClusterStore>(std::move(*store));
    n.store = faulty.get();
    DaemonSeams seams{std::move(faulty),
                      ProbeChoice{std::make_unique<FakeGpuProbe>(n.snapshot), ""},
                      n.shims.Launcher(), &n.clock};
    seams.cluster_key = ClusterKey(std::string(64, 'k'));
    n.daemon = std::make_unique<DaemonImpl>(n.io, DaemonOptions{n.paths, true, 022}, n.config,
                                            std::move(seams));
    ASSERT_TRUE(n.daemon->Open().ok());
    n.daemon->StartCluster();
    n.Loop();
    // Its subscription connects on a thread of its own: until it listens, the events meant
    // for it are lost (the real daemon's next heartbeat would catch up; tests drive none).
    ++subscribed_;
    ASSERT_TRUE(Eventually([&] { return Subscribers() == subscribed_; }))
        << n.name << " did not subscribe to the cluster's events";
  }

  // How many listen on the cluster's channel (PUBSUB NUMSUB).
  int64_t Subscribers() {
    std::vector<std::string> argv = {"PUBSUB", "NUMSUB", target_.prefix + "events"};
    Result<redis::Reply> r = redis_.Command(argv);
    if (!r.ok() || (*r)->type != REDIS_REPLY_ARRAY || (*r)->elements != 2) return -1;
    return (*r)->element[1]->integer;
  }

  // Runs every started node's loop until `done` holds or 5 s of real time pass (events come
  // from Redis on the subscriptions' threads).
  template <class F>
  bool Eventually(F done) {
    auto deadline = SteadyClock::now() + std::chrono::seconds(5);
    while (true) {
      for (auto& [name, node] : nodes_) {
        if (node->daemon) node->Loop();
      }
      if (done()) return true;
      if (SteadyClock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  HttpResponse Call(Node& n, const std::string& method, const std::string& path,
                    const std::string& body = "") {
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.body = body;
    req.peer_uid = static_cast<int64_t>(::getuid());
    req.peer_pid = ::getpid();
    std::optional<HttpResponse> got;
    n.daemon->Handle(std::move(req), [&got](HttpResponse r) { got = std::move(r); });
    n.Loop();
    EXPECT_TRUE(got.has_value()) << method << " " << path << " was not answered";
    return got.value_or(HttpResponse{599, "", ""});
  }

  JobId Submit(Node& n, json spec) {
    spec["command"] = {"train"};
    spec["cwd"] = dir_;
    HttpResponse r = Call(n, "POST", "/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    json ids = json::parse(r.body, nullptr, false);
    return ids.is_object() && ids.contains("ids") ? ids["ids"][0].get<JobId>() : 0;
  }

  Job Get(JobId id) {
    Result<Job> job = observer_->Get(id);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : Job{};
  }

  // Who holds the lease ("" nobody), read as it is: asking through AcquireLeader could take
  // a lease that just lapsed.
  std::string Leader() {
    std::vector<std::string> argv = {"GET", target_.prefix + "leader"};
    Result<redis::Reply> r = redis_.Command(argv);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || (*r)->type != REDIS_REPLY_STRING) return "";
    std::string holder((*r)->str, (*r)->len);  // "NAME EPOCH"
    return holder.substr(0, holder.rfind(' '));
  }

  // `n` stops being driven (frozen), and a leader of the test's own judges it lost as the
  // real one would once its heartbeat lapsed; the ids of the jobs that ended. Swap
  // n.daemon with frozen_ again to thaw it.
  std::vector<JobId> FreezeAndJudgeLost(Node& n, int64_t wait_ms) {
    n.daemon.swap(frozen_);
    Result<LeaderLease> lease = observer_->AcquireLeader("observer", 60'000);
    EXPECT_TRUE(lease.ok()) << lease.status().ToString();
    if (!lease.ok()) return {};
    Result<std::vector<JobId>> ended = observer_->MarkNodeLost(n.name, lease->now + 1, 3, wait_ms);
    EXPECT_TRUE(ended.ok()) << ended.status().ToString();
    return ended.ok() ? *ended : std::vector<JobId>{};
  }

  // The store's clock (Redis TIME), in ms.
  UnixMs StoreNow() {
    std::vector<std::string> argv = {"TIME"};
    Result<redis::Reply> r = redis_.Command(argv);
    EXPECT_TRUE(r.ok() && (*r)->type == REDIS_REPLY_ARRAY && (*r)->elements == 2);
    if (!r.ok() || (*r)->type != REDIS_REPLY_ARRAY || (*r)->elements != 2) return 0;
    return std::stoll((*r)->element[0]->str) * 1000 + std::stoll((*r)->element[1]->str) / 1000;
  }

  // node-a (no GPU, the leader) and `b` start with the store's clock (lost_node_wait is a
  // time the store writes); a job runs on `b`, `b` is judged lost while frozen and its daemon
  // killed, unthawed. Returns the job's id.
  JobId RunThenKillJudgedLost(Node& b) {
    Node& a = AddNode("node-a", {});
    a.clock.Set(StoreNow());
    b.clock.Set(StoreNow());
    Start(a);
    Start(b);
    JobId id = Submit(a, {{"gpus", 1}});
    EXPECT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; }));
    EXPECT_THAT(FreezeAndJudgeLost(b, 60'000), ::testing::ElementsAre(id));
    frozen_.reset();
    --subscribed_;
    return id;
  }

  static bool GotSigterm(const FakeShims::Shim* shim) {
    return shim != nullptr &&
           std::find(shim->signals.begin(), shim->signals.end(), SIGTERM) != shim->signals.end();
  }

  static redis::RedisServer* server_;
  std::string dir_;
  RedisTarget target_;
  std::unique_ptr<ClusterStore> observer_;      // the test's own view of the store (unfenced)
  redis::Connection redis_{server_->Target()};  // plain commands
  int64_t subscribed_ = 0;                      // nodes started
  std::map<std::string, std::unique_ptr<Node>> nodes_;
  std::unique_ptr<DaemonImpl> frozen_;  // a node's daemon while the test does not drive it
};

redis::RedisServer* DaemonClusterTest::server_ = nullptr;

TEST_F(DaemonClusterTest, JobSubmittedOnOneNodeRunsOnTheNodeWithAFreeGpu) {
  Node& a = AddNode("node-a", {});  // no GPU: the leader, placing for both
  Node& b = AddNode("node-b", {Gpu(0)});
  Start(a);
  Start(b);
  ASSERT_EQ(Leader(), "node-a");
  JobId id = Submit(a, {{"gpus", 1}, {"mem", "20GiB"}});
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; })) << Get(id).reason;
  Job job = Get(id);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].node, "node-b");
  EXPECT_EQ(job.attempts[0].run_dir, b.RunDir(id, 1));
  ASSERT_NE(b.Shim(id, 1), nullptr);
  EXPECT_EQ(job.attempts[0].pid, b.Shim(id, 1)->process.pid);  // B recorded it running
  EXPECT_EQ(EnvOf(b.RunDir(id, 1))["CUDA_VISIBLE_DEVICES"], "0");
  EXPECT_EQ(a.shims.alive_count(), 0);
  EXPECT_FALSE(std::filesystem::exists(a.RunDir(id, 1)));

  ASSERT_TRUE(b.shims.Exit(b.RunDir(id, 1), Exited(0)));
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kSucceeded; }));
}

// A worker (not the leader: it runs no scheduling pass) whose store refuses an attempt's end
// keeps the end and writes it again until the store takes it.
TEST_F(DaemonClusterTest, AWorkersEndTheStoreRefusesIsRecordedOnceItCanBe) {
  TwoNodes two = StartLeaderAndWorker();
  Node& b = two.worker;
  JobId id = Submit(two.leader, {{"gpus", 1}});
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; })) << Get(id).reason;
  // Refused when the end comes and when it is tried again at once.
  b.store->FailNext("FinishAttempt", Status::NoSpace("disk full in /redis: No space left"), 2);
  ASSERT_TRUE(b.shims.Exit(b.RunDir(id, 1), Exited(0)));
  b.Loop();
  ASSERT_EQ(Get(id).state, JobState::kRunning);
  ASSERT_GT(b.daemon->NextWakeup(), b.clock.Now()) << "no retry was armed";
  b.clock.Set(b.daemon->NextWakeup());
  b.daemon->OnWakeupTimer();
  b.Loop();
  EXPECT_EQ(Get(id).state, JobState::kSucceeded);
}

// Write access to Redis alone runs nothing as anyone: a job whose user or command was
// changed in the store after a node signed it ends failed, naming why, and no shim starts.
TEST_F(DaemonClusterTest, AJobChangedInTheStoreIsRefusedNotRun) {
  TwoNodes two = StartLeaderAndWorker();
  Node &a = two.leader, &b = two.worker;
  JobId first = Submit(a, {{"gpus", 1}});
  JobId second = Submit(a, {{"gpus", 1}, {"after", {first}}});
  ASSERT_TRUE(Eventually([&] { return Get(first).state == JobState::kRunning; }));
  std::string key = target_.prefix + "job:" + std::to_string(second);
  std::vector<std::string> tamper = {"HSET", key, "user", "root", "cwd", "/root"};
  ASSERT_TRUE(redis_.Command(tamper).ok());
  ASSERT_TRUE(b.shims.Exit(b.RunDir(first, 1), Exited(0)));
  ASSERT_TRUE(Eventually([&] { return Get(second).state == JobState::kFailed; }))
      << Get(second).reason;
  EXPECT_THAT(Get(second).reason, HasSubstr("does not match the signature node 'node-a' made"));
  EXPECT_THAT(Get(second).reason, HasSubstr("refused to run it"));
  EXPECT_EQ(b.Shim(second, 1), nullptr);
  EXPECT_EQ(b.shims.alive_count(), 0);
}

// A run dir the store names outside the node's own runs dir is refused: root would create
// and write files wherever a hand in Redis pointed it.
TEST_F(DaemonClusterTest, ARunDirNamedElsewhereInTheStoreIsRefused) {
  TwoNodes two = StartLeaderAndWorker();
  Node &a = two.leader, &b = two.worker;
  // The leader places with node-b's runs_dir as node-b published it: change that.
  std::vector<std::string> move = {"HSET", target_.prefix + "node:node-b", "runs_dir",
                                   dir_ + "/elsewhere"};
  ASSERT_TRUE(redis_.Command(move).ok());
  a.Loop();
  JobId id = Submit(a, {{"gpus", 1}});
  ASSERT_TRUE(Eventually([&] { return IsDone(Get(id).state); })) << Get(id).reason;
  EXPECT_THAT(Get(id).reason, HasSubstr("refused to run it: the store names its run dir"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/elsewhere"));
  EXPECT_EQ(b.shims.alive_count(), 0);
}

TEST_F(DaemonClusterTest, OneNodeLeadsAndTheOtherTakesOverWhenItResigns) {
  Node& a = AddNode("node-a", {}, 300);
  Node& b = AddNode("node-b", {Gpu(0)}, 300);
  Start(a);
  Start(b);
  a.daemon->OnClusterTimer();
  b.daemon->OnClusterTimer();
  EXPECT_EQ(Leader(), "node-a");
  HttpResponse r = Call(b, "GET", "/v1/nodes");
  ASSERT_EQ(r.status, 200) << r.body;
  json nodes = json::parse(r.body);
  EXPECT_EQ(nodes["leader"], "node-a");
  ASSERT_EQ(nodes["nodes"].size(), 2u);
  EXPECT_EQ(nodes["nodes"][0]["leader"].get<bool>() + nodes["nodes"][1]["leader"].get<bool>(), 1);

  a.daemon->RequestStop();  // gives the lease up
  a.daemon.reset();
  b.daemon->OnClusterTimer();  // no wait for the lease to lapse
  EXPECT_EQ(Leader(), "node-b");
  // The new leader schedules: a job submitted to it starts on its GPU.
  JobId id = Submit(b, {{"gpus", 1}});
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; })) << Get(id).reason;
  EXPECT_EQ(Get(id).attempts[0].node, "node-b");
}

TEST_F(DaemonClusterTest, TheOtherNodeTakesTheLeaseOnceACrashedLeadersLapses) {
  Node& a = AddNode("node-a", {}, 300);
  Node& b = AddNode("node-b", {Gpu(0)}, 300);
  Start(a);
  Start(b);
  ASSERT_EQ(Leader(), "node-a");
  a.daemon.reset();  // crashed: nothing resigned
  // Each poll is the follower's timer round; it takes the lease once it lapsed (300 ms).
  ASSERT_TRUE(Eventually([&] {
    b.daemon->OnClusterTimer();
    return Leader() == "node-b";
  }));
  JobId id = Submit(b, {{"gpus", 1}});
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; }));
}

// A leader whose lease lapsed and which took it again (a slow round, a store restart) holds
// a new epoch: its fenced writes must carry that one, or each is refused while it goes on
// believing it leads and no job is ever placed.
TEST_F(DaemonClusterTest, ALeaderThatTakesItsLapsedLeaseAgainFencesWithTheNewEpoch) {
  Node& a = AddNode("node-a", {Gpu(0)}, 300);
  Start(a);
  ASSERT_EQ(Leader(), "node-a");
  std::vector<std::string> lapse = {"DEL", target_.prefix + "leader"};
  ASSERT_TRUE(redis_.Command(lapse).ok());
  a.daemon->OnClusterTimer();  // takes it again, with the next epoch
  ASSERT_EQ(Leader(), "node-a");
  JobId id = Submit(a, {{"gpus", 1}});
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; })) << Get(id).reason;
}

// A leader whose lease lapsed while it was stalled still believes it leads: its placement
// is refused by the store's fence, and the job runs once, placed by the new leader.
TEST_F(DaemonClusterTest, DeposedLeaderCannotPlaceAndTheJobRunsOnce) {
  Node& a = AddNode("node-a", {}, 300);
  Node& b = AddNode("node-b", {Gpu(0)}, 300);
  Start(a);
  Start(b);
  ASSERT_EQ(Leader(), "node-a");
  // A stalls (no timer round): its lease lapses and B takes it.
  ASSERT_TRUE(Eventually([&] {
    b.daemon->OnClusterTimer();
    return Leader() == "node-b";
  })) << Leader();
  // A has not noticed: its submit's pass places, and the store refuses it.
  JobId id = Submit(a, {{"gpus", 1}});
  Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.attempt, 0);
  EXPECT_EQ(b.shims.alive_count(), 0);
  // The leader places it (the submit's event), once.
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; }));
  a.daemon->OnClusterTimer();  // A learns it no longer leads
  b.daemon->OnClusterTimer();
  ASSERT_TRUE(Eventually([&] { return b.shims.alive_count() == 1; }));
  EXPECT_EQ(Get(id).attempts.size(), 1u);
  EXPECT_EQ(a.shims.alive_count() + b.shims.alive_count(), 1);
  EXPECT_EQ(Leader(), "node-b");
}

// B was frozen while its job ended, and judged lost: the job waits lost_node_wait for B's
// word, and B, thawed, records the real end. The job succeeded once and never ran again.
TEST_F(DaemonClusterTest, AFrozenNodesJobThatEndedKeepsItsEndAndDoesNotRunAgain) {
  TwoNodes two = StartLeaderAndWorker();
  Node &a = two.leader, &b = two.worker;
  JobId id = Submit(a, {{"gpus", 1}});
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; }));

  EXPECT_THAT(FreezeAndJudgeLost(b, 60'000), ::testing::ElementsAre(id));
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kQueued; }));

  b.daemon.swap(frozen_);
  ASSERT_TRUE(b.shims.Exit(b.RunDir(id, 1), Exited(0)));  // it had ended while B was frozen
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kSucceeded; })) << Get(id).reason;
  Job job = Get(id);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].state, JobState::kSucceeded);
  EXPECT_EQ(job.node_failures, 0);
  EXPECT_EQ(b.shims.alive_count(), 0);
}

// As above, but B's daemon is killed as soon as it thaws, before it read its shim's record:
// the daemon that starts again reads it, and the job still ends once.
TEST_F(DaemonClusterTest, ANodeKilledAfterItWasJudgedLostReportsItsJobsEndOnRestart) {
  Node& b = AddNode("node-b", {Gpu(0)});
  JobId id = RunThenKillJudgedLost(b);
  ASSERT_TRUE(b.shims.Exit(b.RunDir(id, 1), Exited(0)));  // while no daemon ran on B
  Start(b);
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kSucceeded; })) << Get(id).reason;
  Job job = Get(id);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].state, JobState::kSucceeded);
  EXPECT_EQ(job.node_failures, 0);
}

// A node killed whole (its shim gone without a record) leaves its end unknown: the restarted
// daemon says nothing, and the job runs again once lost_node_wait is over.
TEST_F(DaemonClusterTest, ANodeKilledWholeLeavesItsJobToTheLostNodeWait) {
  Node& b = AddNode("node-b", {Gpu(0)});
  JobId id = RunThenKillJudgedLost(b);
  ASSERT_TRUE(b.shims.Crash(b.RunDir(id, 1)));
  Start(b);
  Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kQueued);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].end_reason, "node node-b lost");
  EXPECT_EQ(b.shims.alive_count(), 0);
}

// The leader judged B lost while B was frozen: B, thawed, stops the attempt the store no
// longer places on it, and its late end record does not overwrite the store's.
TEST_F(DaemonClusterTest, NodeJudgedLostStopsItsAttemptAndItsLateEndIsRefused) {
  TwoNodes two = StartLeaderAndWorker();
  Node &a = two.leader, &b = two.worker;
  JobId id = Submit(a, {{"gpus", 1}});
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; }));
  ASSERT_NE(b.Shim(id, 1), nullptr);

  EXPECT_THAT(FreezeAndJudgeLost(b, 0), ::testing::ElementsAre(id));
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kQueued; }));
  EXPECT_FALSE(GotSigterm(b.Shim(id, 1)));

  b.daemon.swap(frozen_);  // thawed: the events it missed are in its loop
  ASSERT_TRUE(Eventually([&] { return GotSigterm(b.Shim(id, 1)); }));
  ExitRecord killed;
  killed.signal = SIGTERM;
  ASSERT_TRUE(b.shims.Exit(b.RunDir(id, 1), killed));
  b.Loop();
  Job job = Get(id);
  ASSERT_GE(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].state, JobState::kFailed);
  EXPECT_EQ(job.attempts[0].end_reason, "node node-b lost");
  EXPECT_FALSE(job.attempts[0].signal.has_value());  // B's record was refused
  EXPECT_EQ(job.node_failures, 1);
  // B beat again on its attempt's end: it rejoined, and the job runs there again, once.
  ASSERT_TRUE(Eventually([&] { return Get(id).attempt == 2 && b.Shim(id, 2) != nullptr; }));
  EXPECT_EQ(b.shims.alive_count(), 1);
}

TEST_F(DaemonClusterTest, CancelOnOneNodeStopsTheJobOnItsNode) {
  TwoNodes two = StartLeaderAndWorker();
  Node &a = two.leader, &b = two.worker;
  JobId id = Submit(a, {{"gpus", 1}});
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; }));

  HttpResponse r = Call(a, "POST", "/v1/jobs/" + std::to_string(id) + "/cancel");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("asked node node-b"));
  Result<std::optional<std::string>> flagged = observer_->CancelRequested(id, 1);
  ASSERT_TRUE(flagged.ok());
  EXPECT_TRUE(flagged->has_value());
  ASSERT_TRUE(Eventually([&] { return GotSigterm(b.Shim(id, 1)); }));
  EXPECT_EQ(a.shims.alive_count(), 0);

  ExitRecord stopped;
  stopped.signal = SIGTERM;
  stopped.cancelled = true;
  ASSERT_TRUE(b.shims.Exit(b.RunDir(id, 1), stopped));
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kCancelled; }));
}

TEST_F(DaemonClusterTest, GangRunsOnePartPerNodeAndAFailedPartStopsTheOther) {
  Node& a = AddNode("node-a", {Gpu(0)});
  Node& b = AddNode("node-b", {Gpu(0)});
  Start(a);
  Start(b);
  JobId id = Submit(a, {{"gpus", 1}, {"num_nodes", 2}});
  ASSERT_TRUE(Eventually([&] {
    return a.shims.alive_count() == 1 && b.shims.alive_count() == 1 &&
           Get(id).state == JobState::kRunning;
  })) << Get(id).reason;
  Job job = Get(id);
  ASSERT_EQ(job.attempts.size(), 1u);
  ASSERT_EQ(job.attempts[0].parts.size(), 2u);
  // Rank by the store's parts: each node runs its own, in its own runs dir.
  std::map<std::string, Node*> by_name{{"node-a", &a}, {"node-b", &b}};
  Node& master = *by_name[job.attempts[0].parts[0].node];
  Node& worker = *by_name[job.attempts[0].parts[1].node];
  ASSERT_NE(&master, &worker);
  std::map<std::string, std::string> env0 = EnvOf(master.RunDir(id, 1));
  std::map<std::string, std::string> env1 = EnvOf(worker.RunDir(id, 1));
  EXPECT_EQ(env0["TRAINQ_NODE_RANK"], "0");
  EXPECT_EQ(env1["TRAINQ_NODE_RANK"], "1");
  EXPECT_FALSE(env0["MASTER_PORT"].empty());
  EXPECT_EQ(env0["MASTER_PORT"], env1["MASTER_PORT"]);
  EXPECT_EQ(env0["MASTER_PORT"], std::to_string(job.attempts[0].master_port));
  EXPECT_EQ(env0["MASTER_ADDR"], "addr-" + master.name);
  EXPECT_EQ(env1["MASTER_ADDR"], "addr-" + master.name);

  // The worker's part fails: the attempt ends, and the master's node stops its part.
  ASSERT_TRUE(worker.shims.Exit(worker.RunDir(id, 1), Exited(1)));
  ASSERT_TRUE(Eventually([&] { return GotSigterm(master.Shim(id, 1)); }));
  EXPECT_EQ(Get(id).state, JobState::kFailed);
  ExitRecord killed;
  killed.signal = SIGTERM;
  ASSERT_TRUE(master.shims.Exit(master.RunDir(id, 1), killed));
  master.Loop();
  job = Get(id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.attempts[0].exit_code, 1);  // the failed part's end, not the stopped one's
}

// An elastic gang (--nodes 1:2): it starts on the one node that is free; when the other frees
// up, the leader adds a part there that joins its rendezvous, with no restart of the first. A
// job that needs that node later has the gang restart on the first node alone.
TEST_F(DaemonClusterTest, AnElasticGangGrowsByAPartThatJoinsAndShrinksByARestart) {
  Node& a = AddNode("node-a", {Gpu(0)});
  Node& b = AddNode("node-b", {Gpu(0)});
  a.config.min_runtime_ms = b.config.min_runtime_ms = 0;
  Start(a);
  Start(b);
  JobId busy = Submit(a, {{"gpus", 1}, {"nodes", {"node-b"}}});
  ASSERT_TRUE(Eventually([&] { return Get(busy).state == JobState::kRunning; }));
  JobId id = Submit(a, {{"gpus", 1}, {"num_nodes", 1}, {"max_nodes", 2}});
  ASSERT_TRUE(Eventually([&] { return Get(id).state == JobState::kRunning; })) << Get(id).reason;
  Job job = Get(id);
  ASSERT_EQ(job.attempts.size(), 1u);
  ASSERT_EQ(job.attempts[0].parts.size(), 1u);
  EXPECT_EQ(job.attempts[0].parts[0].node, "node-a");
  std::map<std::string, std::string> env0 = EnvOf(a.RunDir(id, 1));
  EXPECT_EQ(env0["PET_NNODES"], "1:2");
  EXPECT_EQ(env0["PET_RDZV_BACKEND"], "c10d");
  EXPECT_EQ(env0["PET_RDZV_ENDPOINT"],
            "addr-node-a:" + std::to_string(job.attempts[0].master_port));
  EXPECT_EQ(env0["PET_RDZV_CONF"], "is_host=true,last_call_timeout=5");

  // node-b frees up: a part joins there; node-a's part runs on, unsignalled.
  ASSERT_TRUE(b.shims.Exit(b.RunDir(busy, 1), Exited(0)));
  ASSERT_TRUE(Eventually([&] { return b.Shim(id, 1) != nullptr; })) << Get(id).reason;
  job = Get(id);
  ASSERT_EQ(job.attempts.size(), 1u);
  ASSERT_EQ(job.attempts[0].parts.size(), 2u);
  EXPECT_EQ(job.attempts[0].parts[1].node, "node-b");
  EXPECT_GT(job.attempts[0].parts[1].added_at, 0);
  std::map<std::string, std::string> env1 = EnvOf(b.RunDir(id, 1));
  EXPECT_EQ(env1["PET_RDZV_ENDPOINT"], env0["PET_RDZV_ENDPOINT"]);
  EXPECT_EQ(env1["PET_RDZV_ID"], env0["PET_RDZV_ID"]);
  EXPECT_EQ(env1["PET_RDZV_CONF"], "is_host=false,last_call_timeout=5");
  EXPECT_EQ(env1["TRAINQ_NODE_RANK"], "1");
  EXPECT_TRUE(a.Shim(id, 1)->signals.empty());

  // A job that needs node-b: both of the gang's parts are told to stop ("resized", through
  // their shims' control), and it restarts on node-a alone as attempt 2 while the other job
  // runs on node-b.
  JobId other = Submit(a, {{"gpus", 1}, {"nodes", {"node-b"}}});
  ASSERT_TRUE(Eventually([&] {
    return ReadShimControl(a.RunDir(id, 1)).ok() && ReadShimControl(b.RunDir(id, 1)).ok();
  })) << Get(other).reason;
  for (Node* n : {&a, &b}) {
    Result<ShimControl> control = ReadShimControl(n->RunDir(id, 1));
    ASSERT_TRUE(control.ok());
    EXPECT_EQ(control->stop, "resized");
    ExitRecord stopped;
    stopped.started_at = stopped.ended_at = kT0;
    stopped.signal = SIGTERM;
    stopped.stop = control->stop;
    stopped.stop_reason = control->reason;
    ASSERT_TRUE(n->shims.Exit(n->RunDir(id, 1), stopped));
  }
  ASSERT_TRUE(Eventually([&] {
    return Get(other).state == JobState::kRunning && Get(id).attempts.size() == 2 &&
           Get(id).state == JobState::kRunning;
  })) << Get(id).reason
      << " / " << Get(other).reason;
  job = Get(id);
  EXPECT_EQ(job.attempts[0].end_reason, "resized: shrinks from 2 to 1 node for job " +
                                            std::to_string(other) + " (it gives up node-b)");
  ASSERT_EQ(job.attempts[1].parts.size(), 1u);
  EXPECT_EQ(job.attempts[1].parts[0].node, "node-a");
  EXPECT_EQ(EnvOf(a.RunDir(id, 2))["TRAINQ_RESTART_COUNT"], "1");
  EXPECT_EQ(Get(other).attempts[0].node, "node-b");
}

}  // namespace
}  // namespace trainq
