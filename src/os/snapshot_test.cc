#include "src/os/snapshot.h"

#include <sys/stat.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using trainq::testing::ReadAll;
using trainq::testing::TempDir;

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A git work tree with a commit, a change, an untracked file and an ignored one.
class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> found = FindOnPath("git");
    ASSERT_TRUE(found.ok()) << "git is needed (scripts/deps.sh installs it)";
    git_ = *found;
    root_ = dir_ / "proj";
    ASSERT_TRUE(MakeDirs(root_ + "/src").ok());
    Git({"init", "-q", "-b", "main"});
    Write(root_ + "/train.py", "print('train')\n");
    Write(root_ + "/src/model.py", "x = 1\n");
    Write(root_ + "/src/copy.py", "print('train')\n");  // the same bytes as train.py
    Write(root_ + "/.gitignore", "data/\n");
    Git({"add", "."});
    Git({"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first"});
    Write(root_ + "/src/model.py", "x = 2\n");  // uncommitted
    Write(root_ + "/notes.txt", "untracked, not ignored\n");
    ASSERT_TRUE(MakeDirs(root_ + "/data").ok());
    Write(root_ + "/data/big.bin", "ignored");
  }
  void Git(std::vector<std::string> args) {
    std::vector<std::string> argv = {git_, "-C", root_};
    argv.insert(argv.end(), args.begin(), args.end());
    Result<CommandOutput> out = RunCommand(argv);
    ASSERT_TRUE(out.ok() && out->exit_code == 0) << (out.ok() ? out->output : "");
  }
  static ino_t Inode(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  }

  TempDir dir_;
  std::string git_, root_;
};

TEST_F(SnapshotTest, ReadsWhatGitTracksAndWhatItDoesNotIgnore) {
  Result<GitState> g = ReadGitState(root_ + "/src");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->root, root_);
  EXPECT_EQ(g->commit.size(), 40u);
  EXPECT_EQ(g->branch, "main");
  EXPECT_TRUE(g->dirty);
  EXPECT_THAT(g->diff, HasSubstr("+x = 2"));
  std::vector<std::string> names;
  for (const SnapshotFile& f : g->files) names.push_back(f.path);
  EXPECT_THAT(names, ::testing::ElementsAre(".gitignore", "notes.txt", "src/copy.py",
                                            "src/model.py", "train.py"));
}

TEST_F(SnapshotTest, StoresEachContentOnceAndASecondSnapshotNothing) {
  Result<GitState> g = ReadGitState(root_);
  ASSERT_TRUE(g.ok());
  std::string store = dir_ / "store";
  Result<SnapshotResult> first = MakeSnapshot(*g, store);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->files, 5u);
  Result<std::string> model = ReadFile(first->dir + "/src/model.py");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(*model, "x = 2\n");  // the tree as it is, uncommitted change included
  EXPECT_FALSE(FileExists(first->dir + "/data/big.bin"));
  // Identical files share one stored object: one inode.
  EXPECT_NE(Inode(first->dir + "/train.py"), 0u);
  EXPECT_EQ(Inode(first->dir + "/src/copy.py"), Inode(first->dir + "/train.py"));
  EXPECT_NE(Inode(first->dir + "/src/model.py"), Inode(first->dir + "/train.py"));
  Result<std::vector<std::string>> objects = ListFiles(store + "/objects");
  ASSERT_TRUE(objects.ok());
  EXPECT_EQ(objects->size(), 5u);  // 4 distinct contents (train.py = copy.py), the diff
  EXPECT_FALSE(first->diff_sha256.empty());
  EXPECT_EQ(*ReadFile(first->diff_path), g->diff);

  Result<SnapshotResult> second = MakeSnapshot(*g, store);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->id, first->id);
  EXPECT_NE(second->dir, first->dir);  // each submit gets its own tree for its outputs
  EXPECT_EQ(second->bytes_stored, 0u);
  EXPECT_EQ(Inode(second->dir + "/train.py"), Inode(first->dir + "/train.py"));
  EXPECT_EQ(ListFiles(store + "/objects")->size(), 5u);

  Write(root_ + "/train.py", "print('changed')\n");  // the tree moves on; the copy does not
  EXPECT_EQ(*ReadFile(first->dir + "/train.py"), "print('train')\n");
  Result<GitState> g2 = ReadGitState(root_);
  Result<SnapshotResult> third = MakeSnapshot(*g2, store);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(third->id, first->id);
  EXPECT_EQ(third->bytes_stored, std::string("print('changed')\n").size());
}

TEST_F(SnapshotTest, IgnoredTopLevelDirectoriesAndNamedPathsAreLinksToTheWorkTree) {
  Write(root_ + "/run.log", "an ignored file, not a directory");
  Write(root_ + "/.gitignore", "data/\n*.log\nckpt/\n");
  Result<GitState> g = ReadGitState(root_);
  ASSERT_TRUE(g.ok()) << g.status().message();
  // ckpt/ is ignored but absent; run.log is a file: only data/ is an ignored directory.
  EXPECT_EQ(g->ignored_dirs, std::vector<std::string>{"data"});
  std::vector<std::string> links = g->ignored_dirs;
  links.insert(links.end(), {"outputs/runs", "src", "../escape"});
  Result<SnapshotResult> snap = MakeSnapshot(*g, dir_ / "store", links);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  // The dataset is read where it is; a named path missing from the work tree is made there.
  EXPECT_EQ(ReadAll(snap->dir + "/data/big.bin"), "ignored");
  EXPECT_TRUE(IsDirectory(root_ + "/outputs/runs"));
  Write(snap->dir + "/outputs/runs/ckpt.pt", "weights");
  EXPECT_EQ(ReadAll(root_ + "/outputs/runs/ckpt.pt"), "weights");
  // What the snapshot holds (src/) stays a copy; a path out of the tree is never linked.
  struct stat st;
  ASSERT_EQ(::lstat((snap->dir + "/src").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_FALSE(FileExists(dir_ / "escape"));
  using Link = std::pair<std::string, std::string>;
  EXPECT_EQ(snap->links, (std::vector<Link>{{"data", root_ + "/data"},
                                            {"outputs/runs", root_ + "/outputs/runs"}}));
}

TEST(SnapshotLinkTest, OnlyPathsInsideTheTree) {
  for (const char* ok : {"data", "outputs/runs", ".cache", "a.b"}) {
    EXPECT_TRUE(ValidSnapshotLink(ok)) << ok;
  }
  for (const char* bad :
       {"", "/data", "data/", "../x", "a/../b", "./a", "a//b", ".git", "a/.git"}) {
    EXPECT_FALSE(ValidSnapshotLink(bad)) << bad;
  }
}

TEST_F(SnapshotTest, ADirectoryOutsideGitIsRefusedNamingTheOption) {
  Result<GitState> g = ReadGitState(dir_.path());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kInvalid);
  EXPECT_THAT(g.status().message(), HasSubstr("--snapshot"));
  EXPECT_THAT(g.status().message(), HasSubstr("not in a git work tree"));
}

}  // namespace
}  // namespace trainq
