// The token API's object on its own: a real SQLite store, a fake clock.
#include "src/daemon/token_routes.h"

#include <optional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/daemon/cluster_key.h"
#include "src/os/crypto/token_crypto.h"
#include "src/os/fake_clock.h"
#include "src/store/redis/redis_test_util.h"
#include "src/store/sqlite/sqlite_store.h"
#include "src/store/sqlite/sqlite_test_util.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr UnixMs kT0 = 1'800'000'000'000;

class TokenRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(dir_.File("trainq.db"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  static HttpRequest Request(const std::string& path, const std::string& body = "") {
    HttpRequest req;
    req.path = path;
    req.body = body;
    return req;
  }
  template <class F>
  static HttpResponse Answer(F call) {
    std::optional<HttpResponse> got;
    Responder respond = [&got](HttpResponse r) { got = std::move(r); };
    call(respond);
    EXPECT_TRUE(got.has_value());
    return got.value_or(HttpResponse{599, "", ""});
  }

  sqlite::TempDir dir_;  // removed after the store closes
  std::unique_ptr<Store> store_;
  FakeClock clock_{kT0};
  Config config_;
  const Caller admin_{"root", 0, Role::kAdmin, "", ""};
};

TEST_F(TokenRoutesTest, AnAdminMakesListsAndRevokesATokenThatIsStoredOnlyAsItsHash) {
  TokenRoutes tokens(*store_, clock_, config_, OneMachineTrust());
  HttpRequest create =
      Request("/v1/tokens", R"({"name": "ci", "role": "submit", "user": "ada", "expires": "1d"})");
  HttpResponse made = Answer([&](Responder& r) { tokens.Create(create, admin_, r); });
  ASSERT_EQ(made.status, 201) << made.body;
  std::string token = json::parse(made.body)["token"];
  Result<std::optional<TokenRecord>> stored = store_->FindTokenByHash(Sha256Hex(token));
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->user, "ada");
  EXPECT_EQ((*stored)->expires_at, kT0 + 86'400'000);

  HttpResponse listed = Answer([&](Responder& r) { tokens.List(r); });
  ASSERT_EQ(listed.status, 200);
  EXPECT_THAT(listed.body, HasSubstr(R"("state":"active")"));
  EXPECT_THAT(listed.body, ::testing::Not(HasSubstr(token)));
  EXPECT_THAT(listed.body, ::testing::Not(HasSubstr((*stored)->hash)));

  HttpResponse revoked = Answer([&](Responder& r) { tokens.Revoke("ci", admin_, r); });
  EXPECT_EQ(revoked.status, 200) << revoked.body;
  listed = Answer([&](Responder& r) { tokens.List(r); });
  EXPECT_THAT(listed.body, HasSubstr(R"("state":"revoked")"));
}

// Only admins reach these (the routes' rule, route_permissions_test.cc); what they send is
// checked whole.
TEST_F(TokenRoutesTest, OnlyWellFormedRequests) {
  TokenRoutes tokens(*store_, clock_, config_, OneMachineTrust());
  HttpRequest bad = Request("/v1/tokens", R"({"name": "x", "role": "root"})");
  HttpResponse refused = Answer([&](Responder& r) { tokens.Create(bad, admin_, r); });
  EXPECT_EQ(refused.status, 400);
  EXPECT_THAT(refused.body, HasSubstr("role: expected read, submit or admin"));
  Result<std::vector<TokenRecord>> none = store_->ListTokens();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());  // nothing stored
  // A shared server's token acts as a local user, who must exist.
  config_.shared = true;
  HttpRequest ghost = Request("/v1/tokens", R"({"name": "g", "role": "read", "user": "nobody-x"})");
  HttpResponse no_user = Answer([&](Responder& r) { tokens.Create(ghost, admin_, r); });
  EXPECT_EQ(no_user.status, 400);
  EXPECT_THAT(no_user.body, HasSubstr("no local user 'nobody-x'"));
}

// A cluster's store is Redis, which keeps a token's signature.
TEST_F(TokenRoutesTest, InAClusterATokenIsSignedByTheNodeThatMadeIt) {
  redis::RedisServer server;
  ASSERT_TRUE(server.Start());
  Result<std::unique_ptr<ClusterStore>> redis = OpenRedisStore(server.Target("t:"));
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  ClusterKey key(std::string(64, 'k'));
  std::unique_ptr<Trust> trust = ClusterTrust(key);
  TokenRoutes tokens(**redis, clock_, config_, *trust);
  HttpRequest create = Request("/v1/tokens", R"({"name": "n", "role": "read"})");
  HttpResponse made = Answer([&](Responder& r) { tokens.Create(create, admin_, r); });
  ASSERT_EQ(made.status, 201) << made.body;
  HttpResponse listed = Answer([&](Responder& r) { tokens.List(r); });
  EXPECT_THAT(listed.body, HasSubstr(R"("state":"active")"));
  // Judged with another cluster's key, no node of it made the token.
  ClusterKey other(std::string(64, 'o'));
  std::unique_ptr<Trust> other_trust = ClusterTrust(other);
  TokenRoutes elsewhere(**redis, clock_, config_, *other_trust);
  listed = Answer([&](Responder& r) { elsewhere.List(r); });
  EXPECT_THAT(listed.body, HasSubstr(R"("state":"unsigned")"));
}

}  // namespace
}  // namespace trainq
