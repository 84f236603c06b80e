#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/os/transfer.h"
#include "src/os/transfer_test_util.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using trainq::testing::TempDir;

using trainq::testing::kSmall;
using trainq::testing::RandomBytes;
using trainq::testing::Write;

struct stat Stat(const std::string& path) {
  struct stat st = {};
  ::lstat(path.c_str(), &st);
  return st;
}

// Serves chunks from the trees of manifests made on this machine, counting what it sends;
// `corrupt` damages the bytes of the calls it names (1-based; 0: every call), `fail` refuses
// the calls it names and `fail_chunks` every call that asks for one of them.
struct Source {
  std::map<std::string, ChunkSource> chunks;
  std::mutex mu;
  int calls = 0;
  uint64_t bytes = 0;
  std::set<int> corrupt, fail;
  std::set<std::string> fail_chunks;

  void Serve(const Manifest& m) {
    for (auto& [hash, at] : ChunkSources(m)) chunks.emplace(hash, at);
  }
  ChunkCache::Fetch Fetch() {
    return [this](const std::vector<ChunkRef>& want) -> Result<std::string> {
      std::lock_guard lock(mu);
      ++calls;
      EXPECT_LE(want.size(), 32u);
      if (fail.count(calls) != 0 || std::any_of(want.begin(), want.end(), [&](const ChunkRef& c) {
            return fail_chunks.count(c.hash) != 0;
          })) {
        return Status::Unavailable("connection lost");
      }
      std::string out;
      for (const ChunkRef& c : want) {
        Result<std::string> data = ReadChunk(chunks.at(c.hash), c.hash);
        if (!data.ok()) return data.status();
        out += *data;
      }
      if (corrupt.count(calls) != 0 || corrupt.count(0) != 0) out[0] ^= 1;
      bytes += out.size();
      return out;
    };
  }
};

class ChunkCacheTest : public ::testing::Test {
 protected:
  // A tree under dir_/name of `files` (path, bytes), each 0644 unless it ends in ".sh".
  Manifest Tree(const std::string& name,
                const std::vector<std::pair<std::string, std::string>>& files) {
    std::string root = dir_ / name;
    EXPECT_TRUE(MakeDirs(root).ok());
    for (const auto& [path, data] : files) {
      size_t slash = path.rfind('/');
      if (slash != std::string::npos) {
        EXPECT_TRUE(MakeDirs(root + "/" + path.substr(0, slash)).ok());
      }
      Write(root + "/" + path, data, path.ends_with(".sh") ? 0755 : 0644);
    }
    Result<Manifest> m = MakeManifest(root, nullptr, kSmall);
    EXPECT_TRUE(m.ok()) << m.status().message();
    source_.Serve(*m);
    return *m;
  }
  std::unique_ptr<ChunkCache> Open(uint64_t cap = 0) {
    Result<std::unique_ptr<ChunkCache>> c = ChunkCache::Open(dir_ / "cache", cap);
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() ? std::move(*c) : nullptr;
  }
  Status Fill(ChunkCache& c, const Manifest& m, const std::string& pin = "job") {
    return c.Fill(m, pin, source_.Fetch(), [&](const ChunkCache::Progress& p) { last_ = p; });
  }
  std::string CachedPath(const Manifest& m, size_t entry) {
    const ManifestEntry& e = m.entries[entry];
    return dir_ / "cache/files/" + FileId(e) + (e.kind == 'x' ? "x" : "");
  }

  TempDir dir_;
  Source source_;
  ChunkCache::Progress last_;
};

TEST_F(ChunkCacheTest, FetchesWhatIsMissingOnceAndMaterializesTheTree) {
  std::string big = RandomBytes(100 << 10, 1);
  Manifest m = Tree("t", {{"a.bin", big},
                          {"sub/b.bin", RandomBytes(60 << 10, 2)},
                          {"run.sh", "#!/bin/sh\n"},
                          {"empty", ""}});
  ASSERT_EQ(::symlink("a.bin", (dir_ / "t/link").c_str()), 0);
  m = *MakeManifest(m.root, nullptr, kSmall);
  auto cache = Open();
  EXPECT_EQ(cache->MissingBytes(m), m.bytes);
  ASSERT_TRUE(Fill(*cache, m).ok());
  EXPECT_EQ(source_.bytes, m.bytes);
  EXPECT_EQ(last_.bytes_total, m.bytes);
  EXPECT_EQ(last_.bytes_fetched, m.bytes);
  EXPECT_EQ(cache->MissingBytes(m), 0u);
  EXPECT_EQ(cache->bytes(), m.bytes);

  int calls = source_.calls;
  ASSERT_TRUE(Fill(*cache, m).ok());
  EXPECT_EQ(source_.calls, calls);
  EXPECT_EQ(last_.bytes_present, m.bytes);

  std::string out = dir_ / "out";
  ASSERT_TRUE(cache->Materialize(m, out, ::geteuid(), ::getegid()).ok());
  EXPECT_EQ(*ReadFile(out + "/a.bin"), big);
  EXPECT_EQ(*ReadFile(out + "/empty"), "");
  EXPECT_EQ(Stat(out + "/a.bin").st_ino, Stat(CachedPath(m, 0)).st_ino);  // a link
  EXPECT_EQ(Stat(out + "/a.bin").st_mode & 07777, 0444u);
  EXPECT_EQ(Stat(out + "/run.sh").st_mode & 07777, 0555u);
  EXPECT_EQ(Stat(out + "/sub").st_mode & 07777, 0755u);
  EXPECT_EQ(Stat(out).st_mode & 07777, 0755u);
  char target[64] = {};
  ASSERT_EQ(::readlink((out + "/link").c_str(), target, sizeof(target)), 5);
  EXPECT_STREQ(target, "a.bin");
  Status again = cache->Materialize(m, out, ::geteuid(), ::getegid());
  EXPECT_EQ(again.code(), Code::kIo);
  EXPECT_THAT(again.message(), HasSubstr(out));

  ASSERT_EQ(m.entries[0].path, "a.bin");
  const ChunkRef& c = m.entries[0].chunks[1];
  Result<std::string> chunk = cache->ReadChunk(c.hash);
  ASSERT_TRUE(chunk.ok()) << chunk.status().message();
  EXPECT_EQ(*chunk, big.substr(m.entries[0].chunks[0].size, c.size));
  EXPECT_EQ(cache->ReadChunk(std::string(64, '0')).status().code(), Code::kNotFound);
}

TEST_F(ChunkCacheTest, MaterializesOneFileAsALinkAndNeedsItFilled) {
  Manifest tree = Tree("t", {{"run.sh", RandomBytes(20 << 10, 3)}});
  Result<Manifest> one = MakeManifest(tree.root + "/run.sh", nullptr, kSmall);
  ASSERT_TRUE(one.ok());
  auto cache = Open();
  EXPECT_EQ(cache->Materialize(*one, dir_ / "x", 0, 0).code(), Code::kNotFound);
  ASSERT_TRUE(Fill(*cache, *one).ok());
  ASSERT_TRUE(cache->Materialize(*one, dir_ / "x", ::geteuid(), ::getegid()).ok());
  EXPECT_EQ(Stat(dir_ / "x").st_ino, Stat(CachedPath(*one, 0)).st_ino);
  EXPECT_EQ(Stat(dir_ / "x").st_mode & 07777, 0555u);
}

TEST_F(ChunkCacheTest, CopiesHeldChunksAndAssemblesAFileOncePerManifest) {
  std::string big = RandomBytes(200 << 10, 4);
  Manifest first = Tree("v1", {{"model.bin", big}});
  auto cache = Open();
  ASSERT_TRUE(Fill(*cache, first).ok());
  std::string edited = big;
  edited.insert(edited.size() / 2, "a few new bytes");
  Manifest second = Tree("v2", {{"model.bin", edited}, {"copy.bin", edited}});
  uint64_t before = source_.bytes;
  EXPECT_LT(cache->MissingBytes(second), 30u << 10);
  ASSERT_TRUE(Fill(*cache, second).ok());
  EXPECT_LT(source_.bytes - before, 30u << 10);  // the chunks around the insertion
  EXPECT_EQ(last_.bytes_present + last_.bytes_fetched, second.bytes);
  EXPECT_EQ(cache->bytes(), big.size() + edited.size());
}

TEST_F(ChunkCacheTest, GoesOnWhereAFailedFillStopped) {
  std::string big = RandomBytes(400 << 10, 5);
  Manifest m = Tree("t", {{"big.bin", big}});
  ASSERT_GT(m.entries[0].chunks.size(), 40u);  // more than one batch
  auto cache = Open();
  // The second batch (chunks 32 on) is refused: the first 32 chunks are written.
  source_.fail_chunks = {m.entries[0].chunks[32].hash};
  Status st = Fill(*cache, m);
  EXPECT_EQ(st.code(), Code::kUnavailable);
  std::string partial = dir_ / "cache/partial/" + FileId(m.entries[0]);
  uint64_t first = 0;
  for (size_t i = 0; i < 32; ++i) first += m.entries[0].chunks[i].size;
  EXPECT_EQ(Stat(partial).st_size, static_cast<off_t>(first));
  // Damage the partial file's last chunk: it is checked and fetched again.
  uint64_t last = m.entries[0].chunks[31].size;
  int fd = ::open(partial.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "X", 1, static_cast<off_t>(first - last)), 1);
  ::close(fd);
  source_.fail_chunks.clear();
  uint64_t before = source_.bytes;
  ASSERT_TRUE(Fill(*cache, m).ok());
  EXPECT_EQ(last_.bytes_present, first - last);
  EXPECT_EQ(source_.bytes - before, big.size() - first + last);
  ASSERT_TRUE(cache->Materialize(m, dir_ / "out", ::geteuid(), ::getegid()).ok());
  EXPECT_EQ(*ReadFile(dir_ / "out/big.bin"), big);
  EXPECT_FALSE(FileExists(partial));
}

TEST_F(ChunkCacheTest, AsksForABadChunkOnceMoreThenGivesUp) {
  Manifest m = Tree("t", {{"a.bin", RandomBytes(50 << 10, 6)}});
  auto cache = Open();
  source_.corrupt = {1};
  ASSERT_TRUE(Fill(*cache, m).ok());
  EXPECT_EQ(last_.bytes_refetched, m.entries[0].chunks[0].size);

  Manifest other = Tree("u", {{"b.bin", RandomBytes(50 << 10, 7)}});
  source_.corrupt = {0};
  Status st = Fill(*cache, other);
  EXPECT_EQ(st.code(), Code::kIo);
  EXPECT_THAT(st.message(), HasSubstr(other.entries[0].chunks[0].hash));
  EXPECT_THAT(st.message(), HasSubstr("failed its check twice"));
}

TEST_F(ChunkCacheTest, SmallFilesShareTheirFetches) {
  std::vector<std::pair<std::string, std::string>> files;
  for (int i = 0; i < 100; ++i) {
    files.emplace_back(fmt::format("f{:03}.json", i), RandomBytes(2 << 10, 100 + i));
  }
  Manifest m = Tree("t", files);
  auto cache = Open();
  ASSERT_TRUE(Fill(*cache, m).ok());
  size_t chunks = 0;
  for (const ManifestEntry& e : m.entries) chunks += e.chunks.size();
  ASSERT_GT(chunks, 100u);
  EXPECT_EQ(source_.calls, static_cast<int>((chunks + 31) / 32));  // not one call a file
  EXPECT_EQ(source_.bytes, m.bytes);
  EXPECT_EQ(last_.bytes_fetched, m.bytes);
  ASSERT_TRUE(cache->Materialize(m, dir_ / "out", ::geteuid(), ::getegid()).ok());
  EXPECT_EQ(*ReadFile(dir_ / "out/f042.json"), files[42].second);
}

TEST_F(ChunkCacheTest, TwoThreadsAssembleASharedFileOnce) {
  std::string shared = RandomBytes(300 << 10, 8);
  Manifest a = Tree("a", {{"0shared.bin", shared}, {"a.bin", RandomBytes(40 << 10, 9)}});
  Manifest b = Tree("b", {{"0shared.bin", shared}, {"b.bin", RandomBytes(40 << 10, 10)}});
  auto cache = Open();
  Status sa, sb;
  std::thread ta([&] { sa = cache->Fill(a, "a", source_.Fetch(), nullptr); });
  std::thread tb([&] { sb = cache->Fill(b, "b", source_.Fetch(), nullptr); });
  ta.join();
  tb.join();
  ASSERT_TRUE(sa.ok()) << sa.message();
  ASSERT_TRUE(sb.ok()) << sb.message();
  EXPECT_EQ(source_.bytes, shared.size() + (80u << 10));
  EXPECT_EQ(cache->bytes(), shared.size() + (80u << 10));
}

TEST_F(ChunkCacheTest, ATreeStaysLinkedUntilAFileInItIsTouched) {
  std::string a = RandomBytes(30 << 10, 21);
  Manifest m = Tree("t", {{"a.bin", a}, {"sub/b.txt", "bee"}});
  auto cache = Open(/*cap=*/1);
  ASSERT_TRUE(Fill(*cache, m, "first").ok());
  ASSERT_TRUE(cache->Materialize(m, dir_ / "out", ::geteuid(), ::getegid()).ok());
  cache->Unpin("first");
  EXPECT_TRUE(cache->Linked(m, dir_ / "out", "second"));
  EXPECT_FALSE(cache->Linked(m, dir_ / "elsewhere"));
  // Pinned by Linked as by a Fill: over the cap, nothing goes.
  cache->Trim();
  EXPECT_TRUE(FileExists(CachedPath(m, 0)));
  cache->Unpin("second");
  // The same bytes and mtime, but the ctime moved: not known unchanged any more.
  ASSERT_EQ(::chmod((dir_ / "out/a.bin").c_str(), 0444), 0);
  EXPECT_FALSE(cache->Linked(m, dir_ / "out"));
  ASSERT_EQ(::unlink((dir_ / "out/sub/b.txt").c_str()), 0);
  EXPECT_FALSE(cache->Linked(m, dir_ / "out"));
}

TEST_F(ChunkCacheTest, RebuildsAFileWrittenToThroughALink) {
  std::string big = RandomBytes(30 << 10, 11);
  Manifest m = Tree("t", {{"a.bin", big}});
  auto cache = Open();
  ASSERT_TRUE(Fill(*cache, m).ok());
  ASSERT_TRUE(cache->Materialize(m, dir_ / "out", ::geteuid(), ::getegid()).ok());
  ASSERT_EQ(::chmod((dir_ / "out/a.bin").c_str(), 0644), 0);
  Write(dir_ / "out/a.bin", RandomBytes(big.size(), 12));
  timespec times[2] = {{1, 0}, {1, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (dir_ / "out/a.bin").c_str(), times, 0), 0);
  uint64_t before = source_.bytes;
  ASSERT_TRUE(Fill(*cache, m).ok());
  EXPECT_EQ(source_.bytes - before, big.size());
  ASSERT_TRUE(cache->Materialize(m, dir_ / "out2", ::geteuid(), ::getegid()).ok());
  EXPECT_EQ(*ReadFile(dir_ / "out2/a.bin"), big);
}

TEST_F(ChunkCacheTest, TrimEvictsTheLeastRecentlyUsedUnpinnedFiles) {
  Manifest a = Tree("a", {{"a.bin", RandomBytes(100 << 10, 13)}});
  Manifest b = Tree("b", {{"b.bin", RandomBytes(100 << 10, 14)}});
  auto cache = Open(150 << 10);
  ASSERT_TRUE(Fill(*cache, a, "old").ok());
  ASSERT_TRUE(Fill(*cache, b, "new").ok());
  cache->Trim();  // both pinned: nothing goes
  EXPECT_EQ(cache->bytes(), 200u << 10);
  cache->Unpin("new");
  cache->Trim();  // the older one is pinned: the newer goes
  EXPECT_EQ(cache->bytes(), 100u << 10);
  EXPECT_TRUE(FileExists(CachedPath(a, 0)));
  EXPECT_FALSE(FileExists(CachedPath(b, 0)));

  ASSERT_TRUE(Fill(*cache, b, "new").ok());
  cache->Unpin("old");
  cache->Trim();
  EXPECT_FALSE(FileExists(CachedPath(a, 0)));
  EXPECT_TRUE(FileExists(CachedPath(b, 0)));
  EXPECT_EQ(cache->MissingBytes(a), 100u << 10);
}

TEST_F(ChunkCacheTest, ReopensWithItsIndexAndDropsWhatItCannotTrust) {
  Manifest m = Tree("t", {{"a.bin", RandomBytes(50 << 10, 15)}, {"b.sh", "echo\n"}});
  {
    auto cache = Open();
    ASSERT_TRUE(Fill(*cache, m).ok());
  }
  auto reopened = Open();
  EXPECT_EQ(reopened->bytes(), m.bytes);
  EXPECT_EQ(reopened->MissingBytes(m), 0u);
  reopened.reset();
  Write(dir_ / "cache/chunks.idx", "{\"files\": {\"zz\": 3");
  auto damaged = Open();
  EXPECT_EQ(damaged->bytes(), 0u);
  EXPECT_EQ(damaged->MissingBytes(m), m.bytes);
  EXPECT_TRUE(ListFiles(dir_ / "cache/files")->empty());
  int calls = source_.calls;
  ASSERT_TRUE(Fill(*damaged, m).ok());
  EXPECT_GT(source_.calls, calls);
}

}  // namespace
}  // namespace trainq
