#include "src/store/sqlite/schema.h"

#include <gmock/gmock.h>

#include "src/store/sqlite/sqlite_test_util.h"

namespace trainq::sqlite {
namespace {

using ::testing::HasSubstr;

class SchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Db> db = Db::Open(dir_.File("schema.db"));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_.emplace(std::move(db).value());
    ASSERT_TRUE(db_->Exec("PRAGMA synchronous = OFF").ok());  // no fsync: speed
  }

  int64_t Version() {
    Result<int64_t> version = db_->QueryInt("PRAGMA user_version");
    EXPECT_TRUE(version.ok()) << version.status().ToString();
    return version.ok() ? *version : -1;
  }

  bool HasTable(const std::string& name) {
    std::string sql = "SELECT COUNT(*) FROM sqlite_schema WHERE name = '" + name + "'";
    Result<int64_t> count = db_->QueryInt(sql);
    return count.ok() && *count == 1;
  }

  TempDir dir_;
  std::optional<Db> db_;
};

constexpr Migration kV1[] = {{1, "CREATE TABLE t (a INTEGER)"}};
constexpr Migration kV2[] = {{1, "CREATE TABLE t (a INTEGER)"},
                             {2,
                              "ALTER TABLE t ADD COLUMN b INTEGER NOT NULL DEFAULT 7;"
                              "CREATE TABLE u (x)"}};

TEST_F(SchemaTest, MigratesAVersionOneDatabaseAndKeepsItsRows) {
  ASSERT_TRUE(Migrate(*db_, kV1).ok());
  EXPECT_EQ(Version(), 1);
  ASSERT_TRUE(db_->Exec("INSERT INTO t (a) VALUES (41)").ok());
  Status migrated = Migrate(*db_, kV2);
  ASSERT_TRUE(migrated.ok()) << migrated.ToString();
  EXPECT_EQ(Version(), 2);
  EXPECT_TRUE(HasTable("u"));
  EXPECT_EQ(*db_->QueryInt("SELECT a + b FROM t"), 48);
  ASSERT_TRUE(Migrate(*db_, kV2).ok());  // idempotent
  EXPECT_EQ(Version(), 2);
  EXPECT_EQ(*db_->QueryInt("SELECT COUNT(*) FROM t"), 1);
}

TEST_F(SchemaTest, FailedStepRollsBackToThePreviousVersion) {
  constexpr Migration kBroken[] = {{1, "CREATE TABLE t (a INTEGER)"},
                                   {2, "CREATE TABLE u (x); THIS IS NOT SQL"}};
  Status status = Migrate(*db_, kBroken);
  EXPECT_EQ(status.code(), Code::kInternal) << status.ToString();
  EXPECT_EQ(Version(), 1);
  EXPECT_TRUE(HasTable("t"));
  EXPECT_FALSE(HasTable("u"));  // the half-applied step left nothing
}

TEST_F(SchemaTest, NewerDatabaseIsRefusedWithUpgradeAdvice) {
  ASSERT_TRUE(Migrate(*db_, kV2).ok());
  Status status = Migrate(*db_, kV1);
  EXPECT_EQ(status.code(), Code::kUnavailable) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr("upgrade trainq"));
  EXPECT_THAT(status.message(), HasSubstr("version 2"));
  EXPECT_EQ(Version(), 2);
}

TEST_F(SchemaTest, RealSchemaIsNumberedFromOneAndCreatesTheTables) {
  std::span<const Migration> steps = SchemaMigrations();
  ASSERT_FALSE(steps.empty());
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i].version, static_cast<int>(i + 1));
  Status status = Migrate(*db_, steps);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(Version(), steps.back().version);
  EXPECT_TRUE(HasTable("jobs"));
  EXPECT_TRUE(HasTable("attempts"));
  EXPECT_FALSE(HasTable("leases"));  // dropped by version 3
  EXPECT_TRUE(HasTable("jobs_state_id"));
  EXPECT_TRUE(HasTable("tokens"));  // version 5
}

// A version-2 store's jobs are aged from their submit, as before the column existed.
TEST_F(SchemaTest, VersionThreeQueuesOldJobsAtTheirSubmit) {
  std::span<const Migration> steps = SchemaMigrations();
  ASSERT_TRUE(Migrate(*db_, steps.first(2)).ok());
  ASSERT_TRUE(db_->Exec("INSERT INTO jobs (state, name, command, cwd, env, gpus, cpus, priority, "
                        "retries, user, submitted_at) VALUES ('queued', 'j', '[\"x\"]', '/', "
                        "'[]', 1, 1, 0, 0, 'ann', 1234)")
                  .ok());
  ASSERT_TRUE(Migrate(*db_, steps).ok());
  EXPECT_EQ(*db_->QueryInt("SELECT queued_at FROM jobs"), 1234);
}

}  // namespace
}  // namespace trainq::sqlite
