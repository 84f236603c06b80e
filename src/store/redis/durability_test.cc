#include "src/store/redis/durability.h"

#include <fmt/format.h>
#include <gmock/gmock.h>

#include <nlohmann/json.hpp>
#include <set>

#include "src/core/json_codec.h"
#include "src/store/redis/redis_test_util.h"
#include "src/store/redis/scripts.h"
#include "src/store/store_conformance.h"

namespace trainq::redis {
namespace {

using ::testing::HasSubstr;

constexpr UnixMs kT0 = 1'790'000'000'000;

RedisTarget NodeTarget(const RedisServer& server) {
  RedisTarget t = server.Target("trainq:");
  t.user = "trainq-node";
  t.password = "node-secret";
  return t;
}

TEST(ServerInfoTest, ReadsVersionProductAndAof) {
  ServerFacts redis = ParseServerInfo(
      "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n# Persistence\r\n"
      "aof_enabled:1\r\n");
  EXPECT_EQ(redis.product, "Redis");
  EXPECT_EQ(redis.version, "7.0.15");
  EXPECT_EQ(redis.major, 7);
  EXPECT_TRUE(redis.aof);
  ServerFacts valkey = ParseServerInfo(
      "redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.1\r\naof_enabled:0\r\n");
  EXPECT_EQ(valkey.product, "Valkey");
  EXPECT_EQ(valkey.version, "8.1.1");
  EXPECT_FALSE(valkey.aof);
  EXPECT_EQ(ParseServerInfo("").major, 0);
}

TEST(DocumentedAclTest, TheDocsGiveTheDefaultUserTheLineTheCheckAsksFor) {
  std::vector<std::string> acl = DocumentedAcl();
  ASSERT_EQ(acl.size(), 3u) << "docs/cluster.md's \"Redis ACL\" block: default, node, viewer";
  EXPECT_EQ(acl[0], "user " + DefaultUserAcl("trainq:"));
  EXPECT_THAT(AclLineOf(acl, "trainq-node"), HasSubstr(" +acl|dryrun "));
}

// The probes must cover whatever the scripts write: the server itself says which commands
// write (COMMAND INFO's "write" flag).
TEST(DocumentedAclTest, EveryWriteCommandOfTheScriptsIsProbed) {
  RedisServer server;
  ASSERT_TRUE(server.Start());
  Connection conn(server.Target());
  std::set<std::string> probed;
  for (const auto& probe : AofReplayProbes("trainq:")) probed.insert(probe.front());
  std::set<std::string> called;
  for (const LuaScript* script : AllScripts()) {
    const std::string& src = script->source;
    for (size_t at = src.find("redis.call('"); at != std::string::npos;
         at = src.find("redis.call('", at + 1)) {
      size_t start = at + 12;
      called.insert(src.substr(start, src.find('\'', start) - start));
    }
  }
  ASSERT_GT(called.size(), 10u);
  for (const std::string& name : called) {
    Result<Reply> info = conn.Command(std::vector<std::string>{"COMMAND", "INFO", name});
    ASSERT_TRUE(IsOk(info)) << name;
    const redisReply* entry = (*info)->element[0];
    ASSERT_EQ(entry->type, REDIS_REPLY_ARRAY) << name << " is not a command";
    const redisReply* flags = entry->element[2];
    bool writes = false;
    for (size_t i = 0; i < flags->elements; ++i) writes |= Text(flags->element[i]) == "write";
    if (writes) {
      EXPECT_TRUE(probed.contains(name)) << name << " writes but is not probed";
    }
  }
}

// Everything a cluster keeps, as text to compare before and after a restart.
std::string Snapshot(ClusterStore& store) {
  std::string out;
  Result<std::vector<Job>> jobs = store.List({.states = {}, .with_attempts = true});
  if (!jobs.ok()) return "jobs: " + jobs.status().ToString();
  for (const Job& job : *jobs) out += JobToJson(job).dump() + "\n";
  Result<std::vector<NodeRecord>> nodes = store.Nodes();
  if (!nodes.ok()) return "nodes: " + nodes.status().ToString();
  for (const NodeRecord& n : *nodes) {
    out += fmt::format("node {} {} {} {} {} {}\n", n.name, n.address, n.info, n.drained,
                       n.joined_at, n.heartbeat_at);
  }
  Result<std::vector<TokenRecord>> tokens = store.ListTokens();
  if (!tokens.ok()) return "tokens: " + tokens.status().ToString();
  for (const TokenRecord& t : *tokens) {
    out += fmt::format("token {} {} {} {}\n", t.name, t.hash, t.user, t.revoked_at);
  }
  return out;
}

// Jobs in every state, attempts, a token, a node and a leader lease, all written as the
// documented node user.
void Populate(ClusterStore& store, LeaderLease& lease) {
  NodeRecord node;
  node.name = "gpu1";
  node.address = "10.0.0.1";
  node.info = R"({"gpus":2})";
  ASSERT_TRUE(IsOk(store.Heartbeat(node)));
  Result<LeaderLease> taken = store.AcquireLeader("gpu1", 600'000);
  ASSERT_TRUE(IsOk(taken));
  lease = *taken;
  store.SetLeaderFence("gpu1", lease.epoch);
  std::vector<JobSpec> specs(3);
  for (JobSpec& s : specs) {
    s.command = {"python", "train.py"};
    s.user = "alice";
  }
  specs[0].submit_key = "key-1";
  Result<std::vector<JobId>> ids = store.Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  Placement p;
  p.node = "gpu1";
  p.gpu_indices = {0};
  ASSERT_TRUE(IsOk(store.StartAttempt((*ids)[0], 0, p, kT0)));
  ASSERT_TRUE(IsOk(store.MarkRunning((*ids)[0], 1, 4242, 99, kT0 + 1)));
  AttemptEnd end;
  end.attempt_state = JobState::kSucceeded;
  end.job_state = JobState::kSucceeded;
  ASSERT_TRUE(IsOk(store.FinishAttempt((*ids)[0], 1, end)));
  ASSERT_TRUE(IsOk(store.StartAttempt((*ids)[1], 0, p, kT0 + 2)));
  TokenRecord token;
  token.name = "laptop";
  token.hash = std::string(64, 'b');
  token.user = "alice";
  ASSERT_TRUE(IsOk(store.AddToken(token)));
}

// docs/cluster.md's Redis (appendonly yes, appendfsync always, its ACL file word for word)
// restarted by SIGTERM and by kill -9: every job, attempt, token, node record and the lease
// and its epoch are there afterwards, and ids go on from where they were.
TEST(DocumentedAclTest, TheDocumentedSetupKeepsEverythingAcrossRestarts) {
  RedisServer server(/*aof=*/true);
  server.SetAcl(DocumentedAcl(), "trainq-node", "node-secret");
  ASSERT_TRUE(server.Start());
  Result<std::unique_ptr<ClusterStore>> opened = OpenRedisStore(NodeTarget(server));
  ASSERT_TRUE(IsOk(opened));
  LeaderLease lease;
  ASSERT_NO_FATAL_FAILURE(Populate(**opened, lease));
  std::string before = Snapshot(**opened);
  ASSERT_THAT(before, HasSubstr("token laptop"));
  opened->reset();
  for (bool kill : {false, true}) {
    SCOPED_TRACE(kill ? "kill -9" : "SIGTERM");
    kill ? server.Kill() : server.Terminate();
    ASSERT_TRUE(server.Start());
    Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(NodeTarget(server));
    ASSERT_TRUE(IsOk(store));
    EXPECT_EQ(Snapshot(**store), before);
    Result<std::vector<JobId>> mine = (*store)->IdsForSubmitKey("alice", "key-1");
    ASSERT_TRUE(IsOk(mine));
    EXPECT_EQ(mine->size(), 1u);
    Result<LeaderLease> renewed = (*store)->AcquireLeader("gpu1", 600'000);
    ASSERT_TRUE(IsOk(renewed));
    EXPECT_TRUE(renewed->mine) << "the lease is still gpu1's";
    EXPECT_EQ(renewed->epoch, lease.epoch);
  }
  Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(NodeTarget(server));
  ASSERT_TRUE(IsOk(store));
  JobSpec spec;
  spec.command = {"true"};
  spec.user = "alice";
  Result<std::vector<JobId>> next = (*store)->Submit(std::span(&spec, 1), kT0);
  ASSERT_TRUE(IsOk(next));
  EXPECT_EQ(next->front(), 4) << "ids go on from where they were";
  ASSERT_TRUE(IsOk((*store)->ResignLeader("gpu1", lease.epoch)));
  Result<LeaderLease> again = (*store)->AcquireLeader("gpu1", 600'000);
  ASSERT_TRUE(IsOk(again));
  EXPECT_EQ(again->epoch, lease.epoch + 1) << "epochs go on from where they were";
}

// The ACL docs/cluster.md gave before: a default user switched off with no commands. On a
// Redis that re-checks ACL while loading its AOF, every trainq write would be dropped at the
// next restart, so the store refuses to open and says why and what to write instead.
TEST(DocumentedAclTest, ADefaultUserThatCannotReplayTheAofIsRefusedNamingTheFix) {
  RedisServer server(/*aof=*/true);
  std::vector<std::string> acl = DocumentedAcl();
  acl[0] = "user default off";
  server.SetAcl(acl, "trainq-node", "node-secret");
  ASSERT_TRUE(server.Start());
  Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(NodeTarget(server));
  ASSERT_TRUE(HasCode(store, Code::kInvalid));
  const std::string& message = store.status().message();
  EXPECT_THAT(message, HasSubstr("would drop trainq's writes when it restarts"));
  EXPECT_THAT(message, HasSubstr("Redis 7."));
  EXPECT_THAT(message, HasSubstr("redis/redis#14541"));
  EXPECT_THAT(message, HasSubstr("may not run MULTI"));
  EXPECT_THAT(message, HasSubstr("user " + DefaultUserAcl("trainq:")));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("node-secret")));
}

TEST(DocumentedAclTest, ANodeUserThatCannotRunTheCheckIsRefusedNamingTheFix) {
  RedisServer server(/*aof=*/true);
  std::vector<std::string> acl = DocumentedAcl();
  std::string& node = acl[1];
  node.erase(node.find(" +acl|dryrun"), std::string_view(" +acl|dryrun").size());
  server.SetAcl(acl, "trainq-node", "node-secret");
  ASSERT_TRUE(server.Start());
  Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(NodeTarget(server));
  ASSERT_TRUE(HasCode(store, Code::kInvalid));
  EXPECT_THAT(store.status().message(), HasSubstr("add +acl|dryrun to its ACL line"));
}

// Without the AOF there is nothing to replay: the store opens (and the daemon warns).
TEST(DocumentedAclTest, WithoutTheAofTheDefaultUserIsNotAsked) {
  RedisServer server(/*aof=*/false);
  std::vector<std::string> acl = DocumentedAcl();
  acl[0] = "user default off";
  server.SetAcl(acl, "trainq-node", "node-secret");
  ASSERT_TRUE(server.Start());
  EXPECT_TRUE(IsOk(OpenRedisStore(NodeTarget(server))));
}

}  // namespace
}  // namespace trainq::redis
