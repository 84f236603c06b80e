// What survives a power cut. The kill -9 tests cannot see a missing fsync: the kernel keeps
// every write of a killed process. Here a SQLite VFS wraps the default one and keeps, for
// each file, the image it had at its last xSync; a simulated power cut puts every file back
// to that image (a file never synced since it was created disappears), as a disk that
// loses its cache would. Then the database is opened again, without the wrapper.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/store/sqlite/sqlite_store.h"
#include "src/store/sqlite/sqlite_test_util.h"
#include "src/store/store_conformance.h"

namespace trainq::sqlite {
namespace {

constexpr char kVfsName[] = "trainq-power-cut";
constexpr UnixMs kT0 = 1'700'000'000'000;

// The disk as the power cut leaves it. One per process: SQLite's VFS registry is global.
struct Disk {
  // Path -> content at the last sync; nullopt: created and never synced.
  std::map<std::string, std::optional<std::string>> synced;
  bool cut = false;            // after the cut every write, sync and delete fails
  long writes_until_cut = -1;  // >= 0: the cut happens at that many more xWrite calls
  long writes = 0;
  long syncs = 0;
};
Disk disk;
sqlite3_vfs* real_vfs = nullptr;

std::optional<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct CutFile {
  sqlite3_file base;
  sqlite3_file* real;  // allocated after this struct, real_vfs->szOsFile bytes
  std::string* path;   // nullptr: a file SQLite does not name (temporary), not tracked
};

sqlite3_file* Real(sqlite3_file* f) { return reinterpret_cast<CutFile*>(f)->real; }

int Close(sqlite3_file* f) {
  CutFile* file = reinterpret_cast<CutFile*>(f);
  int rc = file->real->pMethods != nullptr ? file->real->pMethods->xClose(file->real) : SQLITE_OK;
  delete file->path;
  return rc;
}
int Read(sqlite3_file* f, void* out, int n, sqlite3_int64 at) {
  return Real(f)->pMethods->xRead(Real(f), out, n, at);
}
int Write(sqlite3_file* f, const void* in, int n, sqlite3_int64 at) {
  if (disk.writes_until_cut == 0) disk.cut = true;
  if (disk.cut) return SQLITE_IOERR_WRITE;
  if (disk.writes_until_cut > 0) --disk.writes_until_cut;
  ++disk.writes;
  return Real(f)->pMethods->xWrite(Real(f), in, n, at);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  if (disk.cut) return SQLITE_IOERR_TRUNCATE;
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int Sync(sqlite3_file* f, int flags) {
  if (disk.cut) return SQLITE_IOERR_FSYNC;
  int rc = Real(f)->pMethods->xSync(Real(f), flags);
  CutFile* file = reinterpret_cast<CutFile*>(f);
  if (rc == SQLITE_OK && file->path != nullptr) {
    disk.synced[*file->path] = ReadWhole(*file->path);
    ++disk.syncs;
  }
  return rc;
}
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int Lock(sqlite3_file* f, int level) { return Real(f)->pMethods->xLock(Real(f), level); }
int Unlock(sqlite3_file* f, int level) { return Real(f)->pMethods->xUnlock(Real(f), level); }
int CheckReservedLock(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
// The WAL index (-shm) is shared memory, rebuilt from the WAL after a crash: passed through.
int ShmMap(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  return Real(f)->pMethods->xShmMap(Real(f), page, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int delete_flag) {
  return Real(f)->pMethods->xShmUnmap(Real(f), disk.cut ? 0 : delete_flag);
}
int Fetch(sqlite3_file* f, sqlite3_int64 at, int n, void** out) {
  return Real(f)->pMethods->xFetch(Real(f), at, n, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 at, void* p) {
  return Real(f)->pMethods->xUnfetch(Real(f), at, p);
}

const sqlite3_io_methods kMethods = {3,
                                     Close,
                                     Read,
                                     Write,
                                     Truncate,
                                     Sync,
                                     FileSize,
                                     Lock,
                                     Unlock,
                                     CheckReservedLock,
                                     FileControl,
                                     SectorSize,
                                     DeviceCharacteristics,
                                     ShmMap,
                                     ShmLock,
                                     ShmBarrier,
                                     ShmUnmap,
                                     Fetch,
                                     Unfetch};

int Open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  CutFile* file = reinterpret_cast<CutFile*>(f);
  file->base.pMethods = nullptr;
  file->real = reinterpret_cast<sqlite3_file*>(file + 1);
  file->path = nullptr;
  if (disk.cut) return SQLITE_CANTOPEN;
  int rc = real_vfs->xOpen(real_vfs, name, file->real, flags, out_flags);
  if (rc != SQLITE_OK) return rc;
  if (name != nullptr) {
    file->path = new std::string(name);
    // A file already there when first seen was on the disk before: it counts as synced.
    if (!disk.synced.contains(*file->path)) {
      std::optional<std::string> now = ReadWhole(*file->path);
      disk.synced[*file->path] =
          now.has_value() && !now->empty() ? now : std::optional<std::string>();
    }
  }
  file->base.pMethods = &kMethods;
  return SQLITE_OK;
}
int Delete(sqlite3_vfs*, const char* name, int sync_dir) {
  if (disk.cut) return SQLITE_IOERR_DELETE;
  int rc = real_vfs->xDelete(real_vfs, name, sync_dir);
  // Deleting a WAL is the end of a clean close, after its content reached the database.
  if (rc == SQLITE_OK) disk.synced.erase(name);
  return rc;
}
int Access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return real_vfs->xAccess(real_vfs, name, flags, out);
}
int FullPathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return real_vfs->xFullPathname(real_vfs, name, n, out);
}

// Registers the wrapper once; SQLite keeps it for the life of the process.
void RegisterVfs() {
  static sqlite3_vfs vfs = [] {
    real_vfs = sqlite3_vfs_find(nullptr);
    sqlite3_vfs v = *real_vfs;  // dlopen, randomness, sleep, time: the real ones
    v.szOsFile = static_cast<int>(sizeof(CutFile)) + real_vfs->szOsFile;
    v.zName = kVfsName;
    v.pNext = nullptr;
    v.xOpen = Open;
    v.xDelete = Delete;
    v.xAccess = Access;
    v.xFullPathname = FullPathname;
    v.pAppData = nullptr;
    return v;
  }();
  static const int registered = sqlite3_vfs_register(&vfs, 0);
  ASSERT_EQ(registered, SQLITE_OK);
}

// Puts every file back to what it held at its last sync.
void RestoreSyncedImages() {
  for (const auto& [path, content] : disk.synced) {
    if (!content.has_value()) {
      std::remove(path.c_str());
      continue;
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << *content;
  }
  disk = Disk{};
}

class DurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterVfs();
    disk = Disk{};
  }
  void TearDown() override { disk = Disk{}; }

  std::unique_ptr<Store> OpenThroughVfs(bool durable) {
    Result<std::unique_ptr<Store>> store =
        OpenSqliteStore(path_, SqliteOptions{.durable = durable, .vfs = kVfsName});
    EXPECT_TRUE(IsOk(store));
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // The cut: nothing more reaches the disk, the process dies (its connection is dropped
  // without a clean close reaching the files), and the disk holds what was synced.
  void PowerCut(std::unique_ptr<Store>& store) {
    disk.cut = true;
    store.reset();
    RestoreSyncedImages();
    std::remove((path_ + "-shm").c_str());  // memory, gone with the power
  }

  // The jobs the database holds after the cut, read as the next daemon start would.
  std::vector<Job> JobsAfterRestart() {
    EXPECT_EQ(RawDb(path_).Text("PRAGMA integrity_check"), "ok");
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(path_, SqliteOptions{});
    EXPECT_TRUE(IsOk(store));
    if (!store.ok()) return {};
    Result<std::vector<Job>> jobs = (*store)->List(ListQuery{});
    EXPECT_TRUE(IsOk(jobs));
    return jobs.ok() ? *jobs : std::vector<Job>{};
  }

  static JobSpec Spec(std::string name) {
    JobSpec spec;
    spec.name = std::move(name);
    spec.command = {"python", "train.py", "--lr", "3e-4"};
    spec.cwd = "/srv/exp";
    spec.user = "alice";
    spec.env = {{"WANDB_PROJECT", "durability"}};
    return spec;
  }

  // A database that already holds job "before", closed cleanly.
  void PrepareDatabase() {
    std::unique_ptr<Store> store = OpenThroughVfs(true);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(IsOk(store->Submit(std::vector<JobSpec>{Spec("before")}, kT0)));
  }

  TempDir dir_;
  std::string path_ = dir_.File("trainq.db");
};

TEST_F(DurabilityTest, AnAcknowledgedSubmitSurvivesAPowerCut) {
  PrepareDatabase();
  std::unique_ptr<Store> store = OpenThroughVfs(true);
  ASSERT_NE(store, nullptr);
  long syncs_before = disk.syncs;
  Result<std::vector<JobId>> ids = store->Submit(std::vector<JobSpec>{Spec("acked")}, kT0 + 1);
  ASSERT_TRUE(IsOk(ids));  // the user is told: job submitted
  EXPECT_GT(disk.syncs, syncs_before);
  PowerCut(store);

  std::vector<Job> jobs = JobsAfterRestart();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].id, ids->at(0));
  EXPECT_EQ(jobs[1].spec.name, "acked");
  EXPECT_EQ(jobs[1].spec.command, Spec("acked").command);
  EXPECT_EQ(jobs[1].state, JobState::kQueued);
}

// The harness can see a loss: without syncs the same submit is gone after the cut. Were the
// wrapper to keep unsynced writes, this test would fail.
TEST_F(DurabilityTest, WithoutSyncsTheSameSubmitIsLost) {
  PrepareDatabase();
  std::unique_ptr<Store> store = OpenThroughVfs(false);  // synchronous=OFF
  ASSERT_NE(store, nullptr);
  long syncs_before = disk.syncs;
  ASSERT_TRUE(IsOk(store->Submit(std::vector<JobSpec>{Spec("unsynced")}, kT0 + 1)));
  EXPECT_EQ(disk.syncs, syncs_before);
  PowerCut(store);

  std::vector<Job> jobs = JobsAfterRestart();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].spec.name, "before");
}

// A cut at every write of a submit: whatever the submit had done, the database opens, passes
// integrity_check and holds the job whole or not at all; a submit that was acknowledged
// before the cut is there.
TEST_F(DurabilityTest, ACutAtAnyWriteOfASubmitLeavesAValidDatabase) {
  PrepareDatabase();
  // How many writes a submit of three jobs makes, counted on a copy.
  long writes_per_submit = 0;
  {
    std::unique_ptr<Store> store = OpenThroughVfs(true);
    ASSERT_NE(store, nullptr);
    long before = disk.writes;
    ASSERT_TRUE(IsOk(store->Submit(std::vector<JobSpec>(3, Spec("count")), kT0)));
    writes_per_submit = disk.writes - before;
    PowerCut(store);
  }
  ASSERT_GT(writes_per_submit, 0);
  // Back to one job: the counted submit is undone by hand so every round starts alike.
  ASSERT_TRUE(RawDb(path_).Exec("DELETE FROM jobs WHERE name = 'count'"));
  std::filesystem::copy_file(path_, path_ + ".start");

  for (long cut_at = 0; cut_at <= writes_per_submit; ++cut_at) {
    SCOPED_TRACE("power cut at write " + std::to_string(cut_at));
    std::filesystem::copy_file(path_ + ".start", path_,
                               std::filesystem::copy_options::overwrite_existing);
    std::remove((path_ + "-wal").c_str());
    std::unique_ptr<Store> store = OpenThroughVfs(true);
    ASSERT_NE(store, nullptr);
    disk.writes_until_cut = cut_at;
    bool acknowledged = store->Submit(std::vector<JobSpec>(3, Spec("cut")), kT0 + 1).ok();
    PowerCut(store);

    std::vector<Job> jobs = JobsAfterRestart();
    ASSERT_TRUE(jobs.size() == 1 || jobs.size() == 4) << jobs.size() << " jobs";
    if (acknowledged) {
      EXPECT_EQ(jobs.size(), 4u);
    }
    for (size_t i = 1; i < jobs.size(); ++i) {
      EXPECT_EQ(jobs[i].spec.name, "cut");
      EXPECT_EQ(jobs[i].spec.env, Spec("cut").env);
    }
  }
}

}  // namespace
}  // namespace trainq::sqlite
