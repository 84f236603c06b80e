#include "src/store/redis/redis_store.h"

#include <gmock/gmock.h>

#include <mutex>

#include "src/store/redis/redis_test_util.h"
#include "src/store/store_conformance.h"

namespace trainq {
namespace {

using redis::RedisServer;
using ::testing::HasSubstr;

// One redis-server for the whole binary (killed when the process exits); each store made
// here gets a prefix of its own, so every test starts from an empty store.
RedisServer& SharedServer() {
  static RedisServer server;
  return server;
}

RedisTarget FreshTarget() {
  static bool started = false;
  static int made = 0;
  if (!started) {
    ::testing::AssertionResult up = SharedServer().Start();
    if (!up) {
      ADD_FAILURE() << up.message();
      return {};
    }
    started = true;
  }
  return SharedServer().Target("test" + std::to_string(++made) + ":");
}

std::unique_ptr<Store> MakeRedisStore() {
  RedisTarget target = FreshTarget();
  if (target.host.empty()) return nullptr;
  Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(target);
  if (!store.ok()) {
    ADD_FAILURE() << store.status().ToString();
    return nullptr;
  }
  return std::move(store).value();
}

INSTANTIATE_TEST_SUITE_P(Redis, StoreConformance,
                         ::testing::Values(StoreBackend{"redis", &MakeRedisStore,
                                                        &JobFieldInfo::redis}),
                         StoreBackendName);

// --- Redis specifics ---

TEST(RedisStoreTest, BackupSaysToBackUpRedisItself) {
  std::unique_ptr<Store> store = MakeRedisStore();
  ASSERT_NE(store, nullptr);
  Status st = store->Backup("/tmp/never-written.db");
  EXPECT_TRUE(HasCode(st, Code::kInvalid));
  EXPECT_THAT(st.message(), HasSubstr("BGSAVE"));
  EXPECT_THAT(st.message(), HasSubstr("AOF"));
}

TEST(RedisStoreTest, AnyBytesRoundTripInArgvEnvAndPaths) {
  std::unique_ptr<Store> store = MakeRedisStore();
  ASSERT_NE(store, nullptr);
  JobSpec spec;
  spec.name = "bytes";
  spec.command = {"a\xff\xfe", std::string("nul\0inside", 10), "12:not:a:length", ""};
  spec.cwd = "/tmp/\x80";
  spec.env = {{"K", std::string("\0", 1)}, {"", "empty name"}};
  spec.user = "alice";
  Result<std::vector<JobId>> ids = store->Submit(std::span(&spec, 1), 1);
  ASSERT_TRUE(IsOk(ids));
  Result<Job> job = store->Get(ids->front());
  ASSERT_TRUE(IsOk(job));
  EXPECT_EQ(job->spec.command, spec.command);
  EXPECT_EQ(job->spec.cwd, spec.cwd);
  EXPECT_EQ(job->spec.env, spec.env);
}

TEST(RedisStoreTest, PrefixesKeepStoresApart) {
  RedisTarget a = FreshTarget();
  RedisTarget b = a;
  b.prefix = a.prefix + "other:";
  Result<std::unique_ptr<ClusterStore>> first = OpenRedisStore(a);
  Result<std::unique_ptr<ClusterStore>> second = OpenRedisStore(b);
  ASSERT_TRUE(IsOk(first));
  ASSERT_TRUE(IsOk(second));
  JobSpec spec;
  spec.command = {"true"};
  spec.user = "alice";
  ASSERT_TRUE(IsOk((*first)->Submit(std::span(&spec, 1), 1)));
  Result<std::vector<Job>> none = (*second)->List({});
  ASSERT_TRUE(IsOk(none));
  EXPECT_TRUE(none->empty());
}

// The node user of docs/cluster.md ("Redis ACL"), word for word, for the prefix trainq:.
std::string NodeAcl() {
  std::string line = redis::AclLineOf(redis::DocumentedAcl(), "trainq-node");
  return line.empty() ? line : line.substr(std::string_view("user trainq-node ").size());
}

Status SetUser(const std::string& name, const std::string& rules) {
  redis::Connection admin(FreshTarget());
  std::vector<std::string> argv = {"ACL", "SETUSER", name};
  size_t start = 0;
  while (start < rules.size()) {
    size_t space = rules.find(' ', start);
    if (space == std::string::npos) space = rules.size();
    argv.push_back(rules.substr(start, space - start));
    start = space + 1;
  }
  return admin.Command(argv).status();
}

TEST(RedisStoreTest, TheDocumentedNodeAclAllowsEverythingTheStoreDoesAndNoOtherKeys) {
  std::string acl = NodeAcl();
  ASSERT_FALSE(acl.empty()) << "docs/cluster.md, \"Redis ACL\", has no trainq-node line";
  ASSERT_TRUE(IsOk(SetUser("tq-node", acl)));
  RedisTarget t = FreshTarget();
  t.prefix = "trainq:";
  t.user = "tq-node";
  t.password = "node-secret";  // DocumentedAcl's NODE-PASSWORD
  Result<std::unique_ptr<ClusterStore>> opened = OpenRedisStore(t);
  ASSERT_TRUE(IsOk(opened));
  ClusterStore& store = **opened;
  std::vector<std::string> events;
  std::mutex mu;
  std::unique_ptr<EventSubscription> sub = store.Subscribe([&](const std::string& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  });
  NodeRecord node;
  node.name = "gpu01";
  ASSERT_TRUE(IsOk(store.Heartbeat(node)));
  ASSERT_TRUE(IsOk(store.Nodes()));
  Result<LeaderLease> lease = store.AcquireLeader("gpu01", 60'000);
  ASSERT_TRUE(IsOk(lease));
  store.SetLeaderFence("gpu01", lease->epoch);
  JobSpec spec;
  spec.command = {"true"};
  spec.user = "alice";
  spec.submit_key = "k";
  Result<std::vector<JobId>> ids = store.Submit(std::span(&spec, 1), 1);
  ASSERT_TRUE(IsOk(ids));
  JobId id = ids->front();
  JobSpec dependent = spec;
  dependent.after = {id};
  ASSERT_TRUE(IsOk(store.Submit(std::span(&dependent, 1), 1)));
  ASSERT_TRUE(IsOk(store.IdsForSubmitKey("alice", "k")));
  Placement p;
  p.node = "gpu01";
  ASSERT_TRUE(IsOk(store.StartAttempt(id, 0, p, 1)));
  ASSERT_TRUE(IsOk(store.MarkRunning(id, 1, 1, 1, 1)));
  ASSERT_TRUE(IsOk(store.RecordPeak(id, 1, 5)));
  ASSERT_TRUE(IsOk(store.ActiveOn("gpu01")));
  ASSERT_TRUE(IsOk(store.RequestCancel(id, 1, "ada")));
  ASSERT_TRUE(IsOk(store.CancelRequested(id, 1)));
  AttemptEnd end;
  end.attempt_state = JobState::kSucceeded;
  end.job_state = JobState::kSucceeded;
  ASSERT_TRUE(IsOk(store.FinishAttempt(id, 1, end)));
  // A gang: its parts' ends are counted (SCARD) until all have succeeded.
  JobSpec gang_spec = spec;
  gang_spec.submit_key = "";
  gang_spec.num_nodes = 2;
  Result<std::vector<JobId>> gang = store.Submit(std::span(&gang_spec, 1), 1);
  ASSERT_TRUE(IsOk(gang));
  Placement parts;
  parts.node = "gpu01";
  parts.parts = {{"gpu01", {0}, {}, "/r/0", "/r/0/output.log"},
                 {"gpu02", {0}, {}, "/r/1", "/r/1/output.log"}};
  ASSERT_TRUE(IsOk(store.StartAttempt(gang->front(), 0, parts, 1)));
  end.parts = 2;
  for (int part = 0; part < 2; ++part) {
    end.part = part;
    ASSERT_TRUE(IsOk(store.FinishAttempt(gang->front(), 1, end)));
  }
  ASSERT_TRUE(IsOk(store.Dependents(id)));
  ASSERT_TRUE(IsOk(store.List({.states = {JobState::kSucceeded}, .with_attempts = true})));
  TokenRecord token;
  token.name = "laptop";
  token.hash = std::string(64, 'a');
  ASSERT_TRUE(IsOk(store.AddToken(token)));
  ASSERT_TRUE(IsOk(store.ListTokens()));
  ASSERT_TRUE(IsOk(store.FindTokenByHash(token.hash)));
  ASSERT_TRUE(IsOk(store.RevokeToken("laptop", 2)));
  ASSERT_TRUE(IsOk(store.MarkNodeLost("gpu01", 0, 3)));
  ASSERT_TRUE(IsOk(store.SetDrained("gpu01", true)));
  ASSERT_TRUE(IsOk(store.Publish("probe")));
  ASSERT_TRUE(IsOk(store.ResignLeader("gpu01", lease->epoch)));

  RedisTarget other = t;
  other.prefix = "elsewhere:";
  Result<std::unique_ptr<ClusterStore>> outside = OpenRedisStore(other);
  ASSERT_TRUE(IsOk(outside));  // opening reads no key
  Result<std::vector<Job>> refused = (*outside)->List({});
  EXPECT_TRUE(HasCode(refused, Code::kUnauthenticated));
  EXPECT_THAT(refused.status().message(), HasSubstr("NOPERM"));

  t.password = "wrong";
  EXPECT_TRUE(HasCode(OpenRedisStore(t), Code::kUnauthenticated));
}

TEST(RedisStoreTest, OpenOfNothingListeningIsUnavailableNamingHostAndPort) {
  RedisTarget t;
  t.host = "127.0.0.1";
  t.port = 1;  // nothing listens there
  t.timeout_ms = 500;
  Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(t);
  ASSERT_TRUE(HasCode(store, Code::kUnavailable));
  EXPECT_THAT(store.status().message(), HasSubstr("store unreachable: redis 127.0.0.1:1"));
}

}  // namespace
}  // namespace trainq
