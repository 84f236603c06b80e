#include <gmock/gmock.h>

#include "src/store/cluster.h"
#include "src/store/store_conformance.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;

TEST(ParseRedisUrlTest, TakesEveryPart) {
  Result<RedisTarget> t = ParseRedisUrl("redis://node:s%40cr%3At@redis.lab:6380/2");
  ASSERT_TRUE(IsOk(t));
  EXPECT_EQ(t->user, "node");
  EXPECT_EQ(t->password, "s@cr:t");
  EXPECT_EQ(t->host, "redis.lab");
  EXPECT_EQ(t->port, 6380);
  EXPECT_EQ(t->db, 2);
  EXPECT_EQ(t->prefix, "trainq:");
}

TEST(ParseRedisUrlTest, DefaultsAndShortForms) {
  Result<RedisTarget> bare = ParseRedisUrl("redis://10.0.0.5");
  ASSERT_TRUE(IsOk(bare));
  EXPECT_EQ(bare->host, "10.0.0.5");
  EXPECT_EQ(bare->port, 6379);
  EXPECT_EQ(bare->db, 0);
  EXPECT_EQ(bare->user, "");
  EXPECT_EQ(bare->password, "");
  Result<RedisTarget> pass_only = ParseRedisUrl("redis://:secret@localhost/");
  ASSERT_TRUE(IsOk(pass_only));
  EXPECT_EQ(pass_only->user, "");
  EXPECT_EQ(pass_only->password, "secret");
  Result<RedisTarget> v6 = ParseRedisUrl("redis://[::1]:7000/3");
  ASSERT_TRUE(IsOk(v6));
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 7000);
  EXPECT_EQ(v6->db, 3);
}

// docs/cluster.md's form: the user in the URL, its password in store_password_file.
TEST(ParseRedisUrlTest, AUserWithoutAPasswordIsTaken) {
  Result<RedisTarget> t = ParseRedisUrl("redis://trainq-node@10.0.0.10:6379/0");
  ASSERT_TRUE(IsOk(t));
  EXPECT_EQ(t->user, "trainq-node");
  EXPECT_EQ(t->password, "");
  EXPECT_EQ(t->host, "10.0.0.10");
}

TEST(ParseRedisUrlTest, BadUrlsNameStoreAndTheFormWithoutThePassword) {
  for (const char* url :
       {"", "http://host", "rediss://host", "redis://", "redis://host:0", "redis://host:65536",
        "redis://host:port", "redis://host:", "redis://host/x", "redis://host/-1",
        "redis://host/-0", "redis://host:+80", "redis://u:p%zz@host", "redis://u:p%4@host",
        "redis://ho st", "redis://[::1", "redis://host?db=1"}) {
    Result<RedisTarget> t = ParseRedisUrl(url);
    EXPECT_TRUE(HasCode(t, Code::kInvalid)) << url;
    EXPECT_THAT(t.status().message(), HasSubstr("store: ")) << url;
    EXPECT_THAT(t.status().message(), HasSubstr("redis://[USER[:PASSWORD]@]HOST")) << url;
  }
  Result<RedisTarget> secret = ParseRedisUrl("redis://u:hunter2%zz@host");
  EXPECT_THAT(secret.status().message(), ::testing::Not(HasSubstr("hunter2")));
}

}  // namespace
}  // namespace trainq
