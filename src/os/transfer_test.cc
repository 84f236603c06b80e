#include "src/os/transfer.h"
#include "src/os/transfer_test_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/crypto/token_crypto.h"
#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using trainq::testing::TempDir;

using trainq::testing::kSmall;
using trainq::testing::RandomBytes;
using trainq::testing::Write;

std::vector<ChunkRef> ChunksOf(std::string_view data, ChunkLimits limits, size_t piece) {
  Chunker c(limits);
  for (size_t at = 0; at < data.size(); at += piece) c.Add(data.substr(at, piece));
  c.Finish();
  return c.chunks();
}

TEST(ChunkerTest, AnyPieceSizesGiveTheSameChunks) {
  std::string small = RandomBytes(1 << 20, 1);
  std::vector<ChunkRef> whole = ChunksOf(small, kSmall, small.size());
  EXPECT_GT(whole.size(), 50u);
  EXPECT_EQ(ChunksOf(small, kSmall, 1), whole);
  EXPECT_EQ(ChunksOf(small, kSmall, 7), whole);
  std::string big = RandomBytes(6 << 20, 2);
  std::vector<ChunkRef> big_whole = ChunksOf(big, {}, big.size());
  EXPECT_GT(big_whole.size(), 5u);
  EXPECT_EQ(ChunksOf(big, {}, 7), big_whole);
  EXPECT_EQ(ChunksOf(big, {}, 1 << 20), big_whole);
}

TEST(ChunkerTest, ChunksAreNamedByTheirBytesAndStayWithinTheLimits) {
  std::string data = RandomBytes(3 << 20, 3);
  std::vector<ChunkRef> chunks = ChunksOf(data, kSmall, 4096);
  uint64_t at = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].hash, Sha256Hex(std::string_view(data).substr(at, chunks[i].size)));
    EXPECT_LE(chunks[i].size, kSmall.max);
    if (i + 1 < chunks.size()) {
      EXPECT_GE(chunks[i].size, kSmall.min);
    }
    at += chunks[i].size;
  }
  EXPECT_EQ(at, data.size());
  // Bytes that never cut (all zeros) give max-sized chunks, the last one shorter.
  std::vector<ChunkRef> zeros = ChunksOf(std::string(40 << 10, '\0'), kSmall, 1000);
  ASSERT_EQ(zeros.size(), 3u);
  EXPECT_EQ(zeros[0].size, kSmall.max);
  EXPECT_EQ(zeros[2].size, (40u << 10) - 2 * kSmall.max);
  Chunker none;
  none.Finish();
  EXPECT_TRUE(none.chunks().empty());
}

TEST(ChunkerTest, AnInsertionChangesOnlyTheChunksAroundIt) {
  std::string data = RandomBytes(20 << 20, 4);
  std::string changed = data;
  changed.insert(changed.size() / 2, RandomBytes(100, 5));
  std::vector<ChunkRef> before = ChunksOf(data, {}, 1 << 20);
  std::vector<ChunkRef> after = ChunksOf(changed, {}, 1 << 20);
  std::set<std::string> old_hashes;
  for (const ChunkRef& c : before) old_hashes.insert(c.hash);
  size_t shared = 0;
  for (const ChunkRef& c : after) shared += old_hashes.count(c.hash);
  EXPECT_GE(shared * 10, after.size() * 9) << shared << " of " << after.size();
}

TEST(ChunkerTest, AverageSizeIsNearTheTarget) {
  std::string data = RandomBytes(64 << 20, 6);
  std::vector<ChunkRef> chunks = ChunksOf(data, {}, 1 << 20);
  uint64_t avg = data.size() / chunks.size();
  ChunkLimits limits;
  EXPECT_GE(avg, limits.avg / 2);
  EXPECT_LE(avg, limits.avg * 2);
}

// The gear table and masks are part of every manifest: a change here re-chunks every file
// every node holds.
TEST(ChunkerTest, BoundariesAreTheSameOnEveryBuild) {
  std::vector<ChunkRef> chunks = ChunksOf(RandomBytes(64 << 10, 7), kSmall, 1 << 20);
  std::vector<uint64_t> sizes;
  for (const ChunkRef& c : chunks) sizes.push_back(c.size);
  EXPECT_THAT(sizes, ::testing::ElementsAre(1657, 2952, 4089, 3610, 2433, 2694, 1485, 4265, 3357,
                                            4138, 6571, 3762, 4472, 2197, 6082, 3217, 2306, 1652,
                                            1159, 1541, 1194, 703));
  EXPECT_EQ(chunks[0].hash, "a3c78df3d2117721e573cb8b57dd49409d7e28746df2992ac163f436719045a6");
}

TEST(ChunkFileTest, ReadsAFileButNeitherALinkNorAFifo) {
  TempDir dir;
  std::string data = RandomBytes(300 << 10, 8);
  Write(dir / "f", data);
  Result<std::vector<ChunkRef>> chunks = ChunkFile(dir / "f", kSmall);
  ASSERT_TRUE(chunks.ok()) << chunks.status().message();
  EXPECT_EQ(*chunks, ChunksOf(data, kSmall, data.size()));
  ASSERT_EQ(::symlink((dir / "f").c_str(), (dir / "link").c_str()), 0);
  Result<std::vector<ChunkRef>> link = ChunkFile(dir / "link");
  EXPECT_EQ(link.status().code(), Code::kIo);
  EXPECT_THAT(link.status().message(), HasSubstr(dir / "link"));
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(ChunkFile(dir / "fifo").status().code(), Code::kIo);
}

// A tree of every kind of entry a manifest holds, and a fifo it does not.
class ManifestTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "tree";
    ASSERT_TRUE(MakeDirs(root_ + "/sub/deep").ok());
    ASSERT_TRUE(MakeDirs(root_ + "/d").ok());
    Write(root_ + "/a.txt", "hello\n");
    Write(root_ + "/run.sh", "#!/bin/sh\necho hi\n", 0755);
    Write(root_ + "/empty", "");
    Write(root_ + "/d/x", "x");
    Write(root_ + "/d.txt", "d");
    big_ = RandomBytes(200 << 10, 9);
    Write(root_ + "/sub/deep/c.bin", big_);
    ASSERT_EQ(::symlink("a.txt", (root_ + "/link").c_str()), 0);
    ASSERT_EQ(::mkfifo((root_ + "/fifo").c_str(), 0600), 0);
  }
  TempDir dir_;
  std::string root_, big_;
};

TEST_F(ManifestTreeTest, ListsEveryEntryInPathOrder) {
  Result<Manifest> m = MakeManifest(root_ + "/", nullptr, kSmall);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->root, root_);
  std::vector<std::string> paths;
  std::string kinds;
  for (const ManifestEntry& e : m->entries) {
    paths.push_back(e.path);
    kinds += e.kind;
  }
  EXPECT_THAT(paths, ::testing::ElementsAre("a.txt", "d", "d/x", "d.txt", "empty", "link", "run.sh",
                                            "sub", "sub/deep", "sub/deep/c.bin"));
  EXPECT_EQ(kinds, "fdffflxddf");
  EXPECT_EQ(m->entries[5].target, "a.txt");
  EXPECT_TRUE(m->entries[4].chunks.empty());
  EXPECT_EQ(m->entries[4].size, 0u);
  EXPECT_EQ(m->entries[9].size, big_.size());
  EXPECT_EQ(m->entries[9].chunks, ChunksOf(big_, kSmall, big_.size()));
  EXPECT_EQ(m->files, 6u);
  EXPECT_EQ(m->bytes, 6 + 18 + 0 + 1 + 1 + big_.size());
}

TEST_F(ManifestTreeTest, OneFileIsAManifestOfOneEntry) {
  Result<Manifest> m = MakeManifest(root_ + "/run.sh", nullptr);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->entries.size(), 1u);
  EXPECT_EQ(m->entries[0].path, "");
  EXPECT_EQ(m->entries[0].kind, 'x');
  EXPECT_EQ(m->files, 1u);
  Result<Manifest> back = ParseManifest(ManifestText(*m));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, *m);
}

TEST_F(ManifestTreeTest, RefusesARelativeMissingOrSpecialRoot) {
  EXPECT_EQ(MakeManifest("tree", nullptr).status().code(), Code::kInvalid);
  EXPECT_EQ(MakeManifest(root_ + "/nothing", nullptr).status().code(), Code::kInvalid);
  EXPECT_EQ(MakeManifest(root_ + "/fifo", nullptr).status().code(), Code::kInvalid);
  EXPECT_EQ(MakeManifest(root_ + "/link", nullptr).status().code(), Code::kInvalid);
  for (const std::string& bad : {std::string("tree"), root_ + "/nothing", root_ + "/fifo"}) {
    EXPECT_EQ(TreeFingerprint(bad).status().code(), Code::kInvalid) << bad;
  }
}

TEST_F(ManifestTreeTest, RoundTripsThroughText) {
  Result<Manifest> m = MakeManifest(root_, nullptr, kSmall);
  ASSERT_TRUE(m.ok());
  Result<Manifest> back = ParseManifest(ManifestText(*m));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, *m);
}

TEST_F(ManifestTreeTest, SourcesGiveEachChunkAndNoticeAChangedFile) {
  Result<Manifest> m = MakeManifest(root_, nullptr, kSmall);
  ASSERT_TRUE(m.ok());
  std::map<std::string, ChunkSource> sources = ChunkSources(*m);
  const ManifestEntry& big = m->entries[9];
  const ChunkRef& second = big.chunks[1];
  ASSERT_EQ(sources.count(second.hash), 1u);
  EXPECT_EQ(sources[second.hash].path, root_ + "/sub/deep/c.bin");
  EXPECT_EQ(sources[second.hash].offset, big.chunks[0].size);
  Result<std::string> data = ReadChunk(sources[second.hash], second.hash);
  ASSERT_TRUE(data.ok()) << data.status().message();
  EXPECT_EQ(*data, big_.substr(big.chunks[0].size, second.size));

  Write(root_ + "/sub/deep/c.bin", RandomBytes(big_.size(), 10));
  Result<std::string> changed = ReadChunk(sources[second.hash], second.hash);
  EXPECT_EQ(changed.status().code(), Code::kConflict);
  EXPECT_THAT(changed.status().message(),
              HasSubstr(root_ + "/sub/deep/c.bin changed since it was staged (chunk at offset " +
                        std::to_string(big.chunks[0].size) + ")"));
  ASSERT_EQ(::unlink((root_ + "/sub/deep/c.bin").c_str()), 0);
  EXPECT_EQ(ReadChunk(sources[second.hash], second.hash).status().code(), Code::kIo);
}

void SetMtime(const std::string& path, int64_t sec) {
  timespec times[2] = {{sec, 0}, {sec, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST_F(ManifestTreeTest, ChunkMemoReadsOnlyChangedFiles) {
  std::string memo_path = dir_ / "memo.json";
  ChunkMemo first(memo_path);
  Result<Manifest> m = MakeManifest(root_, &first, kSmall);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(first.bytes_read(), m->bytes);
  ASSERT_TRUE(first.Save().ok());

  ChunkMemo second(memo_path);
  Result<Manifest> again = MakeManifest(root_, &second, kSmall);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(second.bytes_read(), 0u);
  EXPECT_EQ(*again, *m);
  ASSERT_TRUE(second.Save().ok());

  Write(root_ + "/a.txt", "changed!\n");
  SetMtime(root_ + "/a.txt", 1'000'000);
  ChunkMemo third(memo_path);
  Result<Manifest> changed = MakeManifest(root_, &third, kSmall);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(third.bytes_read(), 9u);
  EXPECT_EQ(changed->entries[0].size, 9u);
  // Other limits make other chunks: nothing remembered for them.
  ChunkMemo fourth(memo_path);
  ASSERT_TRUE(MakeManifest(root_, &fourth).ok());
  EXPECT_EQ(fourth.bytes_read(), m->bytes + 3);
}

TEST_F(ManifestTreeTest, AFingerprintChangesWithAnyEntryAndOnlyThen) {
  Result<std::string> print = TreeFingerprint(root_);
  ASSERT_TRUE(print.ok()) << print.status().message();
  EXPECT_EQ(*TreeFingerprint(root_ + "/"), *print);
  EXPECT_NE(*TreeFingerprint(root_ + "/sub"), *print);
  std::vector<std::string> seen = {*print};
  auto changed = [&](const std::string& what) {
    Result<std::string> now = TreeFingerprint(root_);
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(std::count(seen.begin(), seen.end(), *now), 0) << what;
    seen.push_back(*now);
  };
  // The same size, its mtime put back: the ctime still moved.
  struct stat st = {};
  ASSERT_EQ(::stat((root_ + "/a.txt").c_str(), &st), 0);
  Write(root_ + "/a.txt", "HELLO\n");
  timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root_ + "/a.txt").c_str(), times, 0), 0);
  changed("a.txt rewritten");
  ASSERT_EQ(::unlink((root_ + "/link").c_str()), 0);
  ASSERT_EQ(::symlink("d.txt", (root_ + "/link").c_str()), 0);
  changed("link retargeted");
  Write(root_ + "/sub/deep/new", "");
  changed("a file added");
  ASSERT_EQ(::chmod((root_ + "/run.sh").c_str(), 0644), 0);
  changed("a mode changed");
  EXPECT_EQ(*TreeFingerprint(root_), seen.back());
  EXPECT_EQ(TreeFingerprint(dir_ / "missing").status().code(), Code::kInvalid);
}

TEST_F(ManifestTreeTest, ChunkMemoKeepsWhatATreeKnownUnchangedHolds) {
  std::string memo_path = dir_ / "memo.json";
  ASSERT_TRUE(MakeDirs(dir_ / "other").ok());
  Write(dir_ / "other/o.txt", "other");
  ChunkMemo first(memo_path);
  ASSERT_TRUE(MakeManifest(root_, &first, kSmall).ok());
  ASSERT_TRUE(first.Save().ok());
  // The next submit finds root_ unchanged (Keep) and walks only `other`.
  ChunkMemo second(memo_path);
  second.Keep(root_);
  ASSERT_TRUE(MakeManifest(dir_ / "other", &second, kSmall).ok());
  ASSERT_TRUE(second.Save().ok());
  ChunkMemo third(memo_path);
  ASSERT_TRUE(MakeManifest(root_, &third, kSmall).ok());
  EXPECT_EQ(third.bytes_read(), 0u);
  // Without Keep, what was not asked for is forgotten.
  ChunkMemo fourth(memo_path);
  ASSERT_TRUE(MakeManifest(dir_ / "other", &fourth, kSmall).ok());
  Write(dir_ / "other/p.txt", "p");
  ASSERT_TRUE(MakeManifest(dir_ / "other", &fourth, kSmall).ok());
  ASSERT_TRUE(fourth.Save().ok());
  ChunkMemo fifth(memo_path);
  Result<Manifest> m = MakeManifest(root_, &fifth, kSmall);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(fifth.bytes_read(), m->bytes);
}

TEST_F(ManifestTreeTest, MatchesListFilesAndDirectoriesButNoLink) {
  Result<Manifest> m = MakeManifestOfMatches(root_, {"*.txt", "sub", "link", "nothing*"}, kSmall);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<std::string> paths;
  for (const ManifestEntry& e : m->entries) paths.push_back(e.path);
  EXPECT_THAT(paths, ::testing::ElementsAre("a.txt", "d.txt", "sub", "sub/deep", "sub/deep/c.bin"));
  EXPECT_EQ(m->files, 3u);
}

TEST_F(ManifestTreeTest, MatchesForAUserAreOnlyThatUsersFiles) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give files away";
  const uid_t user = 65534;  // nobody
  ASSERT_EQ(::chown((root_ + "/a.txt").c_str(), user, user), 0);
  ASSERT_EQ(::chown((root_ + "/sub/deep/c.bin").c_str(), user, user), 0);
  // A directory link a job left, leading to files that are not its user's: not followed
  // into the list, whatever the pattern reaches through it.
  ASSERT_TRUE(MakeDirs(dir_ / "elsewhere").ok());
  Write(dir_ / "elsewhere/secret.txt", "root's");
  ASSERT_EQ(::symlink((dir_ / "elsewhere").c_str(), (root_ + "/out").c_str()), 0);
  Result<Manifest> m = MakeManifestOfMatches(root_, {"*.txt", "sub", "out/*", "out"}, kSmall, user);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<std::string> files;
  for (const ManifestEntry& e : m->entries) {
    if (e.kind == 'f' || e.kind == 'x') files.push_back(e.path);
  }
  EXPECT_THAT(files, ::testing::ElementsAre("a.txt", "sub/deep/c.bin"));
  EXPECT_EQ(m->files, 2u);
}

TEST_F(ManifestTreeTest, ChunkMemoSurvivesADamagedFile) {
  std::string memo_path = dir_ / "memo.json";
  for (const std::string& junk :
       {std::string("{\"files\": {\"/x\": [1,"), std::string("\x01\x02"),
        std::string("{\"files\": {\"" + root_ +
                    "/a.txt\": {\"size\": 6, \"chunks\": [[\"zz\", 6]]}}}")}) {
    Write(memo_path, junk);
    ChunkMemo memo(memo_path);
    Result<Manifest> m = MakeManifest(root_, &memo, kSmall);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(memo.bytes_read(), m->bytes);
  }
}

// ---- ParseManifest's refusals: one case each ----

const std::string kHash(64, 'a');

struct Refusal {
  const char* name;
  std::string text;
  std::string expect;  // in the message
};

class ManifestRefusalTest : public ::testing::TestWithParam<Refusal> {};

std::string Doc(const std::string& entries) {
  return R"({"root": "/r", "entries": [)" + entries + "]}";
}
std::string FileEntry(const std::string& path, uint64_t size, const std::string& chunks) {
  return R"({"path": ")" + path + R"(", "kind": "f", "size": )" + std::to_string(size) +
         R"(, "chunks": [)" + chunks + "]}";
}
std::string Chunk(const std::string& hash, uint64_t size) {
  return "[\"" + hash + "\", " + std::to_string(size) + "]";
}

TEST_P(ManifestRefusalTest, NamesTheProblem) {
  Result<Manifest> m = ParseManifest(GetParam().text);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kInvalid);
  EXPECT_THAT(m.status().message(), HasSubstr(GetParam().expect));
}

INSTANTIATE_TEST_SUITE_P(
    ManifestRefusal, ManifestRefusalTest,
    ::testing::Values(
        Refusal{"NotJson", "{\"root\": ", "not a JSON object"},
        Refusal{"RelativeRoot", R"({"root": "r", "entries": []})", "root is not an absolute path"},
        Refusal{"NoEntries", R"({"root": "/r"})", "entries is not an array"},
        Refusal{"AbsolutePath", Doc(R"({"path": "/a", "kind": "d"})"),
                "entry 0 (\"/a\"): path is absolute"},
        Refusal{"EmptyPart", Doc(R"({"path": "a", "kind": "d"}, {"path": "a//b", "kind": "d"})"),
                "entry 1 (\"a//b\"): path has an empty part"},
        Refusal{"DotPart", Doc(R"({"path": "a", "kind": "d"}, {"path": "a/.", "kind": "d"})"),
                "entry 1 (\"a/.\"): path has a \".\" part"},
        Refusal{"DotDotPart", Doc(R"({"path": "..", "kind": "d"})"),
                "entry 0 (\"..\"): path has a \"..\" part"},
        Refusal{"NulInPath", Doc(R"({"path": "a\u0000b", "kind": "d"})"), "NUL"},
        Refusal{"PathTwice", Doc(R"({"path": "a", "kind": "d"}, {"path": "a", "kind": "d"})"),
                "entry 1 (\"a\"): path appears twice"},
        Refusal{"OutOfOrder", Doc(R"({"path": "b", "kind": "d"}, {"path": "a", "kind": "d"})"),
                "entry 1 (\"a\"): out of order (after \"b\")"},
        Refusal{"BelowAFile", Doc(FileEntry("a", 0, "") + R"(, {"path": "a/b", "kind": "d"})"),
                "entry 1 (\"a/b\"): is below \"a\", which is not a directory"},
        Refusal{"BelowNothing", Doc(R"({"path": "a/b", "kind": "d"})"),
                "entry 0 (\"a/b\"): is below \"a\", which is not listed before it"},
        Refusal{"UnknownKind", Doc(R"({"path": "a", "kind": "s"})"),
                "entry 0 (\"a\"): kind is not one of f, x, l, d"},
        Refusal{"UppercaseHash", Doc(FileEntry("a", 3, Chunk(std::string(64, 'A'), 3))),
                "entry 0 (\"a\"): chunk 0: hash is not 64 lowercase hex digits"},
        Refusal{"ShortHash", Doc(FileEntry("a", 3, Chunk("abc", 3))),
                "chunk 0: hash is not 64 lowercase hex digits"},
        Refusal{"SizesDoNotAddUp", Doc(FileEntry("a", 10, Chunk(kHash, 4) + "," + Chunk(kHash, 5))),
                "entry 0 (\"a\"): chunk sizes do not add up to its size 10"},
        Refusal{
            "SizesOverflow",
            Doc(FileEntry("a", 1, Chunk(kHash, 18446744073709551615ull) + "," + Chunk(kHash, 2))),
            "chunk sizes do not add up"},
        Refusal{"EmptyChunk", Doc(FileEntry("a", 0, Chunk(kHash, 0))),
                "entry 0 (\"a\"): chunk 0 has 0 bytes"},
        Refusal{"ChunkNotAPair", Doc(FileEntry("a", 1, "[1]")), "chunk 0 is not [hash, size]"},
        Refusal{"NegativeSize", Doc(R"({"path": "a", "kind": "f", "size": -1, "chunks": []})"),
                "size is not a number of bytes"},
        Refusal{"LinkWithoutTarget", Doc(R"({"path": "a", "kind": "l"})"),
                "a link without a target"},
        Refusal{"DirectoryWithSize", Doc(R"({"path": "a", "kind": "d", "size": 3})"), "not a file"},
        Refusal{"RootBesideOthers", Doc(FileEntry("", 0, "") + R"(, {"path": "b", "kind": "d"})"),
                "an empty path (the root itself) beside other entries"},
        Refusal{"RootAsDirectory", Doc(R"({"path": "", "kind": "d"})"),
                "an empty path that is not a file"},
        Refusal{"EntryNotAnObject", Doc("3"), "entry 0: not an object with a path"}),
    [](const ::testing::TestParamInfo<Refusal>& info) { return std::string(info.param.name); });

TEST(ManifestTest, ReportsEveryProblemAtOnceAndCountsFilesItself) {
  Result<Manifest> bad =
      ParseManifest(Doc(R"({"path": "/a", "kind": "d"}, {"path": "b", "kind": "q"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("entry 0 (\"/a\")"));
  EXPECT_THAT(bad.status().message(), HasSubstr("entry 1 (\"b\")"));

  std::string text = R"({"root": "/r", "bytes": 999, "files": 7, "entries": [)" +
                     FileEntry("a", 7, Chunk(kHash, 3) + "," + Chunk(kHash, 4)) + "," +
                     R"({"path": "b", "kind": "x", "size": 2, "chunks": [)" +
                     Chunk(std::string(64, 'b'), 2) + "]}," +
                     R"({"path": "c", "kind": "l", "target": "../x"}]})";
  Result<Manifest> m = ParseManifest(text);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->bytes, 9u);
  EXPECT_EQ(m->files, 2u);
  EXPECT_EQ(m->entries[2].target, "../x");
  Result<Manifest> back = ParseManifest(ManifestText(*m));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *m);
  EXPECT_TRUE(ParseManifest(Doc("")).ok());  // an empty directory
}

TEST(ManifestTest, FileIdIsTheContentOnly) {
  ManifestEntry a{.path = "a", .kind = 'f', .target = "", .size = 3, .chunks = {{kHash, 3}}};
  ManifestEntry b{.path = "b/c", .kind = 'x', .target = "", .size = 3, .chunks = {{kHash, 3}}};
  EXPECT_EQ(FileId(a), FileId(b));
  EXPECT_EQ(FileId(a).size(), 64u);
  b.chunks.push_back({kHash, 1});
  EXPECT_NE(FileId(a), FileId(b));
}

}  // namespace
}  // namespace trainq
