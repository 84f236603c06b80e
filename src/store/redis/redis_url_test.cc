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
        "redis://ho st", "redis://[::1", "redis://host?db=1", "redis+sentinel:/host/tq"}) {
    Result<RedisTarget> t = ParseRedisUrl(url);
    EXPECT_TRUE(HasCode(t, Code::kInvalid)) << url;
    EXPECT_THAT(t.status().message(), HasSubstr("store: ")) << url;
    EXPECT_THAT(t.status().message(), HasSubstr("redis://[USER[:PASSWORD]@]HOST")) << url;
  }
  Result<RedisTarget> secret = ParseRedisUrl("redis://u:hunter2%zz@host");
  EXPECT_THAT(secret.status().message(), ::testing::Not(HasSubstr("hunter2")));
}

TEST(ParseRedisUrlTest, SentinelsTheirMasterAndTheDatabase) {
  Result<RedisTarget> t =
      ParseRedisUrl("redis+sentinel://trainq-node@10.0.0.11,10.0.0.12:26380,[::1]:26381/tq/2");
  ASSERT_TRUE(IsOk(t));
  EXPECT_EQ(t->user, "trainq-node");
  EXPECT_EQ(t->password, "");
  ASSERT_EQ(t->sentinels.size(), 3u);
  EXPECT_EQ(t->sentinels[0].host, "10.0.0.11");
  EXPECT_EQ(t->sentinels[0].port, 26379);  // Sentinel's own default port
  EXPECT_EQ(t->sentinels[1].host, "10.0.0.12");
  EXPECT_EQ(t->sentinels[1].port, 26380);
  EXPECT_EQ(t->sentinels[2].host, "::1");
  EXPECT_EQ(t->sentinels[2].port, 26381);
  EXPECT_EQ(t->master_name, "tq");
  EXPECT_EQ(t->db, 2);
  EXPECT_EQ(t->host, "");               // the sentinels say, at each connect
  EXPECT_EQ(t->min_replicas_acked, 0);  // the config decides (store_min_replicas_acked)

  Result<RedisTarget> one = ParseRedisUrl("redis+sentinel://u:p%40ss@localhost/my-master.1");
  ASSERT_TRUE(IsOk(one));
  EXPECT_EQ(one->password, "p@ss");
  ASSERT_EQ(one->sentinels.size(), 1u);
  EXPECT_EQ(one->master_name, "my-master.1");
  EXPECT_EQ(one->db, 0);
  EXPECT_TRUE(ParseRedisUrl("redis://redis.lab/0")->sentinels.empty());
}

TEST(ParseRedisUrlTest, BadSentinelUrlsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"redis+sentinel://h1,h2", "master name"},
      {"redis+sentinel://h1,h2/", "master name"},
      {"redis+sentinel://h1/t q", "master name"},
      {"redis+sentinel://h1/tq/x", "database must be a number"},
      {"redis+sentinel://h1,,h2/tq", "missing or bad host"},
      {"redis+sentinel://h1,/tq", "missing or bad host"},
      {"redis+sentinel:///tq", "missing or bad host"},
      {"redis+sentinel://h1:0/tq", "port must be a number"},
      {"redis+sentinel://h1:26379:1/tq", "port must be a number"},
      {"redis+sentinel://u:%zz@h1/tq", "%-escape"},
      {"redis+sentinel://h1/tq?x=1", "query options"},
  };
  for (const auto& [url, what] : cases) {
    Result<RedisTarget> t = ParseRedisUrl(url);
    EXPECT_TRUE(HasCode(t, Code::kInvalid)) << url;
    EXPECT_THAT(t.status().message(), HasSubstr(what)) << url;
    EXPECT_THAT(t.status().message(), HasSubstr("store: ")) << url;
    EXPECT_THAT(t.status().message(),
                HasSubstr("expected redis+sentinel://[USER[:PASSWORD]@]HOST[:PORT],HOST[:PORT],"
                          ".../MASTER[/DB]"))
        << url;
  }
}

}  // namespace
}  // namespace trainq
