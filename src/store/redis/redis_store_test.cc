#include "src/store/redis/redis_store.h"

#include <gmock/gmock.h>

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
                         ::testing::Values(StoreBackend{"redis", &MakeRedisStore}),
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
