#include "src/store/sqlite/sqlite_store.h"

#include <gmock/gmock.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "src/core/version.h"
#include "src/store/sqlite/rows.h"
#include "src/store/sqlite/schema.h"
#include "src/store/sqlite/sqlite_test_util.h"
#include "src/store/store_conformance.h"

namespace trainq {
namespace {

int64_t CountIn(Store& store, JobState state) {
  ListQuery query;
  query.states = {state};
  query.with_env = false;
  Result<std::vector<Job>> jobs = store.List(query);
  return jobs.ok() ? static_cast<int64_t>(jobs->size()) : -1;
}

using sqlite::RawDb;
using sqlite::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// --- The conformance suite on SQLite: one new database file per test ---

std::unique_ptr<Store> MakeSqliteStore() {
  static TempDir dir;  // removed at exit with every database made here
  static int made = 0;
  std::string path = dir.File("conformance-" + std::to_string(++made) + ".db");
  // Not durable: the suite is about behaviour, and an fsync per commit would make it slow.
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path, {.durable = false});
  if (!store.ok()) {
    ADD_FAILURE() << store.status().ToString();
    return nullptr;
  }
  return std::move(store).value();
}

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformance,
                         ::testing::Values(StoreBackend{"sqlite", &MakeSqliteStore,
                                                        &JobFieldInfo::sql}),
                         StoreBackendName);

// --- SQLite specifics ---

class SqliteStoreTest : public ::testing::Test {
 protected:
  static constexpr UnixMs kT0 = 1'790'000'000'000;

  // Not durable unless a test asks: fsync per commit only makes tests slow.
  std::unique_ptr<Store> Open(const SqliteOptions& options = {.durable = false}) {
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(path_, options);
    EXPECT_TRUE(IsOk(store));
    return store.ok() ? std::move(store).value() : nullptr;
  }

  static JobSpec Spec(std::string name) {
    JobSpec spec;
    spec.name = std::move(name);
    spec.command = {"python", "train.py"};
    spec.cwd = "/work";
    spec.user = "alice";
    return spec;
  }

  static std::vector<JobId> SubmitN(Store& store, int n) {
    std::vector<JobSpec> specs;
    for (int i = 0; i < n; ++i) specs.push_back(Spec("job" + std::to_string(i)));
    Result<std::vector<JobId>> ids = store.Submit(specs, kT0);
    EXPECT_TRUE(IsOk(ids));
    return ids.ok() ? *ids : std::vector<JobId>{};
  }

  TempDir dir_;
  std::string path_ = dir_.File("trainq.db");
};

// `clean` gives the disk back: the pages of forgotten jobs leave the file and its WAL.
TEST_F(SqliteStoreTest, ForgettingJobsShrinksTheDatabaseFile) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<JobSpec> specs;
  for (int i = 0; i < 300; ++i) {
    JobSpec spec = Spec("big" + std::to_string(i));
    // 300 x 16 KiB, each its own (a shared one is stored once)
    spec.env = {{"BLOB", std::string(16 << 10, 'x')}, {"I", std::to_string(i)}};
    specs.push_back(spec);
  }
  Result<std::vector<JobId>> ids = store->Submit(specs, kT0);
  ASSERT_TRUE(IsOk(ids));
  std::vector<std::pair<JobId, std::string>> cancels;
  for (JobId id : *ids) cancels.emplace_back(id, "cancelled");
  ASSERT_TRUE(IsOk(store->CancelWaitingMany(cancels)));
  auto size = [&] {
    std::error_code ec;
    uint64_t db = std::filesystem::file_size(path_, ec);
    uint64_t wal =
        std::filesystem::exists(path_ + "-wal") ? std::filesystem::file_size(path_ + "-wal") : 0;
    return db + wal;
  };
  uint64_t full = size();
  EXPECT_GT(full, 4u << 20);
  Result<std::vector<JobId>> gone = store->Forget(*ids, {});
  ASSERT_TRUE(IsOk(gone));
  EXPECT_EQ(gone->size(), 300u);
  EXPECT_LT(size(), full / 4) << "before " << full;
  EXPECT_EQ(RawDb(path_).Text("PRAGMA auto_vacuum"), "2");
}

TEST_F(SqliteStoreTest, CreatesTheFileInAnExistingDirectory) {
  ASSERT_FALSE(std::filesystem::exists(path_));
  ASSERT_NE(Open(), nullptr);
  EXPECT_TRUE(std::filesystem::exists(path_));
}

TEST_F(SqliteStoreTest, MissingDirectoryIsAnIoError) {
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(dir_.File("absent/trainq.db"));
  EXPECT_TRUE(HasCode(store, Code::kIo));
}

TEST_F(SqliteStoreTest, FileThatIsNotADatabaseIsAnIoError) {
  std::ofstream(path_) << "this is not an SQLite database, just some text long enough\n";
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path_);
  EXPECT_TRUE(HasCode(store, Code::kIo));
}

// Overwrites one page of the file at `offset` with garbage, as a failing disk might.
void DamagePage(const std::string& path, std::streamoff offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  std::string garbage(4096, '\xa5');
  f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
}

// A store with enough jobs to span many pages, checkpointed into the main file and closed.
void FillAndClose(const std::string& path, int jobs) {
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path, {.durable = false});
  ASSERT_TRUE(IsOk(store));
  std::vector<JobSpec> specs(static_cast<size_t>(jobs));
  for (int i = 0; i < jobs; ++i) {
    specs[i].name = "job" + std::to_string(i);
    specs[i].command = {"python", "train.py", std::string(300, 'x')};
    specs[i].cwd = "/work";
    specs[i].user = "alice";
  }
  ASSERT_TRUE(IsOk((*store)->Submit(specs, 1)));
}

// It used to start and then fail every listing and pass with raw SQL in the message.
TEST_F(SqliteStoreTest, AnOverwrittenPageIsFoundAtOpenNamingTheFileAndTheWayBack) {
  FillAndClose(path_, 400);
  RawDb(path_).Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  ASSERT_GT(std::filesystem::file_size(path_), 20u * 4096);
  DamagePage(path_, 12 * 4096);
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path_);
  ASSERT_TRUE(HasCode(store, Code::kIo));
  const std::string& m = store.status().message();
  EXPECT_THAT(m, HasSubstr("database " + path_ + " is damaged"));
  EXPECT_THAT(m, HasSubstr("trainq daemon backup"));
  EXPECT_THAT(m, Not(HasSubstr("SELECT")));
}

TEST_F(SqliteStoreTest, ATruncatedFileIsDamagedNamingTheFile) {
  FillAndClose(path_, 400);
  RawDb(path_).Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) / 3);
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path_);
  ASSERT_TRUE(HasCode(store, Code::kIo));
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  EXPECT_THAT(store.status().message(), HasSubstr("is damaged"));
}

TEST_F(SqliteStoreTest, ABackupIsAWholeStoreThatOpensOnItsOwn) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<JobId> ids = SubmitN(*store, 50);
  std::string backup = dir_.File("backup.db");
  ASSERT_TRUE(IsOk(store->Backup(backup)));
  SubmitN(*store, 5);  // after the backup: not in it
  EXPECT_FALSE(std::filesystem::exists(backup + ".tmp"));
  EXPECT_EQ(std::filesystem::status(backup).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  Result<std::unique_ptr<Store>> copy = OpenSqliteStore(backup);
  ASSERT_TRUE(IsOk(copy));
  EXPECT_EQ(CountIn(**copy, JobState::kQueued), 50);
  Result<Job> last = (*copy)->Get(ids.back());
  ASSERT_TRUE(IsOk(last));
  EXPECT_EQ(last->spec.name, "job49");
  // Ids go on past the copy's highest, never reused.
  Result<std::vector<JobId>> next = (*copy)->Submit(std::vector<JobSpec>{Spec("n")}, kT0);
  ASSERT_TRUE(IsOk(next));
  EXPECT_EQ(next->front(), ids.back() + 1);
  EXPECT_TRUE(HasCode(store->Backup(dir_.File("absent/backup.db")), Code::kIo));
}

TEST_F(SqliteStoreTest, IdsAreNotReusedAfterReopenOrDelete) {
  {
    std::unique_ptr<Store> store = Open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(SubmitN(*store, 3), (std::vector<JobId>{1, 2, 3}));
  }
  {
    std::unique_ptr<Store> store = Open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(SubmitN(*store, 1), (std::vector<JobId>{4}));
  }
  RawDb raw(path_);
  ASSERT_TRUE(raw.Exec("DELETE FROM jobs WHERE id = 4"));
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(SubmitN(*store, 1), (std::vector<JobId>{5}));
}

TEST_F(SqliteStoreTest, DataSurvivesCloseAndReopen) {
  Job before;
  {
    std::unique_ptr<Store> store = Open();
    ASSERT_NE(store, nullptr);
    JobId id = SubmitN(*store, 1).at(0);
    Placement placement{"node-a", {0, 1}, {"GPU-a", "GPU-b"}, 1 << 20, 4, "/runs/1", "/runs/1/log"};
    ASSERT_TRUE(IsOk(store->StartAttempt(id, 0, placement, kT0 + 1)));
    ASSERT_TRUE(IsOk(store->MarkRunning(id, 1, 77, 88, kT0 + 2)));
    ASSERT_TRUE(IsOk(store->RecordPeak(id, 1, 12345)));
    Result<Job> job = store->Get(id);
    ASSERT_TRUE(IsOk(job));
    before = *job;
  }
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  Result<Job> after = store->Get(before.id);
  ASSERT_TRUE(IsOk(after));
  EXPECT_EQ(after->spec.command, before.spec.command);
  EXPECT_EQ(after->state, JobState::kRunning);
  ASSERT_EQ(after->attempts.size(), 1u);
  EXPECT_EQ(after->attempts[0].gpu_uuids, before.attempts[0].gpu_uuids);
  EXPECT_EQ(after->attempts[0].pid, 77);
  EXPECT_EQ(after->attempts[0].peak_mem_bytes, 12345u);
}

TEST_F(SqliteStoreTest, ConnectionRunsInWalWithFullSync) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  RawDb raw(path_);
  EXPECT_EQ(raw.Text("PRAGMA journal_mode"), "wal");
  // Per-connection settings cannot be seen from another connection: check the setup step.
  Result<sqlite::Db> db = sqlite::Db::Open(dir_.File("other.db"));
  ASSERT_TRUE(IsOk(db));
  ASSERT_TRUE(IsOk(ConfigureConnection(*db, SqliteOptions{.busy_timeout_ms = 1234})));
  EXPECT_EQ(*db->QueryInt("PRAGMA synchronous"), 1);  // NORMAL; user-visible writes use FULL
  EXPECT_EQ(*db->QueryInt("PRAGMA foreign_keys"), 1);
  EXPECT_EQ(*db->QueryInt("PRAGMA busy_timeout"), 1234);
  EXPECT_EQ(*db->QueryText("PRAGMA journal_mode"), "wal");
  ASSERT_TRUE(IsOk(ConfigureConnection(*db, {.durable = false})));
  EXPECT_EQ(*db->QueryInt("PRAGMA synchronous"), 0);  // OFF
}

TEST_F(SqliteStoreTest, TwoStoresOnOneFileSeeEachOthersWrites) {
  std::unique_ptr<Store> daemon = Open();
  std::unique_ptr<Store> cli = Open();
  ASSERT_NE(daemon, nullptr);
  ASSERT_NE(cli, nullptr);
  JobId id = SubmitN(*cli, 1).at(0);
  Result<Job> seen = daemon->Get(id);
  ASSERT_TRUE(IsOk(seen));
  EXPECT_EQ(seen->state, JobState::kQueued);
  Placement placement{"n", {0}, {"GPU-0"}, 1, 1, "/r", "/r/log"};
  ASSERT_TRUE(IsOk(daemon->StartAttempt(id, 0, placement, kT0)));
  EXPECT_TRUE(HasCode(cli->StartAttempt(id, 0, placement, kT0), Code::kConflict));
  EXPECT_TRUE(HasCode(cli->CancelWaiting(id, "too late"), Code::kConflict));
  Result<Job> started = cli->Get(id);
  ASSERT_TRUE(IsOk(started));
  EXPECT_EQ(started->state, JobState::kStarting);
  EXPECT_EQ(started->attempts.size(), 1u);
}

TEST_F(SqliteStoreTest, ReopenLeavesTheSchemaVersionAlone) {
  ASSERT_NE(Open(), nullptr);
  RawDb raw(path_);
  std::string latest = std::to_string(sqlite::SchemaMigrations().back().version);
  EXPECT_EQ(raw.Text("PRAGMA user_version"), latest);
  ASSERT_NE(Open(), nullptr);
  EXPECT_EQ(raw.Text("PRAGMA user_version"), latest);
}

TEST_F(SqliteStoreTest, VersionOneDatabaseIsMigratedKeepingJobsAndAttempts) {
  {
    Result<sqlite::Db> db = sqlite::Db::Open(path_);
    ASSERT_TRUE(IsOk(db));
    ASSERT_TRUE(IsOk(sqlite::Migrate(*db, sqlite::SchemaMigrations().first(1))));
  }
  RawDb raw(path_);
  ASSERT_TRUE(raw.Exec(
      "INSERT INTO jobs (id, state, name, command, cwd, env, gpus, cpus, priority, retries, "
      "user, submitted_at, attempt) VALUES (7, 'running', 'old', '[\"python\"]', '/w', '[]', "
      "2, 1, 0, 3, 'alice', 1, 1);"
      "INSERT INTO attempts (job_id, n, state, node, gpu_indices, gpu_uuids, reserved_bytes, "
      "cpus, run_dir, log_path, started_at) VALUES (7, 1, 'running', 'n', '[0,1]', '[]', 0, 1, "
      "'/r', '/r/log', 1);"));
  ASSERT_EQ(raw.Text("PRAGMA user_version"), "1");
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(raw.Text("PRAGMA user_version"),
            std::to_string(sqlite::SchemaMigrations().back().version));
  Result<Job> job = store->Get(7);
  ASSERT_TRUE(IsOk(job));
  EXPECT_EQ(job->spec.name, "old");
  EXPECT_TRUE(job->spec.after.empty());
  EXPECT_TRUE(job->spec.after_any.empty());
  EXPECT_EQ(job->spec.time_limit_ms, 0);
  EXPECT_TRUE(job->spec.nodes_allowed.empty());
  EXPECT_EQ(job->spec.num_nodes, 1);
  ASSERT_EQ(job->attempts.size(), 1u);
  EXPECT_EQ(job->attempts[0].master_port, 0);
  // And the new columns work on the migrated file.
  JobSpec dependent = Spec("after-old");
  dependent.after = {7};
  Result<std::vector<JobId>> ids = store->Submit(std::span(&dependent, 1), kT0);
  ASSERT_TRUE(IsOk(ids));
  Result<std::vector<Job>> dependents = store->Dependents(7);
  ASSERT_TRUE(IsOk(dependents));
  ASSERT_EQ(dependents->size(), 1u);
  EXPECT_EQ((*dependents)[0].id, ids->at(0));
}

TEST_F(SqliteStoreTest, DatabaseFromANewerTrainqIsRefused) {
  ASSERT_NE(Open(), nullptr);
  RawDb raw(path_);
  int future = sqlite::SchemaMigrations().back().version + 1;
  ASSERT_TRUE(raw.Exec("PRAGMA user_version = " + std::to_string(future)));
  // What the newer trainq's migration records beside its schema.
  ASSERT_TRUE(raw.Exec("UPDATE schema_info SET value = '9.8.7' WHERE key = 'written_by'"));
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path_);
  EXPECT_TRUE(HasCode(store, Code::kUnavailable));
  const std::string& message = store.status().message();
  EXPECT_THAT(message, HasSubstr("upgrade trainq"));
  EXPECT_THAT(message, HasSubstr(path_));
  EXPECT_THAT(message, HasSubstr("schema version " + std::to_string(future)));
  EXPECT_THAT(message, HasSubstr("written by trainq 9.8.7"));
  EXPECT_THAT(message, HasSubstr(std::string("this trainq (") + kVersion + ")"));
  EXPECT_THAT(message, HasSubstr("9.8.7 or newer"));
}

TEST_F(SqliteStoreTest, TheSchemaRecordsTheTrainqThatMigratedIt) {
  ASSERT_NE(Open(), nullptr);
  RawDb raw(path_);
  EXPECT_EQ(raw.Text("SELECT value FROM schema_info WHERE key = 'written_by'"), kVersion);
}

TEST_F(SqliteStoreTest, WriterHeldElsewhereIsUnavailableAndLeavesNothingBehind) {
  std::unique_ptr<Store> store = Open({.busy_timeout_ms = 20, .durable = false});
  ASSERT_NE(store, nullptr);
  JobId first = SubmitN(*store, 1).at(0);
  RawDb other(path_);
  ASSERT_TRUE(other.Exec("BEGIN IMMEDIATE"));
  std::vector<JobSpec> specs = {Spec("a"), Spec("b")};
  EXPECT_TRUE(HasCode(store->Submit(specs, kT0), Code::kUnavailable));
  EXPECT_TRUE(HasCode(store->CancelWaiting(first, "x"), Code::kUnavailable));
  EXPECT_TRUE(IsOk(store->Get(first)));  // WAL: readers are not blocked by the writer
  ASSERT_TRUE(other.Exec("ROLLBACK"));
  EXPECT_EQ(CountIn(*store, JobState::kQueued), 1);
  EXPECT_EQ(SubmitN(*store, 1), (std::vector<JobId>{first + 1}));
}

TEST_F(SqliteStoreTest, InvalidUtf8IsRefusedAndNothingIsStored) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<JobSpec> specs = {Spec("good"), Spec("bad")};
  specs[1].env = {{"LATIN1", "caf\xe9"}};
  Result<std::vector<JobId>> ids = store->Submit(specs, kT0);
  EXPECT_TRUE(HasCode(ids, Code::kInvalid));
  EXPECT_THAT(ids.status().message(), HasSubstr("env"));
  Result<std::vector<Job>> all = store->List({});
  ASSERT_TRUE(IsOk(all));
  EXPECT_TRUE(all->empty());  // the good spec went with the bad one: one transaction
}

TEST_F(SqliteStoreTest, UndecodableRowIsInternalNotACrash) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  JobId id = SubmitN(*store, 1).at(0);
  RawDb raw(path_);
  ASSERT_TRUE(raw.Exec("UPDATE jobs SET env = '{\"not\": \"an array\"}'"));
  EXPECT_TRUE(HasCode(store->Get(id), Code::kInternal));
  EXPECT_TRUE(HasCode(store->List({}), Code::kInternal));
}

TEST_F(SqliteStoreTest, FinishRefusesAnEndThatIsNotAnEnd) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  JobId id = SubmitN(*store, 1).at(0);
  ASSERT_TRUE(IsOk(store->StartAttempt(id, 0, Placement{}, kT0)));
  AttemptEnd still_running;
  still_running.attempt_state = JobState::kRunning;
  EXPECT_TRUE(HasCode(store->FinishAttempt(id, 1, still_running), Code::kInvalid));
  AttemptEnd job_active;
  job_active.job_state = JobState::kStarting;
  EXPECT_TRUE(HasCode(store->FinishAttempt(id, 1, job_active), Code::kInvalid));
  Result<Job> job = store->Get(id);
  ASSERT_TRUE(IsOk(job));
  EXPECT_EQ(job->state, JobState::kStarting);
  EXPECT_EQ(job->attempts.at(0).ended_at, std::nullopt);
}

TEST_F(SqliteStoreTest, ListingByStateUsesTheStateIndex) {
  ASSERT_NE(Open(), nullptr);
  RawDb raw(path_);
  std::string plan = raw.AllRows("EXPLAIN QUERY PLAN " + sqlite::ListJobsSql(true));
  EXPECT_THAT(plan, HasSubstr("jobs_state_id")) << plan;
  std::string attempts = raw.AllRows("EXPLAIN QUERY PLAN " + sqlite::AttemptsOfJobsSql());
  EXPECT_THAT(attempts, Not(HasSubstr("SCAN attempts"))) << attempts;
}

TEST_F(SqliteStoreTest, TenThousandSpecsInOneSubmit) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<JobSpec> specs(10'000, Spec("sweep"));
  for (JobSpec& spec : specs) spec.env = {{"PATH", "/usr/bin"}, {"HOME", "/home/alice"}};
  auto start = std::chrono::steady_clock::now();
  Result<std::vector<JobId>> ids = store->Submit(specs, kT0);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(IsOk(ids));
  ASSERT_EQ(ids->size(), specs.size());
  for (size_t i = 0; i < ids->size(); ++i) ASSERT_EQ((*ids)[i], static_cast<JobId>(i + 1));
  ::testing::Test::RecordProperty(
      "submit_10000_ms",
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()));
  EXPECT_EQ(CountIn(*store, JobState::kQueued), 10'000);
}

}  // namespace
}  // namespace trainq

namespace trainq {
namespace {

// The durable store raises the sync level around user-visible writes; SQLite allows that
// only outside a transaction, so every kind of write is exercised on a durable store,
// twice, to see the level restored in between.
TEST_F(SqliteStoreTest, DurableStoreTakesEveryKindOfWrite) {
  std::unique_ptr<Store> store = Open(SqliteOptions{});
  ASSERT_NE(store, nullptr);
  for (int round = 0; round < 2; ++round) {
    Result<std::vector<JobId>> ids = store->Submit(std::vector<JobSpec>{Spec("a"), Spec("b")}, kT0);
    ASSERT_TRUE(IsOk(ids));
    JobId a = (*ids)[0], b = (*ids)[1];
    ASSERT_TRUE(IsOk(store->CancelWaiting(a, "by test")));
    ASSERT_TRUE(IsOk(store->Requeue(a, "again", kT0)));
    Placement p;
    p.node = "n";
    p.run_dir = "/r";
    ASSERT_TRUE(IsOk(store->StartAttempt(b, 0, p, kT0)));
    ASSERT_TRUE(IsOk(store->MarkRunning(b, 1, 42, 7, kT0)));
    AttemptEnd end;
    end.attempt_state = end.job_state = JobState::kSucceeded;
    ASSERT_TRUE(IsOk(store->FinishAttempt(b, 1, end)));
    ASSERT_TRUE(IsOk(store->SetReasons(std::vector<std::pair<JobId, std::string>>{{a, "x"}})));
  }
  std::unique_ptr<Store> reopened;
  store.reset();
  reopened = Open(SqliteOptions{});
  EXPECT_EQ(CountIn(*reopened, JobState::kQueued), 2);
  EXPECT_EQ(CountIn(*reopened, JobState::kSucceeded), 2);
}

}  // namespace
}  // namespace trainq
