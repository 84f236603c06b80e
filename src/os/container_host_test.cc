// How a node reads an image archive's kind and names, and lists the images in its store.
#include "src/os/container_host.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

#include <fmt/format.h>

#include "src/os/fd.h"
#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;
using testing::WaitUntil;

// A tar of `files` (name, text), as `podman save` lays its index files out.
std::string Tar(const TempDir& dir, const std::string& name,
                const std::vector<std::pair<std::string, std::string>>& files) {
  std::string root = dir / (name + ".d");
  EXPECT_EQ(::mkdir(root.c_str(), 0755), 0);
  for (const auto& [file, text] : files) EXPECT_TRUE(WriteFileAtomic(root + "/" + file, text).ok());
  std::string tar = dir / (name + ".tar");
  std::string cmd = "tar -C " + root + " -cf " + tar + " .";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return tar;
}

TEST(ImageArchiveTest, ADockerArchiveNamesItsRepoTagsAnOciArchiveItsRefNames) {
  TempDir dir;
  std::string docker =
      Tar(dir, "docker",
          {{"layer.tar", std::string(3000, 'x')},
           {"manifest.json", R"([{"Config":"c.json","RepoTags":["localhost/env:3","env:latest"],)"
                             R"("Layers":["layer.tar"]}])"}});
  Result<ImageArchive> a = ReadImageArchive(docker);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->transport, "docker-archive");
  EXPECT_THAT(a->names, ElementsAre("localhost/env:3", "env:latest"));
  std::string oci =
      Tar(dir, "oci",
          {{"oci-layout", R"({"imageLayoutVersion":"1.0.0"})"},
           {"index.json", R"({"schemaVersion":2,"manifests":[{"annotations":)"
                          R"({"org.opencontainers.image.ref.name":"localhost/env:3"}}]})"}});
  a = ReadImageArchive(oci);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->transport, "oci-archive");
  EXPECT_THAT(a->names, ElementsAre("localhost/env:3"));
  // An archive without names (saved by id) still runs; it only gives placement nothing.
  a = ReadImageArchive(Tar(dir, "bare", {{"manifest.json", "[{}]"}}));
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->names.empty());
  std::string plain = dir / "plain.tar";
  ASSERT_TRUE(WriteFileAtomic(plain, "not a tar").ok());
  EXPECT_THAT(ReadImageArchive(plain).status().message(), HasSubstr("is not a tar archive"));
}

// ReadImageArchive on a thread, waited for at most 2 s: one that blocks fails the test (and is
// let go by a writer, so the test ends) instead of hanging it.
Result<ImageArchive> ReadWithin(const std::string& path) {
  std::promise<Result<ImageArchive>> done;
  std::future<Result<ImageArchive>> result = done.get_future();
  std::thread([&done, path] { done.set_value(ReadImageArchive(path)); }).detach();
  if (result.wait_for(std::chrono::seconds(2)) == std::future_status::ready) return result.get();
  ADD_FAILURE() << "reading " << path << " blocked";
  UniqueFd writer(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  return result.get();
}

TEST(ImageArchiveTest, WhatIsNotARegularFileIsRefusedAtOnceNamingWhatItIs) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo.tar").c_str(), 0644), 0);
  ASSERT_EQ(::symlink("/dev/zero", (dir / "link.tar").c_str()), 0);
  ASSERT_EQ(::mkdir((dir / "dir.tar").c_str(), 0755), 0);
  for (const auto& [path, what] : std::vector<std::pair<std::string, std::string>>{
           {dir / "fifo.tar", "is a FIFO (named pipe)"},
           {"/dev/zero", "is a character device"},
           {dir / "link.tar", "is a symbolic link"},
           {dir / "dir.tar", "is a directory"},
           {dir / "none.tar", "does not exist"}}) {
    Result<ImageArchive> a = ReadWithin(path);
    EXPECT_EQ(a.status().code(), Code::kInvalid) << path;
    EXPECT_THAT(a.status().message(), HasSubstr("--image: " + path + " " + what));
    EXPECT_THAT(a.status().message(), HasSubstr("give a `podman save`/`docker save` tar"));
  }
}

// A header of ustar entry `name` with `size` bytes, as tar writes one.
std::string Header(const std::string& name, uint64_t size) {
  std::string h(512, '\0');
  name.copy(h.data(), std::min<size_t>(name.size(), 99));
  std::string octal = fmt::format("{:011o}", size);
  octal.copy(h.data() + 124, octal.size());
  std::string magic = "ustar";
  magic.copy(h.data() + 257, magic.size());
  return h;
}

TEST(ImageArchiveTest, AHugeFileOrOneOfEndlessEntriesIsReadOnlyInPart) {
  TempDir dir;
  // 50 GiB of nothing (sparse): no tar.
  std::string sparse = dir / "sparse.tar";
  UniqueFd fd(::open(sparse.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_EQ(::ftruncate(fd.get(), off_t{50} << 30), 0);
  EXPECT_THAT(ReadWithin(sparse).status().message(), HasSubstr(sparse + " is not a tar archive"));
  // One entry that says it holds 40 GiB, then the hole: read as an archive of one entry.
  std::string header = Header("layer.tar", uint64_t{40} << 30);
  ASSERT_EQ(::pwrite(fd.get(), header.data(), header.size(), 0), 512);
  Result<ImageArchive> a = ReadWithin(sparse);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->names.empty());
  // Empty entries, then the index: found after 100, never looked for after 10,000.
  auto entries_then_index = [&dir](int n) {
    std::string tar;
    for (int i = 0; i < n; ++i) tar += Header(fmt::format("f{}", i), 0);
    std::string index = R"([{"RepoTags":["localhost/late:1"]}])";
    tar += Header("manifest.json", index.size()) + index;
    tar.resize((tar.size() + 511) / 512 * 512 + 1024, '\0');
    std::string path = dir / fmt::format("entries{}.tar", n);
    EXPECT_TRUE(WriteFileAtomic(path, tar).ok());
    return ReadWithin(path);
  };
  a = entries_then_index(100);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_THAT(a->names, ElementsAre("localhost/late:1"));
  a = entries_then_index(10000);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->names.empty());
}

TEST(ImageCensusTest, ListsTheStoresNamedImagesInTheBackground) {
  EXPECT_THAT(ParseImageList("localhost/b:1\n<none>:<none>\nlocalhost/a:2\nlocalhost/b:1\n\n"),
              ElementsAre("localhost/a:2", "localhost/b:1"));
  TempDir dir;
  std::string runtime = dir / "podman";
  ASSERT_TRUE(WriteFileAtomic(runtime,
                              "#!/bin/sh\n[ \"$1\" = images ] || exit 1\n"
                              "cat " +
                                  dir / "list" + "\n")
                  .ok());
  ASSERT_EQ(::chmod(runtime.c_str(), 0755), 0);
  ASSERT_TRUE(WriteFileAtomic(dir / "list", "localhost/env:3\n").ok());
  ImageCensus census(runtime, std::chrono::milliseconds(50));
  EXPECT_TRUE(
      WaitUntil([&] { return census.Names() == std::vector<std::string>{"localhost/env:3"}; }));
  ASSERT_TRUE(WriteFileAtomic(dir / "list", "localhost/env:3\nlocalhost/env:4\n").ok());
  EXPECT_TRUE(WaitUntil([&] { return census.Names().size() == 2; }));
}

TEST(SimulatedCdiTest, WritesTheSpecAndItsFilesForEveryUserAndOnlyWhatChanged) {
  TempDir dir;
  SimulatedCdiPlaces places{dir / "run/cdi", dir / "run/sims"};
  std::vector<SimulatedGpu> gpus = {{0, "GPU-sim-0", "Sim"}, {1, "GPU-sim-1", "Sim"}};
  Result<std::string> kind = WriteSimulatedGpuCdi("/state/a", gpus, places);
  ASSERT_TRUE(kind.ok()) << kind.status().ToString();
  EXPECT_EQ(*kind, SimulatedCdiKind("/state/a"));
  std::string id = kind->substr(0, kind->find('.'));
  std::string spec = places.spec_dir + "/trainq-" + id + ".json";
  std::string files = places.files_root + "/" + id;
  auto mode = [](const std::string& path) {
    struct stat st = {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  };
  // Read by each user's rootless podman, whatever the daemon's umask.
  EXPECT_EQ(mode(spec), 0644u);
  EXPECT_EQ(mode(files), 0755u);
  EXPECT_EQ(mode(files + "/nvidia-smi"), 0755u);
  EXPECT_EQ(mode(files + "/0001"), 0644u);
  EXPECT_EQ(*ReadFile(files + "/0001"), "GPU-sim-1 Sim\n");
  EXPECT_EQ(*ReadFile(spec), *SimulatedCdiSpec(*kind, gpus, files));
  // A second job's start rewrites nothing; a GPU gone from the file goes from the spec.
  struct stat before = {}, after = {};
  ASSERT_EQ(::stat(spec.c_str(), &before), 0);
  ASSERT_TRUE(WriteSimulatedGpuCdi("/state/a", gpus, places).ok());
  ASSERT_EQ(::stat(spec.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  ASSERT_TRUE(WriteSimulatedGpuCdi("/state/a", {gpus[0]}, places).ok());
  EXPECT_THAT(*ListFiles(files), ElementsAre("0000", "nvidia-smi"));
  EXPECT_THAT(*ReadFile(spec), Not(HasSubstr("GPU-sim-1")));
  RemoveSimulatedGpuCdi("/state/a", places);
  EXPECT_FALSE(FileExists(spec));
  EXPECT_FALSE(FileExists(files + "/0000"));
}

TEST(SimulatedCdiTest, SaysWhatItCannotWrite) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir / "file", "").ok());
  SimulatedCdiPlaces places{dir / "file/cdi", dir / "sims"};
  Result<std::string> kind = WriteSimulatedGpuCdi("/state/a", {{0, "GPU-sim-0", ""}}, places);
  ASSERT_FALSE(kind.ok());
  EXPECT_EQ(kind.status().code(), Code::kUnavailable);
  EXPECT_THAT(kind.status().message(), HasSubstr("cannot write " + dir / "file/cdi"));
  kind = WriteSimulatedGpuCdi("/state/a", {{0, "GPU sim", ""}}, places);
  EXPECT_THAT(kind.status().message(), HasSubstr("gpus[0].uuid"));
}

TEST(RootlessPauseTest, AliveOnlyWhenThePidFileNamesTheUsersLivePauseProcess) {
  TempDir dir;
  uid_t me = ::getuid();
  std::string pid_dir = dir / fmt::format("tmp/podman-run-{}/libpod/tmp", me);
  ASSERT_TRUE(MakeDirs(pid_dir).ok());
  EXPECT_FALSE(RootlessPauseAlive(me, dir.path()));  // no pid file yet
  // A pause process: a program named catatonit, as podman's is.
  std::string catatonit = dir / "catatonit";
  ASSERT_EQ(::symlink("/bin/sleep", catatonit.c_str()), 0);
  pid_t pause = ::fork();
  if (pause == 0) {
    ::execl(catatonit.c_str(), "catatonit", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pause, 0);
  ASSERT_TRUE(
      WaitUntil([&] { return *ReadFile(fmt::format("/proc/{}/comm", pause)) == "catatonit\n"; }));
  ASSERT_TRUE(WriteFileAtomic(pid_dir + "/pause.pid", std::to_string(pause)).ok());
  EXPECT_TRUE(RootlessPauseAlive(me, dir.path()));
  EXPECT_FALSE(RootlessPauseAlive(me + 1, dir.path()));  // another user's pid file
  // A pid that is not a pause process (this test), or one that is gone.
  ASSERT_TRUE(WriteFileAtomic(pid_dir + "/pause.pid", std::to_string(::getpid())).ok());
  EXPECT_FALSE(RootlessPauseAlive(me, dir.path()));
  ASSERT_TRUE(WriteFileAtomic(pid_dir + "/pause.pid", std::to_string(pause)).ok());
  ::kill(pause, SIGKILL);
  ::waitpid(pause, nullptr, 0);
  EXPECT_FALSE(RootlessPauseAlive(me, dir.path()));
  // A FIFO where the pid file should be holds nothing up.
  ASSERT_TRUE(RemoveFile(pid_dir + "/pause.pid").ok());
  ASSERT_EQ(::mkfifo((pid_dir + "/pause.pid").c_str(), 0600), 0);
  EXPECT_FALSE(RootlessPauseAlive(me, dir.path()));
}

}  // namespace
}  // namespace trainq
