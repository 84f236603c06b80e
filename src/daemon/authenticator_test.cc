// The Authenticator on its own: a real SQLite store in a temporary dir, a fake clock.
#include "src/daemon/authenticator.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/daemon/cluster_key.h"
#include "src/os/crypto/token_crypto.h"
#include "src/os/fake_clock.h"
#include "src/os/users.h"
#include "src/store/redis/redis_test_util.h"
#include "src/store/sqlite/sqlite_store.h"
#include "src/store/sqlite/sqlite_test_util.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;

constexpr UnixMs kT0 = 1'800'000'000'000;

class AuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(dir_.File("trainq.db"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  // A token of ada's stored as a node would store it (signed by `key` where given), in
  // `store` (default: the SQLite one).
  std::string AddToken(const std::string& name, Role role, UnixMs expires_at = 0,
                       const ClusterKey* key = nullptr, Store* store = nullptr) {
    Result<std::string> token = NewToken();
    EXPECT_TRUE(token.ok());
    TokenRecord t{name, Sha256Hex(*token), role, "ada", kT0, expires_at, 0, "root", ""};
    if (key) t.signature = key->SignToken(t);
    EXPECT_TRUE((store ? store : store_.get())->AddToken(t).ok());
    return *token;
  }

  static HttpRequest Tcp(const std::string& authorization) {
    HttpRequest req;
    req.method = "GET";
    req.path = "/v1/jobs";
    req.tcp = true;
    req.authorization = authorization;
    return req;
  }

  sqlite::TempDir dir_;  // removed after the store closes
  std::unique_ptr<Store> store_;
  FakeClock clock_{kT0};
  Config config_;
};

TEST_F(AuthenticatorTest, ASocketPeerIsItsUidAndTheDaemonsOwnUserIsAnAdmin) {
  Authenticator auth(*store_, clock_, config_, OneMachineTrust());
  HttpRequest req;
  req.peer_uid = static_cast<int64_t>(::geteuid());
  Result<Caller> me = auth.Authenticate(req);
  ASSERT_TRUE(me.ok()) << me.status().ToString();
  EXPECT_EQ(me->role, Role::kAdmin);
  EXPECT_EQ(me->user, UserName(::geteuid()));
  EXPECT_EQ(me->uid, static_cast<int64_t>(::geteuid()));
  // Another uid is a submitter, unless admin_group makes it more (shared mode only).
  req.peer_uid = 4242424;
  Result<Caller> other = auth.Authenticate(req);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->role, Role::kSubmit);
  EXPECT_EQ(auth.RankOfUid(4242424), PeerRank::kUser);
  EXPECT_EQ(auth.RankOfUid(0), PeerRank::kOwner);
}

TEST_F(AuthenticatorTest, ATokenIsJudgedOnEachRequestAndNeverEchoed) {
  Authenticator auth(*store_, clock_, config_, OneMachineTrust());
  std::string token = AddToken("ci", Role::kSubmit, kT0 + 60'000);
  Result<Caller> ok = auth.Authenticate(Tcp("Bearer " + token));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->user, "ada");
  EXPECT_EQ(ok->role, Role::kSubmit);
  EXPECT_EQ(ok->token, "ci");
  EXPECT_EQ(ok->uid, -1);

  Result<Caller> none = auth.Authenticate(Tcp(""));
  EXPECT_EQ(none.status().code(), Code::kUnauthenticated);
  EXPECT_THAT(none.status().message(), HasSubstr("no Authorization header"));
  Result<Caller> unknown = auth.Authenticate(Tcp("Bearer " + std::string(token.size(), 'a')));
  EXPECT_EQ(unknown.status().code(), Code::kUnauthenticated);
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown token"));

  clock_.Advance(60'000);  // expired now: the same token, judged again
  Result<Caller> late = auth.Authenticate(Tcp("Bearer " + token));
  EXPECT_EQ(late.status().code(), Code::kUnauthenticated);
  EXPECT_THAT(late.status().message(), HasSubstr("token 'ci' has expired"));
  EXPECT_THAT(late.status().message(), ::testing::Not(HasSubstr(token)));

  std::string other = AddToken("old", Role::kRead);
  ASSERT_TRUE(store_->RevokeToken("old", kT0).ok());
  Result<Caller> revoked = auth.Authenticate(Tcp("Bearer " + other));
  EXPECT_THAT(revoked.status().message(), HasSubstr("token 'old' was revoked"));
}

// A cluster's store is Redis, which keeps a token's signature.
TEST_F(AuthenticatorTest, InAClusterOnlySignedTokensAndSignedPeersAreAccepted) {
  redis::RedisServer server;
  ASSERT_TRUE(server.Start());
  Result<std::unique_ptr<ClusterStore>> redis = OpenRedisStore(server.Target("t:"));
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  ClusterKey key(std::string(64, 'k'));
  std::unique_ptr<Trust> trust = ClusterTrust(key);
  Authenticator auth(**redis, clock_, config_, *trust);
  std::string signed_token = AddToken("signed", Role::kAdmin, 0, &key, redis->get());
  // Written into the store by another hand: no node signed it.
  std::string forged = AddToken("forged", Role::kAdmin, 0, nullptr, redis->get());
  EXPECT_TRUE(auth.Authenticate(Tcp("Bearer " + signed_token)).ok());
  Result<Caller> refused = auth.Authenticate(Tcp("Bearer " + forged));
  EXPECT_EQ(refused.status().code(), Code::kUnauthenticated);
  EXPECT_THAT(refused.status().message(), HasSubstr("not made by a node of this cluster"));

  HttpRequest peer = Tcp(key.PeerAuthorization("node-b", kT0, "GET", "/v1/jobs"));
  Result<Caller> node = auth.Authenticate(peer);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->node, "node-b");
  EXPECT_EQ(node->role, Role::kRead);
  ClusterKey other(std::string(64, 'o'));
  EXPECT_FALSE(
      auth.Authenticate(Tcp(other.PeerAuthorization("node-b", kT0, "GET", "/v1/jobs"))).ok());
  // Without a cluster the node scheme means nothing.
  Authenticator single(**redis, clock_, config_, OneMachineTrust());
  EXPECT_FALSE(single.Authenticate(peer).ok());
}

// PeerMay::kItsPart: a node asks about a part of the running attempt placed on it, named by
// its rank; an attempt that ended has no part left to guard.
TEST(PermissionRuleTest, ANodeAsksOnlyAboutAPartItRuns) {
  Job job;
  job.id = 7;
  job.spec.user = "ada";
  Attempt a;
  a.n = 1;
  a.state = JobState::kRunning;
  a.parts = {{"node-a", {0}, {}, "", ""}, {"node-b", {0}, {}, "", ""}};
  job.attempts = {a};
  const Rule rule{Who::kJobOwner, PeerMay::kItsPart, "read the steps of"};
  const Caller node_b{"", -1, Role::kRead, "", "node-b"};
  HttpRequest req;
  req.query = {{"rank", "1"}};
  EXPECT_TRUE(Permit(rule, node_b, req, &job).ok());
  for (const char* rank : {"0", "2", "-1", "1x", ""}) {
    req.query = {{"rank", rank}};
    Status st = Permit(rule, node_b, req, &job);
    EXPECT_EQ(st.code(), Code::kPermission) << rank;
    EXPECT_EQ(st.message(), "node node-b holds no part of job 7 attempt 1 with that rank");
  }
  req.query.clear();
  EXPECT_EQ(Permit(rule, node_b, req, &job).code(), Code::kPermission);
  job.attempts[0].state = JobState::kSucceeded;
  EXPECT_TRUE(Permit(rule, node_b, req, &job).ok());
  EXPECT_EQ(Permit({Who::kJobOwner, PeerMay::kNo, "cancel"}, node_b, req, &job).code(),
            Code::kPermission);
  // The rule's users are the job's owner and admins, never the node.
  EXPECT_TRUE(Permit(rule, Caller{"ada", 1000, Role::kSubmit, "", ""}, req, &job).ok());
  EXPECT_FALSE(OwnerOrAdmin(node_b, job));
}

}  // namespace
}  // namespace trainq
