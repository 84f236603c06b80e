// What a node runs container jobs with (docs/containers.md): the runtime program, and how an
// image archive is read. OS touches only; the command line is src/core/container.h's.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "src/os/users.h"
#include "trainq/status.h"

namespace trainq {

struct ContainerRuntime {
  std::string path;  // absolute
  bool podman = true;
};

// The runtime `setting` (config container_runtime) names: "podman", "docker", or "" for podman
// where it is installed, else docker. kUnavailable saying what to install when none is found.
Result<ContainerRuntime> FindContainerRuntime(const std::string& setting);

// How the runtime reads the archive at `path`: "oci-archive" for an OCI layout (an
// `oci-layout` entry), "docker-archive" for `docker save`/`podman save` tars. kInvalid naming
// the path when it is missing or not a tar archive.
Result<std::string> ImageArchiveTransport(const std::string& path, const UserInfo* as = nullptr);

// An archive's transport (as above) and the image names it holds (docker-archive's RepoTags,
// an OCI index's ref.name annotations), which the runtime names the image by once loaded.
// Opened with OpenUserFile (as `as`, if given): a FIFO, a device, a link or a directory is
// refused at once, naming what it is. At most the first 4096 entries' headers and two index
// files of up to 1 MiB are read, whatever the archive's size, so it may be read on the loop.
// kInvalid "--image: ..." saying what is wrong and what is accepted.
struct ImageArchive {
  std::string transport;
  std::vector<std::string> names;
};
Result<ImageArchive> ReadImageArchive(const std::string& path, const UserInfo* as = nullptr);

// The image names in this node's container store ("localhost/env:3"), listed by the runtime
// (`images`) on a thread of its own every `every`, for a cluster's placement
// (docs/containers.md, "In a cluster"). Empty until the first listing answers.
class ImageCensus {
 public:
  explicit ImageCensus(std::string runtime,
                       std::chrono::milliseconds every = std::chrono::seconds(15));
  ~ImageCensus();
  ImageCensus(const ImageCensus&) = delete;
  ImageCensus& operator=(const ImageCensus&) = delete;
  std::vector<std::string> Names() const;
  // nullopt until a listing answered: "holds nothing" and "not known yet" differ.
  std::optional<std::vector<std::string>> Listing() const;

 private:
  std::string runtime_;
  std::chrono::milliseconds every_;
  mutable std::mutex mu_;
  std::optional<std::vector<std::string>> names_;
  std::jthread thread_;
};

// What `RUNTIME images` lists, one "REPOSITORY:TAG" a line, less untagged images.
std::vector<std::string> ParseImageList(std::string_view text);

}  // namespace trainq
