#include "src/store/sqlite/sqlite_db.h"

#include <gmock/gmock.h>

#include <limits>

#include "src/store/sqlite/sqlite_test_util.h"

namespace trainq::sqlite {
namespace {

using ::testing::HasSubstr;

TEST(SqliteStatusTest, MapsEachFamilyOfCodes) {
  EXPECT_EQ(SqliteStatus(nullptr, SQLITE_BUSY, "x").code(), Code::kUnavailable);
  EXPECT_EQ(SqliteStatus(nullptr, SQLITE_BUSY_SNAPSHOT, "x").code(), Code::kUnavailable);
  EXPECT_EQ(SqliteStatus(nullptr, SQLITE_LOCKED, "x").code(), Code::kUnavailable);
  EXPECT_EQ(SqliteStatus(nullptr, SQLITE_FULL, "x").code(), Code::kNoSpace);
  EXPECT_EQ(SqliteStatus(nullptr, SQLITE_IOERR_FSYNC, "x").code(), Code::kIo);
  EXPECT_EQ(SqliteStatus(nullptr, SQLITE_CANTOPEN, "x").code(), Code::kIo);
  EXPECT_EQ(SqliteStatus(nullptr, SQLITE_NOTADB, "x").code(), Code::kIo);
  EXPECT_EQ(SqliteStatus(nullptr, SQLITE_CONSTRAINT_UNIQUE, "x").code(), Code::kInternal);
  EXPECT_EQ(SqliteStatus(nullptr, SQLITE_MISUSE, "x").code(), Code::kInternal);
  EXPECT_EQ(SqliteStatus(nullptr, SQLITE_FULL, "writing job").message(),
            std::string("disk full: writing job: ") + sqlite3_errstr(SQLITE_FULL));
}

class DbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Db> db = Db::Open(dir_.File("db.db"));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_.emplace(std::move(db).value());
    ASSERT_TRUE(db_->Exec("PRAGMA synchronous = OFF").ok());  // no fsync: speed
    ASSERT_TRUE(db_->Exec("CREATE TABLE t (a INTEGER, s TEXT)").ok());
  }

  TempDir dir_;
  std::optional<Db> db_;
};

TEST_F(DbTest, ErrorsCarrySqlitesMessage) {
  Status status = db_->Exec("INSERT INTO missing VALUES (1)");
  EXPECT_EQ(status.code(), Code::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("no such table: missing"));
  Result<Query> bad = db_->Prepare("SELEC 1");
  EXPECT_FALSE(bad.ok());
}

// A full disk must say so and name where to free space, not only "database or disk is
// full". max_page_count makes SQLite fail exactly as a full disk does (SQLITE_FULL).
TEST_F(DbTest, AFullDatabaseNamesItsDirectory) {
  ASSERT_TRUE(db_->Exec("PRAGMA max_page_count = 3").ok());
  Status st = db_->Exec("INSERT INTO t (s) VALUES (zeroblob(100000))");
  EXPECT_EQ(st.code(), Code::kNoSpace);
  EXPECT_THAT(st.message(), ::testing::StartsWith("disk full in " + dir_.path() + ": "));
}

TEST_F(DbTest, UnsignedAndOptionalValuesRoundTrip) {
  uint64_t max = std::numeric_limits<uint64_t>::max();
  std::optional<int> none;
  ASSERT_TRUE(db_->Run("INSERT INTO t (a, s) VALUES (?, ?)", max, none).ok());
  Result<Query> q = db_->Prepare("SELECT a, s FROM t");
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(*q->Step());
  EXPECT_EQ(q->Uint64(0), max);
  EXPECT_TRUE(q->IsNull(1));
  EXPECT_EQ(q->OptInt64(1), std::nullopt);
}

TEST_F(DbTest, TextWithNulBytesRoundTrips) {
  std::string text("a\0b", 3);
  ASSERT_TRUE(db_->Run("INSERT INTO t (s) VALUES (?)", text).ok());
  Result<std::string> back = db_->QueryText("SELECT s FROM t");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
}

TEST_F(DbTest, RunCountsChangedRows) {
  ASSERT_TRUE(db_->Exec("INSERT INTO t (a) VALUES (1), (2), (3)").ok());
  Result<int64_t> changed = db_->Run("UPDATE t SET s = 'x' WHERE a >= ?", 2);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, 2);
}

TEST_F(DbTest, StatementInUseIsNotHandedOutTwice) {
  ASSERT_TRUE(db_->Exec("INSERT INTO t (a) VALUES (1), (2)").ok());
  Result<Query> outer = db_->Prepare("SELECT a FROM t");
  ASSERT_TRUE(outer.ok());
  ASSERT_TRUE(*outer->Step());
  Result<Query> inner = db_->Prepare("SELECT a FROM t");
  EXPECT_EQ(inner.status().code(), Code::kInternal);
  ASSERT_TRUE(*outer->Step());  // the outer walk is undisturbed
  EXPECT_EQ(outer->Int64(0), 2);
}

TEST_F(DbTest, FinishedQueryReleasesItsStatement) {
  ASSERT_TRUE(db_->Exec("INSERT INTO t (a) VALUES (1), (2)").ok());
  {
    Result<Query> first = db_->Prepare("SELECT a FROM t");
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE(*first->Step());  // left mid-way: the destructor resets it
  }
  Result<Query> again = db_->Prepare("SELECT a FROM t");
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(*again->Step());
  EXPECT_EQ(again->Int64(0), 1);
}

TEST_F(DbTest, TransactionRollsBackUnlessCommitted) {
  {
    Result<Transaction> txn = Transaction::Begin(*db_, Transaction::Kind::kWrite);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE(db_->Exec("INSERT INTO t (a) VALUES (1)").ok());
  }
  EXPECT_EQ(*db_->QueryInt("SELECT COUNT(*) FROM t"), 0);
  {
    Result<Transaction> txn = Transaction::Begin(*db_, Transaction::Kind::kWrite);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE(db_->Exec("INSERT INTO t (a) VALUES (1)").ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  EXPECT_EQ(*db_->QueryInt("SELECT COUNT(*) FROM t"), 1);
}

TEST_F(DbTest, WriteTransactionWaitsThenReportsBusyAsUnavailable) {
  ASSERT_EQ(sqlite3_busy_timeout(db_->handle(), 10), SQLITE_OK);
  RawDb other(dir_.File("db.db"));
  ASSERT_TRUE(other.Exec("BEGIN IMMEDIATE"));
  Result<Transaction> txn = Transaction::Begin(*db_, Transaction::Kind::kWrite);
  EXPECT_EQ(txn.status().code(), Code::kUnavailable) << txn.status().ToString();
  ASSERT_TRUE(other.Exec("ROLLBACK"));
  EXPECT_TRUE(Transaction::Begin(*db_, Transaction::Kind::kWrite).ok());
}

}  // namespace
}  // namespace trainq::sqlite
