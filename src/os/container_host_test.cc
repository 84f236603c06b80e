// How a node reads an image archive's kind and names, and lists the images in its store.
#include "src/os/container_host.h"

#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
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

}  // namespace
}  // namespace trainq
