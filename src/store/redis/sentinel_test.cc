// The Redis store with a replica and sentinels (docs/cluster.md, "Redis with failover"):
// finding the master through real redis-sentinel processes, passing over a stale answer,
// failing fast when no sentinel names a live master, following a demoted master, and WAIT
// after the writes a user is told about. The failover itself, with trainqd, is
// tests/integration/test_redis_failover.py.
#include <gmock/gmock.h>

#include <chrono>

#include "src/store/redis/redis_store.h"
#include "src/store/redis/redis_test_util.h"
#include "src/store/store_conformance.h"

namespace trainq::redis {
namespace {

using ::testing::HasSubstr;

// A master and one replica of it, the replica in sync before a test starts.
class ReplicatedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Redis waits 5 s by default before a full sync, for more replicas to join it.
    master_.AddArgs({"--repl-diskless-sync-delay", "0"});
    ASSERT_TRUE(master_.Start());
    replica_.AddArgs({"--replicaof", "127.0.0.1", std::to_string(master_.port())});
    ASSERT_TRUE(replica_.Start());
    ASSERT_TRUE(InSync());
  }

  // Asks the master until it counts its replica as in sync, up to about 5 s (WAIT's timeout
  // is kept to Redis's 100 ms clock).
  ::testing::AssertionResult InSync() {
    Connection conn(master_.Target());
    for (int i = 0; i < 50; ++i) {
      Result<Reply> acked = conn.Command(std::vector<std::string>{"WAIT", "1", "100"});
      if (acked.ok() && (*acked)->integer == 1) return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "the replica did not catch up";
  }

  // A sentinel that takes `server` for the master named "tq" (no failover in a test's time:
  // it would wait 60 s before judging it down).
  static std::vector<std::string> Monitoring(int port) {
    return {"sentinel monitor tq 127.0.0.1 " + std::to_string(port) + " 1",
            "sentinel down-after-milliseconds tq 60000"};
  }

  RedisTarget ViaSentinels(std::vector<RedisAddress> sentinels) const {
    RedisTarget t = master_.Target();
    t.host.clear();
    t.sentinels = std::move(sentinels);
    t.master_name = "tq";
    return t;
  }

  RedisServer master_;
  RedisServer replica_;
};

JobSpec Spec(const std::string& key) {
  JobSpec spec;
  spec.command = {"true"};
  spec.user = "alice";
  spec.submit_key = key;
  return spec;
}

TEST_F(ReplicatedTest, TheStoreWorksOnTheMasterItsSentinelNames) {
  SentinelServer sentinel;
  ASSERT_TRUE(sentinel.Start(Monitoring(master_.port())));
  RedisTarget t = ViaSentinels({sentinel.Address()});
  Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(t);
  ASSERT_TRUE(IsOk(store));
  JobSpec spec = Spec("");
  EXPECT_TRUE(IsOk((*store)->Submit(std::span(&spec, 1), 1)));
  Connection conn(t);
  ASSERT_TRUE(IsOk(conn.Connect()));
  EXPECT_EQ(conn.Where(), "redis 127.0.0.1:" + std::to_string(master_.port()));
}

// A sentinel that has not learned of a failover names a server that is a replica now: its
// answer is checked with ROLE and the next sentinel asked.
TEST_F(ReplicatedTest, ASentinelNamingAReplicaIsPassedOver) {
  SentinelServer stale, current;
  ASSERT_TRUE(stale.Start(Monitoring(replica_.port())));
  ASSERT_TRUE(current.Start(Monitoring(master_.port())));
  Connection conn(ViaSentinels({stale.Address(), current.Address()}));
  ASSERT_TRUE(IsOk(conn.Connect()));
  EXPECT_EQ(conn.Where(), "redis 127.0.0.1:" + std::to_string(master_.port()));
  EXPECT_TRUE(IsOk(conn.Command(std::vector<std::string>{"SET", "trainq:k", "v"})));

  Connection only_stale(ViaSentinels({stale.Address()}));
  Status st = only_stale.Connect();
  EXPECT_TRUE(HasCode(st, Code::kUnavailable));
  EXPECT_THAT(st.message(), HasSubstr("store unreachable: no sentinel named a master of tq"));
  EXPECT_THAT(st.message(), HasSubstr("is a slave, not the master"));
}

TEST_F(ReplicatedTest, NoSentinelNamingALiveMasterFailsFast) {
  RedisServer gone;  // never started: nothing listens on its port
  SentinelServer naming_gone;
  ASSERT_TRUE(naming_gone.Start(Monitoring(gone.port())));
  RedisTarget t = ViaSentinels({naming_gone.Address(), {"127.0.0.1", FreeLocalPort()}});
  auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(t);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(HasCode(store, Code::kUnavailable));
  EXPECT_THAT(store.status().message(), HasSubstr("store unreachable: no sentinel named"));
  EXPECT_THAT(store.status().message(),
              HasSubstr("redis 127.0.0.1:" + std::to_string(gone.port())));
  EXPECT_THAT(store.status().message(), HasSubstr("sentinel 127.0.0.1:"));
  EXPECT_LT(took, std::chrono::milliseconds(t.timeout_ms + 500));

  SentinelServer other_master;
  ASSERT_TRUE(other_master.Start({}));
  Status unknown = Connection(ViaSentinels({other_master.Address()})).Connect();
  EXPECT_THAT(unknown.message(), HasSubstr("knows no master named tq"));
}

TEST_F(ReplicatedTest, SentinelsThatAskForAPasswordAreGivenTheStoresUser) {
  std::vector<std::string> lines = Monitoring(master_.port());
  lines.push_back("user default off");
  lines.push_back(
      "user node on >sentinel-secret -@all +auth +ping +sentinel|get-master-addr-by-name");
  SentinelServer sentinel;
  ASSERT_TRUE(sentinel.Start(lines, "node", "sentinel-secret"));
  RedisTarget t = ViaSentinels({sentinel.Address()});
  t.user = "node";  // the master has no ACL here: no password, so no AUTH there
  t.sentinel_password = "sentinel-secret";
  Connection conn(t);
  EXPECT_TRUE(IsOk(conn.Connect()));
  t.sentinel_password = "wrong";
  Status refused = Connection(t).Connect();
  EXPECT_TRUE(HasCode(refused, Code::kUnauthenticated));
  EXPECT_THAT(refused.message(), HasSubstr("store_sentinel_password_file"));
  EXPECT_THAT(refused.message(), ::testing::Not(HasSubstr("wrong")));
  t.sentinel_password = "";
  Status none = Connection(t).Connect();
  EXPECT_TRUE(HasCode(none, Code::kUnauthenticated)) << none.ToString();
}

// A master demoted under a connection answers writes READONLY: the connection is dropped
// so that the next command asks the sentinels again.
TEST_F(ReplicatedTest, AReadOnlyReplyDropsTheConnection) {
  Connection conn(replica_.Target());
  Result<Reply> refused = conn.Command(std::vector<std::string>{"SET", "trainq:k", "v"});
  EXPECT_TRUE(HasCode(refused, Code::kUnavailable));
  EXPECT_THAT(refused.status().message(), HasSubstr("store unreachable"));
  EXPECT_THAT(refused.status().message(), HasSubstr("READONLY"));
  EXPECT_EQ(conn.context(), nullptr);
}

// A killed master, or a sentinel's CLIENT KILL when it demotes one, closes connections that
// sit idle: the next command goes out on a new one instead of failing.
TEST_F(ReplicatedTest, AConnectionClosedWhileIdleIsReplacedBeforeTheNextCommand) {
  Connection conn(master_.Target());
  Result<Reply> id = conn.Command(std::vector<std::string>{"CLIENT", "ID"});
  ASSERT_TRUE(IsOk(id));
  Connection killer(master_.Target());
  ASSERT_TRUE(IsOk(killer.Command(
      std::vector<std::string>{"CLIENT", "KILL", "ID", std::to_string((*id)->integer)})));
  Result<Reply> pong = conn.Command(std::vector<std::string>{"PING"});
  ASSERT_TRUE(IsOk(pong));
  EXPECT_EQ(Text(pong->get()), "PONG");
}

TEST_F(ReplicatedTest, WritesAUserIsToldAboutWaitForTheReplicas) {
  RedisTarget t = master_.Target();
  t.min_replicas_acked = 1;
  Result<std::unique_ptr<ClusterStore>> opened = OpenRedisStore(t);
  ASSERT_TRUE(IsOk(opened));
  ClusterStore& store = **opened;
  JobSpec spec = Spec("k1");
  Result<std::vector<JobId>> ids = store.Submit(std::span(&spec, 1), 1);
  ASSERT_TRUE(IsOk(ids));
  Placement p;
  p.node = "gpu01";
  EXPECT_TRUE(IsOk(store.StartAttempt(ids->front(), 0, p, 1)));
  AttemptEnd end;
  end.attempt_state = end.job_state = JobState::kSucceeded;
  EXPECT_TRUE(IsOk(store.FinishAttempt(ids->front(), 1, end)));
  // What the replica holds is what a failover keeps.
  Connection replica(replica_.Target());
  Result<Reply> state = replica.Command(
      std::vector<std::string>{"HGET", "trainq:job:" + std::to_string(ids->front()), "state"});
  ASSERT_TRUE(IsOk(state));
  EXPECT_EQ(Text(state->get()), "succeeded");
}

// Two replicas asked for, one there: the submit is stored but not acked, and says so. Its
// Idempotency-Key is stored with it, so the client's retry finds it instead of adding a job.
TEST_F(ReplicatedTest, ASubmitTooFewReplicasAckedFailsAndItsRetryFindsIt) {
  RedisTarget t = master_.Target();
  t.min_replicas_acked = 2;
  t.wait_ms = 300;
  Result<std::unique_ptr<ClusterStore>> opened = OpenRedisStore(t);
  ASSERT_TRUE(IsOk(opened));
  JobSpec spec = Spec("retried");
  Result<std::vector<JobId>> ids = (*opened)->Submit(std::span(&spec, 1), 1);
  ASSERT_TRUE(HasCode(ids, Code::kUnavailable));
  // 0 or 1: the one replica acks within the wait but for a slow machine.
  EXPECT_THAT(ids.status().message(),
              ::testing::MatchesRegex("store: the write reached [01] of 2 replicas in 300 ms "
                                      "\\(store_min_replicas_acked\\).*"));
  Result<std::vector<JobId>> stored = (*opened)->IdsForSubmitKey("alice", "retried");
  ASSERT_TRUE(IsOk(stored));
  EXPECT_EQ(stored->size(), 1u);
  Result<JobId> last = (*opened)->LastId();
  ASSERT_TRUE(IsOk(last));
  EXPECT_EQ(*last, stored->front());
}

}  // namespace
}  // namespace trainq::redis
